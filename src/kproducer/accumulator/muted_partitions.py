"""Partitions the circuit breaker muted: what the accumulator does about the memory their batches hold.

A muted partition is not drained (only its probe is), so what is queued for it
stays in ``buffer.memory``. Never-sent keyless batches move to an open
partition of the same topic (:func:`move_unsent_off_muted`); a caller opening a
new batch of pinned records for a muted partition waits once those hold half
the pool (:func:`await_room_while_muted`); :func:`queued_bytes_by_node` shows
which leaders hold the memory. Called by the Sender (moves, reports) and, for
the wait, by ``append`` before it allocates a new batch.
"""

from __future__ import annotations

import time
from collections import deque
from typing import TYPE_CHECKING

from kproducer.accumulator.buffer_pool import BufferPool, MemoryWouldBlock
from kproducer.errors import BufferExhaustedError, ProducerClosedError
from kproducer.structs import TopicPartition

if TYPE_CHECKING:
    from kproducer.accumulator.accumulator import RecordAccumulator
    from kproducer.accumulator.batch import ProducerBatch
    from kproducer.metadata import Cluster

__all__ = ["await_room_while_muted", "move_unsent_off_muted", "queued_bytes_by_node"]


def move_unsent_off_muted(acc: RecordAccumulator, cluster: Cluster) -> tuple[int, int]:
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
    routing = acc._routing
    if routing is None:
        return 0, 0
    vacate = routing.partitions_to_vacate()
    if not vacate:
        return 0, 0
    view = routing.cluster_view(cluster)
    moved_batches = moved_records = 0
    for tp in sorted(vacate, key=lambda t: (t.topic, t.partition)):
        dq = acc._deque(tp)
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
                acc._closed_for_appends(batch)
        info = acc._topic(tp.topic)
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
            acc._active[tp.topic] = info
            moved_batches += 1
            moved_records += batch.record_count
    if moved_records and acc._moved_sensor is not None:
        acc._moved_sensor.record(float(moved_records))
    return moved_batches, moved_records


def await_room_while_muted(acc: RecordAccumulator, tp: TopicPartition, max_time_to_block_ms: int) -> int:
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
    routing = acc._routing
    if routing is None or tp not in routing.partitions_to_vacate():
        return max_time_to_block_ms
    limit = acc.free.total_memory // 2
    deadline = time.monotonic() + max(0, max_time_to_block_ms) / 1000.0
    while True:
        if acc.closed:
            raise ProducerClosedError("Producer closed while send in progress")
        vacate = routing.partitions_to_vacate()
        if tp not in vacate:
            break
        held = sum(b.capacity for t in vacate for b in tuple(_queued(acc, t)))
        if held + acc.batch_size <= limit:
            break
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise BufferExhaustedError(
                f"{tp.topic}-{tp.partition} is muted by the circuit breaker and the muted partitions hold "
                f"{held} bytes, half of buffer.memory ({acc.free.total_memory}); no room for a new batch "
                f"within {max_time_to_block_ms} ms (max.block.ms)",
                topic=tp.topic,
                partition=tp.partition,
            )
        pool = acc.free
        if isinstance(pool, BufferPool) and pool.must_not_wait():
            raise MemoryWouldBlock(acc.batch_size, poll_s=0.02)  # an event loop awaits instead
        # Polled: nothing on the send or drain path pays for waking these rare waiters.
        time.sleep(min(remaining, 0.02))
    return max(0, int((deadline - time.monotonic()) * 1000))


def _queued(acc: RecordAccumulator, tp: TopicPartition) -> deque[ProducerBatch]:
    dq = acc._deque(tp)
    return deque() if dq is None else dq.batches


def queued_bytes_by_node(acc: RecordAccumulator, cluster: Cluster) -> dict[int, int]:
    """Buffer bytes held by the batches queued here, per leader node (-1: leader unknown)."""
    out: dict[int, int] = {}
    for topic, info in list(acc._topic_info.items()):
        for partition, dq in list(info.batches.items()):
            held = sum(b.capacity for b in tuple(dq.batches))
            if held:
                leader = cluster.leader_for(TopicPartition(topic, partition))
                node = -1 if leader is None else leader.id
                out[node] = out.get(node, 0) + held
    return out
