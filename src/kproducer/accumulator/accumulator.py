"""RecordAccumulator: per-partition batch queues between caller threads and the Sender (Java's ``RecordAccumulator``).

Caller threads ``append()`` to the last batch of a partition's deque; the
Sender asks ``ready()`` which leader nodes have sendable data and ``drain()``s
the first batch of each partition, per node, rotating over partitions so that
none starves. Each deque has its own lock, held only for the append itself:
the buffer for a new batch is allocated from the BufferPool *outside* the lock
(it may block up to ``max.block.ms``), then the append is retried under the lock
before a new batch is created (the double-lock pattern of Java's ``RecordAccumulator.append``).

This module holds the accumulator's state, ``append`` and the helpers it calls
for each record (the C send lane appends into the same deques and batches).
The other jobs live next to it as functions taking the accumulator, bound here
as its methods: ``ready`` (the ready check), ``drain``, ``growth`` (KIP-782
expandable batches and the in-flight growth budget), ``requeue`` (retries and
splits), ``expiry_and_abort``, ``muted_partitions`` (the circuit breaker's
moves and memory bound), ``sealing`` (compression before the drain) and
``bulk_append`` (``append_many``); ``incomplete``, ``deques`` and
``collaborators`` hold the types. It stays one file at about 600 lines because
the per-record path is not split across modules: each call level or lookup
added there is paid on every ``send()``.
"""
from __future__ import annotations

import logging
import random
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from typing import Any, NamedTuple

from kproducer.accumulator import bulk_append, expiry_and_abort, growth, muted_partitions, requeue, sealing
from kproducer.accumulator import drain as _drain
from kproducer.accumulator import ready as _ready
from kproducer.accumulator.batch import DeliveryCallback, ProducerBatch
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
from kproducer.accumulator.growth import release_growth_locked
from kproducer.accumulator.incomplete import IncompleteBatches
from kproducer.accumulator.ready import NodeLatencyStats, ReadyCheckResult
from kproducer.accumulator.staging import StagingBuffers
from kproducer.common import ExponentialBackoff, monotonic_ms
from kproducer.errors import IllegalStateError, ProducerClosedError
from kproducer.metadata import Cluster
from kproducer.record.builder import (
    MAX_STAGING_BYTES,
    CompressionRatioEstimator,
    MemoryRecordsBuilder,
    estimate_size_upper_bound,
)
from kproducer.record.codecs import CompressionType, compression_type_for_name, validate_compression_level
from kproducer.record.compression_worker import CompressionWorker, start_worker
from kproducer.structs import TopicPartition

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
        self._incomplete = IncompleteBatches()
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
        # bytes, and the memory beyond buffer.memory stays bounded. The limit is four full batches,
        # and a compressed batch stages up to MAX_STAGING_BYTES of records: at 4 x batch.size one
        # such batch passed it, so callers compressed nearly every batch themselves, each time
        # waiting for the GIL after the codec let go of it (1 KB records, lz4: 332-387k records/s
        # against 621-748k with this limit; benchmarks/RESULTS.md, "Compressed batches while they wait").
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

    def _new_batch(self, tp: TopicPartition, buffer: bytearray, magic: int, now_ms: int) -> ProducerBatch:
        """A batch on a pool buffer: sendable at batch.size, or at its one record when that is larger."""
        staging = self._take_staging() if self._stages and magic == 2 else None
        batch = ProducerBatch(tp, self._builder(buffer, magic, tp.topic, staging), now_ms, buffer=buffer)
        batch.ready_size = max(self.batch_size, len(buffer))
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
            if self._to_seal:
                sealing.seal_if_behind(self)

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
        self._incomplete.add(batch)
        return RecordAppendResult(
            future, len(dq.batches) > 1 or batch.is_full(), True, False, partition, batch.estimated_size_in_bytes()
        )

    # ------------------------------------------------------------------ jobs kept in modules of their own
    # Each takes the accumulator as its first argument and is bound here as a method, so callers
    # and the Sender see one RecordAccumulator (as in Java) at no extra call per use.
    append_many = bulk_append.append_many  # the bulk path of send_batch/send_arrow
    _grow = growth.grow  # KIP-782: an open batch grows (append's helper, once per full batch)
    _closed_for_appends = sealing.close_for_appends  # and queued for compression before the drain
    seal_full_batches = sealing.seal_full_batches
    in_flight_growth_by_node = growth.in_flight_growth_by_node
    ready = _ready.ready  # the Sender's ready check
    _partition_ready = _ready.topic_ready  # one topic's part of it, looked up on the instance
    update_node_latency_stats = _ready.update_node_latency_stats
    drain = _drain.drain  # the Sender's drain
    expired_batches = expiry_and_abort.expired_batches
    queued_batches_led_by = expiry_and_abort.queued_batches_led_by
    abort_incomplete_batches = expiry_and_abort.abort_incomplete_batches
    abort_undrained_batches = expiry_and_abort.abort_undrained_batches
    reenqueue = requeue.reenqueue
    split_and_reenqueue = requeue.split_and_reenqueue
    reset_producer_state_of_queued_batches = requeue.reset_producer_state_of_queued_batches
    move_unsent_off_muted = muted_partitions.move_unsent_off_muted  # circuit breaker
    _await_room_while_muted = muted_partitions.await_room_while_muted
    queued_bytes_by_node = muted_partitions.queued_bytes_by_node

    def node_latency_stats(self, node_id: int) -> NodeLatencyStats | None:
        return self._node_stats.get(node_id)

    # ------------------------------------------------------------------ completion
    def deallocate(self, batch: ProducerBatch) -> None:
        """Forget a completed batch and return its buffer to the pool: exactly once per batch."""
        with self._incomplete.lock:
            self._incomplete.remove_locked(batch)
            if batch.growth_node >= 0:
                release_growth_locked(self, batch)
            if batch.deallocated:
                log.debug("batch %r was already deallocated", batch)
                return
            batch.deallocated = True
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
