"""Spark sink throughput: kproducer's Arrow and row writers against foreachPartition + confluent-kafka.

N rows x 100-byte values on local[2], one Tansu broker, one run each, rows/s
measured around the Spark action. A no-op Arrow data source gives the ceiling
(Spark's own cost of handing Arrow batches to Python); a first no-op write,
not measured, starts the Python workers and imports kproducer and
confluent-kafka in them (about a second per worker, paid once per worker). The Arrow writer runs twice: with the
tuned config every kproducer run gets (linger.ms=5, batch.size=256 KiB) and
with the sink's defaults (only bootstrap.servers). Each run writes to its own
topic; every result is checked against the committed/delivered count. The
load average is printed before and after, since the machine may be shared.

    .venv/bin/python benchmarks/spark_sink.py [--rows 2000000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, DataSourceWriter, WriterCommitMessage

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


class _NoopArrowWriter(DataSourceArrowWriter):
    def __init__(self, warm: bool) -> None:
        self.warm = warm

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        if self.warm:
            # Load the clients in this worker, as a worker that has run a task already has them.
            import confluent_kafka  # noqa: F401

            import kproducer.spark.datasource  # noqa: F401
        n = 0
        for batch in iterator:
            n += batch.num_rows
        return WriterCommitMessage()


class NoopSource(DataSource):
    """The ceiling: Spark hands Arrow batches to Python, which drops them (``warm``: and imports the clients)."""

    @classmethod
    def name(cls) -> str:
        return "noop_arrow"

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        return _NoopArrowWriter(self.options.get("warm", "false") == "true")


def _confluent_partition(bootstrap: str, topic: str) -> Callable[[Iterator[Any]], None]:
    def run(rows: Iterator[Any]) -> None:
        from confluent_kafka import Producer

        p = Producer(
            {"bootstrap.servers": bootstrap, "linger.ms": 5, "queue.buffering.max.messages": 1_000_000}
        )
        errors: list[Any] = []

        def cb(err: Any, msg: Any) -> None:
            if err is not None:
                errors.append(err)

        for i, row in enumerate(rows):
            while True:
                try:
                    p.produce(topic, value=row.value, key=row.key, on_delivery=cb)
                    break
                except BufferError:
                    p.poll(0.05)
            if i % 10000 == 0:
                p.poll(0)
        if p.flush(120) != 0 or errors:
            raise RuntimeError(f"confluent-kafka: {len(errors)} errors, first {errors[:1]}")

    return run


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--partitions", type=int, default=4, help="Spark partitions (tasks)")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from pyspark.sql import SparkSession

    from kproducer.admin import create_topics
    from kproducer.spark import register, write_to_kafka
    from kproducer.spark.embedded_broker import start_embedded_broker

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    spark.dataSource.register(NoopSource)
    df = (
        spark.range(0, args.rows, 1, args.partitions)
        .selectExpr(
            "cast(id as string) as key", "concat(lpad(cast(id as string), 12, '0'), repeat('x', 88)) as value"
        )
        .cache()
    )
    n = df.count()  # materialize, so every run measures the sink, not the row generation
    load_before = os.getloadavg()
    results: list[tuple[str, float, str]] = []
    with start_embedded_broker() as broker:
        bs = broker.bootstrap
        create_topics(bs, {f"bench-{k}": 6 for k in ("arrow", "arrow-defaults", "row", "confluent")})
        tuned = {"bootstrap.servers": bs, "linger.ms": 5, "batch.size": 262144}
        defaults = {"bootstrap.servers": bs}

        # Warm-up, not measured: the Python workers start and import the clients.
        df.write.format("noop_arrow").option("warm", "true").mode("append").save()
        t = time.perf_counter()
        df.write.format("noop_arrow").mode("append").save()
        results.append(("no-op Arrow writer (ceiling)", n / (time.perf_counter() - t), "-"))

        runs = [
            ("arrow", "arrow", tuned, "kproducer sink, arrow writer"),
            ("arrow-defaults", "arrow", defaults, "kproducer sink, arrow, sink defaults"),
            ("row", "row", tuned, "kproducer sink, row writer"),
        ]
        for topic, mode, config, label in runs:
            t = time.perf_counter()
            s = write_to_kafka(df, f"bench-{topic}", writer=mode, config=config)
            el = time.perf_counter() - t
            assert s.records == n, f"{label}: {s.records} of {n} acknowledged"
            avg = s.metrics.get("batch-size-avg", 0.0)
            results.append((label, n / el, f"{s.records:,} acked, batch-size-avg {avg / 1024:,.0f} KiB"))

        t = time.perf_counter()
        df.foreachPartition(_confluent_partition(bs, "bench-confluent"))
        results.append(("foreachPartition + confluent-kafka", n / (time.perf_counter() - t), "flushed"))

    spark.stop()
    base = next(r for name, r, _ in results if name.startswith("foreachPartition"))
    load_after = os.getloadavg()
    print(f"\n{n:,} rows x 100 B value, local[2], Tansu on loopback")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (1 min), {os.cpu_count()} CPUs\n")
    print(f"| {'path':<36} | {'rows/s':>10} | {'vs confluent':>12} | check |")
    print(f"|{'-' * 38}|{'-' * 12}|{'-' * 14}|-------|")
    for name, rate, check in results:
        print(f"| {name:<36} | {rate:>10,.0f} | {rate / base:>11.2f}x | {check} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
