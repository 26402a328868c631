"""The Sender's ready check: which leader nodes have a partition worth draining now, and when to look again.

Java's ``RecordAccumulator.ready``. It also feeds each topic's partitioner the
queue sizes KIP-794's adaptive partitioning weighs, and keeps the per-node
latency stats behind ``partitioner.availability.timeout.ms``. Runs on the
Sender thread, once per loop: the functions take the accumulator, whose
queues and flags they read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from kproducer.structs import TopicPartition

if TYPE_CHECKING:
    from kproducer.accumulator.accumulator import RecordAccumulator
    from kproducer.accumulator.batch import ProducerBatch
    from kproducer.accumulator.deques import TopicInfo
    from kproducer.metadata import Cluster

__all__ = [
    "NO_DELAY",
    "NodeLatencyStats",
    "ReadyCheckResult",
    "ready",
    "topic_ready",
    "update_node_latency_stats",
]

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


def batch_backoff_ms(batch: ProducerBatch) -> int:
    """How long a retried batch waits before it is sent again (0 on its first try)."""
    return batch.retry_backoff_ms if batch.attempts > 0 else 0


def _muted_delay_ms(acc: RecordAccumulator, tp: TopicPartition, now_ms: int) -> int | None:
    """None when the partition may send; else how long until it might (``NO_DELAY``: unknown)."""
    if tp in acc._muted:
        return NO_DELAY
    breaker = acc._breaker
    if breaker is None or not breaker.is_muted(tp):
        return None
    # A partition muted by the circuit breaker sends only its probe, once the probe is due.
    retry_at = breaker.retry_at_ms(tp)
    if retry_at is None or breaker.probe_in_flight(tp):
        return NO_DELAY
    return None if now_ms >= retry_at else retry_at - now_ms


def ready(acc: RecordAccumulator, cluster: Cluster, now_ms: int) -> ReadyCheckResult:
    """Leader nodes with at least one sendable partition (Java's ``RecordAccumulator.ready``).

    A partition is sendable when its first batch is full (or more than one is
    queued), linger.ms has passed, the pool has waiters, the accumulator is
    closing, or a flush is in progress, and it is not backing off after a
    retry. Muted partitions are skipped. Along the way each topic's queue sizes
    feed its partitioner's load stats (KIP-794 adaptive partitioning).
    """
    ready_nodes: set[int] = set()
    next_delay = NO_DELAY
    unknown_leader_topics: set[str] = set()
    exhausted = acc.free.queued() > 0
    active = acc._active
    for topic, info in list(active.items()):
        # Dropped first, put back if a batch is found: an append that races this scan puts its
        # topic back itself (after appending), so no topic with a batch is ever left out.
        active.pop(topic, None)
        next_delay, holds_batches = acc._partition_ready(
            cluster, now_ms, topic, info, next_delay, ready_nodes, unknown_leader_topics, exhausted
        )
        if holds_batches:
            active[topic] = info
    return ReadyCheckResult(ready_nodes, next_delay, unknown_leader_topics)


def topic_ready(
    acc: RecordAccumulator,
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
    entries = list(info.batches.items())
    holds_batches = False
    queue_sizes: list[int] | None = None
    partition_ids: list[int] | None = None
    if acc.adaptive_partitioning_enable and len(entries) >= len(cluster.partitions_for_topic(topic)):
        queue_sizes = [0] * len(entries)
        partition_ids = [0] * len(entries)
    index = -1
    flushing = acc.flush_in_progress()
    breaker = acc._routing
    worker = acc.compression_worker
    for partition, dq in entries:
        tp = TopicPartition(topic, partition)
        leader = cluster.leader_for(tp)
        # Partitions the circuit breaker closed to records stay out of the adaptive choice.
        counted = leader is not None and (breaker is None or not acc._closed_to_records(breaker, tp))
        if counted and queue_sizes is not None and partition_ids is not None:
            index += 1
            partition_ids[index] = partition
        with dq.lock:
            if not dq.batches:
                continue
            holds_batches = True
            batch = dq.batches[0]
            waited = batch.waited_time_ms(now_ms)
            backoff_ms = batch_backoff_ms(batch)
            backing_off = batch.attempts > 0 and waited < backoff_ms
            deque_size = len(dq.batches)
            full = deque_size > 1 or batch.is_full()
            # Still on the compression worker: not drainable yet, and the worker wakes the Sender.
            compressing = worker is not None and batch.compression_pending()
        if leader is None:
            unknown_leader_topics.add(topic)
            continue
        if counted and queue_sizes is not None:
            queue_sizes[index] = deque_size
            if acc.partition_availability_timeout_ms > 0:
                stats = acc._node_stats.get(leader.id)
                if (
                    stats is not None
                    and stats.ready_time_ms - stats.drain_time_ms > acc.partition_availability_timeout_ms
                ):
                    # The leader has not been drainable for too long: keep the partitioner away from it.
                    index -= 1
        if leader.id in ready_nodes:
            continue
        muted_delay = _muted_delay_ms(acc, tp, now_ms)
        if muted_delay is not None:
            next_delay = min(next_delay, muted_delay)
            continue
        if compressing:
            continue
        time_to_wait = backoff_ms if backing_off else acc.linger_ms
        expired = waited >= time_to_wait
        sendable = full or expired or exhausted or acc.closed or flushing
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


def update_node_latency_stats(acc: RecordAccumulator, node_id: int, now_ms: int, can_drain: bool) -> None:
    """The Sender reports a ready node it could (or could not) drain (Java's updateNodeLatencyStats)."""
    if acc.partition_availability_timeout_ms <= 0:
        return
    stats = acc._node_stats.get(node_id)
    if stats is None:
        stats = acc._node_stats.setdefault(node_id, NodeLatencyStats(now_ms))
    if can_drain:
        stats.drain_time_ms = now_ms
    stats.ready_time_ms = now_ms
