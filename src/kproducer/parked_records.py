"""Records waiting for their topic's metadata: what the routing step keeps of each, and the memory they hold.

A record sent to a topic without metadata (or to an explicit partition beyond the known count)
is *parked* by :class:`kproducer.router.RecordRouter`: serialized, charged to ``buffer.memory``
and queued in its topic's FIFO until the Sender finds the metadata and appends it in send
order. These are the values of that queue: one parked record, the rows of one parked bulk
call, a topic's queue, the placeholder result the caller's future follows meanwhile, and the
parked bytes spent first on the batches they are appended to.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kproducer.accumulator.futures import NO_OFFSET, NO_TIMESTAMP, ProduceRequestResult, RecordFuture
from kproducer.structs import TopicPartition

if TYPE_CHECKING:
    from kproducer.accumulator import BufferPool

#: A delivery callback as send() takes it: ``(metadata, error)`` or confluent-kafka's ``(err, msg)``.
DeliveryCallback = Callable[[Any, Any], Any]

#: The partition of a record whose partition is not chosen yet.
UNKNOWN_PARTITION = -1


class ChargedMemory:
    """Memory already charged to the BufferPool by parked records, spent first on the batches they need.

    The Sender appends parked records and must never block: beyond the charge it
    takes from the pool only what is free now (``BufferExhaustedError`` otherwise).
    """

    __slots__ = ("pool", "bytes")

    def __init__(self, pool: BufferPool) -> None:
        self.pool = pool
        self.bytes = 0

    def allocate(self, size: int, max_time_to_block_ms: int) -> bytearray:
        if self.bytes >= size:
            self.bytes -= size
            return bytearray(size)
        if self.bytes:
            # The charge covers part of the buffer: only the rest comes from the pool, now or not at all.
            self.pool.reserve(size - self.bytes, 0)
            self.bytes = 0
            return bytearray(size)
        return self.pool.allocate(size, 0)

    def deallocate(self, buffer: bytearray, size: int | None = None) -> None:
        self.bytes += len(buffer) if size is None else size


class ParkedRecord:
    """One record waiting for its topic's metadata (serialized; its bytes charged to buffer.memory)."""

    __slots__ = (
        "partition", "key", "value", "key_bytes", "value_bytes", "timestamp", "headers", "on_delivery",
        "future", "charge", "deadline_ms", "held",
    )  # fmt: skip

    def __init__(
        self,
        partition: int | None,
        key: Any,
        value: Any,
        key_bytes: Any,
        value_bytes: Any,
        timestamp: int,
        headers: Any,
        on_delivery: DeliveryCallback | None,
        charge: int,
        deadline_ms: int,
    ) -> None:
        self.partition = partition
        self.key = key
        self.value = value
        self.key_bytes = key_bytes
        self.value_bytes = value_bytes
        self.timestamp = timestamp
        self.headers = headers
        self.on_delivery = on_delivery
        # Given when the record joins its topic's queue: a placeholder's future (ParkedResult).
        self.future: RecordFuture = None  # type: ignore[assignment]
        self.charge = charge
        self.deadline_ms = deadline_ms
        self.held = charge


# Joins and resolutions of every placeholder: a record joins under the router's lock, but one
# can fail outside it (its callback must not run under that lock), so the count has its own.
_PLACEHOLDER_LOCK = threading.Lock()


class ParkedResult(ProduceRequestResult):
    """The placeholder result of up to ``SHARE`` consecutive parked records of one topic.

    A parked record's future points here (partition -1, its index as relative
    offset) until the record is appended: then the future follows the record's real
    batch (``_next``), or its error is kept here by index. The result completes once
    every record that joined it is resolved, and it takes no record after the first
    is resolved, so it never completes with a record still parked. Sharing it keeps
    a burst of sends to a new topic from making a result, a partition and a waiter
    list per record: those all survive until the metadata comes, and every one of
    them is a tracked object the cyclic garbage collector walks meanwhile.
    """

    __slots__ = ("joined", "outstanding", "closed", "errors")

    SHARE = 256

    def __init__(self, topic: str) -> None:
        super().__init__(TopicPartition(topic, UNKNOWN_PARTITION))
        self.joined = 0
        self.outstanding = 0
        self.closed = False
        self.errors: dict[int, BaseException] | None = None

    def join(self) -> RecordFuture | None:
        """The future of one more parked record, or None when this result takes no more."""
        with _PLACEHOLDER_LOCK:
            if self.closed or self.joined >= self.SHARE:
                return None
            index = self.joined
            self.joined += 1
            self.outstanding += 1
        return RecordFuture(self, index, NO_TIMESTAMP, -1, -1)

    def resolve(self, index: int, error: BaseException | None = None) -> None:
        """Record ``index`` was appended (its future already follows its batch) or failed with ``error``."""
        with _PLACEHOLDER_LOCK:
            self.closed = True
            if error is not None:
                if self.errors is None:
                    self.errors = {}
                    self.set(NO_OFFSET, NO_TIMESTAMP, self.errors.get)
                self.errors[index] = error
            self.outstanding -= 1
            last = self.outstanding == 0
        if last:
            self.done()


def resolve_parked(future: RecordFuture, error: BaseException | None = None) -> None:
    """A parked record left its queue: appended (its ``_next`` already set) or failed with ``error``."""
    result = future.batch_result
    assert isinstance(result, ParkedResult)
    result.resolve(future.relative_offset, error)


class ParkedBulk:
    """The rows of one bulk call (or one Arrow chunk of it) waiting for their topic's metadata."""

    __slots__ = (
        "partition", "n", "values", "keys", "arrow", "timestamp", "headers", "on_delivery", "sink",
        "record_bound", "charge", "deadline_ms", "future", "held",
    )  # fmt: skip

    def __init__(
        self,
        partition: int | None,
        n: int,
        values: Any,
        keys: Any,
        arrow: bool,
        timestamp: int,
        headers: bytes | None,
        on_delivery: DeliveryCallback | None,
        sink: Any,
        record_bound: int,
        charge: int,
        deadline_ms: int,
        future: Any,
    ) -> None:
        self.partition = partition
        self.n = n
        self.values = values
        self.keys = keys
        self.arrow = arrow
        self.timestamp = timestamp
        self.headers = headers
        self.on_delivery = on_delivery
        self.sink = sink
        self.record_bound = record_bound
        self.charge = charge
        self.deadline_ms = deadline_ms
        self.future = future
        self.held = charge


class CountingSink:
    """A parked bulk chunk's sink: forwards to the call's, and counts the rows appended so far."""

    __slots__ = ("inner", "appended_count")

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.appended_count = 0

    def appended(self, count: int) -> None:
        self.appended_count += count
        self.inner.appended(count)

    def range_done(self, rng: Any, result: Any, futures: Any) -> None:
        self.inner.range_done(rng, result, futures)


class TopicQueue:
    """A topic's parked records in send order.

    ``whole``: every record sent to the topic parks behind these, because the topic
    had no metadata or because records that fit are still parked (the Sender appends
    them a chunk at a time, and waits when memory runs out). Otherwise only explicit
    partitions beyond the known count are parked (``highest`` is the largest);
    records for existing partitions go straight on.
    """

    __slots__ = ("fifo", "whole", "highest", "refreshes", "refresh_at_ms", "placeholder")

    def __init__(self, whole: bool) -> None:
        self.fifo: deque[ParkedRecord | ParkedBulk] = deque()
        self.whole = whole
        self.highest = -1
        self.refreshes = 0
        self.refresh_at_ms = 0
        self.placeholder: ParkedResult | None = None  # the one new parked records join

    def park_future(self, topic: str) -> RecordFuture:
        """The future of a record joining this queue: on the current placeholder while it takes records."""
        placeholder = self.placeholder
        future = placeholder.join() if placeholder is not None else None
        if future is None:
            placeholder = self.placeholder = ParkedResult(topic)
            future = placeholder.join()
            assert future is not None
        return future


def parked_record_count(entry: ParkedRecord | ParkedBulk) -> int:
    return 1 if entry.__class__ is ParkedRecord else entry.n  # type: ignore[union-attr]
