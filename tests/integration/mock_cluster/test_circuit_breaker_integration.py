"""The partition circuit breaker (KIP-693) wired into the producer, on the 3-broker mock cluster.

A 6-partition topic is spread over the brokers (partition p led by broker p % 3), so
one broker leads exactly two partitions. Faults are injected for that broker only
(produce errors, broker down, high RTT): the breaker must mute exactly its two
partitions, the others must keep delivering, and after recovery plus the retry
interval a half-open probe must unmute them. Every record must end delivered, or
failed on its callback with the error.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from kproducer.circuit_breaker import (
    MUTE_RATE_METRIC,
    MUTE_TOTAL_METRIC,
    MUTED_PARTITIONS_METRIC,
    UNMUTE_RATE_METRIC,
    UNMUTE_TOTAL_METRIC,
    BreakerState,
    CircuitBreakManager,
    CircuitStateChange,
)
from kproducer.errors import InvalidRecordError, KafkaError, PartitionMutedError
from kproducer.metadata import Cluster
from kproducer.partitioner import murmur2
from kproducer.producer import Producer
from kproducer.structs import RecordMetadata, TopicPartition
from tests.support.mock_cluster import MockCluster

pytestmark = pytest.mark.timeout(120)

PRODUCE = 0
INVALID_RECORD = 87
PARTITIONS = 6
VALUE = b"v" * 100

BREAKER = {
    "producer.circuit.breaker.class": "failure_rate",
    "producer.circuit.breaker.trigger.message.count": 4,
    "producer.circuit.breaker.trigger.failure.perc": 50,
    "producer.circuit.breaker.window.ms": 1000,
    "producer.circuit.breaker.mute.retry.interval": 300,
}


def _spread(mock_cluster: MockCluster, topic: str) -> tuple[int, set[TopicPartition]]:
    """Create the topic with partition p led by broker ids[p % 3]; return the first broker and its partitions."""
    mock_cluster.create_topic(topic, PARTITIONS)
    ids = mock_cluster.broker_ids
    assert len(ids) == 3, f"expected a 3-broker mock cluster, got brokers {ids}"
    for p in range(PARTITIONS):
        mock_cluster.partition_set_leader(topic, p, ids[p % 3])
    return ids[0], {TopicPartition(topic, p) for p in range(PARTITIONS) if p % 3 == 0}


def _producer(mock_cluster: MockCluster, **overrides: Any) -> Producer:
    config: dict[str, Any] = {
        "bootstrap.servers": mock_cluster.bootstrap,
        "linger.ms": 10,
        "batch.size": 1024,
        "retries": 0,
        "request.timeout.ms": 2000,
        "delivery.timeout.ms": 3000,
        "metadata.max.age.ms": 60_000,
        **BREAKER,
    }
    config.update(overrides)
    return Producer(config)


def _manager(p: Producer) -> CircuitBreakManager:
    m = p.circuit_break_manager
    assert m is not None, "producer.circuit.breaker.class was set, so the producer must have a manager"
    return m


class Tracker:
    """Sends records and keeps every callback outcome, to prove that none is lost."""

    def __init__(self, producer: Producer, topic: str) -> None:
        self.producer = producer
        self.topic = topic
        # send() never waits for metadata; the partition of each send is read from its future at once.
        producer.partitions_for(topic)
        self.lock = threading.Lock()
        self.outcomes: dict[int, list[tuple[RecordMetadata | None, BaseException | None, float]]] = {}
        self.partitions: dict[int, TopicPartition] = {}
        self.first_partitions: dict[int, TopicPartition] = {}  # where send() put each record
        self.futures: dict[int, Any] = {}
        self.sent = 0
        self.routed_to_muted: list[TopicPartition] = []

    def send(self, key: bytes | None = None, partition: int | None = None) -> Any:
        idx = self.sent
        self.sent += 1
        manager = _manager(self.producer)
        before = manager.routing_muted

        def cb(md: RecordMetadata | None, exc: BaseException | None) -> None:
            with self.lock:
                self.outcomes.setdefault(idx, []).append((md, exc, time.monotonic()))

        fut = self.producer.send(self.topic, VALUE, key, partition=partition, callback=cb)
        tp = fut._batch_result.topic_partition
        self.partitions[idx] = tp
        self.first_partitions[idx] = tp
        self.futures[idx] = fut
        if key is None and partition is None and tp in before and tp in manager.routing_muted:
            self.routed_to_muted.append(tp)
        return fut

    def run(self, until: Callable[[], bool], timeout_s: float, pace_s: float = 0.0005) -> bool:
        """Send keyless records until ``until()`` or the timeout; returns whether ``until()`` held."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if until():
                return True
            self.send()
            time.sleep(pace_s)
        return until()

    def check_none_lost(self) -> tuple[list[int], list[int]]:
        """Every record completed exactly once; returns (delivered, failed) record indexes."""
        undelivered = self.producer.flush(30)
        assert undelivered == 0, f"{undelivered} record(s) still undelivered after flush"
        delivered, failed = [], []
        with self.lock:
            for idx in range(self.sent):
                # A never-sent keyless batch may have moved off a muted partition: where it went.
                self.partitions[idx] = self.futures[idx]._batch_result.topic_partition
                got = self.outcomes.get(idx)
                assert got is not None and len(got) == 1, f"record {idx} completed {0 if got is None else len(got)} times"
                md, exc, _ = got[0]
                if exc is None:
                    assert md is not None and md.partition == self.partitions[idx].partition
                    delivered.append(idx)
                else:
                    assert isinstance(exc, KafkaError), f"record {idx} failed with a non-Kafka error {exc!r}"
                    failed.append(idx)
        return delivered, failed


@pytest.fixture
def events() -> list[CircuitStateChange]:
    return []


@pytest.fixture
def producer_factory(mock_cluster: MockCluster) -> Iterator[Callable[..., Producer]]:
    made: list[Producer] = []

    def make(**overrides: Any) -> Producer:
        p = _producer(mock_cluster, **overrides)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close(10)


def _warm_up(tracker: Tracker) -> None:
    for _ in range(200):
        tracker.send()
    assert tracker.producer.flush(15) == 0, "warm-up records were not delivered on the healthy cluster"


def _faulty_cluster_setup(
    mock_cluster: MockCluster,
    topic_name: str,
    producer_factory: Callable[..., Producer],
    events: list[CircuitStateChange],
    **overrides: Any,
) -> tuple[int, set[TopicPartition], Tracker]:
    """Leaders spread over the brokers; a producer whose state changes land in ``events``, warmed up."""
    bad_broker, bad = _spread(mock_cluster, topic_name)
    p = producer_factory(**overrides)
    _manager(p).add_listener(events.append)
    tracker = Tracker(p, topic_name)
    _warm_up(tracker)
    return bad_broker, bad, tracker


def _assert_isolation(
    tracker: Tracker,
    events: list[CircuitStateChange],
    bad: set[TopicPartition],
    recover: Callable[[], None],
    *,
    while_muted: Callable[[], None] = lambda: None,
    expect_error: type[BaseException] | tuple[type[BaseException], ...],
    expect_probe_failure: bool = False,
    expect_failures: bool = True,
) -> None:
    """Shared fault scenario: mute exactly ``bad``, keep the rest flowing, recover, unmute, lose nothing."""
    manager = _manager(tracker.producer)
    assert tracker.run(lambda: manager.muted_partitions() >= bad, timeout_s=15), (
        f"the breaker did not mute {sorted(bad)}; muted {sorted(manager.muted_partitions())}, events {events}"
    )
    muted_at = time.monotonic()
    assert manager.muted_partitions() == bad, f"muted {sorted(manager.muted_partitions())}, expected exactly {sorted(bad)}"
    metrics = tracker.producer.metrics()
    assert metrics[MUTED_PARTITIONS_METRIC] == 2.0
    # The total is counted with the muted set (not by a listener that runs later), so it
    # can never lag the gauge.
    assert metrics[MUTE_TOTAL_METRIC] >= 2.0 and metrics[MUTE_RATE_METRIC] > 0.0

    while_muted()
    # While muted: keep producing for a while; healthy partitions deliver.
    tracker.run(lambda: False, timeout_s=1.0 if not expect_probe_failure else 1.5)
    recover()
    recovered_at = time.monotonic()
    assert tracker.run(lambda: _unmuted_and_told(manager, events, bad), timeout_s=15), (
        f"partitions {sorted(manager.muted_partitions())} were not unmuted after recovery; events {events}"
    )
    # Back to normal: the formerly muted partitions take records again.
    tracker.run(lambda: False, timeout_s=0.5)
    delivered, failed = tracker.check_none_lost()

    assert {e.topic_partition for e in events} == bad, f"state changes touched {sorted({e.topic_partition for e in events})}"
    for tp in bad:
        mine = [e for e in events if e.topic_partition == tp]
        assert any(
            e.current is BreakerState.OPEN and e.reason in ("failure-rate", "leader-silent", "connection-stalled")
            for e in mine
        ), mine
        assert any(e.current is BreakerState.HALF_OPEN and e.reason == "probe" for e in mine), mine
        assert mine[-1].current is BreakerState.CLOSED and mine[-1].reason == "probe-succeeded", mine
        assert all(e.leader == next(iter(events)).leader for e in mine)
    if expect_probe_failure:
        assert any(e.reason == "probe-failed" for e in events), f"no half-open probe failed: {events}"

    for idx in failed:
        _, exc, _ = tracker.outcomes[idx][0]
        # A never-sent batch that moved off a muted partition may still expire where it went.
        assert tracker.first_partitions[idx] in bad, f"record {idx} failed on healthy {tracker.partitions[idx]}: {exc!r}"
        assert isinstance(exc, expect_error), f"record {idx} failed with {exc!r}, expected {expect_error}"
    if expect_failures:
        assert failed, "the fault made no record fail: the scenario did not exercise the breaker"
    healthy_while_muted = [
        idx
        for idx in delivered
        if tracker.partitions[idx] not in bad and muted_at <= tracker.outcomes[idx][0][2] <= recovered_at
    ]
    assert len(healthy_while_muted) >= 100, f"only {len(healthy_while_muted)} records delivered to healthy partitions while muted"
    assert any(tracker.partitions[idx] in bad and tracker.outcomes[idx][0][2] > recovered_at for idx in delivered), (
        "no record was delivered to the recovered partitions after the unmute"
    )
    assert len(tracker.routed_to_muted) <= 2, f"keyless records went to muted partitions: {tracker.routed_to_muted}"
    metrics = tracker.producer.metrics()
    assert metrics[MUTED_PARTITIONS_METRIC] == 0.0
    assert metrics[UNMUTE_TOTAL_METRIC] >= 2.0 and metrics[UNMUTE_RATE_METRIC] > 0.0


def test_produce_errors_mute_exactly_the_leaders_partitions(
    mock_cluster: MockCluster,
    topic_name: str,
    producer_factory: Callable[..., Producer],
    events: list[CircuitStateChange],
    caplog: pytest.LogCaptureFixture,
) -> None:
    bad_broker, bad, tracker = _faulty_cluster_setup(mock_cluster, topic_name, producer_factory, events)
    caplog.set_level(logging.WARNING, logger="kproducer.circuit_breaker")
    # Enough non-retriable errors to dominate a 1 s window; those left after the mute fail probes.
    mock_cluster.broker_push_request_error_rtts(bad_broker, PRODUCE, [(INVALID_RECORD, 0)] * 30)
    _assert_isolation(
        tracker,
        events,
        bad,
        lambda: None,
        # Only probes reach the muted leader now: the next two fail, so a half-open probe re-mutes.
        while_muted=lambda: mock_cluster.broker_push_request_error_rtts(bad_broker, PRODUCE, [(INVALID_RECORD, 0)] * 2),
        expect_error=InvalidRecordError,
        expect_probe_failure=True,
    )
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    for tp in bad:
        assert any(f"partition {tp}" in line and f"leader {bad_broker}" in line and "failure rate" in line for line in lines), lines


def test_broker_down_mutes_its_partitions_until_it_is_back(
    mock_cluster: MockCluster,
    topic_name: str,
    producer_factory: Callable[..., Producer],
    events: list[CircuitStateChange],
) -> None:
    timeouts = {"request.timeout.ms": 500, "delivery.timeout.ms": 1000, "reconnect.backoff.max.ms": 200}
    bad_broker, bad, tracker = _faulty_cluster_setup(mock_cluster, topic_name, producer_factory, events, **timeouts)
    mock_cluster.broker_set_down(bad_broker)
    # Its connection stalls at once: its partitions are muted request.timeout.ms later, before
    # delivery.timeout.ms, and their never-sent keyless batches move to the healthy ones, so no
    # record need fail (a request in flight at the moment it went down still may).
    _assert_isolation(
        tracker,
        events,
        bad,
        lambda: mock_cluster.broker_set_up(bad_broker),
        expect_error=KafkaError,
        expect_failures=False,
    )


def test_high_rtt_times_out_and_mutes_then_a_probe_unmutes(
    mock_cluster: MockCluster,
    topic_name: str,
    producer_factory: Callable[..., Producer],
    events: list[CircuitStateChange],
) -> None:
    timeouts = {"request.timeout.ms": 400, "delivery.timeout.ms": 1000, "reconnect.backoff.max.ms": 200}
    bad_broker, bad, tracker = _faulty_cluster_setup(mock_cluster, topic_name, producer_factory, events, **timeouts)
    mock_cluster.broker_set_rtt(bad_broker, 3000)
    _assert_isolation(
        tracker,
        events,
        bad,
        lambda: mock_cluster.broker_set_rtt(bad_broker, 0),
        expect_error=KafkaError,
    )


def test_a_leader_slow_from_the_first_contact_is_muted_by_its_stalled_connection(
    mock_cluster: MockCluster,
    topic_name: str,
    producer_factory: Callable[..., Producer],
    events: list[CircuitStateChange],
) -> None:
    """Its ApiVersions never answers within request.timeout.ms, so no produce request is ever in flight
    to time out: the stalled connection itself mutes its partitions, keyless records go elsewhere,
    and once the leader answers again a probe closes the breaker. No record is lost."""
    rtt_ms, request_timeout_ms = 5000, 500
    bad_broker, bad = _spread(mock_cluster, topic_name)
    mock_cluster.broker_set_rtt(bad_broker, rtt_ms)  # before the producer's first contact with it
    p = producer_factory(**{"request.timeout.ms": request_timeout_ms, "delivery.timeout.ms": 30_000})
    manager = _manager(p)
    manager.add_listener(events.append)
    tracker = Tracker(p, topic_name)

    def muted_and_told() -> bool:
        # Listeners hear of a mute after the muted set changed (on the Sender thread, outside the
        # manager's lock): wait for both, or the events may still lack the second partition.
        told = {e.topic_partition for e in events if e.current is BreakerState.OPEN}
        return manager.muted_partitions() >= bad and told >= bad

    assert tracker.run(muted_and_told, timeout_s=30), (
        f"the breaker did not mute {sorted(bad)}; muted {sorted(manager.muted_partitions())}, events {events}"
    )
    assert manager.muted_partitions() == bad
    mutes = [e for e in events if e.current is BreakerState.OPEN]
    assert {e.topic_partition for e in mutes} == bad and {e.reason for e in mutes} == {"connection-stalled"}, mutes
    assert all(e.time_to_mute_ms is not None and e.time_to_mute_ms >= request_timeout_ms for e in mutes), mutes
    healthy_before = sum(1 for tp in tracker.partitions.values() if tp not in bad)
    tracker.run(lambda: False, timeout_s=1.0)
    assert len(tracker.routed_to_muted) <= 2, f"keyless records went to muted partitions: {tracker.routed_to_muted}"
    assert sum(1 for tp in tracker.partitions.values() if tp not in bad) - healthy_before >= 100
    mock_cluster.broker_set_rtt(bad_broker, 0)
    assert tracker.run(lambda: _unmuted_and_told(manager, events, bad), timeout_s=30), (
        f"partitions {sorted(manager.muted_partitions())} were not unmuted after recovery; events {events}"
    )
    for tp in bad:
        mine = [e for e in events if e.topic_partition == tp]
        assert mine[-1].current is BreakerState.CLOSED and mine[-1].reason == "probe-succeeded", mine
    tracker.run(lambda: False, timeout_s=0.5)
    delivered, failed = tracker.check_none_lost()
    assert not failed, [tracker.outcomes[i][0][1] for i in failed[:3]]
    assert any(tracker.partitions[idx] in bad for idx in delivered), "the recovered partitions took no record"


def _unmuted_and_told(manager: CircuitBreakManager, events: list[CircuitStateChange], bad: set[TopicPartition]) -> bool:
    """Nothing is muted and every partition in ``bad`` was last told closed.

    Listeners hear of a change on the Sender thread after the muted set changed and outside
    the manager's lock, so an empty muted set alone does not mean the close was told yet.
    """
    if manager.muted_partitions():
        return False
    for tp in bad:
        mine = [e for e in events if e.topic_partition == tp]
        if not mine or mine[-1].current is not BreakerState.CLOSED:
            return False
    return True


def _key_for(partition: int, count: int) -> bytes:
    for i in range(10_000):
        key = f"key-{i}".encode()
        if (murmur2(key) & 0x7FFFFFFF) % count == partition:
            return key
    raise AssertionError(f"no key among 10000 hashes to partition {partition}")


def test_keyed_records_reroute_while_their_partition_is_muted(
    mock_cluster: MockCluster, topic_name: str, producer_factory: Callable[..., Producer]
) -> None:
    _spread(mock_cluster, topic_name)
    p = producer_factory()
    manager = _manager(p)
    p.send(topic_name, VALUE, b"warm").result(15)
    key = _key_for(0, PARTITIONS)
    muted = TopicPartition(topic_name, 0)
    manager.mute(muted)
    available = [i.partition for i in manager.available_partitions(topic_name)]
    assert 0 not in available and len(available) == PARTITIONS - 1
    expected = available[(murmur2(key) & 0x7FFFFFFF) % len(available)]
    got = {p.send(topic_name, VALUE, key).result(15).partition for _ in range(5)}
    assert got == {expected}, f"keyed records went to {got}, expected the deterministic reroute {expected}"
    manager.unmute(muted)
    assert p.send(topic_name, VALUE, key).result(15).partition == 0, "after the unmute the key is back home"


def test_keyed_reroute_opt_out_keeps_records_in_place(
    mock_cluster: MockCluster, topic_name: str, producer_factory: Callable[..., Producer]
) -> None:
    _spread(mock_cluster, topic_name)
    p = producer_factory(**{"producer.circuit.breaker.keyed.reroute": False})
    manager = _manager(p)
    p.send(topic_name, VALUE, b"warm").result(15)
    key = _key_for(0, PARTITIONS)
    muted = TopicPartition(topic_name, 0)
    manager.mute(muted)
    fut = p.send(topic_name, VALUE, key)
    # A record sent after it to an unmuted partition, delivered: the Sender has drained what was
    # ready since (the muted partition's batch lingered no longer) and left the muted one queued.
    p.send(topic_name, VALUE, partition=1).result(15)
    assert not fut.done() and muted in p._accumulator.partitions_with_batches(), (
        "a muted partition must not be drained (no probe is scheduled)"
    )
    manager.unmute(muted)
    p.flush(15)
    assert fut.result(5).partition == 0, "with keyed.reroute=false the record stays on its own partition"


def test_explicit_muted_partition_fails_fast_without_buffer_memory(
    mock_cluster: MockCluster, topic_name: str, producer_factory: Callable[..., Producer]
) -> None:
    _spread(mock_cluster, topic_name)
    p = producer_factory()
    manager = _manager(p)
    p.send(topic_name, VALUE, partition=3).result(15)
    manager.mute(TopicPartition(topic_name, 3))
    seen: list[BaseException | None] = []
    available_before = p.metrics()["buffer-available-bytes"]
    fut = p.send(topic_name, VALUE, partition=3, callback=lambda md, exc: seen.append(exc))
    assert fut.done(), "the send must fail at once"
    err = fut.exception(0)
    assert isinstance(err, PartitionMutedError) and err.retriable, f"expected a retriable PartitionMutedError, got {err!r}"
    assert err.partition == 3 and err.topic == topic_name
    assert len(seen) == 1 and seen[0] is err, "the callback gets the same error once"
    assert p.metrics()["buffer-available-bytes"] == available_before, "a refused record takes no buffer memory"
    assert p.send(topic_name, VALUE, partition=4).result(15).partition == 4, "other explicit partitions still work"


class _RecordingPartitioner:
    """A custom partitioner that uses (and records) the available partitions it is shown."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, ...]] = []

    def partition(self, topic: str, key: Any, key_bytes: bytes | None, value: Any, value_bytes: bytes | None, cluster: Cluster) -> int:
        available = tuple(p.partition for p in cluster.available_partitions_for_topic(topic))
        self.seen.append(available)
        return available[len(self.seen) % len(available)]


@pytest.mark.parametrize("partitioner", ["round_robin", "custom", "builtin"])
def test_keyless_records_avoid_muted_partitions_whatever_the_partitioner(
    mock_cluster: MockCluster, topic_name: str, producer_factory: Callable[..., Producer], partitioner: str
) -> None:
    _spread(mock_cluster, topic_name)
    custom = _RecordingPartitioner()
    spec: Any = {"round_robin": "round_robin", "custom": custom, "builtin": None}[partitioner]
    p = producer_factory(**{"partitioner.class": spec})
    manager = _manager(p)
    p.send(topic_name, VALUE, partition=1).result(15)
    muted = {TopicPartition(topic_name, 0), TopicPartition(topic_name, 5)}
    for tp in muted:
        manager.mute(tp)
    futures = [p.send(topic_name, VALUE) for _ in range(600)]
    assert p.flush(15) == 0
    used = {f.result(0).partition for f in futures}
    assert used.isdisjoint({0, 5}), f"{partitioner}: keyless records reached muted partitions {sorted(used & {0, 5})}"
    assert len(used) >= 2, f"{partitioner}: records used only partitions {used}"
    if partitioner == "custom":
        assert custom.seen and all(0 not in s and 5 not in s for s in custom.seen)
