"""send_arrow(value_format=AvroFormat(...)) on Tansu, read back by confluent-kafka's consumer and AvroDeserializer.

The test Schema Registry (tests/support/schema_registry.py) runs on loopback;
confluent-kafka's deserializer looks each record's schema id up there, so the
framing, the ids and the bodies are all checked by an independent reader.
"""

from __future__ import annotations

import datetime
import decimal
import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kproducer import Producer
from kproducer.avro import AvroFormat, AvroRecordError, SchemaRegistryError
from tests.support.avro_values import arrow_tables, as_avro_reads
from tests.support.readback import create_topic, read_topic
from tests.support.schema_registry import SchemaRegistry
from tests.support.tansu import TansuBroker

ROW_TYPE = pa.struct([
    pa.field("id", pa.int64(), nullable=False),
    pa.field("small", pa.int16()),
    pa.field("flag", pa.bool_()),
    pa.field("ratio", pa.float32()),
    pa.field("score", pa.float64()),
    pa.field("name", pa.string()),
    pa.field("blob", pa.binary()),
    pa.field("day", pa.date32()),
    pa.field("at", pa.timestamp("us", tz="UTC")),
    pa.field("at_ms", pa.timestamp("ms", tz="UTC")),
    pa.field("local", pa.timestamp("us")),
    pa.field("price", pa.decimal128(12, 3)),
    pa.field("tags", pa.list_(pa.string())),
    pa.field("attrs", pa.map_(pa.string(), pa.int32())),
    pa.field("inner", pa.struct([pa.field("x", pa.int32()), pa.field("ys", pa.large_list(pa.float64()))])),
])


def _rows(n: int) -> list[dict[str, Any]]:
    base = datetime.datetime(2024, 2, 29, 12, 0, tzinfo=datetime.UTC)
    out = []
    for i in range(n):
        nul = i % 5 == 4
        out.append({
            "id": i, "small": None if nul else i - 3, "flag": None if nul else i % 2 == 0,
            "ratio": None if nul else i / 4, "score": None if nul else i * 1.5, "name": None if nul else f"név-{i}",
            "blob": None if nul else bytes([i % 256]) * (i % 4), "day": None if nul else datetime.date(2020, 1, 1 + i % 28),
            "at": None if nul else base + datetime.timedelta(microseconds=i * 1001),
            "at_ms": None if nul else base - datetime.timedelta(milliseconds=i),
            "local": None if nul else datetime.datetime(1999, 12, 31, 23, 59, i % 60),
            "price": None if nul else decimal.Decimal(i * 7 - 20).scaleb(-3),
            "tags": None if nul else [f"t{j}" for j in range(i % 3)],
            "attrs": None if nul else [(f"k{j}", j) for j in range(i % 3)],
            "inner": None if nul else {"x": i, "ys": [float(i)] * (i % 2)},
        })
    return out


@pytest.fixture
def registry() -> Iterator[SchemaRegistry]:
    with SchemaRegistry() as reg:
        yield reg


def _read_avro(tansu: TansuBroker, registry: SchemaRegistry, topic: str, n: int) -> tuple[list[Any], list[Any]]:
    records = read_topic(tansu.bootstrap, topic, n)
    deser = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    values = [
        deser(r.value, SerializationContext(topic, MessageField.VALUE)) if r.value is not None else None
        for r in records
    ]
    return records, values


def test_every_supported_type_round_trips_through_confluent_kafkas_deserializer(
    tansu: TansuBroker, topic_name: str, registry: SchemaRegistry
) -> None:
    create_topic(tansu.bootstrap, topic_name)
    rows = _rows(40)
    table = pa.table({"value": pa.array(rows, ROW_TYPE), "key": pa.array([f"k{i}" for i in range(40)])})
    fmt = AvroFormat(registry.url)
    with Producer({"bootstrap.servers": tansu.bootstrap, "linger.ms": 5}) as producer:
        fut = producer.send_arrow(table, topic_name, value_format=fmt)
        metadata = fut.result(30)
        # A second call reuses the registered id: the registry is not asked again.
        before = len(registry.requests)
        producer.send_arrow(table.slice(0, 3), topic_name, value_format=fmt).result(30)
        assert len(registry.requests) == before
    assert [m.offset for m in metadata] == list(range(40))
    records, values = _read_avro(tansu, registry, topic_name, 43)
    latest = SchemaRegistryClient({"url": registry.url}).get_latest_version(f"{topic_name}-value")
    assert latest.version == 1 and json.loads(latest.schema.schema_str)["name"] == "topLevelRecord"
    for r in records:
        assert r.value[:5] == b"\x00" + latest.schema_id.to_bytes(4, "big")
    want = [as_avro_reads(v, ROW_TYPE) for v in table.column("value").to_pylist()]
    assert values[:40] == want
    assert values[40:] == want[:3]
    assert [r.key for r in records[:40]] == [f"k{i}".encode() for i in range(40)]


def test_avro_keys_topic_column_and_record_subjects(
    tansu: TansuBroker, topic_name: str, registry: SchemaRegistry
) -> None:
    topics = [f"{topic_name}-a", f"{topic_name}-b"]
    for t in topics:
        create_topic(tansu.bootstrap, t)
    key_type = pa.struct([pa.field("tenant", pa.string(), nullable=False), pa.field("n", pa.int32(), nullable=False)])
    n = 10
    table = pa.table({
        "value": pa.array([{"v": float(i)} for i in range(n)], pa.struct([pa.field("v", pa.float64())])),
        "key": pa.array([{"tenant": "t", "n": i} for i in range(n)], key_type),
        "topic": [topics[i % 2] for i in range(n)],
    })
    value_fmt = AvroFormat(registry.url, subject_name_strategy="topic_record", record_name="Reading",
                           record_namespace="com.example")
    key_fmt = AvroFormat(registry.url, record_name="ReadingKey")
    with Producer({"bootstrap.servers": tansu.bootstrap, "linger.ms": 5}) as producer:
        producer.send_arrow(table, None, value_format=value_fmt, key_format=key_fmt).result(30)
    client = SchemaRegistryClient({"url": registry.url})
    assert sorted(client.get_subjects()) == sorted(
        [f"{t}-com.example.Reading" for t in topics] + [f"{t}-key" for t in topics]
    )
    deser = AvroDeserializer(client)
    for t in topics:
        records = read_topic(tansu.bootstrap, t, n // 2)
        got = [(deser(r.key, SerializationContext(t, MessageField.KEY)), deser(r.value, SerializationContext(t, MessageField.VALUE)))
               for r in records]
        start = topics.index(t)
        assert got == [({"tenant": "t", "n": i}, {"v": float(i)}) for i in range(start, n, 2)]


def test_a_row_that_cannot_be_written_fails_alone_and_the_others_are_delivered(
    tansu: TansuBroker, topic_name: str, registry: SchemaRegistry
) -> None:
    create_topic(tansu.bootstrap, topic_name)
    schema = {"type": "record", "name": "Payment", "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}},
    ]}
    t = pa.struct([pa.field("id", pa.int64()), pa.field("amount", pa.decimal128(10, 2))])
    values = [
        {"id": 0, "amount": decimal.Decimal("1.00")},
        {"id": None, "amount": decimal.Decimal("2.00")},
        {"id": 2, "amount": decimal.Decimal("12345.67")},
        {"id": 3, "amount": decimal.Decimal("-999.99")},
    ]
    table = pa.table({"value": pa.array(values, t)})
    reports: list[tuple[Any, Any]] = []
    with Producer({"bootstrap.servers": tansu.bootstrap, "linger.ms": 5}) as producer:
        fut = producer.send_arrow(table, topic_name, value_format=AvroFormat(registry.url, schema=schema),
                                  callback=lambda md, exc: reports.append((md, exc)))
        errors = fut.exceptions(30)
        metadata = fut.metadata(30)
        producer.flush(30)
    assert errors[0] is None and errors[3] is None
    assert isinstance(errors[1], AvroRecordError) and errors[1].row == 1 and errors[1].field == "value.id"
    assert "not a union" in str(errors[1])
    assert isinstance(errors[2], AvroRecordError) and errors[2].field == "value.amount" and "precision of 5" in str(errors[2])
    assert metadata[1] is None and metadata[2] is None and [metadata[0].offset, metadata[3].offset] == [0, 1]
    assert sum(1 for _md, exc in reports if exc is not None) == 2 and sum(1 for md, _ in reports if md) == 2
    _records, got = _read_avro(tansu, registry, topic_name, 2)
    assert got == [{"id": 0, "amount": decimal.Decimal("1.00")}, {"id": 3, "amount": decimal.Decimal("-999.99")}]


def test_a_schema_the_registry_refuses_fails_the_call_before_any_row_is_sent(
    tansu: TansuBroker, topic_name: str, registry: SchemaRegistry
) -> None:
    create_topic(tansu.bootstrap, topic_name)
    first = pa.table({"value": pa.array([{"id": 1}], pa.struct([pa.field("id", pa.int64())]))})
    second = pa.table({"value": pa.array([{"id": 1, "email": "a@b"}], pa.struct([
        pa.field("id", pa.int64()), pa.field("email", pa.string())]))})
    with Producer({"bootstrap.servers": tansu.bootstrap, "linger.ms": 5}) as producer:
        producer.send_arrow(first, topic_name, value_format=AvroFormat(registry.url)).result(30)
        with pytest.raises(SchemaRegistryError, match="HTTP 409.*'email'"):
            producer.send_arrow(second, topic_name, value_format=AvroFormat(registry.url))
        with pytest.raises(SchemaRegistryError, match="no schema registry reachable"):
            producer.send_arrow(first, topic_name, value_format=AvroFormat("http://127.0.0.1:9"))
        producer.flush(30)
    assert len(read_topic(tansu.bootstrap, topic_name, 1)) == 1


def test_async_producer_send_arrow_with_avro(tansu: TansuBroker, topic_name: str, registry: SchemaRegistry) -> None:
    import asyncio

    from kproducer.aio import AsyncProducer

    create_topic(tansu.bootstrap, topic_name)
    t = pa.struct([pa.field("n", pa.int32())])
    table = pa.table({"value": pa.array([{"n": i} for i in range(50)], t)})

    async def main() -> list[Any]:
        async with AsyncProducer({"bootstrap.servers": tansu.bootstrap, "linger.ms": 5}) as p:
            fut = await p.send_arrow(table, topic_name, value_format=AvroFormat(registry.url))
            return list(await fut)

    assert [md.offset for md in asyncio.run(main())] == list(range(50))
    _records, values = _read_avro(tansu, registry, topic_name, 50)
    assert values == [{"n": i} for i in range(50)]


def test_generated_tables_round_trip_through_tansu_and_confluent_kafkas_deserializer(
    tansu: TansuBroker, topic_name: str, registry: SchemaRegistry
) -> None:
    """The encoder's generated tables (nested structs, lists, maps, unions, sliced arrays), each sent and read back."""
    from hypothesis import HealthCheck, given, settings

    create_topic(tansu.bootstrap, topic_name)
    deser = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    sent = [0]
    with Producer({"bootstrap.servers": tansu.bootstrap, "linger.ms": 1}) as producer:

        @settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
        @given(arrow_tables())
        def check(table: tuple[Any, Any]) -> None:
            t, arr = table
            if len(arr) == 0:
                return
            # A subject per example: each generated type is a schema of its own.
            fmt = AvroFormat(registry.url, subject_name_strategy="topic_record", record_name=f"R{sent[0]}")
            producer.send_arrow(pa.table({"value": arr}), topic_name, value_format=fmt).result(30)
            records = read_topic(tansu.bootstrap, topic_name, sent[0] + len(arr))[sent[0]:]
            sent[0] += len(arr)
            got = [deser(r.value, SerializationContext(topic_name, MessageField.VALUE)) if r.value is not None else None
                   for r in records]
            assert got == [as_avro_reads(v, t) for v in arr.to_pylist()]

        check()


def test_a_bad_row_routed_by_a_topic_column_is_named_by_the_callers_row(
    tansu: TansuBroker, topic_name: str, registry: SchemaRegistry
) -> None:
    topics = [f"{topic_name}-a", f"{topic_name}-b"]
    for t in topics:
        create_topic(tansu.bootstrap, t)
    schema = {"type": "record", "name": "r", "fields": [{"name": "n", "type": "long"}]}
    table = pa.table({
        "value": pa.array([{"n": 0}, {"n": 1}, {"n": 2}, {"n": None}], pa.struct([pa.field("n", pa.int64())])),
        "topic": [topics[0], topics[1], topics[0], topics[1]],
    })
    with Producer({"bootstrap.servers": tansu.bootstrap, "linger.ms": 5}) as producer:
        errors = producer.send_arrow(table, None, value_format=AvroFormat(registry.url, schema=schema)).exceptions(30)
    assert errors[:3] == [None, None, None]
    assert isinstance(errors[3], AvroRecordError) and errors[3].row == 3 and str(errors[3]).startswith("row 3:")
