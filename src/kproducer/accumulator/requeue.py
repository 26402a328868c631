"""Batches coming back from the Sender to the front of their queue: retried, split, or given a new producer id.

Java's ``RecordAccumulator.reenqueue`` and ``splitAndReenqueue``. With
idempotence a batch that already has a sequence goes back in sequence order, so
that the partition's batches are sent again in the order the broker expects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kproducer.accumulator.batch import NO_SEQUENCE
from kproducer.accumulator.growth import release_growth
from kproducer.record.codecs import CompressionType

if TYPE_CHECKING:
    from collections import deque

    from kproducer.accumulator.accumulator import RecordAccumulator
    from kproducer.accumulator.batch import ProducerBatch
    from kproducer.record.builder import MemoryRecordsBuilder

__all__ = ["reenqueue", "reset_producer_state_of_queued_batches", "split_and_reenqueue"]


def reenqueue(acc: RecordAccumulator, batch: ProducerBatch, now_ms: int) -> None:
    """Put a batch back at the front of its deque for a retry, in sequence order when idempotent."""
    batch.reenqueued(now_ms)
    release_growth(acc, batch)
    batch.retry_backoff_ms = acc._retry_backoff.backoff(batch.attempts - 1)
    dq = acc._deque_or_create(batch.topic_partition)
    with dq.lock:
        if acc._tm is not None and batch.has_sequence():
            _insert_in_sequence_order(dq.batches, batch)
        else:
            dq.batches.appendleft(batch)
        acc._active[batch.topic_partition.topic] = acc._topic(batch.topic_partition.topic)


def _insert_in_sequence_order(batches: deque[ProducerBatch], batch: ProducerBatch) -> None:
    """Before the first queued batch with a higher (or no) sequence."""
    position = 0
    for queued in batches:
        if queued.has_sequence() and queued.base_sequence < batch.base_sequence:
            position += 1
        else:
            break
    batches.insert(position, batch)


def split_and_reenqueue(acc: RecordAccumulator, big_batch: ProducerBatch) -> int:
    """Split a batch rejected with MESSAGE_TOO_LARGE and queue the parts at the front; the number of parts.

    The caller still deallocates ``big_batch`` (its buffer goes back to the pool).
    """
    topic = big_batch.topic_partition.topic
    if acc.compression is not CompressionType.NONE:
        # The estimate was too optimistic: start again from the observed ratio.
        acc._ratio_estimator.update_estimation(topic, acc.compression, big_batch.compression_rate())
    magic = big_batch.magic
    if big_batch.capacity > acc.batch_size:
        # The broker's message.max.bytes (or the topic's max.message.bytes) is below what the
        # batch grew to: this topic's batches stay within batch.size from now on.
        acc._growth_capped.add(topic)

    def factory(buf: bytearray) -> MemoryRecordsBuilder:
        return acc._builder(buf, magic, topic)

    parts = big_batch.split(acc.batch_size, factory)
    dq = acc._deque_or_create(big_batch.topic_partition)
    for part in reversed(parts):
        acc._incomplete.add(part)
        with dq.lock:
            if acc._tm is not None and part.has_sequence():
                _insert_in_sequence_order(dq.batches, part)
            else:
                dq.batches.appendleft(part)
            acc._active[topic] = acc._topic(topic)
    return len(parts)


def reset_producer_state_of_queued_batches(acc: RecordAccumulator) -> None:
    """A new producer id is coming: queued batches lose their old sequences and get new ones at drain."""
    for _tp, dq in acc._all_deques():
        with dq.lock:
            for batch in dq.batches:
                if batch.has_sequence():
                    batch.reset_producer_state(-1, -1, NO_SEQUENCE)
