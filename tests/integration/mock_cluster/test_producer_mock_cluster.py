"""The idempotent Producer under faults on librdkafka's 3-broker mock cluster.

Every record's value carries ``partition:sequence``; after each scenario the topic
is read back with confluent-kafka and every partition must hold each sequence
exactly once, in order.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from kproducer.accumulator import RecordFuture
from kproducer.accumulator.accumulator import NodeLatencyStats
from kproducer.errors import BufferExhaustedError, KafkaTimeoutError
from kproducer.producer import Producer
from kproducer.structs import TopicPartition
from tests.support.latch import LATCH_S, wait_until
from tests.support.mock_cluster import MockCluster
from tests.support.readback import read_topic

PRODUCE = 0
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7


def _producer(cluster: MockCluster, **kw: Any) -> Producer:
    cfg: dict[str, Any] = {
        "bootstrap.servers": cluster.bootstrap,
        "linger.ms": 1,
        "batch.size": 1024,
        "retry.backoff.ms": 20,
        "retry.backoff.max.ms": 200,
        "reconnect.backoff.ms": 20,
        "reconnect.backoff.max.ms": 200,
        "metadata.max.age.ms": 1000,
        "max.block.ms": 10_000,
    }
    cfg.update(kw)
    return Producer(cfg)


def _leader(p: Producer, topic: str, partition: int) -> int:
    node = p._metadata.cluster.leader_for(TopicPartition(topic, partition))
    assert node is not None, f"no leader known for {topic}-{partition}"
    return node.id


def _produce_with_fault(
    cluster: MockCluster,
    topic: str,
    partitions: int,
    per_partition: int,
    fault: Callable[[Producer, int], None],
    *,
    check_order: bool = True,
    config: dict[str, Any] | None = None,
) -> Producer:
    """Send ``per_partition`` sequenced records to each partition, calling ``fault(p, i)`` along the way."""
    cluster.create_topic(topic, partitions)
    p = _producer(cluster, **(config or {}))
    futs: list[RecordFuture] = []
    try:
        p.partitions_for(topic)
        for i in range(per_partition):
            fault(p, i)
            for part in range(partitions):
                futs.append(p.send(topic, f"{part}:{i:06d}".encode(), partition=part))
            if i % 50 == 0:
                time.sleep(0.002)  # let several requests be in flight while faults land
        assert p.flush(60) == 0
        failed = [f.exception(0) for f in futs if f.exception(0) is not None]
        assert not failed, f"{len(failed)} records failed, first: {failed[0]!r}"
    finally:
        p.close(10)
    _check_exactly_once_in_order(cluster, topic, partitions, per_partition, check_order)
    return p


def _check_exactly_once_in_order(
    cluster: MockCluster, topic: str, partitions: int, per_partition: int, check_order: bool = True
) -> None:
    got = read_topic(cluster.bootstrap, topic, partitions * per_partition, partitions=partitions, timeout=60)
    for part in range(partitions):
        seqs = [int((r.value or b"").split(b":")[1]) for r in got if r.partition == part]
        dups = len(seqs) - len(set(seqs))
        missing = sorted(set(range(per_partition)) - set(seqs))
        assert not dups, f"partition {part}: {dups} duplicates"
        assert not missing, f"partition {part}: {len(missing)} lost, first {missing[:5]}"
        if check_order:
            assert seqs == list(range(per_partition)), f"partition {part}: order broken"
    assert len(got) == partitions * per_partition


def _inject(cluster: MockCluster) -> Callable[[Producer, int], None]:
    def fault(p: Producer, i: int) -> None:
        if i == 100:
            cluster.push_request_errors(PRODUCE, [NOT_LEADER_OR_FOLLOWER] * 3 + [REQUEST_TIMED_OUT] * 3)
        if i == 300:
            cluster.push_request_errors(PRODUCE, [REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER] * 2)

    return fault


def test_injected_not_leader_and_request_timed_out(mock_cluster: MockCluster) -> None:
    """Idempotent, five in flight: nothing lost, nothing written twice.

    Order is not asserted here because librdkafka's mock broker checks producer
    sequences only for transactional producers (rd_kafka_mock_validate_records
    returns early without a transactional.id): a later batch that was already in
    flight behind a failed one is appended instead of being refused with
    OUT_OF_ORDER_SEQUENCE_NUMBER as a real broker does, so the mock itself
    reorders. The ordered variant below runs with one request in flight.
    """
    p = _produce_with_fault(mock_cluster, "faults", 6, 600, _inject(mock_cluster), check_order=False)
    m = p.metrics()
    assert m["record-retry-total"] > 0, "the injected errors must have caused retries"
    assert m["record-error-total"] == 0


def test_injected_errors_keep_order_with_one_in_flight(mock_cluster: MockCluster) -> None:
    """With max.in.flight.requests.per.connection=1 the client alone keeps order (partitions are muted)."""
    p = _produce_with_fault(
        mock_cluster,
        "faults1",
        6,
        600,
        _inject(mock_cluster),
        config={"max.in.flight.requests.per.connection": 1},
    )
    assert p.metrics()["record-retry-total"] > 0


def test_broker_down_then_up(mock_cluster: MockCluster) -> None:
    down: list[int] = []

    def fault(p: Producer, i: int) -> None:
        if i == 100:
            down.append(_leader(p, "down-up", 0))
            mock_cluster.broker_set_down(down[0])
        if i == 400:
            mock_cluster.broker_set_up(down[0])

    _produce_with_fault(mock_cluster, "down-up", 6, 600, fault, config={"request.timeout.ms": 2000})
    assert down


def test_leader_move_mid_stream(mock_cluster: MockCluster) -> None:
    moved: list[tuple[int, int]] = []

    def fault(p: Producer, i: int) -> None:
        if i in (150, 350):
            for part in range(3):
                old = _leader(p, "moves", part)
                new = next(b for b in mock_cluster.broker_ids if b != old)
                mock_cluster.partition_set_leader("moves", part, new)
                moved.append((old, new))

    p = _produce_with_fault(mock_cluster, "moves", 3, 600, fault)
    assert len(moved) == 6
    assert p.metrics()["record-error-total"] == 0


def test_delivery_timeout_expires_on_futures(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("expire", 3)
    with _producer(
        mock_cluster, **{"delivery.timeout.ms": 1500, "request.timeout.ms": 1000, "linger.ms": 0}
    ) as p:
        p.partitions_for("expire")
        leader = _leader(p, "expire", 0)
        victims = [part for part in range(3) if _leader(p, "expire", part) == leader]
        p.send("expire", b"warm", partition=victims[0]).result(10)
        mock_cluster.broker_set_down(leader)
        t0 = time.monotonic()
        futs = [p.send("expire", f"x{i}".encode(), partition=victims[0]) for i in range(20)]
        excs = [f.exception(LATCH_S) for f in futs]
        elapsed = time.monotonic() - t0
        assert all(isinstance(e, KafkaTimeoutError) for e in excs), excs[:3]
        assert f"expire-{victims[0]}" in str(excs[0]) and "delivery.timeout.ms" in str(excs[0])
        assert elapsed >= 1.2, f"failed after {elapsed:.2f} s, before delivery.timeout.ms=1.5 s"
        assert p.metrics()["record-error-total"] >= 20
        mock_cluster.broker_set_up(leader)
        p.send("expire", b"after", partition=victims[0]).result(15)


def test_buffer_exhaustion_blocks_then_fails_and_memory_returns(mock_cluster: MockCluster) -> None:
    mock_cluster.create_topic("exhaust", 1)
    total = 32 * 1024
    p = _producer(
        mock_cluster,
        **{"buffer.memory": total, "batch.size": 4096, "max.block.ms": 800, "linger.ms": 0},
    )
    try:
        p.partitions_for("exhaust")
        mock_cluster.broker_set_down(_leader(p, "exhaust", 0))
        futs = []
        for _ in range(200):  # ~200 x 1 KiB: far more than 32 KiB of batches
            t0 = time.monotonic()
            fut = p.send("exhaust", bytes(1000), partition=0)
            blocked = time.monotonic() - t0
            futs.append(fut)
            if fut.done() and fut.exception(0) is not None:
                break
        else:
            raise AssertionError("200 sends into a 32 KiB buffer with the leader down never exhausted it")
        exc = futs[-1].exception(0)
        assert isinstance(exc, BufferExhaustedError), repr(exc)
        assert blocked >= 0.7, f"send() blocked {blocked:.2f}s, expected about max.block.ms=0.8s"
        assert "800" in str(exc)
        m = p.metrics()
        assert m["buffer-exhausted-total"] >= 1
        assert m["bufferpool-wait-time-ns-total"] >= 0.7e9
        assert m["buffer-available-bytes"] < total
    finally:
        p.close(0.5)
    assert all(f.done() for f in futs)
    assert p._pool.available_memory() == total, "buffer memory leaked after close"


def test_availability_timeout_keeps_partitioner_off_a_down_leader(mock_cluster: MockCluster) -> None:
    """partitioner.availability.timeout.ms: the Sender reports undrainable leaders, the partitioner skips them."""
    mock_cluster.create_topic("avail", 6)
    p = _producer(
        mock_cluster,
        **{
            "partitioner.availability.timeout.ms": 100,
            "batch.size": 512,
            "linger.ms": 5,
            "delivery.timeout.ms": 60_000,
        },
    )
    try:
        p.partitions_for("avail")
        down = _leader(p, "avail", 0)
        down_parts = {part for part in range(6) if _leader(p, "avail", part) == down}
        assert len(down_parts) < 6
        # The adaptive choice (and so the availability timeout) only starts once every partition
        # of the topic has had a batch: until then the load stats could not name a partition that
        # never had one, and the choice is uniform over all partitions (Java's
        # RecordAccumulator.partitionReady). One record to each partition first, so that what
        # follows tests the timeout and not that warm-up.
        primed = [p.send("avail", b"prime", partition=part) for part in range(6)]
        assert p.flush(30) == 0
        assert all(f.exception(0) is None for f in primed)
        mock_cluster.broker_set_down(down)
        early: list[RecordFuture] = []
        late: list[RecordFuture] = []

        def keep_sending() -> bool:
            early.append(p.send("avail", bytes(100)))
            return False

        def stats() -> NodeLatencyStats | None:
            return p._accumulator.node_latency_stats(down)

        def down_parts_queued() -> bool:
            queued = {tp.partition for tp in p._accumulator.partitions_with_batches() if tp.topic == "avail"}
            return down_parts <= queued

        # Keyless records flow until the Sender has found the down leader undrainable for longer
        # than the availability timeout and each of its partitions holds a batch (as in Java's
        # ready(), a partition with an empty queue is not excluded: it counts as the least loaded),
        # then until a later ready pass (which excludes them from the partitioner's loads), then for
        # a few more batches (the sticky partition moves on).
        wait_until(
            lambda: (
                (s := stats()) is not None and s.ready_time_ms - s.drain_time_ms > 100 and down_parts_queued()
            )
            or keep_sending(),
            "the Sender reported the down leader undrainable for more than 100 ms, with batches for it queued",
        )
        flagged = stats()
        assert flagged is not None
        flagged_at = flagged.ready_time_ms
        wait_until(
            lambda: flagged.ready_time_ms > flagged_at or keep_sending(), "a ready pass after the leader was flagged"
        )
        for _ in range(20):  # 2 KB: several batches of 512 bytes, so the sticky partition moves on
            early.append(p.send("avail", bytes(100)))
        for _ in range(200):
            late.append(p.send("avail", bytes(100)))
            time.sleep(0.0005)
        late_parts = [f._batch_result.topic_partition.partition for f in late]
        to_down = [i for i, x in enumerate(late_parts) if x in down_parts]
        # Without the availability timeout about a third of the late records would go to the down
        # leader (it leads 2 of 6 partitions). With it, every sticky switch chooses from the load
        # stats of the last ready pass, and those leave out each partition of a leader that has
        # not been drainable for longer than the timeout while the partition holds a batch (the
        # down partitions hold theirs until the leader is back). The 20 records above moved the
        # sticky partition off any down partition it was on when the leader was flagged.
        assert late_parts and not to_down, (
            f"{len(to_down)} of {len(late_parts)} late records went to the down leader: {late_parts}"
        )
        mock_cluster.broker_set_up(down)
        assert p.flush(30) == 0
    finally:
        p.close(2)
    assert all(f.exception(0) is None for f in early + late)
