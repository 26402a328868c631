"""KIP-526 refresh policy and the Metadata holder, with a fake clock (no broker, no sleeping)."""

from __future__ import annotations

import logging
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproducer.metadata import Metadata, MetadataRefreshPolicy, TopicState
from kproducer.metrics import Metrics, register_producer_metrics
from tests.support.clock import FakeClock
from tests.support.metadata import IDLE, MAX_AGE, MetadataResponse, answer, topic_names, working_sets


def _policy(buffered: frozenset[str] = frozenset()) -> MetadataRefreshPolicy:
    return MetadataRefreshPolicy(MAX_AGE, IDLE, has_buffered_records=lambda t: t in buffered)


@settings(max_examples=300, deadline=None)
@given(working_sets())
def test_urgent_set_is_always_fully_included_and_size_is_bounded(
    state: tuple[dict[str, TopicState], int],
) -> None:
    topics, now = state
    policy = _policy()
    urgent, non_urgent = policy.classify(topics, now)
    sel = policy.select(topics, now)
    assert set(urgent) <= set(sel.topics)
    assert len(sel.topics) <= max(len(urgent), sel.target)
    assert len(set(sel.topics)) == len(sel.topics)
    assert sel.target == max(int(len(topics) / (MAX_AGE / 1000) * 10), 20)
    # Every urgent topic is new, flagged, or older than max age; and out of its backoff.
    for t in urgent:
        s = topics[t]
        assert s.urgent or s.last_refresh_ms < 0 or now - s.last_refresh_ms >= MAX_AGE
        assert s.retry_at_ms <= now
    # Never "all topics": only T and U are candidates.
    assert set(sel.topics) <= set(urgent) | set(non_urgent)
    if not urgent and len(non_urgent) < sel.target:
        assert sel.topics == []


@settings(max_examples=300, deadline=None)
@given(working_sets())
def test_non_urgent_topics_are_taken_oldest_first(state: tuple[dict[str, TopicState], int]) -> None:
    topics, now = state
    policy = _policy()
    urgent, non_urgent = policy.classify(topics, now)
    sel = policy.select(topics, now)
    taken = [t for t in sel.topics if t not in set(urgent)]
    assert taken == non_urgent[: len(taken)]
    ages = [topics[t].last_refresh_ms for t in non_urgent]
    assert ages == sorted(ages)
    left_out = [topics[t].last_refresh_ms for t in non_urgent if t not in set(taken)]
    if taken and left_out:
        assert max(topics[t].last_refresh_ms for t in taken) <= min(left_out)
    for t in non_urgent:
        assert now - topics[t].last_refresh_ms >= MAX_AGE / 2


@settings(max_examples=200, deadline=None)
@given(working_sets(), st.sets(topic_names, max_size=20))
def test_eviction_spares_recent_and_buffered_topics(
    state: tuple[dict[str, TopicState], int], buffered: set[str]
) -> None:
    topics, now = state
    policy = _policy(frozenset(buffered))
    evicted = set(policy.evictable(topics, now))
    for t, s in topics.items():
        if now - s.last_used_ms <= IDLE or t in buffered:
            assert t not in evicted
        else:
            assert t in evicted


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.integers(0, 30_000)), min_size=1, max_size=40))
def test_evicted_topics_are_never_requested_again_until_used(uses: list[tuple[str, int]]) -> None:
    """Drive the holder through time; a topic evicted stays out of requests until it is produced to again."""
    policy = MetadataRefreshPolicy(MAX_AGE, 20_000)
    m = Metadata(policy=policy, rng=random.Random(0))
    now = 0
    evicted: set[str] = set()
    for topic, gap in uses:
        now += gap
        m.touch(topic, now)
        evicted.discard(topic)
        for _ in range(3):
            if m.time_to_next_update(now) == 0:
                before = set(m.topics)
                requested = answer(m, now)
                evicted |= before - set(m.topics)
                assert not evicted & set(requested), (evicted, requested)
                assert not evicted & m.cluster.topics
            now += 1_000
        # Anything produced to within the idle time is still in the working set.
        assert topic in m.topics


@settings(max_examples=100, deadline=None)
@given(st.integers(min_value=0, max_value=300), st.integers(min_value=0, max_value=30_000))
def test_first_send_to_unknown_topic_costs_exactly_one_urgent_request(cached: int, elapsed: int) -> None:
    """Whatever is cached, a new topic is due at once, alone with the U its target allows; then nothing."""
    m = Metadata(policy=MetadataRefreshPolicy(MAX_AGE, 10 * MAX_AGE), rng=random.Random(0))
    for i in range(cached):
        m.add_topic(f"known-{i}", 0)
    if cached:
        answer(m, 0)
    now = elapsed
    for i in range(cached):
        m.touch(f"known-{i}", now)
    # Settle any routine refresh that is already due before the new topic arrives.
    if m.time_to_next_update(now) == 0:
        answer(m, now)
    m.add_topic("fresh", now)
    assert m.time_to_next_update(now) == 0
    sel_topics = answer(m, now)
    sel = m.last_selection
    assert sel is not None and "fresh" in sel_topics
    assert sel.urgent == 1
    assert len(sel_topics) <= max(1, sel.target)
    assert m.cluster.partition_count("fresh") == 1
    assert m.time_to_next_update(now) > 0


# ---------------------------------------------------------------- holder behaviour
def test_target_size_formula() -> None:
    p = MetadataRefreshPolicy(metadata_max_age_ms=300_000)
    assert p.target_size(0) == 20
    assert p.target_size(600) == 20  # 2 topics/s → 20
    assert p.target_size(3_000) == 100  # 10 topics/s → 100
    assert MetadataRefreshPolicy(metadata_max_age_ms=10_000).target_size(2_000) == 2_000


def test_non_urgent_topics_wait_until_the_target_is_reached() -> None:
    m = Metadata(policy=MetadataRefreshPolicy(MAX_AGE, IDLE), rng=random.Random(0))
    for i in range(30):
        m.add_topic(f"t{i:02d}", i * 100)
    answer(m, 0)  # all 30 were new: one urgent request names them all
    assert m.requests_sent == 1
    # Half max age later they are all in U (30 ≥ target 30): one routine request of the target size.
    assert m.time_to_next_update(4_000) == 1_000
    assert m.time_to_next_update(5_000) == 0
    req = answer(m, 5_000)
    assert len(req) == 30 and m.last_selection is not None and m.last_selection.urgent == 0


def test_urgent_request_piggybacks_oldest_non_urgent_up_to_target() -> None:
    m = Metadata(policy=MetadataRefreshPolicy(20_000, IDLE), rng=random.Random(0))
    names = [f"old{i:02d}" for i in range(25)]
    for t in names:
        m.add_topic(t, 0)
    answer(m, 0)
    for i, t in enumerate(names):  # staggered refreshes: old00 is the oldest
        m.topic_state(t).last_refresh_ms = i * 10  # type: ignore[union-attr]
    m.add_topic("new", 12_000)
    req = answer(m, 12_000)
    # 26 cached topics over 20 s → target max(13, 20) = 20: T (1) plus the 19 oldest of U.
    assert m.last_selection is not None and m.last_selection.target == 20
    assert req == ["new", *names[:19]]


def test_flagged_topic_alone_is_refreshed_and_flag_during_flight_survives() -> None:
    m = Metadata(policy=MetadataRefreshPolicy(MAX_AGE, IDLE), rng=random.Random(0))
    for t in ("a", "b", "c"):
        m.add_topic(t, 0)
    answer(m, 0)
    assert m.time_to_next_update(100) > 0
    m.mark_urgent("b", 100)
    assert m.time_to_next_update(100) == 0
    assert m.topics_for_request(100) == ["b"]
    m.mark_urgent("c", 101)  # flagged while the request for b is in flight
    m.handle_response(MetadataResponse([("b", 0, 1)]), ["b"], 110)
    assert m.time_to_next_update(110) == 0
    assert answer(m, 110) == ["c"]
    assert m.time_to_next_update(110) > 0


def test_per_topic_error_keeps_topic_urgent_with_growing_backoff() -> None:
    m = Metadata(retry_backoff_ms=100, retry_backoff_max_ms=1000, rng=random.Random(3))
    m.add_topic("missing", 0)
    now = 0
    waits = []
    for _ in range(6):
        assert m.time_to_next_update(now) == 0
        answer(m, now, errors={"missing": 3})
        st_ = m.topic_state("missing")
        assert st_ is not None and st_.urgent
        wait = m.time_to_next_update(now)
        waits.append(wait)
        now += wait
    for k, w in enumerate(waits):
        nominal = min(100 * 2**k, 1000)
        assert 0.8 * nominal <= w <= 1.2 * nominal, (k, waits)
    assert m.cluster.topic_errors["missing"] == 3
    # Once it exists, it is no longer urgent.
    answer(m, now)
    assert m.cluster.partition_count("missing") == 1
    assert not m.topic_state("missing").urgent  # type: ignore[union-attr]


def test_failed_request_backs_off_and_keeps_urgent_topics() -> None:
    m = Metadata(retry_backoff_ms=100, retry_backoff_max_ms=1000, rng=random.Random(1))
    m.add_topic("a", 0)
    m.topics_for_request(0)
    m.handle_failure(0)
    wait = m.time_to_next_update(0)
    assert 80 <= wait <= 120
    assert m.topics_for_request(wait) == ["a"]


def test_full_refresh_only_when_explicit_and_eviction_forgets_the_topic() -> None:
    m = Metadata(policy=MetadataRefreshPolicy(MAX_AGE, 5_000), rng=random.Random(0))
    m.add_topic("idle", 0)
    m.add_topic("busy", 0)
    answer(m, 0)
    assert m.cluster.partition_count("idle") == 1
    for now in range(1_000, 12_001, 1_000):
        m.touch("busy", now)
    assert answer(m, 12_000) == ["busy"]  # idle was evicted, and its metadata forgotten
    assert "idle" not in m.topics and m.cluster.partition_count("idle") is None
    m.request_update_for_all_topics()
    assert m.topics_for_request(12_000) is None


def test_buffered_topic_is_not_evicted() -> None:
    policy = MetadataRefreshPolicy(MAX_AGE, 5_000, has_buffered_records=lambda t: t == "stuck")
    m = Metadata(policy=policy)
    m.add_topic("stuck", 0)
    m.add_topic("gone", 0)
    m.topics_for_request(60_000)
    assert m.topics == frozenset({"stuck"})


def test_metrics_and_debug_log(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock()
    metrics = Metrics(clock_ms=clock)
    sensors = register_producer_metrics(metrics)
    m = Metadata(policy=MetadataRefreshPolicy(MAX_AGE, IDLE), rng=random.Random(0), clock_ms=clock)
    m.bind_metrics(sensors)
    for t in ("a", "b", "c"):
        m.add_topic(t, 0)
    assert metrics.snapshot()["metadata-urgent-topics"] == 3.0
    with caplog.at_level(logging.DEBUG, logger="kproducer.metadata"):
        answer(m, 0, size=500)
    assert any("|T|=3 |U|=0 target=20 topics(3)=['a', 'b', 'c']" in r.getMessage() for r in caplog.records)
    m.add_topic("d", 10)
    answer(m, 10, size=120)
    snap = metrics.snapshot()
    assert snap["metadata-request-total"] == 2.0
    assert snap["metadata-topics-per-request-avg"] == 2.0
    assert snap["metadata-response-bytes-total"] == 620.0
    assert snap["metadata-request-rate"] > 0
    assert snap["metadata-urgent-topics"] == 0.0
    clock.now = 3_010
    assert metrics.snapshot()["metadata-age-max"] == pytest.approx(3.01)
