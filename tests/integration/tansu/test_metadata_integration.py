"""KIP-526 metadata refresh against real brokers: Tansu (scale, eviction, unknown topic) and the mock cluster."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from kproducer.admin import create_topics
from kproducer.errors import UnknownTopicOrPartitionError
from kproducer.metadata import Metadata
from kproducer.producer import Producer
from kproducer.structs import TopicPartition
from tests.support.mock_cluster import MockCluster
from tests.support.readback import read_topic
from tests.support.tansu import TansuBroker


def _record_requests(md: Metadata) -> list[list[str] | None]:
    """Wrap ``topics_for_request`` to keep what each metadata request named."""
    seen: list[list[str] | None] = []
    inner = md.topics_for_request

    def wrapped(now: int) -> list[str] | None:
        topics = inner(now)
        seen.append(None if topics is None else list(topics))
        return topics

    md.topics_for_request = wrapped  # type: ignore[method-assign]
    return seen


def test_500_new_topics_cost_far_fewer_than_500_requests(tansu: TansuBroker) -> None:
    names = [f"kip526-scale-{i:03d}" for i in range(500)]
    create_topics(tansu.bootstrap, dict.fromkeys(names, 1), timeout=60)
    p = Producer(bootstrap_servers=tansu.bootstrap, linger_ms=5, max_block_ms=20_000)
    try:
        requests = _record_requests(p._metadata)
        # 16 caller threads discover the topics concurrently: send() parks each record, and topics
        # that turn up while a request is in flight share the next one.
        with ThreadPoolExecutor(16) as pool:
            futures = list(pool.map(lambda t: p.send(t, value=t.encode(), key=b"k"), names))
        assert p.flush(30) == 0
        metas = [f.get(10) for f in futures]
        snap = p.metrics()
    finally:
        p.close(10)
    assert all(m.offset == 0 for m in metas), [m for m in metas if m.offset != 0][:3]
    assert [m.topic for m in metas] == names
    n = len(requests)
    total = snap["metadata-request-total"]
    # The Sender starts with the producer and may send its first request (brokers only, naming no
    # topic) before the wrapper above is in place: that one is counted but not seen.
    assert n <= total <= n + 1, (n, total)
    assert total <= 100, f"{total} metadata requests for 500 new topics (want far below 500)"
    named = [t for r in requests if r for t in r]
    # Tansu answers the producer's first, brokers-only request with every topic (Kafka names none):
    # a topic whose first send() lands while that answer is on its way is known without being named.
    # send() does not wait, so how many topics the threads get through in that time depends on the
    # machine's load; the named ones must be among the topics sent (a partial refresh, not "all").
    assert set(named) <= set(names), sorted(set(named) - set(names))[:5]
    assert all(r is not None for r in requests), "a routine request asked for all topics"
    assert snap["metadata-response-bytes-total"] > 0
    for t in (names[0], names[250], names[-1]):
        (rec,) = read_topic(tansu.bootstrap, t, 1)
        assert rec.value == t.encode() and rec.offset == 0


def test_unknown_topic_fails_after_max_block_ms_naming_it(tansu: TansuBroker) -> None:
    p = Producer(bootstrap_servers=tansu.bootstrap, max_block_ms=800, allow_auto_create_topics=False)
    try:
        t0 = time.monotonic()
        fut = p.send("kip526-no-such-topic", value=b"x")
        assert not fut.done()  # the record waits for metadata, not the caller
        with pytest.raises(UnknownTopicOrPartitionError, match="kip526-no-such-topic"):
            fut.get(5)
        waited = time.monotonic() - t0
        st = p._metadata.topic_state("kip526-no-such-topic")
        assert st is not None and st.urgent and st.errors >= 2  # kept urgent, retried with backoff
        assert waited >= 0.7
        # Retries were backed off, not a hot loop: 100 ms growing to 1 s over 0.8 s is a handful.
        assert p.metrics()["metadata-request-total"] < 15
    finally:
        p.close(5)


def test_idle_topic_is_evicted_and_forgotten(tansu: TansuBroker) -> None:
    create_topics(tansu.bootstrap, {"kip526-idle": 1, "kip526-busy": 1})
    p = Producer(bootstrap_servers=tansu.bootstrap, metadata_max_idle_ms=5000, linger_ms=0)
    try:
        p.send("kip526-idle", value=b"once").get(10)
        assert "record-send-total[topic=kip526-idle]" in p.metrics()
        deadline = time.monotonic() + 5.6
        while time.monotonic() < deadline:  # bounded: about 12 sends
            p.send("kip526-busy", value=b"again").get(10)
            time.sleep(0.5)
        md = p._metadata
        requests = _record_requests(md)
        version = md.mark_urgent("kip526-busy")
        p._wakeup()
        assert md.await_update(version, 5.0)
        assert requests and all(r is not None and "kip526-idle" not in r for r in requests)
        assert "kip526-idle" not in md.topics
        assert md.cluster.partition_count("kip526-idle") is None
        assert "kip526-busy" in md.topics
        assert "record-send-total[topic=kip526-idle]" not in p.metrics()  # its sensors went with it
        # Produced to again: fetched again, as a new topic.
        assert p.send("kip526-idle", value=b"back").get(10).offset == 1
    finally:
        p.close(5)


def test_leader_change_refreshes_only_the_flagged_topic(mock_cluster: MockCluster) -> None:
    topics = [f"kip526-lead-{i}" for i in range(6)]
    for t in topics:
        mock_cluster.create_topic(t, 1)
    p = Producer(bootstrap_servers=mock_cluster.bootstrap, linger_ms=0, retry_backoff_ms=20)
    try:
        for t in topics:
            p.send(t, value=b"before").get(10)
        md = p._metadata
        moved = topics[2]
        old = md.cluster.leader_for(TopicPartition(moved, 0))
        assert old is not None
        new = next(b for b in mock_cluster.broker_ids if b != old.id)
        requests = _record_requests(md)
        mock_cluster.partition_set_leader(moved, 0, new)
        got: list[Any] = []
        done = threading.Event()

        def cb(meta: Any, exc: BaseException | None) -> None:
            got.append((meta, exc))
            done.set()

        p.send(moved, value=b"after", callback=cb)
        assert done.wait(10), "record to the moved partition was not delivered"
        assert got[0][1] is None, got
        leader = md.cluster.leader_for(TopicPartition(moved, 0))
        assert leader is not None and leader.id == new
        assert requests, "no metadata request followed NOT_LEADER_OR_FOLLOWER"
        named = {t for r in requests if r is not None for t in r}
        assert named == {moved}, requests
    finally:
        p.close(5)
