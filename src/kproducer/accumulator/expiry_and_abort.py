"""Batches that end without a broker's answer: queued past ``delivery.timeout.ms``, or aborted.

Java's ``RecordAccumulator.expiredBatches`` and ``abortIncompleteBatches``. The
Sender fails expired batches through their futures; a forced close (or a
fatal idempotence error, for the batches never drained) aborts them here.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

from kproducer.errors import IllegalStateError, ProducerClosedError
from kproducer.structs import TopicPartition

if TYPE_CHECKING:
    from kproducer.accumulator.accumulator import RecordAccumulator
    from kproducer.accumulator.batch import ProducerBatch
    from kproducer.accumulator.deques import PartitionDeque
    from kproducer.metadata import Cluster

__all__ = ["abort_incomplete_batches", "abort_undrained_batches", "expired_batches", "queued_batches_led_by"]

log = logging.getLogger("kproducer.accumulator.accumulator")  # the accumulator's log lines keep its name


def expired_batches(acc: RecordAccumulator, now_ms: int) -> list[ProducerBatch]:
    """Queued batches past ``delivery.timeout.ms``, removed from their deques (in-flight ones are the Sender's)."""
    expired: list[ProducerBatch] = []
    for info in list(acc._active.values()):
        for dq in list(info.batches.values()):
            _expire_deque(acc, dq, now_ms, expired)
    return expired


def queued_batches_led_by(acc: RecordAccumulator, cluster: Cluster, node_id: int) -> list[ProducerBatch]:
    """Every queued batch of the partitions ``node_id`` leads, removed from their deques, in deque order.

    For a leader that refuses this client's TLS handshake or SASL credentials: its batches can only
    wait for ``delivery.timeout.ms``, so the Sender fails them with the refusal at once.
    """
    taken: list[ProducerBatch] = []
    for topic, info in list(acc._active.items()):
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
    acc: RecordAccumulator, dq: PartitionDeque, now_ms: int, expired: list[ProducerBatch]
) -> None:
    with dq.lock:
        batches = dq.batches
        while batches:
            batch = batches[0]
            if batch.has_reached_delivery_timeout(acc.delivery_timeout_ms, now_ms):
                batches.popleft()
                batch.abort_record_appends()
                expired.append(batch)
            else:
                break


def _abort_batches(acc: RecordAccumulator, reason: BaseException, undrained_only: bool = False) -> None:
    for batch in acc._incomplete.copy_all():
        dq = acc._deque(batch.topic_partition)
        aborted = not undrained_only
        if dq is not None:
            with dq.lock:
                if undrained_only:
                    if acc._tm is not None:
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
        acc.deallocate(batch)


def abort_incomplete_batches(acc: RecordAccumulator, reason: BaseException | None = None) -> None:
    """Fail and deallocate every incomplete batch (forced close), waiting out in-progress appends."""
    exc = reason if reason is not None else ProducerClosedError("Producer is closed forcefully.")
    for _ in range(10_000):
        _abort_batches(acc, exc)
        if not acc.appends_in_progress():
            break
        time.sleep(0.001)
    _abort_batches(acc, exc)


def abort_undrained_batches(acc: RecordAccumulator, reason: BaseException) -> None:
    """Fail and deallocate the batches that were never drained (fatal idempotence error)."""
    _abort_batches(acc, reason, undrained_only=True)
