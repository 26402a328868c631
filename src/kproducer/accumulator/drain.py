"""The Sender's drain: the batches each ready node gets in its next produce request (Java's ``RecordAccumulator.drain``).

Per node, the partitions it leads are visited from a rotating index, so that
none starves; each gives its first batch while the request stays within
``max.request.size``. The drain is where a batch gets its producer id, epoch
and sequence (idempotence), where a transactional producer's partitions wait
for AddPartitionsToTxn, and where a circuit breaker's muted partitions send
only their probe.

With a circuit breaker it also charges KIP-782's in-flight growth budget: the
bytes past ``batch.size`` that the batches in flight to one leader may hold
(see ``growth.in_flight_growth_by_node``).
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from kproducer.accumulator.batch import NO_SEQUENCE
from kproducer.accumulator.ready import batch_backoff_ms
from kproducer.structs import PartitionInfo, TopicPartition

if TYPE_CHECKING:
    from kproducer.accumulator.accumulator import RecordAccumulator
    from kproducer.accumulator.batch import ProducerBatch
    from kproducer.accumulator.collaborators import TransactionManagerLike
    from kproducer.metadata import Cluster

__all__ = ["drain"]

log = logging.getLogger("kproducer.accumulator.accumulator")  # the accumulator's log lines keep its name


def drain(
    acc: RecordAccumulator, cluster: Cluster, node_ids: Iterable[int], max_request_size: int, now_ms: int
) -> dict[int, list[ProducerBatch]]:
    """The batches to send, per node: at most ``max_request_size`` bytes each, at least one batch (Java's ``RecordAccumulator.drain``)."""
    out: dict[int, list[ProducerBatch]] = {}
    for node_id in node_ids:
        out[node_id] = _drain_node(acc, cluster, node_id, max_request_size, now_ms)
    return out


def _partition_index(
    acc: RecordAccumulator, cluster: Cluster, node_id: int, parts: Sequence[PartitionInfo]
) -> dict[tuple[str, int], int]:
    cached = acc._node_index.get(node_id)
    if cached is not None and cached[0] is cluster:
        return cached[1]
    index = {(p.topic, p.partition): i for i, p in enumerate(parts)}
    acc._node_index[node_id] = (cluster, index)
    return index


def _drain_candidates(
    acc: RecordAccumulator, cluster: Cluster, node_id: int, parts: Sequence[PartitionInfo]
) -> list[int]:
    """Positions in ``parts`` of the node's partitions that hold batches, in order."""
    index = _partition_index(acc, cluster, node_id, parts)
    found: list[int] = []
    for topic, info in list(acc._active.items()):
        for partition, dq in list(info.batches.items()):
            if dq.batches:  # a peek; the drain looks again under the lock
                i = index.get((topic, partition))
                if i is not None:
                    found.append(i)
    found.sort()
    return found


# An open batch drained with at least this many bytes of records is compressed by the compression
# worker; a smaller one (linger.ms ran out on a quiet partition) here, at once: a few microseconds.
WORKER_DRAIN_BYTES = 32 * 1024


def _drain_node(
    acc: RecordAccumulator, cluster: Cluster, node_id: int, max_size: int, now_ms: int
) -> list[ProducerBatch]:
    parts = cluster.partitions_for_node(node_id)
    ready: list[ProducerBatch] = []
    if not parts:
        return ready
    n = len(parts)
    start = acc._drain_index.get(node_id, 0) % n
    size = 0
    tm = acc._tm
    transactional = acc._transactional
    worker = acc.compression_worker
    # The partitions holding batches, in the node's order, from the rotating drain index on:
    # the same visit order as walking every partition, without the empty ones.
    candidates = _drain_candidates(acc, cluster, node_id, parts)
    k = bisect.bisect_left(candidates, start)
    for i in candidates[k:] + candidates[:k]:
        # Next time start after this partition, unless we stop at it below.
        acc._drain_index[node_id] = (i + 1) % n
        part = parts[i]
        tp = TopicPartition(part.topic, part.partition)
        if tp in acc._muted:
            continue
        dq = acc._deque(tp)
        if dq is None:
            continue
        with dq.lock:
            if not dq.batches:
                continue
            first = dq.batches[0]
            if first.attempts > 0 and first.waited_time_ms(now_ms) < batch_backoff_ms(first):
                continue
            if worker is not None:
                if first.is_writable and first.builder.uncompressed_size >= WORKER_DRAIN_BYTES:
                    # A hot batch drained while still open: its records go to the worker too, rather
                    # than to a codec on this thread (which waits for the GIL after it), and the
                    # batch goes out on a later pass.
                    acc._closed_for_appends(first)
                if first.compression_pending():
                    continue  # the worker wakes the Sender when it is done
            if ready and size + first.estimated_size_in_bytes() > max_size:
                # This request is full; this partition goes first next time.
                acc._drain_index[node_id] = i
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
                acc._drain_index[node_id] = i
                break
            if transactional and tm is not None and not tm.may_drain_partition(tp):
                # Not in the transaction yet: the Sender sends AddPartitionsToTxn first.
                continue
            excess = first.capacity - acc.batch_size
            if excess > 0 and acc._routing is not None:
                # KIP-782 growth in flight, bounded per leader (see in_flight_growth_by_node).
                held = acc._in_flight_growth.get(node_id, 0)
                if held > 0 and held + excess > acc._in_flight_growth_limit:
                    continue
            breaker = acc._breaker
            if breaker is not None and breaker.is_muted(tp) and not breaker.allow_probe(tp, now_ms):
                continue
            batch = dq.batches.popleft()
            if excess > 0 and acc._routing is not None:
                with acc._incomplete.lock:
                    acc._in_flight_growth[node_id] = acc._in_flight_growth.get(node_id, 0) + excess
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
        batch.close()
        size += batch.estimated_size_in_bytes()
        ready.append(batch)
        batch.drained(now_ms)
    if ready:
        _record_drained(acc, ready, now_ms)
    return ready


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


def _record_drained(acc: RecordAccumulator, batches: list[ProducerBatch], now_ms: int) -> None:
    """Queue time, batch size and compression rate of each drained batch (one lock per sensor)."""
    for sensor, figure in (
        (acc._queue_time_sensor, lambda b: float(b.queue_time_ms())),
        (acc._batch_size_sensor, lambda b: float(b.estimated_size_in_bytes())),
        (acc._compression_rate_sensor, lambda b: b.compression_rate()),
    ):
        if sensor is None:
            continue
        record_each = getattr(sensor, "record_each", None)
        if record_each is not None:
            record_each([figure(b) for b in batches], now_ms)
        else:
            for b in batches:
                sensor.record(figure(b), now_ms)
