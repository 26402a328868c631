"""The partition circuit breaker (KIP-693): policy, manager views, config, resolution.

Pure policy tests: a fake clock, no brokers, no sleeping.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproducer.circuit_breaker import (
    CLASS_CONFIG,
    MUTE_TOTAL_METRIC,
    MUTED_PARTITIONS_METRIC,
    UNMUTE_TOTAL_METRIC,
    BreakerState,
    CircuitBreakManager,
    CircuitStateChange,
    FailureRateCircuitBreaker,
    FailureRateConfig,
    PartitionCircuitBreaker,
    ProducerStatusContext,
    SlidingWindow,
    register_circuit_breaker_metrics,
    resolve_circuit_breaker,
)
from kproducer.config import CIRCUIT_BREAKER_KEYS, coerce, render_markdown
from kproducer.errors import (
    ConfigError,
    IllegalStateError,
    KafkaTimeoutError,
    NotLeaderOrFollowerError,
    PartitionMutedError,
)
from kproducer.metadata import Cluster
from kproducer.metrics import Metrics
from kproducer.structs import Node, PartitionInfo, TopicPartition
from tests.support.clock import FakeClock

P = "producer.circuit.breaker."
TOPICS = ("orders", "clicks")
NODES = (0, 1, 2)


def make_cluster(leaders: Mapping[TopicPartition, int]) -> Cluster:
    """A cluster of NODES; a leader of -1 means no leader, 9 an absent broker."""
    nodes = [Node(n, "localhost", 9092 + n) for n in NODES]
    return Cluster(nodes, [PartitionInfo(tp.topic, tp.partition, leader) for tp, leader in leaders.items()])


def default_leaders() -> dict[TopicPartition, int]:
    return {TopicPartition(t, p): p % len(NODES) for t in TOPICS for p in range(6)}


class Harness:
    """A manager + breaker over a swappable cluster, with every state change recorded."""

    def __init__(
        self, configs: Mapping[str, Any] | None = None, leaders: Mapping[TopicPartition, int] | None = None
    ) -> None:
        self.clock = FakeClock(1_000)
        self.cluster = make_cluster(default_leaders() if leaders is None else leaders)
        self.manager = CircuitBreakManager(lambda: self.cluster, self.clock)
        self.events: list[CircuitStateChange] = []
        self.manager.add_listener(self.events.append)
        self.breaker = FailureRateCircuitBreaker()
        self.breaker.configure(dict(configs or {}))
        self.breaker.set_circuit_break_manager(self.manager)

    def ctx(
        self, in_flight: Mapping[int, int] | None = None, max_in_flight: int = 5
    ) -> ProducerStatusContext:
        return ProducerStatusContext(self.clock.now, dict(in_flight or {}), {}, max_in_flight)

    def complete(self, tp: TopicPartition, ok: bool, records: int = 1) -> bool:
        exc = None if ok else NotLeaderOrFollowerError(topic=tp.topic, partition=tp.partition)
        return self.breaker.on_complete(self.ctx(), tp, exc, records)


TP = TopicPartition("orders", 1)
SMALL = {P + "trigger.message.count": 10, P + "trigger.failure.perc": 50, P + "window.ms": 1000,
         P + "mute.retry.interval": 500}  # fmt: skip


# ---------------------------------------------------------------- tripping


def test_no_mute_before_trigger_count() -> None:
    h = Harness(SMALL)
    for _ in range(9):
        assert h.complete(TP, ok=False) is False
    assert not h.manager.is_muted(TP)
    assert h.breaker.failure_rate(TP, h.clock.now) == 100.0
    assert h.events == []
    assert h.complete(TP, ok=False) is True
    assert h.manager.is_muted(TP)


def test_mutes_exactly_at_failure_threshold() -> None:
    h = Harness(SMALL)
    for _ in range(5):
        h.complete(TP, ok=True)
    for _ in range(4):
        h.complete(TP, ok=False)
    assert not h.manager.is_muted(TP)
    assert h.complete(TP, ok=False) is True  # 5 of 10 = 50%: at the threshold
    assert h.manager.state(TP) is BreakerState.OPEN
    assert [(e.previous, e.current, e.reason) for e in h.events] == [
        (BreakerState.CLOSED, BreakerState.OPEN, "failure-rate")
    ]
    assert h.events[0].failure_rate == 50.0
    assert h.events[0].leader == 1


def test_just_below_threshold_stays_closed() -> None:
    h = Harness(SMALL)
    for _ in range(6):
        h.complete(TP, ok=True)
    for _ in range(4):
        h.complete(TP, ok=False)  # 4 of 10 = 40%
    assert not h.manager.is_muted(TP)
    assert h.breaker.record_counts(TP, h.clock.now) == (6, 4)


def test_records_are_weighted_by_batch_record_count() -> None:
    h = Harness(SMALL)
    assert h.complete(TP, ok=True, records=4) is False
    assert h.complete(TP, ok=False, records=5) is False  # 9 records
    assert h.complete(TP, ok=False, records=1) is True  # 10 records, 60% failed
    assert h.events[0].failure_rate == 60.0


@settings(max_examples=200, deadline=None)
@given(
    trigger=st.integers(1, 30),
    perc=st.integers(1, 100),
    outcomes=st.lists(st.tuples(st.booleans(), st.integers(0, 6)), max_size=60),
)
def test_trips_exactly_when_the_model_says(trigger: int, perc: int, outcomes: list[tuple[bool, int]]) -> None:
    """Within one window the breaker opens at the first batch where count >= trigger and failure% >= perc."""
    h = Harness(
        {P + "trigger.message.count": trigger, P + "trigger.failure.perc": perc, P + "window.ms": 60_000}
    )
    ok_n = fail_n = 0
    for ok, records in outcomes:
        h.clock.advance(1)
        if ok:
            ok_n += records
        else:
            fail_n += records
        total = ok_n + fail_n
        should_trip = total >= trigger and fail_n * 100 >= perc * total
        assert h.complete(TP, ok, records) is should_trip
        assert h.manager.is_muted(TP) is should_trip
        if should_trip:
            assert len(h.events) == 1 and h.events[0].is_mute
            return
    assert h.events == []


@settings(max_examples=100, deadline=None)
@given(batches=st.lists(st.tuples(st.integers(0, 5_000), st.integers(0, 50)), max_size=80))
def test_healthy_partitions_are_never_muted(batches: list[tuple[int, int]]) -> None:
    h = Harness({P + "trigger.message.count": 1, P + "trigger.failure.perc": 1, P + "window.ms": 100})
    bad = TopicPartition("orders", 2)
    for step, records in batches:
        h.clock.advance(step)
        assert h.complete(TP, ok=True, records=records) is False
        h.complete(bad, ok=False)
    assert not h.manager.is_muted(TP)
    assert all(e.topic_partition == bad for e in h.events)
    assert h.breaker.failure_rate(TP, h.clock.now) in (None, 0.0)


def test_window_expiry_forgets_old_failures() -> None:
    h = Harness(SMALL)  # window.ms = 1000, 10 buckets of 100 ms
    for _ in range(9):
        h.complete(TP, ok=False)
    h.clock.advance(1000 + 100)
    assert h.breaker.record_counts(TP, h.clock.now) == (0, 0)
    assert h.complete(TP, ok=False) is False  # only 1 record left in the window
    assert not h.manager.is_muted(TP)


def test_failures_spread_inside_the_window_still_trip() -> None:
    h = Harness(SMALL)
    for _ in range(9):
        h.complete(TP, ok=False)
        h.clock.advance(90)  # 810 ms in all: well inside window.ms - bucket
    assert h.complete(TP, ok=False) is True


@settings(max_examples=200, deadline=None)
@given(
    window_ms=st.integers(1, 5_000),
    buckets=st.integers(1, 20),
    start=st.integers(0, 10**9),
    age=st.integers(0, 20_000),
)
def test_sliding_window_bounds(window_ms: int, buckets: int, start: int, age: int) -> None:
    """A record is kept while age < window - bucket and gone once age >= window + bucket."""
    w = SlidingWindow(window_ms, buckets)
    w.record(start, 2, 3)
    assert w.counts(start) == (2, 3)
    s, f = w.counts(start + age)
    if age < window_ms - w.bucket_ms:
        assert (s, f) == (2, 3)
    if age >= window_ms + w.bucket_ms:
        assert (s, f) == (0, 0)
    assert (s, f) in ((2, 3), (0, 0))


@settings(max_examples=100, deadline=None)
@given(steps=st.lists(st.tuples(st.integers(0, 400), st.integers(0, 5), st.integers(0, 5)), max_size=60))
def test_sliding_window_matches_bucketed_model(steps: list[tuple[int, int, int]]) -> None:
    w = SlidingWindow(1_000, 10)
    now = 0
    history: list[tuple[int, int, int]] = []
    for step, s, f in steps:
        now += step
        w.record(now, s, f)
        history.append((now // 100, s, f))
        newest = now // 100
        expect = (
            sum(x for b, x, _ in history if b > newest - 10),
            sum(y for b, _, y in history if b > newest - 10),
        )
        assert w.counts(now) == expect


# ---------------------------------------------------------------- half-open and probes


def trip(h: Harness, tp: TopicPartition = TP) -> None:
    for _ in range(10):
        h.complete(tp, ok=False)
    assert h.manager.state(tp) is BreakerState.OPEN


def test_half_open_grants_exactly_one_probe_per_interval() -> None:
    h = Harness(SMALL)
    trip(h)
    assert h.manager.retry_at_ms(TP) == h.clock.now + 500
    assert h.manager.next_probe_delay_ms() == 500
    h.clock.advance(499)
    assert h.manager.allow_probe(TP) is False
    h.clock.advance(1)
    assert h.manager.next_probe_delay_ms() == 0
    assert h.manager.allow_probe(TP) is True
    assert h.manager.state(TP) is BreakerState.HALF_OPEN
    assert h.manager.is_muted(TP), "half-open partitions stay out of the partitioner"
    assert h.manager.probe_in_flight(TP)
    h.clock.advance(10_000)
    assert [h.manager.allow_probe(TP) for _ in range(5)] == [False] * 5
    assert h.manager.next_probe_delay_ms() is None


def probed(after_ms: int, ok: bool) -> Harness:
    """TP muted, then its probe granted ``after_ms`` later and completed (``ok`` or failed)."""
    h = Harness(SMALL)
    trip(h)
    h.clock.advance(after_ms)
    assert h.manager.allow_probe(TP)
    assert h.complete(TP, ok=ok) is True
    return h


def test_probe_success_closes_and_resets_the_window() -> None:
    h = probed(500, ok=True)
    assert h.manager.state(TP) is BreakerState.CLOSED
    assert not h.manager.is_muted(TP)
    assert h.breaker.record_counts(TP, h.clock.now) == (0, 0)
    assert [(e.current, e.reason) for e in h.events] == [
        (BreakerState.OPEN, "failure-rate"),
        (BreakerState.HALF_OPEN, "probe"),
        (BreakerState.CLOSED, "probe-succeeded"),
    ]
    # A fresh window: it takes the full trigger count again.
    for _ in range(9):
        assert h.complete(TP, ok=False) is False
    assert h.complete(TP, ok=False) is True


def test_probe_failure_reopens_with_a_fresh_interval() -> None:
    h = probed(700, ok=False)
    assert h.manager.state(TP) is BreakerState.OPEN
    assert h.manager.retry_at_ms(TP) == h.clock.now + 500
    h.clock.advance(499)
    assert not h.manager.allow_probe(TP)
    h.clock.advance(1)
    assert h.manager.allow_probe(TP)
    assert not h.manager.allow_probe(TP)
    assert [e.current for e in h.events] == [
        BreakerState.OPEN,
        BreakerState.HALF_OPEN,
        BreakerState.OPEN,
        BreakerState.HALF_OPEN,
    ]
    assert h.manager.mute_total == 1 and h.manager.unmute_total == 0


def test_completions_while_open_do_not_move_the_state() -> None:
    h = Harness(SMALL)
    trip(h)
    retry_at = h.manager.retry_at_ms(TP)
    assert h.complete(TP, ok=True) is False  # a batch sent before the mute
    assert h.complete(TP, ok=False) is False
    assert h.manager.state(TP) is BreakerState.OPEN
    assert h.manager.retry_at_ms(TP) == retry_at


def test_cancelled_probe_is_due_again() -> None:
    h = Harness(SMALL)
    trip(h)
    h.clock.advance(500)
    assert h.manager.allow_probe(TP)
    assert h.manager.cancel_probe(TP)
    assert h.manager.state(TP) is BreakerState.OPEN
    assert h.manager.cancel_probe(TP) is False
    assert h.manager.allow_probe(TP)


def test_partition_muted_error_is_not_counted() -> None:
    h = Harness(SMALL)
    for _ in range(20):
        assert (
            h.breaker.on_complete(h.ctx(), TP, PartitionMutedError(topic="orders", partition=1), 1) is False
        )
    assert h.breaker.record_counts(TP, h.clock.now) == (0, 0)
    assert not h.manager.is_muted(TP)


def test_manual_mute_without_retry_never_probes() -> None:
    h = Harness(SMALL)
    assert h.manager.mute(TP)
    h.clock.advance(10**9)
    assert not h.manager.allow_probe(TP)
    assert h.manager.next_probe_delay_ms() is None
    assert not h.manager.allow_probe(TopicPartition("orders", 0)), "unmuted partitions need no probe"


# ---------------------------------------------------------------- in-flight congestion


INFLIGHT = {**SMALL, P + "enable.mute.inflight.full": True}


def test_in_flight_full_mutes_node_and_drain_unmutes() -> None:
    h = Harness(INFLIGHT)
    node1 = {tp for tp, leader in default_leaders().items() if leader == 1}
    assert h.breaker.on_send(h.ctx({1: 1, 2: 0}, max_in_flight=1)) is True
    assert h.manager.muted_partitions() == node1
    assert h.manager.muted_nodes() == {1}
    assert all(e.reason == "in-flight-full" for e in h.events) and len(h.events) == len(node1)
    assert h.breaker.on_send(h.ctx({1: 1, 2: 0}, max_in_flight=1)) is False  # no change, no events
    assert len(h.events) == len(node1)
    assert h.breaker.on_send(h.ctx({1: 0, 2: 0}, max_in_flight=1)) is True
    assert h.manager.muted_partitions() == frozenset()
    assert sum(e.is_unmute for e in h.events) == len(node1)


def test_in_flight_muting_needs_max_in_flight_one_and_the_flag() -> None:
    h = Harness(INFLIGHT)
    assert h.breaker.on_send(h.ctx({1: 5}, max_in_flight=5)) is False
    assert h.manager.muted_partitions() == frozenset()
    off = Harness(SMALL)
    assert off.breaker.on_send(off.ctx({1: 1}, max_in_flight=1)) is False
    assert off.manager.muted_partitions() == frozenset()


def test_node_drain_keeps_failure_muted_partition_muted() -> None:
    h = Harness(INFLIGHT)
    trip(h)  # TP is led by node 1
    h.breaker.on_send(h.ctx({1: 1}, max_in_flight=1))
    h.breaker.on_send(h.ctx({1: 0}, max_in_flight=1))
    assert h.manager.is_muted(TP)
    assert h.manager.state(TP) is BreakerState.OPEN


def test_no_probe_while_the_leader_node_is_congested() -> None:
    h = Harness(INFLIGHT)
    trip(h)
    h.clock.advance(500)
    h.breaker.on_send(h.ctx({1: 1}, max_in_flight=1))
    assert not h.manager.allow_probe(TP)
    h.breaker.on_send(h.ctx({1: 0}, max_in_flight=1))
    assert h.manager.allow_probe(TP)
    # The probe itself fills the node's window: the state stays HALF_OPEN.
    h.breaker.on_send(h.ctx({1: 1}, max_in_flight=1))
    assert h.manager.state(TP) is BreakerState.HALF_OPEN
    assert h.complete(TP, ok=True)
    h.breaker.on_send(h.ctx({1: 0}, max_in_flight=1))
    assert h.manager.state(TP) is BreakerState.CLOSED


def test_close_lifts_node_mutes() -> None:
    h = Harness(INFLIGHT)
    h.breaker.on_send(h.ctx({2: 1}, max_in_flight=1))
    assert h.manager.muted_nodes() == {2}
    h.breaker.close()
    assert h.manager.muted_nodes() == frozenset()
    with pytest.raises(IllegalStateError):
        h.breaker.on_send(h.ctx())


def test_breaker_requires_a_manager() -> None:
    breaker = FailureRateCircuitBreaker()
    with pytest.raises(IllegalStateError, match="set_circuit_break_manager"):
        breaker.on_complete(ProducerStatusContext(0), TP, None, 1)


# ---------------------------------------------------------------- manager views


def test_views_and_cluster_view() -> None:
    h = Harness(leaders={**default_leaders(), TopicPartition("orders", 6): -1})
    m = h.manager
    m.mute(TopicPartition("orders", 0))
    m.mute(TopicPartition("orders", 6))  # leaderless: muted, never available
    m.mute_node(2)
    avail = [p.partition for p in m.available_partitions_for_topic("orders")]
    muted = [p.partition for p in m.muted_partitions_for_topic("orders")]
    assert avail == [1, 3, 4]
    assert muted == [0, 2, 5, 6]
    assert [p.partition for p in m.available_partitions("orders")] == [1, 3, 4]
    assert {t: [p.partition for p in ps] for t, ps in m.muted_partitions_for_node(2).items()} == {
        "orders": [2, 5],
        "clicks": [2, 5],
    }
    assert {t: [p.partition for p in ps] for t, ps in m.available_partitions_for_node(0).items()} == {
        "orders": [3],
        "clicks": [0, 3],
    }
    view = m.cluster_view(h.cluster)
    assert view is m.cluster_view(h.cluster), "the view is cached per (cluster, muted)"
    assert view.available_partitions_for_topic("clicks") == tuple(m.available_partitions_for_topic("clicks"))
    assert view.partition_count("orders") == 7
    for p in range(7):
        m.mute(TopicPartition("orders", p))
    assert m.available_partitions("orders") == ()
    assert m.cluster_view(h.cluster) is not view
    assert m.metrics()[MUTED_PARTITIONS_METRIC] == len(m.muted_partitions())


def test_leader_move_carries_node_mute_along() -> None:
    h = Harness()
    h.manager.mute_node(1)
    assert h.manager.is_muted(TP)
    leaders = default_leaders()
    leaders[TP] = 0
    h.cluster = make_cluster(leaders)
    assert h.manager.refresh() is True
    assert not h.manager.is_muted(TP)
    assert h.events[-1].reason == "metadata" and h.events[-1].is_unmute
    assert h.manager.refresh() is False


def _model_muted(cluster: Cluster, explicit: set[TopicPartition], nodes: set[int]) -> set[TopicPartition]:
    out = set(explicit)
    for n in nodes:
        out |= {p.topic_partition for p in cluster.partitions_for_node(n)}
    return out


ALL_TPS = [TopicPartition(t, p) for t in TOPICS for p in range(6)]
op_strategy = st.one_of(
    st.tuples(st.just("mute"), st.sampled_from(ALL_TPS)),
    st.tuples(st.just("unmute"), st.sampled_from(ALL_TPS)),
    st.tuples(st.just("mute_node"), st.sampled_from(NODES)),
    st.tuples(st.just("unmute_node"), st.sampled_from(NODES)),
    st.tuples(st.just("move"), st.tuples(st.sampled_from(ALL_TPS), st.sampled_from((*NODES, -1)))),
)


@settings(max_examples=150, deadline=None)
@given(ops=st.lists(op_strategy, max_size=40))
def test_manager_views_match_a_model(ops: list[tuple[str, Any]]) -> None:
    """Under any sequence of operations the views agree with one another and with a model."""
    h = Harness()
    m = h.manager
    leaders = default_leaders()
    explicit: set[TopicPartition] = set()
    nodes: set[int] = set()
    for op, arg in ops:
        before = _model_muted(h.cluster, explicit, nodes)
        n_events = len(h.events)
        if op == "mute":
            m.mute(arg)
            explicit.add(arg)
        elif op == "unmute":
            m.unmute(arg)
            explicit.discard(arg)
        elif op == "mute_node":
            m.mute_node(arg)
            nodes.add(arg)
        elif op == "unmute_node":
            m.unmute_node(arg)
            nodes.discard(arg)
        else:
            tp, leader = arg
            leaders[tp] = leader
            h.cluster = make_cluster(leaders)
            m.refresh()
        expected = _model_muted(h.cluster, explicit, nodes)
        # One listener call per partition whose muted-ness changed, no more.
        assert len(h.events) - n_events == len(before ^ expected)
        assert m.muted_partitions() == expected
        assert all(m.is_muted(tp) == (tp in expected) for tp in ALL_TPS)
        assert m.metrics()[MUTED_PARTITIONS_METRIC] == len(expected)
        assert m.mute_total - m.unmute_total == len(expected)
        for topic in TOPICS:
            avail = m.available_partitions_for_topic(topic)
            muted = m.muted_partitions_for_topic(topic)
            assert {p.topic_partition for p in avail}.isdisjoint(p.topic_partition for p in muted)
            assert {p.topic_partition for p in muted} == {tp for tp in expected if tp.topic == topic}
            assert list(avail) == [
                p
                for p in h.cluster.available_partitions_for_topic(topic)
                if p.topic_partition not in expected
            ]
            assert m.cluster_view(h.cluster).available_partitions_for_topic(topic) == tuple(avail)
        for node in NODES:
            a = [p for ps in m.available_partitions_for_node(node).values() for p in ps]
            mu = [p for ps in m.muted_partitions_for_node(node).values() for p in ps]
            assert sorted(a + mu, key=lambda p: (p.topic, p.partition)) == sorted(
                h.cluster.partitions_for_node(node), key=lambda p: (p.topic, p.partition)
            )
            assert all(p.topic_partition in expected for p in mu)
            assert not any(p.topic_partition in expected for p in a)


# ---------------------------------------------------------------- listeners, metrics, logs


def test_listeners_fire_once_per_state_change_and_survive_failures() -> None:
    h = Harness(SMALL)
    second: list[CircuitStateChange] = []

    def broken(change: CircuitStateChange) -> None:
        raise RuntimeError("listener bug")

    h.manager.add_listener(broken)
    h.manager.add_listener(second.append)
    assert h.manager.mute(TP, retry_after_ms=100) is True
    assert h.manager.mute(TP, retry_after_ms=100) is False  # OPEN -> OPEN: no change
    assert h.manager.unmute(TP) is True
    assert h.manager.unmute(TP) is False
    assert [(e.previous, e.current) for e in h.events] == [
        (BreakerState.CLOSED, BreakerState.OPEN),
        (BreakerState.OPEN, BreakerState.CLOSED),
    ]
    assert second == h.events
    h.manager.remove_listener(second.append)
    h.manager.mute(TP)
    assert len(second) == 2 and len(h.events) == 3
    assert h.manager.metrics() == {
        MUTED_PARTITIONS_METRIC: 1.0,
        MUTE_TOTAL_METRIC: 2.0,
        UNMUTE_TOTAL_METRIC: 1.0,
    }


def test_mute_total_never_lags_the_muted_gauge_while_events_are_dispatched() -> None:
    """A node mute changes several partitions at once; the events are dispatched after the
    lock is released, one by one. A metrics read in between must still count every muted
    partition (a CI run once saw gauge 2, total 1)."""
    h = Harness(SMALL)
    metrics = Metrics()
    seen: list[tuple[float, float]] = []

    def read_during_dispatch(change: CircuitStateChange) -> None:
        snap = metrics.snapshot()
        seen.append((snap[MUTED_PARTITIONS_METRIC], snap[MUTE_TOTAL_METRIC]))

    h.manager.add_listener(read_during_dispatch)  # runs before the metrics listener
    register_circuit_breaker_metrics(metrics, h.manager)
    led = [tp for tp, leader in default_leaders().items() if leader == 1]
    assert len(led) >= 2
    assert h.manager.mute_node(1) is True
    assert len(seen) == len(led)
    assert all(total >= gauge == len(led) for gauge, total in seen), seen
    assert metrics.snapshot()[MUTE_TOTAL_METRIC] == float(len(led))
    assert h.manager.unmute_node(1) is True
    assert metrics.snapshot()["circuit-breaker-unmute-total"] == float(len(led))


def test_state_change_logs_a_warning_naming_partition_leader_and_rate(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness(SMALL)
    with caplog.at_level(logging.WARNING, logger="kproducer.circuit_breaker"):
        trip(h)
    lines = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(lines) == 1
    assert "orders-1" in lines[0] and "leader 1" in lines[0] and "100.0%" in lines[0]


def test_manager_close_clears_state() -> None:
    h = Harness(SMALL)
    trip(h)
    h.manager.close()
    assert h.manager.muted_partitions() == frozenset()
    assert h.manager.mute(TP) is False
    assert not h.manager.is_muted(TP)


# ---------------------------------------------------------------- config


def test_config_defaults_and_string_values() -> None:
    assert FailureRateCircuitBreaker().config == FailureRateConfig(100, 50, 10_000, 5_000, False)
    cfg = FailureRateConfig.from_configs(
        {
            P + "trigger.message.count": " 7 ",
            P + "trigger.failure.perc": "100",
            P + "window.ms": 1,
            P + "mute.retry.interval": "0",
            P + "enable.mute.inflight.full": "TRUE",
            CLASS_CONFIG: "failure_rate",
            "max.in.flight.requests.per.connection": 1,
            "acks": "all",
        }
    )
    assert cfg == FailureRateConfig(7, 100, 1, 0, True)


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [
        ("trigger.message.count", 0, r"trigger\.message\.count must be an integer >= 1, got 0"),
        ("trigger.message.count", "ten", "got 'ten'"),
        ("trigger.message.count", True, "integer"),
        ("trigger.message.count", 1.5, r"must be an integer >= 1, got 1\.5"),
        ("trigger.failure.perc", 0, r"trigger\.failure\.perc must be an integer between 1 and 100"),
        ("trigger.failure.perc", 101, "between 1 and 100, got 101"),
        ("window.ms", 0, r"window\.ms must be an integer >= 1"),
        ("window.ms", None, r"window\.ms must be an integer >= 1, got None"),
        ("mute.retry.interval", -1, r"mute\.retry\.interval must be an integer >= 0"),
        ("mute.retry.interval", 2**31, "got 2147483648"),
        ("enable.mute.inflight.full", "yes", r"enable\.mute\.inflight\.full must be a boolean"),
        ("enable.mute.inflight.full", 1, "boolean"),
    ],
)
def test_config_rejects_bad_values(key: str, value: object, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        FailureRateCircuitBreaker().configure({P + key: value})


def test_settings_come_from_the_config_table() -> None:
    """Each FailureRateConfig field is one row of CIRCUIT_BREAKER_KEYS, with that row's default."""
    by_key = {f.metadata["key"]: f for f in dataclasses.fields(FailureRateConfig)}
    assert list(by_key) == [k.name for k in CIRCUIT_BREAKER_KEYS]
    defaults = FailureRateConfig()
    for key in CIRCUIT_BREAKER_KEYS:
        assert key.name.startswith(P) and key.doc.endswith("."), key.name
        assert coerce(key, key.default) == key.default == getattr(defaults, by_key[key.name].name)
    assert f"`{CIRCUIT_BREAKER_KEYS[0].name}`" in render_markdown()


def test_config_rejects_unknown_keys_with_close_matches() -> None:
    with pytest.raises(
        ConfigError,
        match=r"trigger\.failure\.percent.*did you mean producer\.circuit\.breaker\.trigger\.failure\.perc",
    ):
        FailureRateConfig.from_configs({P + "trigger.failure.percent": 10})
    with pytest.raises(ConfigError, match="known keys"):
        FailureRateConfig.from_configs({P + "zzz": 1})


# ---------------------------------------------------------------- resolve_circuit_breaker


class CustomBreaker:
    """A third-party breaker that satisfies the protocol."""

    def __init__(self) -> None:
        self.configs: Mapping[str, Any] | None = None

    def configure(self, configs: Mapping[str, Any]) -> None:
        self.configs = configs

    def set_circuit_break_manager(self, manager: CircuitBreakManager) -> None:
        self.manager = manager

    def on_send(self, context: ProducerStatusContext) -> bool:
        return False

    def on_complete(
        self,
        context: ProducerStatusContext,
        topic_partition: TopicPartition,
        exception: BaseException | None,
        record_count: int,
    ) -> bool:
        return False

    def close(self) -> None:
        self.configs = None


class NotABreaker:
    pass


class NeedsArgs(CustomBreaker):
    def __init__(self, required: int) -> None:
        super().__init__()


def test_resolve_off() -> None:
    assert resolve_circuit_breaker(None, {}) is None
    assert resolve_circuit_breaker("none", {}) is None
    assert resolve_circuit_breaker("", {}) is None


@pytest.mark.parametrize(
    "spec",
    [
        "failure_rate",
        "FailureRateCircuitBreaker",
        "kproducer.circuit_breaker:FailureRateCircuitBreaker",
        "kproducer.circuit_breaker.FailureRateCircuitBreaker",
        FailureRateCircuitBreaker,
    ],
)
def test_resolve_default(spec: object) -> None:
    breaker = resolve_circuit_breaker(spec, {P + "trigger.message.count": 3})
    assert isinstance(breaker, FailureRateCircuitBreaker)
    assert breaker.config.trigger_message_count == 3


def test_resolve_custom_class_path_and_instance() -> None:
    configs = {P + "anything": 1}
    by_path = resolve_circuit_breaker(f"{__name__}:CustomBreaker", configs)
    assert isinstance(by_path, CustomBreaker) and by_path.configs == configs
    instance = CustomBreaker()
    assert resolve_circuit_breaker(instance, configs) is instance
    assert instance.configs == configs
    assert isinstance(instance, PartitionCircuitBreaker)


def test_resolve_propagates_config_errors() -> None:
    with pytest.raises(ConfigError, match=r"window\.ms"):
        resolve_circuit_breaker("failure_rate", {P + "window.ms": -5})


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        ("failure_rat", "did you mean 'failure_rate'"),
        ("no_such_module_xyz:Breaker", "cannot import"),
        ("kproducer.circuit_breaker:Missing", "cannot import"),
        ("kproducer.", "must be"),
        (":Breaker", "must be"),
        (f"{__name__}:NotABreaker", "must be"),
        (f"{__name__}:NeedsArgs", "cannot instantiate"),
        (42, "must be"),
        (NotABreaker(), "must be"),
        (":Breaker", "must be"),
    ],
)
def test_resolve_rejects_bad_specs(spec: object, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        resolve_circuit_breaker(spec, {})
    assert CLASS_CONFIG in str(info.value)


def test_lock_free_readers_see_whole_snapshots_while_a_writer_mutes() -> None:
    """Readers on other threads only ever see a muted set the writer published."""
    h = Harness()
    m = h.manager
    a, b = TopicPartition("orders", 0), TopicPartition("clicks", 0)
    seen: set[frozenset[TopicPartition]] = set()
    stop = threading.Event()

    def reader() -> None:
        while not stop.is_set():
            snap = m.muted_partitions()
            seen.add(snap)
            assert m.is_muted(a) in (True, False)

    threads = [threading.Thread(target=reader) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for _ in range(300):
            m.mute(a)
            m.mute(b)  # {a} -> {a, b}
            m.unmute(a)
            m.unmute(b)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert seen <= {frozenset(), frozenset({a}), frozenset({a, b}), frozenset({b})}
    assert m.muted_partitions() == frozenset()
    assert m.mute_total == m.unmute_total == 600


# ---------------------------------------------------------------- a leader that stops answering


def _silent(h: Harness, tp: TopicPartition, records: int, sent_ms: int) -> bool:
    """A batch whose request timed out (or whose connection was lost) after being sent at ``sent_ms``."""
    ctx = ProducerStatusContext(h.clock.now, {}, {}, 5, unanswered_since_ms=sent_ms)
    exc = KafkaTimeoutError("request to node 1 timed out", topic=tp.topic, partition=tp.partition)
    return h.breaker.on_complete(ctx, tp, exc, records)


SLOW = {P + "trigger.message.count": 100, P + "trigger.failure.perc": 20, P + "mute.retry.interval": 5000}


def test_first_request_timeout_mutes_despite_a_window_of_successes() -> None:
    """The send-stall scenario's cause: 5 s of successes outvoted the timeouts until they aged out."""
    h = Harness(SLOW)  # window.ms at its 10 s default
    for _ in range(50):  # 5 s of a healthy leader: 25,000 records
        h.complete(TP, ok=True, records=500)
        h.clock.advance(100)
    fault = h.clock.now
    # Error codes alone still weigh against the successes: 140 failed records are 0.6%.
    assert h.complete(TP, ok=False, records=140) is False
    assert not h.manager.is_muted(TP)
    h.clock.advance(1000)  # request.timeout.ms after the first unanswered request was sent
    assert _silent(h, TP, 140, fault) is True
    assert h.manager.state(TP) is BreakerState.OPEN
    (event,) = [e for e in h.events if e.topic_partition == TP]
    assert event.reason == "failure-rate" and event.first_symptom_ms == fault
    assert event.time_to_mute_ms == 1000
    # The silent leader's other partition of the topic goes with it.
    assert {(e.topic_partition, e.reason) for e in h.events if e is not event} == {(TopicPartition("orders", 4), "leader-silent")}


def test_batches_of_one_lost_request_add_up() -> None:
    h = Harness(SLOW)
    for _ in range(20):
        h.complete(TP, ok=True, records=500)
        h.clock.advance(100)
    sent = h.clock.now
    h.clock.advance(1000)
    assert _silent(h, TP, 40, sent) is False
    assert _silent(h, TP, 40, sent) is False  # the same request: the window forgets only once
    assert _silent(h, TP, 40, sent) is True  # 120 records, 100% since the silence began
    assert h.events[0].time_to_mute_ms == 1000


def test_low_traffic_mutes_once_retries_fail_trigger_count_records() -> None:
    h = Harness(SLOW)
    h.complete(TP, ok=True, records=1000)
    first = h.clock.now
    sent = first
    for attempt in range(4):
        h.clock.advance(1000)
        muted = _silent(h, TP, 30, sent)
        assert muted is (attempt == 3), attempt  # 30, 60, 90, 120 records
        h.clock.advance(1000)  # reconnect and retry
        sent = h.clock.now
    assert h.events[0].first_symptom_ms == first
    assert h.events[0].time_to_mute_ms == 7000


def test_an_answer_after_the_silence_clears_the_first_symptom() -> None:
    h = Harness(SLOW)
    sent = h.clock.now
    h.clock.advance(1000)
    assert _silent(h, TP, 30, sent) is False
    h.complete(TP, ok=True, records=10)  # the leader answered again
    later = h.clock.advance(5000)
    h.clock.advance(1000)
    assert _silent(h, TP, 100, later) is True
    assert h.events[0].first_symptom_ms == later


def test_time_to_mute_metric_and_log_line(caplog: pytest.LogCaptureFixture) -> None:
    h = Harness(SLOW)
    metrics = Metrics(clock_ms=h.clock)
    register_circuit_breaker_metrics(metrics, h.manager)
    sent = h.clock.now
    h.clock.advance(1200)
    with caplog.at_level(logging.WARNING, logger="kproducer.circuit_breaker"):
        assert _silent(h, TP, 150, sent) is True
    snap = metrics.snapshot()
    assert snap["circuit-breaker-time-to-mute-max"] == 1200.0
    assert snap["circuit-breaker-time-to-mute-avg"] == 1200.0
    assert "1200 ms after its first unanswered request was sent" in caplog.text


def test_partitions_to_vacate_are_own_mutes_closed_to_records() -> None:
    h = Harness(SLOW)
    tp0, tp3 = TopicPartition("orders", 0), TopicPartition("orders", 3)
    h.manager.mute(TP, retry_after_ms=5000)
    h.manager.mute_node(0)  # orders-0 and orders-3 (and clicks') muted through a congested node only
    assert h.manager.is_muted(tp0) and h.manager.is_muted(tp3)
    assert h.manager.partitions_to_vacate() == frozenset({TP})
    h.clock.advance(5000)  # TP's probe falls due: it opens to records and must keep them
    h.manager.refresh()
    assert h.manager.partitions_to_vacate() == frozenset()


def test_a_silent_leaders_other_partitions_are_muted_with_it() -> None:
    h = Harness(SLOW)
    tp1, tp4, tp2 = TopicPartition("orders", 1), TopicPartition("orders", 4), TopicPartition("orders", 2)
    assert h.manager.leader_of(tp1) == h.manager.leader_of(tp4) == 1
    sent = h.clock.now
    h.clock.advance(1000)
    assert _silent(h, tp4, 30, sent) is False  # below the count on its own
    assert _silent(h, tp2, 30, sent) is False  # another leader
    assert _silent(h, tp1, 150, sent) is True
    assert h.manager.state(tp1) is BreakerState.OPEN and h.manager.state(tp4) is BreakerState.OPEN
    assert h.manager.state(tp2) is BreakerState.CLOSED
    reasons = {e.topic_partition: e.reason for e in h.events}
    assert reasons == {tp1: "failure-rate", tp4: "leader-silent"}
    assert all(e.time_to_mute_ms == 1000 for e in h.events)
    # A partition of the silent leader that meets the silence later goes at once, too.
    tp7 = TopicPartition("clicks", 1)
    assert _silent(h, tp7, 5, sent) is True
    assert h.manager.state(tp7) is BreakerState.OPEN


def test_a_silent_leaders_partitions_of_the_topic_that_sent_nothing_are_muted_with_it() -> None:
    """Batches that waited behind the silent leader's full window were never sent: their partition goes too."""
    tp1, tp4, tp2 = TopicPartition("orders", 1), TopicPartition("orders", 4), TopicPartition("orders", 2)
    other_topic = TopicPartition("clicks", 1)
    h = Harness(SLOW, leaders={tp1: 1, tp4: 1, tp2: 2, other_topic: 1})
    sent = h.clock.now
    h.clock.advance(1000)
    assert _silent(h, tp1, 150, sent) is True
    states = {tp: h.manager.state(tp) for tp in (tp1, tp4, tp2, other_topic)}
    assert states == {
        tp1: BreakerState.OPEN,
        tp4: BreakerState.OPEN,  # nothing of it was in flight
        tp2: BreakerState.CLOSED,  # another leader
        other_topic: BreakerState.CLOSED,  # another topic: muted when its own requests go unanswered
    }
    reasons = {e.topic_partition: (e.reason, e.time_to_mute_ms) for e in h.events}
    assert reasons == {tp1: ("failure-rate", 1000), tp4: ("leader-silent", None)}
    assert h.manager.partitions_to_vacate() == frozenset({tp1, tp4})


def test_a_leader_whose_connection_stalled_is_muted_without_a_request_in_flight() -> None:
    """A leader slow or unreachable from the first contact never gets a request to time out: the
    Sender's stalled-connection report mutes its partitions, every topic's, at once."""
    h = Harness(SMALL)  # mute.retry.interval 500
    led = frozenset(tp for tp in default_leaders() if tp.partition % len(NODES) == 1)
    since = h.clock.now
    h.clock.advance(1000)

    def report(stalled: Mapping[int, int]) -> bool:
        return h.breaker.on_send(ProducerStatusContext(h.clock.now, {}, {}, 5, stalled_connections=dict(stalled)))

    assert report({}) is False and h.manager.muted_partitions() == frozenset()
    assert report({1: since}) is True
    assert h.manager.muted_partitions() == led and h.manager.routing_muted == led
    assert h.manager.partitions_to_vacate() == led  # its never-sent keyless batches go elsewhere
    assert {(e.topic_partition, e.reason, e.time_to_mute_ms) for e in h.events} == {
        (tp, "connection-stalled", 1000) for tp in led
    }
    assert report({1: since}) is False  # already muted: nothing changes, the probe is not postponed
    # Still stalled when the probes fall due: a probe could not be sent, so they are muted again.
    h.clock.advance(500)
    h.manager.refresh()
    assert h.manager.routing_muted == frozenset()  # due: open to records, for a probe batch
    report({1: since})  # still OPEN: no state change to report, but the probes are rescheduled
    assert h.manager.routing_muted == led
    # The connection came up: the next probe opens the partition to records, and its success closes it.
    h.clock.advance(500)
    assert report({}) is False
    tp = TopicPartition("orders", 1)
    assert tp not in h.manager.routing_muted
    assert h.manager.allow_probe(tp)
    h.complete(tp, ok=True)
    assert h.manager.state(tp) is BreakerState.CLOSED


def test_a_stalled_connection_of_a_node_leading_nothing_mutes_nothing() -> None:
    h = Harness(SMALL)
    h.clock.advance(1000)
    ctx = ProducerStatusContext(h.clock.now, {}, {}, 5, stalled_connections={-1: 0, 9: 0})  # bootstrap, absent
    assert h.breaker.on_send(ctx) is False
    assert h.manager.muted_partitions() == frozenset()
