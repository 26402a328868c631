"""NetworkClient against librdkafka's 3-broker mock cluster: leader moves, broker down, slow broker."""

from __future__ import annotations

import time

from kproducer.errors import KafkaTimeoutError
from kproducer.network.client import ClientRequest, ClientResponse, NetworkClient, build_metadata_request
from kproducer.network.protocol import CLIENT_VERSIONS, ApiKey
from kproducer.structs import TopicPartition
from tests.support.clock import FakeClock
from tests.support.mock_cluster import MockCluster


def test_leader_move_shows_after_refresh(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("moves", 2)
    c = NetworkClient(bootstrap_servers=mock_cluster.bootstrap)
    try:
        c.fetch_metadata(["moves"], 5000)
        assert sorted(c.metadata.cluster.nodes) == sorted(mock_cluster.broker_ids)
        for b in mock_cluster.broker_ids:
            assert c.await_ready(b, 5000)
            adv = c.broker_api_versions(b)
            for key, (lo, hi) in CLIENT_VERSIONS.items():
                r = adv.get(int(key))
                want = None if r is None or max(lo, r[0]) > min(hi, r[1]) else min(hi, r[1])
                assert c.api_version(b, key) == want, (b, key)
        old = c.metadata.cluster.leader_for(TopicPartition("moves", 0))
        assert old is not None
        new = next(b for b in mock_cluster.broker_ids if b != old.id)
        mock_cluster.partition_set_leader("moves", 0, new)
        c.fetch_metadata(["moves"], 5000)
        moved = c.metadata.cluster.leader_for(TopicPartition("moves", 0))
        assert moved is not None and moved.id == new
    finally:
        c.close()


def test_reconnect_attempts_follow_the_backoff_curve(mock_cluster: MockCluster) -> None:
    """Attempts to a down broker are spaced by the jittered exponential backoff, to the millisecond:
    the client's clock stands still while an attempt is under way and moves 1 ms at a time between
    attempts, so how long the machine takes to notice a failed connection does not count."""
    clock = FakeClock.following_real_time()
    c = NetworkClient(
        bootstrap_servers=mock_cluster.bootstrap,
        reconnect_backoff_ms=40,
        reconnect_backoff_max_ms=1000,
        socket_connection_setup_timeout_ms=200,
        clock_ms=clock,
    )
    try:
        c.fetch_metadata([], 5000)
        node = mock_cluster.broker_ids[0]
        assert c.await_ready(node, 5000)
        mock_cluster.broker_set_down(node)
        clock.freeze()
        attempts: list[int] = []
        deadline = time.monotonic() + 30  # only turns a hang into a failure
        last_attempt = -1
        while time.monotonic() < deadline and len(attempts) < 6:
            now = clock()
            c.ready(node, now)
            st = c._nodes[node]
            if st.last_attempt_ms != last_attempt:
                last_attempt = st.last_attempt_ms
                attempts.append(last_attempt)
            if c.is_connecting(node) or c.is_ready(node):
                c.poll(5, now)
            else:
                c.poll(0, now)
                clock.advance(1)
        assert len(attempts) >= 5, f"only {len(attempts)} attempts: {attempts}"
        gaps = [b - a for a, b in zip(attempts[1:], attempts[2:], strict=False)]
        # gap k (k = failed attempts before it) is 40 * 2**k within ±20% jitter, capped at 1000 ms.
        for k, gap in enumerate(gaps, start=1):
            nominal = min(40 * 2**k, 1000)
            assert 0.8 * nominal <= gap <= 1.2 * nominal + 1, (k, gap, gaps)
        assert gaps[-1] > gaps[0]
        clock.run_free()
        mock_cluster.broker_set_up(node)
        assert c.await_ready(node, 5000), "client did not reconnect once the broker came back"
    finally:
        c.close()


def test_request_timeout_fails_in_flight_and_client_recovers(mock_cluster: MockCluster) -> None:
    """A request unanswered for request.timeout.ms (on the client's clock) fails as a timed-out
    disconnect, not a millisecond earlier, while the broker's answer is still seconds away."""
    clock = FakeClock.following_real_time()
    c = NetworkClient(bootstrap_servers=mock_cluster.bootstrap, request_timeout_ms=300, clock_ms=clock)
    try:
        c.fetch_metadata([], 5000)
        node = mock_cluster.broker_ids[1]
        assert c.await_ready(node, 5000)
        mock_cluster.broker_set_rtt(node, 10_000)
        got: list[ClientResponse] = []
        req = ClientRequest(
            node, ApiKey.METADATA, lambda v: build_metadata_request(v, [], True), callback=got.append
        )
        clock.freeze()
        sent_at = clock()
        c.send(req, sent_at)
        while not got and clock() - sent_at < 3_000:
            c.poll(0, clock())
            if not got:
                clock.advance(1)
        assert got, "request never completed"
        assert got[0].disconnected and got[0].timed_out and isinstance(got[0].error, KafkaTimeoutError)
        assert got[0].error.retriable
        waited = clock() - sent_at
        assert 300 <= waited < 310, f"timed out after {waited} ms on the client's clock"
        assert not c.is_ready(node) and c.in_flight_request_count(node) == 0
        clock.run_free()
        mock_cluster.broker_set_rtt(node, 0)
        resp = c.send_and_receive(
            ClientRequest(node, ApiKey.METADATA, lambda v: build_metadata_request(v, [], True)), 5000
        )
        assert resp.error is None and resp.response is not None
    finally:
        c.close()
