"""Spark sink throughput: kproducer's Arrow and row writers against the strongest confluent-kafka sinks.

N rows x 100-byte values on local[2], one Tansu broker, rows/s measured around
the Spark action. The baselines are what a Python user would write with
confluent-kafka and no per-row callback (``delivery.report.only.error=true``,
a default ``on_delivery`` that only sees failures, an ``error_cb``):
``foreachPartition`` over Row objects, and ``mapInArrow`` over Spark's Arrow
batches (two ``to_pylist()`` calls a batch, then ``produce()`` per row). A
no-op Arrow data source gives the ceiling (Spark's own cost of handing Arrow
batches to Python); a first no-op write, not measured, starts the Python
workers and imports kproducer and confluent-kafka in them, so every measured
path runs on warm workers. The Arrow writer runs with the sink's defaults (only
``bootstrap.servers``) and with ``batch.size=256 KiB``. The exactly-once Arrow
writer (``deliveryGuarantee=exactly_once``, the same defaults otherwise) adds
what that guarantee costs: a transactional producer per task attempt
(InitProducerId, AddPartitionsToTxn), and on the driver an EndTxn per task and
the fencing of the ids of attempts that did not run; its second table gives it
against the at-least-once Arrow writer with the same defaults, in the same
repeat. Each run writes to its own topic; every result is checked against the
acknowledged/flushed count (for exactly-once, the committed tasks' count).
``--repeat`` interleaves the paths and prints ranges, with ratios taken within
each repeat; the load average is printed, since the machine may be shared.

    .venv/bin/python benchmarks/spark_sink.py [--rows 2000000] [--repeat 2]

``--avro`` measures Avro values instead (:func:`run_avro`): a 10-column record
(ints, strings, a timestamp, a nullable double, a nested struct) written by the
sink with ``value.format=avro`` against a Schema Registry (the tests' loopback
one), against the strongest Python baseline, ``mapInArrow`` with fastavro's
``schemaless_writer`` per row and confluent-kafka ``produce`` (no per-row
callback), and against the plain Arrow writer on the same rows pre-encoded as
bytes (what the Avro writer costs on top of sending).

    .venv/bin/python benchmarks/spark_sink.py --avro [--rows 2000000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceArrowWriter, DataSourceWriter, WriterCommitMessage

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


NOOP = "no-op Arrow writer (Spark's own cost, the ceiling)"
CF_ROWS = "foreachPartition rows + confluent-kafka, no per-row callback"
CF_ARROW = "mapInArrow + confluent-kafka, no per-row callback"
ALO_ARROW = "kproducer sink, Arrow writer, defaults"
EOS_ARROW = "kproducer sink, Arrow writer, exactly-once, defaults"


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


def _confluent_config(bootstrap: str, errors: list[Any]) -> dict[str, Any]:
    """confluent-kafka as a user who needs no per-row callback configures it: only failures are reported."""
    return {
        "bootstrap.servers": bootstrap,
        "linger.ms": 5,
        "queue.buffering.max.messages": 1_000_000,
        "delivery.report.only.error": True,
        "on_delivery": lambda err, msg: errors.append(err),  # called for failed rows only
        "error_cb": errors.append,
    }


def _produce_all(p: Any, topic: str, rows: Any) -> None:
    produce, poll = p.produce, p.poll
    for i, (key, value) in enumerate(rows):
        while True:
            try:
                produce(topic, value, key)
                break
            except BufferError:
                poll(0.05)
        if i % 10000 == 0:
            poll(0)


def _confluent_partition(bootstrap: str, topic: str) -> Callable[[Iterator[Any]], None]:
    """foreachPartition over Row objects, confluent-kafka, no per-row callback."""

    def run(rows: Iterator[Any]) -> None:
        from confluent_kafka import Producer

        errors: list[Any] = []
        p = Producer(_confluent_config(bootstrap, errors))
        _produce_all(p, topic, ((row.key, row.value) for row in rows))
        if p.flush(120) != 0 or errors:
            raise RuntimeError(f"confluent-kafka: {len(errors)} errors, first {errors[:1]}")

    return run


def _confluent_arrow(bootstrap: str, topic: str) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """mapInArrow over Spark's Arrow batches, confluent-kafka, no per-row callback: the strongest pure-Python sink."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        from confluent_kafka import Producer

        errors: list[Any] = []
        p = Producer(_confluent_config(bootstrap, errors))
        n = 0
        for batch in batches:
            keys = batch.column(0).to_pylist()
            values = batch.column(1).to_pylist()
            _produce_all(p, topic, zip(keys, values, strict=True))
            n += batch.num_rows
        if p.flush(120) != 0 or errors:
            raise RuntimeError(f"confluent-kafka: {len(errors)} errors, first {errors[:1]}")
        yield pa.RecordBatch.from_pydict({"n": [n]})

    return run


AVRO_VALUE = """named_struct(
    'id', id,
    'user_id', cast(id % 100000 as int),
    'name', concat('user-', cast(id % 100000 as string)),
    'city', element_at(array('Lisboa', 'Zürich', 'Oslo', 'Montréal', 'Kyoto'), cast(id % 5 + 1 as int)),
    'at', timestamp_micros(1700000000000000 + id * 1000),
    'score', if(id % 10 = 0, null, id / 7.0D),
    'qty', cast(id % 50 as int),
    'status', if(id % 3 = 0, 'shipped', 'pending'),
    'amount_cents', id * 37,
    'address', named_struct('zip', cast(id % 99999 as int), 'street', concat(cast(id % 1000 as string), ' Main St'))
) as value"""
AVRO_SINK = "kproducer sink, value.format=avro (Arrow -> registry Avro)"
AVRO_PLAIN = "kproducer sink, plain Arrow writer, same rows pre-encoded as bytes"
AVRO_BASE = "mapInArrow + fastavro schemaless_writer per row + confluent-kafka"
NOOP_STRUCT = "no-op Arrow writer on the struct rows (Spark's cost, ceiling of the Avro sink)"
NOOP_BYTES = "no-op Arrow writer on the pre-encoded rows (ceiling of the plain writer)"


def _fastavro_arrow(bootstrap: str, topic: str, schema_json: str, schema_id: int) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The strongest pure-Python Avro sink: a dict per row from to_pylist, fastavro per row, produce per row."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import io
        import json

        import pyarrow as pa
        from confluent_kafka import Producer
        from fastavro import parse_schema, schemaless_writer

        parsed = parse_schema(json.loads(schema_json))
        header = b"\x00" + schema_id.to_bytes(4, "big")
        errors: list[Any] = []
        p = Producer(_confluent_config(bootstrap, errors))
        n = 0

        def encoded(keys: list[Any], values: list[Any]) -> Iterator[tuple[Any, bytes]]:
            for key, value in zip(keys, values, strict=True):
                buf = io.BytesIO()
                buf.write(header)
                schemaless_writer(buf, parsed, value)
                yield key, buf.getvalue()

        for batch in batches:
            _produce_all(p, topic, encoded(batch.column(0).to_pylist(), batch.column(1).to_pylist()))
            n += batch.num_rows
        if p.flush(120) != 0 or errors:
            raise RuntimeError(f"confluent-kafka: {len(errors)} errors, first {errors[:1]}")
        yield pa.RecordBatch.from_pydict({"n": [n]})

    return run


def _pre_encode(schema_json: str, schema_id: int) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """mapInArrow: the value column as registry Avro bytes (kproducer's encoder), for the plain writer's run."""

    def run(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        from kproducer.avro import AvroSchema
        from kproducer.avro.writer import AvroColumnWriter

        writer = AvroColumnWriter(AvroSchema(schema_json), schema_id)
        for batch in batches:
            enc = writer.encode(batch.column(1))
            yield pa.RecordBatch.from_arrays([batch.column(0), enc.array.cast(pa.binary())], names=["key", "value"])

    return run


def run_avro(args: argparse.Namespace) -> int:
    """The --avro benchmark (see the module docstring)."""
    from benchmarks.broker_warmup import warm_broker
    from pyspark.sql import SparkSession
    from pyspark.sql.pandas.types import to_arrow_type
    from tests.support.schema_registry import SchemaRegistry

    from kproducer.admin import create_topics
    from kproducer.avro import AvroFormat
    from kproducer.avro.encoder import AVAILABLE
    from kproducer.embedded_broker import start_embedded_broker
    from kproducer.spark import register, write_to_kafka

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
    df = spark.range(0, args.rows, 1, args.partitions).selectExpr("cast(id as string) as key", AVRO_VALUE).cache()
    n = df.count()
    vtype = to_arrow_type(df.schema["value"].dataType, timezone="UTC")
    print(f"kproducer Avro encoder: {'C' if AVAILABLE else 'pure Python'}; value type {vtype}")
    load_before = os.getloadavg()
    results: list[tuple[str, float]] = []
    with start_embedded_broker() as broker, SchemaRegistry() as registry:
        bs = broker.bootstrap
        run_id = uuid.uuid4().hex[:8]
        # The schema every path writes: the sink's own derivation, registered once here.
        fmt = AvroFormat(registry.url)
        schema, schema_id = fmt.resolve(f"bench-{run_id}", vtype)
        pre = df.mapInArrow(_pre_encode(schema.json, schema_id), "key string, value binary").cache()
        assert pre.count() == n
        avro_opts = {"value.format": "avro", "schema.registry.url": registry.url, "value.avro.schema": schema.json}
        print(f"{AVRO_SINK}: producer config {{'bootstrap.servers'}}, sink options {avro_opts}")
        print(f"{AVRO_PLAIN}: producer config {{'bootstrap.servers'}}")
        print(f"{AVRO_BASE}: {{'linger.ms': 5, 'queue.buffering.max.messages': 1000000, 'delivery.report.only.error': True}}")
        kinds = ("avro", "plain", "base")
        create_topics(bs, {f"bench-{run_id}-{k}-{r}": 6 for r in range(args.repeat + 1) for k in kinds})
        df.write.format("noop_arrow").option("warm", "true").mode("append").save()
        warm_broker(bs)
        sample = df.sample(fraction=min(1.0, 1000 / max(n, 1)), seed=1)
        write_to_kafka(sample, f"bench-{run_id}-avro-{args.repeat}", config={"bootstrap.servers": bs}, options=avro_opts)
        write_to_kafka(pre.sample(fraction=min(1.0, 1000 / max(n, 1)), seed=1), f"bench-{run_id}-plain-{args.repeat}",
                       config={"bootstrap.servers": bs})
        for r in range(args.repeat):
            for name, frame in ((NOOP_STRUCT, df), (NOOP_BYTES, pre)):
                t = time.perf_counter()
                frame.write.format("noop_arrow").mode("append").save()
                results.append((name, n / (time.perf_counter() - t)))
            # The two sinks the 0.5x target compares run back to back, in turns (Avro first on
            # even repeats, plain first on odd ones), so neither always follows the same path.
            sinks = [(AVRO_SINK, df, "avro", avro_opts), (AVRO_PLAIN, pre, "plain", None)]
            for name, frame, kind, options in sinks if r % 2 == 0 else sinks[::-1]:
                t = time.perf_counter()
                s = write_to_kafka(frame, f"bench-{run_id}-{kind}-{r}", config={"bootstrap.servers": bs}, options=options)
                el = time.perf_counter() - t
                assert s.records == n, f"{name}: {s.records} of {n}"
                results.append((name, n / el))
            t = time.perf_counter()
            counts = df.mapInArrow(_fastavro_arrow(bs, f"bench-{run_id}-base-{r}", schema.json, schema_id), "n long").collect()
            el = time.perf_counter() - t
            assert sum(row.n for row in counts) == n
            results.append((AVRO_BASE, n / el))
            for name, rate in results[-5:]:
                print(f"  repeat {r}: {name:70s} {rate:>12,.0f} rows/s", flush=True)
    spark.stop()
    load_after = os.getloadavg()
    per_run = [results[i : i + 5] for i in range(0, len(results), 5)]
    rates: dict[str, list[float]] = {}
    vs_base: dict[str, list[float]] = {}
    vs_plain: dict[str, list[float]] = {}
    for run in per_run:
        by = dict(run)
        for name, rate in run:
            rates.setdefault(name, []).append(rate)
            vs_base.setdefault(name, []).append(rate / by[AVRO_BASE])
            vs_plain.setdefault(name, []).append(rate / by[AVRO_PLAIN])

    def rng(xs: list[float], f: str) -> str:
        return f"{min(xs):{f}}" if len(xs) == 1 else f"{min(xs):{f}}–{max(xs):{f}}"

    print(f"\n{n:,} rows of a 10-column Avro record, local[2], Tansu on loopback, {args.repeat} run(s), interleaved")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (1 min), {os.cpu_count()} CPUs\n")
    print("| path | rows/s | vs fastavro + confluent-kafka baseline | vs plain Arrow writer on pre-encoded bytes |")
    print("|---|---:|---:|---:|")
    for name, xs in rates.items():
        print(f"| {name} | {rng(xs, ',.0f')} | {rng(vs_base[name], '.2f')}x | {rng(vs_plain[name], '.2f')}x |")
    # The two ratios the targets name, per repeat (each repeat runs every path once, back to back)
    # and their median: one repeat's ratio moves with whatever else the 2 CPUs were doing then.
    for name, target in ((AVRO_SINK, AVRO_PLAIN), (AVRO_SINK, AVRO_BASE)):
        per = [dict(run)[name] / dict(run)[target] for run in per_run]
        print(f"{name} / {target}: per repeat {', '.join(f'{r:.2f}' for r in per)}; "
              f"median {statistics.median(per):.2f}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2_000_000)
    ap.add_argument("--partitions", type=int, default=4, help="Spark partitions (tasks)")
    ap.add_argument("--repeat", type=int, default=1, help="run every path this many times, interleaved")
    ap.add_argument("--avro", action="store_true", help="Avro values against a Schema Registry (run_avro)")
    args = ap.parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if args.avro:
        return run_avro(args)

    from benchmarks.broker_warmup import warm_broker
    from pyspark.sql import SparkSession

    from kproducer.admin import create_topics
    from kproducer.embedded_broker import start_embedded_broker
    from kproducer.spark import register, write_to_kafka

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
        # Transactional ids unique to this run (a prefix is unique per application).
        run_id = uuid.uuid4().hex[:8]
        eos = {"deliveryGuarantee": "exactly_once", "transactionalIdPrefix": f"bench-{run_id}"}
        runs: list[tuple[str, str, dict[str, Any], dict[str, str], str]] = [
            ("arrow-defaults", "arrow", {"bootstrap.servers": bs}, {}, ALO_ARROW),
            ("arrow-eos", "arrow", {"bootstrap.servers": bs}, eos, EOS_ARROW),
            ("arrow", "arrow", {"bootstrap.servers": bs, "linger.ms": 5, "batch.size": 262144}, {},
             "kproducer sink, Arrow writer, batch.size=256 KiB"),
            ("row", "row", {"bootstrap.servers": bs}, {}, "kproducer sink, row writer, defaults"),
        ]  # fmt: skip
        for _topic, _mode, config, options, label in runs:
            print(f"{label}: producer config {config}, sink options {options or '{}'}")
        print("exactly-once: kafka.transaction.timeout.ms is the sink's default, 900000")
        kinds = ("arrow", "arrow-defaults", "arrow-eos", "row", "cf-rows", "cf-arrow")
        create_topics(bs, {f"bench-{run_id}-{k}-{r}": 6 for r in range(args.repeat) for k in kinds})

        # Warm-up, not measured: the Python workers start and import the clients; one small write
        # of every kproducer path, so that no measured run includes the making of the producer a
        # worker keeps for its config (the first connection, metadata, InitProducerId). The
        # confluent-kafka baselines make a producer per task, as a user of it would.
        df.write.format("noop_arrow").option("warm", "true").mode("append").save()
        warm_broker(bs)
        create_topics(bs, {f"bench-{run_id}-warm-{i}": 6 for i in range(len(runs))})
        # A few rows of every partition, so that every Python worker makes its producer (df.limit()
        # would leave one partition, one worker, and the other's producer to the first measured run).
        sample = df.sample(fraction=min(1.0, 1000 / max(n, 1)), seed=1)
        for i, (_topic, mode, config, options, _label) in enumerate(runs):
            write_to_kafka(sample, f"bench-{run_id}-warm-{i}", writer=mode, config=config, options=options)
        for r in range(args.repeat):
            t = time.perf_counter()
            df.write.format("noop_arrow").mode("append").save()
            results.append((NOOP, n / (time.perf_counter() - t), "-"))
            # The at-least-once and exactly-once Arrow writers swap places every repeat.
            order = runs if r % 2 == 0 else [runs[1], runs[0], *runs[2:]]
            for topic, mode, config, options, label in order:
                load = os.getloadavg()[0]
                t = time.perf_counter()
                s = write_to_kafka(df, f"bench-{run_id}-{topic}-{r}", writer=mode, config=config, options=options)
                el = time.perf_counter() - t
                assert s.available and s.records == n, f"{label}: {s.records} of {n} acknowledged ({s.note})"
                avg = s.metrics.get("batch-size-avg", 0.0)
                what = "committed in transactions" if options else "acked"
                results.append((label, n / el, f"{s.records:,} {what}, batch-size-avg {avg / 1024:,.0f} KiB"))
                print(f"  repeat {r}: {label:55s} {n / el:>12,.0f} rows/s (load {load:.1f})", flush=True)

            t = time.perf_counter()
            df.foreachPartition(_confluent_partition(bs, f"bench-{run_id}-cf-rows-{r}"))
            results.append((CF_ROWS, n / (time.perf_counter() - t), "flushed, 0 errors"))

            t = time.perf_counter()
            counts = df.mapInArrow(_confluent_arrow(bs, f"bench-{run_id}-cf-arrow-{r}"), "n long").collect()
            el = time.perf_counter() - t
            done = sum(row.n for row in counts)
            assert done == n, f"mapInArrow + confluent-kafka: {done} of {n} rows"
            results.append((CF_ARROW, n / el, f"{done:,} flushed, 0 errors"))

    spark.stop()
    load_after = os.getloadavg()
    rates: dict[str, list[float]] = {}
    checks: dict[str, str] = {}
    for name, rate, check in results:
        rates.setdefault(name, []).append(rate)
        checks[name] = check
    # Ratios within each repeat: against the faster of the two confluent-kafka baselines of that repeat.
    per_run = [results[i : i + len(results) // args.repeat] for i in range(0, len(results), len(results) // args.repeat)]
    ratios: dict[str, list[float]] = {}
    for run in per_run:
        base = max(r for name, r, _ in run if name in (CF_ROWS, CF_ARROW))
        for name, rate, _ in run:
            ratios.setdefault(name, []).append(rate / base)

    def rng(xs: list[float], fmt: str) -> str:
        lo, hi = min(xs), max(xs)
        return f"{lo:{fmt}}" if len(xs) == 1 else f"{lo:{fmt}}–{hi:{fmt}}"

    print(f"\n{n:,} rows x 100 B value, local[2], Tansu on loopback, {args.repeat} run(s) of each path, interleaved")
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f} (1 min), {os.cpu_count()} CPUs\n")
    print("| path | rows/s | vs strongest confluent-kafka baseline (same run) | check |")
    print("|---|---:|---:|---|")
    for name, xs in rates.items():
        print(f"| {name} | {rng(xs, ',.0f')} | {rng(ratios[name], '.2f')}x | {checks[name]} |")
    # Exactly-once against at-least-once: the same Arrow writer and producer defaults, same repeat.
    eos_ratios = [
        next(r for name, r, _ in run if name == EOS_ARROW) / next(r for name, r, _ in run if name == ALO_ARROW)
        for run in per_run
    ]
    print("\n| path | rows/s | vs at-least-once Arrow writer, defaults (same run) |")
    print("|---|---:|---:|")
    print(f"| {ALO_ARROW} | {rng(rates[ALO_ARROW], ',.0f')} | 1.00x |")
    print(f"| {EOS_ARROW} | {rng(rates[EOS_ARROW], ',.0f')} | {rng(eos_ratios, '.2f')}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
