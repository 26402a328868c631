"""The librdkafka mock cluster fixture, exercised with confluent-kafka's own Producer."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.support.mock_cluster import MockCluster, MockClusterError, find_librdkafka, start_mock_cluster

PRODUCE = 0
NOT_LEADER_OR_FOLLOWER = 6
MESSAGE_TOO_LARGE = 10
#: The delayed broker's RTT: long enough that a loaded machine cannot reorder the two answers.
RTT_MS = 1000


def _producer(cluster: MockCluster, **extra: Any) -> Any:
    from confluent_kafka import Producer

    conf: dict[str, Any] = {
        "bootstrap.servers": cluster.bootstrap,
        "linger.ms": 0,
        "topic.metadata.refresh.interval.ms": 200,
        "retry.backoff.ms": 20,
        "retry.backoff.max.ms": 100,
        "message.timeout.ms": 10000,
    }
    conf.update(extra)
    return Producer(conf)


def _produce_and_wait(p: Any, topic: str, partition: int, value: bytes, timeout: float = 10.0) -> Any:
    """Produce one record and return its delivery report message; raises on error/timeout."""
    reports: list[tuple[Any, Any]] = []
    p.produce(
        topic, value=value, partition=partition, on_delivery=lambda err, msg: reports.append((err, msg))
    )
    deadline = time.monotonic() + timeout
    while not reports and time.monotonic() < deadline:
        p.poll(0.05)
    assert reports, f"no delivery report for {topic}-{partition} within {timeout}s"
    err, msg = reports[0]
    assert err is None, f"delivery to {topic}-{partition} failed: {err}"
    return msg


def _leaders(p: Any, topic: str) -> dict[int, int]:
    md = p.list_topics(topic, timeout=5)
    return {pid: pm.leader for pid, pm in md.topics[topic].partitions.items()}


def test_starts_three_brokers_on_loopback_only(mock_cluster: MockCluster) -> None:
    assert mock_cluster.broker_ids == [1, 2, 3]
    hosts = mock_cluster.bootstrap.split(",")
    assert len(hosts) == 3 and all(h.startswith("127.0.0.1:") for h in hosts)
    listening = mock_cluster.listening_addresses()
    ports = {int(h.rsplit(":", 1)[1]) for h in hosts}
    assert {port for _, port in listening} >= ports
    assert all(ip == "127.0.0.1" for ip, _ in listening), listening


def test_produce_to_six_partitions_and_get_delivery_reports(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("six", 6)
    p = _producer(mock_cluster)
    reports: list[tuple[Any, Any]] = []
    for i in range(60):
        p.produce("six", value=b"v%d" % i, partition=i % 6, on_delivery=lambda e, m: reports.append((e, m)))
    assert p.flush(10) == 0
    assert len(reports) == 60
    assert all(e is None for e, _ in reports), [e for e, _ in reports if e is not None][:3]
    by_partition: dict[int, list[int]] = {}
    for _, m in reports:
        by_partition.setdefault(m.partition(), []).append(m.offset())
    assert sorted(by_partition) == list(range(6))
    assert all(sorted(offs) == list(range(10)) for offs in by_partition.values())
    md = p.list_topics("six", timeout=5)
    assert sorted(md.brokers) == [1, 2, 3]


def test_leader_move_is_visible_in_metadata(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("moves", 3)
    p = _producer(mock_cluster)
    before = _leaders(p, "moves")
    target = next(b for b in mock_cluster.broker_ids if b != before[0])
    mock_cluster.partition_set_leader("moves", 0, target)
    deadline = time.monotonic() + 5
    while _leaders(p, "moves")[0] != target and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _leaders(p, "moves")[0] == target
    assert _produce_and_wait(p, "moves", 0, b"x").partition() == 0


def test_pushed_produce_errors_are_retried(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("errs", 1)
    stats: list[dict[str, Any]] = []
    p = _producer(
        mock_cluster, **{"statistics.interval.ms": 50, "stats_cb": lambda s: stats.append(json.loads(s))}
    )
    _produce_and_wait(p, "errs", 0, b"warm-up")  # connections and metadata in place
    mock_cluster.push_request_errors(PRODUCE, [NOT_LEADER_OR_FOLLOWER, NOT_LEADER_OR_FOLLOWER])
    msg = _produce_and_wait(p, "errs", 0, b"after-errors")
    assert msg.offset() == 1  # delivered exactly once, after the two failed attempts

    def produce_requests() -> int:
        return max((sum(b["req"].get("Produce", 0) for b in s["brokers"].values()) for s in stats), default=0)

    # warm-up + two refused attempts + the accepted one
    deadline = time.monotonic() + 3
    while produce_requests() < 4 and time.monotonic() < deadline:
        p.poll(0.05)
    assert produce_requests() >= 4, (
        f"confluent-kafka sent {produce_requests()} Produce requests, expected >= 4"
    )


def test_pushed_non_retriable_error_reaches_the_delivery_report(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("noretry", 1)
    p = _producer(mock_cluster)
    _produce_and_wait(p, "noretry", 0, b"warm-up")
    mock_cluster.push_request_errors(PRODUCE, [MESSAGE_TOO_LARGE])
    reports: list[Any] = []
    p.produce("noretry", value=b"x", partition=0, on_delivery=lambda e, m: reports.append(e))
    p.flush(10)
    assert len(reports) == 1 and reports[0] is not None
    assert reports[0].code() == MESSAGE_TOO_LARGE


def test_broker_down_then_up(mock_cluster: MockCluster) -> None:
    """A record for a broker that is down is never acknowledged (it times out); once the broker is
    back, the next record is written at the offset after the one before the outage."""
    mock_cluster.create_topic("updown", 1)
    mock_cluster.partition_set_leader("updown", 0, 2)
    p = _producer(mock_cluster, **{"message.timeout.ms": 2000})
    before = _produce_and_wait(p, "updown", 0, b"before")
    assert before.offset() == 0
    mock_cluster.broker_set_down(2)
    reports: list[tuple[Any, Any]] = []
    p.produce("updown", value=b"while-down", partition=0, on_delivery=lambda e, m: reports.append((e, m)))
    deadline = time.monotonic() + 60  # only turns a hang into a failure
    while not reports and time.monotonic() < deadline:
        p.poll(0.05)
    assert len(reports) == 1, "no delivery report for the record sent while the broker was down"
    err, _ = reports[0]
    assert err is not None, "a broker that is down acknowledged a record"
    mock_cluster.broker_set_up(2)
    after = _produce_and_wait(p, "updown", 0, b"after", timeout=60)
    assert after.offset() == 1  # the record sent while down was never written


def test_broker_rtt_delays_produce(mock_cluster: MockCluster) -> None:
    """The RTT delays only its broker's answers: a record to an undelayed broker, produced after
    one to the delayed broker, is delivered first (an order, not a wall-clock upper bound)."""
    mock_cluster.create_topic("slow", 2)
    mock_cluster.partition_set_leader("slow", 0, 1)
    mock_cluster.partition_set_leader("slow", 1, 3)
    p = _producer(mock_cluster)
    _produce_and_wait(p, "slow", 0, b"warm-up")
    _produce_and_wait(p, "slow", 1, b"warm-up")
    mock_cluster.broker_set_rtt(1, RTT_MS)
    delivered: list[tuple[bytes, Any, float]] = []

    def report(err: Any, msg: Any) -> None:
        delivered.append((msg.value(), err, time.monotonic()))

    t0 = time.monotonic()
    p.produce("slow", value=b"slow", partition=0, on_delivery=report)
    p.produce("slow", value=b"fast", partition=1, on_delivery=report)
    deadline = time.monotonic() + 10 + RTT_MS / 1000
    while len(delivered) < 2 and time.monotonic() < deadline:
        p.poll(0.05)
    assert [(value, err) for value, err, _ in delivered] == [(b"fast", None), (b"slow", None)], delivered
    slow_s = delivered[1][2] - t0
    assert slow_s >= RTT_MS / 1000, f"produce to the RTT-delayed broker took {slow_s:.3f}s"


def test_broker_push_request_error_rtts(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("rtts", 1)
    mock_cluster.partition_set_leader("rtts", 0, 2)
    p = _producer(mock_cluster)
    _produce_and_wait(p, "rtts", 0, b"warm-up")
    mock_cluster.broker_push_request_error_rtts(2, PRODUCE, [(NOT_LEADER_OR_FOLLOWER, 0), (0, 250)])
    t0 = time.monotonic()
    msg = _produce_and_wait(p, "rtts", 0, b"x")
    assert time.monotonic() - t0 >= 0.25
    assert msg.offset() == 1


def test_bad_commands_fail_clearly() -> None:
    with pytest.raises(ValueError, match="brokers must be in"):
        start_mock_cluster(0)
    cluster = start_mock_cluster(1)
    try:
        with pytest.raises(MockClusterError, match="broker_set_rtt"):
            cluster.broker_set_rtt(99, 10)
        cluster.ping()  # the child keeps serving after a refused command
        with pytest.raises(ValueError, match="replication_factor"):
            cluster.create_topic("t", 1, replication_factor=2)
    finally:
        cluster.stop()
    with pytest.raises(MockClusterError, match="stopped"):
        cluster.ping()
    assert cluster.process.returncode == 0


def test_child_crash_does_not_take_the_test_down() -> None:
    cluster = start_mock_cluster(1)
    try:
        cluster.process.kill()
        cluster.process.wait(5)
        with pytest.raises(MockClusterError, match="exited"):
            cluster.ping()
    finally:
        cluster.stop()


def test_librdkafka_is_found() -> None:
    assert "librdkafka" in find_librdkafka().name
