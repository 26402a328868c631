"""help() and inspect.signature on an instance's send, on both the C lane and the pure path, and
argument errors that name the argument and what is allowed."""

from __future__ import annotations

import datetime
import inspect
import os
import pydoc
import re
from collections.abc import Iterator

import pytest

from kproducer.errors import InvalidTopicError
from kproducer.producer import Producer
from kproducer.record import native


@pytest.fixture
def producer() -> Iterator[Producer]:
    # Nothing listens on port 1: the checks below raise before any wait for the broker.
    p = Producer(bootstrap_servers="127.0.0.1:1", max_block_ms=200)
    try:
        yield p
    finally:
        p.close(0)


def test_the_c_lane_is_used_exactly_when_the_speedups_are(producer: Producer) -> None:
    pure = os.environ.get("KPRODUCER_PURE_PYTHON") == "1"
    assert (native.c is None) == pure
    assert ("send" in producer.__dict__) == (not pure)


def test_signature_and_help_show_the_real_send(producer: Producer) -> None:
    expected = inspect.signature(Producer.send.__get__(producer))
    assert inspect.signature(producer.send) == expected
    assert str(expected).startswith("(topic: 'str | ProducerRecord', value: 'Any' = None, key: 'Any' = None, *,")
    assert producer.send.__doc__ == Producer.send.__doc__
    assert producer.send.__name__ == "send" and producer.send.__qualname__ == "Producer.send"
    text = pydoc.render_doc(producer.send, renderer=pydoc.plaintext)
    # Python 3.13's pydoc puts each parameter of a long signature on its own line.
    flat = re.sub(r"\(\n\s+", "(", re.sub(r",\n\s+", ", ", text))
    assert "send(topic: 'str | ProducerRecord', value: 'Any' = None" in flat, text[:400]
    assert "callback(metadata, exception)" in text
    assert "for the common call shape, in C" not in text  # not the C lane type's own docstring


def test_docstrings_list_types_and_callback_shape() -> None:
    for method in (Producer.send, Producer.send_batch, Producer.send_arrow):
        doc = method.__doc__ or ""
        assert "callback(metadata, exception)" in doc and "on_delivery(err, msg)" in doc, method
        assert "headers" in doc and "str" in doc, method
    assert "bytes" in (Producer.send.__doc__ or "") and "memoryview" in (Producer.send.__doc__ or "")
    assert "value.serializer" in (Producer.send.__doc__ or "")
    assert "large_binary" in (Producer.send_arrow.__doc__ or "")


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"headers": 5}, TypeError, "headers must be a list of (str, bytes | str | None) pairs, or a dict of str to "
                                    "bytes | str | None; got int 5"),
        ({"headers": "a=b"}, TypeError, "headers must be a list of"),
        ({"headers": [("k",)]}, TypeError, "headers[0] must be a (key, value) pair; got tuple ('k',)"),
        ({"headers": [(1, b"v")]}, TypeError, "header key at headers[0] must be a str; got int 1"),
        ({"headers": {"k": 3}}, TypeError, "header 'k' value must be bytes, bytearray, memoryview, str or None; got int 3"),
        ({"partition": "1"}, TypeError, "partition must be an int >= 0 or None, got str '1'"),
        ({"partition": True}, TypeError, "partition must be an int >= 0 or None, got bool True"),
        ({"partition": -2}, ValueError, "partition must be an int >= 0 or None, got -2"),
        (
            {"timestamp": datetime.datetime(2024, 1, 1)},
            TypeError,
            "timestamp must be an int, milliseconds since the epoch, or None for now; got datetime "
            "datetime.datetime(2024, 1, 1, 0, 0) (for a datetime: int(dt.timestamp() * 1000))",
        ),
        ({"timestamp": 1.7e9}, TypeError, "(milliseconds, not seconds: int(seconds * 1000))"),
        ({"timestamp": -5}, ValueError, "timestamp must be an int in 0.."),
    ],
)
def test_argument_errors_name_the_argument(
    producer: Producer, kwargs: dict[str, object], error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as info:
        producer.send("topic", b"v", **kwargs)  # type: ignore[arg-type]
    assert message in str(info.value)
    bulk_kwargs = {k: v for k, v in kwargs.items()}
    with pytest.raises(error) as info:
        producer.send_batch("topic", [b"v"], **bulk_kwargs)  # type: ignore[arg-type]
    assert message in str(info.value)


@pytest.mark.parametrize(
    ("topic", "message"),
    [
        ("bad topic!", "Topic name 'bad topic!' is illegal: it contains ' ', '!'; a topic name is ASCII letters, "
                       "digits, '.', '_' and '-', 1 to 249 characters, not '.' or '..'"),
        ("", "Topic name '' is illegal: it can't be empty; a topic name is"),
        ("..", "Topic name '..' is illegal: it can't be '.' or '..'"),
        ("x" * 250, "is illegal: it is 250 characters long; a topic name is"),
        ("t\u00e4st", "it contains '\u00e4'"),
    ],
)
def test_invalid_topic_names(producer: Producer, topic: str, message: str) -> None:
    # As with Java's send(), the record's own error reaches its future and callback (at once: no
    # metadata is asked for a name no broker accepts); the bulk calls fail every row the same way.
    errors: list[BaseException | None] = []
    fut = producer.send(topic, b"v", callback=lambda md, exc: errors.append(exc))
    error = fut.exception(0)
    assert isinstance(error, InvalidTopicError) and message in str(error)
    assert errors == [error]
    bulk = producer.send_batch(topic, [b"a", b"b"])
    assert [type(e) for e in bulk.exceptions(0)] == [InvalidTopicError, InvalidTopicError]
    assert message in str(bulk.exceptions(0)[0])


def test_partitions_for_timeout_bounds_that_call_only(producer: Producer, monkeypatch: pytest.MonkeyPatch) -> None:
    """partitions_for(timeout=...) never changes the producer's max.block.ms for its wait, which a
    send() on another thread would then use as its own budget."""
    from kproducer.errors import KafkaTimeoutError

    md = producer._metadata
    seen: list[int] = []
    wait = md.await_update

    def spy(version: int, timeout_s: float | None) -> bool:
        seen.append(producer._max_block_ms)
        return wait(version, timeout_s)

    monkeypatch.setattr(md, "await_update", spy)
    with pytest.raises(KafkaTimeoutError, match=r"'t' not present in metadata after 50 ms"):
        producer.partitions_for("t", timeout=0.05)
    assert seen and set(seen) == {200}


def _seconds_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if "looks like seconds" in r.getMessage()]


def test_a_timestamp_in_seconds_logs_one_warning_per_producer(caplog: pytest.LogCaptureFixture) -> None:
    seconds = 1_764_288_000  # 2025-11-28 in seconds: as ms, 1970-01-21
    caplog.set_level("WARNING", logger="kproducer")
    first = Producer(bootstrap_servers="127.0.0.1:1", max_block_ms=200, client_id="secs-1")
    second = Producer(bootstrap_servers="127.0.0.1:1", max_block_ms=200, client_id="secs-2")
    try:
        first.send("t", b"ms", timestamp=seconds * 1000)  # milliseconds: nothing said
        assert _seconds_warnings(caplog) == []
        for _ in range(3):
            first.send("t", b"s", timestamp=seconds)  # sent as given, as Kafka accepts any timestamp >= 0
        first.send_batch("t", [b"a", b"b"], timestamp=seconds)
        first.send("t", b"zero", timestamp=0)
        assert _seconds_warnings(caplog) == [
            "producer secs-1: record timestamp 1764288000 looks like seconds, not milliseconds since the epoch "
            "(it is below 10^11 ms, 1973-03-03): the broker stores it as 1970-01-21T10:04:48+00:00; pass "
            "int(seconds * 1000). Logged once per producer; the records are sent as given"
        ]
        second.send_batch("t", [b"a"], timestamp=seconds)  # the bulk call has the same check
        second.send("t", b"s", timestamp=seconds)
        warnings = _seconds_warnings(caplog)
        assert len(warnings) == 2 and warnings[1].startswith("producer secs-2: record timestamp 1764288000")
    finally:
        first.close(0)
        second.close(0)
