"""The test Schema Registry (tests/support/schema_registry.py) against confluent-kafka's client, then kproducer's.

confluent-kafka's SchemaRegistryClient is the reference client: the test
registry must answer it as a real registry does (ids, versions, latest,
compatibility, config) before kproducer's own client is tested against it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError as ConfluentRegistryError

from kproducer.avro import AvroFormat
from kproducer.avro.registry import SchemaRegistryClient as KClient
from kproducer.avro.registry import SchemaRegistryError, subject_depends_on_topic, subject_name
from kproducer.avro.schema import AvroSchema
from tests.support.schema_registry import SchemaRegistry
from tests.support.tls import make_certificates

V1 = {"type": "record", "name": "User", "namespace": "com.example", "fields": [{"name": "id", "type": "long"}]}
V2_DEFAULT = {**V1, "fields": [*V1["fields"], {"name": "email", "type": ["null", "string"], "default": None}]}
V2_NO_DEFAULT = {**V1, "fields": [*V1["fields"], {"name": "email", "type": "string"}]}
V3_REMOVED = {**V1, "fields": []}


@pytest.fixture
def registry() -> Iterator[SchemaRegistry]:
    with SchemaRegistry() as reg:
        yield reg


def test_the_test_registry_answers_confluent_kafkas_client(registry: SchemaRegistry) -> None:
    client = SchemaRegistryClient({"url": registry.url})
    sid = client.register_schema("users-value", Schema(json.dumps(V1), "AVRO"))
    assert client.register_schema("users-value", Schema(json.dumps(V1), "AVRO")) == sid
    assert json.loads(client.get_schema(sid).schema_str) == V1
    latest = client.get_latest_version("users-value")
    assert (latest.schema_id, latest.version) == (sid, 1)
    found = client.lookup_schema("users-value", Schema(json.dumps(V1), "AVRO"))
    assert (found.schema_id, found.version) == (sid, 1)
    assert client.test_compatibility("users-value", Schema(json.dumps(V2_DEFAULT), "AVRO")) is True
    assert client.test_compatibility("users-value", Schema(json.dumps(V2_NO_DEFAULT), "AVRO")) is False
    with pytest.raises(ConfluentRegistryError) as info:
        client.register_schema("users-value", Schema(json.dumps(V2_NO_DEFAULT), "AVRO"))
    assert info.value.http_status_code == 409 and "'email'" in info.value.error_message
    sid2 = client.register_schema("users-value", Schema(json.dumps(V2_DEFAULT), "AVRO"))
    # (a new client: confluent-kafka's caches the latest version)
    assert sid2 != sid and SchemaRegistryClient({"url": registry.url}).get_latest_version("users-value").version == 2
    assert client.get_versions("users-value") == [1, 2]
    # A removed field is BACKWARD compatible (the new reader ignores it).
    assert client.test_compatibility("users-value", Schema(json.dumps(V3_REMOVED), "AVRO")) is True
    # The same schema under another subject keeps its id.
    assert client.register_schema("other-value", Schema(json.dumps(V1), "AVRO")) == sid
    assert client.get_compatibility() == "BACKWARD"
    client.set_compatibility("users-value", "FORWARD")
    assert client.get_compatibility("users-value") == "FORWARD"
    # FORWARD: the old schema must read the new; a removed field without a default in the old one fails.
    assert client.test_compatibility("users-value", Schema(json.dumps(V3_REMOVED), "AVRO")) is False
    client.set_compatibility(level="NONE")
    assert client.get_compatibility() == "NONE"
    with pytest.raises(ConfluentRegistryError) as missing:
        client.get_latest_version("nobody-value")
    assert missing.value.http_status_code == 404 and missing.value.error_code == 40401


def test_kproducers_client_against_the_test_registry(registry: SchemaRegistry) -> None:
    client = KClient(registry.url)
    v1 = AvroSchema(V1)
    sid = client.register("users-value", v1)
    assert client.register("users-value", v1) == sid
    assert client.lookup("users-value", v1).schema_id == sid
    assert client.latest("users-value").schema == v1
    assert client.schema_by_id(sid) == v1
    assert client.test_compatibility("users-value", AvroSchema(V2_DEFAULT)) == (True, [])
    ok, messages = client.test_compatibility("users-value", AvroSchema(V2_NO_DEFAULT))
    assert not ok and "'email'" in messages[0] and "/fields/1" in messages[0]
    assert client.test_compatibility("fresh-value", AvroSchema(V2_NO_DEFAULT)) == (True, [])
    with pytest.raises(SchemaRegistryError, match="HTTP 409.*'email'") as info:
        client.register("users-value", AvroSchema(V2_NO_DEFAULT))
    assert info.value.http_status == 409
    with pytest.raises(SchemaRegistryError, match="40401"):
        client.latest("nobody-value")
    with pytest.raises(SchemaRegistryError, match="40403"):
        client.lookup("users-value", AvroSchema(V3_REMOVED))
    assert client.global_compatibility() == "BACKWARD"
    assert SchemaRegistryClient({"url": registry.url}).get_compatibility() == "BACKWARD"  # confluent-kafka agrees


def test_basic_auth_and_tls(tmp_path) -> None:  # type: ignore[no-untyped-def]
    certs = make_certificates(tmp_path)
    with SchemaRegistry(users={"alice": "s3cret"}, certfile=str(certs.server)) as registry:
        assert registry.url.startswith("https://")
        good = KClient(registry.url, basic_auth_user_info="alice:s3cret", ssl_ca_location=str(certs.ca))
        assert good.register("t-value", AvroSchema("string")) == 1
        with pytest.raises(SchemaRegistryError, match="HTTP 401"):
            KClient(registry.url, basic_auth_user_info="alice:wrong", ssl_ca_location=str(certs.ca)).latest("t-value")
        with pytest.raises(SchemaRegistryError, match="no schema registry reachable"):
            KClient(registry.url, basic_auth_user_info="alice:s3cret").latest("t-value")  # unknown CA
        confluent = SchemaRegistryClient(
            {"url": registry.url, "basic.auth.user.info": "alice:s3cret", "ssl.ca.location": str(certs.ca)}
        )
        assert confluent.get_latest_version("t-value").schema_id == 1
        # The Spark sink's planning check: answers with good credentials, refuses with the registry's words.
        AvroFormat(registry.url, basic_auth_user_info="alice:s3cret", ssl_ca_location=str(certs.ca)).check_registry()
        with pytest.raises(SchemaRegistryError, match="HTTP 401"):
            AvroFormat(registry.url, basic_auth_user_info="alice:no", ssl_ca_location=str(certs.ca)).check_registry()
    AvroFormat("http://127.0.0.1:9", schema=V1, schema_id=7).check_registry()  # a pinned id asks no registry
    with pytest.raises(SchemaRegistryError, match="no schema registry reachable at http://127.0.0.1:9"):
        AvroFormat("http://127.0.0.1:9").check_registry()


def test_subject_name_strategies() -> None:
    rec = AvroSchema(V1)
    assert subject_name("topic", "users", rec, False) == "users-value"
    assert subject_name("TopicNameStrategy", "users", rec, True) == "users-key"
    assert subject_name("record", "users", rec, False) == "com.example.User"
    assert subject_name("io.confluent.kafka.serializers.subject.TopicRecordNameStrategy", "users", rec, False) == (
        "users-com.example.User"
    )
    with pytest.raises(ValueError, match="not a record"):
        subject_name("record", "users", AvroSchema("string"), False)
    with pytest.raises(ValueError, match="topic, record, topic_record"):
        subject_name("subject", "users", rec, False)
    assert [subject_depends_on_topic(s) for s in ("topic", "RecordNameStrategy", "topic_record")] == [True, False, True]
