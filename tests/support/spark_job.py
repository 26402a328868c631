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

A scenario named with an ``avro-`` prefix (after ``eos-`` if both: ``avro-write_to_kafka``,
``eos-avro-stream``) writes the rows of ``AVRO_VALUE`` with ``value.format=avro`` through
the Schema Registry at ``--registry`` (the test's, on loopback: the executors and the
Spark Connect server's Python workers reach it there), to the topic with an ``avro-``
infix (``{prefix}-avro-w2k``); ``avro_value(i)`` is the record an Avro reader gives back
for row ``i``. ``avro-refused`` (after ``avro-write_to_kafka``) writes that topic again with
a field added that the registry's compatibility rule refuses, and reports the error.

    python -m tests.support.spark_job --remote sc://127.0.0.1:15002 \
        --bootstrap 127.0.0.1:9092 --prefix t1 --rows 20000 --scenarios format,write_to_kafka,stream
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import tempfile
from typing import Any

# The Avro rows: a long, an int, a string, a nullable double, a timestamp and a nested struct
# (with a nullable field of its own), each a function of the row's id.
AVRO_VALUE = """
    named_struct(
        'id', id,
        'small', cast(id % 1000 as int),
        'name', concat('név-', cast(id as string)),
        'score', if(id % 7 = 0, null, id * 1.25D),
        'at', timestamp_micros(1700000000000000 + id * 1001),
        'inner', named_struct('x', cast(id % 100 as int), 'label', concat('i', cast(id as string)),
                              'half', if(id % 3 = 0, null, id / 2.0D))
    ) as value
"""
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def avro_value(i: int) -> dict[str, Any]:
    """Row ``i`` of ``AVRO_VALUE`` as confluent-kafka's AvroDeserializer (fastavro) reads it back."""
    return {
        "id": i,
        "small": i % 1000,
        "name": f"név-{i}",
        "score": None if i % 7 == 0 else i * 1.25,
        "at": _EPOCH + datetime.timedelta(microseconds=1700000000000000 + i * 1001),
        "inner": {"x": i % 100, "label": f"i{i}", "half": None if i % 3 == 0 else i / 2.0},
    }


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


def rows(spark: Any, start: int, n: int, avro: bool = False) -> Any:
    if avro:
        return spark.range(start, start + n, 1, 4).selectExpr("cast(id as string) as key", AVRO_VALUE)
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
        name = scenario
        eos = name.startswith("eos-")
        name = name[len("eos-") :] if eos else name
        avro = name.startswith("avro-")
        name = name[len("avro-") :] if avro else name
        suffix = "-eos" if eos else ""
        infix = "avro-" if avro else ""
        # The write's sink options. Exactly-once: transactional ids unique to this run and write
        # (the prefix must be unique per application).
        opts = (
            {"deliveryGuarantee": "exactly_once", "transactionalIdPrefix": f"{args.prefix}-{infix}{name}"}
            if eos
            else {}
        )
        if avro:
            if args.registry is None:
                raise SystemExit(f"scenario {scenario!r} needs --registry")
            opts = {**opts, "value.format": "avro", "schema.registry.url": args.registry}
        if name == "format":
            topic = f"{args.prefix}-{infix}format{suffix}"
            rows(spark, 0, n, avro).write.format("kproducer").options(
                **sink_options(topic, bootstrap_servers=args.bootstrap), **opts
            ).mode("append").save()
            emit(scenario=scenario, topic=topic, rows=n)
        elif name == "write_to_kafka":
            topic = f"{args.prefix}-{infix}w2k{suffix}"
            summary = write_to_kafka(
                rows(spark, 0, n, avro), topic, bootstrap_servers=args.bootstrap, options=opts
            )
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
            topic = f"{args.prefix}-{infix}stream{suffix}"
            work = os.path.join(
                args.workdir or tempfile.mkdtemp(prefix="kproducer-stream-"), f"{infix}stream{suffix}"
            )
            src = os.path.join(work, "in")
            os.makedirs(src, exist_ok=True)
            files, per_file = 4, n // 4
            for f in range(files):
                with open(os.path.join(src, f"part-{f}.txt"), "w") as fh:
                    fh.write("".join(f"{f * per_file + i}\n" for i in range(per_file)))
            lines = spark.readStream.format("text").option("maxFilesPerTrigger", 1).load(src)
            if avro:
                stream = lines.selectExpr("value as key", "cast(value as long) as id").selectExpr("key", AVRO_VALUE)
            else:
                stream = lines.selectExpr("value as key", "concat('row-', value) as value")
            query = (
                stream.writeStream.format("kproducer")
                .options(**sink_options(topic, bootstrap_servers=args.bootstrap), **opts)
                .option("checkpointLocation", os.path.join(work, "ckpt"))
                .trigger(availableNow=True)
                .start()
            )
            query.awaitTermination()
            emit(scenario=scenario, topic=topic, rows=files * per_file, batches=files)
        elif name == "refused" and avro:
            # After avro-write_to_kafka, to its topic: the value with a field added (no default),
            # which the subject's BACKWARD rule refuses. The driver that plans the write must fail
            # it, naming the field, before any task writes; the error text goes to the test.
            from pyspark.sql import functions as F

            topic = f"{args.prefix}-avro-w2k{suffix}"
            wider = rows(spark, 0, n, avro).withColumn("value", F.col("value").withField("email", F.lit("x")))
            error = None
            try:
                wider.write.format("kproducer").options(
                    **sink_options(topic, bootstrap_servers=args.bootstrap), **opts
                ).mode("append").save()
            except Exception as e:  # any failure goes to the test, which checks its text
                error = f"{type(e).__name__}: {e}"
            emit(scenario=scenario, topic=topic, error=error)
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
    p.add_argument("--registry", help="a Schema Registry URL, for the avro- scenarios")
    run(p.parse_args(argv))


if __name__ == "__main__":
    main()
