"""Arrow -> Avro encoding alone, no Kafka: kproducer's C encoder, its Python twin, and fastavro per row.

The rows are the 10-column record of ``spark_sink.py --avro`` (ints, strings, a
timestamp, a nullable double, a nested struct), built as one Arrow StructArray
before the clock starts. fastavro's path is what a Python sink does per row:
``to_pylist()`` (a dict per row), then ``schemaless_writer`` into a buffer that
starts with the registry header. Rows/s are the best of ``--repeat`` runs.

``--send`` measures a Spark task's Python side without Spark: batches of 10,000
such rows (and a string key) go through the sink's steps (``encode_batch``,
``plan_arrow_batch``, ``Producer.send_arrow``) to the embedded broker, against
the same rows pre-encoded as bytes through the same steps minus the encoding;
each run ends with ``flush()``.

    .venv/bin/python benchmarks/avro_encode.py [--rows 500000] [--repeat 3] [--send]
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


def _rows(n: int) -> Any:
    import pyarrow as pa
    import pyarrow.compute as pc

    ids = pa.array(range(n), pa.int64())
    as_str = pc.cast(ids, pa.string())
    cities = pa.array(["Lisboa", "Zürich", "Oslo", "Montréal", "Kyoto"])
    return pa.StructArray.from_arrays(
        [
            ids,
            pc.cast(pc.bit_wise_and(ids, 0xFFFF), pa.int32()),
            pc.binary_join_element_wise(pa.scalar("user-"), as_str, ""),
            pc.take(cities, pc.bit_wise_and(ids, 3)),
            pc.cast(pc.add(pc.multiply(ids, 1000), 1_700_000_000_000_000), pa.timestamp("us", tz="UTC")),
            pc.if_else(pc.equal(pc.bit_wise_and(ids, 7), 0), pa.scalar(None, pa.float64()), pc.divide(pc.cast(ids, pa.float64()), 7.0)),
            pc.cast(pc.bit_wise_and(ids, 31), pa.int32()),
            pc.if_else(pc.equal(pc.bit_wise_and(ids, 1), 0), "shipped", "pending"),
            pc.multiply(ids, 37),
            pa.StructArray.from_arrays(
                [pc.cast(pc.bit_wise_and(ids, 0xFFFF), pa.int32()), pc.binary_join_element_wise(as_str, pa.scalar(" Main St"), "")],
                names=["zip", "street"],
            ),
        ],
        names=["id", "user_id", "name", "city", "at", "score", "qty", "status", "amount_cents", "address"],
    )


def _best(fn: Callable[[], Any], repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def send(rows: int, repeat: int) -> int:
    """--send: the sink's Python steps to the embedded broker, Avro against pre-encoded bytes."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from kproducer import Producer
    from kproducer.admin import create_topics
    from kproducer.avro import AvroFormat
    from kproducer.embedded_broker import start_embedded_broker
    from kproducer.spark.avro_formats import encode_batch
    from kproducer.spark.contract import SinkSchema
    from kproducer.spark.convert import plan_arrow_batch

    per = 10_000
    batches = max(1, rows // per)
    batch = pa.RecordBatch.from_arrays([pc.cast(pa.array(range(per)), pa.string()), _rows(per)], names=["key", "value"])
    fmt = AvroFormat(schema_id=1)
    cols = SinkSchema(value="value", value_is_string=False, key="key", key_is_string=True)
    encoded = encode_batch(batch, cols, "t", fmt, None)
    pre = pa.RecordBatch.from_arrays([encoded.column(0), encoded.column(1).cast(pa.binary())], names=["key", "value"])
    best: dict[str, float] = {}
    with start_embedded_broker() as broker:
        create_topics(broker.bootstrap, {f"{k}-{r}": 6 for k in ("avro", "plain") for r in range(repeat)})
        with Producer({"bootstrap.servers": broker.bootstrap}) as producer:
            print(f"producer config {{'bootstrap.servers'}}; {batches} batches of {per:,} rows")
            for r in range(repeat):
                for name in ("avro", "plain"):
                    t = time.perf_counter()
                    for _ in range(batches):
                        data = encode_batch(batch, cols, f"{name}-{r}", fmt, None) if name == "avro" else pre
                        for part in plan_arrow_batch(data, cols, f"{name}-{r}"):
                            producer.send_arrow(part.batch, part.topic, value_column="value", key_column="key")
                    producer.flush(120)
                    best[name] = max(best.get(name, 0.0), batches * per / (time.perf_counter() - t))
    print("| task's Python side | rows/s | vs pre-encoded bytes |")
    print("|---|---:|---:|")
    print(f"| struct rows -> encode_batch -> send_arrow | {best['avro']:,.0f} | {best['avro'] / best['plain']:.2f}x |")
    print(f"| pre-encoded bytes -> send_arrow | {best['plain']:,.0f} | 1.00x |")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--send", action="store_true", help="the sink's Python steps to the embedded broker")
    args = ap.parse_args()
    if args.send:
        return send(args.rows, args.repeat)

    import fastavro

    from kproducer.avro import derive_schema, encoder
    from kproducer.avro.writer import AvroColumnWriter

    if not encoder.AVAILABLE:
        print("the C encoder is not built (or KPRODUCER_PURE_PYTHON=1): build it first")
        return 1
    n = args.rows
    arr = _rows(n)
    writer = AvroColumnWriter(derive_schema(arr.type), 1)
    nodes = writer.plan_for(arr.type).bind(arr)
    small = min(n, 50_000)
    small_nodes = writer.plan_for(arr.type).bind(arr.slice(0, small))
    parsed = fastavro.parse_schema(json.loads(writer.schema.json))
    sliced = arr.slice(0, small)

    def fastavro_rows() -> None:
        for row in sliced.to_pylist():
            buf = io.BytesIO()
            buf.write(writer.prefix)
            fastavro.schemaless_writer(buf, parsed, row)
            buf.getvalue()

    c = n / _best(lambda: encoder.encode(nodes, writer.prefix), args.repeat)
    whole = n / _best(lambda: writer.encode(arr), args.repeat)
    ref = small / _best(lambda: encoder.encode_reference(small_nodes, writer.prefix), 1)
    fa = small / _best(fastavro_rows, args.repeat)
    size = len(encoder.encode(nodes, writer.prefix).data) / n
    print(f"{n:,} rows of the 10-column record ({size:.1f} B per framed row), best of {args.repeat}")
    print("| encoder | rows/s | vs fastavro per row |")
    print("|---|---:|---:|")
    print(f"| kproducer C encoder (encode of the bound plan) | {c:,.0f} | {c / fa:.1f}x |")
    print(f"| kproducer AvroColumnWriter.encode (bind + C + Arrow array) | {whole:,.0f} | {whole / fa:.1f}x |")
    print(f"| to_pylist + fastavro schemaless_writer per row ({small:,} rows) | {fa:,.0f} | 1.0x |")
    print(f"| kproducer Python twin (KPRODUCER_PURE_PYTHON path, {small:,} rows, 1 run) | {ref:,.0f} | {ref / fa:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
