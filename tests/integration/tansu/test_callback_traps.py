"""The native API's migration traps, on a real broker: report contents, raising callbacks, waits from a callback,
and confluent-kafka serializer objects on Producer, AsyncProducer and send_batch."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
from typing import Any

import pytest

from kproducer.aio import AsyncProducer
from kproducer.delivery import DeliveryReport
from kproducer.errors import IllegalStateError, KafkaError
from kproducer.producer import Producer
from kproducer.structs import RecordMetadata
from tests.support.paths import REPO_ROOT as ROOT
from tests.support.readback import create_topic, read_topic
from tests.support.tansu import TansuBroker


def _producer(tansu: TansuBroker, **extra: Any) -> Producer:
    return Producer({"bootstrap.servers": tansu.bootstrap, "max.block.ms": 10_000, **extra})


def test_report_gives_the_bytes_sent_and_the_header_pairs(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    seen: list[tuple[Any, ...]] = []

    def on_delivery(err: KafkaError | None, msg: DeliveryReport) -> None:
        # The usual confluent-kafka callback: decode the key.
        seen.append((err, msg.key().decode(), msg.value(), msg.headers()))

    with _producer(tansu) as p:
        p.send(topic_name, "value-1", "key-1", headers={"trace": "t1", "empty": None}, on_delivery=on_delivery)
        p.send(topic_name, b"value-2", b"key-2", on_delivery=on_delivery)  # the C lane's shape
        p.send(topic_name, bytearray(b"value-3"), "key-3", headers=[("a", b"1"), ("a", "2")], on_delivery=on_delivery)
        p.flush()
    assert seen == [
        (None, "key-1", b"value-1", [("trace", b"t1"), ("empty", None)]),
        (None, "key-2", b"value-2", None),
        (None, "key-3", b"value-3", [("a", b"1"), ("a", b"2")]),
    ]
    assert [(r.key, r.value, r.headers) for r in read_topic(tansu.bootstrap, topic_name, 3)] == [
        (b"key-1", b"value-1", [("trace", b"t1"), ("empty", None)]),
        (b"key-2", b"value-2", []),
        (b"key-3", b"value-3", [("a", b"1"), ("a", b"2")]),
    ]


def test_bulk_reports_give_the_bytes_sent_and_the_header_pairs(tansu: TansuBroker, topic_name: str) -> None:
    # send_batch and send_arrow report each row as send() does: its key and value as the bytes the record
    # carries (bytearray, memoryview and Arrow string cells included) and the call's header pairs.
    import pyarrow as pa

    create_topic(tansu.bootstrap, topic_name, 1)
    seen: list[tuple[Any, ...]] = []

    def on_delivery(err: KafkaError | None, msg: DeliveryReport) -> None:
        seen.append((err, msg.key().decode(), msg.value(), msg.headers()))

    with _producer(tansu) as p:
        p.send_batch(
            topic_name, [b"v1", bytearray(b"v2"), memoryview(b"v3")], [b"k1", bytearray(b"k2"), memoryview(b"k3")],
            headers={"h": "batch"}, on_delivery=on_delivery,
        ).result(30)
        p.send_arrow(
            pa.table({"key": ["k4"], "value": ["v4"]}), topic_name, headers=[("h", b"arrow")], on_delivery=on_delivery
        ).result(30)
        p.flush()
    expected = [(f"k{i}", f"v{i}".encode(), [("h", b"batch" if i < 4 else b"arrow")]) for i in range(1, 5)]
    assert seen == [(None, *e) for e in expected]
    assert [(r.key.decode(), r.value, r.headers) for r in read_topic(tansu.bootstrap, topic_name, 4)] == expected


def test_report_gives_serialized_bytes_with_a_serializer_and_on_async_producer(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    seen: list[tuple[Any, Any]] = []
    with _producer(tansu, **{"value.serializer": "json", "key.serializer": "int"}) as p:
        p.send(topic_name, {"n": 1}, 7, on_delivery=lambda err, msg: seen.append((msg.key(), msg.value())))
        p.flush()

    async def main() -> None:
        async with AsyncProducer({"bootstrap.servers": tansu.bootstrap, "value.serializer": "json"}) as ap:
            fut = await ap.send(topic_name, [1, 2], "k", on_delivery=lambda err, msg: seen.append((msg.key(), msg.value())))
            await fut

    asyncio.run(main())
    assert seen == [(b"\x00\x00\x00\x07", b'{"n":1}'), (b"k", b"[1,2]")]


_NO_LOGGING_PROGRAM = textwrap.dedent(
    """
    import sys
    from kproducer import Producer

    bootstrap, topic = sys.argv[1], sys.argv[2]
    p = Producer({"bootstrap.servers": bootstrap})

    def on_delivery(err, msg):
        if msg.key() in (b"k3", b"k7"):
            raise ValueError("callback failed on " + msg.key().decode())

    futures = [p.send(topic, b"v", f"k{i}", on_delivery=on_delivery) for i in range(10)]
    p.flush()
    print("offsets", [f.result().offset for f in futures])
    print("metric", p.metrics()["callback-error-total"])
    p.close()
    """
)


def test_a_raising_callback_is_visible_without_logging_configured(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    # A fresh interpreter: nothing configured logging (pytest's capture handlers would count as configured).
    done = subprocess.run(
        [sys.executable, "-c", _NO_LOGGING_PROGRAM, tansu.bootstrap, topic_name],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / "src"), **_passthrough_env()},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "offsets [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]" in done.stdout
    assert "metric 2.0" in done.stdout
    err = done.stderr
    # The first exception once, with its traceback; the total at close.
    assert err.count("kproducer ERROR") == 2, err
    assert "ValueError: callback failed on k3" in err and "callback failed on k7" not in err
    assert "2 delivery callback exceptions in total" in err
    records = read_topic(tansu.bootstrap, topic_name, 10)
    assert [r.key for r in records] == [f"k{i}".encode() for i in range(10)]


def test_callbacks_raising_on_the_callers_thread_count_in_the_producers_metric(
    tansu: TansuBroker, topic_name: str
) -> None:
    # A record that fails inside send() (here its serializer), a purge and a failed bulk call run their
    # callbacks on the application's thread: what those raise counts in this producer's metric too.
    create_topic(tansu.bootstrap, topic_name, 1)

    def raising(md: Any, exc: Any) -> None:
        raise ValueError("callback failed")

    with _producer(tansu, **{"value.serializer": "json", "linger.ms": 60_000}) as p:
        failed = p.send(topic_name, object(), b"k", callback=raising)  # json cannot write it
        assert failed.done() and p.metrics()["callback-error-total"] == 1.0
        queued = p.send(topic_name, {"n": 1}, b"k", callback=raising)
        p.purge()
        assert queued.done() and p.metrics()["callback-error-total"] == 2.0
    with _producer(tansu) as p:
        bad = p.send_batch("not a valid topic name!", [b"v1", b"v2"], callback=raising)
        assert bad.done() and p.metrics()["callback-error-total"] == 2.0  # one per row
        ok = p.send(topic_name, b"delivered", b"k", callback=raising)
        p.flush()
        assert ok.result(0).offset >= 0 and p.metrics()["callback-error-total"] == 3.0


def _passthrough_env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "KPRODUCER_PURE_PYTHON", "TMPDIR")}


def test_waits_from_a_callback_raise_at_once_and_lose_nothing(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    sent = threading.Event()
    futures: list[Any] = []
    outcomes: list[str] = []
    p = _producer(tansu, **{"linger.ms": 20})

    def callback(md: RecordMetadata | None, exc: BaseException | None) -> None:
        assert sent.wait(30)
        i = md.offset if md is not None else -1
        for name, call in (
            ("own result()", lambda: futures[i].result()),
            ("other result()", lambda: futures[-1].result(5)),
            ("flush()", lambda: p.flush()),
            ("close()", lambda: p.close()),
        ):
            try:
                call()
                outcomes.append(f"{name} returned")
            except IllegalStateError as e:
                assert "deadlock" in str(e)
                outcomes.append(f"{name} refused")

    for i in range(5):
        futures.append(p.send(topic_name, f"v{i}".encode(), callback=callback))
    sent.set()
    p.flush()
    assert [f.result(0).offset for f in futures] == [0, 1, 2, 3, 4]
    p.close(10)
    # Every record's own result() and close()/flush() were refused; another record's result() too
    # while it was pending (the last record's own callback finds it pending as well).
    assert outcomes.count("own result() refused") == 5
    assert outcomes.count("flush() refused") == 5 and outcomes.count("close() refused") == 5
    assert outcomes.count("other result() refused") == 5
    assert len(read_topic(tansu.bootstrap, topic_name, 5)) == 5


# ----------------------------------------------------------------------------- confluent-kafka serializers

JSON_SCHEMA = '{"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}'


def _confluent_serializers() -> tuple[Any, Any, Any, Any]:
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext, StringSerializer

    registry = SchemaRegistryClient.new_client({"url": "mock://kproducer-traps"})
    return JSONSerializer(JSON_SCHEMA, registry), StringSerializer("utf_8"), SerializationContext, MessageField


def test_confluent_serializers_on_producer_send_batch_and_async_producer(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    value_ser, key_ser, context, field = _confluent_serializers()
    contexts: list[tuple[Any, ...]] = []

    def header_aware(obj: Any, ctx: Any) -> bytes:
        # Any f(obj, SerializationContext): sees the topic, the field and the record's headers.
        contexts.append((ctx.topic, ctx.field, ctx.headers))
        return str(obj).encode()

    config = {"bootstrap.servers": tansu.bootstrap, "key.serializer": key_ser, "value.serializer": value_ser}
    with Producer(config) as p:
        p.send(topic_name, {"n": 1}, "a")
        p.send_batch(topic_name, [{"n": 2}, {"n": 3}], keys=["b", "c"])
        bad = p.send(topic_name, {"n": "not an int"}, "d")
        p.flush()
    from kproducer.errors import SerializationError

    with pytest.raises(SerializationError, match="value.serializer"):
        bad.result(0)

    async def main() -> None:
        async with AsyncProducer(config) as ap:
            await (await ap.send(topic_name, {"n": 4}, "e"))
            await (await ap.send_batch(topic_name, [{"n": 5}], keys=["f"]))

    asyncio.run(main())
    with Producer({"bootstrap.servers": tansu.bootstrap, "key.serializer": header_aware}) as p:
        p.send(topic_name, b"v", 42, headers=[("h", b"1")])

    expected = [
        (key_ser(k), value_ser({"n": n}, context(topic_name, field.VALUE)))
        for k, n in (("a", 1), ("b", 2), ("c", 3), ("e", 4), ("f", 5))
    ] + [(b"42", b"v")]
    records = read_topic(tansu.bootstrap, topic_name, len(expected))
    assert [(r.key, r.value) for r in records] == expected
    assert contexts == [(topic_name, field.KEY, [("h", b"1")])]
