"""Metadata holder and working-set policy with a fake clock."""

from __future__ import annotations

import random
import threading

import pytest

from kproducer.errors import KafkaTimeoutError
from kproducer.metadata import Metadata, WorkingSetPolicy
from tests.support.latch import LATCH_S
from tests.support.metadata import MetadataResponse


def test_new_topic_is_urgent_then_max_age_applies() -> None:
    m = Metadata(metadata_max_age_ms=1000, rng=random.Random(1))
    m.handle_response(MetadataResponse([]), [], 0)
    assert m.time_to_next_update(10) == 990
    assert m.add_topic("a", 20) is True
    assert m.time_to_next_update(20) == 0
    assert m.topics_for_request(20) == ["a"]
    m.handle_response(MetadataResponse([("a", 0, 2), ("gone", 3, 0)]), ["a", "gone"], 30)
    assert m.cluster.partition_count("a") == 2
    assert m.cluster.topic_errors["gone"] == 3
    assert m.version == 2
    assert m.time_to_next_update(30) == 1000


def test_failures_back_off_exponentially_to_max() -> None:
    m = Metadata(retry_backoff_ms=100, retry_backoff_max_ms=1000, rng=random.Random(7))
    m.request_update()
    waits = []
    for _ in range(6):
        m.handle_failure(0)
        waits.append(m.time_to_next_update(0))
    for k, w in enumerate(waits):
        nominal = min(100 * 2**k, 1000)
        assert 0.8 * nominal <= w <= 1.2 * nominal, (k, w)


def test_idle_topics_leave_the_request() -> None:
    policy = WorkingSetPolicy(metadata_max_idle_ms=500)
    m = Metadata(policy=policy)
    m.add_topic("old", 0)
    m.add_topic("new", 400)
    assert m.topics_for_request(600) == ["new"]
    assert "old" not in m.topics
    m.request_update_for_all_topics()
    assert m.topics_for_request(600) is None


def test_await_update_wakes_waiters_and_times_out() -> None:
    m = Metadata()
    v = m.request_update()
    assert m.await_update(v, 0.05) is False
    t = threading.Timer(0.05, lambda: m.handle_response(MetadataResponse([]), [], 1))
    t.start()
    assert m.await_update(v, LATCH_S) is True  # returns at the update; the bound only catches a hang
    t.join()
    m.record_connection_failure("10.0.0.1:9092", "refused")
    with pytest.raises(KafkaTimeoutError, match="10.0.0.1:9092"):
        m.wait_for_update(m.version, 0.01)
