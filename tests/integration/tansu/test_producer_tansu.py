"""The Producer end to end against Tansu, every write checked by confluent-kafka's consumer (read_topic)."""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Any

import pytest

from kproducer.accumulator import RecordFuture
from kproducer.errors import (
    ConfigError,
    IllegalStateError,
    KafkaTimeoutError,
    ProducerClosedError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
)
from kproducer.producer import Producer
from kproducer.structs import ProducerRecord, RecordMetadata
from tests.support.readback import create_topic, read_topic
from tests.support.tansu import TansuBroker

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def _producer(tansu: TansuBroker, **kw: Any) -> Producer:
    cfg: dict[str, Any] = {"bootstrap.servers": tansu.bootstrap, "linger.ms": 2, "max.block.ms": 10_000}
    cfg.update(kw)
    return Producer(cfg)


# ---------------------------------------------------------------------- content


def test_content_keys_values_headers_partitions_timestamps(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 3)
    sent: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]], int]] = []
    with _producer(tansu) as p:
        futs = []
        for i in range(60):
            part = i % 3
            key = None if i % 7 == 0 else f"k{i}".encode()
            value = None if i % 11 == 0 else f"value-{i}".encode() * (1 + i % 4)
            headers = [("h1", f"x{i}".encode()), ("empty", b""), ("null", None)] if i % 2 else []
            ts = 1_700_000_000_000 + i
            futs.append(p.send(topic_name, value, key, partition=part, timestamp=ts, headers=headers))
            sent.append((part, key, value, headers, ts))
        assert p.flush(10) == 0
        mds = [f.result(10) for f in futs]
    for (part, key, value, _h, ts), md in zip(sent, mds, strict=True):
        assert md.topic == topic_name and md.partition == part and md.timestamp == ts
        assert md.serialized_key_size == (-1 if key is None else len(key))
        assert md.serialized_value_size == (-1 if value is None else len(value))
    got = read_topic(tansu.bootstrap, topic_name, len(sent))
    assert len(got) == len(sent)
    by_pos = {(r.partition, r.offset): r for r in got}
    for (part, key, value, headers, ts), md in zip(sent, mds, strict=True):
        r = by_pos[(part, md.offset)]
        assert (r.key, r.value, r.timestamp) == (key, value, ts)
        assert r.headers == headers


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_round_trips(tansu: TansuBroker, topic_name: str, codec: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 2)
    values = [(f"{codec}-{i:05d}-" + "abc" * (i % 50)).encode() for i in range(2000)]
    with _producer(tansu, **{"compression.type": codec, "batch.size": 8192}) as p:
        futs = [p.send(topic_name, v, str(i % 13).encode()) for i, v in enumerate(values)]
        assert p.flush(20) == 0
        for f in futs:
            f.result(1)
        m = p.metrics()
    got = read_topic(tansu.bootstrap, topic_name, len(values))
    assert sorted(r.value for r in got if r.value is not None) == sorted(values)
    if codec != "none":
        assert 0 < m["compression-rate-avg"] < 0.9, m["compression-rate-avg"]
    else:
        assert m["compression-rate-avg"] == pytest.approx(1.0)


def test_per_partition_order_and_callbacks_in_send_order(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 4)
    calls: dict[int, list[int]] = {p: [] for p in range(4)}
    offsets: dict[int, list[int]] = {p: [] for p in range(4)}
    lock = threading.Lock()
    count = 0

    def cb(i: int, part: int) -> Any:
        def on_delivery(md: RecordMetadata | None, exc: BaseException | None) -> None:
            nonlocal count
            assert exc is None and md is not None
            with lock:
                calls[part].append(i)
                offsets[part].append(md.offset)
                count += 1

        return on_delivery

    n = 8000
    with _producer(tansu, **{"batch.size": 2048}) as p:
        for i in range(n):
            part = i % 4
            p.send(topic_name, f"{part}:{i}".encode(), partition=part, callback=cb(i, part))
        assert p.flush(30) == 0
    assert count == n, "on_delivery must be called exactly once per record"
    for part in range(4):
        assert calls[part] == sorted(calls[part]), f"callbacks out of send order in partition {part}"
        assert offsets[part] == list(range(n // 4)), f"offsets not 0..n-1 in partition {part}"
    got = read_topic(tansu.bootstrap, topic_name, n)
    assert len(got) == n
    for part in range(4):
        seq = [int(r.value.split(b":")[1]) for r in got if r.partition == part and r.value is not None]
        assert seq == list(range(part, n, 4)), f"partition {part} out of order"


def test_keyed_partitions_match_librdkafka_murmur2_random(tansu: TansuBroker, topic_name: str) -> None:
    from confluent_kafka import Producer as CkProducer

    ours, theirs = topic_name + "-kp", topic_name + "-ck"
    create_topic(tansu.bootstrap, ours, 7)
    create_topic(tansu.bootstrap, theirs, 7)
    keys = [f"key-{i}-{'x' * (i % 17)}".encode() for i in range(300)]
    ck = CkProducer({"bootstrap.servers": tansu.bootstrap, "partitioner": "murmur2_random", "linger.ms": 2})
    for k in keys:
        ck.produce(theirs, value=k, key=k)
    assert ck.flush(20) == 0
    with _producer(tansu) as p:
        for k in keys:
            p.send(ours, k, k)
        assert p.flush(20) == 0
    a = {r.key: r.partition for r in read_topic(tansu.bootstrap, ours, len(keys))}
    b = {r.key: r.partition for r in read_topic(tansu.bootstrap, theirs, len(keys))}
    assert len(a) == len(b) == len(keys)
    mismatched = [k for k in keys if a[k] != b[k]]
    assert not mismatched, (
        f"{len(mismatched)} keys partitioned differently from librdkafka, e.g. {mismatched[:3]}"
    )
    assert len(set(a.values())) == 7


def test_one_million_records_none_lost_none_duplicated(tansu: TansuBroker, topic_name: str) -> None:
    """1,000,000 x 100 B: per-partition counts and offsets read back through Fetch (Tansu's ListOffsets LATEST is wrong)."""
    from confluent_kafka import Consumer, TopicPartition

    parts, n = 8, 1_000_000
    create_topic(tansu.bootstrap, topic_name, parts)
    payload = b"x" * 100
    errors: list[BaseException] = []

    def on_delivery(md: RecordMetadata | None, exc: BaseException | None) -> None:
        if exc is not None:
            errors.append(exc)

    with _producer(tansu, acks=1, **{"enable.idempotence": False, "linger.ms": 5}) as p:
        for i in range(n):
            p.send(
                topic_name, payload, partition=i % parts, callback=on_delivery if i % 1000 == 0 else None
            )
        assert p.flush(120) == 0
        m = p.metrics()
    assert not errors
    assert m["record-error-total"] == 0
    assert m["record-send-total"] == n

    c = Consumer(
        {
            "bootstrap.servers": tansu.bootstrap,
            "group.id": "kproducer-count",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
            "fetch.max.bytes": 50 * 1024 * 1024,
        }
    )
    try:
        c.assign([TopicPartition(topic_name, p, 0) for p in range(parts)])
        counts = [0] * parts
        next_offset = [0] * parts
        bad: list[str] = []
        deadline = time.monotonic() + 120
        total = 0
        idle_after_done = 0
        while time.monotonic() < deadline and idle_after_done < 3:
            batch = c.consume(num_messages=100_000, timeout=0.3)
            if not batch and total >= n:
                idle_after_done += 1
            for msg in batch:
                if msg.error():
                    continue
                pt, off = int(msg.partition() or 0), int(msg.offset() or 0)
                if off != next_offset[pt] and len(bad) < 5:
                    bad.append(f"partition {pt}: offset {off}, expected {next_offset[pt]}")
                next_offset[pt] = off + 1
                counts[pt] += 1
                total += 1
                value = msg.value() or b""
                if len(value) != 100 and len(bad) < 5:
                    bad.append(f"partition {pt} offset {off}: value of {len(value)} bytes")
    finally:
        c.close()
    assert not bad, bad
    assert counts == [n // parts] * parts, f"per-partition counts {counts}, expected {n // parts} each"


# ---------------------------------------------------------------------- acks and the API


def test_acks_zero_completes_with_offset_minus_one(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    with _producer(tansu, acks=0, **{"enable.idempotence": False}) as p:
        futs = [p.send(topic_name, f"a0-{i}".encode()) for i in range(50)]
        assert p.flush(10) == 0
        assert all(f.result(5).offset == -1 for f in futs)
    got = read_topic(tansu.bootstrap, topic_name, 50)
    assert [r.value for r in got] == [f"a0-{i}".encode() for i in range(50)]


@pytest.mark.parametrize("acks", [1, "all", -1])
def test_acks_one_and_all(tansu: TansuBroker, topic_name: str, acks: Any) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    extra = {} if acks != 1 else {"enable.idempotence": False}
    with _producer(tansu, acks=acks, **extra) as p:
        futs = [p.send(topic_name, f"v{i}".encode()) for i in range(20)]
        assert p.flush(10) == 0
        assert [f.result(5).offset for f in futs] == list(range(20))
    assert [r.value for r in read_topic(tansu.bootstrap, topic_name, 20)] == [
        f"v{i}".encode() for i in range(20)
    ]


def test_producer_record_and_future_api(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 2)
    with _producer(tansu) as p:
        done_calls: list[RecordFuture] = []
        fut = p.send(
            ProducerRecord(topic_name, b"rec-value", b"rec-key", 1, 1_600_000_000_123, [("a", b"b")])
        )
        fut.add_done_callback(done_calls.append)
        md = fut.result(10)
        assert fut.done()
        assert fut.exception(1) is None
        assert (md.topic, md.partition, md.offset, md.timestamp) == (topic_name, 1, 0, 1_600_000_000_123)
        late: list[RecordFuture] = []
        fut.add_done_callback(late.append)  # already done: runs at once
        assert late == [fut]
        deadline = time.monotonic() + 5
        while not done_calls and time.monotonic() < deadline:
            time.sleep(0.01)
        assert done_calls == [fut]
        assert p.flush() == 0
        infos = p.partitions_for(topic_name)
        assert sorted(i.partition for i in infos) == [0, 1]
        assert all(i.topic == topic_name and i.leader is not None for i in infos)
    (r,) = read_topic(tansu.bootstrap, topic_name, 1)
    assert (r.partition, r.key, r.value, r.headers, r.timestamp) == (
        1,
        b"rec-key",
        b"rec-value",
        [("a", b"b")],
        1_600_000_000_123,
    )


def test_metrics_have_java_names_and_plausible_values(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 2)
    n = 3000
    # batch.max.size bounds a batch grown past batch.size while undrained (KIP-782).
    with _producer(tansu, **{"batch.size": 4096, "batch.max.size": 16384, "buffer.memory": 4 * 1024 * 1024}) as p:
        for i in range(n):
            p.send(topic_name, b"m" * 100, partition=i % 2)
        assert p.flush(20) == 0
        m = p.metrics()
        names = [
            "record-send-rate", "record-error-rate", "record-retry-rate", "request-latency-avg",
            "request-latency-max", "batch-size-avg", "batch-size-max", "records-per-request-avg",
            "compression-rate-avg", "buffer-available-bytes", "buffer-total-bytes", "buffer-exhausted-rate",
            "bufferpool-wait-time-ns-total", "record-queue-time-avg", "record-queue-time-max",
            "requests-in-flight", "produce-throttle-time-avg",
        ]  # fmt: skip
        missing = [k for k in names if k not in m]
        assert not missing, f"metrics missing: {missing}"
        assert m["record-send-total"] == n
        assert m["record-send-rate"] > 0
        assert m["record-error-rate"] == 0 and m["record-retry-rate"] == 0
        assert 0 <= m["request-latency-avg"] <= m["request-latency-max"] < 10_000
        assert 0 < m["batch-size-avg"] <= m["batch-size-max"] <= 16384 + 200
        assert 1 <= m["records-per-request-avg"] <= n
        assert m["compression-rate-avg"] == pytest.approx(1.0)
        assert m["buffer-total-bytes"] == 4 * 1024 * 1024
        assert m["buffer-available-bytes"] == 4 * 1024 * 1024, "all batches freed after flush"
        assert m["buffer-exhausted-rate"] == 0 and m["bufferpool-wait-time-ns-total"] == 0
        assert 0 <= m["record-queue-time-avg"] <= m["record-queue-time-max"] < 10_000
        assert m["requests-in-flight"] == 0
        assert m["produce-throttle-time-avg"] == 0


def test_queue_time_and_batch_size_recorded_once_per_batch(tansu: TansuBroker, topic_name: str) -> None:
    """Each drained batch records one queue-time, batch-size and compression-rate sample, not two."""
    create_topic(tansu.bootstrap, topic_name, 1)
    with _producer(tansu) as p:
        for i in range(5):
            p.send(topic_name, f"once-{i}".encode()).result(10)
        events = {}
        for name in ("queue-time", "batch-size", "compression-rate", "records-per-request"):
            sensor = p._metrics.get_sensor(name)
            assert sensor is not None, name
            events[name] = sum(s.event_count for s in sensor._stats[0]._samples)  # type: ignore[attr-defined]
        assert p.metrics()["record-send-total"] == 5
        # One batch per send (each waited for its result): five samples each, not ten.
        assert events == {
            "queue-time": 5,
            "batch-size": 5,
            "compression-rate": 5,
            "records-per-request": 5,
        }, events
    assert len(read_topic(tansu.bootstrap, topic_name, 5)) == 5


# ---------------------------------------------------------------------- plug-ins


class _Recorder:
    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.acked: list[tuple[RecordMetadata | None, BaseException | None]] = []
        self.closed = False

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        self.sent.append(record.value)
        headers = list(record.headers or []) + [("intercepted", b"1")]
        return ProducerRecord(
            record.topic, record.value, record.key, record.partition, record.timestamp, headers
        )

    def on_acknowledgement(self, md: RecordMetadata | None, exc: BaseException | None) -> None:
        self.acked.append((md, exc))

    def close(self) -> None:
        self.closed = True


def test_interceptors_on_send_and_on_acknowledgement(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    ic = _Recorder()
    with _producer(tansu, **{"interceptor.classes": [ic]}) as p:
        for i in range(10):
            p.send(topic_name, f"i{i}".encode())
        assert p.flush(10) == 0
    assert ic.sent == [f"i{i}".encode() for i in range(10)]
    assert len(ic.acked) == 10 and all(md is not None and exc is None for md, exc in ic.acked)
    assert ic.closed
    got = read_topic(tansu.bootstrap, topic_name, 10)
    assert all(("intercepted", b"1") in r.headers for r in got)


def test_serializers_and_custom_partitioner(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 3)
    seen: list[bytes | None] = []

    def by_int_key(topic: str, key_bytes: bytes | None, num_partitions: int) -> int:
        """A callable partitioner: (topic, serialized key, partition count) -> partition."""
        seen.append(key_bytes)
        return int.from_bytes(key_bytes or b"", "big", signed=True) % num_partitions

    with _producer(
        tansu, **{"key.serializer": "int", "value.serializer": "json", "partitioner.class": by_int_key}
    ) as p:
        for i in range(9):
            p.send(topic_name, {"n": i, "s": "é"}, i).result(10)
    with _producer(tansu, **{"key.serializer": "str", "value.serializer": "str"}) as p:
        p.send(topic_name, "grüße", "k", partition=0).result(10)
    got = read_topic(tansu.bootstrap, topic_name, 10)
    ints = [r for r in got if r.key is not None and len(r.key) == 4]
    assert sorted(int.from_bytes(r.key or b"", "big", signed=True) for r in ints) == list(range(9))
    for r in ints:
        k = int.from_bytes(r.key or b"", "big", signed=True)
        assert r.partition == k % 3
        assert json.loads(r.value or b"") == {"n": k, "s": "é"}
    assert seen == [i.to_bytes(4, "big", signed=True) for i in range(9)]
    (s,) = [r for r in got if r.key == b"k"]
    assert s.value == "grüße".encode()


# ---------------------------------------------------------------------- config errors


def test_unknown_config_key_suggests_the_closest(tansu: TansuBroker) -> None:
    with pytest.raises(ConfigError) as ei:
        Producer({"bootstrap.servers": tansu.bootstrap, "linger.msec": 5})
    assert "linger.msec" in str(ei.value) and "linger.ms" in str(ei.value)


def test_transactional_id_contradicting_idempotence_is_a_clear_error(tansu: TansuBroker) -> None:
    with pytest.raises(ConfigError) as ei:
        Producer({"bootstrap.servers": tansu.bootstrap, "transactional.id": "tx-1", "acks": "1"})
    assert "transactional.id" in str(ei.value) and "acks is 1" in str(ei.value)


# ---------------------------------------------------------------------- errors on futures


def test_record_too_large_lands_on_future_and_callback(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    got: list[BaseException | None] = []
    with _producer(tansu, **{"max.request.size": 10_000}) as p:
        fut = p.send(topic_name, b"z" * 20_000, callback=lambda md, exc: got.append(exc))
        exc = fut.exception(5)
        assert isinstance(exc, RecordTooLargeError)
        assert "max.request.size" in str(exc) and "10000" in str(exc)
        with pytest.raises(RecordTooLargeError):
            fut.result(1)
        assert len(got) == 1 and isinstance(got[0], RecordTooLargeError)
        p.send(topic_name, b"small").result(10)  # the producer keeps working
        assert p.metrics()["record-error-total"] == 1
    (r,) = read_topic(tansu.bootstrap, topic_name, 1)
    assert r.value == b"small"


def test_missing_topic_fails_after_max_block_ms_naming_it(tansu: TansuBroker, topic_name: str) -> None:
    missing = topic_name + "-missing"
    with _producer(tansu, **{"allow.auto.create.topics": False, "max.block.ms": 800}) as p:
        t0 = time.monotonic()
        fut = p.send(missing, b"v")
        returned_pending = not fut.done()  # send() does not wait for metadata: the record waits
        exc = fut.exception(5)
        elapsed = time.monotonic() - t0
    assert returned_pending
    assert elapsed >= 0.7, elapsed
    assert isinstance(exc, (KafkaTimeoutError, UnknownTopicOrPartitionError)), repr(exc)
    assert missing in str(exc) and "800" in str(exc)


# ---------------------------------------------------------------------- close, callbacks, fork


def test_close_with_timeout_flushes(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    p = _producer(tansu, **{"linger.ms": 500})
    futs = [p.send(topic_name, f"c{i}".encode()) for i in range(100)]
    p.close(10)
    assert all(f.done() for f in futs)
    assert [f.result(0).offset for f in futs] == list(range(100))
    with pytest.raises(ProducerClosedError):
        p.send(topic_name, b"late")
    assert p._pool.available_memory() == p._pool.total_memory
    assert len(read_topic(tansu.bootstrap, topic_name, 100)) == 100


def test_close_from_delivery_callback_does_not_deadlock(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    p = _producer(tansu)
    closed = threading.Event()
    refused: list[BaseException] = []

    def cb(md: RecordMetadata | None, exc: BaseException | None) -> None:
        # close() would wait for this very thread: refused by name; close(0) is Java's close-from-callback.
        try:
            p.close()
        except IllegalStateError as e:
            refused.append(e)
        p.close(0)
        closed.set()

    p.send(topic_name, b"first", callback=cb)
    assert closed.wait(10), "close() inside the callback did not return"
    assert len(refused) == 1 and "deadlock" in str(refused[0]) and "close(0)" in str(refused[0])
    p._io_thread.join(10)
    assert not p._io_thread.is_alive(), "the I/O thread did not stop after close() from a callback"
    p.close(1)  # a second close is a no-op
    assert read_topic(tansu.bootstrap, topic_name, 1)[0].value == b"first"


def test_forked_child_gets_illegal_state_error(tansu: TansuBroker, topic_name: str) -> None:
    import os

    create_topic(tansu.bootstrap, topic_name, 1)
    with _producer(tansu) as p:
        p.send(topic_name, b"parent").result(10)
        pid = os.fork()
        if pid == 0:  # pragma: no cover - the child
            code = 3
            try:
                p.send(topic_name, b"child")
                code = 1
            except Exception as e:
                code = 0 if type(e).__name__ == "IllegalStateError" and "fork" in str(e) else 2
            try:
                p.flush(1)
                code = code or 4
            except Exception as e:
                code = code or (0 if type(e).__name__ == "IllegalStateError" else 5)
            os._exit(code)
        deadline = time.monotonic() + 15
        status = None
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            time.sleep(0.05)
        else:
            os.kill(pid, 9)
            os.waitpid(pid, 0)
            pytest.fail("the forked child hung using the parent's producer")
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child status {status}"
        p.send(topic_name, b"parent-after").result(10)
    assert [r.value for r in read_topic(tansu.bootstrap, topic_name, 2)] == [b"parent", b"parent-after"]


def test_exception_in_callback_is_logged_and_delivery_goes_on(
    tansu: TansuBroker, topic_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    ok: list[int] = []

    def boom(md: RecordMetadata | None, exc: BaseException | None) -> None:
        raise RuntimeError("user callback exploded")

    def good(i: int) -> Any:
        return lambda md, exc: ok.append(i)

    with caplog.at_level(logging.ERROR), _producer(tansu) as p:
        for i in range(20):
            p.send(topic_name, f"e{i}".encode(), callback=boom if i % 2 else good(i))
        assert p.flush(10) == 0
        p.send(topic_name, b"after").result(10)
    assert ok == list(range(0, 20, 2))
    assert "user callback exploded" in caplog.text
    assert len(read_topic(tansu.bootstrap, topic_name, 21)) == 21


def test_completed_batches_give_their_buffers_back_to_the_pool(tansu: TansuBroker, topic_name: str) -> None:
    """As Java's BufferPool: a completed batch's batch.size buffer goes back on the free list for
    the next batch. The produce request used to keep its views of the batches until after their
    completion, so every buffer was still exported then and dropped, and each batch took a fresh
    zero-filled one. The records still arrive whole: a reused buffer never holds a sent batch's bytes
    while its request reads them."""
    create_topic(tansu.bootstrap, topic_name, 20)
    # Every batch starts at batch.size (batch.initial.size at batch.size, Java's allocation): the
    # buffers the pool keeps. By default a partition whose batches go out small gets smaller ones.
    p = Producer({"bootstrap.servers": tansu.bootstrap, "linger.ms": 0, "batch.initial.size": 16384})
    pool = p._pool
    try:
        sent = [(b"key-%d" % (i % 200), b"value-%d" % i) for i in range(3000)]
        for key, value in sent:
            p.send(topic_name, value, key)
        p.flush()
        assert pool.free_size() > 0  # 0 before: no batch.size buffer was ever reused
        p.send(topic_name, b"after", b"key-0").result(30)
    finally:
        p.close()
    got = read_topic(tansu.bootstrap, topic_name, len(sent) + 1)
    by_key: dict[bytes, list[bytes]] = {}
    for m in got:
        by_key.setdefault(m.key, []).append(m.value)
    want: dict[bytes, list[bytes]] = {}
    for key, value in [*sent, (b"key-0", b"after")]:
        want.setdefault(key, []).append(value)
    assert by_key == want  # every record once, in send order per key
