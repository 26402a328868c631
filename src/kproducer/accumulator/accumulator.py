"""RecordAccumulator: per-partition batch queues between caller threads and the Sender (Java's ``RecordAccumulator``).

Caller threads ``append()`` to the last batch of a partition's deque; the
Sender asks ``ready()`` which leader nodes have sendable data and ``drain()``s
the first batch of each partition, per node, rotating over partitions so that
none starves. Each deque has its own lock, held only for the append itself:
the buffer for a new batch is allocated from the BufferPool *outside* the lock
(it may block up to ``max.block.ms``), then the append is retried under the lock
before a new batch is created (the double-lock pattern of Java's ``RecordAccumulator.append``).
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from kproducer.accumulator.batch import NO_SEQUENCE, BulkSink, DeliveryCallback, ProducerBatch
from kproducer.accumulator.buffer_pool import BufferPool, MemoryWouldBlock, MetricsLike, SensorLike
from kproducer.accumulator.collaborators import (
    CircuitBreakManagerLike,
    CircuitBreakRoutingLike,
    MemorySource,
    StickyPartitioner,
    TransactionManagerLike,
)
from kproducer.accumulator.deques import PartitionDeque, TopicInfo
from kproducer.accumulator.drain import drain, in_flight_growth_by_node, release_growth, release_growth_locked
from kproducer.accumulator.futures import RecordFuture
from kproducer.accumulator.ready import (
    NodeLatencyStats,
    ReadyCheckResult,
    ready,
    topic_ready,
    update_node_latency_stats,
)
from kproducer.common import ExponentialBackoff, monotonic_ms
from kproducer.errors import BufferExhaustedError, IllegalStateError, ProducerClosedError
from kproducer.metadata import Cluster
from kproducer.record.builder import (
    COMPRESSION_RATE_ESTIMATION_FACTOR,
    MAX_STAGING_BYTES,
    CompressionRatioEstimator,
    MemoryRecordsBuilder,
    estimate_size_upper_bound,
)
from kproducer.record.codecs import CompressionType, compression_type_for_name, validate_compression_level
from kproducer.structs import TopicPartition

if TYPE_CHECKING:
    from collections.abc import Iterable

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

UNKNOWN_PARTITION = -1

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
    ) -> None:
        if batch_size <= 0:
            raise ValueError(f"batch.size must be > 0, got {batch_size}")
        if isinstance(compression_type, str):
            ctype = compression_type_for_name(compression_type)
        else:
            ctype = CompressionType(compression_type)
        self.batch_size = batch_size
        # KIP-782: a hot partition's open batch may grow to batch_max_size (0 or <= batch.size: no
        # growth); a new batch starts at batch_initial_size (0: batch.size, Java's allocation).
        self.batch_max_size = max(batch_size, batch_max_size)
        self.batch_initial_size = batch_initial_size if 0 < batch_initial_size < batch_size else batch_size
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
        self.linger_ms = linger_ms
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
        self._incomplete: dict[ProducerBatch, None] = {}
        self._incomplete_lock = threading.Lock()
        self._muted: set[TopicPartition] = set()
        self._node_stats: dict[int, NodeLatencyStats] = {}
        self._drain_index: dict[int, int] = {}
        # Topics that may hold batches (a superset: ready() drops those it finds empty). The Sender's
        # ready/drain/expiry passes visit these instead of every topic ever produced to: with
        # thousands of known topics (KIP-526) and a few active at a time, that is the difference
        # between tens of milliseconds and well under one per Sender loop.
        self._active: dict[str, TopicInfo] = {}
        # Full batches of a compressed producer, compressed before drain (seal()) by the Sender, or
        # by a caller once their records pass a backlog limit: queued batches then hold compressed
        # bytes, and the memory beyond buffer.memory stays bounded.
        self._to_seal: deque[ProducerBatch] = deque()
        self._seal_lock = threading.Lock()
        self._unsealed_bytes = 0
        self._seal_backlog_bytes = 4 * self.batch_size
        # Per node: the Cluster snapshot and each of its partitions' place in partitions_for_node().
        self._node_index: dict[int, tuple[Cluster, dict[tuple[str, int], int]]] = {}
        # Appends in progress: list append/pop are atomic, cheaper than a lock taken twice per record.
        self._appends_in_progress: list[None] = []
        self._flushes_in_progress = 0
        self._flush_lock = threading.Lock()
        self.closed = False

        self._queue_time_sensor: SensorLike | None = None
        self._batch_size_sensor: SensorLike | None = None
        self._compression_rate_sensor: SensorLike | None = None
        self._moved_sensor: SensorLike | None = None
        if metrics is not None:
            # Feeds circuit-breaker-moved-records-total/-rate (registered with the breaker's metrics).
            self._moved_sensor = metrics.sensor("circuit-breaker-moved-records")
            # record-queue-time-avg/max, batch-size-avg/max, compression-rate-avg hang off these (Java's names).
            self._queue_time_sensor = metrics.sensor("queue-time")
            self._batch_size_sensor = metrics.sensor("batch-size")
            self._compression_rate_sensor = metrics.sensor("compression-rate")

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
        )

    # ------------------------------------------------------------------ helpers
    def _topic(self, topic: str) -> TopicInfo:
        info = self._topic_info.get(topic)
        if info is None:
            with self._topic_lock:
                info = self._topic_info.get(topic)
                if info is None:
                    info = self._topic_info[topic] = TopicInfo(self._partitioner_factory(topic, self.batch_size))
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
        for topic, info in list(self._topic_info.items()):
            for partition, dq in list(info.batches.items()):
                yield TopicPartition(topic, partition), dq

    def _builder(self, buffer: bytearray, magic: int, topic: str) -> MemoryRecordsBuilder:
        if magic == 2:
            return MemoryRecordsBuilder.for_batch(
                buffer, self.compression, self.compression_level, len(buffer), topic, self._ratio_estimator
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

    def _new_batch(self, tp: TopicPartition, buffer: bytearray, magic: int, now_ms: int) -> ProducerBatch:
        """A batch on a pool buffer: sendable at batch.size, or at its one record when that is larger."""
        batch = ProducerBatch(tp, self._builder(buffer, magic, tp.topic), now_ms, buffer=buffer)
        batch.ready_size = max(self.batch_size, len(buffer))
        return batch

    def _add_incomplete(self, batch: ProducerBatch) -> None:
        with self._incomplete_lock:
            self._incomplete[batch] = None

    def _incomplete_snapshot(self) -> list[ProducerBatch]:
        with self._incomplete_lock:
            return list(self._incomplete)

    def incomplete_batches(self) -> list[ProducerBatch]:
        """The batches not completed yet (queued or in flight), for reporting."""
        return self._incomplete_snapshot()

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
    ) -> RecordAppendResult:
        """Append one record to its partition's last batch, or to a new batch (Java's ``RecordAccumulator.append``).

        ``partition == -1`` lets the topic's built-in partitioner pick the sticky
        partition (KIP-794). With ``abort_on_new_batch`` the call returns
        ``abort_for_new_batch=True`` instead of allocating a new batch. The
        Producer facade's shorter form ``(..., max_time_to_block_ms, now_ms, cluster)``
        is accepted too. ``memory`` replaces the BufferPool as the source of a new
        batch's buffer (records that waited for metadata bring their own charge).
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
        topic_info = self._topic(topic)
        self._appends_in_progress.append(None)
        buffer: bytearray | None = None
        breaker = self._routing
        if breaker is not None and partition == UNKNOWN_PARTITION and cluster is not None:
            # The built-in partitioner chooses among partitions the circuit breaker has not muted.
            cluster = breaker.cluster_view(cluster)
        forced_switches = 0
        try:
            while True:
                sticky = partition == UNKNOWN_PARTITION
                if sticky:
                    if cluster is None:
                        raise ValueError("append with partition -1 needs the cluster for the built-in partitioner")
                    effective = topic_info.partitioner.peek_current_partition(cluster)
                    if (
                        breaker is not None
                        and forced_switches < 3
                        and self._closed_to_records(breaker, TopicPartition(topic, effective))
                        and cluster.available_partitions_for_topic(topic)
                    ):
                        # The sticky partition was muted since it was chosen: move off it.
                        forced_switches += 1
                        topic_info.partitioner.update_partition_info(effective, 0, cluster, True)
                        continue
                else:
                    effective = partition
                dq = topic_info.deque_for(effective)
                with dq.lock:
                    if sticky and self._partition_changed(topic_info, effective, cluster):
                        continue
                    result = self._try_append(timestamp, key, value, headers, callback, dq, now, effective)
                    if result is not None:
                        if sticky:
                            assert cluster is not None
                            topic_info.partitioner.update_partition_info(
                                effective, result.appended_bytes, cluster, result.batch_is_full and self._all_batches_full(dq)
                            )
                        else:
                            dq.batches[-1].pinned = True  # keyed or explicit: it stays on this partition
                        return result
                if abort_on_new_batch:
                    return RecordAppendResult(None, False, False, True, effective, 0)
                magic = self._magic()
                if buffer is None:
                    if not sticky and breaker is not None:
                        max_time_to_block_ms = self._await_room_while_muted(TopicPartition(topic, effective), max_time_to_block_ms)
                    size = max(
                        self.batch_initial_size, estimate_size_upper_bound(magic, self.compression, key, value, headers)
                    )
                    # Outside the deque lock: this may block for up to max.block.ms.
                    buffer = pool.allocate(size, max_time_to_block_ms)
                    now = self._clock()
                with dq.lock:
                    if sticky and self._partition_changed(topic_info, effective, cluster):
                        continue
                    result = self._append_new_batch(
                        topic, effective, dq, timestamp, key, value, headers, callback, buffer, now, magic
                    )
                    if result.new_batch_created:
                        buffer = None
                    if sticky:
                        assert cluster is not None
                        topic_info.partitioner.update_partition_info(
                            effective, result.appended_bytes, cluster, self._all_batches_full(dq)
                        )
                    else:
                        dq.batches[-1].pinned = True
                    return result
        finally:
            if buffer is not None:
                # Another thread opened a batch meanwhile (or we failed): give the memory back.
                pool.deallocate(buffer, len(buffer))
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
        topic_info = self._topic(topic)
        pool: MemorySource = self.free if memory is None else memory
        sticky = partition == UNKNOWN_PARTITION
        if sticky and cluster is None:
            raise ValueError("append_many with partition -1 needs the cluster for the built-in partitioner")
        breaker = self._routing
        if breaker is not None and sticky and cluster is not None:
            # As in append(): the sticky partition is chosen among partitions the breaker has not muted.
            cluster = breaker.cluster_view(cluster)
        self._appends_in_progress.append(None)
        buffer: bytearray | None = None
        wake = False
        forced_switches = 0
        try:
            while start < end:
                effective = topic_info.partitioner.peek_current_partition(cluster) if sticky else partition  # type: ignore[arg-type]
                if (
                    sticky
                    and breaker is not None
                    and forced_switches < 3
                    and self._closed_to_records(breaker, TopicPartition(topic, effective))
                    and cluster.available_partitions_for_topic(topic)  # type: ignore[union-attr]
                ):
                    forced_switches += 1
                    topic_info.partitioner.update_partition_info(effective, 0, cluster, True)  # type: ignore[arg-type]
                    continue
                dq = topic_info.deque_for(effective)
                with dq.lock:
                    if sticky and self._partition_changed(topic_info, effective, cluster):
                        continue
                    if self.closed:
                        raise ProducerClosedError("Producer closed while send in progress")
                    now = self._clock()
                    batches = dq.batches
                    last = batches[-1] if batches else None
                    appended = 0
                    crossed = False  # a batch became sendable (or closed) in this round
                    if last is not None and last.is_writable:
                        builder = last.builder
                        before = builder.estimated_size_in_bytes()
                        was_full = last.is_full()
                        while True:
                            count = last.try_append_many(
                                timestamp, values, keys, indices, start, end, encoded_headers, arrow, sink, callback, now
                            )
                            if count and not sticky:
                                last.pinned = True
                            start += count
                            if start >= end or not self._grow(last, 0):
                                break
                        appended = builder.estimated_size_in_bytes() - before
                        crossed = start < end or (not was_full and last.is_full())
                        if start < end:
                            self._closed_for_appends(last)
                        if crossed or len(batches) > 1:
                            wake = True
                    if start < end and buffer is not None:
                        magic = self._magic()
                        batch = self._new_batch(TopicPartition(topic, effective), buffer, magic, now)
                        buffer = None
                        batch.pinned = not sticky
                        before = batch.builder.estimated_size_in_bytes()
                        count = batch.try_append_many(
                            timestamp, values, keys, indices, start, end, encoded_headers, arrow, sink, callback, now
                        )
                        if count == 0:  # pragma: no cover - an empty batch takes its first record
                            raise IllegalStateError(f"a new batch for {topic}-{effective} refused its first record")
                        start += count
                        while start < end and self._grow(batch, 0):
                            start += batch.try_append_many(
                                timestamp, values, keys, indices, start, end, encoded_headers, arrow, sink, callback, now
                            )
                        appended += batch.builder.estimated_size_in_bytes() - before
                        batches.append(batch)
                        self._active[topic] = topic_info
                        self._add_incomplete(batch)
                        wake = True
                        crossed = crossed or batch.is_full() or start < end
                        if start < end:
                            self._closed_for_appends(batch)
                    if sticky and appended:
                        topic_info.partitioner.update_partition_info(
                            effective, appended, cluster, crossed and self._all_batches_full(dq)  # type: ignore[arg-type]
                        )
                if start < end and buffer is None:
                    if not sticky and self._routing is not None:
                        max_time_to_block_ms = self._await_room_while_muted(TopicPartition(topic, effective), max_time_to_block_ms)
                    size = max(self.batch_initial_size, max_record_size)
                    # Outside the deque lock: this may block for up to max.block.ms.
                    buffer = pool.allocate(size, max_time_to_block_ms)
            return wake
        finally:
            if buffer is not None:
                pool.deallocate(buffer, len(buffer))
            self._appends_in_progress.pop()

    # ------------------------------------------------------------------ moving off muted partitions (Sender)
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
            targets = [p.partition for p in view.available_partitions_for_topic(tp.topic) if p.partition != tp.partition]
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

    def _await_room_while_muted(self, tp: TopicPartition, max_time_to_block_ms: int) -> int:
        """Before a new batch of keyed or explicit records for a muted partition: wait for room.

        Such records keep their partition, and a muted partition is not drained, so
        without a bound they would take the whole pool and block every caller. The
        partitions muted on their own may hold half of ``buffer.memory`` between them
        (keyless batches have moved off them, so this is what their pinned records
        hold); beyond that the caller adding to them waits, up to ``max.block.ms``,
        for the partition to reopen or for room, then gets BufferExhaustedError. The
        other half stays for the partitions that drain, so only the callers sending
        to muted partitions ever wait here. Returns what is left of the block time.
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
            held = sum(b.capacity for t in vacate for b in tuple(self._queued(t)))
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
            pool = self.free
            if isinstance(pool, BufferPool) and pool.must_not_wait():
                raise MemoryWouldBlock(self.batch_size, poll_s=0.02)  # an event loop awaits instead
            # Polled: nothing on the send or drain path pays for waking these rare waiters.
            time.sleep(min(remaining, 0.02))
        return max(0, int((deadline - time.monotonic()) * 1000))

    def _queued(self, tp: TopicPartition) -> deque[ProducerBatch]:
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

    def _closed_for_appends(self, batch: ProducerBatch) -> None:
        was_writable = batch.is_writable
        batch.close_for_record_appends()
        if not was_writable or self.compression is CompressionType.NONE:
            return  # (append's second try meets the same full batch again)
        with self._seal_lock:
            self._to_seal.append(batch)
            self._unsealed_bytes += batch.builder.uncompressed_size
            behind = self._unsealed_bytes > self._seal_backlog_bytes
        if behind:
            # The Sender is not keeping up: this caller compresses the backlog (backpressure, as
            # Java's callers compress their own records).
            self.seal_full_batches()

    def seal_full_batches(self) -> None:
        """Compress the full batches closed for appends and not yet compressed (see ProducerBatch.seal)."""
        if not self._to_seal:  # every Sender loop: no lock when there is nothing (always, uncompressed)
            return
        while True:
            with self._seal_lock:
                if not self._to_seal:
                    return
                batch = self._to_seal.popleft()
                self._unsealed_bytes -= batch.builder.uncompressed_size
            if not batch.is_done:
                batch.seal()

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

    def _try_append(
        self,
        timestamp: int,
        key: BytesLike | None,
        value: BytesLike | None,
        headers: Headers | None,
        callback: DeliveryCallback | None,
        dq: PartitionDeque,
        now_ms: int,
        partition: int,
    ) -> RecordAppendResult | None:
        """Append to the deque's last batch (deque lock held); None when there is none or it is full."""
        if self.closed:
            raise ProducerClosedError("Producer closed while send in progress")
        batches = dq.batches
        if not batches:
            return None
        last = batches[-1]
        builder = last.builder
        initial = builder.estimated_size_in_bytes()
        was_full = last.is_full()
        future = last.try_append(timestamp, key, value, headers, callback, now_ms)
        while future is None:
            if not last.is_writable or not self._grow(last, _record_size(key, value)):
                self._closed_for_appends(last)
                return None
            future = last.try_append(timestamp, key, value, headers, callback, now_ms)
        appended = builder.estimated_size_in_bytes() - initial
        # "Full" once, when this append made the batch sendable: a grown batch past batch.size
        # would otherwise wake the Sender and switch the sticky partition on every record.
        full = not was_full and last.is_full()
        return RecordAppendResult(future, len(batches) > 1 or full, False, False, partition, appended)

    def _grow(self, batch: ProducerBatch, needed: int) -> bool:
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
        """
        builder = batch.builder
        if batch.buffer is None or batch.is_split_batch or builder.magic != 2:
            return False
        limit = builder.write_limit
        tp = batch.topic_partition
        routing = self._routing
        if tp.topic in self._growth_capped or (routing is not None and tp in routing.partitions_to_vacate()):
            # A topic whose broker refused a grown batch, or a partition the circuit breaker muted:
            # its batches wait for a leader that is not answering, so they stay at batch.size.
            bound = self.batch_size
        else:
            bound = self.batch_max_size
        if self.compression is not CompressionType.NONE:
            # Records are staged uncompressed until the batch closes: keep them within
            # MAX_STAGING_BYTES, the bound a compressed batch of batch.size already has.
            ratio = builder.estimated_compression_ratio * COMPRESSION_RATE_ESTIMATION_FACTOR
            bound = min(bound, max(self.batch_size, int(MAX_STAGING_BYTES * ratio)))
        if limit >= bound:
            return False
        target = max(limit * 2, limit + needed)
        if target > bound:
            if limit + needed > bound:
                return False
            target = bound
        keep_free = self._growth_keep_free if target > self.batch_size else 0
        if not self.free.try_grow(target - limit, keep_free):
            return False
        batch.grown += target - limit
        builder.grow_write_limit(target)
        return True

    def _append_new_batch(
        self,
        topic: str,
        partition: int,
        dq: PartitionDeque,
        timestamp: int,
        key: BytesLike | None,
        value: BytesLike | None,
        headers: Headers | None,
        callback: DeliveryCallback | None,
        buffer: bytearray,
        now_ms: int,
        magic: int,
    ) -> RecordAppendResult:
        """Second try under the lock (another thread may have opened a batch), else a new batch on ``buffer``."""
        result = self._try_append(timestamp, key, value, headers, callback, dq, now_ms, partition)
        if result is not None:
            return result
        tp = TopicPartition(topic, partition)
        batch = self._new_batch(tp, buffer, magic, now_ms)
        future = batch.try_append(timestamp, key, value, headers, callback, now_ms)
        if future is None:  # pragma: no cover - the first record always fits
            raise IllegalStateError(f"a new batch for {tp} refused its first record")
        dq.batches.append(batch)
        self._active[topic] = self._topic_info[topic]
        self._add_incomplete(batch)
        return RecordAppendResult(
            future, len(dq.batches) > 1 or batch.is_full(), True, False, partition, batch.estimated_size_in_bytes()
        )

    # ------------------------------------------------------------------ ready and drain (Sender thread)
    def ready(self, cluster: Cluster, now_ms: int) -> ReadyCheckResult:
        """Leader nodes with at least one sendable partition (Java's ``RecordAccumulator.ready``; see ``ready.ready``)."""
        return ready(self, cluster, now_ms)

    # One topic's part of ready(), looked up on the instance on each call (tests count the calls).
    _partition_ready = topic_ready

    def update_node_latency_stats(self, node_id: int, now_ms: int, can_drain: bool) -> None:
        """The Sender reports a ready node it could (or could not) drain (Java's updateNodeLatencyStats)."""
        update_node_latency_stats(self, node_id, now_ms, can_drain)

    def node_latency_stats(self, node_id: int) -> NodeLatencyStats | None:
        return self._node_stats.get(node_id)

    def drain(
        self, cluster: Cluster, node_ids: Iterable[int], max_request_size: int, now_ms: int
    ) -> dict[int, list[ProducerBatch]]:
        """The batches to send, per node: at most ``max_request_size`` bytes each (Java's ``RecordAccumulator.drain``)."""
        return drain(self, cluster, node_ids, max_request_size, now_ms)
    # ------------------------------------------------------------------ expiry, retries, splits
    def expired_batches(self, now_ms: int) -> list[ProducerBatch]:
        """Queued batches past ``delivery.timeout.ms``, removed from their deques (in-flight ones are the Sender's)."""
        expired: list[ProducerBatch] = []
        for info in list(self._active.values()):
            for dq in list(info.batches.values()):
                self._expire_deque(dq, now_ms, expired)
        return expired

    def _expire_deque(self, dq: PartitionDeque, now_ms: int, expired: list[ProducerBatch]) -> None:
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

    def reenqueue(self, batch: ProducerBatch, now_ms: int) -> None:
        """Put a batch back at the front of its deque for a retry, in sequence order when idempotent."""
        batch.reenqueued(now_ms)
        release_growth(self, batch)
        batch.retry_backoff_ms = self._retry_backoff.backoff(batch.attempts - 1)
        dq = self._deque_or_create(batch.topic_partition)
        with dq.lock:
            if self._tm is not None and batch.has_sequence():
                self._insert_in_sequence_order(dq.batches, batch)
            else:
                dq.batches.appendleft(batch)
            self._active[batch.topic_partition.topic] = self._topic(batch.topic_partition.topic)

    @staticmethod
    def _insert_in_sequence_order(batches: deque[ProducerBatch], batch: ProducerBatch) -> None:
        """Before the first queued batch with a higher (or no) sequence."""
        position = 0
        for queued in batches:
            if queued.has_sequence() and queued.base_sequence < batch.base_sequence:
                position += 1
            else:
                break
        batches.insert(position, batch)

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
            self._add_incomplete(part)
            with dq.lock:
                if self._tm is not None and part.has_sequence():
                    self._insert_in_sequence_order(dq.batches, part)
                else:
                    dq.batches.appendleft(part)
                self._active[topic] = self._topic(topic)
        return len(parts)

    def deallocate(self, batch: ProducerBatch) -> None:
        """Forget a completed batch and return its buffer to the pool: exactly once per batch."""
        with self._incomplete_lock:
            self._incomplete.pop(batch, None)
            if batch.growth_node >= 0:
                release_growth_locked(self, batch)
            if batch.deallocated:
                log.debug("batch %r was already deallocated", batch)
                return
            batch.deallocated = True
        if not batch.is_split_batch and batch.buffer is not None:
            self.free.deallocate(batch.buffer, batch.capacity)

    def in_flight_growth_by_node(self) -> dict[int, int]:
        """Bytes past ``batch.size`` held by the batches in flight, per leader node (see ``drain.in_flight_growth_by_node``)."""
        return in_flight_growth_by_node(self)
    def reset_producer_state_of_queued_batches(self) -> None:
        """A new producer id is coming: queued batches lose their old sequences and get new ones at drain."""
        for _tp, dq in self._all_deques():
            with dq.lock:
                for batch in dq.batches:
                    if batch.has_sequence():
                        batch.reset_producer_state(-1, -1, NO_SEQUENCE)

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
        deadline = None if timeout is None else time.monotonic() + timeout
        awaited: set[int] = set()
        targets = self._incomplete_snapshot()
        while targets:
            for batch in targets:
                awaited.add(id(batch))
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not batch.result.await_(remaining):
                    return False
            # Batches split for MESSAGE_TOO_LARGE carry the records on: wait for those too.
            targets = [b for b in self._incomplete_snapshot() if b.is_split_batch and id(b) not in awaited]
        return True

    # ------------------------------------------------------------------ abort and close
    def appends_in_progress(self) -> bool:
        return len(self._appends_in_progress) > 0

    def _abort_batches(self, reason: BaseException, undrained_only: bool = False) -> None:
        for batch in self._incomplete_snapshot():
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
        with self._incomplete_lock:
            return bool(self._incomplete)

    def incomplete_record_count(self) -> int:
        """Records whose batch has not completed yet (the Producer's flush() reports it)."""
        return sum(b.record_count for b in self._incomplete_snapshot() if not b.result.completed)

    def close(self) -> None:
        """No more appends; wake anyone blocked in the pool."""
        self.closed = True
        self.free.close()

    def __repr__(self) -> str:
        return (
            f"RecordAccumulator(topics={len(self._topic_info)}, incomplete={len(self._incomplete)}, "
            f"closed={self.closed})"
        )
