"""value.format=avro in the Spark sink: local[2], Tansu, the test Schema Registry, read back by confluent-kafka.

The values are decoded with confluent-kafka's AvroDeserializer against the same
registry and compared row for row with the DataFrame's own Arrow rows; the
registry's refusal of a schema must fail the query on the driver, before any task.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kproducer.embedded_broker import EmbeddedBroker
from kproducer.spark import read_summaries, sink_options
from tests.support.avro_values import as_avro_reads
from tests.support.readback import create_topic, read_topic
from tests.support.schema_registry import SchemaRegistry

VALUE_EXPR = """
    named_struct(
        'id', id,
        'small', cast(id % 100 as smallint),
        'flag', id % 2 = 0,
        'ratio', cast(id / 8 as float),
        'score', if(id % 7 = 0, null, id * 1.25D),
        'name', concat('név-', id),
        'blob', cast(concat('b', id) as binary),
        'day', date_add(date'2020-01-01', cast(id as int)),
        'at', timestamp_micros(1700000000000000 + id * 1001),
        'local', cast(timestamp_micros(1000000000000000 + id) as timestamp_ntz),
        'price', cast(id * 3.125 as decimal(12, 3)),
        'tags', array(concat('t', id), 'x'),
        'attrs', map('k', cast(id as int)),
        'inner', named_struct('x', cast(id as int), 'ys', array(id * 0.5D, null))
    ) as value
"""


@pytest.fixture
def registry() -> Iterator[SchemaRegistry]:
    with SchemaRegistry() as reg:
        yield reg


def _avro_options(topic: str, bootstrap: str, registry: SchemaRegistry, **extra: str) -> dict[str, str]:
    return {
        **sink_options(topic, bootstrap_servers=bootstrap, linger_ms=5),
        "value.format": "avro", "schema.registry.url": registry.url, **extra,
    }


def _decode(registry: SchemaRegistry, topic: str, records: list[Any]) -> list[Any]:
    deser = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    return [deser(r.value, SerializationContext(topic, MessageField.VALUE)) for r in records]


def test_batch_write_every_type_read_back_by_confluent_kafka(
    spark: Any, tansu: EmbeddedBroker, registry: SchemaRegistry
) -> None:
    topic, n = "spark-avro-types", 3000
    create_topic(tansu.bootstrap, topic, 2)
    df = spark.range(0, n, 1, 3).selectExpr(VALUE_EXPR, "cast(id as string) as key")
    df.select("value", "key").write.format("kproducer").options(
        **_avro_options(topic, tansu.bootstrap, registry, **{"avro.record.name": "Reading",
                                                            "avro.record.namespace": "com.example"})
    ).mode("append").save()
    client = SchemaRegistryClient({"url": registry.url})
    latest = client.get_latest_version(f"{topic}-value")
    assert latest.version == 1 and json.loads(latest.schema.schema_str)["name"] == "Reading"
    # Registered once, by the driver: one registration in the registry's log.
    assert sum(1 for m, p in registry.requests if m == "POST" and p == f"/subjects/{topic}-value/versions") == 1
    records = read_topic(tansu.bootstrap, topic, n, partitions=2, timeout=120)
    assert all(r.value[:5] == b"\x00" + latest.schema_id.to_bytes(4, "big") for r in records)
    got = {r.key: v for r, v in zip(records, _decode(registry, topic, records), strict=True)}
    arrow = df.select("key", "value").toArrow()
    vtype = arrow.schema.field("value").type
    want = {k.encode(): as_avro_reads(v, vtype) for k, v in zip(arrow.column("key").to_pylist(),
                                                               arrow.column("value").to_pylist(), strict=True)}
    assert len(got) == n
    assert got == want


def test_a_schema_the_registry_refuses_fails_on_the_driver_naming_the_field(
    spark: Any, tansu: EmbeddedBroker, registry: SchemaRegistry
) -> None:
    topic = "spark-avro-compat"
    create_topic(tansu.bootstrap, topic, 1)
    opts = _avro_options(topic, tansu.bootstrap, registry)
    spark.range(3).selectExpr("named_struct('id', id) as value").write.format("kproducer").options(
        **opts).mode("append").save()
    # Spark's to_avro mapping gives fields no default: an added field breaks BACKWARD compatibility.
    wider = spark.range(3).selectExpr("named_struct('id', id, 'email', cast(id as string)) as value")
    jobs_before = spark.sparkContext.statusTracker().getJobIdsForGroup()
    with pytest.raises(Exception) as ei:
        wider.write.format("kproducer").options(**opts).mode("append").save()
    text = str(ei.value)
    assert re.search(r"refused by the schema registry's compatibility rule.*'email'", text, re.S), text[:3000]
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == jobs_before
    assert len(read_topic(tansu.bootstrap, topic, 3)) == 3


def test_a_row_that_cannot_be_written_fails_the_job_naming_row_column_and_rule(
    spark: Any, tansu: EmbeddedBroker, registry: SchemaRegistry
) -> None:
    topic = "spark-avro-badrow"
    create_topic(tansu.bootstrap, topic, 1)
    schema = json.dumps({"type": "record", "name": "r", "fields": [
        {"name": "id", "type": "long"}, {"name": "name", "type": "string"}]})
    df = spark.range(0, 10, 1, 1).selectExpr("named_struct('id', id, 'name', if(id = 7, null, 'x')) as value")
    with pytest.raises(Exception) as ei:
        df.write.format("kproducer").options(
            **_avro_options(topic, tansu.bootstrap, registry, **{"value.avro.schema": schema})
        ).mode("append").save()
    text = str(ei.value)
    assert "row 7" in text and "'value.name'" in text and "not a union with \"null\"" in text, text[:3000]


def test_streaming_avro_values(spark: Any, tansu: EmbeddedBroker, registry: SchemaRegistry, tmp_path: Path) -> None:
    topic, per_batch = "spark-avro-stream", 300
    create_topic(tansu.bootstrap, topic, 2)
    summary_path = str(tmp_path / "summaries.jsonl")
    stream = (
        spark.readStream.format("rate-micro-batch").option("rowsPerBatch", per_batch).option("numPartitions", 2)
        .load()
        .selectExpr("cast(value as string) as key", "named_struct('n', value, 'at', timestamp) as value")
    )
    query = (
        stream.writeStream.format("kproducer")
        .options(**_avro_options(topic, tansu.bootstrap, registry, **{"value.subject.name.strategy": "record",
                                                                     "value.avro.record.name": "Tick"}))
        .option("summary.path", summary_path)
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="1 second")
        .start()
    )
    try:
        deadline = time.monotonic() + 120
        while len(read_summaries(summary_path)) < 2 and time.monotonic() < deadline:
            assert query.exception() is None, query.exception()
            time.sleep(0.2)
    finally:
        query.stop()
    summaries = [s for s in read_summaries(summary_path) if not s.aborted]
    assert len(summaries) >= 2
    committed = sum(s.records for s in summaries)
    records = read_topic(tansu.bootstrap, topic, committed, partitions=2)
    assert SchemaRegistryClient({"url": registry.url}).get_subjects() == ["Tick"]
    values = _decode(registry, topic, records)
    ns = sorted(v["n"] for v in values)
    assert ns[:committed] == list(range(committed))
    assert all(r.key == str(v["n"]).encode() for r, v in zip(records, values, strict=True))


def test_topic_column_and_avro_keys(spark: Any, tansu: EmbeddedBroker, registry: SchemaRegistry) -> None:
    """Without a topic option each task registers the subjects of the topics it writes; keys are Avro too."""
    topics = ["spark-avro-route-a", "spark-avro-route-b"]
    for t in topics:
        create_topic(tansu.bootstrap, t, 1)
    n = 400
    df = spark.range(0, n, 1, 2).selectExpr(
        "element_at(array('spark-avro-route-a', 'spark-avro-route-b'), cast(id % 2 + 1 as int)) as topic",
        "named_struct('tenant', 'acme', 'id', id) as key",
        "named_struct('n', id, 'half', id / 2.0D) as value",
    )
    opts = {
        "kafka.bootstrap.servers": tansu.bootstrap, "kafka.linger.ms": "5",
        "value.format": "avro", "key.format": "avro", "schema.registry.url": registry.url,
        "key.avro.record.name": "OrderKey",
    }
    df.write.format("kproducer").options(**opts).mode("append").save()
    client = SchemaRegistryClient({"url": registry.url})
    assert sorted(client.get_subjects()) == sorted([f"{t}-key" for t in topics] + [f"{t}-value" for t in topics])
    assert json.loads(client.get_latest_version(f"{topics[0]}-key").schema.schema_str)["name"] == "OrderKey"
    deser = AvroDeserializer(client)
    for i, t in enumerate(topics):
        records = read_topic(tansu.bootstrap, t, n // 2)
        got = [(deser(r.key, SerializationContext(t, MessageField.KEY)),
                deser(r.value, SerializationContext(t, MessageField.VALUE))) for r in records]
        assert sorted(got, key=lambda kv: kv[0]["id"]) == [
            ({"tenant": "acme", "id": k}, {"n": k, "half": k / 2}) for k in range(i, n, 2)
        ]


@pytest.mark.parametrize(
    ("extra", "pattern"),
    [
        ({"schema.registry.url": "http://127.0.0.1:9"}, r"no schema registry reachable at http://127.0.0.1:9"),
        ({"value.avro.schema": json.dumps({"type": "record", "name": "r", "fields": [{"name": "id", "type": "string"}]})},
         r"value.id: Avro type string cannot be written from Arrow type int64"),
        ({"value.avro.schema": "{not json"}, r"not valid JSON"),
    ],
)
def test_registry_down_or_schema_not_fitting_fails_at_planning(
    spark: Any, registry: SchemaRegistry, extra: dict[str, str], pattern: str
) -> None:
    df = spark.range(3).selectExpr("named_struct('id', id) as value")
    opts = {**_avro_options("spark-avro-plan", "127.0.0.1:1", registry), **extra}
    jobs_before = spark.sparkContext.statusTracker().getJobIdsForGroup()
    with pytest.raises(Exception) as ei:
        df.write.format("kproducer").options(**opts).mode("append").save()
    assert re.search(pattern, str(ei.value), re.S), str(ei.value)[:3000]
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == jobs_before
    # The same with a topic column (the subjects come from the rows): still refused at planning.
    routed = df.selectExpr("'spark-avro-plan' as topic", "value")
    del opts["topic"]
    with pytest.raises(Exception) as ei:
        routed.write.format("kproducer").options(**opts).mode("append").save()
    assert re.search(pattern, str(ei.value), re.S), str(ei.value)[:3000]
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == jobs_before


def test_topic_column_with_the_record_strategy_is_checked_and_registered_on_the_driver(
    spark: Any, tansu: EmbeddedBroker, registry: SchemaRegistry
) -> None:
    """The record strategy's subject does not depend on the topic: a topic column still gets the driver's check."""
    topics = ["spark-avro-rec-a", "spark-avro-rec-b"]
    for t in topics:
        create_topic(tansu.bootstrap, t, 1)
    routed = "element_at(array('spark-avro-rec-a', 'spark-avro-rec-b'), cast(id % 2 + 1 as int)) as topic"
    opts = {
        "kafka.bootstrap.servers": tansu.bootstrap, "kafka.linger.ms": "5", "value.format": "avro",
        "schema.registry.url": registry.url, "value.subject.name.strategy": "record",
        "value.avro.record.name": "Shipment",
    }
    spark.range(0, 6, 1, 2).selectExpr(routed, "named_struct('id', id) as value").write.format("kproducer").options(
        **opts).mode("append").save()
    # One registration, by the driver, for both topics; the tasks only encode.
    assert sum(1 for m, p in registry.requests if m == "POST" and p == "/subjects/Shipment/versions") == 1
    client = SchemaRegistryClient({"url": registry.url})
    assert client.get_subjects() == ["Shipment"]
    for t in topics:
        assert sorted(v["id"] for v in _decode(registry, t, read_topic(tansu.bootstrap, t, 3))) in ([0, 2, 4], [1, 3, 5])
    # A field added without a default: BACKWARD refuses it, on the driver, before any task, naming the field.
    wider = spark.range(0, 6, 1, 2).selectExpr(routed, "named_struct('id', id, 'email', cast(id as string)) as value")
    jobs_before = spark.sparkContext.statusTracker().getJobIdsForGroup()
    with pytest.raises(Exception) as ei:
        wider.write.format("kproducer").options(**opts).mode("append").save()
    text = str(ei.value)
    assert re.search(r"record-named subject.*refused by the schema registry's compatibility rule.*'email'", text, re.S), (
        text[:3000]
    )
    assert spark.sparkContext.statusTracker().getJobIdsForGroup() == jobs_before
    for t in topics:
        assert len(read_topic(tansu.bootstrap, t, 3)) == 3
