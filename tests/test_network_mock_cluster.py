"""NetworkClient against librdkafka's 3-broker mock cluster: leader moves, broker down, slow broker."""

from __future__ import annotations

import time

from kproducer.errors import KafkaTimeoutError
from kproducer.network.client import ClientRequest, ClientResponse, NetworkClient, build_metadata_request
from kproducer.network.protocol import CLIENT_VERSIONS, ApiKey
from kproducer.structs import TopicPartition
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
    c = NetworkClient(
        bootstrap_servers=mock_cluster.bootstrap,
        reconnect_backoff_ms=40,
        reconnect_backoff_max_ms=1000,
        socket_connection_setup_timeout_ms=200,
    )
    try:
        c.fetch_metadata([], 5000)
        node = mock_cluster.broker_ids[0]
        assert c.await_ready(node, 5000)
        mock_cluster.broker_set_down(node)
        attempts: list[int] = []
        deadline = time.monotonic() + 4
        last_attempt = -1
        while time.monotonic() < deadline and len(attempts) < 6:
            now = c._clock()
            c.ready(node, now)
            st = c._nodes[node]
            if st.last_attempt_ms != last_attempt:
                last_attempt = st.last_attempt_ms
                attempts.append(last_attempt)
            c.poll(5, now)
        assert len(attempts) >= 5, f"only {len(attempts)} attempts: {attempts}"
        gaps = [b - a for a, b in zip(attempts[1:], attempts[2:], strict=False)]
        # gap k (k = failed attempts before it) is ~ 40 * 2**k within ±20% jitter, plus the detection latency.
        for k, gap in enumerate(gaps, start=1):
            nominal = min(40 * 2**k, 1000)
            assert 0.8 * nominal - 5 <= gap <= 1.2 * nominal + 60, (k, gap, gaps)
        assert gaps[-1] > gaps[0]
        mock_cluster.broker_set_up(node)
        assert c.await_ready(node, 5000), "client did not reconnect once the broker came back"
    finally:
        c.close()


def test_request_timeout_fails_in_flight_and_client_recovers(mock_cluster: MockCluster) -> None:
    c = NetworkClient(bootstrap_servers=mock_cluster.bootstrap, request_timeout_ms=300)
    try:
        c.fetch_metadata([], 5000)
        node = mock_cluster.broker_ids[1]
        assert c.await_ready(node, 5000)
        mock_cluster.broker_set_rtt(node, 1500)
        got: list[ClientResponse] = []
        req = ClientRequest(
            node, ApiKey.METADATA, lambda v: build_metadata_request(v, [], True), callback=got.append
        )
        t0 = time.monotonic()
        c.send(req, c._clock())
        while not got and time.monotonic() - t0 < 3:
            c.poll(50, c._clock())
        assert got, "request never completed"
        assert got[0].disconnected and got[0].timed_out and isinstance(got[0].error, KafkaTimeoutError)
        assert got[0].error.retriable
        assert 0.25 <= time.monotonic() - t0 < 1.5
        assert not c.is_ready(node) and c.in_flight_request_count(node) == 0
        mock_cluster.broker_set_rtt(node, 0)
        resp = c.send_and_receive(
            ClientRequest(node, ApiKey.METADATA, lambda v: build_metadata_request(v, [], True)), 5000
        )
        assert resp.error is None and resp.response is not None
    finally:
        c.close()
