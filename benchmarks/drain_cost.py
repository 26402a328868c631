"""CPU of the Sender's drain (``RecordAccumulator.drain``) per batch, when each request fills before the node's partitions run out.

Every partition of one leader holds a batch; the drain is called with ``--request-bytes`` as
``max.request.size`` until nothing is left, as the Sender does when a request reaches its size
(keyed 1 KB records over 1,000 partitions: about 66 full batches a 1 MiB request). The drain
first gathers every deque of the topics holding batches, keeps those of the node's partitions
that hold a batch and sorts them, then takes batches from its rotating start until the request is
full, so each request pays for every deque of those topics as well as for the batches it takes.
Prints the best of ``--repeat`` runs (the least disturbed by other work on the machine).

    .venv/bin/python benchmarks/drain_cost.py                             # 1,000 partitions, 64 KiB requests
    .venv/bin/python benchmarks/drain_cost.py --request-bytes 1048576 --records-per-batch 15
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.support.accumulator import START_MS, append, complete_all, make_acc, make_cluster  # noqa: E402
from tests.support.clock import FakeClock  # noqa: E402


def run(partitions: int, per_batch: int, size: int, request_bytes: int) -> tuple[float, int, int]:
    """CPU µs of drain() per batch, batches drained, and requests made."""
    clock = FakeClock(START_MS)
    batch_size = 16384
    acc = make_acc(clock, memory=partitions * batch_size * 2, batch_size=batch_size, linger_ms=0)
    cluster = make_cluster(partitions=partitions, nodes=1)
    value = b"v" * size
    for p in range(partitions):
        for _ in range(per_batch):
            append(acc, p, clock, value=value)
    acc.ready(cluster, clock.now)
    cpu = 0.0
    batches = requests = 0
    while True:
        t0 = time.process_time()
        drained = acc.drain(cluster, {0}, request_bytes, clock.now)[0]
        cpu += time.process_time() - t0
        if not drained:
            break
        requests += 1
        batches += len(drained)
        for batch in drained:
            batch.done(0, -1, None)
            acc.deallocate(batch)
    if batches != partitions:
        raise SystemExit(f"drained {batches} batches, expected {partitions}")
    complete_all(acc, cluster, clock)
    return cpu / batches * 1e6, batches, requests


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--records-per-batch", type=int, default=3)
    ap.add_argument("--size", type=int, default=1000, help="value bytes per record")
    ap.add_argument("--request-bytes", type=int, default=64 * 1024, help="max.request.size of each drain")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    from kproducer.record import native

    print(f"{args.partitions:,} partitions of one leader, {args.records_per_batch} records of {args.size} B a batch, "
          f"requests of {args.request_bytes:,} bytes, C speedups {'on' if native.AVAILABLE else 'off'}")  # fmt: skip
    runs = [run(args.partitions, args.records_per_batch, args.size, args.request_bytes) for _ in range(args.repeat)]
    best = min(runs)
    print(f"drain(): {best[0]:.1f} µs a batch (best of {args.repeat}), {best[1] / best[2]:.1f} batches a request")
    return 0


if __name__ == "__main__":
    sys.exit(main())
