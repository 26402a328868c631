"""ProducerBatch: one record batch for one partition, and its lifecycle (Java's ``ProducerBatch``).

A batch wraps a :class:`MemoryRecordsBuilder` writing into a pool buffer. Each
appended record gets a :class:`RecordFuture` (a pointer into the batch's single
:class:`ProduceRequestResult`); a record sent with a callback also has its callback and
future kept in append order (Java's ``ProducerBatch.Thunk``), so that delivery callbacks
fire in send order.

The batch keeps them in one flat list, ``thunks``, two items per entry: a record's callback
then its future, or a :class:`BulkRange` then None. No pair object is made per record: an
object of a GC type counts towards the cyclic collector's next young collection even when it
is never tracked, and one such object per record in flight was enough to set off collections
whose promotions, in turn, set off full ones (see docs/architecture.md, "The GIL and the Sender's system calls").

Its lifecycle is one :class:`BatchState`, changed only by ``ProducerBatch._transition``:
OPEN (taking records) → CLOSED (full, sealed or expired; waiting to be drained) →
IN_FLIGHT (drained into a produce request) ⇄ RETRY (back in its deque after a retriable
error) → one final state, SUCCEEDED, FAILED or ABORTED (Java's ``ProducerBatch.FinalState``).
The final state is set once: a batch that succeeded can never turn failed.

:class:`ProducerBatch` is one concept, as Java's class of that name is: its append,
close, split and completion steps share one set of fields and one lock. Those the C
send lane appends through are declared by :class:`ProducerBatchCore` (a C type, or
its Python twin), whose own C function takes a record for the lane.
"""

from __future__ import annotations

import enum
import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from kproducer.accumulator.futures import NO_OFFSET, NO_TIMESTAMP, ProduceRequestResult, RecordFuture
from kproducer.accumulator.staging import MIN_RECYCLED_BYTES
from kproducer.callback_errors import callback_raised
from kproducer.errors import IllegalStateError, InvalidRecordError, KafkaError, RecordListTooLargeError
from kproducer.record.builder import MemoryRecordsBuilder, estimate_size_upper_bound
from kproducer.record.c_extension import c
from kproducer.record.compression_worker import CompressionWorker
from kproducer.structs import RecordMetadata, TopicPartition, metadata_type

__all__ = [
    "BatchState",
    "BulkRange",
    "BulkSink",
    "DeliveryCallback",
    "FinalState",
    "NO_SEQUENCE",
    "ProducerBatch",
    "record_error_fn",
]

log = logging.getLogger(__name__)

NO_SEQUENCE = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1

# (metadata, exception), Java's order: kproducer.delivery turns each public convention into this.
DeliveryCallback = Callable[[RecordMetadata | None, Any], object]
ErrorFn = Callable[[int], BaseException | None]
RecordExceptions = ErrorFn | Mapping[int, BaseException] | Sequence[Any]

# State changes race only between the Sender, a caller closing a full batch and a closing
# producer, a few times per batch: one lock for all batches costs less than one per batch.
_state_lock = threading.Lock()
# seal() may run on a caller thread while the Sender closes other batches: a lock keeps a
# batch's compression (seal) and its close from ever overlapping. Striped by batch, so that
# the Sender closing one batch does not wait for a caller compressing another.
_BYTES_LOCKS = tuple(threading.Lock() for _ in range(64))


def _bytes_lock(batch: object) -> threading.Lock:
    return _BYTES_LOCKS[(id(batch) >> 4) & 63]


class BatchState(enum.Enum):
    """Where a batch is in its life; the last three are final (Java's ``ProducerBatch.FinalState``)."""

    OPEN = "OPEN"
    CLOSED = "CLOSED"
    IN_FLIGHT = "IN_FLIGHT"
    RETRY = "RETRY"
    ABORTED = "ABORTED"
    FAILED = "FAILED"
    SUCCEEDED = "SUCCEEDED"

    # Members are singletons compared by identity, so identity's hash (in C) serves; Enum's own
    # ``__hash__`` is a Python call, and every state change looks states up in sets (_NEXT,
    # _FINAL_STATES) several times per batch.
    __hash__ = object.__hash__


#: Java's name for the final states: ``batch.final_state`` is one of its last three members or None.
FinalState = BatchState

_S = BatchState
# The states a batch passes through on every send, as module globals: a member read through the
# Enum class is a lookup through its metaclass that the interpreter does not specialise, several
# times the cost of a global, and each batch makes four such moves.
_OPEN, _CLOSED, _IN_FLIGHT, _SUCCEEDED, _FAILED = _S.OPEN, _S.CLOSED, _S.IN_FLIGHT, _S.SUCCEEDED, _S.FAILED
_FINAL_STATES = frozenset({_S.ABORTED, _S.FAILED, _S.SUCCEEDED})
#: The moves ``_transition`` makes; any other is refused, leaving the state as it is. A final
#: state is never left, OPEN is never re-entered (nothing is appended to a closed batch), and
#: a batch is closed before it is drained.
_NEXT: dict[BatchState, frozenset[BatchState]] = {
    _S.OPEN: frozenset({_S.CLOSED}) | _FINAL_STATES,
    _S.CLOSED: frozenset({_S.IN_FLIGHT, _S.RETRY}) | _FINAL_STATES,
    _S.IN_FLIGHT: frozenset({_S.IN_FLIGHT, _S.RETRY}) | _FINAL_STATES,
    _S.RETRY: frozenset({_S.IN_FLIGHT, _S.RETRY}) | _FINAL_STATES,
    _S.ABORTED: frozenset(),
    _S.FAILED: frozenset(),
    _S.SUCCEEDED: frozenset(),
}


class BulkSink(Protocol):
    """Who learns the outcome of a range of bulk-appended records (``kproducer.bulk.BulkFuture``)."""

    def appended(self, count: int) -> None: ...

    def range_done(self, rng: BulkRange, result: ProduceRequestResult, futures: list[RecordFuture] | None) -> None: ...


class BulkRange:
    """``count`` records appended in one bulk call, at relative offsets ``first..first+count`` of a batch.

    Stands in for ``count`` callbacks so that a bulk append makes no Python object
    per record; ``rows`` are the caller's row numbers (a range or int64 indices).
    """

    __slots__ = ("first", "count", "sink", "rows", "callback", "timestamp")

    def __init__(
        self,
        first: int,
        count: int,
        sink: BulkSink,
        rows: range | memoryview,
        callback: DeliveryCallback | None,
        timestamp: int,
    ) -> None:
        self.first = first
        self.count = count
        self.sink = sink
        self.rows = rows
        self.callback = callback
        self.timestamp = timestamp


def _byte_size(data: Any) -> int:
    if data is None:
        return -1
    if isinstance(data, memoryview):
        return data.nbytes
    return len(data)


def record_error_fn(top_level: BaseException, record_exceptions: RecordExceptions | None) -> ErrorFn:
    """Per-record exception lookup for a failed batch (Java Sender.failBatch's recordExceptions).

    ``record_exceptions`` may be a function of the batch index, a mapping
    index → exception, or the produce response's ``(batch_index, message)``
    record errors: a single record error keeps the partition error's type, several
    become INVALID_RECORD, and the other records of the batch fail with a
    KafkaError saying their batch held invalid records.
    """
    if record_exceptions is None:
        return lambda _i: top_level
    if callable(record_exceptions):
        fn = record_exceptions
        return lambda i: fn(i) or top_level
    if isinstance(record_exceptions, Mapping):
        mapping = record_exceptions
        return lambda i: mapping.get(i, top_level)
    errors = list(record_exceptions)
    if not errors:
        return lambda _i: top_level
    by_index: dict[int, BaseException] = {}
    for entry in errors:
        index, message = entry[0], entry[1]
        if isinstance(message, BaseException):
            by_index[index] = message
            continue
        text = message or (top_level.message if isinstance(top_level, KafkaError) else str(top_level))
        if len(errors) == 1 and isinstance(top_level, KafkaError):
            by_index[index] = type(top_level)(text, topic=top_level.topic, partition=top_level.partition)
        elif isinstance(top_level, KafkaError):
            by_index[index] = InvalidRecordError(text, topic=top_level.topic, partition=top_level.partition)
        else:
            by_index[index] = InvalidRecordError(text)
    other = KafkaError(
        "Failed to append record because it was part of a batch which had one or more invalid records",
        topic=getattr(top_level, "topic", None),
        partition=getattr(top_level, "partition", None),
    )
    return lambda i: by_index.get(i, other)


class PyProducerBatchCore:
    """The batch's fields the C send lane appends through; the Python twin of the C type.

    ``kproducer._speedups.ProducerBatchCore`` declares the same fields, and its own C function
    takes a record for the lane (as :meth:`ProducerBatch.try_append` does, through its builder's
    function); :class:`ProducerBatch` builds on whichever runs and sets the fields itself.
    """

    __slots__ = (
        "builder",
        "last_append_ms",
        "record_count",
        "thunks",
        "result",
        "_writable",
        "pinned",
        "ready_size",
    )


if TYPE_CHECKING:
    ProducerBatchCore = PyProducerBatchCore
else:
    ProducerBatchCore = c.ProducerBatchCore if c is not None else PyProducerBatchCore


class ProducerBatch(ProducerBatchCore):
    """The records for one partition sent in one produce request (Java's ``ProducerBatch``).

    Appends happen on caller threads under the partition deque's lock; the
    Sender thread drains, closes and completes it. ``buffer`` is the pool buffer
    the builder writes into; ``capacity`` (``initial_capacity`` plus what the
    batch grew by, KIP-782) is what it is charged in ``buffer.memory`` and gives
    back to the pool. ``ready_size`` is ``batch.size`` (a multiple of it for a batch opened while
    the linger is stretched: accumulator/adaptive_linger.py): a batch that reached it is
    sendable, even though it may keep taking records up to its (grown) limit until
    the Sender drains it.
    """

    __slots__ = (
        "topic_partition",
        "created_ms",
        "last_attempt_ms",
        "drained_ms",
        "attempts",
        "is_split_batch",
        "buffer",
        "initial_capacity",
        "grown",
        "deallocated",
        "retry_backoff_ms",
        "_state",
        "_reopened",
        "growth_node",
        "staging_recycler",
    )

    def __init__(
        self,
        topic_partition: TopicPartition,
        builder: MemoryRecordsBuilder,
        created_ms: int,
        *,
        buffer: bytearray | None = None,
        is_split_batch: bool = False,
    ) -> None:
        self.topic_partition = topic_partition
        self.builder = builder
        self.created_ms = created_ms
        self.last_append_ms = created_ms
        self.last_attempt_ms = created_ms
        self.drained_ms = 0
        self.attempts = 0
        self.record_count = 0
        # Made with the first record that has a callback: a batch of records without one (futures
        # only, or keyed traffic spread over many partitions) allocates no list for them.
        # Flat: callback, future, callback, future, ... with BulkRange, None for a bulk range.
        self.thunks: list[Any] | None = None
        self.result = ProduceRequestResult(topic_partition)
        self.is_split_batch = is_split_batch
        self.buffer = buffer
        self.initial_capacity = len(buffer) if buffer is not None else 0
        self.grown = 0
        self.ready_size = self.initial_capacity or builder.write_limit
        self.deallocated = False
        # Set by the accumulator on reenqueue: this retry's backoff (exponential, with jitter, drawn once).
        self.retry_backoff_ms = 0
        self._state = _OPEN
        # ``_state is OPEN``, kept by _transition: read per append, here and by the C send lane.
        self._writable = True
        self._reopened = False
        # True once a record that must stay on this partition is in the batch: a keyed record,
        # one sent to an explicit partition, or a split part of a batch already sent. Only a
        # batch of keyless records the built-in partitioner placed may move to another partition.
        self.pinned = is_split_batch
        # The leader node whose in-flight growth budget this batch's bytes past batch.size are
        # charged to while it is in flight (-1: not charged); see RecordAccumulator._drain_node.
        self.growth_node = -1
        # Compressed batches: where the staging buffer goes once the records are compressed and
        # moved into ``buffer`` (the accumulator's recycler, see _leave_staging); None otherwise.
        self.staging_recycler: Callable[[bytearray], None] | None = None

    @property
    def tp(self) -> TopicPartition:
        return self.topic_partition

    def move_to(self, topic_partition: TopicPartition) -> None:
        """Point a never-sent batch at another partition of its topic (its futures follow).

        Nothing in a record batch's bytes names its partition (the produce request
        does), so moving is only this. The caller checks :attr:`movable` first.
        """
        if topic_partition.topic != self.topic_partition.topic:
            raise IllegalStateError(f"a batch of {self.topic_partition} cannot move to another topic's {topic_partition}")
        self.topic_partition = topic_partition
        self.result.topic_partition = topic_partition

    @property
    def movable(self) -> bool:
        """Never drained, no sequence, not done, and only keyless records the built-in partitioner placed."""
        return (
            not self.pinned and self.attempts == 0 and self.base_sequence == NO_SEQUENCE and self._state not in _FINAL_STATES
        )

    # ------------------------------------------------------------------ appending
    def try_append(
        self,
        timestamp: int,
        key: bytes | bytearray | memoryview | None,
        value: bytes | bytearray | memoryview | None,
        headers: Sequence[tuple[str, bytes | bytearray | memoryview | None]] | None,
        callback: DeliveryCallback | None,
        now_ms: int,
    ) -> RecordFuture | None:
        """Append one record; None when it does not fit (the accumulator then opens a new batch)."""
        if not self._writable or not self.builder.try_append(timestamp, key, value, headers):
            return None
        self.last_append_ms = now_ms
        future = RecordFuture(self.result, self.record_count, timestamp, _byte_size(key), _byte_size(value))
        if callback is not None:
            # Only callbacks need the batch to hold the future; a caller's future finds its
            # outcome through the batch's result, and follows a split through ``result.moved``.
            self._keep(callback, future)
        self.record_count += 1
        return future

    def try_append_many(
        self,
        timestamp: int,
        values: Any,
        keys: Any,
        indices: bytes | None,
        start: int,
        end: int,
        encoded_headers: bytes | None,
        arrow: bool,
        sink: BulkSink,
        callback: DeliveryCallback | None,
        now_ms: int,
    ) -> int:
        """Append records ``start..end`` while they fit, as one :class:`BulkRange`; returns how many."""
        if not self._writable:
            return 0
        count = self.builder.append_many(timestamp, values, keys, indices, start, end, encoded_headers, arrow=arrow)
        if count:
            if indices is None:
                rows: range | memoryview = range(start, start + count)
            else:
                rows = memoryview(indices).cast("B").cast("q")[start : start + count]
            self._keep(BulkRange(self.record_count, count, sink, rows, callback, timestamp), None)
            sink.appended(count)
            self.record_count += count
            self.last_append_ms = now_ms
        return count

    def _callbacks_by_index(self) -> dict[int, tuple[DeliveryCallback, RecordFuture]]:
        """Each record's (callback, future) by relative offset in this batch; bulk sinks are told to follow their records.

        Split needs this: the records move to new batches and their callbacks go with them.
        """
        out: dict[int, tuple[DeliveryCallback, RecordFuture]] = {}
        result = self.result
        pairs = iter(self.thunks or ())
        for entry, future in zip(pairs, pairs, strict=False):
            if future is None:
                rng: BulkRange = entry
                futures = [RecordFuture(result, rng.first + j, rng.timestamp, -1, -1) for j in range(rng.count)]
                rng.sink.range_done(rng, result, futures)
                if rng.callback is not None:
                    for_row = getattr(rng.callback, "for_row", None)  # per-row delivery reports
                    for j, f in enumerate(futures):
                        cb = rng.callback if for_row is None else for_row(int(rng.rows[j]))
                        out[f.relative_offset] = (cb, f)
                continue
            fut: RecordFuture = future
            while fut.batch_result is not result:  # a record already moved once: find it in this batch
                nxt = fut.chained
                if nxt is None:
                    raise IllegalStateError(f"a callback's future does not lead to {self.topic_partition}'s batch")
                fut = nxt
            out[fut.relative_offset] = (entry, future)
        return out

    def _try_append_for_split(
        self,
        timestamp: int,
        key: bytes | bytearray | memoryview | None,
        value: bytes | bytearray | memoryview | None,
        headers: Sequence[tuple[str, bytes | bytearray | memoryview | None]] | None,
        thunk: tuple[DeliveryCallback, RecordFuture] | None,
    ) -> bool:
        """Move one record of a split batch here (with its callback and future, if it has a callback)."""
        if not self.builder.has_room_for(timestamp, key, value, headers):
            return False
        self.builder.append(timestamp, key, value, headers)
        if thunk is not None:
            self._keep(thunk[0], thunk[1])
        self.record_count += 1
        return True

    def _keep(self, entry: DeliveryCallback | BulkRange, future: RecordFuture | None) -> None:
        """Keep a record's callback and future (or a bulk range and None) in append order, making the list on the first one."""
        thunks = self.thunks
        if thunks is None:
            self.thunks = [entry, future]
        else:
            thunks.append(entry)
            thunks.append(future)

    # ------------------------------------------------------------------ state
    def _transition(self, to: BatchState) -> BatchState:
        """Move to ``to`` if :data:`_NEXT` allows it; returns the state before, whether or not it moved.

        Every lifecycle change goes through here, under one lock: a caller closing a full batch,
        the Sender and a closing producer may change the same batch, and with one state field a
        move made without the lock could overwrite a final state another thread had just set.
        """
        _state_lock.acquire()  # not ``with`` (docs/architecture.md, "Locks on the record path")
        try:
            current = self._state
            if to in _NEXT[current]:
                self._state = to
                self._writable = False  # ``to`` is never OPEN
        finally:
            _state_lock.release()
        return current

    @property
    def state(self) -> BatchState:
        return self._state

    @property
    def final_state(self) -> FinalState | None:
        state = self._state
        return state if state in _FINAL_STATES else None

    @property
    def is_done(self) -> bool:
        return self._state in _FINAL_STATES

    # ------------------------------------------------------------------ completion

    def done(
        self,
        base_offset: int,
        log_append_time: int,
        exception: BaseException | None,
        record_exceptions: RecordExceptions | None = None,
    ) -> bool:
        """Complete the batch: True when this call set the final state (Java's ``ProducerBatch.done()``).

        A second call after success raises IllegalStateError (an acknowledged batch
        must never be reported failed); after a failure or abort it is logged and
        ignored, which happens when an expired in-flight batch gets its response.
        """
        try_state = _SUCCEEDED if exception is None else _FAILED
        current = self._transition(try_state)
        if current not in _FINAL_STATES:
            error_fn = None if exception is None else record_error_fn(exception, record_exceptions)
            self._complete_future_and_fire_callbacks(base_offset, log_append_time, error_fn)
            return True
        if current is _SUCCEEDED:
            raise IllegalStateError(
                f"A SUCCEEDED batch for {self.topic_partition} must not attempt another state change to {try_state.value}"
            )
        log.debug(
            "ignored state transition %s -> %s for %s batch with base offset %d",
            current.value,
            try_state.value,
            self.topic_partition,
            base_offset,
        )
        return False

    def abort(self, exception: BaseException) -> None:
        """Fail every record with ``exception`` without a response (close, fatal error)."""
        current = self._transition(BatchState.ABORTED)
        if current in _FINAL_STATES:
            raise IllegalStateError(f"Batch for {self.topic_partition} has already been completed in final state {current.value}")
        self._complete_future_and_fire_callbacks(NO_OFFSET, NO_TIMESTAMP, lambda _i: exception)

    def _complete_future_and_fire_callbacks(self, base_offset: int, log_append_time: int, error_fn: ErrorFn | None) -> None:
        """Set the result, run each callback in append order (one failing never stops the rest), open the latch."""
        self.result.set(base_offset, log_append_time, error_fn)
        tp = self.topic_partition
        pairs = iter(self.thunks or ())
        for callback, future in zip(pairs, pairs, strict=False):
            if future is None:
                rng: BulkRange = callback
                if rng.callback is not None:
                    self._fire_range(rng, base_offset, log_append_time, error_fn)
                rng.sink.range_done(rng, self.result, None)
                continue
            if callback is None:
                continue
            try:
                if error_fn is None:
                    callback(future.value(), None)
                else:
                    callback(None, future.record_error())
            except Exception as e:
                callback_raised(e, tp)
        self.result.done()

    def _fire_range(self, rng: BulkRange, base_offset: int, log_append_time: int, error_fn: ErrorFn | None) -> None:
        """Per-record callbacks of a bulk range, in order (key/value sizes are not tracked: -1)."""
        tp = self.topic_partition
        callback = rng.callback
        assert callback is not None
        timestamp = log_append_time if log_append_time != NO_TIMESTAMP else rng.timestamp
        md_type = metadata_type(log_append_time)
        for_row = getattr(callback, "for_row", None)  # confluent-style reports need each row's key and value
        rows = rng.rows
        for j in range(rng.count):
            rel = rng.first + j
            cb = callback if for_row is None else for_row(int(rows[j]))
            try:
                if error_fn is None:
                    offset = NO_OFFSET if base_offset == NO_OFFSET else base_offset + rel
                    cb(md_type(tp.topic, tp.partition, offset, timestamp, -1, -1), None)
                else:
                    cb(None, error_fn(rel))
            except Exception as e:
                callback_raised(e, tp)

    # ------------------------------------------------------------------ split (MESSAGE_TOO_LARGE)
    def split(
        self,
        split_batch_size: int,
        builder_factory: Callable[[bytearray], MemoryRecordsBuilder] | None = None,
    ) -> list[ProducerBatch]:
        """Re-read the records into new batches of at most ``split_batch_size`` bytes each.

        The old result records where each record went (``result.moved``), so every
        future, held by a caller or not, follows its record; callback thunks move with
        their records, so callbacks still fire once and in order. The old batch's
        result then completes with RECORD_LIST_TOO_LARGE and the old batch is marked
        failed so it can never fire again. New batches are allocated off the pool
        (``is_split_batch``).
        """
        from kproducer.record.reader import read_batches

        self.close()
        data = self.builder.buffer()
        records: list[Any] = []
        for record_batch in read_batches(data):
            records.extend(record_batch.records())
        if not records:
            raise IllegalStateError("Cannot split an empty producer batch.")
        if len(records) != self.record_count:
            raise IllegalStateError(
                f"batch for {self.topic_partition} holds {len(records)} records but counted {self.record_count}"
            )
        callbacks = self._callbacks_by_index()
        magic = self.builder.magic
        compression = self.builder.compression

        def new_batch(rec: Any) -> ProducerBatch:
            size = max(estimate_size_upper_bound(magic, compression, rec.key, rec.value, rec.headers), split_batch_size)
            buf = bytearray(size)
            if builder_factory is not None:
                builder = builder_factory(buf)
            else:
                builder = MemoryRecordsBuilder(buf, magic=magic, compression=compression, write_limit=size)
            return ProducerBatch(self.topic_partition, builder, self.created_ms, buffer=buf, is_split_batch=True)

        batches: list[ProducerBatch] = []
        batch: ProducerBatch | None = None
        moved: list[tuple[ProduceRequestResult, int]] = []
        for index, rec in enumerate(records):
            thunk = callbacks.get(index)
            headers = list(rec.headers) if rec.headers else None
            if batch is None:
                batch = new_batch(rec)
            if not batch._try_append_for_split(rec.timestamp, rec.key, rec.value, headers, thunk):
                batch.close_for_record_appends()
                batches.append(batch)
                batch = new_batch(rec)
                batch._try_append_for_split(rec.timestamp, rec.key, rec.value, headers, thunk)
            moved.append((batch.result, batch.record_count - 1))
        if batch is not None:
            batch.close_for_record_appends()
            batches.append(batch)

        too_large = RecordListTooLargeError(
            f"batch of {self.record_count} records split into {len(batches)} batches",
            topic=self.topic_partition.topic,
            partition=self.topic_partition.partition,
        )
        self._transition(BatchState.FAILED)
        self.thunks = None
        self.result.moved = moved  # before done(): whoever wakes up finds where the records went
        self.result.set(NO_OFFSET, NO_TIMESTAMP, lambda _i: too_large)
        self.result.done()

        if self.has_sequence():
            sequence = self.base_sequence
            for nb in batches:
                nb.set_producer_state(self.producer_id, self.producer_epoch, sequence, self.is_transactional)
                sequence += nb.record_count
        return batches

    # ------------------------------------------------------------------ lifecycle
    def close_for_record_appends(self) -> None:
        """No more appends; the bytes stay open until ``seal()`` or ``close()``."""
        if self._writable:
            self._transition(_CLOSED)

    def seal(self) -> None:
        """Compress the records of a batch closed for appends, ahead of ``close()`` at drain.

        The Sender does it for full batches that must wait (Java compresses as records
        are appended), so a queue of them holds compressed bytes, not records.
        """
        # A worker's job is waited for before the lock, so that the lock is never held while
        # this thread lets go of the GIL (the Sender's close() of another batch could need it).
        self.builder.wait_for_compression()
        with _bytes_lock(self):
            if not self._writable and not self.builder.is_closed:
                if self.staging_recycler is None:
                    self.builder.close_for_record_appends(self.capacity or None)
                else:
                    self.builder.close_for_record_appends(None)
                    self._leave_staging()

    def start_compression(self, worker: CompressionWorker) -> bool:
        """Hand a batch closed for appends to the compression worker (False: compress it in Python)."""
        with _bytes_lock(self):
            return not self._writable and self.builder.start_compression(worker)

    def compression_running(self) -> bool:
        """The worker has not finished this batch (asks for no wakeup; see compression_pending)."""
        return self.builder.compression_running()

    def compression_pending(self) -> bool:
        """The worker is still compressing this batch: not drainable yet (it wakes the Sender when done)."""
        return self.builder.compression_pending()

    def abort_record_appends(self) -> None:
        self.close_for_record_appends()

    def close(self) -> None:
        """Finish the batch bytes (compression, header, CRC): done once, when drained."""
        self.close_for_record_appends()
        builder = self.builder
        if builder.is_closed:
            return
        builder.wait_for_compression()  # outside the lock, as in seal()
        lock = _bytes_lock(self)
        lock.acquire()  # not ``with`` (docs/architecture.md, "Locks on the record path")
        try:
            if self.staging_recycler is None:
                builder.close(self.capacity or None)
            else:
                builder.close(None)
                self._leave_staging()
        finally:
            lock.release()

    def _leave_staging(self) -> None:
        """Move a compressed batch's bytes out of its staging buffer into ``buffer``, and recycle the staging.

        A compressed batch stages its records uncompressed, up to hundreds of KiB, then
        holds a few KiB once compressed. Trimming the staging buffer gave its memory back
        to the allocator, and the next batch's staging took it again page by page: for 1 KB
        records and lz4, one page fault per 4 KiB of records, half the appending thread's
        time (benchmarks/RESULTS.md, "Staging buffers"). So the compressed bytes are copied into
        the batch's pool buffer (``buffer``, the memory ``buffer.memory`` charged) and the
        staging buffer goes back to the accumulator for the next compressed batch.
        """
        builder = self.builder
        staging = builder.buffer_object
        final = self.buffer
        if final is None:
            return
        if staging is final:
            if len(staging) <= self.initial_capacity:
                return  # it never outgrew its pool buffer: nothing to move
            if len(staging) < MIN_RECYCLED_BYTES:
                # Too small to keep for another batch: it stays this batch's buffer, cut back
                # (its allocation stays charged until the batch completes). Moving the bytes to a
                # fresh buffer cost one more allocation a batch, and the freed staging became a
                # hole between longer-lived buffers that the C allocator kept (benchmarks/RESULTS.md,
                # "buffer.memory with compression over many partitions").
                builder.cut_back(self.initial_capacity)
                return
            final = bytearray(self.initial_capacity)
        builder.move_to(final)
        self.buffer = final
        recycler = self.staging_recycler
        if recycler is not None:
            recycler(staging)

    @property
    def is_closed(self) -> bool:
        return self.builder.is_closed

    @property
    def is_writable(self) -> bool:
        return self._writable

    def records_buffer(self) -> memoryview:
        """The finished batch bytes (closes the builder if needed)."""
        return self.builder.buffer()

    @property
    def capacity(self) -> int:
        """Bytes of ``buffer.memory`` this batch holds: its pool buffer and what it grew by."""
        return self.initial_capacity + self.grown

    def is_full(self) -> bool:
        """Closed for appends, out of room, or at ``batch.size``: sendable (it may still grow until drained)."""
        builder = self.builder
        return not self._writable or builder.is_full() or builder.estimated_size_in_bytes() >= self.ready_size

    def estimated_size_in_bytes(self) -> int:
        return self.builder.estimated_size_in_bytes()

    def compression_rate(self) -> float:
        return self.builder.compression_rate

    @property
    def magic(self) -> int:
        return self.builder.magic

    # ------------------------------------------------------------------ timing
    def reenqueued(self, now_ms: int) -> None:
        """Back in the deque for a retry: counts an attempt and restarts the backoff clock."""
        self.attempts += 1
        self.last_attempt_ms = max(self.last_append_ms, now_ms)
        self.last_append_ms = max(self.last_append_ms, now_ms)
        self._transition(BatchState.RETRY)

    def drained(self, now_ms: int) -> None:
        self.drained_ms = max(self.drained_ms, now_ms)
        self._transition(_IN_FLIGHT)

    def queue_time_ms(self) -> int:
        return self.drained_ms - self.created_ms

    def waited_time_ms(self, now_ms: int) -> int:
        """Time since creation or since the last retry: compared with linger.ms / the backoff."""
        return max(0, now_ms - self.last_attempt_ms)

    def has_reached_delivery_timeout(self, delivery_timeout_ms: int, now_ms: int) -> bool:
        return delivery_timeout_ms <= now_ms - self.created_ms

    def in_retry(self) -> bool:
        """Ever put back for a retry (Java's ``inRetry()``)."""
        return self.attempts > 0

    # ------------------------------------------------------------------ producer state (idempotence)
    @property
    def producer_id(self) -> int:
        return self.builder.producer_id

    @property
    def producer_epoch(self) -> int:
        return self.builder.producer_epoch

    @property
    def base_sequence(self) -> int:
        return self.builder.base_sequence

    @property
    def is_transactional(self) -> bool:
        return self.builder.is_transactional

    def has_sequence(self) -> bool:
        return self.builder.base_sequence != NO_SEQUENCE

    def last_sequence(self) -> int:
        return self.base_sequence + self.record_count - 1 if self.has_sequence() else NO_SEQUENCE

    def set_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int, is_transactional: bool) -> None:
        """Assign producer id, epoch and base sequence (before or after close: the header is patched)."""
        self.builder.rewrite_producer_state(producer_id, producer_epoch, base_sequence, is_transactional)

    def reset_producer_state(self, producer_id: int, producer_epoch: int, base_sequence: int) -> None:
        """New producer id/epoch or sequence for a queued or retried batch (Java's resetProducerState)."""
        self._reopened = True
        self.builder.rewrite_producer_state(producer_id, producer_epoch, base_sequence, self.is_transactional)

    def sequence_has_been_reset(self) -> bool:
        return self._reopened

    def __repr__(self) -> str:
        state = self._state.value if self._state in _FINAL_STATES else "open" if self._writable else "closed"
        return (
            f"ProducerBatch({self.topic_partition}, records={self.record_count}, "
            f"created_ms={self.created_ms}, attempts={self.attempts}, {state})"
        )
