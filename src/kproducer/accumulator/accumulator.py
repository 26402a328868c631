"""RecordAccumulator: per-partition batch queues between caller threads and the Sender (Java's ``RecordAccumulator``).

Caller threads ``append()`` to the last batch of a partition's deque; the
Sender asks ``ready()`` which leader nodes have sendable data and ``drain()``s
the first batch of each partition, per node, rotating over partitions so that
none starves. Each deque has its own lock, held only for the append itself:
the buffer for a new batch is allocated from the BufferPool *outside* the lock
(it may block up to ``max.block.ms``), then the append is retried under the lock
before a new batch is created (the double-lock pattern of Java's ``RecordAccumulator.append``).

One class owns the accumulator's state, as Java's ``RecordAccumulator`` does, and
every job that reads or changes it is a method here, in sections: the append path
(``append`` and its helpers; the C send lane appends into the same deques and
batches), the Sender's ready check and drain, KIP-782 growth and the in-flight growth
budget, sealing (compressing full batches before the drain), requeue (retries and
splits), expiry and abort, the circuit breaker's moves off muted partitions, and
``append_many`` for ``send_batch``/``send_arrow``. ``incomplete``, ``deques``,
``staging`` and ``collaborators`` hold the types it is made of.
"""
from __future__ import annotations

import bisect
import logging
import operator
import random
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar, NamedTuple

from kproducer.accumulator.adaptive_linger import AdaptiveLinger
from kproducer.accumulator.batch import NO_SEQUENCE, BulkSink, DeliveryCallback, ProducerBatch
from kproducer.accumulator.buffer_pool import BufferPool, MetricsLike, SensorLike
from kproducer.accumulator.collaborators import (
    CircuitBreakManagerLike,
    CircuitBreakRoutingLike,
    MemorySource,
    StickyPartitioner,
    TransactionManagerLike,
)
from kproducer.accumulator.deques import UNKNOWN_PARTITION, PartitionDeque, TopicInfo
from kproducer.accumulator.futures import RecordFuture
from kproducer.accumulator.incomplete import IncompleteBatches
from kproducer.accumulator.staging import StagingBuffers
from kproducer.common import ExponentialBackoff, monotonic_ms
from kproducer.errors import BufferExhaustedError, IllegalStateError, MemoryWouldBlock, ProducerClosedError
from kproducer.metadata import Cluster
from kproducer.record.builder import (
    COMPRESSION_RATE_ESTIMATION_FACTOR,
    MAX_STAGING_BYTES,
    CompressionRatioEstimator,
    MemoryRecordsBuilder,
    estimate_size_upper_bound,
)
from kproducer.record.codecs import CompressionType, compression_type_for_name, validate_compression_level
from kproducer.record.compression_ratio import MAX_GROWN_STAGING_BYTES
from kproducer.record.compression_worker import CompressionWorker, start_worker
from kproducer.structs import PartitionInfo, TopicPartition

__all__ = [
    "CircuitBreakManagerLike",
    "NodeLatencyStats",
    "ReadyCheckResult",
    "RecordAccumulator",
    "RecordAppendResult",
    "StickyPartitioner",
    "TransactionManagerLike",
]

log = logging.getLogger(__name__)


NO_DELAY = 2**63 - 1  # "no deadline": the ready check's delay when nothing is waiting on time


class ReadyCheckResult(NamedTuple):
    """Leader nodes with sendable data, when to look again, and topics whose leader is unknown."""

    ready_nodes: set[int]
    next_ready_check_delay_ms: int
    unknown_leader_topics: set[str]


class NodeLatencyStats:
    """When a node last had data ready and when it was last drained (Java's NodeLatencyStats).

    ``ready_time_ms - drain_time_ms`` is how long data waited for a node that was
    not ready: past ``partitioner.availability.timeout.ms`` its partitions leave
    the adaptive partitioner's choice.
    """

    __slots__ = ("ready_time_ms", "drain_time_ms")

    def __init__(self, now_ms: int) -> None:
        self.ready_time_ms = now_ms
        self.drain_time_ms = now_ms


# A drain candidate's position among its node's partitions (the sort and search key of the drain's visit order).
_position = operator.itemgetter(0)


def batch_backoff_ms(batch: ProducerBatch) -> int:
    """How long a retried batch waits before it is sent again (0 on its first try)."""
    return batch.retry_backoff_ms if batch.attempts > 0 else 0


# The smallest buffer a new batch gets when sized from its partition's last batch (new_batch_size):
# a few records of a typical size, so that a partition sending a record or two per batch does not
# grow its next batch at once.
MIN_NEW_BATCH_BYTES = 4096

# An open batch drained with at least this many bytes of records is compressed by the compression
# worker; a smaller one (linger.ms ran out on a quiet partition) here, at once: a few microseconds.
WORKER_DRAIN_BYTES = 32 * 1024


def _should_stop_draining(first: ProducerBatch, tp: TopicPartition, tm: TransactionManagerLike) -> bool:
    """Idempotence gates (Java's shouldStopDrainBatchesForPartition)."""
    if tm.should_stop_draining():
        return True
    if first.has_sequence():
        first_in_flight = tm.first_in_flight_sequence(tp)
        if first_in_flight != NO_SEQUENCE and first.base_sequence != first_in_flight:
            # A retried batch waits until the batches before it are resolved.
            return True
    return False


# How far past the backlog limit a caller lets the compression worker fall behind before it waits.
_WORKER_BACKLOG_FACTOR = 4


def _insert_in_sequence_order(batches: deque[ProducerBatch], batch: ProducerBatch) -> None:
    """Before the first queued batch with a higher (or no) sequence."""
    position = 0
    for queued in batches:
        if queued.has_sequence() and queued.base_sequence < batch.base_sequence:
            position += 1
        else:
            break
    batches.insert(position, batch)

Headers = Sequence[tuple[str, bytes | bytearray | memoryview | None]]
BytesLike = bytes | bytearray | memoryview


class RecordAppendResult(NamedTuple):
    """What ``append()`` tells the caller: wake the Sender when the batch is full or new."""

    future: RecordFuture | None
    batch_is_full: bool
    new_batch_created: bool
    abort_for_new_batch: bool
    partition: int
    appended_bytes: int = 0


def _default_partitioner_factory(topic: str, sticky_batch_size: int) -> StickyPartitioner:
    from kproducer.partitioner import BuiltInPartitioner

    return BuiltInPartitioner(topic, sticky_batch_size)


def _record_size(key: BytesLike | None, value: BytesLike | None) -> int:
    """Bytes of key and value plus the most a v2 record adds (Java's DefaultRecord.MAX_RECORD_OVERHEAD)."""
    return (0 if key is None else len(key)) + (0 if value is None else len(value)) + 21


class _AppendRows(ABC):
    """The rows of one append call, for :meth:`RecordAccumulator._append_rows`: one record, or a bulk range.

    The accumulator picks the partition, locks its deque, grows, allocates and opens
    batches; the rows only write themselves into a batch (``append_to``: as many as fit,
    returning how many, ``left`` saying whether some remain) and bound the buffer a new
    batch needs. ``one_record`` marks the form that follows Java's
    ``RecordAccumulator.append`` step by step (see ``_append_rows`` for where the bulk
    form differs, and why).
    """

    __slots__ = ("left",)
    left: bool  # rows not appended yet (each subclass's __init__ sets it)
    future: RecordFuture | None = None  # one record's, once appended
    one_record: ClassVar[bool]
    method: ClassVar[str]  # the public method, for errors

    @abstractmethod
    def append_to(self, batch: ProducerBatch, now_ms: int) -> int:
        """Write as many rows as fit into ``batch``; how many (``left`` says whether some remain)."""

    @abstractmethod
    def grow_needed(self) -> int:
        """Bytes a growth step must add at least for the next row to fit."""

    @abstractmethod
    def size_bound(self, magic: int, compression: CompressionType) -> int:
        """Bytes the buffer of a new batch needs for the next row."""


class _OneRecord(_AppendRows):
    """One record of ``send()``: its future once appended."""

    __slots__ = ("timestamp", "key", "value", "headers", "callback", "future")
    one_record = True
    method = "append"

    def __init__(
        self,
        timestamp: int,
        key: BytesLike | None,
        value: BytesLike | None,
        headers: Headers | None,
        callback: DeliveryCallback | None,
    ) -> None:
        self.left = True
        self.timestamp = timestamp
        self.key = key
        self.value = value
        self.headers = headers
        self.callback = callback
        self.future: RecordFuture | None = None

    def append_to(self, batch: ProducerBatch, now_ms: int) -> int:
        future = batch.try_append(self.timestamp, self.key, self.value, self.headers, self.callback, now_ms)
        if future is None:
            return 0
        self.future = future
        self.left = False
        return 1

    def grow_needed(self) -> int:
        return _record_size(self.key, self.value)

    def size_bound(self, magic: int, compression: CompressionType) -> int:
        return estimate_size_upper_bound(magic, compression, self.key, self.value, self.headers)


class _BulkRows(_AppendRows):
    """Rows ``start..end`` of a ``send_batch``/``send_arrow`` call, appended in order as :class:`BulkRange` s.

    ``before`` and ``after`` are the arguments of ``ProducerBatch.try_append_many`` on
    either side of the range, the same for every batch of the call.
    """

    __slots__ = ("before", "start", "end", "after", "max_record_size")
    one_record = False
    method = "append_many"

    def __init__(
        self,
        before: tuple[int, Any, Any, bytes | None],
        start: int,
        end: int,
        after: tuple[bytes | None, bool, BulkSink, DeliveryCallback | None],
        max_record_size: int,
    ) -> None:
        self.left = start < end
        self.before = before
        self.start = start
        self.end = end
        self.after = after
        self.max_record_size = max_record_size

    def append_to(self, batch: ProducerBatch, now_ms: int) -> int:
        count = batch.try_append_many(*self.before, self.start, self.end, *self.after, now_ms)
        self.start += count
        self.left = self.start < self.end
        return count

    def grow_needed(self) -> int:
        return 0  # each growth step doubles the limit; the range takes whatever fits

    def size_bound(self, magic: int, compression: CompressionType) -> int:
        return self.max_record_size


# ---------------------------------------------------------------------- the accumulator
class RecordAccumulator:
    """Queues of ProducerBatch per partition, filled by callers and drained by the Sender (as in Java's producer)."""

    def __init__(
        self,
        *,
        batch_size: int,
        buffer_pool: BufferPool,
        batch_max_size: int = 0,
        batch_initial_size: int = 0,
        compression_type: CompressionType | int | str = CompressionType.NONE,
        compression_level: int | None = None,
        linger_ms: int = 0,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        retry_backoff_jitter: float = 0.2,
        delivery_timeout_ms: int = 120_000,
        adaptive_partitioning_enable: bool = True,
        partition_availability_timeout_ms: int = 0,
        clock_ms: Callable[[], int] | None = None,
        metrics: MetricsLike | None = None,
        magic: Callable[[], int] | None = None,
        transaction_manager: TransactionManagerLike | None = None,
        circuit_break_manager: CircuitBreakManagerLike | None = None,
        partitioner_factory: Callable[[str, int], StickyPartitioner] | None = None,
        rng: random.Random | None = None,
        adaptive_linger: AdaptiveLinger | None = None,
    ) -> None:
        if batch_size <= 0:
            raise ValueError(f"batch.size must be > 0, got {batch_size}")
        if isinstance(compression_type, str):
            ctype = compression_type_for_name(compression_type)
        else:
            ctype = CompressionType(compression_type)
        self.batch_size = batch_size
        # KIP-782: a hot partition's open batch may grow to batch_max_size (0 or <= batch.size: no
        # growth); a new batch starts at batch_initial_size (at or above batch.size: batch.size,
        # Java's allocation), or with 0 at the size new_batch_size derives from the partition's last batch.
        self.batch_max_size = max(batch_size, batch_max_size)
        self.batch_initial_size = min(batch_initial_size, batch_size)
        # Growth past batch.size leaves at least this much of buffer.memory free (see _grow): room
        # for four new batch.size batches, no more, because a buffer full of queued batches is
        # exactly when larger batches pay. Keeping half (or an eighth) free stopped growth under
        # sustained load: send_arrow of 1M keyed rows averaged 20-30 KB batches, 120-157 KB with this.
        self._growth_keep_free = 4 * batch_size
        # Topics whose broker refused a batch as too large (MESSAGE_TOO_LARGE): no growth past batch.size.
        self._growth_capped: set[str] = set()
        # With a circuit breaker: the bytes past batch.size that the batches in flight to one leader
        # may hold between them (see _drain_node), and what each leader holds now.
        self._in_flight_growth_limit = buffer_pool.total_memory // 8
        self._in_flight_growth: dict[int, int] = {}
        self.compression = ctype
        self.compression_level = validate_compression_level(ctype, compression_level)
        # The linger the ready check applies: linger.ms, stretched by the Sender while its own work
        # keeps the batches small (adaptive_linger.py); without a Sender feeding it, linger.ms.
        if adaptive_linger is not None and adaptive_linger.configured_ms != linger_ms:
            raise ValueError(
                f"adaptive_linger is for linger.ms={adaptive_linger.configured_ms}, the accumulator's is {linger_ms}"
            )
        self.adaptive_linger = adaptive_linger if adaptive_linger is not None else AdaptiveLinger(linger_ms)
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = retry_backoff_max_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.adaptive_partitioning_enable = adaptive_partitioning_enable
        # The availability timeout only means something with adaptive partitioning (as in Java).
        self.partition_availability_timeout_ms = partition_availability_timeout_ms if adaptive_partitioning_enable else 0
        self.free = buffer_pool
        self._clock: Callable[[], int] = clock_ms if clock_ms is not None else monotonic_ms
        self._magic: Callable[[], int] = magic if magic is not None else (lambda: 2)
        self._tm = transaction_manager
        # A transactional producer's gate: a partition drains only once it is in the transaction.
        self._transactional = bool(getattr(transaction_manager, "transactional", False))
        self._breaker = circuit_break_manager
        self._routing: CircuitBreakRoutingLike | None = (
            circuit_break_manager if isinstance(circuit_break_manager, CircuitBreakRoutingLike) else None
        )
        self._partitioner_factory = partitioner_factory or _default_partitioner_factory
        self._retry_backoff = ExponentialBackoff(retry_backoff_ms, retry_backoff_max_ms, jitter=retry_backoff_jitter, rng=rng)
        self._ratio_estimator = CompressionRatioEstimator()

        self._topic_info: dict[str, TopicInfo] = {}
        self._topic_lock = threading.Lock()
        self._incomplete = IncompleteBatches()
        self._muted: set[TopicPartition] = set()
        self._node_stats: dict[int, NodeLatencyStats] = {}
        self._drain_index: dict[int, int] = {}
        # Whether the last drain() left a batch in a deque it looked at (Sender thread only).
        self.drain_left_batches = False
        # Topics that may hold batches (a superset: ready() drops those it finds empty). The Sender's
        # ready/drain/expiry passes visit these instead of every topic ever produced to: with
        # thousands of known topics (KIP-526) and a few active at a time, that is the difference
        # between tens of milliseconds and well under one per Sender loop.
        self._active: dict[str, TopicInfo] = {}
        # Full batches of a compressed producer, compressed before drain (seal()) by the Sender, or
        # by a caller once their records pass a backlog limit: queued batches then hold compressed
        # bytes, and the memory beyond buffer.memory stays bounded. The limit is four full batches,
        # and a compressed batch stages up to MAX_STAGING_BYTES of records: at 4 x batch.size one
        # such batch passed it, so callers compressed nearly every batch themselves, each time
        # waiting for the GIL after the codec let go of it (the before/after figures are in
        # benchmarks/RESULTS.md, "Compressed batches while they wait").
        # Compressed batches stage their records in buffers recycled from batch to batch (see
        # ProducerBatch._leave_staging); their final bytes go to the pool buffer.
        self._stages = self.compression is not CompressionType.NONE
        self._staging_free = StagingBuffers()
        self._to_seal: deque[ProducerBatch] = deque()
        # The native thread compressing full lz4/zstd batches without the GIL, when the producer
        # starts one (start_compression_worker); None: the queue above, compressed in Python.
        self.compression_worker: CompressionWorker | None = None
        self._seal_lock = threading.Lock()
        self._unsealed_bytes = 0
        self._seal_backlog_bytes = 4 * max(self.batch_size, MAX_STAGING_BYTES)
        # Per node: the Cluster snapshot and each of its partitions' place in partitions_for_node().
        self._node_index: dict[int, tuple[Cluster, dict[TopicPartition, int]]] = {}
        # Deques made so far (every topic's), counted under _deques_lock; and per node, the Cluster
        # snapshot and that count with the deques of the node's partitions in the node's order.
        self._deques_made = 0
        self._deques_lock = threading.Lock()
        self._node_deques: dict[int, tuple[Cluster, int, list[tuple[int, PartitionDeque]]]] = {}
        # Appends in progress: list append/pop are atomic, cheaper than a lock taken twice per record.
        self._appends_in_progress: list[None] = []
        self._flushes_in_progress = 0
        self._flush_lock = threading.Lock()
        self.closed = False

        self._moved_sensor: SensorLike | None = None
        if metrics is not None:
            # Feeds circuit-breaker-moved-records-total/-rate (registered with the breaker's metrics).
            self._moved_sensor = metrics.sensor("circuit-breaker-moved-records")

    @classmethod
    def from_config(
        cls,
        cfg: Any,
        *,
        buffer_pool: BufferPool,
        clock_ms: Callable[[], int] | None = None,
        metrics: MetricsLike | None = None,
        transaction_manager: TransactionManagerLike | None = None,
        magic: Callable[[], int] | None = None,
        circuit_break_manager: CircuitBreakManagerLike | None = None,
        adaptive_linger: AdaptiveLinger | None = None,
    ) -> RecordAccumulator:
        """Build from a ProducerConfig (snake_case attributes)."""
        ctype = compression_type_for_name(str(cfg.compression_type))
        level: int | None = None
        if ctype is CompressionType.GZIP:
            level = cfg.compression_gzip_level
        elif ctype is CompressionType.LZ4:
            level = cfg.compression_lz4_level
        elif ctype is CompressionType.ZSTD:
            level = cfg.compression_zstd_level
        if level is not None:
            try:
                level = validate_compression_level(ctype, level)
            except (TypeError, ValueError):
                level = None  # Java's -1 "codec default" for gzip
        return cls(
            batch_size=cfg.batch_size,
            buffer_pool=buffer_pool,
            # A batch never grows past what one request may carry.
            batch_max_size=min(cfg.batch_max_size, cfg.max_request_size),
            batch_initial_size=cfg.batch_initial_size,
            compression_type=ctype,
            compression_level=level,
            linger_ms=cfg.linger_ms,
            retry_backoff_ms=cfg.retry_backoff_ms,
            retry_backoff_max_ms=cfg.retry_backoff_max_ms,
            delivery_timeout_ms=cfg.delivery_timeout_ms,
            adaptive_partitioning_enable=bool(cfg.partitioner_adaptive_partitioning_enable),
            partition_availability_timeout_ms=cfg.partitioner_availability_timeout_ms,
            clock_ms=clock_ms,
            metrics=metrics,
            magic=magic,
            transaction_manager=transaction_manager,
            circuit_break_manager=circuit_break_manager,
            adaptive_linger=adaptive_linger,
        )

    # ------------------------------------------------------------------ helpers
    def _topic(self, topic: str) -> TopicInfo:
        info = self._topic_info.get(topic)
        if info is None:
            with self._topic_lock:
                info = self._topic_info.get(topic)
                if info is None:
                    info = self._topic_info[topic] = TopicInfo(
                        topic, self._partitioner_factory(topic, self.batch_size), self._deque_added
                    )
        return info

    def partition_state(self, topic: str) -> tuple[dict[int, PartitionDeque], StickyPartitioner]:
        """The topic's partition deques and built-in partitioner, for the C send lane.

        The lane appends to the open batch of a deque under the deque's lock, and
        counts bytes to the sticky partition, exactly as :meth:`append` does.
        """
        info = self._topic(topic)
        return info.batches, info.partitioner

    def has_buffered_records(self, topic: str) -> bool:
        """Whether a batch of ``topic`` is still queued here (KIP-526: metadata never evicts such a topic)."""
        info = self._topic_info.get(topic)
        return info is not None and any(dq.batches for dq in list(info.batches.values()))

    def _deque(self, tp: TopicPartition) -> PartitionDeque | None:
        info = self._topic_info.get(tp.topic)
        return None if info is None else info.batches.get(tp.partition)

    def _deque_or_create(self, tp: TopicPartition) -> PartitionDeque:
        return self._topic(tp.topic).deque_for(tp.partition)

    def _all_deques(self) -> Iterator[tuple[TopicPartition, PartitionDeque]]:
        for info in list(self._topic_info.values()):
            for dq in list(info.batches.values()):
                yield dq.topic_partition, dq

    def _builder(
        self, buffer: bytearray, magic: int, topic: str, staging: bytearray | None = None
    ) -> MemoryRecordsBuilder:
        if magic == 2:
            return MemoryRecordsBuilder.for_batch(
                buffer if staging is None else staging,
                self.compression,
                self.compression_level,
                len(buffer),
                topic,
                self._ratio_estimator,
            )
        return MemoryRecordsBuilder(
            buffer,
            magic=magic,
            compression=self.compression,
            compression_level=self.compression_level,
            write_limit=len(buffer),
            topic=topic,
            ratio_estimator=self._ratio_estimator,
        )

    def new_batch_size(self, dq: PartitionDeque, record_bound: int) -> int:
        """The pool buffer a new batch of ``dq``'s partition takes: never less than ``record_bound``.

        ``batch.initial.size`` when set (KIP-782). By default (0) Java's ``batch.size``, except
        for an uncompressed partition whose last drained batch held less than a quarter of it:
        then four times what that batch held (so ``batch.size`` again at that quarter), at
        least ``MIN_NEW_BATCH_BYTES``. Java gives every new batch ``batch.size``; with many
        partitions whose batches go out with a few records (keyed records over a thousand
        partitions), those buffers fill ``buffer.memory`` with empty bytes, callers block in
        ``BufferPool.allocate`` until responses free some, and the batches opened then go out
        nearly empty. A partition that speeds up grows its batch as a hot batch grows
        (KIP-782, :meth:`_grow`), charged and never waiting, and its next batch is sized from
        that one. Not for compressed batches: their drained size is their compressed bytes,
        which say little about the records they staged, and sized from it the next batch's
        staging grew twice as often (docs/architecture.md, "Expandable batches").
        """
        size = self.batch_initial_size
        if size == 0:
            drained = dq.drained_bytes
            size = self.batch_size
            if 0 < drained < size // 4 and not self._stages:
                size = min(size, max(MIN_NEW_BATCH_BYTES, 4 * drained))
        return max(size, record_bound)

    def _new_batch(self, tp: TopicPartition, buffer: bytearray, magic: int, now_ms: int) -> ProducerBatch:
        """A batch on a pool buffer: sendable at batch.size (a multiple of it while the linger is
        stretched, adaptive_linger.py), or at its one record when that is larger."""
        staging = self._take_staging() if self._stages and magic == 2 else None
        batch = ProducerBatch(tp, self._builder(buffer, magic, tp.topic, staging), now_ms, buffer=buffer)
        batch.ready_size = max(self.adaptive_linger.ready_size(self.batch_size, self.batch_max_size), len(buffer))
        if self._stages and magic == 2:
            batch.staging_recycler = self._staging_free.give
            if staging is not None:
                batch.grown += len(staging)  # charged by _take_staging; back with the batch's capacity
        return batch

    def _take_staging(self) -> bytearray | None:
        """A recycled staging buffer, charged to ``buffer.memory`` while a batch holds it.

        Its pages are resident (a batch before filled them), so a batch that stages in it
        holds its whole size. The charge never waits and keeps four ``batch.size``
        buffers free, as growth does; when memory is that short the buffer stays idle
        and the batch stages in its pool buffer, growing it step by step, charged.
        """
        staging = self._staging_free.take()
        if staging is not None and not self.free.try_grow(len(staging), self._growth_keep_free):
            self._staging_free.give(staging)
            return None
        return staging

    # ------------------------------------------------------------------ append (caller threads)
    def append(
        self,
        topic: str | TopicPartition,
        partition: int,
        timestamp: int,
        key: BytesLike | None,
        value: BytesLike | None,
        headers: Headers | None,
        callback: DeliveryCallback | None,
        max_time_to_block_ms: int,
        abort_on_new_batch: bool | int = False,
        now_ms: int | Cluster | None = None,
        cluster: Cluster | None = None,
        *,
        memory: MemorySource | None = None,
        block: bool = True,
    ) -> RecordAppendResult:
        """Append one record to its partition's last batch, or to a new batch (Java's ``RecordAccumulator.append``).

        ``partition == -1`` lets the topic's built-in partitioner pick the sticky
        partition (KIP-794). With ``abort_on_new_batch`` the call returns
        ``abort_for_new_batch=True`` instead of allocating a new batch. The
        Producer facade's shorter form ``(..., max_time_to_block_ms, now_ms, cluster)``
        is accepted too. ``memory`` replaces the BufferPool as the source of a new
        batch's buffer (records that waited for metadata bring their own charge).

        ``block=False`` is a caller that must never wait (an event loop): where a
        caller would wait for memory (the BufferPool, or room beside a muted
        partition) it raises :class:`MemoryWouldBlock` instead, having appended and
        charged nothing. It is a flag beside Java's ``maxTimeToBlock``, not a budget
        of 0, because a budget of 0 keeps Java's meaning (``max.block.ms=0``: the
        record fails at once with BufferExhaustedError), while such a caller waits
        in its own way and sends again; librdkafka's ``RD_KAFKA_MSG_F_BLOCK`` is the
        same flag (without it, ``produce()`` answers "queue full" rather than wait).
        """
        pool: MemorySource = self.free if memory is None else memory
        if not isinstance(abort_on_new_batch, bool):
            # Called as (..., max_time_to_block_ms, now_ms, cluster).
            cluster = now_ms if isinstance(now_ms, Cluster) else cluster
            now_ms = abort_on_new_batch
            abort_on_new_batch = False
        if isinstance(topic, TopicPartition):
            if partition == UNKNOWN_PARTITION:
                partition = topic.partition
            topic = topic.topic
        now = self._clock() if now_ms is None or isinstance(now_ms, Cluster) else now_ms
        return self._append_rows(
            topic,
            partition,
            _OneRecord(timestamp, key, value, headers, callback),
            cluster,
            pool,
            memory,
            max_time_to_block_ms,
            now,
            block,
            abort_on_new_batch,
        )

    def _append_rows(
        self,
        topic: str,
        partition: int,
        rows: _AppendRows,
        cluster: Cluster | None,
        pool: MemorySource,
        memory: MemorySource | None,
        max_time_to_block_ms: int,
        now: int,
        block: bool,
        abort_on_new_batch: bool,
    ) -> RecordAppendResult:
        """Append ``rows`` to their partition's last batch, then to new batches (``append`` and ``append_many``).

        Java's ``RecordAccumulator.append``: pick the partition (the sticky one for
        ``partition == -1``), try the deque's last batch under the deque lock, else
        allocate a buffer *outside* the lock (it may block up to ``max.block.ms``), then
        take the lock again and open a new batch on it unless another thread opened one
        meanwhile; a buffer not used goes back to the pool.

        A bulk range (``rows.one_record`` false) may fill many batches, so the loop goes
        on until its rows are in. Where the two forms differ, each keeps its own rule:

        * ``now``: one record uses the caller's time, read again after allocating (as Java
          does); a bulk range reads the clock in each lock round, as filling batches takes
          time.
        * After allocating, one record takes the same deque's lock again at once (Java's
          second round), and only that round opens a new batch; a bulk range picks the
          partition again first, so that a sticky partition the circuit breaker muted
          while the caller waited for memory is moved off before a whole batch goes to it,
          and opens a new batch in any round that holds a buffer.
        * The sticky partitioner's switch: one record enables it, after an append to the
          last batch, when that made the batch sendable or more batches are queued and the
          last one is full, and in the second round whenever every batch is full (Java's
          ``allBatchesFull``); a bulk range enables it when the round made a batch
          sendable (or closed one) and every batch is full. One record counts a new
          batch's header in its appended bytes (Java's ``appendNewBatch``), and always
          reports its append; a bulk range reports rounds that added bytes.
        * Sealing (compressing closed batches when the Sender is behind): a bulk range
          after each lock round, as it may close many batches; one record once, when done.
        * ``abort_on_new_batch`` and ``block=False`` are for one record only.

        For a bulk range ``batch_is_full`` of the result says whether the Sender should
        be woken (a batch became sendable, or a new one was opened).
        """
        topic_info = self._topic(topic)
        one = rows.one_record
        sticky = partition == UNKNOWN_PARTITION
        breaker = self._routing
        if breaker is not None and sticky and cluster is not None:
            # The built-in partitioner chooses among partitions the circuit breaker has not muted.
            cluster = breaker.cluster_view(cluster)
        view: Cluster = cluster  # type: ignore[assignment]  # not None where used: sticky needs it (checked below)
        self._appends_in_progress.append(None)
        buffer: bytearray | None = None
        magic = 0
        forced_switches = 0
        second = False  # one record's second round: the same deque again, right after allocating
        effective = partition
        wake = full = new_batch = False
        appended = 0
        try:
            if sticky and cluster is None:
                raise ValueError(f"{rows.method} with partition -1 needs the cluster for the built-in partitioner")
            while rows.left:
                if not second:
                    if sticky:
                        effective = topic_info.partitioner.peek_current_partition(view)
                        if (
                            breaker is not None
                            and forced_switches < 3
                            and self._closed_to_records(breaker, TopicPartition(topic, effective))
                            and view.available_partitions_for_topic(topic)
                        ):
                            # The sticky partition was muted since it was chosen: move off it.
                            forced_switches += 1
                            topic_info.partitioner.move_off(effective, view)
                            continue
                    dq = topic_info.deque_for(effective)
                with dq.lock:
                    if sticky and self._partition_changed(topic_info, effective, view):
                        second = False
                        continue
                    if self.closed:
                        raise ProducerClosedError("Producer closed while send in progress")
                    if not one:
                        now = self._clock()
                    batches = dq.batches
                    appended = 0
                    full = new_batch = False
                    crossed = False  # a batch became sendable (or closed) in this round
                    if batches and batches[-1].is_writable:
                        last = batches[-1]
                        builder = last.builder
                        before = builder.estimated_size_in_bytes()
                        was_full = last.is_full()
                        while True:
                            if rows.append_to(last, now) and not sticky:
                                last.pinned = True  # keyed or explicit: it stays on this partition
                            if not rows.left or not self._grow(last, rows.grow_needed(), rows_in_hand=not one):
                                break
                        appended = builder.estimated_size_in_bytes() - before
                        # "Full" once, when this append made the batch sendable: a grown batch past batch.size
                        # would otherwise wake the Sender and switch the sticky partition on every record.
                        crossed = rows.left or (not was_full and last.is_full())
                        if rows.left:
                            self._closed_for_appends(last)
                        full = len(batches) > 1 or crossed
                    if rows.left and buffer is not None and (second or not one):
                        # Another thread may have opened a batch meanwhile (tried above); else a new batch.
                        tp = dq.topic_partition
                        batch = self._new_batch(tp, buffer, magic if one else self._magic(), now)
                        buffer = None
                        new_batch = True
                        batch.pinned = not sticky
                        before = 0 if one else batch.builder.estimated_size_in_bytes()
                        if not rows.append_to(batch, now):  # pragma: no cover - the first record always fits
                            raise IllegalStateError(f"a new batch for {tp} refused its first record")
                        while rows.left and self._grow(batch, rows.grow_needed(), rows_in_hand=not one):
                            rows.append_to(batch, now)
                        size = batch.builder.estimated_size_in_bytes() - before
                        appended = size if one else appended + size
                        self._enqueue_new_batch(topic_info, dq, batch)
                        if rows.left:
                            self._closed_for_appends(batch)
                        crossed = crossed or batch.is_full() or rows.left
                        full = len(batches) > 1 or batch.is_full()
                    if sticky and (not rows.left if one else appended):
                        if one:
                            switch = self._all_batches_full(dq) if second else full and self._all_batches_full(dq)
                        else:
                            switch = crossed and self._all_batches_full(dq)
                        topic_info.partitioner.update_partition_info(effective, appended, view, switch)
                if not one:
                    wake = wake or full or new_batch
                    if self._to_seal:
                        self.seal_if_behind()  # outside the deque lock (see self._closed_for_appends)
                if not rows.left:
                    break
                if abort_on_new_batch:
                    return RecordAppendResult(None, False, False, True, effective, 0)
                if one:
                    magic = self._magic()
                    second = True
                if buffer is None:
                    if not sticky and breaker is not None:
                        max_time_to_block_ms = self._await_room_while_muted(
                            dq.topic_partition, max_time_to_block_ms, block
                        )
                    # dq is the deque this round appended to; its drained size is a hint read without the lock.
                    size = self.new_batch_size(dq, rows.size_bound(magic, self.compression))
                    if block or memory is not None or max_time_to_block_ms <= 0:
                        # Outside the deque lock: this may block for up to max.block.ms. (Charged memory
                        # never waits; a budget of 0 fails at once, for every caller, as in Java.)
                        buffer = pool.allocate(size, max_time_to_block_ms)
                    else:
                        buffer = self.free.try_allocate(size)
                        if buffer is None:
                            raise MemoryWouldBlock(size)  # the caller waits its own way, then sends again
                    if one:
                        now = self._clock()
            return RecordAppendResult(rows.future, full if one else wake, new_batch, False, effective, appended)
        finally:
            if buffer is not None:
                # Another thread opened a batch meanwhile (or we failed): give the memory back.
                pool.deallocate(buffer, len(buffer))
            self._appends_in_progress.pop()
            if one and self._to_seal:
                self.seal_if_behind()

    def _enqueue_new_batch(self, topic_info: TopicInfo, dq: PartitionDeque, batch: ProducerBatch) -> None:
        """Queue a new batch at the end of ``dq`` (its lock held): drainable, and incomplete until done."""
        dq.batches.append(batch)
        self._active[batch.topic_partition.topic] = topic_info
        self._incomplete.add(batch)

    def open_new_batch(
        self,
        dq: PartitionDeque,
        topic: str,
        key: bytes,
        value: bytes | None,
        callback: DeliveryCallback | None,
        now_ms: int,
    ) -> ProducerBatch | None:
        """Open and queue an empty batch on ``dq`` for a keyed record of the C send lane, which holds ``dq``'s lock.

        The first half of Java's ``appendNewBatch``: the lane appends to a partition's open
        batch itself, and when the partition has none (every batch drained, or the last one
        closed for appends) it calls this instead of the whole Python ``send()`` path, whose
        new-batch steps (:meth:`_new_batch` and :meth:`_enqueue_new_batch`) it shares. The
        lane then appends the record to the returned batch as to any open batch, still under
        the lock, so no other thread sees the batch empty: the Sender drains and a forced
        close aborts under that lock. The buffer is sized for ``key`` and ``value``, so the
        record always fits. With a ``callback`` the batch gets its list of thunks here,
        because the lane allocates nothing the cyclic GC tracks under the lock.

        It never waits, so it may run under the lock: None, with nothing queued or charged,
        where the Python path would decide or wait (the producer closing, a pre-v2 broker, no
        memory free now, a partition the circuit breaker is vacating); the lane then runs that
        path. A batch whose last record has no room is not this method's either: the Python
        path first lets it grow (KIP-782).
        """
        # Counted as an append in progress until the batch is incomplete, so that a forced
        # close (abort_incomplete_batches) started meanwhile waits for it and aborts it.
        self._appends_in_progress.append(None)
        try:
            if self.closed:
                return None
            magic = self._magic()
            tp = dq.topic_partition
            routing = self._routing
            if magic != 2 or (routing is not None and tp in routing.partitions_to_vacate()):
                return None
            size = self.new_batch_size(dq, estimate_size_upper_bound(magic, self.compression, key, value, None))
            buffer = self.free.try_allocate(size)
            if buffer is None:
                return None
            batch = self._new_batch(tp, buffer, magic, now_ms)
            if callback is not None:
                batch.thunks = []
            self._enqueue_new_batch(self._topic(topic), dq, batch)
            return batch
        finally:
            self._appends_in_progress.pop()

    def _closed_to_records(self, routing: CircuitBreakRoutingLike, tp: TopicPartition) -> bool:
        """Muted by the circuit breaker, or probe-due but already holding its probe batch."""
        if not routing.may_send(tp):
            return True
        breaker = self._breaker
        if breaker is None or not breaker.is_muted(tp):
            return False
        dq = self._deque(tp)
        return dq is not None and bool(dq.batches)

    def sticky_partition(self, topic: str, cluster: Cluster) -> int:
        """The topic's current sticky partition (KIP-794), choosing one when there is none yet.

        With a circuit breaker it is chosen among the partitions the breaker has not muted.
        """
        breaker = self._routing
        if breaker is not None:
            cluster = breaker.cluster_view(cluster)
        return self._topic(topic).partitioner.peek_current_partition(cluster)

    @staticmethod
    def _partition_changed(topic_info: TopicInfo, partition: int, cluster: Cluster | None) -> bool:
        """Another thread switched the sticky partition while we waited for the deque: start over."""
        assert cluster is not None
        current = topic_info.partitioner.peek_current_partition(cluster)
        if current != partition:
            log.debug("sticky partition changed from %d to %d while appending; retrying", partition, current)
            return True
        return False

    @staticmethod
    def _all_batches_full(dq: PartitionDeque) -> bool:
        last = dq.batches[-1] if dq.batches else None
        return last is None or last.is_full()

    # ------------------------------------------------------------------ ready: the Sender's ready check
    # The Sender's ready check: which leader nodes have a partition worth draining now, and when to look again.
    #
    # Java's ``RecordAccumulator.ready``. It also feeds each topic's partitioner the
    # queue sizes KIP-794's adaptive partitioning weighs, and keeps the per-node
    # latency stats behind ``partitioner.availability.timeout.ms``. Runs on the
    # Sender thread, once per loop: the functions take the accumulator, whose
    # queues and flags they read.

    def _muted_delay_ms(self, tp: TopicPartition, now_ms: int) -> int | None:
        """None when the partition may send; else how long until it might (``NO_DELAY``: unknown)."""
        if tp in self._muted:
            return NO_DELAY
        breaker = self._breaker
        if breaker is None or not breaker.is_muted(tp):
            return None
        # A partition muted by the circuit breaker sends only its probe, once the probe is due.
        retry_at = breaker.retry_at_ms(tp)
        if retry_at is None or breaker.probe_in_flight(tp):
            return NO_DELAY
        return None if now_ms >= retry_at else retry_at - now_ms

    def new_batch_sendable_at(self, now_ms: int) -> int:
        """When a batch opened at ``now_ms``, not full, becomes sendable by :meth:`ready`'s rule.

        At once while the producer closes, a flush is in progress or a thread waits for
        memory; else when the linger has passed (linger.ms, or longer while the Sender
        stretches it: adaptive_linger.py). The caller that opened the batch wakes
        the Sender only if it would not look at its partitions by then
        (``NetworkClient.wakeup_by``). A full batch, or one behind another, is sendable
        now and always wakes it.
        """
        if self.closed or self.flush_in_progress() or self.free.queued() > 0:
            return now_ms
        return now_ms + self.adaptive_linger.linger_ms

    def ready(self, cluster: Cluster, now_ms: int) -> ReadyCheckResult:
        """Leader nodes with at least one sendable partition (Java's ``RecordAccumulator.ready``).

        A partition is sendable when its first batch is full (or more than one is
        queued), the linger has passed (linger.ms, or longer while the Sender stretches
        it: adaptive_linger.py), the pool has waiters, the accumulator is
        closing, or a flush is in progress, and it is not backing off after a
        retry. Muted partitions are skipped. Along the way each topic's queue sizes
        feed its partitioner's load stats (KIP-794 adaptive partitioning).
        """
        ready_nodes: set[int] = set()
        next_delay = NO_DELAY
        unknown_leader_topics: set[str] = set()
        exhausted = self.free.queued() > 0
        active = self._active
        for topic, info in list(active.items()):
            # Dropped first, put back if a batch is found: an append that races this scan puts its
            # topic back itself (after appending), so no topic with a batch is ever left out.
            active.pop(topic, None)
            next_delay, holds_batches = self._partition_ready(
                cluster, now_ms, topic, info, next_delay, ready_nodes, unknown_leader_topics, exhausted
            )
            if holds_batches:
                active[topic] = info
        return ReadyCheckResult(ready_nodes, next_delay, unknown_leader_topics)

    def _partition_ready(
        self,
        cluster: Cluster,
        now_ms: int,
        topic: str,
        info: TopicInfo,
        next_delay: int,
        ready_nodes: set[int],
        unknown_leader_topics: set[str],
        exhausted: bool,
    ) -> tuple[int, bool]:
        """The next ready-check delay, and whether any of the topic's deques holds a batch."""
        entries = info.partition_leaders(cluster)
        holds_batches = False
        queue_sizes: list[int] | None = None
        partition_ids: list[int] | None = None
        # The queue sizes feed the next sticky choice of the topic's built-in partitioner, so they
        # are counted only once a keyless record has made one (``uses_load_stats``): a topic whose
        # records all carry a key or a partition never reads them.
        if (
            self.adaptive_partitioning_enable
            and info.partitioner.uses_load_stats()
            and len(entries) >= len(cluster.partitions_for_topic(topic))
        ):
            queue_sizes = [0] * len(entries)
            partition_ids = [0] * len(entries)
        index = -1
        flushing = self.flush_in_progress()
        linger_ms = self.adaptive_linger.linger_ms
        breaker = self._routing
        worker = self.compression_worker
        availability_timeout_ms = self.partition_availability_timeout_ms
        for partition, dq, tp, leader in entries:
            if queue_sizes is None and holds_batches and leader is not None and leader.id in ready_nodes:
                # Past its queue size, a partition whose leader is ready already has nothing to tell
                # this pass (the drain looks at each of its batches), and the topic is known to hold
                # batches: with no queue sizes to count, its lock need not be taken. Over thousands
                # of partitions of one ready leader this is most of the pass.
                continue
            # Partitions the circuit breaker closed to records stay out of the adaptive choice.
            counted = leader is not None and (breaker is None or not self._closed_to_records(breaker, tp))
            if counted and queue_sizes is not None and partition_ids is not None:
                index += 1
                partition_ids[index] = partition
            lock = dq.lock
            lock.acquire()  # not ``with`` (docs/architecture.md, "Locks on the record path")
            try:
                batches = dq.batches
                if not batches:
                    continue
                holds_batches = True
                deque_size = len(batches)
                # Past the queue size, a partition whose leader is unknown or already ready has
                # nothing more to tell this pass (the drain looks at each batch of a ready node).
                batch = None if leader is None or leader.id in ready_nodes else batches[0]
                if batch is not None:
                    waited = batch.waited_time_ms(now_ms)
                    backoff_ms = batch_backoff_ms(batch)
                    backing_off = batch.attempts > 0 and waited < backoff_ms
                    full = deque_size > 1 or batch.is_full()
                    # Still on the compression worker: not drainable yet, and the worker wakes the Sender.
                    compressing = worker is not None and batch.compression_pending()
            finally:
                lock.release()
            if leader is None:
                unknown_leader_topics.add(topic)
                continue
            if counted and queue_sizes is not None:
                queue_sizes[index] = deque_size
                if availability_timeout_ms > 0:
                    stats = self._node_stats.get(leader.id)
                    if stats is not None and stats.ready_time_ms - stats.drain_time_ms > availability_timeout_ms:
                        # The leader has not been drainable for too long: keep the partitioner away from it.
                        index -= 1
            if batch is None:  # its leader is ready already
                continue
            muted_delay = self._muted_delay_ms(tp, now_ms)
            if muted_delay is not None:
                next_delay = min(next_delay, muted_delay)
                continue
            if compressing:
                continue
            time_to_wait = backoff_ms if backing_off else linger_ms
            expired = waited >= time_to_wait
            sendable = full or expired or exhausted or self.closed or flushing
            if sendable and not backing_off:
                ready_nodes.add(leader.id)
            else:
                next_delay = min(next_delay, max(time_to_wait - waited, 0))
        if holds_batches:
            info.partitioner.update_partition_load_stats(queue_sizes, partition_ids, index + 1)
        else:
            # Idle until its next batch: no queue is longer than another, so choose uniformly.
            info.partitioner.update_partition_load_stats(None, None, 0)
        return next_delay, holds_batches

    def update_node_latency_stats(self, node_id: int, now_ms: int, can_drain: bool) -> None:
        """The Sender reports a ready node it could (or could not) drain (Java's updateNodeLatencyStats)."""
        if self.partition_availability_timeout_ms <= 0:
            return
        stats = self._node_stats.get(node_id)
        if stats is None:
            stats = self._node_stats.setdefault(node_id, NodeLatencyStats(now_ms))
        if can_drain:
            stats.drain_time_ms = now_ms
        stats.ready_time_ms = now_ms

    # ------------------------------------------------------------------ drain: the batches each ready node gets
    # The Sender's drain: the batches each ready node gets in its next produce request (Java's ``RecordAccumulator.drain``).
    #
    # Per node, the partitions it leads are visited from a rotating index, so that
    # none starves; each gives its first batch while the request stays within
    # ``max.request.size``. The drain is where a batch gets its producer id, epoch
    # and sequence (idempotence), where a transactional producer's partitions wait
    # for AddPartitionsToTxn, and where a circuit breaker's muted partitions send
    # only their probe.
    #
    # With a circuit breaker it also charges KIP-782's in-flight growth budget: the
    # bytes past ``batch.size`` that the batches in flight to one leader may hold
    # (see ``in_flight_growth_by_node``).

    def drain(
        self, cluster: Cluster, node_ids: Iterable[int], max_request_size: int, now_ms: int
    ) -> dict[int, list[ProducerBatch]]:
        """The batches to send, per node: at most ``max_request_size`` bytes each, at least one batch (Java's ``RecordAccumulator.drain``).

        Afterwards :attr:`drain_left_batches` says whether a partition of those nodes still
        holds a batch: one queued behind the batch taken, or one the drain passed over
        (muted, backing off, waiting for its transaction or its compression, or past the
        request's size). Only then may another loop find something to send at once; Java's
        Sender loops again after every drain (a poll timeout of 0) without asking.
        """
        out: dict[int, list[ProducerBatch]] = {}
        self.drain_left_batches = False
        for node_id in node_ids:
            out[node_id] = self._drain_node(cluster, node_id, max_request_size, now_ms)
        return out

    def _partition_index(
        self, cluster: Cluster, node_id: int, parts: Sequence[PartitionInfo]
    ) -> dict[TopicPartition, int]:
        cached = self._node_index.get(node_id)
        if cached is not None and cached[0] is cluster:
            return cached[1]
        index = {TopicPartition(p.topic, p.partition): i for i, p in enumerate(parts)}
        self._node_index[node_id] = (cluster, index)
        return index

    def _deque_added(self) -> None:
        """A topic made a deque (``TopicInfo.deque_for``): the per-node lists of deques are out of date."""
        with self._deques_lock:
            self._deques_made += 1

    def _drain_candidates(
        self, cluster: Cluster, node_id: int, parts: Sequence[PartitionInfo], start: int
    ) -> list[tuple[int, PartitionDeque]]:
        """The node's partition deques to visit, with their positions in ``parts``, from ``start`` on, wrapping.

        Java's drain walks every partition of the node from the rotating index and stops when the
        request is full. Walking this client's deques of the node (kept per ``Cluster`` snapshot
        and remade when a deque is added) does the same, an empty deque costing a peek. Where
        most of the node's deques are empty (a producer that once wrote to many partitions and
        now writes to few), the deques of the topics holding batches are gathered and sorted
        instead, so that the cost follows the deques in use, not every deque ever made.
        """
        made = self._deques_made  # read before the deques are listed: one added meanwhile makes the next call remake them
        cached = self._node_deques.get(node_id)
        if cached is not None and cached[0] is cluster and cached[1] == made:
            entries = cached[2]
        else:
            index = self._partition_index(cluster, node_id, parts)
            entries = []
            for info in list(self._topic_info.values()):
                for dq in list(info.batches.values()):
                    i = index.get(dq.topic_partition)
                    if i is not None:
                        entries.append((i, dq))
            entries.sort(key=_position)
            self._node_deques[node_id] = (cluster, made, entries)
        active = list(self._active.values())
        if len(entries) > 2 * sum(len(info.batches) for info in active):
            index = self._partition_index(cluster, node_id, parts)
            entries = []
            for info in active:
                for dq in list(info.batches.values()):
                    if dq.batches:  # a peek; the drain looks again under the lock
                        i = index.get(dq.topic_partition)
                        if i is not None:
                            entries.append((i, dq))
            entries.sort(key=_position)
        k = bisect.bisect_left(entries, start, key=_position)
        return entries[k:] + entries[:k]

    def _drain_node(
        self, cluster: Cluster, node_id: int, max_size: int, now_ms: int
    ) -> list[ProducerBatch]:
        parts = cluster.partitions_for_node(node_id)
        ready: list[ProducerBatch] = []
        if not parts:
            return ready
        n = len(parts)
        start = self._drain_index.get(node_id, 0) % n
        size = 0
        tm = self._tm
        transactional = self._transactional
        worker = self.compression_worker
        # Whether a deque visited here still holds a batch when the drain is done; a partition
        # passed over keeps its batches (every ``continue`` below the emptiness check).
        left = False
        for i, dq in self._drain_candidates(cluster, node_id, parts, start):
            # Next time start after this partition, unless we stop at it below.
            self._drain_index[node_id] = (i + 1) % n
            if not dq.batches:
                continue  # a peek, as Java's drain passes an empty deque; a batch appended since goes next time
            tp = dq.topic_partition
            if tp in self._muted:
                left = True
                continue
            lock = dq.lock
            lock.acquire()  # not ``with`` (docs/architecture.md, "Locks on the record path")
            try:
                if not dq.batches:
                    continue
                left_before, left = left, True  # until its batch is taken below
                first = dq.batches[0]
                if first.attempts > 0 and first.waited_time_ms(now_ms) < batch_backoff_ms(first):
                    continue
                if worker is not None:
                    if first.is_writable and first.builder.uncompressed_size >= WORKER_DRAIN_BYTES:
                        # A hot batch drained while still open: its records go to the worker too, rather
                        # than to a codec on this thread (which waits for the GIL after it), and the
                        # batch goes out on a later pass.
                        self._closed_for_appends(first)
                    if first.compression_pending():
                        continue  # the worker wakes the Sender when it is done
                if ready and size + first.estimated_size_in_bytes() > max_size:
                    # This request is full; this partition goes first next time.
                    self._drain_index[node_id] = i
                    break
                if tm is not None and not first.has_sequence() and tm.retry_in_flight(tp):
                    # Stricter than Java: no new batch of a partition while a retried one is in
                    # flight. Java relies on the new leader rejecting the newer sequence
                    # (OUT_OF_ORDER); when the leader moves twice in a row, the retry can land
                    # after the newer batch on a broker that does not check sequences
                    # (librdkafka's mock cluster does not: 1 run in 20 of
                    # test_leader_move_mid_stream broke the order), so the producer keeps the
                    # order itself. Only this partition waits, and only while it recovers.
                    continue
                if tm is not None and _should_stop_draining(first, tp, tm):
                    self._drain_index[node_id] = i
                    break
                if transactional and tm is not None and not tm.may_drain_partition(tp):
                    # Not in the transaction yet: the Sender sends AddPartitionsToTxn first.
                    continue
                excess = first.capacity - self.batch_size
                if excess > 0 and self._routing is not None:
                    # KIP-782 growth in flight, bounded per leader (see in_flight_growth_by_node).
                    held = self._in_flight_growth.get(node_id, 0)
                    if held > 0 and held + excess > self._in_flight_growth_limit:
                        continue
                breaker = self._breaker
                if breaker is not None and breaker.is_muted(tp) and not breaker.allow_probe(tp, now_ms):
                    continue
                batch = dq.batches.popleft()
                left = left_before or bool(dq.batches)
                if excess > 0 and self._routing is not None:
                    with self._incomplete.lock:
                        self._in_flight_growth[node_id] = self._in_flight_growth.get(node_id, 0) + excess
                        batch.growth_node = node_id
                if tm is not None and not batch.has_sequence():
                    producer_id, epoch = tm.producer_id_and_epoch()
                    sequence = tm.next_sequence(tp)
                    batch.set_producer_state(producer_id, epoch, sequence, transactional)
                    tm.increment_sequence(tp, batch.record_count)
                    log.debug(
                        "assigned producer id %d, epoch %d, sequence %d to a batch of %d records for %s",
                        producer_id,
                        epoch,
                        sequence,
                        batch.record_count,
                        tp,
                    )
            finally:
                lock.release()
            batch.close()
            batch_bytes = batch.estimated_size_in_bytes()
            size += batch_bytes
            dq.drained_bytes = batch_bytes  # the partition's next new batch is sized from it
            ready.append(batch)
            batch.drained(now_ms)
        if left:
            self.drain_left_batches = True
        return ready

    # ------------------------------------------------------------------ growth: KIP-782 expandable batches and the in-flight growth budget
    # KIP-782 expandable batches: growing a hot partition's open batch, and the in-flight growth budget per leader.
    #
    # A batch is sendable at ``batch.size``; until the Sender drains it, records keep
    # going into it, and when it runs out of room :meth:`_grow` raises its limit,
    # charged to ``buffer.memory`` first and never waiting (the rule is in
    # ``docs/architecture.md``, its measurements in ``benchmarks/RESULTS.md``, "Expandable batches"). With a
    # circuit breaker, the drain also bounds the bytes past ``batch.size`` that the
    # batches in flight to one leader hold between them (:meth:`in_flight_growth_by_node`);
    # :meth:`release_growth` gives a batch's share back when it completes or comes
    # back for a retry. The budget is guarded by the incomplete-batches lock.

    def _grow(self, batch: ProducerBatch, needed: int, *, rows_in_hand: bool = False) -> bool:
        """Let an open batch that ran out of room take more records (KIP-782 expandable batches).

        The limit doubles (at least by ``needed`` bytes), up to ``batch.size`` freely and past
        it up to ``batch.max.size`` (bounded by ``max.request.size``; ``batch.size`` again for a
        topic whose broker refused a batch as too large). Each step is charged to
        ``buffer.memory`` first and never waits: past ``batch.size`` it must leave room for four
        ``batch.size`` batches still free and nobody queued for memory, so many partitions' open
        batches keep Java's footprint and a caller never blocks because a batch grew. A
        partition the circuit breaker muted on its own does not grow past ``batch.size``. The
        batch is the last of its deque, not yet drained (its partition is hot), and the deque
        lock is held. False: it stays as it is, and the caller closes it.

        ``rows_in_hand``: a bulk call (``send_batch``, ``send_arrow``) still holding rows for
        this partition. Then the four free buffers are not kept: refusing would only make the
        same call open a new ``batch.size`` batch for those rows at once, taking the same memory
        as more, smaller batches (each with its own per-batch cost for the Sender and the
        broker). Nobody queued for memory is still required, so growth never jumps a waiter.
        """
        builder = batch.builder
        if batch.buffer is None or batch.is_split_batch or builder.magic != 2:
            return False
        limit = builder.write_limit
        tp = batch.topic_partition
        routing = self._routing
        muted = routing is not None and tp in routing.partitions_to_vacate()
        if tp.topic in self._growth_capped or muted:
            # A topic whose broker refused a grown batch, or a partition the circuit breaker muted:
            # its batches wait for a leader that is not answering, so they stay at batch.size.
            bound = self.batch_size
        else:
            bound = self.batch_max_size
        if self.compression is not CompressionType.NONE:
            # A muted partition's compressed batch stages no more records than it was charged.
            return not muted and self._grow_staging(batch, bound, needed, rows_in_hand)
        if limit >= bound:
            return False
        target = max(limit * 2, limit + needed)
        if target > bound:
            if limit + needed > bound:
                return False
            target = bound
        keep_free = self._growth_keep_free if target > self.batch_size and not rows_in_hand else 0
        if not self.free.try_grow(target - limit, keep_free):
            return False
        batch.grown += target - limit
        builder.grow_write_limit(target)
        return True

    def _grow_staging(self, batch: ProducerBatch, bound: int, needed: int, rows_in_hand: bool) -> bool:
        """Let a compressed batch stage more uncompressed records, every byte charged to ``buffer.memory`` first.

        A compressed batch's size is its records' size times the estimated ratio, and its
        records are staged uncompressed until it closes. A new batch stages at most the
        bytes it was charged (``STAGING_RATIO_FLOOR``); past that, each step doubles what it
        may stage (at least by ``needed``), up to MAX_GROWN_STAGING_BYTES of records, and
        the estimate it fills against moves towards the topic's observed ratio, its limit
        growing with it within ``bound`` (``batch.max.size``). For records that compress
        well this, not ``batch.size``, is what ends a hot batch: 1 KB records compressing
        50:1 would otherwise close at 16 KB of records and 300 bytes on the wire, where
        Java's 16 KB batch (which compresses as it appends) carries 800 KB of them, and each
        batch costs the Sender, the request and the broker a fixed amount.

        The charge makes the batch's ``capacity`` cover both what it stages and its limit,
        under the same rules as :meth:`_grow`: never waiting, and for a single record
        keeping four ``batch.size`` buffers free, so that across many partitions the
        staged records stay within ``buffer.memory`` and a caller never blocks because a
        batch grew.
        """
        builder = batch.builder
        factor = COMPRESSION_RATE_ESTIMATION_FACTOR
        limit = builder.write_limit
        ratio = builder.estimated_compression_ratio
        staged = limit / (ratio * factor)  # the records this batch may hold now
        if staged >= MAX_GROWN_STAGING_BYTES:
            return False
        target = min(max(2 * staged, staged + needed), float(MAX_GROWN_STAGING_BYTES))
        observed = self._ratio_estimator.estimation(batch.topic_partition.topic, self.compression)
        new_ratio = max(observed, ratio * staged / target)
        new_limit = min(bound, max(limit, int(target * new_ratio * factor)))
        target = min(target, new_limit / (new_ratio * factor))
        if target <= staged * 1.01:
            return False
        held = max(int(target), new_limit)
        charge = held - batch.capacity
        keep_free = self._growth_keep_free if held > self.batch_size and not rows_in_hand else 0
        if charge > 0 and not self.free.try_grow(charge, keep_free):
            return False
        batch.grown += max(charge, 0)
        builder.set_estimated_compression_ratio(new_ratio)
        if new_limit > limit:
            builder.grow_write_limit(new_limit)
        return True

    def release_growth(self, batch: ProducerBatch) -> None:
        """The batch is no longer in flight: its bytes past batch.size leave its leader's budget."""
        if batch.growth_node >= 0:
            with self._incomplete.lock:
                self.release_growth_locked(batch)

    def release_growth_locked(self, batch: ProducerBatch) -> None:
        node = batch.growth_node
        if node < 0:
            return
        batch.growth_node = -1
        left = self._in_flight_growth.get(node, 0) - (batch.capacity - self.batch_size)
        if left > 0:
            self._in_flight_growth[node] = left
        else:
            self._in_flight_growth.pop(node, None)

    def in_flight_growth_by_node(self) -> dict[int, int]:
        """Bytes past ``batch.size`` held by the batches in flight, per leader node (with a circuit breaker).

        KIP-782 lets a waiting batch grow to ``batch.max.size``; a batch that is sent
        keeps its partition, so a leader that then stops answering keeps what its
        in-flight window carried until the requests complete, whatever the breaker
        decides. With a breaker, the drain sends a grown batch to a leader only while
        that leader's in-flight growth stays within an eighth of ``buffer.memory`` (or
        when it has none in flight, so that progress is never blocked); a grown batch
        that waits stays in its queue, where a mute can still move it. A muted
        leader therefore holds at most its in-flight window at ``batch.size`` per
        batch plus that eighth, instead of
        ``max.in.flight.requests.per.connection`` x partitions x ``batch.max.size``.
        """
        with self._incomplete.lock:
            return dict(self._in_flight_growth)

    # ------------------------------------------------------------------ sealing: compressing full batches before the drain
    # Compressing full batches before the drain (``ProducerBatch.seal``), on the Sender thread or by a caller.
    #
    # With compression on, a batch closed for appends joins a queue, so that batches
    # waiting to be drained hold compressed bytes rather than records:
    #
    # * with the native compression worker (lz4 and zstd, :mod:`kproducer.record.compression_worker`)
    #   the batch's records go to the worker at once, and each Sender loop installs the
    #   finished results, in order, without waiting for an unfinished one;
    # * otherwise the Sender compresses the queue itself each loop.
    #
    # When the uncompressed backlog passes a limit (the Sender or the worker is not
    # keeping up), the caller that closed the batch seals the backlog itself, waiting for
    # the worker's results or compressing: backpressure, as Java's callers compress their
    # own records. Uncompressed producers never queue here.

    def _closed_for_appends(self, batch: ProducerBatch) -> None:
        """No more records into ``batch``; queue it for compression (compressed producers only).

        Called with the batch's deque lock held, so it only queues: the compression itself
        runs after the lock is released (:meth:`seal_if_behind`) or on the Sender thread. A
        codec lets go of the GIL while it works; compressing under the deque lock made the
        Sender's ready() wait for that lock, and then for the GIL, up to a switch interval
        (docs/architecture.md, "The GIL and the Sender's system calls").
        """
        was_writable = batch.is_writable
        batch.close_for_record_appends()
        if not was_writable or not self._stages:  # _stages: compressed (no enum look-up per batch)
            return  # (append's second try meets the same full batch again)
        worker = self.compression_worker
        if worker is not None:
            batch.start_compression(worker)  # queued on the native worker, no GIL wait (False: Python later)
        with self._seal_lock:
            self._to_seal.append(batch)
            self._unsealed_bytes += batch.builder.uncompressed_size

    def seal_if_behind(self) -> None:
        """After an append, outside any deque lock: seal the backlog when the Sender is not keeping up.

        Backpressure, as Java's callers compress their own records: past the backlog limit
        the appending caller compresses the queued full batches itself, or waits for the
        worker's results.
        """
        if self._unsealed_bytes <= self._seal_backlog_bytes:  # an unlocked read: at worst one append late
            return
        if self.compression_worker is None:
            self.seal_full_batches(wait=True)
            return
        # With the worker, the backlog is mostly batches it has finished and the Sender has not taken
        # yet: take those. Waiting for an unfinished one lets go of the GIL, and getting it back from
        # the Sender cost callers 1.5 ms a time (zstd, 100 B records: 57 waits, 88 ms of a 0.53 s run);
        # so a caller waits only when the worker itself is far behind.
        self.seal_full_batches(wait=False)
        if self._unsealed_bytes > _WORKER_BACKLOG_FACTOR * self._seal_backlog_bytes:
            self.seal_full_batches(wait=True)

    def seal_full_batches(self, *, wait: bool = True) -> None:
        """Seal the full batches closed for appends, oldest first (see ProducerBatch.seal).

        ``wait=False`` (the Sender's loop): stop at the first batch still on the compression
        worker, rather than wait for it; the worker takes the queue in the same order.
        """
        if not self._to_seal:  # every Sender loop: no lock when there is nothing (always, uncompressed)
            return
        while True:
            with self._seal_lock:
                if not self._to_seal:
                    return
                batch = self._to_seal[0]
                if not wait and batch.compression_running():
                    return
                self._to_seal.popleft()
                self._unsealed_bytes -= batch.builder.uncompressed_size
            if not batch.is_done:
                batch.seal()

    # ------------------------------------------------------------------ requeue: retries and splits
    # Batches coming back from the Sender to the front of their queue: retried, split, or given a new producer id.
    #
    # Java's ``RecordAccumulator.reenqueue`` and ``splitAndReenqueue``. With
    # idempotence a batch that already has a sequence goes back in sequence order, so
    # that the partition's batches are sent again in the order the broker expects.

    def reenqueue(self, batch: ProducerBatch, now_ms: int) -> None:
        """Put a batch back at the front of its deque for a retry, in sequence order when idempotent."""
        batch.reenqueued(now_ms)
        self.release_growth(batch)
        batch.retry_backoff_ms = self._retry_backoff.backoff(batch.attempts - 1)
        dq = self._deque_or_create(batch.topic_partition)
        with dq.lock:
            if self._tm is not None and batch.has_sequence():
                _insert_in_sequence_order(dq.batches, batch)
            else:
                dq.batches.appendleft(batch)
            self._active[batch.topic_partition.topic] = self._topic(batch.topic_partition.topic)

    def split_and_reenqueue(self, big_batch: ProducerBatch) -> int:
        """Split a batch rejected with MESSAGE_TOO_LARGE and queue the parts at the front; the number of parts.

        The caller still deallocates ``big_batch`` (its buffer goes back to the pool).
        """
        topic = big_batch.topic_partition.topic
        if self.compression is not CompressionType.NONE:
            # The estimate was too optimistic: start again from the observed ratio.
            self._ratio_estimator.update_estimation(topic, self.compression, big_batch.compression_rate())
        magic = big_batch.magic
        if big_batch.capacity > self.batch_size:
            # The broker's message.max.bytes (or the topic's max.message.bytes) is below what the
            # batch grew to: this topic's batches stay within batch.size from now on.
            self._growth_capped.add(topic)

        def factory(buf: bytearray) -> MemoryRecordsBuilder:
            return self._builder(buf, magic, topic)

        parts = big_batch.split(self.batch_size, factory)
        dq = self._deque_or_create(big_batch.topic_partition)
        for part in reversed(parts):
            self._incomplete.add(part)
            with dq.lock:
                if self._tm is not None and part.has_sequence():
                    _insert_in_sequence_order(dq.batches, part)
                else:
                    dq.batches.appendleft(part)
                self._active[topic] = self._topic(topic)
        return len(parts)

    def reset_producer_state_of_queued_batches(self) -> None:
        """A new producer id is coming: queued batches lose their old sequences and get new ones at drain."""
        for _tp, dq in self._all_deques():
            with dq.lock:
                for batch in dq.batches:
                    if batch.has_sequence():
                        batch.reset_producer_state(-1, -1, NO_SEQUENCE)

    # ------------------------------------------------------------------ expiry and abort
    # Batches that end without a broker's answer: queued past ``delivery.timeout.ms``, or aborted.
    #
    # Java's ``RecordAccumulator.expiredBatches`` and ``abortIncompleteBatches``. The
    # Sender fails expired batches through their futures; a forced close (or a
    # fatal idempotence error, for the batches never drained) aborts them here.

    def none_created_before(self, cutoff_ms: int) -> bool:
        """True when no incomplete batch, queued or in flight, was created before ``cutoff_ms``.

        The Sender asks it before looking through its in-flight batches for any past
        ``delivery.timeout.ms``, as :meth:`expired_batches` does before the queues.
        """
        return self._incomplete.none_created_before(cutoff_ms)

    def expired_batches(self, now_ms: int) -> list[ProducerBatch]:
        """Queued batches past ``delivery.timeout.ms``, removed from their deques (in-flight ones are the Sender's)."""
        expired: list[ProducerBatch] = []
        if self._incomplete.none_created_before(now_ms - self.delivery_timeout_ms + 1):
            return expired  # every batch, queued or not, is younger than delivery.timeout.ms
        for info in list(self._active.values()):
            for dq in list(info.batches.values()):
                self._expire_deque(dq, now_ms, expired)
        return expired

    def queued_batches_led_by(self, cluster: Cluster, node_id: int) -> list[ProducerBatch]:
        """Every queued batch of the partitions ``node_id`` leads, removed from their deques, in deque order.

        For a leader that refuses this client's TLS handshake or SASL credentials: its batches can only
        wait for ``delivery.timeout.ms``, so the Sender fails them with the refusal at once.
        """
        taken: list[ProducerBatch] = []
        for topic, info in list(self._active.items()):
            for partition, dq in list(info.batches.items()):
                leader = cluster.leader_for(TopicPartition(topic, partition))
                if leader is None or leader.id != node_id:
                    continue
                with dq.lock:
                    batches = dq.batches
                    while batches:
                        batch = batches.popleft()
                        batch.abort_record_appends()
                        taken.append(batch)
        return taken

    def _expire_deque(
        self, dq: PartitionDeque, now_ms: int, expired: list[ProducerBatch]
    ) -> None:
        with dq.lock:
            batches = dq.batches
            while batches:
                batch = batches[0]
                if batch.has_reached_delivery_timeout(self.delivery_timeout_ms, now_ms):
                    batches.popleft()
                    batch.abort_record_appends()
                    expired.append(batch)
                else:
                    break

    def _abort_batches(self, reason: BaseException, undrained_only: bool = False) -> None:
        for batch in self._incomplete.copy_all():
            dq = self._deque(batch.topic_partition)
            aborted = not undrained_only
            if dq is not None:
                with dq.lock:
                    if undrained_only:
                        if self._tm is not None:
                            aborted = not batch.has_sequence()
                        else:
                            aborted = not batch.is_closed
                    if aborted:
                        batch.abort_record_appends()
                        try:
                            dq.batches.remove(batch)
                        except ValueError:
                            pass
            if not aborted:
                continue
            if not batch.is_done:
                try:
                    batch.abort(reason)
                except IllegalStateError:
                    log.debug("batch %r completed while being aborted", batch)
            self.deallocate(batch)

    def abort_incomplete_batches(self, reason: BaseException | None = None) -> None:
        """Fail and deallocate every incomplete batch (forced close), waiting out in-progress appends."""
        exc = reason if reason is not None else ProducerClosedError("Producer is closed forcefully.")
        for _ in range(10_000):
            self._abort_batches(exc)
            if not self.appends_in_progress():
                break
            time.sleep(0.001)
        self._abort_batches(exc)

    def abort_undrained_batches(self, reason: BaseException) -> None:
        """Fail and deallocate the batches that were never drained (fatal idempotence error)."""
        self._abort_batches(reason, undrained_only=True)

    # ------------------------------------------------------------------ muted partitions: the circuit breaker's moves and memory bound
    # Partitions the circuit breaker muted: what the accumulator does about the memory their batches hold.
    #
    # A muted partition is not drained (only its probe is), so what is queued for it
    # stays in ``buffer.memory``. Never-sent keyless batches move to an open
    # partition of the same topic (:meth:`move_unsent_off_muted`); a caller opening a
    # new batch of pinned records for a muted partition waits once those hold half
    # the pool (:meth:`_await_room_while_muted`); :meth:`queued_bytes_by_node` shows
    # which leaders hold the memory. Called by the Sender (moves, reports) and, for
    # the wait, by ``append`` before it allocates a new batch.

    def move_unsent_off_muted(self, cluster: Cluster) -> tuple[int, int]:
        """Move never-sent keyless batches off partitions the circuit breaker muted; (batches, records) moved.

        A muted partition is not drained (only its probe is), so the batches
        queued for it would hold their share of ``buffer.memory`` until
        ``delivery.timeout.ms``, and a caller of any partition blocks once the pool
        is empty. A batch that was never drained and holds only keyless records the
        built-in partitioner placed (see ``ProducerBatch.movable``) has no claim to
        its partition: it moves, whole and with its buffer, to the open partition of
        the same topic with the shortest queue (KIP-794's measure of load), in
        queue order. A batch that was sent keeps its partition (and, idempotent,
        its sequence); keyed and explicitly partitioned records never move.
        """
        routing = self._routing
        if routing is None:
            return 0, 0
        vacate = routing.partitions_to_vacate()
        if not vacate:
            return 0, 0
        view = routing.cluster_view(cluster)
        moved_batches = moved_records = 0
        for tp in sorted(vacate, key=lambda t: (t.topic, t.partition)):
            dq = self._deque(tp)
            if dq is None or not dq.batches:
                continue
            targets = [
                p.partition for p in view.available_partitions_for_topic(tp.topic) if p.partition != tp.partition
            ]
            if not targets:
                continue  # every partition of the topic is muted: nowhere better to go
            with dq.lock:
                movable = [b for b in dq.batches if b.movable]
                if not movable:
                    continue
                for batch in movable:
                    dq.batches.remove(batch)
                    self._closed_for_appends(batch)
            info = self._topic(tp.topic)
            for batch in movable:
                # The open partition with the fewest queued batches (a peek; exactness is not needed).
                target = min(targets, key=lambda p: len(info.batches[p].batches) if p in info.batches else 0)
                tdq = info.deque_for(target)
                batch.move_to(TopicPartition(tp.topic, target))
                with tdq.lock:
                    queued = tdq.batches
                    if queued and queued[-1].is_writable:
                        queued.insert(len(queued) - 1, batch)  # the open batch stays last, for appends
                    else:
                        queued.append(batch)
                self._active[tp.topic] = info
                moved_batches += 1
                moved_records += batch.record_count
        if moved_records and self._moved_sensor is not None:
            self._moved_sensor.record(float(moved_records))
        return moved_batches, moved_records

    def _await_room_while_muted(self, tp: TopicPartition, max_time_to_block_ms: int, block: bool = True) -> int:
        """Before a new batch of keyed or explicit records for a muted partition: wait for room.

        Such records keep their partition, and a muted partition is not drained, so
        without a bound they would take the whole pool and block every caller. The
        partitions muted on their own may hold half of ``buffer.memory`` between them
        (keyless batches have moved off them, so this is what their pinned records
        hold); beyond that the caller adding to them waits, up to ``max.block.ms``,
        for the partition to reopen or for room, then gets BufferExhaustedError. The
        other half stays for the partitions that drain, so only the callers sending
        to muted partitions ever wait here. Returns what is left of the block time.
        A caller that may not block (``block=False``) gets :class:`MemoryWouldBlock`
        where it would wait, with the poll interval to retry after.
        """
        routing = self._routing
        if routing is None or tp not in routing.partitions_to_vacate():
            return max_time_to_block_ms
        limit = self.free.total_memory // 2
        deadline = time.monotonic() + max(0, max_time_to_block_ms) / 1000.0
        while True:
            if self.closed:
                raise ProducerClosedError("Producer closed while send in progress")
            vacate = routing.partitions_to_vacate()
            if tp not in vacate:
                break
            held = sum(b.capacity for t in vacate for b in tuple(self._queued_led_by(t)))
            if held + self.batch_size <= limit:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BufferExhaustedError(
                    f"{tp.topic}-{tp.partition} is muted by the circuit breaker and the muted partitions hold "
                    f"{held} bytes, half of buffer.memory ({self.free.total_memory}); no room for a new batch "
                    f"within {max_time_to_block_ms} ms (max.block.ms)",
                    topic=tp.topic,
                    partition=tp.partition,
                )
            if not block:
                raise MemoryWouldBlock(self.batch_size, poll_s=0.02)  # an event loop awaits instead
            # Polled: nothing on the send or drain path pays for waking these rare waiters.
            time.sleep(min(remaining, 0.02))
        return max(0, int((deadline - time.monotonic()) * 1000))

    def _queued_led_by(self, tp: TopicPartition) -> deque[ProducerBatch]:
        dq = self._deque(tp)
        return deque() if dq is None else dq.batches

    def queued_bytes_by_node(self, cluster: Cluster) -> dict[int, int]:
        """Buffer bytes held by the batches queued here, per leader node (-1: leader unknown)."""
        out: dict[int, int] = {}
        for topic, info in list(self._topic_info.items()):
            for partition, dq in list(info.batches.items()):
                held = sum(b.capacity for b in tuple(dq.batches))
                if held:
                    leader = cluster.leader_for(TopicPartition(topic, partition))
                    node = -1 if leader is None else leader.id
                    out[node] = out.get(node, 0) + held
        return out

    # ------------------------------------------------------------------ bulk append: send_batch and send_arrow
    # The bulk append: a range of a ``send_batch``/``send_arrow`` call into batches of ``batch.size``, in order.
    #
    # The same deques, BufferPool, sticky partitioner (KIP-794) and circuit-breaker
    # rules as ``RecordAccumulator.append``, one lock round per batch instead of per
    # record: the records themselves are encoded by ``ProducerBatch.try_append_many``
    # (the C speedups when present).

    def append_many(
        self,
        topic: str,
        partition: int,
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
        max_record_size: int,
        max_time_to_block_ms: int,
        cluster: Cluster | None,
        *,
        memory: MemorySource | None = None,
    ) -> bool:
        """Append records ``start..end`` of a bulk call, filling batches of ``batch.size`` in order.

        The same deques, BufferPool and sticky partitioner as :meth:`append`
        (``partition == -1``: the sticky partition, which moves on as batches fill).
        Each batch gets one :class:`BulkRange` per call. ``max_record_size`` bounds
        the buffer a new batch needs. Returns whether the Sender should be woken.
        """
        rows = _BulkRows(
            (timestamp, values, keys, indices), start, end, (encoded_headers, arrow, sink, callback), max_record_size
        )
        pool: MemorySource = self.free if memory is None else memory
        result = self._append_rows(topic, partition, rows, cluster, pool, memory, max_time_to_block_ms, 0, True, False)
        return result.batch_is_full

    def node_latency_stats(self, node_id: int) -> NodeLatencyStats | None:
        return self._node_stats.get(node_id)

    # ------------------------------------------------------------------ completion
    def deallocate(self, batch: ProducerBatch) -> None:
        """Forget a completed batch and return its buffer to the pool: exactly once per batch."""
        lock = self._incomplete.lock
        lock.acquire()  # not ``with`` (docs/architecture.md, "Locks on the record path")
        try:
            self._incomplete.remove_locked(batch)
            if batch.growth_node >= 0:
                self.release_growth_locked(batch)
            if batch.deallocated:
                log.debug("batch %r was already deallocated", batch)
                return
            batch.deallocated = True
        finally:
            lock.release()
        if not batch.is_split_batch and batch.buffer is not None:
            self.free.deallocate(batch.buffer, batch.capacity)

    # ------------------------------------------------------------------ muting (max.in.flight=1, breaker)
    def mute_partition(self, tp: TopicPartition) -> None:
        self._muted.add(tp)

    def unmute_partition(self, tp: TopicPartition) -> None:
        self._muted.discard(tp)

    def is_muted(self, tp: TopicPartition) -> bool:
        return tp in self._muted

    # ------------------------------------------------------------------ flush
    def begin_flush(self) -> None:
        """Make every partition ready at once until ``end_flush()``."""
        with self._flush_lock:
            self._flushes_in_progress += 1

    def end_flush(self) -> None:
        with self._flush_lock:
            if self._flushes_in_progress > 0:
                self._flushes_in_progress -= 1

    def flush_in_progress(self) -> bool:
        return self._flushes_in_progress > 0

    def await_flush_completion(self, timeout: float | None = None) -> bool:
        """Wait for every batch incomplete now (and the parts of any that get split); False on timeout.

        The flush counter is left to ``end_flush()``, so the caller pairs
        ``begin_flush()``/``end_flush()`` around this in a ``finally``.
        """
        return self._incomplete.await_completion(timeout)

    # ------------------------------------------------------------------ state and close
    def appends_in_progress(self) -> bool:
        return len(self._appends_in_progress) > 0

    def partitions_with_batches(self) -> list[TopicPartition]:
        """Partitions holding queued batches, ready or not (a peek: appends may add more meanwhile)."""
        return [
            TopicPartition(topic, partition)
            for topic, info in list(self._active.items())
            for partition, dq in list(info.batches.items())
            if dq.batches
        ]

    def has_undrained(self) -> bool:
        return any(dq.batches for info in list(self._active.values()) for dq in list(info.batches.values()))

    def has_incomplete(self) -> bool:
        return bool(self._incomplete)

    def incomplete_batches(self) -> list[ProducerBatch]:
        """The batches not completed yet (queued or in flight), for reporting."""
        return self._incomplete.copy_all()

    def incomplete_record_count(self) -> int:
        """Records whose batch has not completed yet (the Producer's flush() reports it)."""
        return self._incomplete.record_count()

    def start_compression_worker(self, wakeup_fd: int) -> bool:
        """Compress full batches on a native worker that writes a byte to ``wakeup_fd`` (the
        Sender's selector) when a batch the drain had to pass over is ready. False when this
        producer's codec, the build or the machine has no worker: the Python path then."""
        if self.compression_worker is None:
            self.compression_worker = start_worker(self.compression, wakeup_fd)
        return self.compression_worker is not None

    def stop_compression_worker(self) -> None:
        """Finish the worker's queued batches and stop its thread (before the wakeup fd closes)."""
        worker = self.compression_worker
        if worker is not None:
            worker.close()

    def close(self) -> None:
        """No more appends; wake anyone blocked in the pool."""
        self.closed = True
        self.free.close()

    def __repr__(self) -> str:
        return (
            f"RecordAccumulator(topics={len(self._topic_info)}, incomplete={len(self._incomplete)}, "
            f"closed={self.closed})"
        )
