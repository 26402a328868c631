"""The C send() lane (``kproducer._speedups.SendLane``) against Tansu, checked by confluent-kafka's consumer.

The lane must be indistinguishable from the Python send() except in speed: the
same partitions (murmur2 for keys, KIP-794 sticky without), the same order, the
same futures and callbacks, and every call it does not take handed to Python.
These tests fail (not skip) when the extension is missing, unless the run is the
deliberate pure-Python pass (KPRODUCER_PURE_PYTHON=1), where they check that no
lane exists.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import defaultdict
from typing import Any

import pytest

from kproducer.errors import ProducerClosedError, RecordTooLargeError
from kproducer.partitioner import partition_for_key
from kproducer.producer import Producer
from kproducer.record import native
from kproducer.structs import RecordMetadata
from tests.support.readback import create_topic, read_topic
from tests.support.tansu import TansuBroker

PURE = os.environ.get("KPRODUCER_PURE_PYTHON") == "1"


def _producer(tansu: TansuBroker, **kw: Any) -> Producer:
    cfg: dict[str, Any] = {"bootstrap.servers": tansu.bootstrap, "linger.ms": 2, "max.block.ms": 10_000}
    cfg.update(kw)
    return Producer(cfg)


class _NoLane:
    """The pure-Python pass: the same record checks run, the lane counters read as if it took every call."""

    enabled = True
    fast_calls = 10**9


def _lane(p: Producer) -> Any:
    if PURE:
        assert p._lane is None, "KPRODUCER_PURE_PYTHON=1 must not use the C lane"
        return _NoLane()
    assert native.c is not None, "the C extension kproducer._speedups is not built: run `make test` to build it"
    assert p._lane is not None, "the default config must get the C send lane"
    return p._lane


def test_a_default_producer_gets_the_lane_without_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    """Natively the lane must build: a class that lost a slot it uses would only log a WARNING."""
    caplog.set_level(logging.WARNING, logger="kproducer")
    # Nothing listens on port 1: the lane is built in the constructor, before any broker is asked.
    p = Producer({"bootstrap.servers": "127.0.0.1:1", "max.block.ms": 200})
    try:
        if PURE:
            assert p._lane is None
        else:
            assert type(p._lane).__name__ == "SendLane" and p._lane.enabled
        assert not [r for r in caplog.records if "fast lane" in r.getMessage()], caplog.text
    finally:
        p.close(0)


def test_pure_python_pass_has_no_lane(tansu: TansuBroker) -> None:
    with _producer(tansu) as p:
        if PURE:
            assert p._lane is None and "send" not in p.__dict__
        else:
            assert p.__dict__["send"] is p._lane is not None


class TestLane:
    """Run in both passes: the record checks hold with and without the lane."""

    def test_keyed_and_keyless_records_round_trip_with_java_partitions(
        self, tansu: TansuBroker, topic_name: str
    ) -> None:
        create_topic(tansu.bootstrap, topic_name, 4)
        sent: list[tuple[bytes | None, bytes | None]] = []
        with _producer(tansu) as p:
            lane = _lane(p)
            p.partitions_for(topic_name)  # wait for the topic's metadata: send() itself never does
            futs = []
            for i in range(3000):
                key = None if i % 3 == 0 else f"key-{i % 50}".encode()
                value = None if i % 97 == 0 else f"value-{i}".encode()
                futs.append(p.send(topic_name, value, key))
                sent.append((key, value))
            assert p.flush(15) == 0
            mds = [f.result(10) for f in futs]
            assert lane.fast_calls > 2500, f"the lane took only {lane.fast_calls} of 3000 sends"
        for (key, value), md in zip(sent, mds, strict=True):
            assert isinstance(md, RecordMetadata) and md.topic == topic_name and md.offset >= 0
            if key is not None:
                assert md.partition == partition_for_key(key, 4)
            assert md.serialized_key_size == (-1 if key is None else len(key))
            assert md.serialized_value_size == (-1 if value is None else len(value))
        got = read_topic(tansu.bootstrap, topic_name, len(sent))
        assert len(got) == len(sent)
        by_pos = {(r.partition, r.offset): r for r in got}
        for (key, value), md in zip(sent, mds, strict=True):
            r = by_pos[(md.partition, md.offset)]
            assert (r.key, r.value, r.headers) == (key, value, [])
            assert r.timestamp == md.timestamp

    def test_callbacks_fire_once_in_send_order_per_partition(self, tansu: TansuBroker, topic_name: str) -> None:
        create_topic(tansu.bootstrap, topic_name, 3)
        seen: dict[int, list[int]] = defaultdict(list)
        errors: list[BaseException] = []

        def cb(i: int) -> Any:
            def on_delivery(md: RecordMetadata | None, exc: BaseException | None) -> None:
                if exc is not None:
                    errors.append(exc)
                else:
                    assert md is not None
                    seen[md.partition].append(i)

            return on_delivery

        with _producer(tansu) as p:
            lane = _lane(p)
            p.partitions_for(topic_name)  # wait for the topic's metadata: send() itself never does
            for i in range(2000):
                p.send(topic_name, b"v%d" % i, b"k%d" % (i % 7), callback=cb(i))
            assert p.flush(15) == 0
            assert lane.fast_calls > 1500
        assert not errors
        assert sum(len(v) for v in seen.values()) == 2000
        for part, order in seen.items():
            assert order == sorted(order), f"partition {part}: callbacks out of send order"

    def test_calls_the_lane_does_not_take_run_the_python_path(self, tansu: TansuBroker, topic_name: str) -> None:
        create_topic(tansu.bootstrap, topic_name, 2)
        with _producer(tansu) as p:
            lane = _lane(p)
            p.send(topic_name, b"warm").result(10)
            before = lane.fast_calls
            f1 = p.send(topic_name, b"h", headers=[("a", b"1")])
            f2 = p.send(topic_name, b"p", partition=1)
            f3 = p.send(topic_name, b"t", timestamp=1_700_000_000_000)
            f4 = p.send(topic_name, "a str value")  # the serializer path
            f5 = p.send(topic_name, bytearray(b"ba"))
            assert PURE or lane.fast_calls == before, "the lane took a call shape it must hand to Python"
            assert p.flush(10) == 0
            assert f2.result(5).partition == 1
            assert f3.result(5).timestamp == 1_700_000_000_000
            for f in (f1, f4, f5):
                assert f.result(5).offset >= 0
            with pytest.raises(TypeError):
                p.send(topic_name, b"x", bogus=1)
        got = read_topic(tansu.bootstrap, topic_name, 6)
        values = {r.value: r for r in got}
        assert values[b"h"].headers == [("a", b"1")]
        assert set(values) == {b"warm", b"h", b"p", b"t", b"a str value", b"ba"}

    def test_too_large_records_and_closed_producer_behave_as_in_python(
        self, tansu: TansuBroker, topic_name: str
    ) -> None:
        create_topic(tansu.bootstrap, topic_name, 1)
        p = _producer(tansu, max_request_size=2000)
        lane = _lane(p)
        p.send(topic_name, b"small").result(10)
        fut = p.send(topic_name, b"x" * 5000)
        with pytest.raises(RecordTooLargeError, match="max.request.size"):
            fut.result(5)
        p.close(10)
        assert PURE or not lane.enabled
        with pytest.raises(ProducerClosedError):
            p.send(topic_name, b"after close")

    @pytest.mark.parametrize("codec", ["lz4", "zstd"])
    def test_compressed_batches_through_the_lane(self, tansu: TansuBroker, topic_name: str, codec: str) -> None:
        create_topic(tansu.bootstrap, topic_name, 2)
        values = [(b"compressible-%d-" % i) * 20 for i in range(1500)]
        with _producer(tansu, compression_type=codec) as p:
            lane = _lane(p)
            p.partitions_for(topic_name)  # wait for the topic's metadata: send() itself never does
            futs = [p.send(topic_name, v) for v in values]
            assert p.flush(15) == 0
            assert all(f.result(5).offset >= 0 for f in futs)
            assert lane.fast_calls > 1000
        got = read_topic(tansu.bootstrap, topic_name, len(values))
        assert sorted(r.value or b"" for r in got) == sorted(values)

    def test_threads_sending_at_once_lose_nothing_and_keep_order(self, tansu: TansuBroker, topic_name: str) -> None:
        create_topic(tansu.bootstrap, topic_name, 4)
        per_thread = 5000
        with _producer(tansu, batch_size=4096) as p:
            lane = _lane(p)
            p.partitions_for(topic_name)  # wait for the topic's metadata: send() itself never does

            def run(t: int) -> None:
                for i in range(per_thread):
                    p.send(topic_name, b"%d:%d" % (t, i), b"thread-%d" % t)

            threads = [threading.Thread(target=run, args=(t,)) for t in range(4)]
            for th in threads:
                th.start()
            for th in threads:
                th.join(60)
            assert p.flush(30) == 0
            assert lane.fast_calls > 4 * per_thread // 2
        got = read_topic(tansu.bootstrap, topic_name, 4 * per_thread)
        assert len(got) == 4 * per_thread
        by_thread: dict[int, list[int]] = defaultdict(list)
        for r in sorted(got, key=lambda r: (r.partition, r.offset)):
            t, i = (r.value or b"").split(b":")
            by_thread[int(t)].append(int(i))
        for t, seq in by_thread.items():
            assert seq == list(range(per_thread)), f"thread {t}: records lost, duplicated or reordered"

    def test_new_metadata_sends_topics_back_through_python_once(self, tansu: TansuBroker, topic_name: str) -> None:
        """The lane keeps one Cluster snapshot: a metadata update empties it, and each topic registers again."""
        a, b = f"{topic_name}-a", f"{topic_name}-b"
        create_topic(tansu.bootstrap, a, 2)
        with _producer(tansu) as p:
            p.send(a, b"a0").result(10)
            if not PURE:
                assert p._lane.is_registered(a)
            # b exists only from here: Tansu answers a Metadata request with an empty topic list
            # with every topic, so a b created earlier could arrive with the producer's first
            # answer and need no update of its own.
            create_topic(tansu.bootstrap, b, 2)
            p.send(b, b"b0").result(10)  # b is new: a metadata request, a new snapshot
            if not PURE:
                assert p._lane.is_registered(b) and not p._lane.is_registered(a)
            futs = [p.send(a, b"a%d" % i) for i in range(1, 200)]
            assert p.flush(10) == 0
            assert all(f.result(5).offset >= 0 for f in futs)
            if not PURE:
                assert p._lane.is_registered(a) and p._lane.is_registered(b)
        got = read_topic(tansu.bootstrap, a, 200)
        assert sorted(int((r.value or b"a-1")[1:]) for r in got) == list(range(200))

    def test_with_a_circuit_breaker_muted_partitions_go_through_python(
        self, tansu: TansuBroker, topic_name: str
    ) -> None:
        """Seed 002 with the lane: nothing lands on a muted partition; keyed records are rerouted."""
        from kproducer.structs import TopicPartition

        create_topic(tansu.bootstrap, topic_name, 4)
        with _producer(tansu, producer_circuit_breaker_class="failure_rate", batch_size=2048) as p:
            lane = _lane(p)
            p.send(topic_name, b"warm").result(10)
            manager = p._breaker_manager
            assert manager is not None
            muted = TopicPartition(topic_name, 2)
            manager.mute(muted)
            hashed_to_muted = [k for k in (b"key-%d" % i for i in range(200)) if partition_for_key(k, 4) == 2][:20]
            before = lane.fast_calls
            futs = [p.send(topic_name, b"x" * 100) for _ in range(600)]
            keyed = [p.send(topic_name, b"k", k) for k in hashed_to_muted]
            assert p.flush(15) == 0
            parts = {f.result(5).partition for f in futs}
            assert 2 not in parts and len(parts) >= 2, parts
            assert all(f.result(5).partition != 2 for f in keyed)
            assert PURE or lane.fast_calls - before > 400, "the lane should still take the unmuted partitions' records"
            manager.unmute(muted)
            back = [p.send(topic_name, b"k", k) for k in hashed_to_muted]
            assert p.flush(15) == 0
            assert all(f.result(5).partition == 2 for f in back)

    def test_configs_that_change_records_get_no_lane(self, tansu: TansuBroker) -> None:
        class Sub(Producer):
            def send(self, *a: Any, **kw: Any) -> Any:  # type: ignore[override]
                return super().send(*a, **kw)

        cases: list[Producer] = [
            _producer(tansu, partitioner_class="round_robin"),
            _producer(tansu, value_serializer="json"),
            _producer(tansu, interceptor_classes=[_NoopInterceptor()]),
            Sub({"bootstrap.servers": tansu.bootstrap}),
        ]
        try:
            for p in cases:
                assert p._lane is None and "send" not in p.__dict__, p.config
        finally:
            for p in cases:
                p.close(5)


class _NoopInterceptor:
    def on_send(self, record: Any) -> Any:
        return record

    def on_acknowledgement(self, metadata: Any, exception: Any) -> None:
        return None

    def close(self) -> None:
        return None
