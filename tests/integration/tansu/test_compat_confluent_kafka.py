"""Programs written as confluent-kafka's documentation shows, run on confluent-kafka and on kproducer.compat.

Each program takes the producer module as its only switch (``confluent_kafka`` or
``kproducer.compat.confluent_kafka``) and returns what it observed: delivery
reports, return values, exceptions. Each test runs it twice, once per module, on
topics with the same partition count, and asserts that both runs observed the
same and wrote the same records (partition, offset, key, value, headers), read
back with confluent-kafka's consumer.
"""

from __future__ import annotations

import importlib
import itertools
import json
from collections import defaultdict
from types import ModuleType
from typing import Any

import pytest

from tests.support.readback import create_topic, read_topic
from tests.support.tansu import TansuBroker
from tests.support.txn_reader import read_topic_transactional

MODULES = ("confluent_kafka", "kproducer.compat.confluent_kafka")
_run_ids = itertools.count()


def _twice(tansu: TansuBroker, topic_name: str, partitions: int, program: Any) -> tuple[Any, Any, list[str]]:
    """Run ``program(ck, bootstrap, topic)`` on each module, each on a fresh topic; (theirs, ours, topics)."""
    results = []
    topics = []
    for module in MODULES:
        ck = importlib.import_module(module)
        topic = f"{topic_name}-{'ck' if module == 'confluent_kafka' else 'kp'}"
        create_topic(tansu.bootstrap, topic, partitions)
        results.append(program(ck, tansu.bootstrap, topic))
        topics.append(topic)
    return results[0], results[1], topics


def _by_partition(reports: list[tuple[Any, ...]]) -> dict[int, list[tuple[Any, ...]]]:
    """Reports grouped by partition in the order they were served (the order librdkafka guarantees)."""
    out: dict[int, list[tuple[Any, ...]]] = defaultdict(list)
    for r in reports:
        out[r[0]].append(r)
    return dict(out)


def _written(tansu: TansuBroker, topic: str, expected: int, partitions: int) -> list[tuple[Any, ...]]:
    return [
        (r.partition, r.offset, r.key, r.value, r.headers)
        for r in read_topic(tansu.bootstrap, topic, expected, partitions=partitions)
    ]


# ----------------------------------------------------------------------------- delivery reports, keys, headers


def delivery_report_program(ck: ModuleType, bootstrap: str, topic: str) -> dict[str, Any]:
    reports: list[tuple[Any, ...]] = []

    def delivery_report(err: Any, msg: Any) -> None:
        """Called once for each message produced to indicate delivery result (confluent-kafka's example)."""
        if err is not None:
            reports.append((msg.partition(), "failed", err.code(), err.name()))
            return
        reports.append(
            (
                msg.partition(),
                msg.offset(),
                msg.key().decode("utf-8") if msg.key() is not None else None,
                msg.value().decode("utf-8"),
                msg.headers(),
                msg.timestamp()[0],
                len(msg),
                msg.error(),
                msg.topic() == topic,
            )
        )

    p = ck.Producer({"bootstrap.servers": bootstrap, "client.id": "migration-test"})
    polls = 0
    for i in range(60):
        p.poll(0)
        key = f"user-{i % 7}" if i % 2 else f"user-{i % 7}".encode()
        headers = {"trace-id": f"t{i}"} if i % 2 else [("trace-id", f"t{i}".encode()), ("n", None)]
        if i % 3:
            p.produce(topic, f"event {i}".encode(), key, callback=delivery_report, headers=headers)
        else:
            p.produce(topic, value=f"event {i}", key=key, on_delivery=delivery_report, headers=headers)
    left = p.flush()
    polls += p.poll(0)
    return {"left": left, "len": len(p), "polls_after_flush": polls, "reports": _by_partition(reports)}


def test_delivery_reports_keys_and_headers(tansu: TansuBroker, topic_name: str) -> None:
    theirs, ours, topics = _twice(tansu, topic_name, 3, delivery_report_program)
    assert theirs == ours
    assert sum(map(len, ours["reports"].values())) == 60 and ours["left"] == 0 and ours["len"] == 0
    assert _written(tansu, topics[0], 60, 3) == _written(tansu, topics[1], 60, 3)


# ----------------------------------------------------------------------------- exceptions from callbacks


def raising_callback_program(ck: ModuleType, bootstrap: str, topic: str) -> dict[str, Any]:
    served: list[str] = []
    raised: list[str] = []

    def on_delivery(err: Any, msg: Any) -> None:
        key = msg.key().decode()
        served.append(key)
        if key == "k3":
            raise ValueError("callback failed on k3")

    p = ck.Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        p.produce(topic, b"v", f"k{i}", on_delivery=on_delivery)
    for _ in range(5):
        try:
            left = p.flush(30)
        except ValueError as e:
            raised.append(str(e))
            continue
        if left == 0:
            break
    return {"served": sorted(served), "raised": raised, "len": len(p)}


def test_callback_exception_is_raised_from_flush_and_nothing_is_lost(tansu: TansuBroker, topic_name: str) -> None:
    theirs, ours, topics = _twice(tansu, topic_name, 1, raising_callback_program)
    assert theirs == ours
    assert ours == {"served": sorted(f"k{i}" for i in range(10)), "raised": ["callback failed on k3"], "len": 0}
    assert _written(tansu, topics[0], 10, 1) == _written(tansu, topics[1], 10, 1)


def raising_callback_poll_program(ck: ModuleType, bootstrap: str, topic: str) -> dict[str, Any]:
    """poll() serves the reports on the calling thread, and raises what a callback raised."""
    import threading

    caller = threading.get_ident()
    served: list[str] = []
    raised: list[str] = []
    threads: set[bool] = set()

    def on_delivery(err: Any, msg: Any) -> None:
        threads.add(threading.get_ident() == caller)
        key = msg.key().decode()
        served.append(key)
        if key == "k3":
            raise ValueError("callback failed on k3")

    p = ck.Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        p.produce(topic, b"v", f"k{i}", on_delivery=on_delivery)
    for _ in range(600):
        if len(served) == 10:
            break
        try:
            p.poll(0.1)
        except ValueError as e:
            raised.append(str(e))
    left = p.flush(30)
    return {"served": sorted(served), "raised": raised, "on_caller": threads, "left": left, "len": len(p)}


def test_poll_serves_reports_on_the_calling_thread_and_raises_callback_exceptions(
    tansu: TansuBroker, topic_name: str
) -> None:
    theirs, ours, topics = _twice(tansu, topic_name, 1, raising_callback_poll_program)
    assert theirs == ours
    assert ours == {
        "served": sorted(f"k{i}" for i in range(10)), "raised": ["callback failed on k3"], "on_caller": {True},
        "left": 0, "len": 0,
    }
    assert _written(tansu, topics[0], 10, 1) == _written(tansu, topics[1], 10, 1)


def test_a_callback_raising_while_closing_still_closes_the_producer(tansu: TansuBroker, topic_name: str) -> None:
    # Adapter only: confluent-kafka's own __exit__ turns the callback's exception into a SystemError.
    from kproducer.compat.confluent_kafka import Producer

    create_topic(tansu.bootstrap, topic_name, 1)
    served: list[bytes] = []

    def on_delivery(err: Any, msg: Any) -> None:
        served.append(msg.value())
        if msg.value() == b"v0":
            raise ValueError("callback failed on v0")

    with pytest.raises(ValueError, match="callback failed on v0"), Producer({"bootstrap.servers": tansu.bootstrap}) as p:
        p.produce(topic_name, b"v0", on_delivery=on_delivery)
        p.produce(topic_name, b"v1", on_delivery=on_delivery)
    assert p.engine.closed and served == [b"v0"] and len(p) == 1
    assert p.poll(0) == 1 and served == [b"v0", b"v1"] and len(p) == 0  # the other report is still served
    assert [r.value for r in read_topic(tansu.bootstrap, topic_name, 2)] == [b"v0", b"v1"]


# ----------------------------------------------------------------------------- local queue limits, purge, metadata


def queue_full_program(ck: ModuleType, bootstrap: str, topic: str) -> dict[str, Any]:
    p = ck.Producer({"bootstrap.servers": bootstrap, "queue.buffering.max.messages": 5, "linger.ms": 2000})
    out: dict[str, Any] = {}
    for i in range(5):
        p.produce(topic, f"v{i}".encode(), b"k")
    try:
        p.produce(topic, b"v5", b"k")
        out["sixth"] = "accepted"
    except BufferError:
        out["sixth"] = "BufferError"
    out["len_full"] = len(p)
    out["flush"] = p.flush(30)
    out["len_after"] = len(p)
    p.produce(topic, b"v6", b"k")
    out["flush_again"] = p.flush(30)
    return out


def test_buffer_error_when_the_local_queue_is_full(tansu: TansuBroker, topic_name: str) -> None:
    theirs, ours, topics = _twice(tansu, topic_name, 1, queue_full_program)
    assert theirs == ours == {"sixth": "BufferError", "len_full": 5, "flush": 0, "len_after": 0, "flush_again": 0}
    assert _written(tansu, topics[0], 6, 1) == _written(tansu, topics[1], 6, 1)


def queue_full_kbytes_program(ck: ModuleType, bootstrap: str, topic: str) -> dict[str, Any]:
    """queue.buffering.max.kbytes bounds the bytes not yet reported: 3 values of 300 bytes fit in 1 KiB, a 4th not."""
    p = ck.Producer({"bootstrap.servers": bootstrap, "queue.buffering.max.kbytes": 1, "linger.ms": 2000})
    out: dict[str, Any] = {}
    for i in range(3):
        p.produce(topic, bytes([48 + i]) * 300)
    try:
        p.produce(topic, b"x" * 300)
        out["fourth"] = "accepted"
    except BufferError:
        out["fourth"] = "BufferError"
    out["len_full"] = len(p)
    out["flush"] = p.flush(30)
    p.produce(topic, b"y" * 300)
    out["flush_again"] = p.flush(30)
    return out


def test_buffer_error_when_the_local_queue_bytes_are_full(tansu: TansuBroker, topic_name: str) -> None:
    theirs, ours, topics = _twice(tansu, topic_name, 1, queue_full_kbytes_program)
    assert theirs == ours == {"fourth": "BufferError", "len_full": 3, "flush": 0, "flush_again": 0}
    assert _written(tansu, topics[0], 4, 1) == _written(tansu, topics[1], 4, 1)


def purge_program(ck: ModuleType, bootstrap: str, topic: str) -> dict[str, Any]:
    codes: list[Any] = []
    p = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 60000})
    p.produce(topic, b"warm-up")
    p.flush(30)
    for i in range(5):
        p.produce(topic, f"v{i}".encode(), on_delivery=lambda err, msg: codes.append(err.code() if err else None))
    queued = len(p)
    p.purge(in_queue=True)
    left = p.flush(30)
    return {
        "queued": queued,
        "codes": codes,
        "purge_code": ck.KafkaError._PURGE_QUEUE,
        "left": left,
        "len": len(p),
    }


def test_purge_reports_purge_queue(tansu: TansuBroker, topic_name: str) -> None:
    theirs, ours, _ = _twice(tansu, topic_name, 1, purge_program)
    assert theirs == ours
    assert ours["codes"] == [ours["purge_code"]] * 5 and ours["left"] == 0 and ours["queued"] == 5


def list_topics_program(ck: ModuleType, bootstrap: str, topic: str) -> dict[str, Any]:
    p = ck.Producer({"bootstrap.servers": bootstrap})
    md = p.list_topics(topic, timeout=10)
    t = md.topics[topic]
    everything = p.list_topics(timeout=10)
    return {
        "partitions": sorted(t.partitions),
        "error": t.error,
        "leaders_known": all(pm.leader in md.brokers for pm in t.partitions.values()),
        "brokers": len(md.brokers),
        "listed": topic in everything.topics,
    }


def test_list_topics(tansu: TansuBroker, topic_name: str) -> None:
    theirs, ours, _ = _twice(tansu, topic_name, 4, list_topics_program)
    assert theirs == ours
    assert ours["partitions"] == [0, 1, 2, 3] and ours["leaders_known"] and ours["listed"]


# ----------------------------------------------------------------------------- transactions


def transactional_program(ck: ModuleType, bootstrap: str, topic: str) -> dict[str, Any]:
    reports: list[tuple[Any, ...]] = []

    def cb(err: Any, msg: Any) -> None:
        reports.append((msg.partition(), msg.offset(), msg.key(), msg.value(), None if err is None else err.code()))

    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-txn"})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(6):
        p.produce(topic, f"committed-{i}".encode(), f"k{i}".encode(), on_delivery=cb)
    p.commit_transaction(30)
    p.begin_transaction()
    p.produce(topic, b"aborted", b"k0", on_delivery=cb)
    p.flush(30)  # sent before the abort: hidden by the abort marker
    p.abort_transaction(30)
    p.begin_transaction()
    for i in range(3):
        p.produce(topic, f"second-{i}".encode(), f"k{i}".encode(), on_delivery=cb)
    p.commit_transaction(30)
    return {"reports": _by_partition(reports), "len": len(p)}


def test_transactions(tansu: TansuBroker, topic_name: str) -> None:
    theirs, ours, topics = _twice(tansu, topic_name, 2, transactional_program)
    assert theirs == ours
    views = [read_topic_transactional(tansu.bootstrap, t) for t in topics]
    for view in views:
        assert sorted(r.value for r in view.committed) == sorted(
            [f"committed-{i}".encode() for i in range(6)] + [f"second-{i}".encode() for i in range(3)]
        )
        assert [r.value for r in view.aborted] == [b"aborted"]
    assert [(r.partition, r.offset, r.key, r.value) for r in views[0].committed] == [
        (r.partition, r.offset, r.key, r.value) for r in views[1].committed
    ]


# ----------------------------------------------------------------------------- schema registry serializers

USER_SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "User",
        "namespace": "example",
        "fields": [
            {"name": "name", "type": "string"},
            {"name": "favorite_number", "type": "long"},
            {"name": "favorite_color", "type": "string"},
        ],
    }
)
USER_JSON_SCHEMA = json.dumps(
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "User",
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "favorite_number": {"type": "integer"},
            "favorite_color": {"type": "string"},
        },
        "required": ["name", "favorite_number", "favorite_color"],
    }
)


class User:
    def __init__(self, name: str, favorite_number: int, favorite_color: str) -> None:
        self.name = name
        self.favorite_number = favorite_number
        self.favorite_color = favorite_color


def user_to_dict(user: User, ctx: Any) -> dict[str, Any]:
    return {"name": user.name, "favorite_number": user.favorite_number, "favorite_color": user.favorite_color}


USERS = [User(f"user{i}", i * 7, ("red", "green", "blue")[i % 3]) for i in range(12)]


def json_serializing_program(ck: ModuleType, bootstrap: str, topic: str) -> dict[str, Any]:
    """confluent-kafka's json_producer example shape: SerializingProducer, StringSerializer key."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import StringSerializer

    registry = SchemaRegistryClient.new_client({"url": f"mock://json-{next(_run_ids)}"})
    producer = ck.SerializingProducer(
        {
            "bootstrap.servers": bootstrap,
            "key.serializer": StringSerializer("utf_8"),
            "value.serializer": JSONSerializer(USER_JSON_SCHEMA, registry, user_to_dict),
        }
    )
    reports: list[tuple[Any, ...]] = []
    for user in USERS:
        producer.poll(0.0)
        producer.produce(
            topic=topic,
            key=user.name,
            value=user,
            on_delivery=lambda err, msg: reports.append((msg.partition(), msg.offset(), msg.key(), msg.value(), err)),
        )
    try:
        producer.produce(topic=topic, key="bad", value=User("bad", "not a number", "red"))  # type: ignore[arg-type]
        bad = "accepted"
    except Exception as e:
        bad = type(e).__name__
    left = producer.flush()
    return {"reports": _by_partition(reports), "left": left, "bad": bad}


def avro_program(ck: ModuleType, bootstrap: str, topic: str) -> dict[str, Any]:
    """confluent-kafka's avro_producer example shape: Producer, serializers called with a SerializationContext."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext, StringSerializer

    registry = SchemaRegistryClient.new_client({"url": f"mock://avro-{next(_run_ids)}"})
    avro_serializer = AvroSerializer(registry, USER_SCHEMA, user_to_dict)
    string_serializer = StringSerializer("utf_8")
    producer = ck.Producer({"bootstrap.servers": bootstrap})
    reports: list[tuple[Any, ...]] = []

    def delivery_report(err: Any, msg: Any) -> None:
        reports.append((msg.partition(), msg.offset(), msg.key(), msg.value(), err))

    for user in USERS:
        producer.produce(
            topic=topic,
            key=string_serializer(user.name),
            value=avro_serializer(user, SerializationContext(topic, MessageField.VALUE)),
            on_delivery=delivery_report,
        )
    left = producer.flush()
    return {"reports": _by_partition(reports), "left": left}


def protobuf_serializing_program(ck: ModuleType, bootstrap: str, topic: str) -> dict[str, Any]:
    """confluent-kafka's protobuf_producer example shape, with a well-known message type."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import StringSerializer
    from google.protobuf import wrappers_pb2

    registry = SchemaRegistryClient.new_client({"url": f"mock://protobuf-{next(_run_ids)}"})
    producer = ck.SerializingProducer(
        {
            "bootstrap.servers": bootstrap,
            "key.serializer": StringSerializer("utf_8"),
            "value.serializer": ProtobufSerializer(wrappers_pb2.StringValue, registry, {"use.deprecated.format": False}),
        }
    )
    reports: list[tuple[Any, ...]] = []
    for user in USERS:
        producer.produce(
            topic=topic,
            key=user.name,
            value=wrappers_pb2.StringValue(value=user.favorite_color),
            on_delivery=lambda err, msg: reports.append((msg.partition(), msg.offset(), msg.key(), msg.value(), err)),
        )
    left = producer.flush()
    return {"reports": _by_partition(reports), "left": left}


@pytest.mark.parametrize(
    "program", [json_serializing_program, avro_program, protobuf_serializing_program], ids=["json", "avro", "protobuf"]
)
def test_schema_registry_serializers(tansu: TansuBroker, topic_name: str, program: Any) -> None:
    theirs, ours, topics = _twice(tansu, topic_name, 3, program)
    assert theirs == ours
    assert ours["left"] == 0 and sum(len(v) for v in ours["reports"].values()) == len(USERS)
    if "bad" in ours:
        assert ours["bad"] == "ValueSerializationError"
    assert _written(tansu, topics[0], len(USERS), 3) == _written(tansu, topics[1], len(USERS), 3)


# ----------------------------------------------------------------------------- what the adapter refuses


def test_librdkafka_settings_without_meaning_are_refused_by_name(tansu: TansuBroker) -> None:
    from kproducer.compat.confluent_kafka import KafkaError, KafkaException, Producer

    with pytest.raises(KafkaException, match="batch.num.messages is not supported by kproducer: .*batch.size") as e:
        Producer({"bootstrap.servers": tansu.bootstrap, "batch.num.messages": 1000})
    assert e.value.args[0].code() == KafkaError._INVALID_ARG
    with pytest.raises(KafkaException, match="stats_cb .*metrics"):
        Producer({"bootstrap.servers": tansu.bootstrap, "stats_cb": print, "statistics.interval.ms": 1000})


def test_librdkafka_names_are_translated(tansu: TansuBroker) -> None:
    from kproducer.compat.confluent_kafka import Producer

    p = Producer(
        {
            "metadata.broker.list": tansu.bootstrap,
            "queue.buffering.max.ms": 7,
            "message.timeout.ms": 45000,
            "request.required.acks": 1,
            "compression.codec": "gzip",
            "compression.level": 4,
            "default.topic.config": {"partitioner": "murmur2_random"},
        }
    )
    try:
        cfg = p.engine.config
        assert (cfg.linger_ms, cfg.delivery_timeout_ms, cfg.acks, cfg.compression_type) == (7, 45000, 1, "gzip")
        assert cfg.compression_gzip_level == 4 and cfg.partitioner_class == "murmur2_random"
    finally:
        p.close(10)


def offsets_in_transaction_program(ck: ModuleType, bootstrap: str, topic: str) -> dict[str, Any]:
    """Consume-transform-produce's commit step: the consumer stays confluent-kafka's (kproducer has none)."""
    from confluent_kafka import Consumer

    group = f"{topic}-group"
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        group_metadata = consumer.consumer_group_metadata()
    finally:
        consumer.close()
    p = ck.Producer({"bootstrap.servers": bootstrap, "transactional.id": f"{topic}-eos"})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic, b"transformed", b"k")
    p.send_offsets_to_transaction([ck.TopicPartition(topic, 0, 42)], group_metadata, 30)
    p.commit_transaction(30)
    check = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        (committed,) = check.committed([ck.TopicPartition(topic, 0)], timeout=20)
    finally:
        check.close()
    return {"committed": committed.offset, "len": len(p)}


def test_offsets_committed_with_the_transaction(tansu: TansuBroker, topic_name: str) -> None:
    theirs, ours, topics = _twice(tansu, topic_name, 1, offsets_in_transaction_program)
    assert theirs == ours == {"committed": 42, "len": 0}
    for t in topics:
        assert [r.value for r in read_topic_transactional(tansu.bootstrap, t).committed] == [b"transformed"]


def message_timeout_program(ck: ModuleType, bootstrap: str, topic: str) -> dict[str, Any]:
    from kproducer.embedded_broker import free_port

    codes: list[Any] = []
    # Nothing listens there: every record times out after message.timeout.ms.
    p = ck.Producer({"bootstrap.servers": f"127.0.0.1:{free_port()}", "message.timeout.ms": 1500})
    for i in range(3):
        p.produce(topic, f"v{i}".encode(), on_delivery=lambda err, msg: codes.append((err.code(), err.name(), msg.offset())))
    left_at_once = p.flush(0)  # nothing can be delivered: flush() returns what is left
    left = p.flush(60)
    p.close()  # confluent-kafka would log connection failures to the dead address until exit
    return {"codes": codes, "left_at_once": left_at_once, "left": left, "expected": ck.KafkaError._MSG_TIMED_OUT}


def test_message_timeout_reports_msg_timed_out(tansu: TansuBroker, topic_name: str) -> None:
    theirs, ours, _ = _twice(tansu, topic_name, 1, message_timeout_program)
    assert theirs == ours
    assert ours["codes"] == [(ours["expected"], "_MSG_TIMED_OUT", None)] * 3 and ours["left"] == 0
    assert ours["left_at_once"] == 3


def batch_and_context_program(ck: ModuleType, bootstrap: str, topic: str) -> dict[str, Any]:
    reports: list[tuple[Any, ...]] = []
    own: list[Any] = []
    with ck.Producer({"bootstrap.servers": bootstrap}) as p:
        truthy = bool(p)
        messages: list[dict[str, Any]] = [{"value": f"m{i}", "key": f"k{i}"} for i in range(5)]
        messages.append({"value": b"own", "key": b"ko", "callback": lambda err, msg: own.append(msg.value())})
        queued = p.produce_batch(
            topic, messages, on_delivery=lambda err, msg: reports.append((msg.partition(), msg.offset(), msg.key()))
        )
        cluster = p.cluster_id(10)
        p.flush(30)
    return {
        "truthy": truthy,
        "queued": queued,
        "errors": [m.get("_error") for m in messages],
        "reports": _by_partition(reports),
        "own": own,
        "cluster": cluster,
    }


def test_produce_batch_cluster_id_and_context_manager(tansu: TansuBroker, topic_name: str) -> None:
    theirs, ours, topics = _twice(tansu, topic_name, 2, batch_and_context_program)
    assert theirs == ours
    assert ours["queued"] == 6 and ours["own"] == [b"own"] and ours["truthy"] and isinstance(ours["cluster"], str)
    assert _written(tansu, topics[0], 6, 2) == _written(tansu, topics[1], 6, 2)


def test_set_sasl_credentials_is_refused_by_name(tansu: TansuBroker) -> None:
    from kproducer.compat.confluent_kafka import KafkaException, Producer

    with Producer({"bootstrap.servers": tansu.bootstrap}) as p, pytest.raises(KafkaException, match="sasl.username"):
        p.set_sasl_credentials("user", "secret")


def threaded_program(ck: ModuleType, bootstrap: str, topic: str) -> dict[str, Any]:
    """produce() from several threads on one producer (thread-safe in confluent-kafka), some with callbacks."""
    import threading

    p = ck.Producer({"bootstrap.servers": bootstrap})
    reported: list[bytes] = []

    def worker(n: int) -> None:
        for i in range(300):
            key = f"t{n}-{i}".encode()
            if i % 3:
                p.produce(topic, b"v", key)
            else:
                p.produce(topic, b"v", key, on_delivery=lambda err, msg: reported.append(msg.key()))
            if i % 50 == 0:
                p.poll(0)

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    left = p.flush(30)
    return {"left": left, "len": len(p), "reported": sorted(reported)}


def test_produce_from_several_threads(tansu: TansuBroker, topic_name: str) -> None:
    theirs, ours, topics = _twice(tansu, topic_name, 3, threaded_program)
    assert theirs == ours
    assert ours["left"] == 0 and len(ours["reported"]) == 400
    for t in topics:
        assert len({r[2] for r in _written(tansu, t, 1200, 3)}) == 1200


def only_errors_program(ck: ModuleType, bootstrap: str, topic: str) -> dict[str, Any]:
    seen: list[Any] = []
    p = ck.Producer(
        {"bootstrap.servers": bootstrap, "delivery.report.only.error": True, "on_delivery": lambda e, m: seen.append(m)}
    )
    for i in range(5):
        p.produce(topic, f"v{i}".encode(), b"k")
    left = p.flush(30)
    return {"seen": len(seen), "left": left, "len": len(p)}


def test_delivery_report_only_error(tansu: TansuBroker, topic_name: str) -> None:
    theirs, ours, topics = _twice(tansu, topic_name, 1, only_errors_program)
    assert theirs == ours == {"seen": 0, "left": 0, "len": 0}
    assert _written(tansu, topics[0], 5, 1) == _written(tansu, topics[1], 5, 1)
