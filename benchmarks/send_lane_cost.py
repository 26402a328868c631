"""CPU per ``send()`` call on the caller's side, through the real Producer with no broker and no sockets.

The producer is built much as the Sender tests build it (``tests/support/producer_rig.py``: a
scripted client that answers every Produce request, no I/O thread), but on the producer's own
monotonic clock, as in production. Each round times only the
caller's ``send()`` calls (process CPU time, which other processes on a shared machine disturb
less than wall time); the Sender then drains and completes the round's batches, untimed. In the
native build ``send()`` is the C send lane for this call shape (bytes key and value, no headers,
partition or timestamp); under ``KPRODUCER_PURE_PYTHON=1`` it is the Python path.

The sources come from ``PYTHONPATH`` (this script does not put the repository's ``src`` first), so
that two builds can be compared run against run:

    PYTHONPATH=src .venv/bin/python benchmarks/send_lane_cost.py --partitions 8 --size 100
    PYTHONPATH=src .venv/bin/python benchmarks/send_lane_cost.py --partitions 8 --size 100 --keys 20000
    PYTHONPATH=src .venv/bin/python benchmarks/send_lane_cost.py --partitions 8 --size 100 --callback

``--callback`` gives every record the same no-op delivery callback, so that the batch keeps each
record's callback and future and the Sender's completion calls it. The Sender's own CPU per
round (drain, Produce request, response, completion) is printed too, for the same records.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, cast

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.support.mock_client import MockClient, init_producer_id_response, produce_response  # noqa: E402

from kproducer import Producer  # noqa: E402
from kproducer.common import monotonic_ms  # noqa: E402
from kproducer.metadata import Metadata  # noqa: E402
from kproducer.network.protocol import ApiKey  # noqa: E402


def make_producer(partitions: int) -> tuple[Producer, MockClient]:
    """A producer on the scripted client, with the producer's own clocks (as in production).

    Not ``ProducerRig``: its fake clock would make the send lane call back into Python for the time.
    """
    config = {"bootstrap.servers": "127.0.0.1:9092", "acks": "1"}
    metadata = Metadata(clock_ms=monotonic_ms)
    # MockClient only calls its clock (it is typed for the tests' FakeClock).
    client = MockClient(cast(Any, monotonic_ms), metadata, broker_topics={"t": partitions}, nodes=1)
    producer = Producer(config, _client=client, _metadata=metadata, _start_io_thread=False)
    metadata.add_topic("t", monotonic_ms())
    client.answer_metadata()
    return producer, client


def _delivered(_metadata: Any, _exception: BaseException | None) -> None:
    """The no-op delivery callback of ``--callback``."""


def run(partitions: int, size: int, keys: int, records: int, rounds: int, callback: bool = False) -> tuple[list[float], list[float]]:
    """Records per CPU second of the caller's send() calls and of the Sender's rounds, one figure per round each."""
    producer, client = make_producer(partitions)
    if producer.config.enable_idempotence:
        client.prepare(ApiKey.INIT_PRODUCER_ID, init_producer_id_response())
        producer.run_sender_once()
    value = b"x" * size
    key_list: list[bytes | None] = [b"key-%d" % (i % keys) for i in range(records)] if keys else [None] * records
    respond = produce_response()
    send = producer.send
    cpu = time.process_time
    rates = []
    sender_rates = []
    cb = _delivered if callback else None
    for _ in range(rounds):
        t0 = cpu()
        futures = [send("t", value, k, callback=cb) for k in key_list]
        t1 = cpu()
        rates.append(records / (t1 - t0))
        loops = 0
        while not all(f.done() for f in futures):
            client.prepare(ApiKey.PRODUCE, respond)
            producer.run_sender_once()
            loops += 1
            if loops > 100_000:
                raise SystemExit("the Sender did not complete the round")
        sender_rates.append(records / (cpu() - t1))
        failed = sum(1 for f in futures if f.exception() is not None)
        if failed:
            raise SystemExit(f"{failed} records failed")
    producer.close(0)
    return rates, sender_rates


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--size", type=int, default=100, help="value bytes")
    ap.add_argument("--keys", type=int, default=0, help="distinct keys, cycled (0: keyless)")
    ap.add_argument("--records", type=int, default=50_000, help="records per round")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--callback", action="store_true", help="the same no-op delivery callback on every record")
    args = ap.parse_args()
    import kproducer
    from kproducer.record import native

    probe, _client = make_producer(1)
    lane = "on" if probe.send is not Producer.send.__get__(probe) and type(probe.send).__name__ == "SendLane" else "off"
    probe.close(0)
    print(f"{kproducer.__file__}: C speedups {'on' if native.AVAILABLE else 'off'}, send lane {lane}; "
          f"{args.partitions} partitions, {args.size} B values, {args.keys or 'no'} keys, "
          f"{args.records:,} records x {args.rounds} rounds, acks=1, "
          f"{'a callback on every record' if args.callback else 'no callbacks'}, producer defaults otherwise")  # fmt: skip
    run(args.partitions, args.size, args.keys, args.records, 1, args.callback)  # warm
    rates, sender_rates = run(args.partitions, args.size, args.keys, args.records, args.rounds, args.callback)
    print(f"send() records per CPU second: median {statistics.median(rates):,.0f} "
          f"(min {min(rates):,.0f}, max {max(rates):,.0f})")  # fmt: skip
    print(f"Sender records per CPU second: median {statistics.median(sender_rates):,.0f} "
          f"(min {min(sender_rates):,.0f}, max {max(sender_rates):,.0f})")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
