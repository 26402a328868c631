"""Spark jobs for the exactly-once tests, each in a process of its own (killed with SIGKILL by some tests).

``retry``: a batch write on ``local[2,2]`` (``spark.task.maxFailures=2``) whose
UDF fails attempt 0 of partition 0 after the sink has sent part of that
partition's rows; Spark retries the task.

``speculate``: a batch write on a standalone cluster (``--master spark://...``,
two workers on different host names) with ``spark.speculation`` on; attempt 0
of partition 0 sends all but its last row, then waits (writing ``<markers>/p0-a0``)
until it is killed or ``--hold`` seconds pass, so Spark starts a speculative
copy on the other host; the copy waits until attempt 0's first records are in
Kafka (in its open transaction), writes ``<markers>/p0-a1`` and wins.

``batch``: a plain batch write (``--master``, default ``local[2]``) whose
driver ``--fault`` is ``expire`` (before the commit, the tasks' transactions
are aborted with their epoch bumped, as the coordinator does when
``transaction.timeout.ms`` passes; the commit must then fail) or ``die`` (the
driver waits before the commit, writing ``--marker``, to be killed: its writers'
transactions are left open).

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
    if args.registry:
        opts.update({"value.format": "avro", "schema.registry.url": args.registry})
    opts["deliveryGuarantee"] = args.guarantee
    if args.guarantee == "exactly_once":
        opts["transactionalIdPrefix"] = args.prefix
    return opts


def write_keyed_through(spark: Any, args: argparse.Namespace, udf: Any, n: int, parts: int) -> None:
    """Rows 0..n-1 in ``parts`` partitions, their key made by ``udf`` (where the fault is), into the sink."""
    from pyspark.sql import functions as F

    from kproducer.spark import write_to_kafka

    value = (
        "named_struct('id', cast(key as long), 'label', concat('row-', key)) as value"  # --registry: Avro values
        if args.registry
        else "concat('row-', key) as value"
    )
    df = spark.range(0, n, 1, parts).select(udf(F.col("id")).alias("key")).selectExpr("key", value)
    summary = write_to_kafka(df, args.topic, options=sink_opts(args, args.topic))
    print("RESULT " + json.dumps({"records": summary.records, "tasks": summary.tasks}), flush=True)
    spark.stop()


def run_retry(args: argparse.Namespace) -> None:
    from pyspark import TaskContext
    from pyspark.sql import functions as F

    from kproducer.spark import register

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

    write_keyed_through(spark, args, fail_once, n, parts)


def _task_marker(markers: str, name: str) -> None:
    with open(os.path.join(markers, name), "w") as fh:
        fh.write(str(os.getpid()))


def run_speculate(args: argparse.Namespace) -> None:
    from pyspark import TaskContext
    from pyspark.sql import functions as F

    from kproducer.spark import register

    spark = session(
        args.master,
        {
            "spark.speculation": "true",
            "spark.speculation.interval": "100ms",
            "spark.speculation.quantile": "0.5",
            "spark.speculation.multiplier": "1.5",
            # Judge by duration only: a task held in a sleep might otherwise pass as "efficient".
            "spark.speculation.efficiency.enabled": "false",
            "spark.executor.cores": "1",
            "spark.cores.max": "2",
            "spark.executor.memory": "512m",
            "spark.sql.execution.arrow.maxRecordsPerBatch": "1000",
            "spark.pyspark.python": sys.executable,
            "spark.executorEnv.PYTHONPATH": os.environ.get("PYTHONPATH", ""),
        },
    )
    register(spark)
    n, parts, markers, hold = args.rows, 4, args.markers, args.hold
    bootstrap, topic = args.bootstrap, args.topic
    # Attempt 0 stalls at the last row of partition 0: Spark hands the writer's Python worker
    # its input in buffered chunks (spark.buffer.size), so rows before a stall reach the
    # writer only once a chunk is full.
    last = n // parts - 1

    @F.udf("string")
    def slow_first_attempt(i: int) -> str:
        ctx = TaskContext.get()
        if ctx is not None and ctx.partitionId() == 0:
            attempt = ctx.attemptNumber()
            if attempt == 0 and i == last:
                # The sink has sent the rows before this one; hold the task until Spark kills it
                # (the copy won) or the bound passes.
                _task_marker(markers, "p0-a0")
                deadline = time.monotonic() + hold
                while time.monotonic() < deadline:
                    time.sleep(0.2)
            elif attempt > 0 and i == 0:
                # The copy goes on only once attempt 0's records are in Kafka (under
                # exactly-once in its open transaction), so that both attempts have written
                # when the copy wins.
                from tests.support.txn_reader import read_topic_transactional

                deadline = time.monotonic() + 120
                while time.monotonic() < deadline:
                    view = read_topic_transactional(bootstrap, topic, timeout=30)
                    # (at-least-once: its records are visible at once, not in a transaction)
                    if any(int(r.key or b"-1") <= last for r in (*view.open, *view.committed)):
                        break
                    time.sleep(0.5)
                _task_marker(markers, f"p0-a{attempt}")
        return str(i)

    write_keyed_through(spark, args, slow_first_attempt, n, parts)


def _faulty_batch_source(fault: str, marker: str | None) -> Any:
    """The kproducer source with a batch writer whose driver misbehaves just before the commit."""
    from kproducer.spark.commit import TaskCommit
    from kproducer.spark.datasource import KafkaArrowWriter, KafkaDataSource

    class FaultyWriter(KafkaArrowWriter):
        def commit(self, messages: Any) -> None:
            if fault == "die":
                assert marker is not None
                with open(marker, "w") as fh:
                    fh.write("before commit")
                time.sleep(600)
            elif fault == "expire":
                from kproducer.coordinator import init_producer_id

                # What the coordinator does to a transaction older than transaction.timeout.ms:
                # abort it and bump the epoch, so that its writer's EndTxn(COMMIT) is refused.
                config = self.sink_options.producer_config_dict
                for m in messages:
                    if isinstance(m, TaskCommit) and m.txn is not None:
                        init_producer_id(config["bootstrap.servers"], m.txn.transactional_id, config=config)
            super().commit(messages)

    class FaultySource(KafkaDataSource):
        @classmethod
        def name(cls) -> str:
            return "kproducer_faulty"

        def writer(self, schema: Any, overwrite: bool) -> Any:
            w = super().writer(schema, overwrite)
            return FaultyWriter(w.sink_options, w.sink_schema, w.scope)

    return FaultySource


def run_batch(args: argparse.Namespace) -> None:
    from kproducer.spark import register

    spark = session(args.master or "local[2]", {})
    register(spark)
    fmt = "kproducer"
    if args.fault:
        source = _faulty_batch_source(args.fault, args.marker)
        spark.dataSource.register(source)
        fmt = source.name()
    df = spark.range(0, args.rows, 1, 4).selectExpr("cast(id as string) as key", "concat('row-', cast(id as string)) as value")
    opts = sink_opts(args, args.topic)
    if args.fault == "expire":
        # The driver retries each EndTxn for max.block.ms. Kafka answers a stale epoch with
        # PRODUCER_FENCED at once; Tansu 0.6.0 drops the connection instead, which is retried.
        opts["kafka.max.block.ms"] = "8000"
    try:
        df.write.format(fmt).options(**opts).mode("append").save()
    except Exception as e:  # the test checks that the failure named the lost transactions
        print("FAILED " + json.dumps({"error": f"{type(e).__name__}: {e}"}), flush=True)
        spark.stop()
        raise SystemExit(3) from None
    print("RESULT " + json.dumps({"records": args.rows}), flush=True)
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
    p.add_argument("scenario", choices=["retry", "stream", "speculate", "batch"])
    p.add_argument("--master")
    p.add_argument("--markers", help="speculate: the directory for the attempts' marker files")
    p.add_argument("--hold", type=float, default=240.0, help="speculate: longest wait of attempt 0")
    p.add_argument("--fault", choices=["expire", "die"], help="batch: what the driver does before the commit")
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
    p.add_argument("--registry", help="a Schema Registry URL: the values are Avro records (value.format=avro)")
    args = p.parse_args()
    if args.scenario == "retry":
        run_retry(args)
    elif args.scenario == "speculate":
        run_speculate(args)
    elif args.scenario == "batch":
        run_batch(args)
    else:
        run_stream(args)


if __name__ == "__main__":
    main()
