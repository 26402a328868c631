"""A small Spark job run in its own process, for the deployment tests (local-cluster, Spark Connect).

A test process can hold only one SparkContext (the suite's shared ``local[2]``
one), so every other way of running Spark gets a process of its own: this
script builds the session (``--master`` for a classic one, ``--remote`` for a
Spark Connect client), runs the requested writes into Kafka and prints one
JSON line per write (prefixed ``RESULT ``) for the test to check against what
an independent consumer reads back.

A scenario named with an ``eos-`` prefix (``eos-format``, ``eos-write_to_kafka``,
``eos-stream``) is the same write with ``deliveryGuarantee=exactly_once``, to the
topic with an ``-eos`` suffix; the test decides its visibility from the control
markers.

    python -m tests.support.spark_job --remote sc://127.0.0.1:15002 \
        --bootstrap 127.0.0.1:9092 --prefix t1 --rows 20000 --scenarios format,write_to_kafka,stream
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Any


def build_session(master: str | None, remote: str | None) -> Any:
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName("kproducer-deploy-test")
    if remote is not None:
        if not remote.startswith("sc://"):
            # remote("local[N]") starts a Connect server in this process, on port 15002 unless
            # PySpark's own testing switch makes it take an ephemeral port: another suite on the
            # machine may hold 15002.
            os.environ["SPARK_TESTING"] = "1"
        return builder.remote(remote).getOrCreate()
    assert master is not None
    return (
        builder.master(master)
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )


def rows(spark: Any, start: int, n: int) -> Any:
    return spark.range(start, start + n, 1, 4).selectExpr(
        "cast(id as string) as key", "concat('row-', cast(id as string)) as value"
    )


def emit(**fields: Any) -> None:
    print("RESULT " + json.dumps(fields, sort_keys=True), flush=True)


def run(args: argparse.Namespace) -> None:
    from kproducer.spark import register, sink_options, write_to_kafka

    spark = build_session(args.master, args.remote)
    register(spark)
    register(spark)  # a second call must not register again (no "replaced" warning)
    n = args.rows
    for scenario in args.scenarios.split(","):
        eos = scenario.startswith("eos-")
        name = scenario[len("eos-") :] if eos else scenario
        suffix = "-eos" if eos else ""
        # Exactly-once: transactional ids unique to this run and write (the prefix must be unique
        # per application).
        guarantee = (
            {"deliveryGuarantee": "exactly_once", "transactionalIdPrefix": f"{args.prefix}-{name}"} if eos else {}
        )
        if name == "format":
            topic = f"{args.prefix}-format{suffix}"
            rows(spark, 0, n).write.format("kproducer").options(
                **sink_options(topic, bootstrap_servers=args.bootstrap), **guarantee
            ).mode("append").save()
            emit(scenario=scenario, topic=topic, rows=n)
        elif name == "write_to_kafka":
            topic = f"{args.prefix}-w2k{suffix}"
            summary = write_to_kafka(rows(spark, 0, n), topic, bootstrap_servers=args.bootstrap, options=guarantee)
            emit(
                scenario=scenario,
                topic=topic,
                rows=n,
                available=summary.available,
                records=summary.records,
                tasks=summary.tasks,
                note=summary.note,
            )
        elif name == "stream":
            # A finite file stream read with availableNow: a fixed number of micro-batches
            # (one file each), then the query ends by itself.
            topic = f"{args.prefix}-stream{suffix}"
            work = os.path.join(args.workdir or tempfile.mkdtemp(prefix="kproducer-stream-"), f"stream{suffix}")
            src = os.path.join(work, "in")
            os.makedirs(src, exist_ok=True)
            files, per_file = 4, n // 4
            for f in range(files):
                with open(os.path.join(src, f"part-{f}.txt"), "w") as fh:
                    fh.write("".join(f"{f * per_file + i}\n" for i in range(per_file)))
            stream = (
                spark.readStream.format("text")
                .option("maxFilesPerTrigger", 1)
                .load(src)
                .selectExpr("value as key", "concat('row-', value) as value")
            )
            query = (
                stream.writeStream.format("kproducer")
                .options(**sink_options(topic, bootstrap_servers=args.bootstrap), **guarantee)
                .option("checkpointLocation", os.path.join(work, "ckpt"))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
            emit(scenario=scenario, topic=topic, rows=files * per_file, batches=files)
        else:
            raise SystemExit(f"unknown scenario {scenario!r}")
    spark.stop()


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser()
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--master")
    where.add_argument("--remote")
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--rows", type=int, default=20_000)
    p.add_argument("--scenarios", default="format,write_to_kafka,stream")
    p.add_argument("--workdir")
    run(p.parse_args(argv))


if __name__ == "__main__":
    main()
