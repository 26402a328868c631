"""The exactly-once Spark sink against the at-least-once Arrow writer, side by side in one run.

N rows x 100-byte values on local[2] (4 tasks), one Tansu broker. Both paths
are the same Arrow writer with the sink's defaults; exactly-once adds what it
costs: a transactional producer per task attempt (InitProducerId,
AddPartitionsToTxn), the flush, and the driver's EndTxn per task and fencing
of the ids of attempts that did not run. A first write, not measured, warms the
Python workers. Paths are interleaved ``--repeat`` times; the ratio is taken
within each repeat, and the load average is printed beside each figure, since
the machine may be shared. Every result is checked against the acknowledged
count (and, for exactly-once, the summary's committed count).

    .venv/bin/python benchmarks/spark_exactly_once.py [--rows 2000000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ALO = "at-least-once Arrow writer"
EOS = "exactly-once Arrow writer"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--partitions", type=int, default=4, help="Spark partitions (tasks)")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from kproducer.admin import create_topics
    from kproducer.spark import register, write_to_kafka
    from kproducer.spark.embedded_broker import start_embedded_broker

    broker = start_embedded_broker()
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("kproducer-exactly-once-bench")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    try:
        register(spark)
        df: Any = spark.range(0, args.rows, 1, args.partitions).selectExpr(
            "cast(id as string) as key", "repeat('x', 100) as value"
        ).cache()
        df.count()
        run_id = uuid.uuid4().hex[:8]
        eos_options = {"deliveryGuarantee": "exactly_once", "transactionalIdPrefix": f"bench-{run_id}"}
        print(f"rows={args.rows:,} partitions={args.partitions} master=local[2]; producer config: bootstrap.servers only")
        print(f"exactly-once options: {eos_options} (transaction.timeout.ms defaults to 900000)")

        def one(label: str, n: int, i: int) -> float:
            topic = f"bench-eos-{run_id}-{i}-{'eos' if label == EOS else 'alo'}"
            create_topics(broker.bootstrap, {topic: 6})
            options = eos_options if label == EOS else None
            t0 = time.perf_counter()
            s = write_to_kafka(df, topic, bootstrap_servers=broker.bootstrap, options=options)
            dt = time.perf_counter() - t0
            if s.available and s.records != n:
                raise SystemExit(f"{label}: {s.records} records acknowledged for {n} rows")
            return n / dt

        one(ALO, args.rows, -1)  # warm-up: Python workers start, kproducer imported
        one(EOS, args.rows, -2)
        results: dict[str, list[float]] = {ALO: [], EOS: []}
        ratios: list[float] = []
        for i in range(args.repeat):
            order = [ALO, EOS] if i % 2 == 0 else [EOS, ALO]
            got = {}
            for label in order:
                load = os.getloadavg()[0]
                got[label] = one(label, args.rows, i)
                results[label].append(got[label])
                print(f"  repeat {i}: {label:28s} {got[label]:>12,.0f} rows/s   (load {load:.1f})", flush=True)
            ratios.append(got[EOS] / got[ALO])
        print("\n| path | rows/s (range over repeats) | exactly-once / at-least-once |")
        print("|---|---|---|")
        for label in (ALO, EOS):
            xs = results[label]
            ratio = "1.00" if label == ALO else f"{min(ratios):.2f}-{max(ratios):.2f}"
            print(f"| {label} | {min(xs):,.0f}-{max(xs):,.0f} | {ratio} |")
        print(f"load average at the end: {os.getloadavg()}")
    finally:
        spark.stop()
        broker.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
