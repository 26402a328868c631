"""Records waiting for their topic's metadata: what the routing step keeps of each, and the memory they hold.

A record sent to a topic without metadata (or to an explicit partition beyond the known count)
is *parked* by :class:`kproducer.router.RecordRouter`: serialized, charged to ``buffer.memory``
and queued in its topic's FIFO until the Sender finds the metadata and appends it in send
order. These are the values of that queue: one parked record, the rows of one parked bulk
call, a topic's queue, the placeholder future the caller holds meanwhile, and the parked
bytes spent first on the batches they are appended to.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kproducer.accumulator.futures import NO_TIMESTAMP, ProduceRequestResult, RecordFuture
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
        future: RecordFuture,
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
        self.future = future
        self.charge = charge
        self.deadline_ms = deadline_ms
        self.held = charge


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

    __slots__ = ("inner", "appended")

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.appended = 0

    def _appended(self, count: int) -> None:
        self.appended += count
        self.inner._appended(count)

    def _range_done(self, rng: Any, result: Any, futures: Any) -> None:
        self.inner._range_done(rng, result, futures)


class TopicQueue:
    """A topic's parked records in send order.

    ``whole``: the topic had no metadata, so every record sent to it parks behind
    these. Otherwise only explicit partitions beyond the known count are parked
    (``highest`` is the largest); records for existing partitions go straight on.
    """

    __slots__ = ("fifo", "whole", "highest", "refreshes", "refresh_at_ms")

    def __init__(self, whole: bool) -> None:
        self.fifo: deque[ParkedRecord | ParkedBulk] = deque()
        self.whole = whole
        self.highest = -1
        self.refreshes = 0
        self.refresh_at_ms = 0


def placeholder_future(topic: str) -> RecordFuture:
    """The future a parked record's caller gets; it follows the record into its batch once appended."""
    return RecordFuture(ProduceRequestResult(TopicPartition(topic, UNKNOWN_PARTITION)), 0, NO_TIMESTAMP, -1, -1)


def parked_record_count(entry: ParkedRecord | ParkedBulk) -> int:
    return 1 if entry.__class__ is ParkedRecord else entry.n  # type: ignore[union-attr]
