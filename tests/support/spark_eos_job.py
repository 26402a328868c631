"""Spark jobs for the exactly-once tests, each in a process of its own (killed with SIGKILL by some tests).

``retry``: a batch write on ``local[2,2]`` (``spark.task.maxFailures=2``) whose
UDF fails attempt 0 of partition 0 after the sink has sent part of that
partition's rows; Spark retries the task.

``stream``: a ``rate-micro-batch`` stream (deterministic: batch b carries the
values b*R .. b*R+R-1) into the sink with a checkpoint; it runs until killed,
or until ``--batches`` micro-batches are committed. ``--crash-point`` makes the
driver wait (so that the test can kill it) at one point of a micro-batch's commit:
``before_commit`` (the tasks wrote, the commit has not started) or
``after_prepare`` (the transactions are recorded, none committed yet).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any


def session(master: str, extra: dict[str, str]) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    b = (
        SparkSession.builder.master(master)
        .appName("kproducer-eos-test")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.shuffle.partitions", "2")
    )
    for k, v in extra.items():
        b = b.config(k, v)
    return b.getOrCreate()


def sink_opts(args: argparse.Namespace, topic: str) -> dict[str, str]:
    from kproducer.spark import sink_options

    opts = sink_options(topic, bootstrap_servers=args.bootstrap, linger_ms=5)
    opts["deliveryGuarantee"] = args.guarantee
    if args.guarantee == "exactly_once":
        opts["transactionalIdPrefix"] = args.prefix
    return opts


def run_retry(args: argparse.Namespace) -> None:
    from pyspark import TaskContext
    from pyspark.sql import functions as F

    from kproducer.spark import register, write_to_kafka

    spark = session(
        "local[2,2]",
        {"spark.task.maxFailures": "2", "spark.sql.execution.arrow.maxRecordsPerBatch": "1000"},
    )
    register(spark)
    n, parts = args.rows, 4
    fail_after = n // parts // 2

    @F.udf("string")
    def fail_once(i: int) -> str:
        ctx = TaskContext.get()
        if ctx is not None and ctx.partitionId() == 0 and ctx.attemptNumber() == 0 and i >= fail_after:
            # Give the producer time to deliver what the sink already sent.
            time.sleep(2.0)
            raise RuntimeError(f"injected failure at row {i} of attempt 0")
        return str(i)

    df = spark.range(0, n, 1, parts).select(fail_once(F.col("id")).alias("key")).selectExpr(
        "key", "concat('row-', key) as value"
    )
    summary = write_to_kafka(df, args.topic, options=sink_opts(args, args.topic))
    print("RESULT " + json.dumps({"records": summary.records, "tasks": summary.tasks}), flush=True)
    spark.stop()


def _crashing_source(point: str, batch: int, marker: str) -> Any:
    """The kproducer source with a stream writer that waits at ``point`` of micro-batch ``batch``."""
    from kproducer.spark.datasource import KafkaDataSource, KafkaStreamArrowWriter
    from kproducer.spark.exactly_once import TransactionLog

    def wait_here() -> None:
        with open(marker, "w") as fh:
            fh.write(point)
        time.sleep(600)

    class PausingLog(TransactionLog):
        def prepare(self, batch_id: int, txns: Any) -> None:
            super().prepare(batch_id, txns)
            if point == "after_prepare" and batch_id == batch:
                wait_here()

    class PausingWriter(KafkaStreamArrowWriter):
        def commit(self, messages: Any, batchId: int) -> None:  # noqa: N803
            if point == "before_commit" and batchId == batch:
                wait_here()
            super().commit(messages, batchId)

        def transaction_log(self) -> TransactionLog:
            return PausingLog(str(self.sink_options.checkpoint_location))

    class PausingSource(KafkaDataSource):
        @classmethod
        def name(cls) -> str:
            return "kproducer_pausing"

        def streamWriter(self, schema: Any, overwrite: bool) -> Any:  # noqa: N802
            w = super().streamWriter(schema, overwrite)
            p = PausingWriter(w.sink_options, w.sink_schema)
            return p

    return PausingSource


def run_stream(args: argparse.Namespace) -> None:
    from kproducer.spark import register

    spark = session("local[2]", {})
    register(spark)
    fmt = "kproducer"
    if args.crash_point:
        source = _crashing_source(args.crash_point, args.crash_batch, args.marker)
        spark.dataSource.register(source)
        fmt = source.name()
    stream = (
        spark.readStream.format("rate-micro-batch")
        .option("rowsPerBatch", args.rows)
        .option("numPartitions", 2)
        .option("startTimestamp", 0)
        .load()
        .selectExpr("cast(value as string) as key", "cast(value as string) as value")
    )
    query = (
        stream.writeStream.format(fmt)
        .options(**sink_opts(args, args.topic))
        .option("checkpointLocation", args.checkpoint)
        .trigger(processingTime="500 milliseconds")
        .start()
    )
    print("STARTED", flush=True)
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        if query.exception() is not None:
            raise SystemExit(f"query failed: {query.exception()}")
        progress = query.lastProgress
        if args.batches is not None and progress is not None and progress["batchId"] >= args.batches - 1:
            break
        time.sleep(0.2)
    query.stop()
    print("RESULT " + json.dumps({"last_batch": (query.lastProgress or {}).get("batchId")}), flush=True)
    spark.stop()


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("scenario", choices=["retry", "stream"])
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--prefix", default="eos-test")
    p.add_argument("--guarantee", default="exactly_once")
    p.add_argument("--rows", type=int, default=20_000)
    p.add_argument("--checkpoint")
    p.add_argument("--batches", type=int)
    p.add_argument("--crash-point", choices=["before_commit", "after_prepare"])
    p.add_argument("--crash-batch", type=int, default=1)
    p.add_argument("--marker")
    args = p.parse_args()
    if args.scenario == "retry":
        run_retry(args)
    else:
        run_stream(args)


if __name__ == "__main__":
    main()
