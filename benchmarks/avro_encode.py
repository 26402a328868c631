"""Arrow -> Avro encoding alone, no Kafka: kproducer's C encoder, its Python twin, and fastavro per row.

The rows are the 10-column record of ``spark_sink.py --avro`` (ints, strings, a
timestamp, a nullable double, a nested struct), built as one Arrow StructArray
before the clock starts. fastavro's path is what a Python sink does per row:
``to_pylist()`` (a dict per row), then ``schemaless_writer`` into a buffer that
starts with the registry header. Rows/s are the best of ``--repeat`` runs.

    .venv/bin/python benchmarks/avro_encode.py [--rows 500000] [--repeat 3]
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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()

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
