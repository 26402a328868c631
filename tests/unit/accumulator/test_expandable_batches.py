"""Expandable batches (KIP-782): a hot partition's open batch grows past batch.size, charged to buffer.memory.

The growth rules: a batch that ran out of room while still undrained doubles its
limit, up to ``batch.max.size`` (bounded by ``max.request.size``); every step is
charged to the BufferPool first and never waits (refused while a caller is
queued, or when it would leave less than four batch.size free); a
topic whose broker refused a batch as too large stops growing; a cold
partition's batch keeps ``batch.size``. The C send lane appends into a grown
batch like the Python path (the integration test runs in both passes).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproducer.accumulator.accumulator import MIN_NEW_BATCH_BYTES, RecordAccumulator
from kproducer.accumulator.buffer_pool import BufferPool
from kproducer.accumulator.deques import PartitionDeque
from kproducer.config import ProducerConfig
from kproducer.errors import BufferExhaustedError
from kproducer.record.reader import read_batches
from kproducer.structs import TopicPartition
from tests.support.accumulator import (
    START_MS,
    CountingSink,
    append,
    complete_all,
    flush_and_decode,
    make_acc,
    make_cluster,
    queued_batches,
)
from tests.support.clock import FakeClock

BATCH = 1024
VALUE = b"v" * 100  # ~110 bytes a record


def test_hot_partition_batch_grows_past_batch_size_and_is_charged() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock, batch_max_size=8 * BATCH, memory=64 * BATCH)
    cluster = make_cluster()
    for _ in range(50):  # ~5.5 KB into one partition, nothing drained meanwhile
        append(acc, 0, clock)
    (batch,) = queued_batches(acc, 0)
    assert batch.capacity == 8 * BATCH and batch.grown == 7 * BATCH
    assert acc.free.available_memory() == acc.free.total_memory - batch.capacity
    assert batch.is_full()  # past batch.size: sendable now, though it still takes records
    assert 0 in acc.ready(cluster, clock.now).ready_nodes
    drained = acc.drain(cluster, {0}, 10**9, clock.now)[0]
    assert drained == [batch]
    assert sum(len(list(b.records())) for b in read_batches(bytes(batch.records_buffer()))) == 50
    batch.done(0, -1, None)
    acc.deallocate(batch)
    assert acc.free.available_memory() == acc.free.total_memory


def test_growth_stops_at_batch_max_size() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock, batch_max_size=4 * BATCH, memory=64 * BATCH)
    for _ in range(120):
        append(acc, 1, clock)
    batches = queued_batches(acc, 1)
    assert len(batches) > 2
    assert all(b.capacity == 4 * BATCH for b in batches[:-1])
    assert all(b.estimated_size_in_bytes() <= 4 * BATCH for b in batches)
    complete_all(acc, make_cluster(), clock)


def test_cold_partitions_keep_batch_size() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock, batch_max_size=8 * BATCH, memory=64 * BATCH)
    for p in range(4):
        append(acc, p, clock)
    for p in range(4):
        (batch,) = queued_batches(acc, p)
        assert batch.capacity == BATCH and batch.grown == 0 and not batch.is_full()
    assert acc.free.available_memory() == acc.free.total_memory - 4 * BATCH
    complete_all(acc, make_cluster(), clock)


def test_growth_leaves_four_batches_free_and_never_blocks() -> None:
    """With 8 KiB in all, growth past batch.size keeps 4 KiB free; appends never wait (max.block.ms=0)."""
    clock = FakeClock(START_MS)
    acc = make_acc(clock, batch_max_size=8 * BATCH, memory=8 * BATCH)
    for _ in range(60):  # max_time_to_block_ms is 0: any wait would raise BufferExhaustedError
        append(acc, 0, clock)
    batches = queued_batches(acc, 0)
    assert batches[0].capacity == 4 * BATCH  # 1 -> 2 -> 4 KiB; 8 KiB would leave nothing free
    assert all(b.capacity <= 4 * BATCH for b in batches)
    assert acc.free.available_memory() >= 0
    complete_all(acc, make_cluster(), clock)


def test_a_bulk_call_grows_into_the_reserve_for_rows_it_holds_and_never_blocks() -> None:
    """The same memory as the single-record test above, rows from one bulk call: the four free
    batch.size buffers are not kept for rows the call already holds (a new batch for them would
    take the same bytes), so its first batch grows to batch.max.size; still without waiting."""
    clock = FakeClock(START_MS)
    acc = make_acc(clock, batch_max_size=8 * BATCH, memory=8 * BATCH)
    values = [VALUE] * 60
    sink = CountingSink()
    acc.append_many("t", 0, clock.now, values, None, None, 0, len(values), None, False, sink, None,
                    len(VALUE) + 64, 0, None)  # fmt: skip  (max_time_to_block_ms 0: a wait raises)
    assert sink.appended_count == len(values)
    batches = queued_batches(acc, 0)
    assert batches[0].capacity == 8 * BATCH  # 1 -> 2 -> 4 -> 8 KiB: all of buffer.memory, no reserve
    assert sum(b.record_count for b in batches) == len(values)
    assert acc.free.available_memory() >= 0
    complete_all(acc, make_cluster(), clock)


def test_a_bulk_call_does_not_grow_while_a_caller_waits_for_memory() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock, batch_max_size=8 * BATCH, memory=8 * BATCH)
    acc.free.add_external_waiter(1)  # an asyncio sender waiting for memory, queued first
    try:
        values = [VALUE] * 8  # fits in batch.size... and then more than batch.size
        sink = CountingSink()
        acc.append_many("t", 0, clock.now, values * 2, None, None, 0, 16, None, False, sink, None,
                        len(VALUE) + 64, 0, None)  # fmt: skip
        assert all(b.capacity == BATCH for b in queued_batches(acc, 0))
    finally:
        acc.free.add_external_waiter(-1)
    complete_all(acc, make_cluster(), clock)


def test_growth_refused_while_a_caller_waits_for_memory() -> None:
    pool = BufferPool(4 * BATCH, BATCH)
    held = [pool.allocate(BATCH, 0) for _ in range(4)]
    got: list[bytearray] = []
    waiter = threading.Thread(target=lambda: got.append(pool.allocate(BATCH, 10_000)))
    waiter.start()
    try:
        for _ in range(1000):
            if pool.queued():
                break
            threading.Event().wait(0.005)
        assert pool.queued() == 1
        assert pool.try_grow(1) is False  # the queued caller comes first
    finally:
        pool.deallocate(held.pop())
        waiter.join(10)
    assert got and pool.try_grow(0) is True
    with pytest.raises(BufferExhaustedError):
        pool.allocate(2 * BATCH, 0)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["alloc", "grow", "free"]), st.integers(1, 3 * BATCH)), max_size=40))
def test_pool_growth_keeps_the_memory_invariant(ops: list[tuple[str, int]]) -> None:
    """Whatever the order: free + charged == total, and try_grow never leaves less than keep_free."""
    total = 16 * BATCH
    pool = BufferPool(total, BATCH)
    charged: list[tuple[bytearray, int]] = []
    for op, size in ops:
        if op == "alloc":
            try:
                charged.append((pool.allocate(size, 0), size))
            except BufferExhaustedError:
                assert pool.available_memory() < size
        elif op == "grow" and charged:
            buf, have = charged.pop()
            before = pool.available_memory()
            keep = 4 * BATCH
            if pool.try_grow(size, keep):
                assert before - size >= keep
                have += size
            else:
                assert before - size < keep
            charged.append((buf, have))
        elif op == "free" and charged:
            buf, have = charged.pop(0)
            pool.deallocate(buf, have)
        assert pool.available_memory() + sum(h for _, h in charged) == total
    for buf, have in charged:
        pool.deallocate(buf, have)
    assert pool.available_memory() == total


def test_max_request_size_bounds_growth() -> None:
    cfg = ProducerConfig({"bootstrap.servers": "127.0.0.1:9092", "max.request.size": 65536})
    acc = RecordAccumulator.from_config(cfg, buffer_pool=BufferPool(cfg.buffer_memory, cfg.batch_size))
    assert (acc.batch_size, acc.batch_max_size) == (16384, 65536)
    cfg = ProducerConfig({"bootstrap.servers": "127.0.0.1:9092"})
    acc = RecordAccumulator.from_config(cfg, buffer_pool=BufferPool(cfg.buffer_memory, cfg.batch_size))
    assert acc.batch_max_size == 262144
    cfg = ProducerConfig({"bootstrap.servers": "127.0.0.1:9092", "batch.max.size": 0})
    acc = RecordAccumulator.from_config(cfg, buffer_pool=BufferPool(cfg.buffer_memory, cfg.batch_size))
    assert acc.batch_max_size == acc.batch_size  # growth off


def test_a_batch_too_large_for_the_broker_stops_growth_for_its_topic() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock, batch_max_size=8 * BATCH, memory=64 * BATCH)
    cluster = make_cluster()
    for _ in range(50):
        append(acc, 0, clock)
    (big,) = acc.drain(cluster, {0}, 10**9, clock.now)[0]
    assert big.capacity == 8 * BATCH
    parts = acc.split_and_reenqueue(big)  # as the Sender does on MESSAGE_TOO_LARGE
    assert parts > 1
    acc.deallocate(big)
    for _ in range(30):
        append(acc, 0, clock)
    assert all(b.capacity <= BATCH for b in queued_batches(acc, 0) if not b.is_split_batch)
    complete_all(acc, make_cluster(), clock)


def test_batch_initial_size_starts_small_and_grows() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock, batch_max_size=4 * BATCH, batch_initial_size=256, memory=64 * BATCH)
    append(acc, 2, clock)
    (batch,) = queued_batches(acc, 2)
    assert batch.capacity == 256 and not batch.is_full()
    for _ in range(30):
        append(acc, 2, clock)
    batches = queued_batches(acc, 2)
    assert batches[0].capacity == 4 * BATCH and batches[0].is_full()
    complete_all(acc, make_cluster(), clock)


def test_a_partition_whose_batches_go_out_small_gets_a_smaller_buffer_and_grows_it_back() -> None:
    """batch.initial.size 0 (the default): Java's batch.size for a partition's first batch, then a
    buffer sized from the batch last drained from it when that one held under a quarter of
    batch.size; the next batch is back at batch.size once a batch went out fuller."""
    big = 16 * BATCH
    clock = FakeClock(START_MS)
    acc = make_acc(clock, batch_size=big, batch_max_size=big, memory=64 * big)
    cluster = make_cluster()
    append(acc, 0, clock)
    (first,) = queued_batches(acc, 0)
    assert first.capacity == big  # nothing drained yet: Java's allocation
    complete_all(acc, cluster, clock)
    append(acc, 0, clock)
    (small,) = queued_batches(acc, 0)
    assert small.capacity == MIN_NEW_BATCH_BYTES  # one ~110-byte record went out
    while small.capacity < big:  # it grows as records come, each step charged to the pool
        append(acc, 0, clock)
        assert queued_batches(acc, 0) == [small]
    complete_all(acc, cluster, clock)
    append(acc, 0, clock)
    assert [b.capacity for b in queued_batches(acc, 0)] == [big]  # the last batch went out full
    assert acc.free.available_memory() == 64 * big - big
    complete_all(acc, cluster, clock)


@settings(max_examples=200, deadline=None)
@given(
    initial=st.sampled_from([0, 0, 0, 512, 4096, 16384, 65536]),
    drained=st.integers(min_value=0, max_value=40000),
    bound=st.integers(min_value=0, max_value=70000),
)
def test_new_batch_size_follows_its_rule(initial: int, drained: int, bound: int) -> None:
    acc = make_acc(FakeClock(START_MS), batch_size=16384, batch_initial_size=initial)
    dq = PartitionDeque(TopicPartition("t", 0))
    dq.drained_bytes = drained
    size = acc.new_batch_size(dq, bound)
    assert size >= bound  # the first record always fits
    if initial:
        expected = min(initial, 16384)  # set: fixed, never past batch.size
    elif 0 < drained < 16384 // 4:
        expected = max(MIN_NEW_BATCH_BYTES, 4 * drained)
    else:
        expected = 16384
    assert size == max(expected, bound)
    compressed = make_acc(FakeClock(START_MS), batch_size=16384, batch_initial_size=initial, compression_type="lz4")
    # A compressed batch's drained size is its compressed bytes: not what the next one stages.
    assert compressed.new_batch_size(dq, bound) == max(min(initial, 16384) if initial else 16384, bound)


def _grown(acc: RecordAccumulator, partition: int, clock: FakeClock, records: int = 50) -> Any:
    for _ in range(records):  # ~5.5 KB into one partition, nothing drained meanwhile
        append(acc, partition, clock)
    (batch,) = queued_batches(acc, partition)
    return batch


def test_with_a_circuit_breaker_grown_batches_in_flight_to_a_leader_stay_within_an_eighth_of_the_pool() -> None:
    """A sent batch keeps its partition: a leader's in-flight growth is bounded, so a muted one holds little."""
    from kproducer.circuit_breaker import CircuitBreakManager

    clock = FakeClock(START_MS)
    cluster = make_cluster(partitions=4, nodes=2)  # node 0 leads partitions 0 and 2
    manager = CircuitBreakManager(lambda: cluster, clock)
    acc = make_acc(clock, batch_max_size=8 * BATCH, memory=64 * BATCH, circuit_break_manager=manager)
    limit = 64 * BATCH // 8
    grown = [_grown(acc, p, clock) for p in (0, 2)]
    assert [b.capacity for b in grown] == [8 * BATCH, 8 * BATCH]
    acc.begin_flush()
    # The first grown batch goes (nothing of node 0's in flight yet); the second would take the
    # node past the limit and waits in its queue.
    assert acc.drain(cluster, {0}, 10**9, clock.now)[0] == [grown[0]]
    assert acc.in_flight_growth_by_node() == {0: 7 * BATCH}
    assert acc.drain(cluster, {0}, 10**9, clock.now)[0] == []
    assert queued_batches(acc, 2) == [grown[1]]
    # Back for a retry: no longer in flight, so either may go next, and only one of them.
    acc.reenqueue(grown[0], clock.now)
    assert acc.in_flight_growth_by_node() == {}
    clock.now += 1000  # past the retry backoff
    (sent,) = acc.drain(cluster, {0}, 10**9, clock.now)[0]
    assert sent in grown
    assert acc.in_flight_growth_by_node() == {0: 7 * BATCH} and limit >= 7 * BATCH
    assert acc.drain(cluster, {0}, 10**9, clock.now)[0] == []
    acc.end_flush()
    sent.done(0, -1, None)
    acc.deallocate(sent)  # completion gives the budget back
    assert acc.in_flight_growth_by_node() == {}
    manager.close()
    complete_all(acc, cluster, clock)


def test_without_a_circuit_breaker_in_flight_growth_is_not_limited() -> None:
    clock = FakeClock(START_MS)
    cluster = make_cluster(partitions=4, nodes=2)
    acc = make_acc(clock, batch_max_size=8 * BATCH, memory=64 * BATCH)
    grown = [_grown(acc, p, clock) for p in (0, 2)]
    acc.begin_flush()
    drained = acc.drain(cluster, {0}, 10**9, clock.now)[0]
    acc.end_flush()
    assert sorted(drained, key=id) == sorted(grown, key=id)
    for b in drained:
        b.done(0, -1, None)
        acc.deallocate(b)
    complete_all(acc, cluster, clock)


def test_a_partition_the_breaker_muted_does_not_grow_past_batch_size() -> None:
    from kproducer.circuit_breaker import CircuitBreakManager

    clock = FakeClock(START_MS)
    cluster = make_cluster(partitions=4, nodes=2)
    manager = CircuitBreakManager(lambda: cluster, clock)
    acc = make_acc(clock, batch_max_size=8 * BATCH, memory=64 * BATCH, circuit_break_manager=manager)
    manager.mute(TopicPartition("t", 0), retry_after_ms=5000)
    for _ in range(50):
        append(acc, 0, clock)
    assert {b.capacity for b in queued_batches(acc, 0)} == {BATCH}
    manager.unmute(TopicPartition("t", 0))
    for _ in range(50):  # open again: the next batch grows as before
        append(acc, 0, clock)
    assert queued_batches(acc, 0)[-1].capacity > BATCH
    manager.close()
    complete_all(acc, cluster, clock)


def test_compressed_growth_keeps_staged_records_within_the_staging_bound() -> None:
    """A compressed batch stages its records uncompressed until it closes: before the topic's ratio is
    known, growth keeps that within batch.max.size (256 KiB here)."""
    from kproducer.record.builder import MAX_STAGING_BYTES

    clock = FakeClock(START_MS)
    acc = make_acc(clock, batch_size=16384, batch_max_size=262144, memory=8 * 1024 * 1024, compression_type="lz4")
    for _ in range(6000):  # 600 KB of very compressible records into one partition
        append(acc, 0, clock, value=bytes(100))
    batches = queued_batches(acc, 0)
    assert any(b.capacity > 16384 for b in batches)  # it did grow
    for b in batches:
        assert b.builder.uncompressed_size <= MAX_STAGING_BYTES + 200
    complete_all(acc, make_cluster(), clock)


def test_growth_refused_while_an_asyncio_sender_waits() -> None:
    """An event-loop task waiting for memory (counted outside the pool's queue) also stops growth."""
    pool = BufferPool(8 * BATCH, BATCH)
    assert pool.try_grow(BATCH)
    pool.add_external_waiter(1)
    assert pool.try_grow(BATCH) is False
    pool.add_external_waiter(-1)
    assert pool.try_grow(BATCH)


# ---------------------------------------------------------------------- compressed batches: staging


def _compressible(n: int, size: int = 1000) -> list[bytes]:
    return [(b"%06d " % i) + b"compressible " * (size // 13) for i in range(n)]


def _observed_ratio(acc: RecordAccumulator, ratio: float) -> None:
    """The topic's compression ratio as a running producer would have learnt it from earlier batches."""
    for _ in range(20):
        acc._ratio_estimator.update_estimation("t", acc.compression, ratio)


def test_a_hot_compressed_batch_stages_past_256_kib_charged_to_buffer_memory() -> None:
    """Records that compress ~50:1 filled a batch at 256 KiB of records (6 KB on the wire). A bulk
    call holding more rows for the partition lets the staging grow, up to 1 MiB of records, each
    step charged to buffer.memory; the charge comes back when the batch completes."""
    from kproducer.record.compression_ratio import MAX_GROWN_STAGING_BYTES, MAX_STAGING_BYTES

    clock = FakeClock(START_MS)
    acc = make_acc(clock, batch_size=16_384, batch_max_size=262_144, memory=32 * 1024 * 1024,
                   compression_type="lz4")  # fmt: skip
    values = _compressible(3_000)
    _observed_ratio(acc, 0.03)
    sink = CountingSink()
    acc.append_many("t", 0, clock.now, values, None, None, 0, len(values), None, False, sink, None, 2048, 0, None)
    batches = queued_batches(acc, 0)
    staged = [b.builder.uncompressed_size for b in batches[:-1]]
    assert staged and min(staged) > 2 * MAX_STAGING_BYTES, staged
    assert max(staged) <= MAX_GROWN_STAGING_BYTES + 2048
    first = batches[0]
    charged = first.capacity - 16_384
    assert charged >= staged[0] - MAX_STAGING_BYTES - 16_384
    held = sum(b.capacity for b in acc._incomplete.copy_all())
    assert acc.free.available_memory() == acc.free.total_memory - held
    assert flush_and_decode(acc, make_cluster(partitions=1, nodes=1), clock) == values


def test_staging_does_not_grow_into_the_last_free_batches_for_single_records() -> None:
    """A send() of one record keeps four batch.size buffers free, as KIP-782 growth does: with six
    buffers' worth of memory, a batch of records that compress 30:1 stages only what it was charged."""
    clock = FakeClock(START_MS)
    acc = make_acc(clock, batch_size=16_384, batch_max_size=262_144, memory=6 * 16_384, compression_type="lz4")
    _observed_ratio(acc, 0.03)
    for v in _compressible(40):
        append(acc, 0, clock, value=v)
    batches = queued_batches(acc, 0)
    assert len(batches) >= 2
    # One step (to 32 KiB of records) left exactly four 16 KB buffers free; the next was refused.
    assert batches[0].grown == 16_384
    assert all(b.builder.uncompressed_size <= b.capacity for b in batches)
    complete_all(acc, make_cluster(), clock)


def test_compressed_bytes_move_to_the_pool_buffer_and_the_staging_buffer_is_reused() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock, batch_size=16_384, memory=4 * 1024 * 1024, compression_type="zstd")
    _observed_ratio(acc, 0.03)
    values = _compressible(1_200)
    for v in values:
        append(acc, 0, clock, value=v)
    batches = queued_batches(acc, 0)
    assert len(batches) >= 3
    first, second = batches[0], batches[1]
    staging = first.builder.buffer_object
    assert staging is first.buffer and len(staging) > 16_384  # the first batch stages in its pool buffer
    stagings = {id(b.builder.buffer_object) for b in batches[:-1]}
    acc.seal_full_batches()
    # Sealed: the compressed bytes live in a pool-sized buffer, the staging buffers were kept...
    assert first.builder.buffer_object is first.buffer and len(first.buffer) == 16_384
    assert acc._staging_free.idle_bytes >= len(staging)
    # ... and the next batch opened writes its records into one of them, not into fresh memory.
    append(acc, 1, clock, value=values[0])
    (opened,) = queued_batches(acc, 1)
    assert id(opened.builder.buffer_object) in stagings and opened.buffer is not opened.builder.buffer_object
    assert second.builder.buffer_object is second.buffer
    assert flush_and_decode(acc, make_cluster(partitions=2, nodes=1), clock, partition=0) == values


def test_a_staging_buffer_too_small_to_recycle_stays_the_batch_buffer_cut_back() -> None:
    """Records that compress about 2:1: the first batch stages past its 16 KB pool buffer but under
    MIN_RECYCLED_BYTES. Sealed, it keeps that buffer cut back to 16 KB, with no fresh one, and its
    charge stays until it completes."""
    import os

    from kproducer.accumulator.staging import MIN_RECYCLED_BYTES

    clock = FakeClock(START_MS)
    acc = make_acc(clock, batch_size=16_384, memory=4 * 1024 * 1024, compression_type="lz4")
    _observed_ratio(acc, 0.5)
    values = [os.urandom(500) + bytes(500) for _ in range(60)]
    for v in values:
        append(acc, 0, clock, value=v)
    first = queued_batches(acc, 0)[0]
    staging = first.builder.buffer_object
    assert staging is first.buffer and 16_384 < len(staging) < MIN_RECYCLED_BYTES
    charged = first.capacity
    acc.seal_full_batches()
    assert first.buffer is staging and first.builder.buffer_object is staging
    assert len(staging) == 16_384 and first.builder.records_size > 16_384
    assert first.capacity == charged
    assert acc._staging_free.idle_bytes == 0
    held = sum(b.capacity for b in acc._incomplete.copy_all())
    assert acc.free.available_memory() == acc.free.total_memory - held
    assert flush_and_decode(acc, make_cluster(partitions=1, nodes=1), clock) == values
    assert acc.free.available_memory() == acc.free.total_memory


def test_idle_staging_buffers_are_bounded() -> None:
    from kproducer.accumulator.staging import MIN_RECYCLED_BYTES, StagingBuffers

    pool = StagingBuffers(idle_limit=3 * MIN_RECYCLED_BYTES)
    small = bytearray(MIN_RECYCLED_BYTES - 1)
    pool.give(small)
    assert pool.take() is None  # too small to be worth keeping
    bufs = [bytearray(MIN_RECYCLED_BYTES) for _ in range(4)]
    for b in bufs:
        pool.give(b)
    assert pool.idle_bytes == 3 * MIN_RECYCLED_BYTES  # the fourth was dropped
    assert pool.take() is bufs[2] and pool.take() is bufs[1] and pool.take() is bufs[0]
    assert pool.take() is None and pool.idle_bytes == 0


def test_buffer_memory_bounds_compressed_batches_over_a_thousand_partitions() -> None:
    """lz4, 1 KB records that compress ~30:1, round robin over 1,000 partitions, nothing drained:
    what the batches hold stays within what buffer.memory charged them, and what Python allocated
    stays within buffer.memory plus the idle staging buffers and the records' own objects.

    Before staging was charged, each open batch staged up to 256 KiB of records for free: 1,000
    partitions held ~100 MB against a 32 MB buffer.memory."""
    import tracemalloc

    from kproducer.accumulator.staging import IDLE_BYTES

    memory = 32 * 1024 * 1024
    clock = FakeClock(START_MS)
    acc = make_acc(clock, batch_size=16_384, batch_max_size=262_144, memory=memory, compression_type="lz4")
    _observed_ratio(acc, 0.03)
    values = _compressible(64)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        appended = 0
        with contextlib.suppress(BufferExhaustedError):
            for i in range(100_000):
                acc.append("t", i % 1000, clock.now, b"key", values[i % 64], None, None, 0, False, clock.now, None)
                appended += 1
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    batches = acc._incomplete.copy_all()
    charged = memory - acc.free.available_memory()
    assert charged == sum(b.capacity for b in batches)  # the pool's accounting is the batches' capacities
    for b in batches:
        held = len(b.builder.buffer_object) + (0 if b.builder.buffer_object is b.buffer else len(b.buffer or b""))
        # What a batch writes into: its pool buffer and staging, each at most what it was charged
        # (the C encoder doubles a staging bytearray's length; untouched pages are not resident).
        assert b.builder.uncompressed_size <= b.capacity, (b.topic_partition, b.builder.uncompressed_size, b.capacity)
        assert held <= 2 * b.capacity + 2048
    staged = sum(b.builder.uncompressed_size for b in batches)
    assert staged <= memory
    # Python's own allocations: buffer.memory, idle staging buffers, and per record a future and
    # its bookkeeping (about 60 bytes a record here).
    assert peak <= memory + IDLE_BYTES + appended * 256, (peak, appended)
    assert appended < 100_000  # memory ran out: nothing was held beyond buffer.memory
