"""The C send lane opens a keyed record's new batch through ``RecordAccumulator.open_new_batch``.

When a partition has no open batch (every batch drained, or the last one closed for appends), a
keyed record no longer leaves the lane for the whole Python ``send()`` path: the lane calls the
accumulator's ``open_new_batch`` under the deque lock it holds, which opens and queues the batch
with the same steps as the Python path, and the lane appends the record to it, its first (the
builder's base timestamp is that record's). Where that path would decide or wait
(no memory free now, a keyless record whose new batch moves the sticky partition, a record that
does not fit an open batch and may grow it), the lane still hands the call to Python.
``test_send_lane_twin.py`` compares whole runs of both paths; these tests pin each branch.

The lane is part of the C extension: these tests run in the native pass, where a missing
extension fails them; the pure-Python pass has no lane (``test_send_lane_twin.py`` checks that).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from kproducer.accumulator.accumulator import MIN_NEW_BATCH_BYTES
from kproducer.errors import BufferExhaustedError
from kproducer.murmur2 import partition_for_key
from kproducer.network.protocol import ApiKey
from kproducer.record import native
from kproducer.record.reader import read_batches
from kproducer.structs import TopicPartition
from tests.support.mock_client import batches_of, produce_response
from tests.support.producer_rig import ProducerRig

PURE = os.environ.get("KPRODUCER_PURE_PYTHON", "").strip() not in ("", "0")
native_only = pytest.mark.skipif(PURE, reason="the pure-Python pass has no C send lane (test_no_lane_in_the_pure_pass)")

PARTITIONS = 4
LINGER_MS = 7


def _accumulator(rig: ProducerRig) -> Any:
    return rig.producer._accumulator


def _lane(rig: ProducerRig) -> Any:
    lane = rig.producer._lane
    assert lane is not None, "the native pass built no C send lane: is kproducer._speedups built?"
    return lane


def _key_for(partition: int) -> bytes:
    """A key murmur2 sends to ``partition`` of a PARTITIONS-partition topic."""
    i = 0
    while partition_for_key(b"key-%d" % i, PARTITIONS) != partition:
        i += 1
    return b"key-%d" % i


def _drain_all(rig: ProducerRig, futures: list[Any]) -> None:
    rig.client.prepare(ApiKey.PRODUCE, *[produce_response(base_offset=0) for _ in range(PARTITIONS)])
    rig.run_until(lambda: all(f.done() for f in futures), loops=20, step_ms=LINGER_MS)


def _rig(config: dict[str, Any] | None = None) -> ProducerRig:
    assert native.c is not None, "the C extension kproducer._speedups is not built: run `make test` to build it"
    rig = ProducerRig({"acks": "1", "linger.ms": LINGER_MS, **(config or {})}, topics={"a": PARTITIONS})
    # The first send registers the topic with the lane, and each partition's first record makes its
    # deque (both on the Python path); drained, no batch is left.
    _drain_all(rig, [rig.producer.send("a", b"warm", _key_for(p)) for p in range(PARTITIONS)])
    return rig


@native_only
def test_a_keyed_record_opens_its_partitions_batch_in_the_lane() -> None:
    rig = _rig()
    try:
        acc, lane = _accumulator(rig), _lane(rig)
        calls, wakeups = lane.fast_calls, rig.client.wakeups
        seen: list[tuple[int, int, BaseException | None]] = []
        futures = [
            rig.producer.send(
                "a", b"v%d" % p, _key_for(p), callback=lambda md, exc: seen.append((md.partition, md.offset, exc))
            )
            for p in range(PARTITIONS)
        ]
        assert lane.fast_calls - calls == PARTITIONS, "the lane handed new batches to Python"
        assert rig.client.wakeups - wakeups == PARTITIONS, "a new batch must wake the Sender"
        # Each alone in its deque and not full: the Sender is told when it becomes sendable (now +
        # linger.ms), as the Python path tells it (RecordRouter.wake_for_new_batch).
        assert rig.client.wakeup_deadlines[-PARTITIONS:] == [rig.clock() + LINGER_MS] * PARTITIONS
        deques, _ = acc.partition_state("a")
        for p in range(PARTITIONS):
            (batch,) = deques[p].batches
            assert (batch.topic_partition, batch.record_count, batch.pinned) == (TopicPartition("a", p), 1, True)
            assert len(batch.thunks) == 2, "one callback and its future, with no pair object"
        assert not acc.appends_in_progress()
        # Appends to those batches stay in the lane, and everything is delivered in send order.
        futures += [rig.producer.send("a", b"w%d" % p, _key_for(p)) for p in range(PARTITIONS)]
        assert lane.fast_calls - calls == 2 * PARTITIONS
        _drain_all(rig, futures)
        assert [f.result().partition for f in futures] == list(range(PARTITIONS)) * 2
        # One batch each: the records' offsets follow their base offset in send order.
        assert [f.result().offset - futures[f.result().partition].result().offset for f in futures] == [0] * 4 + [1] * 4
        assert sorted((p, exc) for p, _offset, exc in seen) == [(p, None) for p in range(PARTITIONS)]
        for p in range(PARTITIONS):
            assert rig.values(TopicPartition("a", p)) == [[b"warm"], [b"v%d" % p, b"w%d" % p]]
    finally:
        rig.close()


@native_only
def test_a_batch_closed_for_appends_is_followed_by_a_new_one_from_the_lane() -> None:
    rig = _rig()
    try:
        acc, lane = _accumulator(rig), _lane(rig)
        key = _key_for(1)
        futures = [rig.producer.send("a", b"first", key)]
        deques, _ = acc.partition_state("a")
        (first,) = deques[1].batches
        first.close_for_record_appends()
        calls, wakeups, deadlines = lane.fast_calls, rig.client.wakeups, len(rig.client.wakeup_deadlines)
        futures.append(rig.producer.send("a", b"second", key))
        assert lane.fast_calls - calls == 1
        # The closed batch ahead of the new one is sendable now: a plain wakeup, as in Java.
        assert (rig.client.wakeups - wakeups, len(rig.client.wakeup_deadlines) - deadlines) == (1, 0)
        assert [b.record_count for b in deques[1].batches] == [1, 1]
        assert deques[1].batches[0] is first
        _drain_all(rig, futures)
        assert all(f.exception() is None for f in futures)
        assert rig.values(TopicPartition("a", 1)) == [[b"warm"], [b"first"], [b"second"]]
    finally:
        rig.close()


@native_only
def test_a_new_batch_counts_as_an_append_in_progress_until_it_is_incomplete(monkeypatch: pytest.MonkeyPatch) -> None:
    """A forced close waits for appends in progress and then aborts what is incomplete: a batch the
    lane opens must be one or the other at every moment, or its record would never complete."""
    rig = _rig()
    try:
        acc = _accumulator(rig)
        seen: list[bool] = []
        real = acc._enqueue_new_batch

        def watched(topic_info: Any, dq: Any, batch: Any) -> None:
            seen.append(acc.appends_in_progress())
            real(topic_info, dq, batch)

        monkeypatch.setattr(acc, "_enqueue_new_batch", watched)
        future = rig.producer.send("a", b"v", _key_for(2))
        assert seen == [True]
        assert not acc.appends_in_progress()
        acc.abort_incomplete_batches()
        assert future.done() and future.exception() is not None
    finally:
        rig.close()


@native_only
def test_the_lane_sizes_a_new_batch_from_its_partitions_last_batch() -> None:
    """The lane's new batch takes ``RecordAccumulator.new_batch_size``, as the Python path's does:
    after the rig's one-record batches, a partition's next buffer is the small one, then batch.size
    again once a batch went out full."""
    rig = _rig({"batch.size": 16384})
    try:
        acc, lane = _accumulator(rig), _lane(rig)
        deques, _ = acc.partition_state("a")
        assert 0 < deques[1].drained_bytes < 16384 // 4
        calls = lane.fast_calls
        futures = [rig.producer.send("a", b"v", _key_for(1))]
        assert lane.fast_calls - calls == 1, "the lane handed the new batch to Python"
        (batch,) = deques[1].batches
        assert batch.capacity == MIN_NEW_BATCH_BYTES
        futures += [rig.producer.send("a", b"x" * 1000, _key_for(1)) for _ in range(12)]  # grows to batch.size
        assert [b.capacity for b in deques[1].batches] == [16384]
        _drain_all(rig, futures)
        assert deques[1].drained_bytes >= 16384 // 4
        futures.append(rig.producer.send("a", b"v", _key_for(1)))
        assert [b.capacity for b in deques[1].batches] == [16384]
        _drain_all(rig, futures)
        assert all(f.exception() is None for f in futures)
    finally:
        rig.close()


@native_only
def test_without_free_memory_the_lane_leaves_the_new_batch_to_python() -> None:
    """The lane never waits for buffer.memory: with none free it hands the record to Python, which
    waits up to max.block.ms (0 here) and fails it with BufferExhaustedError."""
    # Every new batch takes batch.size (batch.initial.size at batch.size, Java's allocation): two fill the pool.
    rig = _rig({"buffer.memory": 32768, "batch.size": 16384, "batch.initial.size": 16384, "max.block.ms": 0})
    try:
        acc, lane = _accumulator(rig), _lane(rig)
        futures = [rig.producer.send("a", b"v%d" % p, _key_for(p)) for p in range(2)]  # both pool buffers
        calls = lane.fast_calls
        late = rig.producer.send("a", b"late", _key_for(2))
        assert lane.fast_calls == calls, "the lane took a record it had no memory for"
        assert isinstance(late.exception(), BufferExhaustedError)
        deques, _ = acc.partition_state("a")
        assert not deques[2].batches
        assert acc.free.available_memory() == 0
        _drain_all(rig, futures)
        assert [f.result().offset for f in futures] == [0, 0]
    finally:
        rig.close()


@native_only
def test_a_keyless_record_without_a_batch_takes_the_python_path() -> None:
    """A keyless record's new batch is the sticky partitioner's business (KIP-794): Python's."""
    rig = _rig()
    try:
        lane = _lane(rig)
        calls = lane.fast_calls
        future = rig.producer.send("a", b"keyless")
        assert lane.fast_calls == calls
        _drain_all(rig, [future])
        assert future.result().offset == 0
    finally:
        rig.close()


@native_only
def test_a_batchs_first_callback_makes_its_list_in_python_and_later_ones_stay_in_the_lane() -> None:
    """A batch holds no list of callbacks until a record with one arrives (``ProducerBatch._keep``).

    The lane allocates nothing the cyclic GC tracks under the deque lock, so the first record with
    a callback in a batch opened without one goes to the Python ``send()``, which makes the list;
    the records after it stay in the lane. Callbacks still run in send order.
    """
    rig = _rig()
    try:
        acc, lane = _accumulator(rig), _lane(rig)
        key = _key_for(0)
        calls = lane.fast_calls
        order: list[int] = []
        futures = [rig.producer.send("a", b"v0", key)]
        assert lane.fast_calls - calls == 1
        deques, _ = acc.partition_state("a")
        (batch,) = deques[0].batches
        assert batch.thunks is None, "a batch without callbacks must not make a list for them"
        futures.append(rig.producer.send("a", b"v1", key, callback=lambda md, exc: order.append(md.offset)))
        assert lane.fast_calls - calls == 1, "the lane took a first callback into a batch with no list"
        assert batch.thunks is not None and len(batch.thunks) == 2 and batch.thunks[1] is futures[1]
        futures += [rig.producer.send("a", b"v%d" % i, key, callback=lambda md, exc: order.append(md.offset)) for i in (2, 3)]
        assert lane.fast_calls - calls == 3, "the lane handed later callbacks to Python"
        assert len(batch.thunks) == 6 and batch.record_count == 4
        # Flat pairs in send order: each callback, then the future of its record.
        assert all(kept is sent for kept, sent in zip(batch.thunks[1::2], futures[1:], strict=True))
        assert all(callable(cb) for cb in batch.thunks[0::2])
        _drain_all(rig, futures)
        offsets = [f.result().offset for f in futures]
        assert offsets == [offsets[0] + i for i in range(4)]
        assert order == offsets[1:]
    finally:
        rig.close()


@native_only
def test_the_lane_writes_a_new_batchs_first_record_with_the_base_timestamp() -> None:
    """The lane appends a new batch's first record itself: it sets the builder's base timestamp,
    and the records after it are written relative to it, as the Python path writes them."""
    wall = [1_700_000_000_000]
    rig = ProducerRig({"acks": "1", "linger.ms": LINGER_MS}, topics={"a": PARTITIONS}, wall_clock=lambda: wall[0])
    try:
        _drain_all(rig, [rig.producer.send("a", b"warm", _key_for(p)) for p in range(PARTITIONS)])
        lane = _lane(rig)
        calls, bodies = lane.fast_calls, len(rig.produce_bodies())
        key = _key_for(2)
        futures = []
        for step, value in ((0, b"first"), (5, b"second"), (1, None)):
            wall[0] += step
            futures.append(rig.producer.send("a", value, key))
        assert lane.fast_calls - calls == 3, "the lane handed a send to Python"
        _drain_all(rig, futures)
        (data,) = [d for body in rig.produce_bodies()[bodies:] if (d := batches_of(body).get(TopicPartition("a", 2)))]
        (batch,) = read_batches(data)
        assert batch.base_timestamp == 1_700_000_000_000
        records = [(r.offset - futures[0].result().offset, r.timestamp, r.key, r.value) for r in batch.records()]
        assert records == [
            (0, 1_700_000_000_000, key, b"first"),
            (1, 1_700_000_000_005, key, b"second"),
            (2, 1_700_000_000_006, key, None),
        ]
        assert [f.result().timestamp for f in futures] == [r[1] for r in records]
    finally:
        rig.close()


@native_only
def test_a_batch_the_lane_opened_and_left_to_python_still_wakes_the_sender(monkeypatch: pytest.MonkeyPatch) -> None:
    """Should the new batch's record be declined (nothing the accumulator builds does that today),
    the Python ``send()`` appends it to the batch already queued, and the Sender is still told of
    the new batch."""
    rig = _rig()
    try:
        acc, lane = _accumulator(rig), _lane(rig)
        opened = acc.open_new_batch

        def open_without_thunks_list(*args: Any) -> Any:
            batch = opened(*args)
            if batch is not None:
                batch.thunks = None  # a record with a callback is then the Python path's
            return batch

        monkeypatch.setattr(acc, "open_new_batch", open_without_thunks_list)
        calls, wakeups = lane.fast_calls, rig.client.wakeups
        seen: list[int] = []
        future = rig.producer.send("a", b"v", _key_for(1), callback=lambda md, exc: seen.append(md.offset))
        assert lane.fast_calls == calls, "the lane took a record its batch declined"
        assert rig.client.wakeups > wakeups, "the Sender was not told of the new batch"
        deques, _ = acc.partition_state("a")
        (batch,) = deques[1].batches
        assert batch.record_count == 1 and batch.thunks is not None and len(batch.thunks) == 2
        _drain_all(rig, [future])
        assert seen == [future.result().offset]
    finally:
        rig.close()
