"""The routing step every send goes through: topic metadata, size check, partition choice, append.

``Producer.send``, ``send_batch``, ``send_arrow`` (and the C send lane, its fast
path for registered topics) all reach :class:`RecordRouter`. Its steps, in
order: the size check, the topic's metadata, the partition choice
(``partitioner.class`` → KIP-794's sticky partitioner → the circuit breaker),
then one accumulator append that takes a single record or a bulk range.

No caller waits for metadata. A record whose topic has no metadata yet (or whose
explicit partition is beyond the known count) is *parked*: charged to
``buffer.memory``, queued in a per-topic FIFO, and its topic joins the next
Metadata request (KIP-526's urgent set; every topic parked at the same time
shares that one request). The Sender thread calls :meth:`RecordRouter.release`
once per loop: a topic whose metadata arrived has its parked records partitioned
and appended in the order they were sent, before any record sent to it later
(while a topic has parked records, later sends to it park behind them). A parked
record still without metadata after ``max.block.ms`` fails through its future and
callback with the error a blocking send would have raised. The references are
librdkafka's "unassigned partition" queue and franz-go's buffering of records for
unknown topics; Java's blocking ``send()`` is KAFKA-3539.

A caller still blocks for memory: parking charges the record to the BufferPool
first, which waits up to ``max.block.ms`` when the buffer is full.

The values of the parked-record queue are ``kproducer.parked_records``. Why the rest is
one module of nearly 900 lines: the routing step and the parked records are one piece
of state. Both keep one per-topic order (a record for a topic with
parked records parks behind them, or the caller appends them first), under one
lock, and ``route()`` reads the parked-topic map inline on every send, so that the
common case (nothing parked) costs one dict truth test and no extra call.
"""

from __future__ import annotations

import copy
import logging
import threading
import time
from array import array
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kproducer.accumulator.futures import RecordFuture
from kproducer.callback_errors import CallbackErrors, attributed_to, callback_raised
from kproducer.common import ExponentialBackoff, wall_clock_ms
from kproducer.errors import (
    BufferExhaustedError,
    KafkaError,
    KafkaTimeoutError,
    MemoryWouldBlock,
    PartitionMutedError,
    ProducerClosedError,
    RecordTooLargeError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from kproducer.failure_log import FailureLog
from kproducer.metadata import FINAL_TOPIC_ERRORS
from kproducer.parked_records import (
    UNKNOWN_PARTITION,
    ChargedMemory,
    CountingSink,
    DeliveryCallback,
    ParkedBulk,
    ParkedRecord,
    TopicQueue,
    parked_record_count,
    resolve_parked,
)
from kproducer.partitioner import partition_for_key
from kproducer.record import native
from kproducer.record.builder import (
    MAX_RECORD_OVERHEAD,
    RECORD_BATCH_OVERHEAD,
    estimate_size_upper_bound,
)
from kproducer.record.default_record import varint_size
from kproducer.structs import TopicPartition
from kproducer.validation import invalid_topic_error

if TYPE_CHECKING:
    from kproducer.accumulator import BufferPool, RecordAccumulator
    from kproducer.accumulator.batch import BulkSink
    from kproducer.circuit_breaker import CircuitBreakManager
    from kproducer.metadata import Cluster, Metadata
    from kproducer.metrics import ProducerSensors

__all__ = ["RecordRouter", "invalid_topic_error"]

log = logging.getLogger(__name__)

_NEVER = 2**31 - 1
# A caller parking records lets the Sender run once per this many + 1 of them (see _park).
_YIELD_EVERY_PARKED = 255
_yield_gil = time.sleep

# How soon the Sender tries again to append parked records that found the BufferPool empty.
_MEMORY_RETRY_MS = 5
# The share of buffer.memory that records waiting for metadata may hold. Appending them needs
# batch buffers beyond their own bytes (each partition's open batch is only partly filled), so
# parked records must never hold the whole buffer: then nothing could be appended and nothing
# sent to free memory. Beyond this share a caller blocks, as it does when memory is full.
_PARK_SHARE = 0.5
# The most parked records one hold of the router's lock appends. A caller's send() (an event
# loop's, too) takes that lock, so a topic with 100,000 parked records released in one hold
# stalled every sender for the whole append; in chunks, the Sender comes back for the rest at
# once, and callers get the lock in between.
_RELEASE_CHUNK = 1024
# A caller's own catch-up (see _catch_up) appends at most this many of them per send: enough
# that the queue shrinks while the caller keeps sending, little enough that a send() on an
# event loop stays short (the Sender appends the rest). With the whole queue per send, one
# send in benchmarks/aio_loop_lag.py appended 100,000 records on the loop: a 356-468 ms gap.
_CATCH_UP_CHUNK = 64


class RecordRouter:
    """The one routing step of a producer (see the module docstring)."""

    def __init__(
        self,
        *,
        metadata: Metadata,
        accumulator: RecordAccumulator,
        pool: BufferPool,
        clock_ms: Callable[[], int],
        wakeup: Callable[[], None],
        wakeup_by: Callable[[int], None],
        sensors: ProducerSensors,
        breaker_manager: CircuitBreakManager | None,
        partitioner: Any,
        keyed_reroute: bool,
        ignore_keys: bool,
        compression: Any,
        max_request_size: int,
        buffer_memory: int,
        max_block_ms: int,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        failure_log: FailureLog | None = None,
        wall_clock_ms: Callable[[], int] = wall_clock_ms,
        callback_errors: CallbackErrors | None = None,
    ) -> None:
        self._md = metadata
        # The producer's count of callback exceptions, for the callbacks this step runs on the caller's thread.
        self._callback_errors = callback_errors if callback_errors is not None else CallbackErrors("(router)")
        self._wall_clock = wall_clock_ms  # records' create time when the caller gives none
        self._failure_log = failure_log if failure_log is not None else FailureLog(log)
        self._acc = accumulator
        self._pool = pool
        self._clock = clock_ms
        self._wakeup = wakeup
        self._wakeup_by = wakeup_by
        self._sensors = sensors
        self._breaker = breaker_manager
        self._partitioner = partitioner
        self._partitioner_defers_keyless = getattr(partitioner, "defers_keyless", False) is True
        self._keyed_reroute = keyed_reroute
        self._ignore_keys = ignore_keys
        self._compression = compression
        self._max_request_size = max_request_size
        self._buffer_memory = buffer_memory
        self.max_block_ms = max_block_ms
        # A parked topic asks for its metadata again after retry.backoff.ms, doubling up to
        # retry.backoff.max.ms; no jitter (the metadata request itself backs off with jitter).
        self._refresh_backoff = ExponentialBackoff(max(1, retry_backoff_ms), retry_backoff_max_ms, jitter=0.0)
        self._append = accumulator.append
        self._partition_state = accumulator.partition_state
        # Topic -> its parked records. Read without the lock on the hot path (one dict lookup
        # when anything is parked); changed only under the lock.
        self.parked: dict[str, TopicQueue] = {}
        self._lock = threading.Lock()
        self._unparked = threading.Condition(self._lock)
        self._parked_count = 0
        # Bytes charged by parked records, at most _PARK_SHARE of buffer.memory (see there).
        self._parked_bytes = 0
        self._park_limit = int(buffer_memory * _PARK_SHARE)
        self._room = threading.Condition(self._lock)
        self.lane: Any = None

    # ------------------------------------------------------------------ single records
    def route(
        self,
        topic: str,
        partition: int | None,
        key: Any,
        value: Any,
        key_bytes: Any,
        value_bytes: Any,
        timestamp: int | None,
        headers: Any,
        on_delivery: DeliveryCallback | None,
        block: bool = True,
    ) -> RecordFuture:
        """Send one serialized record on; its future (never raises for the record's own errors).

        ``block=False``: raise :class:`MemoryWouldBlock` (nothing appended, nothing charged)
        where the record would wait for ``buffer.memory`` (see ``RecordAccumulator.append``).
        """
        # partition and timestamp were checked by Producer.send (kproducer.validation).
        if timestamp is None:
            timestamp = self._wall_clock()
        size = estimate_size_upper_bound(2, self._compression, key_bytes, value_bytes, headers)
        if size > self._max_request_size or size > self._buffer_memory:
            return self.fail_now(topic, partition, self._too_large(topic, partition, size), on_delivery)
        cluster = self._md.cluster
        count = cluster.partition_count(topic)
        if count is None or (partition is not None and partition >= count) or (
            self.parked and self._behind(topic, count) and not self._catch_up(topic, count)
        ):
            return self._park(
                topic, partition, key, value, key_bytes, value_bytes, timestamp, headers, on_delivery, size, block
            )
        return self._direct(
            topic, partition, key, value, key_bytes, value_bytes, timestamp, headers, on_delivery, cluster, count, block
        )

    def _behind(self, topic: str, count: int) -> bool:
        """Whether a record for an existing partition of ``topic`` must park behind the topic's parked ones.

        It must while the topic had no metadata, or once the partitions its parked
        records name exist (the Sender is about to append them). Records parked for
        partitions still beyond the count cannot share a partition with it.
        """
        q = self.parked.get(topic)
        return q is not None and (q.whole or q.highest < count)

    def _catch_up(self, topic: str, count: int) -> bool:
        """Append ``topic``'s parked records from the caller's thread; True when none is left to wait behind.

        The Sender releases parked records once per loop, but a caller sending to the
        topic faster than that would park each new record behind the last, and the
        topic would never leave the queue (nor return to the C lane). So a caller
        that finds the topic's metadata here appends parked records itself, in
        order, before its own: up to ``_CATCH_UP_CHUNK`` a send, so that the queue
        shrinks by that much each time while no single send does the Sender's work.
        Like :meth:`release` it never blocks for memory: with the pool empty the
        records stay parked and so does the caller's.
        """
        failed: list[tuple[ParkedRecord | ParkedBulk, str, KafkaError]] = []
        with self._lock:
            q = self.parked.get(topic)
            if q is None:
                return True
            self._release_locked(topic, q, self._md.cluster, self._clock(), failed, _CATCH_UP_CHUNK)
        self._fail_all_parked(failed)
        return not self._behind(topic, count)

    def _direct(
        self,
        topic: str,
        partition: int | None,
        key: Any,
        value: Any,
        key_bytes: Any,
        value_bytes: Any,
        timestamp: int,
        headers: Any,
        on_delivery: DeliveryCallback | None,
        cluster: Cluster,
        count: int,
        block: bool = True,
    ) -> RecordFuture:
        """The append of a record whose topic has metadata and no parked record to wait behind."""
        now = self._clock()
        self._md.touch(topic, now)
        try:
            return self._append_one(
                topic, partition, key, value, key_bytes, value_bytes, timestamp, headers, on_delivery,
                cluster, count, self.max_block_ms, now, None, block,
            )
        except ProducerClosedError:
            raise
        except KafkaError as e:
            return self.fail_now(topic, partition, e, on_delivery)

    def _too_large(self, topic: str, partition: int | None, size: int) -> RecordTooLargeError:
        which = "max.request.size" if size > self._max_request_size else "buffer.memory"
        limit = self._max_request_size if which == "max.request.size" else self._buffer_memory
        return RecordTooLargeError(
            f"The message is {size} bytes when serialized which is larger than {limit}, "
            f"the value of the {which} configuration",
            topic=topic,
            partition=partition,
        )

    def choose_partition(
        self, topic: str, partition: int | None, key: Any, key_bytes: Any, value: Any, value_bytes: Any,
        cluster: Cluster, count: int,
    ) -> int:
        """The partition for one record, or -1 for the accumulator's sticky partition (KIP-794).

        Explicit partitions the circuit breaker muted fail fast; a custom partitioner
        sees only the partitions it left open; keyed records hashed to a muted
        partition are rerouted unless ``keyed.reroute`` is off.
        """
        manager = self._breaker
        if partition is not None:
            if manager is not None and manager.routing_muted and not manager.may_send(TopicPartition(topic, partition)):
                raise self._muted_error(topic, partition)
            return partition
        if self._partitioner is not None:
            view = cluster if manager is None else manager.cluster_view(cluster)
            chosen = self._partitioner.partition(topic, key, key_bytes, value, value_bytes, view)
            if chosen == UNKNOWN_PARTITION and self._partitioner_defers_keyless:
                return UNKNOWN_PARTITION  # librdkafka's policies leave keyless records to the sticky partition
            if not 0 <= chosen < count:
                raise ValueError(
                    f"partitioner.class returned partition {chosen} for topic {topic!r}, "
                    f"which has partitions 0..{count - 1}"
                )
            return int(chosen)
        if key_bytes is not None and not self._ignore_keys:
            chosen = partition_for_key(key_bytes, count)
            if manager is not None and self._keyed_reroute and manager.routing_muted:
                chosen = manager.reroute_keyed(topic, chosen, key_bytes, cluster)
            return chosen
        return UNKNOWN_PARTITION

    @staticmethod
    def _muted_error(topic: str, partition: int) -> PartitionMutedError:
        return PartitionMutedError(
            f"partition {topic}-{partition} is muted by the circuit breaker; retry later or let the partitioner choose",
            topic=topic,
            partition=partition,
        )

    def wake_for_new_batch(self, now_ms: int) -> None:
        """Tell the Sender of a batch just opened (not full, alone in its deque), unless it will look by then.

        Java wakes the Sender for every new batch; this wakes it only when it would
        otherwise look at the partitions later than the batch becomes sendable
        (``NetworkClient.wakeup_by``). The C send lane calls this for the batches it opens.
        """
        self._wakeup_by(self._acc.new_batch_sendable_at(now_ms))

    def _append_one(
        self,
        topic: str,
        partition: int | None,
        key: Any,
        value: Any,
        key_bytes: Any,
        value_bytes: Any,
        timestamp: int,
        headers: Any,
        on_delivery: DeliveryCallback | None,
        cluster: Cluster,
        count: int,
        max_block_ms: int,
        now: int,
        memory: ChargedMemory | None,
        block: bool = True,
    ) -> RecordFuture:
        """Partition and append one record whose topic has metadata; raises the record's KafkaError."""
        chosen = self.choose_partition(topic, partition, key, key_bytes, value, value_bytes, cluster, count)
        result = self._append(
            topic, chosen, timestamp, key_bytes, value_bytes, headers, on_delivery, max_block_ms, False, now, cluster,
            memory=memory, block=block,
        )
        if result.batch_is_full:
            self._wakeup()
        elif result.new_batch_created:
            self.wake_for_new_batch(now)
        lane = self.lane
        if lane is not None and memory is None and cluster is self._md.cluster:
            # Later sends to this topic may take the C lane (while metadata holds this snapshot);
            # never while records of the topic are parked, which they must not overtake.
            lane.register(topic, cluster, count, *self._partition_state(topic))
            if self.parked and self._behind(topic, count):
                lane.forget(topic)
        future = result.future
        assert future is not None  # only None with abort_on_new_batch, which is not used here
        return future

    def fail_now(
        self, topic: str, partition: int | None, error: KafkaError, on_delivery: DeliveryCallback | None
    ) -> RecordFuture:
        """Java's FutureFailure: the error reaches the returned future and the callback, not the caller."""
        if error.topic is None:
            error.topic = topic
            error.partition = partition
        self._sensors.record_errors(topic, 1)
        self._failure_log.failed(topic, partition if partition is not None else -1, 1, error, 0, self._clock())
        fut = RecordFuture.failed(TopicPartition(topic, partition if partition is not None else -1), error)
        if on_delivery is not None:
            with attributed_to(self._callback_errors):
                _call(on_delivery, error)
        return fut

    def _park(
        self,
        topic: str,
        partition: int | None,
        key: Any,
        value: Any,
        key_bytes: Any,
        value_bytes: Any,
        timestamp: int,
        headers: Any,
        on_delivery: DeliveryCallback | None,
        size: int,
        block: bool = True,
    ) -> RecordFuture:
        err = invalid_topic_error(topic)
        if err is not None:
            return self.fail_now(topic, partition, err, on_delivery)
        try:
            self._wait_for_room(size, block)
            if block or self.max_block_ms <= 0:
                self._pool.reserve(size, self.max_block_ms)
            elif not self._pool.try_reserve(size):
                raise MemoryWouldBlock(size)  # the caller waits its own way, then sends again
        except BufferExhaustedError as e:
            return self.fail_now(topic, partition, e, on_delivery)
        # The caller may reuse its buffers once send() returns: keep bytes of our own.
        if key_bytes is not None and type(key_bytes) is not bytes:
            key_bytes = bytes(key_bytes)
        if value_bytes is not None and type(value_bytes) is not bytes:
            value_bytes = bytes(value_bytes)
        now = self._clock()
        rec = ParkedRecord(
            partition, key, value, key_bytes, value_bytes, timestamp, headers, on_delivery, size,
            now + self.max_block_ms,
        )
        if not self._enqueue(topic, partition, rec, now):
            self._pool.release(size)
            cluster = self._md.cluster
            count = cluster.partition_count(topic)
            if count is None or (partition is not None and partition >= count):  # metadata changed again
                return self.route(
                    topic, partition, key, value, key_bytes, value_bytes, timestamp, headers, on_delivery, block
                )
            return self._direct(
                topic, partition, key, value, key_bytes, value_bytes, timestamp, headers, on_delivery, cluster, count,
                block,
            )
        if not self._parked_count & _YIELD_EVERY_PARKED:
            # The Sender needs the GIL in short slices to connect and fetch this metadata; a caller
            # looping over send() keeps it for a switch interval (5 ms) each time (docs/architecture.md,
            # "The GIL and the Sender's system calls"). Hand it over now and then instead.
            _yield_gil(0)
        return rec.future

    def _enqueue(self, topic: str, partition: int | None, entry: ParkedRecord | ParkedBulk, now: int) -> bool:
        """Queue a parked entry behind the topic's others; False when it may go straight on instead."""
        new_topic = False
        with self._lock:
            cluster = self._md.cluster
            count = cluster.partition_count(topic)
            fits = count is not None and (partition is None or partition < count)
            q = self.parked.get(topic)
            if q is None:
                if fits:
                    return False  # the Sender released the topic meanwhile
                q = self.parked[topic] = TopicQueue(whole=count is None)
                new_topic = True
            elif fits and not self._behind(topic, count):  # type: ignore[arg-type]
                return False  # parked only for partitions that still do not exist: no order to keep
            if count is None:
                q.whole = True
            if partition is not None and partition > q.highest:
                q.highest = partition
            if entry.__class__ is ParkedRecord:
                entry.future = q.park_future(topic)
            q.fifo.append(entry)
            self._parked_count += parked_record_count(entry)
            self._parked_bytes += entry.held
        lane = self.lane
        if lane is not None and (q.whole or q.highest < count):  # type: ignore[operator]
            # Later sends to this topic must wait behind this record: none may take the C lane.
            lane.forget(topic)
        if new_topic:
            md = self._md
            if count is None:
                md.add_topic(topic, now)  # a new topic is urgent: it joins the next request
                md.mark_urgent(topic, now)
            else:
                md.touch(topic, now)
                self._schedule_refresh(topic, q, now)
            self._wakeup()
        return True

    def _wait_for_room(self, size: int, block: bool = True) -> None:
        """Block while parked records hold their share of buffer.memory (``_PARK_SHARE``), up to max.block.ms.

        A caller that may not block (``block=False``) gets :class:`MemoryWouldBlock` instead of the wait.
        """
        if self._parked_bytes + size <= self._park_limit:
            return
        if not block:
            raise MemoryWouldBlock(size, poll_s=_MEMORY_RETRY_MS / 1000)  # an event loop awaits instead
        with self._room:
            if not self._room.wait_for(
                lambda: self._parked_bytes == 0 or self._parked_bytes + size <= self._park_limit,
                self.max_block_ms / 1000,
            ):
                raise BufferExhaustedError(
                    f"Failed to hold a {size}-byte record for its topic's metadata within {self.max_block_ms} ms "
                    f"(max.block.ms): records waiting for metadata already hold {self._parked_bytes} bytes, "
                    f"the most they may hold of buffer.memory ({self._buffer_memory} bytes)"
                )

    def _unparked_entry(self, entry: ParkedRecord | ParkedBulk) -> None:
        """Account for an entry leaving the queue (appended or failed); lock held."""
        self._parked_count -= parked_record_count(entry)
        self._parked_bytes -= entry.held

    def _schedule_refresh(self, topic: str, q: TopicQueue, now: int) -> None:
        """Ask for the topic's metadata again, then not before the next backoff (retry.backoff.ms, doubling)."""
        self._md.mark_urgent(topic, now)
        q.refreshes += 1
        q.refresh_at_ms = now + self._refresh_backoff.backoff(q.refreshes - 1)

    # ------------------------------------------------------------------ bulk
    def route_many(
        self,
        topic: str,
        n: int,
        values: Any,
        keys: Any,
        arrow: bool,
        partition: int | None,
        timestamp: int | None,
        encoded_headers: bytes | None,
        on_delivery: DeliveryCallback | None,
        sink: BulkSink,
        future: Any,
    ) -> bool:
        """Route rows ``0..n`` of one bulk chunk; True when the Sender should be woken. Raises KafkaError."""
        if n == 0:
            return False
        # partition and timestamp were checked by the bulk call (kproducer.validation).
        if timestamp is None:
            timestamp = self._wall_clock()
        sizes = native.sizes_arrow if arrow else native.sizes_seq
        value_total, largest_value = sizes(values, 0, n)
        key_total, largest_key = sizes(keys, 0, n) if keys is not None else (0, -1)
        header_size = len(encoded_headers) if encoded_headers is not None else 1
        record_bound = (
            RECORD_BATCH_OVERHEAD
            + MAX_RECORD_OVERHEAD
            + varint_size(largest_key)
            + max(largest_key, 0)
            + varint_size(largest_value)
            + max(largest_value, 0)
            + header_size
        )
        if record_bound > self._max_request_size or record_bound > self._buffer_memory:
            which = "max.request.size" if record_bound > self._max_request_size else "buffer.memory"
            limit = self._max_request_size if which == "max.request.size" else self._buffer_memory
            raise RecordTooLargeError(
                f"a record of this bulk call is up to {record_bound} bytes when serialized, larger than {limit}, "
                f"the value of the {which} configuration",
                topic=topic,
                partition=partition,
            )
        cluster = self._md.cluster
        count = cluster.partition_count(topic)
        if (
            count is None
            or (partition is not None and partition >= count)
            or (self.parked and topic in self.parked and not self._catch_up(topic, count))
        ):
            err = invalid_topic_error(topic)
            if err is not None:
                raise err
            # Charged as the records' upper bound, at most the whole buffer.
            charge = min(
                self._buffer_memory,
                RECORD_BATCH_OVERHEAD + value_total + key_total + n * (MAX_RECORD_OVERHEAD + header_size),
            )
            self._wait_for_room(charge)
            self._pool.reserve(charge, self.max_block_ms)
            if not arrow:
                # The caller may reuse its lists once the call returns.
                values = list(values)
                keys = list(keys) if keys is not None else None
            now = self._clock()
            entry = ParkedBulk(
                partition, n, values, keys, arrow, timestamp, encoded_headers, on_delivery, CountingSink(sink),
                record_bound, charge, now + self.max_block_ms, future,
            )
            future.park(n)
            if self._enqueue(topic, partition, entry, now):
                return False
            future.unpark(n)
            self._pool.release(charge)
            cluster = self._md.cluster
            count = cluster.partition_count(topic)
            assert count is not None
        self._md.touch(topic, self._clock())
        return self._append_many(
            topic, n, values, keys, arrow, partition, timestamp, encoded_headers, on_delivery, sink, record_bound,
            cluster, count, self.max_block_ms, None,
        )

    def _append_many(
        self,
        topic: str,
        n: int,
        values: Any,
        keys: Any,
        arrow: bool,
        partition: int | None,
        timestamp: int,
        encoded_headers: bytes | None,
        on_delivery: DeliveryCallback | None,
        sink: BulkSink,
        record_bound: int,
        cluster: Cluster,
        count: int,
        max_block_ms: int,
        memory: ChargedMemory | None,
    ) -> bool:
        """The bulk partition choice (the same policy as :meth:`choose_partition`) and the appends."""
        acc = self._acc
        manager = self._breaker
        groups: list[tuple[int, bytes | None, int]]
        if partition is not None:
            if manager is not None and manager.routing_muted and not manager.may_send(TopicPartition(topic, partition)):
                raise self._muted_error(topic, partition)
            groups = [(partition, None, n)]
        elif keys is not None and not self._ignore_keys:
            partition_many = native.partition_arrow if arrow else native.partition_seq
            buckets = partition_many(keys, 0, n, count)
            null_keyed = buckets.pop()
            if manager is not None and self._keyed_reroute and manager.routing_muted:
                buckets = self._reroute_buckets(topic, buckets, keys, arrow, n, cluster, manager)
            if null_keyed:
                # Rows without a key join the sticky partition, merged in row order so that the
                # partition's records keep the call's order.
                target = self._sticky_target(topic, cluster)
                merged = array("q", buckets[target]) + array("q", null_keyed)
                buckets[target] = array("q", sorted(merged)).tobytes()
            groups = [(part, idx, len(idx) // 8) for part, idx in enumerate(buckets) if idx]
        else:
            groups = [(UNKNOWN_PARTITION, None, n)]
        wake = False
        for part, idx, rows in groups:
            wake |= acc.append_many(
                topic, part, timestamp, values, keys, idx, 0, rows, encoded_headers, arrow, sink, on_delivery,
                record_bound, max_block_ms, cluster, memory=memory,
            )
        return wake

    def _sticky_target(self, topic: str, cluster: Cluster) -> int:
        """The sticky partition for a keyed call's null-keyed rows, moved off a partition the breaker closed."""
        acc = self._acc
        target = acc.sticky_partition(topic, cluster)
        manager = self._breaker
        if manager is None or not manager.routing_muted:
            return target
        view = manager.cluster_view(cluster)
        partitioner = acc.partition_state(topic)[1]
        for _ in range(3):
            if manager.may_send(TopicPartition(topic, target)) or not view.available_partitions_for_topic(topic):
                break
            partitioner.move_off(target, view)
            target = acc.sticky_partition(topic, cluster)
        return target

    @staticmethod
    def _reroute_buckets(
        topic: str, buckets: list[bytes], keys: Any, arrow: bool, n: int, cluster: Cluster, manager: CircuitBreakManager
    ) -> list[bytes]:
        """Keyed rows of muted partitions go where :meth:`CircuitBreakManager.reroute_keyed` sends each key."""
        closed = [p for p, idx in enumerate(buckets) if idx and not manager.may_send(TopicPartition(topic, p))]
        if not closed:
            return buckets
        available = manager.cluster_view(cluster).available_partitions_for_topic(topic)
        if not available:
            return buckets  # every partition muted: availability wins, the rows wait for a probe
        # murmur2 of each key over the open partitions, as reroute_keyed computes it per key.
        alternative = (native.partition_arrow if arrow else native.partition_seq)(keys, 0, n, len(available))
        alternative.pop()
        target_of = array("q", bytes(8 * n))
        for j, idx in enumerate(alternative):
            for row in array("q", idx):
                target_of[row] = available[j].partition
        rows_of: dict[int, list[int]] = {p: list(array("q", idx)) for p, idx in enumerate(buckets) if idx}
        for p in closed:
            for row in rows_of.pop(p):
                rows_of.setdefault(target_of[row], []).append(row)
        out = [b""] * len(buckets)
        for p, rows in rows_of.items():
            out[p] = array("q", sorted(rows)).tobytes()
        return out

    # ------------------------------------------------------------------ the Sender's side
    @property
    def parked_count(self) -> int:
        """How many records wait for metadata."""
        return self._parked_count

    def pending_count(self) -> int:
        """Records not yet completed: waiting for metadata or in batches (each counted once)."""
        with self._lock:  # release() moves records from one to the other under this lock
            return self._parked_count + self._acc.incomplete_record_count()

    def await_unparked(self, timeout: float | None) -> bool:
        """Wait until no record waits for metadata (each leaves by max.block.ms); False on ``timeout``."""
        with self._unparked:
            return self._unparked.wait_for(lambda: not self.parked, timeout)

    def has_parked(self, topic: str | None = None) -> bool:
        """Whether records wait for metadata (of ``topic``, or of any topic)."""
        return bool(self.parked) if topic is None else topic in self.parked

    def release(self, now: int) -> int:
        """Append the parked records whose metadata arrived, fail those past ``max.block.ms``.

        Runs on the Sender thread, once per loop while anything is parked. Returns
        how long the Sender may sleep before the next parked record's deadline or
        partition refresh falls due.
        """
        if not self.parked:
            return _NEVER
        delay = _NEVER
        failed: list[tuple[ParkedRecord | ParkedBulk, str, KafkaError]] = []
        cluster = self._md.cluster
        released: list[str] = []
        with self._lock:
            for topic in list(self.parked):
                delay = min(delay, self._release_locked(topic, self.parked[topic], cluster, now, failed, _RELEASE_CHUNK))
                if topic not in self.parked:
                    released.append(topic)
        lane = self.lane
        if lane is not None and cluster is self._md.cluster:
            # The topics' later sends may take the C lane now that nothing of theirs waits.
            for topic in released:
                count = cluster.partition_count(topic)
                if count is not None and topic not in self.parked:
                    lane.register(topic, cluster, count, *self._partition_state(topic))
        self._fail_all_parked(failed)
        return max(delay, 0)

    def _release_locked(
        self, topic: str, q: TopicQueue, cluster: Cluster, now: int, failed: list[tuple[Any, str, KafkaError]], chunk: int
    ) -> int:
        """:meth:`_release_topic`, then forget the topic once nothing of it is parked (holding ``_lock``)."""
        delay = self._release_topic(topic, q, cluster, now, failed, chunk)
        if not q.fifo:
            del self.parked[topic]
            if not self.parked:
                self._unparked.notify_all()
        return delay

    def _fail_all_parked(self, failed: list[tuple[Any, str, KafkaError]]) -> None:
        """Fail what :meth:`_release_topic` gave up on, outside ``_lock`` (callbacks run here)."""
        for entry, topic, error in failed:
            self._fail_parked(entry, topic, error)

    def _release_topic(
        self,
        topic: str,
        q: TopicQueue,
        cluster: Cluster,
        now: int,
        failed: list[tuple[Any, str, KafkaError]],
        chunk: int,
    ) -> int:
        """Append the topic's parked records that fit (at most ``chunk``), in order; fail those past their deadline."""
        count = cluster.partition_count(topic)
        error_code = cluster.topic_errors.get(topic)
        auth_error = self._md.authentication_error
        if error_code in FINAL_TOPIC_ERRORS or (count is None and auth_error is not None):
            # Invalid or unauthorized topic, or TLS/SASL refused: the same settings cannot succeed,
            # so the records do not wait out max.block.ms.
            for entry in q.fifo:
                if error_code in FINAL_TOPIC_ERRORS:
                    error: Any = error_for_code(error_code, topic=topic)
                else:
                    error = copy.copy(auth_error)
                failed.append((entry, topic, error))
                self._unparked_entry(entry)
            q.fifo.clear()
            self._room.notify_all()
            return _NEVER
        if count is None and self._md.topic_state(topic) is None:
            self._md.add_topic(topic, now)  # evicted meanwhile: ask again
        kept: deque[ParkedRecord | ParkedBulk] = deque()
        memory = ChargedMemory(self._pool)
        exhausted = False
        delay = _NEVER
        fifo = q.fifo
        appended = 0
        more = False  # a full chunk was appended: the rest is for the Sender's next pass, now
        try:
            while fifo:
                if appended >= chunk:
                    more = True
                    break
                entry = fifo.popleft()
                fits = count is not None and (entry.partition is None or entry.partition < count)
                if fits and not exhausted:
                    # The entry's charge pays for the batch buffers it needs (what is left is released below).
                    charge, entry.charge = entry.charge, 0
                    memory.bytes += charge
                    try:
                        self._append_parked(topic, entry, cluster, count, now, memory)  # type: ignore[arg-type]
                        self._unparked_entry(entry)
                        appended += parked_record_count(entry)
                        continue
                    except BufferExhaustedError:
                        # Keep it (and everything behind it) parked; try again when memory is back.
                        memory.bytes -= charge
                        entry.charge = charge
                        exhausted = True
                        delay = _MEMORY_RETRY_MS
                    except ProducerClosedError as e:
                        memory.bytes -= charge
                        entry.charge = charge
                        failed.append((entry, topic, e))
                        self._unparked_entry(entry)
                        continue
                if now >= entry.deadline_ms:
                    # With the metadata here, what the record waited for was memory: say so.
                    if fits:
                        error = self._memory_error(topic, entry)
                    else:
                        error = self.metadata_error(topic, entry.partition, count, error_code)
                    failed.append((entry, topic, error))
                    self._unparked_entry(entry)
                    continue
                kept.append(entry)
                delay = min(delay, entry.deadline_ms - now)
                if exhausted:
                    # Deadlines grow along the queue: nothing behind is due either. Stopping here
                    # keeps a caller's catch-up (one per send) from walking the whole queue.
                    kept.extend(fifo)
                    fifo.clear()
        finally:
            kept.extend(fifo)  # what a full chunk or an unexpected error left
            self._pool.release(memory.bytes)
            self._room.notify_all()
        q.fifo = kept
        if kept and count is not None:
            if more or exhausted:
                # Records that fit are still parked (a chunk ended, or memory ran out): every later
                # send to the topic waits behind them, so none overtakes one of its partition. This
                # also spares a walk of the whole queue per pass (a catch-up per send).
                q.whole = True
                return 0 if more else delay
            q.whole = False
            q.highest = max((e.partition for e in kept if e.partition is not None), default=-1)
            # Explicit partitions beyond the count: refresh on a backoff, never in a storm.
            if now >= q.refresh_at_ms:
                self._schedule_refresh(topic, q, now)
            delay = min(delay, q.refresh_at_ms - now)
        return delay

    def _append_parked(
        self, topic: str, entry: ParkedRecord | ParkedBulk, cluster: Cluster, count: int, now: int, memory: ChargedMemory
    ) -> None:
        """Partition and append one parked entry (Sender thread, never blocking); its own errors fail it."""
        try:
            if entry.__class__ is ParkedRecord:
                rec: ParkedRecord = entry
                real = self._append_one(
                    topic, rec.partition, rec.key, rec.value, rec.key_bytes, rec.value_bytes, rec.timestamp,
                    rec.headers, rec.on_delivery, cluster, count, 0, now, memory,
                )
                rec.future.chain(real)
                resolve_parked(rec.future)
            else:
                bulk: ParkedBulk = entry  # type: ignore[assignment]
                self._append_many(
                    topic, bulk.n, bulk.values, bulk.keys, bulk.arrow, bulk.partition, bulk.timestamp, bulk.headers,
                    bulk.on_delivery, bulk.sink, bulk.record_bound, cluster, count, 0, memory,
                )
                bulk.future.unpark(bulk.n)
        except (BufferExhaustedError, ProducerClosedError) as e:
            if entry.__class__ is ParkedBulk and entry.sink.appended_count:
                # Part of the rows are in batches: the rest cannot wait for a retry in order.
                self._fail_parked(entry, topic, e)
                return
            raise
        except Exception as e:  # a muted explicit partition, a partitioner's error: the record's own
            error = e if isinstance(e, KafkaError) else KafkaError(f"routing failed: {e!r}", topic=topic)
            self._fail_parked(entry, topic, error)

    def _memory_error(self, topic: str, entry: ParkedRecord | ParkedBulk) -> KafkaError:
        """The error of a parked record whose metadata arrived but that found no memory within max.block.ms."""
        return BufferExhaustedError(
            f"Failed to append a record for topic {topic!r} within {self.max_block_ms} ms (max.block.ms): its "
            f"metadata arrived, but buffer.memory ({self._buffer_memory} bytes) stayed full",
            topic=topic,
            partition=entry.partition,
        )

    def metadata_error(
        self, topic: str, partition: int | None, count: int | None, error_code: int | None, max_block_ms: int | None = None
    ) -> KafkaError:
        """The error of a record whose topic (or partition) had no metadata within max.block.ms (or ``max_block_ms``)."""
        ms = self.max_block_ms if max_block_ms is None else max_block_ms
        if count is not None and partition is not None:
            return KafkaTimeoutError(
                f"Partition {partition} of topic {topic!r} with partition count {count} is not present "
                f"in metadata after {ms} ms.",
                topic=topic,
                partition=partition,
            )
        if error_code == UnknownTopicOrPartitionError.code:
            return UnknownTopicOrPartitionError(
                f"Topic {topic!r} not present in metadata after {ms} ms (max.block.ms)", topic=topic
            )
        return KafkaTimeoutError(
            f"Topic {topic!r} not present in metadata after {ms} ms (max.block.ms); {self._md.describe_reachability()}",
            topic=topic,
        )

    def _fail_parked(self, entry: ParkedRecord | ParkedBulk, topic: str, error: KafkaError) -> None:
        self._pool.release(entry.charge)
        entry.charge = 0
        if error.topic is None:
            error.topic = topic
            error.partition = entry.partition
        if entry.__class__ is ParkedRecord:
            rec: ParkedRecord = entry
            self._sensors.record_errors(topic, 1)
            self._failure_log.failed(topic, _partition_of(rec.partition), 1, error, 0, self._clock())
            resolve_parked(rec.future, error)
            if rec.on_delivery is not None:
                with attributed_to(self._callback_errors):  # this may be the caller's thread (purge, close)
                    _call(rec.on_delivery, error)
        else:
            bulk: ParkedBulk = entry  # type: ignore[assignment]
            missing = bulk.n - bulk.sink.appended_count
            bulk.future.fail_parked(bulk.n, missing, error)
            self._sensors.record_errors(topic, missing)
            self._failure_log.failed(topic, _partition_of(bulk.partition), missing, error, 0, self._clock())
            if bulk.on_delivery is not None:
                with attributed_to(self._callback_errors):
                    for _ in range(missing):
                        _call(bulk.on_delivery, error)

    def fail_all(self, error: KafkaError) -> None:
        """Fail every parked record (the producer closed without waiting, or purge())."""
        with self._lock:
            entries = [(e, t) for t, q in self.parked.items() for e in q.fifo]
            self.parked.clear()
            self._parked_count = 0
            self._parked_bytes = 0
            self._unparked.notify_all()
            self._room.notify_all()
        for entry, topic in entries:
            self._fail_parked(entry, topic, error)


def _partition_of(partition: int | None) -> int:
    return -1 if partition is None else partition


def _call(on_delivery: DeliveryCallback | None, error: BaseException) -> None:
    if on_delivery is None:
        return
    try:
        on_delivery(None, error)
    except Exception as e:
        callback_raised(e, getattr(error, "topic", None) or "a record")
