"""ProducerBatch, ProduceRequestResult and RecordFuture (Java's ProducerBatch)."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from kproducer.accumulator.batch import FinalState, ProducerBatch
from kproducer.accumulator.futures import ProduceRequestResult, RecordFuture
from kproducer.errors import (
    IllegalStateError,
    InvalidRecordError,
    KafkaError,
    KafkaTimeoutError,
    NotLeaderOrFollowerError,
    ProducerClosedError,
    RecordListTooLargeError,
)
from kproducer.record.builder import MemoryRecordsBuilder
from kproducer.record.reader import read_batches
from kproducer.structs import RecordMetadata, TopicPartition
from tests.support.latch import returns

TP = TopicPartition("orders", 3)


def make_batch(size: int = 4096, created_ms: int = 1000, compression: int = 0) -> ProducerBatch:
    buf = bytearray(size)
    builder = MemoryRecordsBuilder(buf, magic=2, compression=compression, write_limit=size)
    return ProducerBatch(TP, builder, created_ms, buffer=buf)


class Recorder:
    """A delivery callback that remembers its calls in order."""

    def __init__(self, log: list[Any], tag: int) -> None:
        self.log = log
        self.tag = tag

    def __call__(self, metadata: RecordMetadata | None, exc: BaseException | None) -> None:
        self.log.append((self.tag, metadata, exc))


# ---------------------------------------------------------------------- futures
def test_future_metadata_offsets_and_timestamps() -> None:
    result = ProduceRequestResult(TP)
    f0 = RecordFuture(result, 0, 111, 3, 5)
    f2 = RecordFuture(result, 2, 222, -1, 7)
    assert not f0.done()
    result.set(500, -1, None)
    result.done()
    assert f0.done() and f2.done()
    assert f0.result() == RecordMetadata("orders", 3, 500, 111, 3, 5)
    assert f2.result(timeout=0) == RecordMetadata("orders", 3, 502, 222, -1, 7)
    assert f2.exception() is None


def test_future_log_append_time_and_acks_zero() -> None:
    result = ProduceRequestResult(TP)
    f = RecordFuture(result, 4, 111, 1, 1)
    result.set(-1, 999, None)  # acks=0: no offset; LogAppendTime topic
    result.done()
    md = f.result()
    assert md.offset == -1
    assert md.timestamp == 999


def test_future_result_times_out_with_kafka_timeout() -> None:
    f = RecordFuture(ProduceRequestResult(TP), 0, 1, 1, 1)  # never completed
    t0 = time.monotonic()
    with pytest.raises(KafkaTimeoutError):
        returns(lambda: f.result(timeout=0.2), "result(timeout=0.2) of a future never completed")
    assert time.monotonic() - t0 >= 0.2  # it waited its timeout, in seconds
    with pytest.raises(KafkaTimeoutError):
        returns(lambda: f.exception(timeout=0.0), "exception(timeout=0.0)")


def test_future_result_waits_for_another_thread() -> None:
    result = ProduceRequestResult(TP)
    f = RecordFuture(result, 1, 5, 1, 1)

    def complete() -> None:
        time.sleep(0.02)
        result.set(10, -1, None)
        result.done()

    t = threading.Thread(target=complete)
    t.start()
    assert f.result(timeout=5).offset == 11
    t.join()


def test_future_raises_the_record_exception() -> None:
    result = ProduceRequestResult(TP)
    f = RecordFuture(result, 0, 1, 1, 1)
    err = NotLeaderOrFollowerError("moved", topic="orders", partition=3)
    result.set(-1, -1, lambda _i: err)
    result.done()
    with pytest.raises(NotLeaderOrFollowerError):
        f.result()
    assert f.exception() is err


def test_add_done_callback_before_and_after_completion() -> None:
    result = ProduceRequestResult(TP)
    f = RecordFuture(result, 0, 1, 1, 1)
    seen: list[RecordFuture] = []
    f.add_done_callback(seen.append)
    assert seen == []
    result.set(0, -1, None)
    result.done()
    assert seen == [f]
    f.add_done_callback(seen.append)  # already done: called at once
    assert seen == [f, f]


def test_chained_future_follows_the_chain() -> None:
    old_result = ProduceRequestResult(TP)
    new_result = ProduceRequestResult(TP)
    old = RecordFuture(old_result, 5, 77, 1, 2)
    new = RecordFuture(new_result, 1, 77, 1, 2)
    old.chain(new)
    seen: list[RecordFuture] = []
    old.add_done_callback(seen.append)
    old_result.set(-1, -1, lambda _i: RecordListTooLargeError())
    old_result.done()
    assert not old.done()  # the record lives on in the new batch
    assert seen == []
    with pytest.raises(KafkaTimeoutError):
        old.result(timeout=0.01)
    new_result.set(40, -1, None)
    new_result.done()
    assert old.done()
    assert old.result() == RecordMetadata("orders", 3, 41, 77, 1, 2)
    assert seen == [old]


# ---------------------------------------------------------------------- batch appends and completion
def test_try_append_until_full_then_refuses() -> None:
    batch = make_batch(size=300)
    futures = []
    for i in range(100):
        f = batch.try_append(1000 + i, b"k%d" % i, b"v" * 40, None, None, 1000 + i)
        if f is None:
            break
        futures.append(f)
    assert 1 < len(futures) < 100
    assert batch.record_count == len(futures)
    assert batch.is_full() or batch.try_append(1, b"k", b"v" * 40, None, None, 1) is None
    assert [f.relative_offset for f in futures] == list(range(len(futures)))
    assert batch.last_append_ms == 1000 + len(futures) - 1


def test_callbacks_fire_in_order_and_a_raising_one_does_not_stop_the_rest() -> None:
    batch = make_batch()
    calls: list[Any] = []

    def bad(metadata: RecordMetadata | None, exc: BaseException | None) -> None:
        calls.append(("bad", metadata, exc))
        raise RuntimeError("user bug")

    futures = []
    for i in range(5):
        cb = bad if i == 2 else Recorder(calls, i)
        f = batch.try_append(10, b"k", b"v%d" % i, None, cb, 10)
        assert f is not None
        futures.append(f)
    assert batch.done(100, -1, None) is True
    assert [c[0] for c in calls] == [0, 1, "bad", 3, 4]
    assert [c[1].offset for c in calls] == [100, 101, 102, 103, 104]
    assert all(c[2] is None for c in calls)
    assert [f.result().offset for f in futures] == [100, 101, 102, 103, 104]
    assert batch.final_state is FinalState.SUCCEEDED


def test_a_succeeded_batch_can_never_become_failed() -> None:
    batch = make_batch()
    calls: list[Any] = []
    f = batch.try_append(10, None, b"v", None, Recorder(calls, 0), 10)
    assert f is not None
    assert batch.done(7, -1, None)
    with pytest.raises(IllegalStateError):
        batch.done(-1, -1, KafkaTimeoutError("expired"))
    with pytest.raises(IllegalStateError):
        batch.abort(ProducerClosedError())
    assert batch.final_state is FinalState.SUCCEEDED
    assert f.result().offset == 7
    assert len(calls) == 1


def test_a_failed_batch_ignores_a_late_success() -> None:
    batch = make_batch()
    calls: list[Any] = []
    f = batch.try_append(10, None, b"v", None, Recorder(calls, 0), 10)
    assert f is not None
    err = KafkaTimeoutError("expired in flight")
    assert batch.done(-1, -1, err)
    assert batch.done(55, -1, None) is False  # the response arrived after expiry: logged and ignored
    assert batch.final_state is FinalState.FAILED
    assert f.exception() is err
    assert calls == [(0, None, err)]


def test_per_record_errors_from_the_produce_response() -> None:
    batch = make_batch()
    futures = [batch.try_append(10, None, b"v%d" % i, None, None, 10) for i in range(3)]
    top = InvalidRecordError("bad batch", topic="orders", partition=3)
    batch.done(-1, -1, top, [(1, "record 1 is bad"), (2, None)])
    errs = [f.exception() for f in futures if f is not None]
    assert isinstance(errs[0], KafkaError) and "invalid records" in str(errs[0])
    assert isinstance(errs[1], InvalidRecordError) and "record 1 is bad" in str(errs[1])
    assert isinstance(errs[2], InvalidRecordError)


def test_abort_fails_every_record() -> None:
    batch = make_batch()
    calls: list[Any] = []
    futures = [batch.try_append(10, None, b"v", None, Recorder(calls, i), 10) for i in range(3)]
    err = ProducerClosedError("closing")
    batch.abort(err)
    assert batch.final_state is FinalState.ABORTED
    assert [c[0] for c in calls] == [0, 1, 2]
    assert all(c[2] is err for c in calls)
    assert all(f is not None and f.exception() is err for f in futures)
    assert batch.done(1, -1, None) is False


def test_timing_retries_and_delivery_timeout() -> None:
    batch = make_batch(created_ms=1000)
    assert batch.try_append(1, None, b"v", None, None, 1005) is not None
    assert batch.waited_time_ms(1030) == 30
    assert not batch.in_retry()
    batch.drained(1040)
    assert batch.queue_time_ms() == 40
    batch.reenqueued(1100)
    assert batch.attempts == 1 and batch.in_retry()
    assert batch.waited_time_ms(1100) == 0
    assert batch.waited_time_ms(1150) == 50
    assert not batch.has_reached_delivery_timeout(500, 1499)
    assert batch.has_reached_delivery_timeout(500, 1500)


def test_producer_state_before_and_after_close() -> None:
    batch = make_batch()
    for _ in range(3):
        batch.try_append(1, None, b"v", None, None, 1)
    assert not batch.has_sequence()
    batch.set_producer_state(42, 1, 10, False)
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (42, 1, 10)
    assert batch.last_sequence() == 12
    batch.close()
    batch.reset_producer_state(43, 0, 0)
    assert batch.sequence_has_been_reset()
    (rb,) = list(read_batches(batch.records_buffer()))
    rb.validate()
    assert (rb.producer_id, rb.producer_epoch, rb.base_sequence) == (43, 0, 0)


# ---------------------------------------------------------------------- split
def test_split_keeps_every_record_its_future_and_callback_order() -> None:
    batch = make_batch(size=8192)
    calls: list[Any] = []
    futures = []
    for i in range(40):
        f = batch.try_append(1000 + i, b"key-%d" % i, bytes([i]) * 100, [("h", b"%d" % i)], Recorder(calls, i), 1000)
        assert f is not None
        futures.append(f)
    batch.set_producer_state(9, 0, 100, False)
    batch.close()
    parts = batch.split(1024)
    assert len(parts) > 3
    assert sum(p.record_count for p in parts) == 40
    assert all(p.is_split_batch for p in parts)
    assert batch.thunks is None  # the callbacks went with their records
    # Sequences continue across the parts.
    seq = 100
    for p in parts:
        assert p.base_sequence == seq and p.producer_id == 9
        seq += p.record_count
    # The parts re-read back to the same records, in order, each within the split size.
    decoded = []
    for p in parts:
        p.close()
        assert p.estimated_size_in_bytes() <= 1024
        for rb in read_batches(p.records_buffer()):
            decoded.extend(rb.records())
    assert [(r.timestamp, r.key, r.value, r.headers) for r in decoded] == [
        (1000 + i, b"key-%d" % i, bytes([i]) * 100, [("h", b"%d" % i)]) for i in range(40)
    ]
    # The old batch's futures follow the chain; nothing is done until the parts complete.
    assert not any(f.done() for f in futures)
    base = 5000
    for p in parts:
        p.done(base, -1, None)
        base += p.record_count
    assert [f.result().offset for f in futures] == list(range(5000, 5040))
    assert [f.result().timestamp for f in futures] == [1000 + i for i in range(40)]
    assert [c[0] for c in calls] == list(range(40))
    assert [c[1].offset for c in calls] == list(range(5000, 5040))
    # The old batch cannot fire again.
    assert batch.done(1, -1, None) is False


def test_split_twice_chains_to_the_end() -> None:
    batch = make_batch(size=8192)
    futures = [batch.try_append(1, None, b"x" * 200, None, None, 1) for _ in range(10)]
    parts = batch.split(2048)
    assert len(parts) >= 1
    grand = parts[0].split(300)
    assert len(grand) == parts[0].record_count
    base = 0
    for g in grand:
        g.done(base, -1, None)
        base += g.record_count
    for p in parts[1:]:
        p.done(base, -1, None)
        base += p.record_count
    assert [f.result().offset for f in futures if f is not None] == list(range(10))


def test_split_twice_with_some_callbacks_keeps_futures_and_callback_order() -> None:
    """Only records with a callback are held by the batch; the rest follow through result.moved."""
    batch = make_batch(size=8192)
    calls: list[Any] = []
    futures = [
        batch.try_append(1, None, b"x" * 200, None, Recorder(calls, i) if i % 3 == 0 else None, 1) for i in range(12)
    ]
    assert batch.thunks is not None and len(batch.thunks) == 8  # four (callback, future) pairs, flat
    assert all(kept is futures[i] for kept, i in zip(batch.thunks[1::2], (0, 3, 6, 9), strict=True))
    parts = batch.split(2048)
    grand = parts[0].split(300)
    base = 100
    for g in [*grand, *parts[1:]]:
        g.done(base, -1, None)
        base += g.record_count
    assert [f.result().offset for f in futures if f is not None] == list(range(100, 112))
    assert [(c[0], c[1].offset) for c in calls] == [(i, 100 + i) for i in range(0, 12, 3)]


def test_split_failure_reaches_the_old_futures() -> None:
    batch = make_batch(size=4096)
    futures = [batch.try_append(1, None, b"x" * 100, None, None, 1) for _ in range(10)]
    parts = batch.split(512)
    err = NotLeaderOrFollowerError()
    for p in parts:
        p.done(-1, -1, err)
    assert all(f is not None and f.exception() is err for f in futures)


def test_lifecycle_state_moves_forward_only_and_the_final_state_is_kept() -> None:
    from kproducer.accumulator.batch import BatchState

    batch = make_batch()
    assert batch.state is BatchState.OPEN and batch.is_writable
    batch.drained(1001)  # never drained while open: refused, the batch keeps taking records
    assert batch.state is BatchState.OPEN and batch.try_append(1, None, b"v", None, None, 1001) is not None
    batch.close()
    assert batch.state is BatchState.CLOSED and not batch.is_writable
    assert batch.try_append(1, None, b"v", None, None, 1002) is None
    batch.drained(1003)
    assert batch.state is BatchState.IN_FLIGHT
    batch.reenqueued(1004)
    assert batch.state is BatchState.RETRY and batch.in_retry()
    batch.close_for_record_appends()  # a retry stays a retry
    assert batch.state is BatchState.RETRY
    batch.drained(1005)
    assert batch.state is BatchState.IN_FLIGHT and batch.final_state is None and not batch.is_done
    assert batch.done(7, -1, None) is True
    assert batch.state is BatchState.SUCCEEDED and batch.final_state is FinalState.SUCCEEDED and batch.is_done
    for later in (batch.close_for_record_appends, lambda: batch.drained(1006), lambda: batch.reenqueued(1007)):
        later()
        assert batch.state is BatchState.SUCCEEDED
    with pytest.raises(IllegalStateError):
        batch.done(-1, -1, KafkaError("late"))


def test_a_batch_completed_while_open_takes_no_more_records() -> None:
    batch = make_batch()
    batch.abort(KafkaError("closing"))
    assert batch.final_state is FinalState.ABORTED and not batch.is_writable
    assert batch.try_append(1, None, b"v", None, None, 1001) is None
