"""AvroFormat's settings: option parsing (the Spark sink's), pickling to tasks, pinning, once-per-writer registry calls."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pytest

from kproducer.avro import AvroFormat
from kproducer.avro.serializer import avro_format_from_options
from kproducer.errors import ConfigError
from kproducer.spark.contract import parse_options
from tests.support.schema_registry import SchemaRegistry

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "t"}


def test_sink_options_accept_the_avro_options_per_side() -> None:
    opts = parse_options({
        **BASE, "value.format": "AVRO", "key.format": "bytes", "schema.registry.url": "http://r:8081",
        "value.subject.name.strategy": "record", "avro.record.name": "Order",
    })
    assert (opts.value_format, opts.key_format) == ("avro", "bytes")
    assert dict(opts.avro_options)["value.subject.name.strategy"] == "record"


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"value.format": "json"}, "allowed: bytes, avro"),
        ({"schema.registry.url": "http://r:8081"}, "neither 'value.format' nor 'key.format' is avro"),
        ({"value.format": "avro", "writer": "row"}, "written by the Arrow writer"),
        ({"value.format": "avro", "value.avro.schemma": "{}"}, "unknown option 'value.avro.schemma'"),
    ],
)
def test_bad_avro_options_are_refused_by_name(extra: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse_options({**BASE, **extra})


def test_format_from_options_and_its_checks() -> None:
    with pytest.raises(ConfigError, match="use.latest.version"):
        avro_format_from_options({"use.latest.version": "true"}, "value")
    with pytest.raises(ConfigError, match="allowed: true, false"):
        avro_format_from_options({"auto.register.schemas": "maybe"}, "value")
    with pytest.raises(ValueError, match="topic, record, topic_record"):
        avro_format_from_options({"subject.name.strategy": "nope"}, "value")
    with pytest.raises(ConfigError, match="an integer id"):
        avro_format_from_options({"value.avro.schema.id": "x"}, "value")
    fmt = avro_format_from_options({"key.avro.schema.id": "7", "avro.schema": '"string"'}, "key")
    assert fmt.is_key
    writer = fmt.writer("t", pa.string())
    assert writer.prefix == b"\x00\x00\x00\x00\x07"
    assert writer.encode(pa.array(["ab"])).array.to_pylist() == [b"\x00\x00\x00\x00\x07\x04ab"]


def test_registered_once_per_writer_pickled_and_pinned() -> None:
    t = pa.struct([pa.field("id", pa.int64())])
    with SchemaRegistry() as registry:
        fmt = AvroFormat(registry.url, record_name="R")
        w1 = fmt.writer("orders", t)
        assert fmt.writer("orders", t) is w1
        assert fmt.for_side(True) is fmt.for_side(True)
        registrations = [p for m, p in registry.requests if m == "POST"]
        assert registrations == ["/subjects/orders-value/versions"]
        copy = pickle.loads(pickle.dumps(fmt.pinned(w1.schema, w1.schema_id)))
        assert "R" in repr(w1.schema) and copy.writer("orders", t).prefix == w1.prefix
        assert [p for m, p in registry.requests if m == "POST"] == registrations  # a pinned copy never asks


def test_latest_version_and_lookup_only() -> None:
    import json

    from kproducer.avro import AvroSchema, SchemaRegistryClient, SchemaRegistryError

    t = pa.struct([pa.field("id", pa.int64())])
    given = {"type": "record", "name": "Event", "namespace": "com.example", "fields": [
        {"name": "id", "type": ["null", "long"], "default": None}]}
    with SchemaRegistry() as registry:
        sid = SchemaRegistryClient(registry.url).register("events-value", AvroSchema(given))
        latest = AvroFormat(registry.url, use_latest_version=True).writer("events", t)
        assert latest.schema_id == sid and json.loads(latest.schema.json) == given
        # ["null", "long"]: the value branch is 1.
        assert latest.encode(pa.array([{"id": 5}], t)).array.to_pylist() == [
            b"\x00" + sid.to_bytes(4, "big") + b"\x02\x0a"
        ]
        looked_up = AvroFormat(registry.url, schema=given, auto_register=False).writer("events", t)
        assert looked_up.schema_id == sid
        with pytest.raises(SchemaRegistryError, match="40403"):
            AvroFormat(registry.url, auto_register=False).writer("events", t)  # the derived schema is not registered
        with pytest.raises(SchemaRegistryError, match="40401"):
            AvroFormat(registry.url, use_latest_version=True).writer("nothing", t)
        with pytest.raises(ConfigError, match="not both"):
            AvroFormat(registry.url, use_latest_version=True, schema=given)
