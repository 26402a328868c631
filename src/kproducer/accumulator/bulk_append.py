"""The bulk append: a range of a ``send_batch``/``send_arrow`` call into batches of ``batch.size``, in order.

The same deques, BufferPool, sticky partitioner (KIP-794) and circuit-breaker
rules as ``RecordAccumulator.append``, one lock round per batch instead of per
record: the records themselves are encoded by ``ProducerBatch.try_append_many``
(the C speedups when present).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kproducer.accumulator import sealing
from kproducer.accumulator.deques import UNKNOWN_PARTITION
from kproducer.errors import IllegalStateError, ProducerClosedError
from kproducer.structs import TopicPartition

if TYPE_CHECKING:
    from kproducer.accumulator.accumulator import RecordAccumulator
    from kproducer.accumulator.batch import BulkSink, DeliveryCallback
    from kproducer.accumulator.collaborators import MemorySource
    from kproducer.metadata import Cluster

__all__ = ["append_many"]


def append_many(
    acc: RecordAccumulator,
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
    topic_info = acc._topic(topic)
    pool: MemorySource = acc.free if memory is None else memory
    sticky = partition == UNKNOWN_PARTITION
    if sticky and cluster is None:
        raise ValueError("append_many with partition -1 needs the cluster for the built-in partitioner")
    breaker = acc._routing
    if breaker is not None and sticky and cluster is not None:
        # As in append(): the sticky partition is chosen among partitions the breaker has not muted.
        cluster = breaker.cluster_view(cluster)
    acc._appends_in_progress.append(None)
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
                and acc._closed_to_records(breaker, TopicPartition(topic, effective))
                and cluster.available_partitions_for_topic(topic)  # type: ignore[union-attr]
            ):
                forced_switches += 1
                topic_info.partitioner.update_partition_info(effective, 0, cluster, True)  # type: ignore[arg-type]
                continue
            dq = topic_info.deque_for(effective)
            with dq.lock:
                if sticky and acc._partition_changed(topic_info, effective, cluster):
                    continue
                if acc.closed:
                    raise ProducerClosedError("Producer closed while send in progress")
                now = acc._clock()
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
                        if start >= end or not acc._grow(last, 0, rows_in_hand=True):
                            break
                    appended = builder.estimated_size_in_bytes() - before
                    crossed = start < end or (not was_full and last.is_full())
                    if start < end:
                        acc._closed_for_appends(last)
                    if crossed or len(batches) > 1:
                        wake = True
                if start < end and buffer is not None:
                    magic = acc._magic()
                    batch = acc._new_batch(TopicPartition(topic, effective), buffer, magic, now)
                    buffer = None
                    batch.pinned = not sticky
                    before = batch.builder.estimated_size_in_bytes()
                    count = batch.try_append_many(
                        timestamp, values, keys, indices, start, end, encoded_headers, arrow, sink, callback, now
                    )
                    if count == 0:  # pragma: no cover - an empty batch takes its first record
                        raise IllegalStateError(f"a new batch for {topic}-{effective} refused its first record")
                    start += count
                    while start < end and acc._grow(batch, 0, rows_in_hand=True):
                        start += batch.try_append_many(
                            timestamp, values, keys, indices, start, end, encoded_headers, arrow, sink, callback, now
                        )
                    appended += batch.builder.estimated_size_in_bytes() - before
                    batches.append(batch)
                    acc._active[topic] = topic_info
                    acc._incomplete.add(batch)
                    wake = True
                    crossed = crossed or batch.is_full() or start < end
                    if start < end:
                        acc._closed_for_appends(batch)
                if sticky and appended:
                    topic_info.partitioner.update_partition_info(
                        effective, appended, cluster, crossed and acc._all_batches_full(dq)  # type: ignore[arg-type]
                    )
            if acc._to_seal:
                sealing.seal_if_behind(acc)  # outside the deque lock (see sealing.close_for_appends)
            if start < end and buffer is None:
                if not sticky and acc._routing is not None:
                    max_time_to_block_ms = acc._await_room_while_muted(TopicPartition(topic, effective), max_time_to_block_ms)
                size = max(acc.batch_initial_size, max_record_size)
                # Outside the deque lock: this may block for up to max.block.ms.
                buffer = pool.allocate(size, max_time_to_block_ms)
        return wake
    finally:
        if buffer is not None:
            pool.deallocate(buffer, len(buffer))
        acc._appends_in_progress.pop()
