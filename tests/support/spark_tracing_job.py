"""A Spark job whose Python workers have a tracer provider (named by OTEL_PYTHON_TRACER_PROVIDER).

Run by tests/integration/spark/test_spark_tracing.py in a process of its own: it writes
``--rows`` rows in 4 partitions to ``<prefix>-traced`` with ``kafka.tracing.enabled=true``
(and ``kafka.tracing.bulk.headers=true``, so that the rows carry their bulk call's span
context) and the same rows to ``<prefix>-untraced`` without the option.

    python -m tests.support.spark_tracing_job --bootstrap 127.0.0.1:9092 --prefix t1 --rows 400
"""

from __future__ import annotations

import argparse

from tests.support.spark_job import build_session


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--prefix", required=True)
    p.add_argument("--rows", type=int, default=400)
    args = p.parse_args()
    from kproducer.spark import register, sink_options

    spark = build_session("local[2]", None)
    # Arrow batches of 10 rows: each task makes several bulk calls, each a span of its own.
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "10")
    register(spark)
    df = spark.range(0, args.rows, 1, 4).selectExpr("cast(id as string) as key", "cast(id as string) as value")
    traced = sink_options(f"{args.prefix}-traced", bootstrap_servers=args.bootstrap, tracing_enabled=True)
    traced["kafka.tracing.bulk.headers"] = "true"
    df.write.format("kproducer").options(**traced).mode("append").save()
    plain = sink_options(f"{args.prefix}-untraced", bootstrap_servers=args.bootstrap)
    plain["kafka.tracing.bulk.headers"] = "true"
    df.write.format("kproducer").options(**plain).mode("append").save()
    spark.stop()


if __name__ == "__main__":
    main()
