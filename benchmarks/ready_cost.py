"""CPU of the Sender's ready check (``RecordAccumulator.ready``) over many partitions, each holding a batch.

The Sender runs the ready check on every loop, and it visits every partition deque of every
topic with batches (as Java's ``RecordAccumulator.ready`` does), so over a thousand partitions its
cost per loop is that of a thousand visits. Two cases: no batch sendable yet (``linger.ms`` not
reached: every partition is examined in full), and the leader sendable from the first partition
on (``linger.ms=0``: the case under load, where the rest need only their queue sizes). The
records carry keys, so the topic's partitioner is never consulted and no queue sizes are counted
(``BuiltInPartitioner.uses_load_stats``); ``--keyless-first`` makes one sticky choice before the
run, as a keyless record would, so that every pass counts them.

    .venv/bin/python benchmarks/ready_cost.py                  # 1,000 partitions, one leader
    .venv/bin/python benchmarks/ready_cost.py --partitions 100 --nodes 3
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.support.accumulator import append, complete_all, make_acc, make_cluster  # noqa: E402
from tests.support.clock import FakeClock  # noqa: E402


def run(partitions: int, nodes: int, linger_ms: int, calls: int, keyless_first: bool) -> tuple[float, set[int]]:
    """CPU µs per ready() call, and the nodes it found ready."""
    clock = FakeClock(10_000)
    acc = make_acc(clock, linger_ms=linger_ms, memory=64 * 1024 * 1024)
    cluster = make_cluster(partitions=partitions, nodes=nodes)
    if keyless_first:
        acc.sticky_partition("t", cluster)
    for p in range(partitions):
        append(acc, p, clock)
    acc.ready(cluster, clock.now)  # warm
    t0 = time.process_time()
    for _ in range(calls):
        result = acc.ready(cluster, clock.now)
    cpu = time.process_time() - t0
    complete_all(acc, cluster, clock)
    return cpu / calls * 1e6, result.ready_nodes


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--keyless-first", action="store_true", help="make one sticky choice first (queue sizes counted)")
    args = ap.parse_args()
    from kproducer.record import native

    print(f"{args.partitions:,} partitions over {args.nodes} leader(s), one batch each, "
          f"C speedups {'on' if native.AVAILABLE else 'off'}, queue sizes {'counted' if args.keyless_first else 'not counted'}")  # fmt: skip
    for label, linger in (("nothing sendable (linger.ms not reached)", 100_000), ("leader sendable (linger.ms=0)", 0)):
        per_call, ready = run(args.partitions, args.nodes, linger, args.calls, args.keyless_first)
        print(f"{label}: ready() {per_call:,.0f} µs per call, {per_call * 1000 / args.partitions:,.0f} ns per "
              f"partition; ready nodes {sorted(ready)}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
