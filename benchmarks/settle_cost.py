"""CPU per record of the asyncio facade's loop-side settling of a batch acknowledged as a whole.

``kproducer.aio`` hands each completed batch's delivery futures to ``settle_group`` on the
event loop (the C function in ``kproducer._speedups``; its Python reference is
``kproducer.aio._settle_group_py``): for each record it builds the ``RecordMetadata`` and
sets it on the record's asyncio future. This times that step alone, on groups of
``--records`` records built before the clock (fresh futures each round), and prints the
median and best CPU microseconds per record over ``--rounds`` rounds for each
implementation. Run it in two trees to compare them::

    .venv/bin/python benchmarks/settle_cost.py
    .venv/bin/python benchmarks/settle_cost.py --records 1000 --rounds 15 --groups 200
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=500, help="records in one batch's group")
    parser.add_argument("--groups", type=int, default=100, help="groups settled in one timed round")
    parser.add_argument("--rounds", type=int, default=9)
    args = parser.parse_args()

    from kproducer import _speedups  # type: ignore[attr-defined]
    from kproducer.accumulator.futures import ProduceRequestResult, RecordFuture
    from kproducer.aio import _settle_group_py
    from kproducer.structs import RecordMetadata, TopicPartition

    if not issubclass(RecordFuture, _speedups.FutureRecordMetadata):
        raise SystemExit("RecordFuture does not build on the C FutureRecordMetadata: unset KPRODUCER_PURE_PYTHON")
    print(f"records per group {args.records}, groups per round {args.groups}, rounds {args.rounds}")

    async def round_cpu(settle: Any) -> float:
        loop = asyncio.get_running_loop()
        result = ProduceRequestResult(TopicPartition("t", 0))
        groups = []
        for _ in range(args.groups):
            group: list[Any] = []
            for i in range(args.records):
                group += [loop.create_future(), RecordFuture(result, i, 1_700_000_000_000 + i, 8, 100)]
            groups.append(group)
        start = time.process_time()
        for group in groups:
            settle(group, RecordMetadata, "t", 0, 1_000, -1)
        return (time.process_time() - start) / (args.groups * args.records) * 1e6

    for name, settle in (("C settle_group", _speedups.settle_group), ("Python _settle_group_py", _settle_group_py)):
        costs = [asyncio.run(round_cpu(settle)) for _ in range(args.rounds)]
        print(f"{name:>24}: median {statistics.median(costs):.3f} µs/record (best {min(costs):.3f})")


if __name__ == "__main__":
    main()
