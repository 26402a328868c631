"""RecordAccumulator: append/ready/drain, retries, expiry, split, flush, abort (Java's RecordAccumulator)."""

from __future__ import annotations

import random
import threading
import time
from typing import Any

import pytest

from kproducer.accumulator.accumulator import RecordAccumulator
from kproducer.accumulator.batch import ProducerBatch
from kproducer.accumulator.buffer_pool import BufferPool
from kproducer.accumulator.deques import TopicInfo
from kproducer.accumulator.futures import RecordFuture
from kproducer.errors import (
    BufferExhaustedError,
    MemoryWouldBlock,
    NotLeaderOrFollowerError,
    ProducerClosedError,
)
from kproducer.metadata import Cluster
from kproducer.partitioner import BuiltInPartitioner
from kproducer.record import c_extension, codecs
from kproducer.record.builder import MemoryRecordsBuilder
from kproducer.record.compression_worker import LZ4_LIBRARY, ZSTD_LIBRARY
from kproducer.record.reader import read_batches
from kproducer.structs import Node, PartitionInfo, TopicPartition
from tests.support.accumulator import (
    BATCH,
    LINGER,
    MEMORY,
    START_MS,
    VALUE,
    CountingSink,
    append,
    complete_all,
    flush_and_decode,
    make_acc,
    make_cluster,
    queued_batches,
)
from tests.support.clock import FakeClock
from tests.support.compression import count_python_compressions
from tests.support.sensors import RecordingMetrics


# ---------------------------------------------------------------------- append
def test_append_fills_a_batch_then_opens_the_next() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock)
    first = acc.append("t", 0, clock.now, b"k", VALUE, None, None, 0, False, clock.now, None)
    assert first.new_batch_created and not first.batch_is_full and first.partition == 0
    assert acc.free.available_memory() == MEMORY - BATCH
    results = [acc.append("t", 0, clock.now, b"k", VALUE, None, None, 0, False, clock.now, None) for _ in range(12)]
    created = [r.new_batch_created for r in results]
    assert created.count(True) == 1
    flip = created.index(True)
    # The append that opened the second batch reports the first as full.
    assert results[flip].batch_is_full
    assert not any(r.new_batch_created for r in results[:flip])
    cluster = make_cluster()
    complete_all(acc, cluster, clock)


def test_abort_on_new_batch_returns_without_allocating() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock)
    r = acc.append("t", 1, clock.now, b"k", VALUE, None, None, 0, True, clock.now, None)
    assert r.abort_for_new_batch and r.future is None and not r.new_batch_created
    assert acc.free.available_memory() == MEMORY
    assert not acc.has_undrained()


def test_append_accepts_the_facades_short_form_and_a_topic_partition() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock)
    cluster = make_cluster()
    r = acc.append("t", 2, clock.now, b"k", VALUE, None, None, 0, clock.now, cluster)
    assert r.future is not None and r.partition == 2 and r.new_batch_created
    r2 = acc.append(TopicPartition("t", 2), -1, clock.now, b"k", VALUE, None, None, 0, False, clock.now, None)
    assert r2.partition == 2 and not r2.new_batch_created
    complete_all(acc, cluster, clock)


def test_a_record_bigger_than_batch_size_gets_its_own_non_pooled_batch() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock)
    f = append(acc, 0, clock, value=b"x" * (3 * BATCH))
    assert acc.free.available_memory() < MEMORY - 3 * BATCH
    cluster = make_cluster()
    batches = acc.drain(cluster, {0}, 10**6, clock.now)[0]
    assert len(batches) == 1 and batches[0].initial_capacity > 3 * BATCH
    batches[0].done(0, -1, None)
    acc.deallocate(batches[0])
    complete_all(acc, cluster, clock)
    assert f.result().offset == 0
    assert acc.free.free_size() == 0  # the oversized buffer was not pooled


def test_unknown_partition_uses_the_sticky_partitioner_and_reports_bytes() -> None:
    class FakePartitioner:
        def __init__(self) -> None:
            self.current = 3
            self.updates: list[tuple[int, int, bool]] = []
            self.load_stats: list[Any] = []

        def peek_current_partition(self, cluster: Cluster) -> int:
            return self.current

        def update_partition_info(self, partition: int, appended_bytes: int, cluster: Cluster, enable_switch: bool = False) -> None:
            self.updates.append((partition, appended_bytes, enable_switch))

        def move_off(self, partition: int, cluster: Cluster) -> None:
            self.updates.append((partition, 0, True))

        def uses_load_stats(self) -> bool:
            return True

        def update_partition_load_stats(self, queue_sizes: list[int] | None, partition_ids: list[int] | None, length: int) -> None:
            self.load_stats.append((queue_sizes, partition_ids, length))

    part = FakePartitioner()
    clock = FakeClock(START_MS)
    acc = make_acc(clock, partitioner_factory=lambda topic, size: part)
    cluster = make_cluster()
    r1 = acc.append("t", -1, clock.now, b"k", VALUE, None, None, 0, False, clock.now, cluster)
    r2 = acc.append("t", -1, clock.now, b"k", VALUE, None, None, 0, False, clock.now, cluster)
    assert r1.partition == r2.partition == 3
    assert [u[0] for u in part.updates] == [3, 3]
    assert part.updates[0][1] > 100 and 100 < part.updates[1][1] < 200
    assert part.updates[0][2] is False
    with pytest.raises(ValueError):
        acc.append("t", -1, clock.now, b"k", VALUE, None, None, 0, False, clock.now, None)
    complete_all(acc, cluster, clock)


def test_sticky_partition_switches_after_a_batch_worth_of_bytes() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock)
    cluster = make_cluster()
    partitions = [acc.append("t", -1, clock.now, None, VALUE, None, None, 0, False, clock.now, cluster).partition for _ in range(40)]
    assert all(0 <= p < 4 for p in partitions)
    assert len(set(partitions)) > 1
    # Sticky: the partition changes rarely, never record by record.
    switches = sum(1 for a, b in zip(partitions, partitions[1:], strict=False) if a != b)
    assert switches <= 6
    complete_all(acc, cluster, clock)


# ---------------------------------------------------------------------- ready: the five conditions
def test_ready_waits_for_linger_and_says_how_long() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock)
    cluster = make_cluster()
    append(acc, 0, clock)
    r = acc.ready(cluster, clock.now)
    assert r.ready_nodes == set()
    assert r.next_ready_check_delay_ms == LINGER
    clock.now += 4
    assert acc.ready(cluster, clock.now).next_ready_check_delay_ms == LINGER - 4
    clock.now += LINGER - 4
    assert acc.ready(cluster, clock.now).ready_nodes == {0}
    complete_all(acc, cluster, clock)


def test_ready_when_full() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock)
    cluster = make_cluster()
    while not acc.append("t", 1, clock.now, b"k", VALUE, None, None, 0, False, clock.now, None).batch_is_full:
        pass
    assert acc.ready(cluster, clock.now).ready_nodes == {1}
    complete_all(acc, cluster, clock)


def test_ready_when_the_pool_has_waiters() -> None:
    clock = FakeClock(START_MS)
    pool = BufferPool(2 * BATCH, BATCH)
    acc = make_acc(clock, buffer_pool=pool)
    cluster = make_cluster()
    held = pool.allocate(BATCH, 0)
    append(acc, 0, clock)
    assert acc.ready(cluster, clock.now).ready_nodes == set()
    outcome: list[Any] = []
    waiter = threading.Thread(target=lambda: outcome.append(pool.allocate(BATCH, 5000)))
    waiter.start()
    deadline = time.monotonic() + 5
    while pool.queued() == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert acc.ready(cluster, clock.now).ready_nodes == {0}
    pool.deallocate(held)
    waiter.join(5)
    pool.deallocate(outcome[0])
    complete_all(acc, cluster, clock)


def test_ready_when_closed_and_when_flushing() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock)
    cluster = make_cluster()
    append(acc, 0, clock)
    assert acc.ready(cluster, clock.now).ready_nodes == set()
    acc.begin_flush()
    assert acc.flush_in_progress()
    assert acc.ready(cluster, clock.now).ready_nodes == {0}
    acc.end_flush()
    assert acc.ready(cluster, clock.now).ready_nodes == set()
    acc.close()
    assert acc.ready(cluster, clock.now).ready_nodes == {0}
    with pytest.raises(ProducerClosedError):
        append(acc, 0, clock)
    complete_all(acc, cluster, clock)


def test_ready_reports_unknown_leaders_and_skips_muted_partitions() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock, linger_ms=0)
    cluster = make_cluster(leaders={3: -1})
    append(acc, 3, clock)
    append(acc, 0, clock)
    acc.mute_partition(TopicPartition("t", 0))
    r = acc.ready(cluster, clock.now)
    assert r.unknown_leader_topics == {"t"}
    assert r.ready_nodes == set()
    acc.unmute_partition(TopicPartition("t", 0))
    assert acc.ready(cluster, clock.now).ready_nodes == {0}
    (b,) = acc.drain(cluster, {0}, 10**6, clock.now)[0]
    assert b.topic_partition == TopicPartition("t", 0)
    b.done(0, -1, None)
    acc.deallocate(b)
    complete_all(acc, make_cluster(), clock)


def test_ready_follows_a_new_leader_and_a_new_partition() -> None:
    # The ready check keeps each topic's (partition, deque, leader) list for one Cluster snapshot:
    # a snapshot that moves a leader, and a deque made since, must both be seen.
    clock = FakeClock(START_MS)
    acc = make_acc(clock, linger_ms=0)
    cluster = make_cluster()
    append(acc, 0, clock)
    assert acc.ready(cluster, clock.now).ready_nodes == {0}
    moved = make_cluster(leaders={0: 1})
    assert acc.ready(moved, clock.now).ready_nodes == {1}
    (b,) = acc.drain(moved, {1}, 10**6, clock.now)[1]
    assert b.topic_partition == TopicPartition("t", 0)
    b.done(0, -1, None)
    acc.deallocate(b)
    assert acc.ready(moved, clock.now).ready_nodes == set()
    append(acc, 3, clock)  # a partition with no deque until now, led by node 1
    assert acc.ready(moved, clock.now).ready_nodes == {1}
    (b,) = acc.drain(moved, {1}, 10**6, clock.now)[1]
    assert b.topic_partition == TopicPartition("t", 3)
    b.done(0, -1, None)
    acc.deallocate(b)
    complete_all(acc, moved, clock)


def test_partition_leaders_is_remade_only_for_a_new_snapshot_or_deque() -> None:
    info = TopicInfo("t", BuiltInPartitioner("t", BATCH))
    cluster = make_cluster()
    info.deque_for(2)
    first = info.partition_leaders(cluster)
    assert [(p, tp, leader.id if leader else None) for p, _dq, tp, leader in first] == [
        (2, TopicPartition("t", 2), 0)
    ]
    assert info.partition_leaders(cluster) is first
    info.deque_for(1)
    second = info.partition_leaders(cluster)
    assert [(p, leader.id if leader else None) for p, _dq, _tp, leader in second] == [(2, 0), (1, 1)]
    assert second[0][1] is info.deque_for(2)
    # Each entry's TopicPartition is its deque's own, made once with the deque.
    assert all(tp is dq.topic_partition for _p, dq, tp, _leader in second)
    third = info.partition_leaders(make_cluster(leaders={2: -1, 1: 0}))
    assert [(p, leader.id if leader else None) for p, _dq, _tp, leader in third] == [(2, None), (1, 0)]


def test_a_partitions_batches_share_the_topic_partition_its_deque_made() -> None:
    """One TopicPartition per partition: every batch opened on it, by either append path, and the
    drain use the deque's own, so no batch or drain pass makes another."""
    clock = FakeClock(START_MS)
    acc = make_acc(clock, linger_ms=0)
    cluster = make_cluster(partitions=3, nodes=1)
    for p in range(3):
        for _ in range(9):  # two batches per partition: the second opened beside a full one
            append(acc, p, clock)
    deques, _partitioner = acc.partition_state("t")
    for p in range(3):
        dq = deques[p]
        assert dq.topic_partition == TopicPartition("t", p)
        assert all(b.topic_partition is dq.topic_partition for b in dq.batches)
        # The C send lane opens its batches through open_new_batch, which names the deque.
        result = acc.open_new_batch(dq, "t", b"k", VALUE, None, clock.now)
        assert result is not None and dq.batches[-1].topic_partition is dq.topic_partition
    drained = acc.drain(cluster, {0}, 1 << 30, clock.now)[0]
    assert sorted(b.topic_partition.partition for b in drained) == [0, 1, 2]
    assert all(b.topic_partition is deques[b.topic_partition.partition].topic_partition for b in drained)
    for b in drained:
        b.done(0, -1, None)
        acc.deallocate(b)
    complete_all(acc, cluster, clock)


def test_retry_backoff_is_exponential_and_sets_the_next_check() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock, linger_ms=0, retry_backoff_ms=100, retry_backoff_max_ms=350)
    cluster = make_cluster()
    append(acc, 0, clock)
    (batch,) = acc.drain(cluster, {0}, 10**6, clock.now)[0]
    for attempt, backoff in enumerate([100, 200, 350, 350], start=1):
        acc.reenqueue(batch, clock.now)
        assert batch.attempts == attempt
        r = acc.ready(cluster, clock.now)
        assert r.ready_nodes == set()
        assert r.next_ready_check_delay_ms == backoff
        assert acc.drain(cluster, {0}, 10**6, clock.now)[0] == []  # backing off: not drained either
        clock.now += backoff - 1
        assert acc.ready(cluster, clock.now).ready_nodes == set()
        clock.now += 1
        assert acc.ready(cluster, clock.now).ready_nodes == {0}
        assert acc.drain(cluster, {0}, 10**6, clock.now)[0] == [batch]
    batch.done(0, -1, None)
    acc.deallocate(batch)
    complete_all(acc, cluster, clock)


# ---------------------------------------------------------------------- drain
def test_drain_rotates_over_the_partitions_of_a_node() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock, linger_ms=0)
    cluster = make_cluster(partitions=3, nodes=1)
    for p in range(3):
        for _ in range(9):  # two batches per partition
            append(acc, p, clock)
    order = []
    for _ in range(6):
        drained = acc.drain(cluster, {0}, 1, clock.now)[0]  # 1 byte: exactly one batch per request
        assert len(drained) == 1
        order.append(drained[0].topic_partition.partition)
        drained[0].done(0, -1, None)
        acc.deallocate(drained[0])
    assert order == [0, 1, 2, 0, 1, 2]
    complete_all(acc, cluster, clock)


def test_drain_respects_max_request_size_and_resumes_where_it_stopped() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock, linger_ms=0)
    cluster = make_cluster(partitions=4, nodes=1)
    for p in range(4):
        for _ in range(4):
            append(acc, p, clock)
    (b0,) = acc.drain(cluster, {0}, 1, clock.now)[0]
    assert b0.topic_partition.partition == 0
    one = b0.estimated_size_in_bytes()
    b0.done(0, -1, None)
    acc.deallocate(b0)
    # That first drain took p0's batch; the rest fit two per request.
    batches = acc.drain(cluster, {0}, 2 * one + 10, clock.now)[0]
    assert [b.topic_partition.partition for b in batches] == [1, 2]
    assert sum(b.estimated_size_in_bytes() for b in batches) <= 2 * one + 10
    batches += acc.drain(cluster, {0}, 2 * one + 10, clock.now)[0]
    assert [b.topic_partition.partition for b in batches] == [1, 2, 3]
    assert all(b.is_closed and b.drained_ms == clock.now for b in batches)
    for b in batches:
        b.done(0, -1, None)
        acc.deallocate(b)
    complete_all(acc, cluster, clock)


def test_drain_skips_muted_partitions_and_other_nodes() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock, linger_ms=0)
    cluster = make_cluster(partitions=4, nodes=2)
    for p in range(4):
        append(acc, p, clock)
    acc.mute_partition(TopicPartition("t", 2))
    drained = acc.drain(cluster, {0}, 10**6, clock.now)
    assert [b.topic_partition.partition for b in drained[0]] == [0]
    drained[0][0].done(0, -1, None)
    acc.deallocate(drained[0][0])
    acc.unmute_partition(TopicPartition("t", 2))
    complete_all(acc, cluster, clock)



def test_drain_says_whether_it_left_a_batch_behind() -> None:
    """Only a batch left behind can make another loop send at once (the Sender polls 0 only then)."""
    clock = FakeClock(START_MS)
    acc = make_acc(clock, linger_ms=0)
    cluster = make_cluster(partitions=4, nodes=1)
    for p in range(3):
        append(acc, p, clock)
    taken = acc.drain(cluster, {0}, 10**6, clock.now)[0]
    assert len(taken) == 3 and not acc.drain_left_batches
    for _ in range(9):  # two batches on partition 0: the drain takes the first
        append(acc, 0, clock)
    taken += acc.drain(cluster, {0}, 10**6, clock.now)[0]
    assert len(taken) == 4 and acc.drain_left_batches
    append(acc, 1, clock)
    acc.mute_partition(TopicPartition("t", 1))  # passed over (ordering): its batch stays
    taken += acc.drain(cluster, {0}, 10**6, clock.now)[0]
    assert len(taken) == 5 and acc.drain_left_batches
    acc.unmute_partition(TopicPartition("t", 1))
    append(acc, 2, clock)
    taken += acc.drain(cluster, {0}, 1, clock.now)[0]  # one batch per request: the request is full
    assert acc.drain_left_batches
    taken += acc.drain(cluster, {0}, 10**6, clock.now)[0]
    assert not acc.drain_left_batches and not acc.has_undrained()
    for b in taken:
        b.done(0, -1, None)
        acc.deallocate(b)
    complete_all(acc, cluster, clock)


def test_a_new_batch_is_sendable_after_linger_unless_something_hurries_the_sender() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock, linger_ms=LINGER)
    assert acc.new_batch_sendable_at(clock.now) == clock.now + LINGER
    acc.begin_flush()
    assert acc.new_batch_sendable_at(clock.now) == clock.now  # a flush sends everything now
    acc.end_flush()
    acc.free.add_external_waiter(1)  # a caller waits for memory: ready() sends without lingering
    assert acc.new_batch_sendable_at(clock.now) == clock.now
    acc.free.add_external_waiter(-1)
    assert acc.new_batch_sendable_at(clock.now) == clock.now + LINGER
    acc.close()
    assert acc.new_batch_sendable_at(clock.now) == clock.now

class FakeTransactionManager:
    def __init__(self) -> None:
        self.sequences: dict[TopicPartition, int] = {}
        self.stop = False
        self.in_flight: dict[TopicPartition, int] = {}
        self.retrying: set[TopicPartition] = set()

    def should_stop_draining(self) -> bool:
        return self.stop

    def producer_id_and_epoch(self) -> tuple[int, int]:
        return 77, 2

    def next_sequence(self, tp: TopicPartition) -> int:
        return self.sequences.get(tp, 0)

    def increment_sequence(self, tp: TopicPartition, increment: int) -> None:
        self.sequences[tp] = self.sequences.get(tp, 0) + increment

    def first_in_flight_sequence(self, tp: TopicPartition) -> int:
        return self.in_flight.get(tp, -1)

    def retry_in_flight(self, tp: TopicPartition) -> bool:
        return tp in self.retrying


def test_drain_assigns_producer_state_and_sequences() -> None:
    clock = FakeClock(START_MS)
    tm = FakeTransactionManager()
    acc = make_acc(clock, linger_ms=0, transaction_manager=tm)
    cluster = make_cluster(partitions=1, nodes=1)
    for _ in range(20):
        append(acc, 0, clock)
    tm.stop = True
    assert acc.drain(cluster, {0}, 10**6, clock.now)[0] == []
    tm.stop = False
    batches = acc.drain(cluster, {0}, 10**6, clock.now)[0]
    assert len(batches) == 1  # one batch per partition per drain
    seq = 0
    while batches:
        for b in batches:
            assert (b.producer_id, b.producer_epoch, b.base_sequence) == (77, 2, seq)
            (rb,) = list(read_batches(b.records_buffer()))
            assert rb.base_sequence == seq
            seq += b.record_count
            b.done(0, -1, None)
            acc.deallocate(b)
        batches = acc.drain(cluster, {0}, 10**6, clock.now)[0]
    assert seq == 20 and tm.sequences[TopicPartition("t", 0)] == 20
    complete_all(acc, cluster, clock)


def test_reenqueue_goes_to_the_front_in_sequence_order() -> None:
    clock = FakeClock(START_MS)
    tm = FakeTransactionManager()
    acc = make_acc(clock, linger_ms=0, transaction_manager=tm, retry_backoff_ms=0, retry_backoff_max_ms=0)
    cluster = make_cluster(partitions=1, nodes=1)
    for _ in range(40):
        append(acc, 0, clock)
    drained = []
    for _ in range(3):
        drained += acc.drain(cluster, {0}, 10**6, clock.now)[0]
    seqs = [b.base_sequence for b in drained]
    assert seqs == sorted(seqs) and len(seqs) == 3
    # Retries come back out of order; the deque keeps sequence order, ahead of unsequenced batches.
    for b in (drained[2], drained[0], drained[1]):
        acc.reenqueue(b, clock.now)
    again = []
    for _ in range(3):
        again += acc.drain(cluster, {0}, 10**6, clock.now)[0]
    assert [b.base_sequence for b in again] == seqs
    for b in again:
        b.done(0, -1, None)
        acc.deallocate(b)
    complete_all(acc, cluster, clock)


def test_no_new_batch_drains_while_a_retried_batch_of_its_partition_is_in_flight() -> None:
    """The order gate: a retry in flight holds the partition's new batches, not other partitions'."""
    clock = FakeClock(START_MS)
    tm = FakeTransactionManager()
    acc = make_acc(clock, linger_ms=0, transaction_manager=tm)
    cluster = make_cluster(partitions=2, nodes=1)
    for _ in range(10):
        append(acc, 0, clock)
        append(acc, 1, clock)
    tm.retrying.add(TopicPartition("t", 0))
    held = acc.drain(cluster, {0}, 10**6, clock.now)[0]
    assert [b.topic_partition.partition for b in held] == [1]
    tm.retrying.clear()
    released = acc.drain(cluster, {0}, 10**6, clock.now)[0]
    assert 0 in [b.topic_partition.partition for b in released]
    for b in held + released:
        b.done(0, -1, None)
        acc.deallocate(b)
    complete_all(acc, cluster, clock)


def test_reenqueue_without_idempotence_goes_first() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock, linger_ms=0, retry_backoff_ms=0, retry_backoff_max_ms=0)
    cluster = make_cluster(partitions=1, nodes=1)
    f0 = append(acc, 0, clock)
    (b0,) = acc.drain(cluster, {0}, 10**6, clock.now)[0]
    append(acc, 0, clock)
    acc.reenqueue(b0, clock.now)
    (first,) = acc.drain(cluster, {0}, 1, clock.now)[0]
    assert first is b0 and first.in_retry()
    b0.done(9, -1, None)
    acc.deallocate(b0)
    assert f0.result().offset == 9
    complete_all(acc, cluster, clock)


# ---------------------------------------------------------------------- expiry, split, deallocate
def test_expired_batches_are_removed_in_order() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock, delivery_timeout_ms=1000)
    cluster = make_cluster()
    calls: list[Any] = []
    append(acc, 0, clock, cb=lambda md, exc: calls.append(exc))
    clock.now += 600
    append(acc, 1, clock)
    clock.now += 399
    assert acc.expired_batches(clock.now) == []
    clock.now += 1
    expired = acc.expired_batches(clock.now)
    assert [b.topic_partition.partition for b in expired] == [0]
    err = TimeoutError("expired")
    for b in expired:
        b.done(-1, -1, err)
        acc.deallocate(b)
    assert calls == [err]
    complete_all(acc, cluster, clock)


def test_split_and_reenqueue_keeps_every_record_and_future() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock, linger_ms=0)
    cluster = make_cluster(partitions=1, nodes=1)
    # A batch bigger than batch.size, as a broker with a smaller max.message.bytes would reject.
    buf = bytearray(8 * BATCH)
    big = ProducerBatch(TopicPartition("t", 0), MemoryRecordsBuilder(buf, write_limit=len(buf)), clock.now, buffer=buf)
    calls: list[int] = []
    futures = []
    for i in range(50):
        f = big.try_append(clock.now, b"%d" % i, VALUE, None, lambda md, exc, i=i: calls.append(i), clock.now)
        assert f is not None
        futures.append(f)
    append(acc, 0, clock)  # a later batch already queued
    parts = acc.split_and_reenqueue(big)
    assert parts > 4
    drained = []
    for _ in range(parts + 1):
        drained += acc.drain(cluster, {0}, 1, clock.now)[0]
    assert all(b.is_split_batch for b in drained[:parts]) and not drained[parts].is_split_batch
    offset = 0
    for b in drained:
        assert b.estimated_size_in_bytes() <= BATCH
        b.done(offset, -1, None)
        offset += b.record_count
        acc.deallocate(b)
    assert [f.result().offset for f in futures] == list(range(50))
    assert calls == list(range(50))
    complete_all(acc, cluster, clock)


def test_deallocate_is_exactly_once() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock, linger_ms=0)
    cluster = make_cluster()
    append(acc, 0, clock)
    (b,) = acc.drain(cluster, {0}, 10**6, clock.now)[0]
    b.done(0, -1, None)
    acc.deallocate(b)
    acc.deallocate(b)
    assert acc.free.available_memory() == MEMORY


# ---------------------------------------------------------------------- flush, abort
def test_flush_waits_for_every_incomplete_batch() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock)
    cluster = make_cluster()
    futures = [append(acc, p, clock) for p in range(4)]
    acc.begin_flush()
    assert acc.await_flush_completion(timeout=0.02) is False
    assert acc.incomplete_record_count() == 4

    def sender() -> None:
        time.sleep(0.02)
        for batches in acc.drain(cluster, {0, 1}, 10**6, clock.now).values():
            for b in batches:
                b.done(0, -1, None)
                acc.deallocate(b)

    t = threading.Thread(target=sender)
    t.start()
    assert acc.await_flush_completion(timeout=5) is True
    acc.end_flush()
    t.join()
    assert all(f.done() for f in futures)
    assert acc.incomplete_record_count() == 0
    assert not acc.flush_in_progress()
    complete_all(acc, cluster, clock)


def test_abort_incomplete_batches_fails_and_frees_everything() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock, linger_ms=0)
    cluster = make_cluster()
    futures = [append(acc, p % 4, clock) for p in range(30)]
    in_flight = acc.drain(cluster, {0}, 10**6, clock.now)[0]
    assert in_flight
    err = ProducerClosedError("forced")
    acc.abort_incomplete_batches(err)
    assert all(f.exception() is err for f in futures)
    assert not acc.has_undrained() and not acc.has_incomplete()
    assert acc.free.available_memory() == MEMORY
    # A late response for an aborted in-flight batch is ignored.
    assert in_flight[0].done(5, -1, None) is False


def test_abort_undrained_batches_leaves_drained_ones() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock, linger_ms=0)
    cluster = make_cluster()
    f_sent = append(acc, 0, clock)
    (sent,) = acc.drain(cluster, {0}, 10**6, clock.now)[0]
    f_queued = append(acc, 1, clock)
    err = NotLeaderOrFollowerError("fatal")
    acc.abort_undrained_batches(err)
    assert f_queued.exception() is err
    assert not f_sent.done()
    sent.done(3, -1, None)
    acc.deallocate(sent)
    assert f_sent.result().offset == 3
    complete_all(acc, cluster, clock)


def test_close_wakes_an_append_blocked_on_memory() -> None:
    clock = FakeClock(START_MS)
    pool = BufferPool(BATCH, BATCH)
    acc = make_acc(clock, buffer_pool=pool)
    cluster = make_cluster()
    append(acc, 0, clock)
    errors: list[BaseException] = []

    def blocked() -> None:
        try:
            acc.append("t", 1, clock.now, b"k", VALUE, None, None, 10_000, False, clock.now, None)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=blocked)
    t.start()
    deadline = time.monotonic() + 5
    while pool.queued() == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    acc.close()
    t.join(5)
    assert errors and isinstance(errors[0], ProducerClosedError)
    complete_all(acc, cluster, clock)


# ---------------------------------------------------------------------- adaptive partitioning
def test_load_stats_and_availability_timeout() -> None:
    recorded: list[Any] = []

    class StatsPartitioner(BuiltInPartitioner):
        def update_partition_load_stats(self, queue_sizes: list[int] | None, partition_ids: list[int] | None, length: int) -> None:
            recorded.append((list(queue_sizes) if queue_sizes else None, list(partition_ids) if partition_ids else None, length))
            super().update_partition_load_stats(queue_sizes, partition_ids, length)

    partitioners: list[StatsPartitioner] = []

    def factory(topic: str, size: int) -> StatsPartitioner:
        partitioners.append(StatsPartitioner(topic, size, random.Random(1)))
        return partitioners[-1]

    clock = FakeClock(START_MS)
    acc = make_acc(clock, partition_availability_timeout_ms=100, partitioner_factory=factory)
    cluster = make_cluster(partitions=4, nodes=2)
    for p, n in enumerate([3, 1, 2, 1]):
        for _ in range(n * 8):
            append(acc, p, clock)
    acc.ready(cluster, clock.now)
    # Only explicit partitions so far: the partitioner was never asked, so no queue sizes were counted.
    assert recorded == [(None, None, 0)]
    # The sticky choice a keyless record starts with (without adding to a queue): from now on
    # every pass counts them.
    partitioners[0].peek_current_partition(cluster)
    acc.ready(cluster, clock.now)
    queue_sizes, ids, length = recorded[-1]
    assert length == 4
    assert dict(zip(ids, queue_sizes, strict=True)) == {0: 3, 1: 1, 2: 2, 3: 1}
    # Node 0 had data ready but could not be drained for longer than the availability timeout.
    acc.update_node_latency_stats(0, clock.now, True)
    clock.now += 150
    acc.update_node_latency_stats(0, clock.now, False)
    acc.ready(cluster, clock.now)
    _sizes, ids, length = recorded[-1]
    assert set(ids[:length]) == {1, 3}  # p0 and p2 (leader 0) left out
    acc.update_node_latency_stats(0, clock.now, True)
    acc.ready(cluster, clock.now)
    assert recorded[-1][2] == 4
    complete_all(acc, cluster, clock)


def test_no_load_stats_without_adaptive_partitioning() -> None:
    recorded: list[Any] = []

    class StatsPartitioner(BuiltInPartitioner):
        def update_partition_load_stats(self, queue_sizes: list[int] | None, partition_ids: list[int] | None, length: int) -> None:
            recorded.append((queue_sizes, partition_ids, length))

    clock = FakeClock(START_MS)
    acc = make_acc(
        clock,
        adaptive_partitioning_enable=False,
        partitioner_factory=lambda topic, size: StatsPartitioner(topic, size),
    )
    cluster = make_cluster(partitions=2, nodes=1)
    append(acc, 0, clock)
    append(acc, 1, clock)
    acc.ready(cluster, clock.now)
    assert recorded == [(None, None, 0)]
    complete_all(acc, cluster, clock)


class _CountingLock:
    """Stands in for a deque's lock and counts how often the ready check takes it."""

    def __init__(self) -> None:
        self.acquired = 0
        self._lock = threading.Lock()

    def acquire(self) -> bool:
        self.acquired += 1
        return self._lock.acquire()

    def release(self) -> None:
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


@pytest.mark.parametrize("keyless_first", [False, True])
def test_ready_skips_the_partitions_of_a_ready_leader_unless_it_counts_queue_sizes(keyless_first: bool) -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock)
    cluster = make_cluster(partitions=4, nodes=1)
    if keyless_first:
        # A keyless record's sticky choice: the partitioner reads queue sizes from now on.
        acc.append("t", -1, clock.now, None, VALUE, None, None, 0, False, clock.now, cluster)
    for p in range(4):
        append(acc, p, clock)
    clock.now += LINGER  # every partition's batch has lingered: partition 0 makes node 0 ready
    deques = acc.partition_state("t")[0]
    locks = {p: _CountingLock() for p in range(4)}
    for p, lock in locks.items():
        deques[p].lock = lock  # type: ignore[assignment]
    result = acc.ready(cluster, clock.now)
    assert result.ready_nodes == {0}
    counts = [locks[p].acquired for p in range(4)]
    # Without queue sizes to count, partitions 1-3 can tell this pass nothing once node 0 is ready.
    assert counts == ([1, 1, 1, 1] if keyless_first else [1, 0, 0, 0])
    # The drain still takes every partition's batch.
    drained = acc.drain(cluster, {0}, 10**9, clock.now)
    assert sorted(b.topic_partition.partition for b in drained[0]) == [0, 1, 2, 3]
    for batch in drained[0]:
        batch.done(0, -1, None)
        acc.deallocate(batch)
    complete_all(acc, cluster, clock)


# ---------------------------------------------------------------------- concurrency
def test_many_threads_append_while_the_sender_drains_nothing_lost_order_kept() -> None:
    clock = FakeClock(START_MS)
    pool = BufferPool(8 * BATCH, BATCH)  # small: appenders block on memory now and then
    acc = make_acc(clock, buffer_pool=pool, linger_ms=0)
    cluster = make_cluster(partitions=4, nodes=2)
    threads_n, per_thread = 6, 300
    futures: dict[int, list[tuple[int, RecordFuture]]] = {t: [] for t in range(threads_n)}
    callback_order: dict[int, list[int]] = {p: [] for p in range(4)}
    next_offset = dict.fromkeys(range(4), 0)
    stop = threading.Event()
    errors: list[BaseException] = []

    def appender(t: int) -> None:
        rng = random.Random(t)
        try:
            for i in range(per_thread):
                p = rng.randrange(4)
                value = b"%d:%d" % (t, i) + b"x" * rng.randrange(10, 200)
                r = acc.append("t", p, clock.now, None, value, None, lambda md, exc, p=p: callback_order[p].append(md.offset if md else -2), 5000, False, clock.now, None)
                assert r.future is not None
                futures[t].append((p, r.future))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    def sender() -> None:
        while not stop.is_set() or acc.has_undrained():
            ready = acc.ready(cluster, clock.now)
            drained = acc.drain(cluster, ready.ready_nodes, 3 * BATCH, clock.now)
            for batches in drained.values():
                for b in batches:
                    p = b.topic_partition.partition
                    b.done(next_offset[p], -1, None)
                    next_offset[p] += b.record_count
                    acc.deallocate(b)
            if not drained:
                time.sleep(0.0005)

    s = threading.Thread(target=sender)
    s.start()
    workers = [threading.Thread(target=appender, args=(t,)) for t in range(threads_n)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    stop.set()
    s.join(60)
    assert not errors
    assert sum(next_offset.values()) == threads_n * per_thread
    # Each thread's records land in send order within a partition, and every offset is unique.
    seen: set[tuple[int, int]] = set()
    for items in futures.values():
        last = dict.fromkeys(range(4), -1)
        for p, f in items:
            off = f.result(timeout=5).offset
            assert off > last[p]
            last[p] = off
            seen.add((p, off))
    assert len(seen) == threads_n * per_thread
    # Callbacks of a partition fire in offset order.
    for p, offs in callback_order.items():
        assert offs == list(range(next_offset[p]))
    assert not acc.has_incomplete()
    assert pool.available_memory() == pool.total_memory


def test_drain_records_no_batch_metrics_of_its_own() -> None:
    """Queue time, batch size and compression rate are the Sender's, per request
    (ProducerSensors.record_drained, as Java's SenderMetrics): the drain records none of them."""
    metrics = RecordingMetrics()
    clock = FakeClock(START_MS)
    acc = make_acc(clock, metrics=metrics)
    cluster = make_cluster()
    append(acc, 0, clock)
    clock.now += 25
    (b,) = acc.drain(cluster, {0}, 10**6, clock.now)[0]
    assert b.queue_time_ms() == 25
    for name in ("queue-time", "batch-size", "compression-rate"):
        assert name not in metrics.sensors or metrics.sensors[name].values == [], name
    b.done(0, -1, None)
    acc.deallocate(b)
    complete_all(acc, cluster, clock)


class FakeBreaker:
    """A circuit-break manager with one muted partition whose probe falls due at ``retry_at``."""

    def __init__(self, tp: TopicPartition, retry_at: int) -> None:
        self.tp = tp
        self.retry_at = retry_at
        self.probing = False
        self.probes = 0

    def is_muted(self, tp: TopicPartition) -> bool:
        return tp == self.tp

    def retry_at_ms(self, tp: TopicPartition) -> int | None:
        return self.retry_at if tp == self.tp else None

    def probe_in_flight(self, tp: TopicPartition) -> bool:
        return self.probing

    def allow_probe(self, tp: TopicPartition, now_ms: int | None = None) -> bool:
        if tp != self.tp or self.probing or (now_ms or 0) < self.retry_at:
            return False
        self.probing = True
        self.probes += 1
        return True


def test_breaker_muted_partition_sends_only_its_probe_when_due() -> None:
    clock = FakeClock(START_MS)
    tp = TopicPartition("t", 0)
    breaker = FakeBreaker(tp, clock.now + 50)
    acc = make_acc(clock, linger_ms=0, circuit_break_manager=breaker)
    cluster = make_cluster(partitions=1, nodes=1)
    for _ in range(20):
        append(acc, 0, clock)
    r = acc.ready(cluster, clock.now)
    assert r.ready_nodes == set() and r.next_ready_check_delay_ms == 50
    assert acc.drain(cluster, {0}, 10**6, clock.now)[0] == []
    clock.now += 50
    assert acc.ready(cluster, clock.now).ready_nodes == {0}
    probe = acc.drain(cluster, {0}, 10**6, clock.now)[0]
    assert len(probe) == 1 and breaker.probes == 1
    # While the probe is out, nothing else of the partition is ready or drained.
    assert acc.ready(cluster, clock.now).ready_nodes == set()
    assert acc.drain(cluster, {0}, 10**6, clock.now)[0] == []
    probe[0].done(0, -1, None)
    acc.deallocate(probe[0])
    breaker.tp = TopicPartition("t", 99)  # unmuted
    complete_all(acc, cluster, clock)


# ---------------------------------------------------------------------- active topics (KIP-526 scale)
def _many_topic_cluster(topics: list[str], nodes: int = 2) -> Cluster:
    node_list = [Node(i, "localhost", 9092 + i) for i in range(nodes)]
    parts = [PartitionInfo(t, 0, i % nodes) for i, t in enumerate(topics)]
    return Cluster(node_list, parts)


def test_sender_passes_visit_only_topics_holding_batches() -> None:
    """Thousands of known topics, a few with records: ready/drain/expiry look at those few."""
    clock = FakeClock(START_MS)
    acc = make_acc(clock, linger_ms=0, memory=4096 * BATCH)
    topics = [f"t{i:04d}" for i in range(2000)]
    cluster = _many_topic_cluster(topics)
    for t in topics:  # every topic produced to once, then drained: known but idle
        append(acc, 0, clock, topic=t)
    complete_all(acc, cluster, clock)
    acc.ready(cluster, clock.now)  # finds them all empty
    assert acc._active == {}
    visited: list[str] = []
    real = acc._partition_ready

    def counting(cluster_: Cluster, now: int, topic: str, *rest: Any) -> Any:
        visited.append(topic)
        return real(cluster_, now, topic, *rest)

    acc._partition_ready = counting  # type: ignore[method-assign]
    busy = topics[5], topics[1500]
    for t in busy:
        append(acc, 0, clock, topic=t)
    ready = acc.ready(cluster, clock.now)
    assert sorted(visited) == sorted(busy)
    assert ready.ready_nodes == {5 % 2, 1500 % 2}
    drained = acc.drain(cluster, ready.ready_nodes, 10**9, clock.now)
    assert sorted(b.topic_partition.topic for bs in drained.values() for b in bs) == sorted(busy)
    for bs in drained.values():
        for b in bs:
            b.done(0, -1, None)
            acc.deallocate(b)
    assert acc.expired_batches(clock.now) == [] and not acc.has_undrained()


def test_an_append_racing_the_ready_scan_keeps_its_topic_active() -> None:
    """ready() drops a topic before scanning it; an append before or after the scan puts it back."""
    clock = FakeClock(START_MS)
    acc = make_acc(clock, linger_ms=0)
    cluster = make_cluster(partitions=2, nodes=1)
    append(acc, 0, clock)
    complete_all(acc, cluster, clock)
    acc._active["t"] = acc._topic("t")  # known, empty, still listed
    real = acc._partition_ready

    def append_after_scan(*args: Any) -> Any:
        out = real(*args)
        append(acc, 1, clock)  # a caller appends just after this topic was found empty
        return out

    acc._partition_ready = append_after_scan  # type: ignore[method-assign]
    acc.ready(cluster, clock.now)
    acc._partition_ready = real  # type: ignore[method-assign]
    assert "t" in acc._active
    ready = acc.ready(cluster, clock.now)
    assert ready.ready_nodes == {0}
    assert [b.topic_partition.partition for b in acc.drain(cluster, {0}, 10**9, clock.now)[0]] == [1]


def test_drain_keeps_the_rotating_start_over_active_partitions() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock, linger_ms=0)
    cluster = make_cluster(partitions=6, nodes=1)
    for p in (1, 3, 4):
        append(acc, p, clock)
    # A request with room for one batch takes partition 1, then 3, then 4: each drain starts after the last.
    order = []
    for _ in range(3):
        (batch,) = acc.drain(cluster, {0}, 1, clock.now)[0]
        order.append(batch.topic_partition.partition)
        batch.done(0, -1, None)
        acc.deallocate(batch)
    assert order == [1, 3, 4]


@pytest.mark.parametrize("idle_topics", [0, 6])
def test_drain_visits_the_node_s_partitions_in_order_however_many_deques_are_idle(idle_topics: int) -> None:
    # With idle topics, most of the node's deques are empty, and the drain gathers the deques of
    # the topics holding batches instead of walking every deque: the order must not change.
    clock = FakeClock(START_MS)
    acc = make_acc(clock, linger_ms=0, memory=256 * BATCH)
    topics = ["t"] + [f"idle-{n}" for n in range(idle_topics)]
    node = Node(0, "localhost", 9092)
    cluster = Cluster([node], [PartitionInfo(topic, p, 0) for topic in topics for p in range(4)])
    for topic in topics[1:]:
        for p in range(4):
            append(acc, p, clock, topic=topic)
    # The idle topics' batches go first (one request takes them all) and their deques stay, empty.
    first = acc.drain(cluster, {0}, 10**9, clock.now)[0]
    assert len(first) == 4 * idle_topics
    for batch in first:
        batch.done(0, -1, None)
        acc.deallocate(batch)
    acc.ready(cluster, clock.now)  # no batch left: the idle topics are not active any more
    for p in (0, 2, 3):
        append(acc, p, clock)
    order = []
    for _ in range(3):
        (batch,) = acc.drain(cluster, {0}, 1, clock.now)[0]  # one batch a request
        order.append(batch.topic_partition)
        batch.done(0, -1, None)
        acc.deallocate(batch)
    assert order == [TopicPartition("t", 0), TopicPartition("t", 2), TopicPartition("t", 3)]
    assert acc.drain(cluster, {0}, 10**9, clock.now)[0] == []
    # A deque added after the node's deques were listed is drained too.
    append(acc, 1, clock)
    (batch,) = acc.drain(cluster, {0}, 10**9, clock.now)[0]
    assert batch.topic_partition == TopicPartition("t", 1)
    batch.done(0, -1, None)
    acc.deallocate(batch)
    complete_all(acc, cluster, clock)


def test_full_compressed_batches_are_sealed_by_the_sender_before_drain() -> None:
    """Queued full batches of a compressed producer hold compressed bytes once the Sender sealed them."""
    clock = FakeClock(START_MS)
    acc = make_acc(clock, compression_type="lz4")
    cluster = make_cluster(partitions=1, nodes=1)
    acc._seal_backlog_bytes = 10**9  # the Sender keeps up: callers never seal
    values = [b"compressible %04d " % i * 8 for i in range(300)]
    for v in values:
        append(acc, 0, clock, value=v)
    dq = acc._deque(TopicPartition("t", 0))
    assert dq is not None and len(dq.batches) > 2
    full = list(dq.batches)[:-1]
    assert not any(b.builder._sealed for b in full)
    acc.seal_full_batches()
    assert all(b.builder._sealed for b in full) and not dq.batches[-1].builder._sealed
    assert all(b.estimated_size_in_bytes() < BATCH for b in full)
    acc.seal_full_batches()  # nothing left to do: idempotent
    assert flush_and_decode(acc, cluster, clock) == values
    assert acc.free.available_memory() == acc.free.total_memory


def test_callers_seal_the_backlog_when_the_sender_falls_behind() -> None:
    """Past the backlog limit a caller compresses the waiting batches itself (backpressure)."""
    clock = FakeClock(START_MS)
    acc = make_acc(clock, compression_type="zstd", memory=1024 * BATCH)
    acc._seal_backlog_bytes = 3 * BATCH
    for i in range(400):
        append(acc, 0, clock, value=b"compressible %04d " % i * 8)
    dq = acc._deque(TopicPartition("t", 0))
    assert dq is not None
    full = list(dq.batches)[:-1]
    assert len(full) > 3
    unsealed = [b for b in full if not b.builder._sealed]
    assert sum(b.builder.uncompressed_size for b in unsealed) <= 3 * BATCH + 2 * BATCH
    assert acc._unsealed_bytes == sum(b.builder.uncompressed_size for b in unsealed)
    acc.seal_full_batches()
    assert acc._unsealed_bytes == 0 and all(b.builder._sealed for b in full)
    complete_all(acc, make_cluster(partitions=1, nodes=1), clock)


@pytest.mark.parametrize("bulk", [False, True], ids=["append", "append_many"])
def test_a_caller_compresses_the_backlog_outside_the_deque_lock(monkeypatch: pytest.MonkeyPatch, bulk: bool) -> None:
    """A codec lets go of the GIL while it works: under the deque lock, the Sender's ready() waited
    for that lock and then for the GIL. The caller compresses only after releasing it."""
    import kproducer.record.builder as builder_module

    clock = FakeClock(START_MS)
    # Batches that do not grow (KIP-782), so that a bulk call fills several too.
    acc = make_acc(clock, compression_type="zstd", memory=1024 * BATCH, batch_max_size=BATCH)
    acc._seal_backlog_bytes = 2 * BATCH
    held: list[bool] = []
    real_compress = builder_module.compress

    def watching_compress(*args: Any, **kwargs: Any) -> bytes:
        dq = acc._deque(TopicPartition("t", 0))
        held.append(dq is not None and dq.lock.locked())
        return real_compress(*args, **kwargs)

    monkeypatch.setattr(builder_module, "compress", watching_compress)
    values = [b"compressible %04d " % i * 8 for i in range(400)]
    if bulk:
        sink = CountingSink()
        largest = max(len(v) for v in values) + 64  # what the producer passes: a new batch's least size
        acc.append_many("t", 0, clock(), values, None, None, 0, len(values), None, False, sink, None, largest, 0, None)
        assert sink.appended_count == len(values)
    else:
        for v in values:
            append(acc, 0, clock, value=v)
    dq = acc._deque(TopicPartition("t", 0))
    assert dq is not None and len(dq.batches) > 3
    assert held, "the backlog passed its limit, so the caller must have compressed batches"
    assert not any(held), f"{held.count(True)} of {len(held)} compressions ran under the deque lock"
    assert acc._unsealed_bytes <= 2 * BATCH + 2 * BATCH
    complete_all(acc, make_cluster(partitions=1, nodes=1), clock)


# ---------------------------------------------------------------------- moving off muted partitions


class FixedPartitioner:
    """A built-in partitioner stand-in whose sticky partition the test sets."""

    def __init__(self) -> None:
        self.partition = 0

    def peek_current_partition(self, cluster: Cluster) -> int:
        return self.partition

    def update_partition_info(self, partition: int, appended_bytes: int, cluster: Cluster, enable_switch: bool = False) -> None:
        pass

    def move_off(self, partition: int, cluster: Cluster) -> None:
        pass

    def uses_load_stats(self) -> bool:
        return True

    def update_partition_load_stats(self, queue_sizes: Any, partition_ids: Any, length: int) -> None:
        pass


def _keyless(acc: RecordAccumulator, clock: FakeClock, cluster: Cluster, n: int) -> list[RecordFuture]:
    out = []
    for _ in range(n):
        result = acc.append("t", -1, clock.now, None, VALUE, None, None, 0, False, clock.now, cluster)
        assert result.future is not None
        out.append(result.future)
    return out


def test_never_sent_keyless_batches_move_off_a_muted_partition_with_their_memory() -> None:
    from kproducer.circuit_breaker import CircuitBreakManager

    clock = FakeClock(START_MS)
    cluster = make_cluster(partitions=6, nodes=3)
    manager = CircuitBreakManager(lambda: cluster, clock)
    tm = FakeTransactionManager()
    sticky = FixedPartitioner()
    acc = make_acc(
        clock, circuit_break_manager=manager, transaction_manager=tm, partitioner_factory=lambda t, s: sticky
    )
    # Partition 1: one batch that was sent and came back for a retry (it has a sequence), then
    # three batches of keyless records that were never sent.
    sticky.partition = 1
    sent = _keyless(acc, clock, cluster, 8)
    (first,) = acc.drain(cluster, {1}, 10**6, clock.now)[1]
    assert first.base_sequence == 0
    acc.reenqueue(first, clock.now)
    moving = _keyless(acc, clock, cluster, 24)
    # Partition 4: a keyed record opens a batch that keyless records then join (pinned), then
    # keyless records fill a second batch (movable).
    acc.append("t", 4, clock.now, b"k", VALUE, None, None, 0, False, clock.now, cluster)
    sticky.partition = 4
    _keyless(acc, clock, cluster, 12)
    # Partition 0 already holds two batches, partition 2 one: the moved batches go to 3 and 5 first.
    acc.append("t", 0, clock.now, b"k", VALUE * 9, None, None, 0, False, clock.now, cluster)
    acc.append("t", 0, clock.now, b"k", VALUE * 9, None, None, 0, False, clock.now, cluster)
    acc.append("t", 2, clock.now, b"k", VALUE, None, None, 0, False, clock.now, cluster)
    before_p1 = queued_batches(acc, 1)
    assert before_p1[0] is first and all(b.movable for b in before_p1[1:])
    pinned_p4, movable_p4 = queued_batches(acc, 4)
    assert pinned_p4.pinned and movable_p4.movable
    free_before = acc.free.available_memory()

    assert acc.move_unsent_off_muted(cluster) == (0, 0)  # nothing muted: nothing moves
    manager.mute(TopicPartition("t", 1), retry_after_ms=5000)
    manager.mute(TopicPartition("t", 4), retry_after_ms=5000)
    batches, records = acc.move_unsent_off_muted(cluster)

    assert queued_batches(acc, 1) == [first]  # sent: keeps its partition and sequence
    assert queued_batches(acc, 4) == [pinned_p4]  # holds a keyed record: stays
    assert acc.free.available_memory() == free_before  # the buffers moved with the batches
    moved = before_p1[1:] + [movable_p4]
    assert (batches, records) == (len(moved), sum(b.record_count for b in moved))
    assert {b.topic_partition.partition for b in moved} <= {0, 2, 3, 5}
    # Shortest queue first: 3 and 5 (empty), then 2 (one batch), and 0 (two) last.
    assert [b.topic_partition.partition for b in moved] == [3, 5, 2, 3]
    for b in moved:
        assert b in queued_batches(acc, b.topic_partition.partition)
        assert not b.is_writable  # closed: nothing lands in a batch that moved
    # Idempotence: the moved batches get their sequences from their new partitions when drained.
    manager.close()
    acc.begin_flush()
    drained = {b.topic_partition: b for lst in acc.drain(cluster, {0, 1, 2}, 10**9, clock.now).values() for b in lst}
    assert drained[TopicPartition("t", 3)].base_sequence == 0
    assert drained[TopicPartition("t", 5)].base_sequence == 0
    acc.end_flush()
    for b in drained.values():
        b.done(100, -1, None)
        acc.deallocate(b)
    clock.now += 1000  # the retried batch's backoff
    complete_all(acc, cluster, clock)
    # Every record is delivered once, and its metadata names the partition it went to.
    partitions = {f.get(0).partition for f in moving}
    assert partitions <= {2, 3, 5} and len(partitions) > 1
    assert {f.get(0).partition for f in sent} == {1}


def test_nothing_moves_when_every_partition_of_the_topic_is_muted() -> None:
    from kproducer.circuit_breaker import CircuitBreakManager

    clock = FakeClock(START_MS)
    cluster = make_cluster(partitions=2, nodes=2)
    manager = CircuitBreakManager(lambda: cluster, clock)
    sticky = FixedPartitioner()
    acc = make_acc(clock, circuit_break_manager=manager, partitioner_factory=lambda t, s: sticky)
    _keyless(acc, clock, cluster, 10)
    manager.mute(TopicPartition("t", 0), retry_after_ms=5000)
    manager.mute(TopicPartition("t", 1), retry_after_ms=5000)
    assert acc.move_unsent_off_muted(cluster) == (0, 0)
    assert len(queued_batches(acc, 0)) == 2
    manager.close()
    complete_all(acc, cluster, clock)


def test_queued_bytes_by_node() -> None:
    clock = FakeClock(START_MS)
    cluster = make_cluster(partitions=4, nodes=2)
    acc = make_acc(clock)
    for p in (0, 0, 1, 2):
        append(acc, p, clock)
    assert acc.queued_bytes_by_node(cluster) == {0: 2 * BATCH, 1: BATCH}
    complete_all(acc, cluster, clock)


def test_keyed_records_for_a_muted_partition_wait_for_room_and_only_they_wait() -> None:
    """Pinned records of muted partitions may hold half the pool; beyond, only their callers wait."""
    from kproducer.circuit_breaker import CircuitBreakManager
    from kproducer.errors import BufferExhaustedError

    clock = FakeClock(START_MS)
    cluster = make_cluster(partitions=4, nodes=2)
    manager = CircuitBreakManager(lambda: cluster, clock)
    sticky = FixedPartitioner()
    acc = make_acc(clock, circuit_break_manager=manager, partitioner_factory=lambda t, s: sticky)
    muted = TopicPartition("t", 1)
    manager.mute(muted, retry_after_ms=5000)
    big = VALUE * 9  # one record per batch
    for _ in range(MEMORY // BATCH // 2):  # up to half the pool: no wait
        acc.append("t", 1, clock.now, b"k", big, None, None, 0, False, clock.now, cluster)
    held = sum(b.capacity for b in queued_batches(acc, 1))
    assert held == MEMORY // 2
    t0 = time.monotonic()
    with pytest.raises(BufferExhaustedError, match="t-1 is muted by the circuit breaker"):
        acc.append("t", 1, clock.now, b"k", big, None, None, 100, False, clock.now, cluster)
    assert time.monotonic() - t0 >= 0.09  # it waited max.block.ms
    # Keyless records (the built-in partitioner avoids muted partitions) do not wait: _keyless
    # appends with max.block.ms 0, so a record that had to wait would fail at once.
    sticky.partition = 0
    _keyless(acc, clock, cluster, 30)
    # Once the partition reopens, its callers go on.
    manager.unmute(muted)
    acc.append("t", 1, clock.now, b"k", big, None, None, 0, False, clock.now, cluster)
    manager.close()
    complete_all(acc, cluster, clock)


class _HeldJob:
    """A compression job that finishes only when the test says so (the worker's protocol, in Python)."""

    def __init__(self, worker: _HeldWorker, codec: int, level: int, buffer: bytearray, start: int, end: int) -> None:
        self.worker, self.codec, self.level = worker, codec, level
        self.buffer, self.start, self.end = buffer, start, end
        self.finished = False
        self.wake_requested = False
        self.taken = False

    def done(self) -> bool:
        return self.finished

    def wake_when_done(self) -> bool:
        if not self.finished:
            self.wake_requested = True
        return self.finished

    def wait(self) -> None:
        assert self.finished, "the accumulator waited for a job the test holds"

    def result(self) -> int | bytes:
        assert self.finished and not self.taken
        self.taken = True
        level = None if self.level == 0 else self.level
        out = codecs.compress(self.codec, bytes(self.buffer[self.start : self.end]), level, 2)
        self.buffer[self.start : self.start + len(out)] = out
        return len(out)


class _HeldWorker:
    def __init__(self) -> None:
        self.jobs: list[_HeldJob] = []

    def submit(self, codec: int, level: int, lz4_header: bytes, buffer: bytearray, start: int, end: int) -> _HeldJob:
        job = _HeldJob(self, codec, level, buffer, start, end)
        self.jobs.append(job)
        return job

    def supports(self, codec: int) -> bool:
        return True

    def set_wakeup_fd(self, fd: int) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_batch_on_the_compression_worker_is_neither_ready_nor_drained_until_done() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock, compression_type="lz4", linger_ms=0)
    worker = _HeldWorker()
    acc.compression_worker = worker
    cluster = make_cluster(partitions=2, nodes=1)
    values = [b"compressible %04d " % i * 8 for i in range(120)]
    for v in values:
        append(acc, 0, clock, value=v)
    append(acc, 1, clock, value=b"partition one")
    assert worker.jobs, "no full batch went to the worker"
    first = worker.jobs[0]
    # Partition 0's head is still compressing: only partition 1 is drained, and the worker is asked
    # to wake the Sender when partition 0's batch is done.
    drained = acc.drain(cluster, {0}, 10**9, clock.now)[0]
    assert [b.topic_partition.partition for b in drained] == [1]
    assert first.wake_requested
    for b in drained:
        b.done(0, -1, None)
        acc.deallocate(b)
    assert acc.ready(cluster, clock.now).ready_nodes == set()
    acc.seal_full_batches(wait=False)  # the Sender's loop does not wait for it
    assert not first.taken
    for job in worker.jobs:
        job.finished = True
    assert acc.ready(cluster, clock.now).ready_nodes == {0}
    acc.seal_full_batches(wait=False)
    assert all(job.taken for job in worker.jobs) and acc._unsealed_bytes == 0
    assert flush_and_decode(acc, cluster, clock) == values
    assert acc.free.available_memory() == acc.free.total_memory


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_full_batches_are_compressed_by_the_native_worker(monkeypatch: pytest.MonkeyPatch, codec: str) -> None:
    """With the worker started, no full batch is compressed in Python; every record decodes back."""
    import socket

    clock = FakeClock(START_MS)
    acc = make_acc(clock, compression_type=codec, linger_ms=0, memory=4096 * BATCH)
    r, w = socket.socketpair()
    try:
        if c_extension.pure_python_forced():
            # The producer keeps the Python codecs in this pass; the accumulator still drives the C worker.
            from kproducer.record import _compression_worker  # type: ignore[attr-defined]

            acc.compression_worker = _compression_worker.CompressionWorker(LZ4_LIBRARY, ZSTD_LIBRARY)
            acc.compression_worker.set_wakeup_fd(w.fileno())
        else:
            assert acc.start_compression_worker(w.fileno()), "the compression worker did not start"
        python_calls = count_python_compressions(monkeypatch)
        cluster = make_cluster(partitions=1, nodes=1)
        values = [b"compressible %05d " % i * 8 for i in range(2_000)]
        for v in values:
            append(acc, 0, clock, value=v)
        decoded = []
        drained = 0
        acc.begin_flush()
        for _ in range(1_000):
            acc.seal_full_batches(wait=False)
            batches = acc.drain(cluster, {0}, 10**9, clock.now)[0]
            if not batches:
                if not acc.has_undrained():
                    break
                # The head is still on the worker, which was asked for a byte when it is done.
                r.settimeout(30)
                assert r.recv(64), "the worker never woke the drain"
            drained += len(batches)
            for b in batches:
                decoded.extend(r.value for rb in read_batches(b.records_buffer()) for r in rb.records())
                b.done(0, -1, None)
                acc.deallocate(b)
        acc.end_flush()
        assert decoded == values and drained >= 5, f"{drained} batches"
        assert len(python_calls) <= 1, f"{len(python_calls)} batches compressed in Python (only the last may be)"
    finally:
        acc.stop_compression_worker()
        r.close()
        w.close()


def test_an_open_batch_drained_with_enough_records_goes_to_the_worker_first() -> None:
    """A hot batch drained while still open is compressed by the worker, not on the Sender's thread."""
    from kproducer.accumulator.accumulator import WORKER_DRAIN_BYTES

    clock = FakeClock(START_MS)
    acc = make_acc(clock, compression_type="zstd", batch_size=64 * 1024, memory=1024 * 1024)
    worker = _HeldWorker()
    acc.compression_worker = worker
    cluster = make_cluster(partitions=2, nodes=1)
    values = [b"compressible %05d " % i * 8 for i in range(300)]  # ~48 KB: one open batch
    for v in values:
        append(acc, 0, clock, value=v)
    small = append(acc, 1, clock, value=b"a quiet partition")
    (open_batch,) = queued_batches(acc, 0)
    assert open_batch.is_writable and open_batch.builder.uncompressed_size >= WORKER_DRAIN_BYTES
    acc.begin_flush()
    drained = acc.drain(cluster, {0}, 10**9, clock.now)[0]
    # The quiet partition's small batch is compressed at once; the big one is on the worker.
    assert [b.topic_partition.partition for b in drained] == [1]
    assert not open_batch.is_writable and [j.end - j.start for j in worker.jobs] == [
        open_batch.builder.uncompressed_size - 61
    ]
    for b in drained:
        b.done(0, -1, None)
        acc.deallocate(b)
    worker.jobs[0].finished = True
    acc.end_flush()
    assert flush_and_decode(acc, cluster, clock, partition=0) == values
    assert small.done()


def test_with_the_worker_a_caller_past_the_backlog_takes_finished_batches_and_does_not_wait() -> None:
    """Waiting for an unfinished job lets go of the GIL; a caller does it only when the worker is
    far behind (four times the backlog limit), and otherwise takes what the worker finished."""
    clock = FakeClock(START_MS)
    acc = make_acc(clock, compression_type="zstd", memory=1024 * BATCH)
    worker = _HeldWorker()
    acc.compression_worker = worker
    acc._seal_backlog_bytes = 3 * BATCH
    values = [b"compressible %04d " % i * 8 for i in range(60)]
    for v in values:  # _HeldJob.wait() fails the test if a caller waits for a held job
        append(acc, 0, clock, value=v)
    assert acc._seal_backlog_bytes < acc._unsealed_bytes <= 4 * acc._seal_backlog_bytes + 2 * BATCH
    assert worker.jobs and not any(j.taken for j in worker.jobs)
    for job in worker.jobs:
        job.finished = True
    append(acc, 0, clock, value=values[0])
    assert all(j.taken for j in worker.jobs[:-1]) and acc._unsealed_bytes <= acc._seal_backlog_bytes
    for job in worker.jobs:
        job.finished = True
    complete_all(acc, make_cluster(partitions=1, nodes=1), clock)


class _MutedPartitionZero:
    """A circuit breaker's routing view with partition 0 muted on its own (its records must vacate)."""

    muted = TopicPartition("t", 0)

    def may_send(self, tp: TopicPartition) -> bool:
        return tp != self.muted

    def cluster_view(self, cluster: Cluster | None = None) -> Cluster:
        assert cluster is not None
        return cluster

    def partitions_to_vacate(self) -> frozenset[TopicPartition]:
        return frozenset({self.muted})


def test_room_beside_a_muted_partition_honours_block_false() -> None:
    """Keyed records for a muted partition may hold half of buffer.memory; past it a caller that
    may not block gets MemoryWouldBlock (with a poll interval, and nothing appended) where a
    blocking one would wait up to max.block.ms (a budget of 0 fails at once, as in Java)."""
    clock = FakeClock(1000)
    acc = make_acc(clock, memory=64 * 1024, batch_size=16 * 1024, circuit_break_manager=_MutedPartitionZero())
    big = b"x" * 20_000  # a batch of its own: the muted partition then holds more than 16 KiB
    acc.append("t", 0, clock.now, b"k", big, None, None, 0, False, clock.now, None)
    available = acc.free.available_memory()
    with pytest.raises(MemoryWouldBlock) as e:
        acc.append("t", 0, clock.now, b"k", big, None, None, 60_000, False, clock.now, None, block=False)
    assert e.value.poll_s is not None and e.value.poll_s > 0
    assert acc.free.available_memory() == available, "nothing was charged"
    assert acc.incomplete_record_count() == 1, "nothing was appended"
    with pytest.raises(BufferExhaustedError):
        acc.append("t", 0, clock.now, b"k", big, None, None, 0, False, clock.now, None)
