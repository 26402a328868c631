"""CPU per partition batch through the real Producer and Sender, with no broker and no sockets.

The producer is built as the Sender tests build it (``tests/support/producer_rig.py``): the
scripted client answers every Produce request at once and the clock is a fake one, so what is
measured is the Python work of the record path alone: ``send()`` on the caller's side, then
the Sender's ready, drain, close (header and CRC), request building, response handling,
completion and freeing, for ``--records-per-batch`` records in each of ``--partitions``
partitions per round. Encoding the request to bytes and the socket I/O are not in it (the
scripted client takes the request object); ``benchmarks/compare.py --keys`` measures the whole.

Prints CPU µs per batch, split into the caller's ``send()`` calls and the Sender's loops (which
include the scripted client making its answers), the share of it the cyclic garbage collector
took (its pauses, from ``gc.callbacks``), and, with ``--profile``, the functions by own time
(cProfile).

    .venv/bin/python benchmarks/batch_cost.py                      # 1,000 partitions, 3 records a batch
    .venv/bin/python benchmarks/batch_cost.py --profile 25
    KPRODUCER_PURE_PYTHON=1 .venv/bin/python benchmarks/batch_cost.py
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.support.mock_client import produce_response  # noqa: E402
from tests.support.producer_rig import ProducerRig  # noqa: E402

from kproducer.murmur2 import partition_for_key  # noqa: E402
from kproducer.network.protocol import ApiKey  # noqa: E402


class _CollectorTime:
    """Seconds the cyclic garbage collector ran (``gc.callbacks``), part of the CPU time measured."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.seconds += time.perf_counter() - self._start


class _Discarded(list):  # type: ignore[type-arg]
    """A list that keeps nothing appended to it."""

    def append(self, item: object) -> None:
        pass


def run(partitions: int, per_batch: int, rounds: int, size: int, config: dict[str, str]) -> tuple[float, float, int]:
    """Caller CPU seconds, Sender CPU seconds and batches completed."""
    rig = ProducerRig({"acks": "1", **config}, topics={"t": partitions}, nodes=1)
    # The scripted client keeps every request it was sent, for tests to read; a real one drops a
    # request once it is answered. Kept, the requests' views of the batch buffers would stop the
    # BufferPool from taking them back, and every batch would pay for a fresh zero-filled buffer
    # that production does not.
    rig.client.sent = _Discarded()
    rig.client.sent_bodies = _Discarded()
    if rig.config.enable_idempotence:
        rig.init_producer_id()
    value = b"x" * size
    # Keys that murmur2 sends to each partition in turn, ``per_batch`` of them each: keyed sends,
    # as an application makes them (``send(topic, value, key)``), that fill every partition alike.
    by_partition: list[list[bytes]] = [[] for _ in range(partitions)]
    i = 0
    while any(len(ks) < per_batch for ks in by_partition):
        key = b"key-%d" % i
        i += 1
        ks = by_partition[partition_for_key(key, partitions)]
        if len(ks) < per_batch:
            ks.append(key)
    keys = [k for ks in by_partition for k in ks]
    send = rig.producer.send
    responder = produce_response()
    cpu = time.process_time
    caller = sender = 0.0
    batches_before = 0
    failed = 0
    for _ in range(rounds):
        # Only this round's futures are kept, as an application keeps the futures it still waits
        # for: kept across rounds they would make every full collection of the cyclic garbage
        # collector walk hundreds of thousands of objects that belong to the benchmark, not to the
        # producer, a cost per batch that grew with the number of rounds.
        futures = []
        t0 = cpu()
        for p in range(partitions):
            for j in range(per_batch):
                futures.append(send("t", value, keys[p * per_batch + j]))
        t1 = cpu()
        loops = 0
        # The first future of the round not done yet: each future is asked once it is done, so the
        # check costs about one call per record (asking the whole round each loop cost ~5 µs a batch).
        pending = 0
        while True:
            while pending < len(futures) and futures[pending].done():
                pending += 1
            if pending == len(futures):
                break
            # One scripted answer queued at a time: the same responder (made before the clock)
            # answers every Produce request, however many the round takes, and none is left over.
            if not rig.client.prepared(ApiKey.PRODUCE):
                rig.client.prepare(ApiKey.PRODUCE, responder)
            rig.producer.run_sender_once()
            loops += 1
            if loops > 10 * partitions:
                raise SystemExit("the Sender did not complete the round")
        t2 = cpu()
        caller += t1 - t0
        sender += t2 - t1
        batches_before += partitions
        failed += sum(1 for f in futures if f.exception() is not None)
    if failed:
        raise SystemExit(f"{failed} records failed")
    rig.close()
    return caller, sender, batches_before


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--records-per-batch", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--config", default="", help="extra producer config, k=v,k=v")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="print the N functions with most own time")
    args = ap.parse_args()
    config = dict(kv.split("=", 1) for kv in args.config.split(",") if kv)
    from kproducer.record import native

    print(f"{args.partitions:,} partitions x {args.records_per_batch} records of {args.size} B per round, "
          f"{args.rounds} rounds, acks=1, C speedups {'on' if native.AVAILABLE else 'off'}, config {config or 'defaults'}")  # fmt: skip
    run(args.partitions, args.records_per_batch, 2, args.size, config)  # warm
    if args.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
    collector = _CollectorTime()
    gc.callbacks.append(collector)
    caller, sender, batches = run(args.partitions, args.records_per_batch, args.rounds, args.size, config)
    gc.callbacks.remove(collector)
    if args.profile:
        prof.disable()
        pstats.Stats(prof).sort_stats("tottime").print_stats(args.profile)
    per = 1e6 / batches
    print(f"batches: {batches:,}; CPU µs per batch: caller {caller * per:.1f} + Sender {sender * per:.1f} "
          f"= {(caller + sender) * per:.1f} ({(caller + sender) * per / args.records_per_batch:.1f} per record); "
          f"of which the garbage collector {collector.seconds * per:.1f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
