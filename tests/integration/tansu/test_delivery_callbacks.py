"""Delivery callbacks: ``callback=`` is Java's (metadata, exception), ``on_delivery=`` is confluent-kafka's (err, msg).

Each convention is checked on the path this pass runs (the C send lane, or the
pure-Python send() under KPRODUCER_PURE_PYTHON=1), for successes and failures,
for send(), send_batch() and send_arrow(), with what arrived read back by
confluent-kafka's consumer. A callable of the wrong shape is refused by the call.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from kproducer.delivery import DeliveryReport
from kproducer.errors import KafkaError, RecordTooLargeError
from kproducer.producer import Producer
from kproducer.structs import RecordMetadata
from tests.support.readback import create_topic, read_topic
from tests.support.tansu import TansuBroker

PURE = os.environ.get("KPRODUCER_PURE_PYTHON") == "1"


def _producer(tansu: TansuBroker, **kw: Any) -> Producer:
    cfg: dict[str, Any] = {"bootstrap.servers": tansu.bootstrap, "linger.ms": 5, "max.block.ms": 10_000}
    cfg.update({k.replace("_", "."): v for k, v in kw.items()})
    return Producer(cfg)


def _fast_calls(p: Producer) -> int:
    if PURE:
        assert p._lane is None, "KPRODUCER_PURE_PYTHON=1 must not use the C lane"
        return 0
    assert p._lane is not None, "the C send lane is missing: run `make install` to build kproducer._speedups"
    return int(p._lane.fast_calls)


def test_confluent_style_on_delivery_copied_from_its_docs(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 3)
    reports: list[tuple[Any, str, int | None, int | None, Any, Any]] = []

    # confluent-kafka's README delivery report, unchanged but for where it writes.
    def delivery_report(err, msg):  # type: ignore[no-untyped-def]
        """Called once for each message produced to indicate delivery result."""
        if err is not None:
            reports.append((err, msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value()))
        else:
            reports.append((None, msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value()))

    with _producer(tansu) as p:
        p.partitions_for(topic_name)  # send() never waits for metadata: let the first sends find it
        before = _fast_calls(p)
        for i in range(300):
            p.send(topic_name, b"v%d" % i, b"k%d" % (i % 11), on_delivery=delivery_report)
        p.send(topic_name, value=b"kw", key=b"kk", on_delivery=delivery_report)
        assert p.flush(20) == 0
        if not PURE:
            assert _fast_calls(p) - before > 250, "on_delivery sends should take the C lane"
    assert len(reports) == 301 and all(r[0] is None for r in reports)
    back = {(r.partition, r.offset): (r.key, r.value) for r in read_topic(tansu.bootstrap, topic_name, 301)}
    for _err, topic, partition, offset, key, value in reports:
        assert topic == topic_name
        assert back[(partition, offset)] == (key, value)  # type: ignore[index]


def test_java_style_callback(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 2)
    got: list[tuple[RecordMetadata | None, Exception | None]] = []

    def on_completion(metadata: RecordMetadata | None, exception: Exception | None) -> None:
        got.append((metadata, exception))

    with _producer(tansu) as p:
        p.partitions_for(topic_name)  # send() never waits for metadata: let the first sends find it
        before = _fast_calls(p)
        futs = [p.send(topic_name, b"j%d" % i, callback=on_completion) for i in range(200)]
        assert p.flush(20) == 0
        if not PURE:
            assert _fast_calls(p) - before > 150
    assert len(got) == 200 and all(md is not None and exc is None for md, exc in got)
    assert sorted((md.partition, md.offset) for md, _ in got if md) == sorted(
        (f.result().partition, f.result().offset) for f in futs
    )


@pytest.mark.parametrize("keyword", ["callback", "on_delivery"])
def test_failures_reach_either_convention(tansu: TansuBroker, topic_name: str, keyword: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    seen: list[tuple[Any, Any]] = []
    with _producer(tansu, max_request_size=2000) as p:
        fut = p.send(topic_name, b"z" * 5000, b"big", **{keyword: lambda a, b: seen.append((a, b))})
        p.flush(10)
    assert isinstance(fut.exception(5), RecordTooLargeError)
    assert len(seen) == 1
    if keyword == "callback":
        md, exc = seen[0]
        assert md is None and isinstance(exc, RecordTooLargeError)
    else:
        err, msg = seen[0]
        assert isinstance(err, RecordTooLargeError) and isinstance(msg, DeliveryReport)
        assert msg.error() is err and msg.topic() == topic_name and msg.offset() is None
        assert msg.key() == b"big" and len(msg) == 5000


def test_confluent_error_accessors_on_real_failures(tansu: TansuBroker, topic_name: str) -> None:
    """``err.code()`` / ``name()`` / ``str()`` / ``retriable()`` / ``fatal()`` as confluent-kafka's callbacks use them."""
    from confluent_kafka import KafkaError as CKafkaError

    create_topic(tansu.bootstrap, topic_name, 1)
    failures: list[tuple[int, str, str, bool, bool, bool]] = []
    kinds: list[str] = []

    # The shape of confluent-kafka's own examples: compare err.code() with its KafkaError constants.
    def delivery_report(err, msg):  # type: ignore[no-untyped-def]
        if err is not None:
            kind = "too-large" if err.code() == CKafkaError.MSG_SIZE_TOO_LARGE else (
                "timed-out" if err.code() == CKafkaError._MSG_TIMED_OUT else "other"
            )
            failures.append((err.code(), err.name(), err.str(), err.retriable(), err.fatal(), msg.error() is err))
            kinds.append(kind)

    with _producer(tansu, max_request_size=2000) as p:
        p.send(topic_name, b"z" * 5000, on_delivery=delivery_report)
        p.flush(10)
    # Nothing listens on port 1: the record waits for metadata until max.block.ms, then times out.
    with Producer({"bootstrap.servers": "127.0.0.1:1", "max.block.ms": 300, "reconnect.backoff.ms": 20}) as p:
        p.send("nowhere", b"v", on_delivery=delivery_report)
        p.flush(30)
    assert kinds == ["too-large", "timed-out"]
    too_large, timed_out = failures
    assert too_large[:2] == (10, "MESSAGE_TOO_LARGE") and "larger than 2000" in too_large[2]
    assert too_large[3:] == (False, False, True)
    assert timed_out[0] == CKafkaError._MSG_TIMED_OUT and timed_out[1] == "TIMEOUT"
    assert "not present in metadata" in timed_out[2] and timed_out[3:] == (True, False, True)
    assert all(type(f[3]) is bool and type(f[4]) is bool for f in failures)


def test_error_attributes_and_confluent_methods_agree() -> None:
    """The Java/kafka-python attributes keep working beside confluent-kafka's methods of the same names."""
    import pickle

    from confluent_kafka import KafkaError as CKafkaError

    from kproducer.errors import (
        BufferExhaustedError,
        IllegalStateError,
        KafkaTimeoutError,
        ProducerClosedError,
        ProducerFencedError,
        TransactionAbortedError,
        error_for_code,
    )

    err = RecordTooLargeError("too big", topic="t", partition=0)
    assert err.code == 10 and err.code() == 10 and err.name == "MESSAGE_TOO_LARGE" and err.name() == "MESSAGE_TOO_LARGE"
    assert not err.retriable and err.retriable() is False and repr(err.retriable) == "False"
    assert f"{err.code}" == "10" and {10: "x"}[err.code] == "x"
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is RecordTooLargeError and back.code() == 10 and str(back) == str(err) == err.str()
    # Client-side errors: the attribute stays Kafka's -1, the call gives librdkafka's code for the condition.
    assert KafkaTimeoutError().code == -1 and KafkaTimeoutError().code() == CKafkaError._MSG_TIMED_OUT
    assert BufferExhaustedError().code() == CKafkaError._QUEUE_FULL
    assert ProducerClosedError().code() == CKafkaError._PURGE_QUEUE
    assert TransactionAbortedError().code() == CKafkaError._PURGE_QUEUE
    assert IllegalStateError().code() == CKafkaError._STATE
    assert KafkaError().code() == CKafkaError.UNKNOWN
    assert KafkaTimeoutError.retriable and KafkaTimeoutError().retriable() is True
    fenced = error_for_code(90)
    assert isinstance(fenced, ProducerFencedError) and fenced.fatal() is True and fenced.code() == 90
    assert error_for_code(120).txn_requires_abort() is True and not err.txn_requires_abort()


@pytest.mark.parametrize("keyword", ["callback", "on_delivery"])
def test_wrong_arity_is_refused_by_send(tansu: TansuBroker, topic_name: str, keyword: str) -> None:
    with _producer(tansu) as p:
        with pytest.raises(TypeError, match=rf"{keyword}= takes .*cannot take 2 positional arguments"):
            p.send(topic_name, b"v", **{keyword: lambda only: None})

        def three(a: Any, b: Any, c: Any) -> None: ...

        with pytest.raises(TypeError, match="three"):
            p.send(topic_name, b"v", **{keyword: three})
        with pytest.raises(TypeError, match="not callable"):
            p.send(topic_name, b"v", **{keyword: "print"})
        with pytest.raises(TypeError, match="not both"):
            p.send(topic_name, b"v", callback=lambda a, b: None, on_delivery=lambda a, b: None)
        with pytest.raises(TypeError, match="cannot take 2"):
            p.send_batch(topic_name, [b"a"], **{keyword: lambda only: None})

        # Shapes that do take two positional arguments are accepted: defaults, *args, bound methods.
        class Sink:
            def report(self, a: Any, b: Any) -> None: ...

            def __call__(self, a: Any, b: Any, c: Any = None) -> None: ...

        for ok in (lambda a, b, c=1: None, lambda *args: None, Sink().report, Sink()):
            p.send(topic_name, b"v", **{keyword: ok})
        assert p.flush(10) == 0


def test_bulk_calls_take_both_conventions(tansu: TansuBroker, topic_name: str) -> None:
    import pyarrow as pa
    create_topic(tansu.bootstrap, topic_name, 3)
    java: list[tuple[Any, Any]] = []
    confluent: list[tuple[Any, int | None, int | None, Any, Any]] = []

    def dr(err: KafkaError | None, msg: DeliveryReport) -> None:
        confluent.append((err, msg.partition(), msg.offset(), msg.key(), msg.value()))

    values = [b"b%d" % i for i in range(500)]
    keys = [b"k%d" % (i % 7) for i in range(500)]
    # Two record batches in one table: row numbers of the second chunk continue from the first.
    table = pa.Table.from_batches(
        [
            pa.record_batch([pa.array(keys[:200], pa.binary()), pa.array(values[:200], pa.binary())], ["key", "value"]),
            pa.record_batch([pa.array(keys[200:], pa.binary()), pa.array(values[200:], pa.binary())], ["key", "value"]),
        ]
    )
    with _producer(tansu) as p:
        p.send_batch(topic_name, values, keys, callback=lambda md, exc: java.append((md, exc)))
        p.send_batch(topic_name, values, keys, on_delivery=dr)
        p.send_arrow(table, topic_name, on_delivery=dr)
        assert p.flush(20) == 0
    assert len(java) == 500 and all(md is not None and exc is None for md, exc in java)
    assert len(confluent) == 1000 and all(err is None for err, *_ in confluent)
    back = {(r.partition, r.offset): (r.key, r.value) for r in read_topic(tansu.bootstrap, topic_name, 1500)}
    for _err, partition, offset, key, value in confluent:
        assert back[(partition, offset)] == (key, value)  # type: ignore[index]


def test_user_script_passes_mypy_strict(tmp_path: Path) -> None:
    """The public callback types accept the annotations users naturally write."""
    script = tmp_path / "user_script.py"
    script.write_text(
        textwrap.dedent(
            """
            from __future__ import annotations

            import asyncio
            import concurrent.futures

            from kproducer import KafkaError, Producer, RecordMetadata
            from kproducer.delivery import DeliveryReport


            def java_exc(metadata: RecordMetadata | None, exception: Exception | None) -> None:
                print(metadata, exception)


            def java_base(metadata: RecordMetadata | None, exception: BaseException | None) -> None:
                print(metadata, exception)


            def confluent(err: KafkaError | None, msg: DeliveryReport) -> None:
                print(err, msg.topic(), msg.partition(), msg.offset(), msg.key(), msg.value())


            def confluent_loose(err: Exception | None, msg: DeliveryReport) -> None:
                print(err, msg.error())


            def confluent_methods(err: KafkaError | None, msg: DeliveryReport) -> None:
                if err is not None:
                    code: int = err.code()
                    name: str = err.name()
                    retry: bool = err.retriable() or err.fatal() or err.txn_requires_abort()
                    print(code, name, err.str(), retry, err.code == 10, err.name == "MESSAGE_TOO_LARGE")


            async def use_async_producer() -> None:
                from kproducer.aio import AsyncProducer

                async with AsyncProducer({"bootstrap.servers": "127.0.0.1:9092", "transactional.id": "x"}) as ap:
                    await ap.init_transactions()
                    async with ap.transaction():
                        delivery = await ap.send("t", b"v", on_delivery=confluent_methods)
                    md: RecordMetadata = await delivery
                    print(md.offset)


            async def use_async(p: Producer) -> RecordMetadata:
                md: RecordMetadata = await p.send("t", b"v")
                return await asyncio.wrap_future(p.send("t", b"w"))


            def main() -> None:
                with Producer({"bootstrap.servers": "127.0.0.1:9092"}) as p:
                    p.send("t", b"v", callback=java_exc)
                    p.send("t", b"v", callback=java_base)
                    p.send("t", b"v", on_delivery=confluent)
                    p.send("t", b"v", on_delivery=confluent_loose)
                    p.send("t", b"v", on_delivery=confluent_methods)
                    p.send_batch("t", [b"a"], on_delivery=confluent)
                    fs = [p.send("t", b"x")]
                    done, _ = concurrent.futures.wait(fs)
                    for f in concurrent.futures.as_completed(fs):
                        md: RecordMetadata = f.result()
                        print(md.offset)
            """
        )
    )
    env = dict(os.environ, MYPY_CACHE_DIR=str(tmp_path / "cache"))
    out = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--follow-imports=silent", str(script)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        timeout=300,
    )
    assert out.returncode == 0, f"mypy --strict failed on a user script:\n{out.stdout}\n{out.stderr}"
