"""The idempotent producer's per-partition sequence state (Java's ``TxnPartitionMap``).

The broker validates each batch's ``(producer id, epoch, base sequence)`` (KIP-98), so
that a retried batch is never written twice and never lands out of order, even with up to
five requests in flight. Per partition this keeps what Java's ``TxnPartitionEntry`` keeps:
the next sequence to hand out, the last sequence the broker acknowledged, and the batches
sent (or drained) and not yet completed, in sequence order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kproducer.structs import TopicPartition

if TYPE_CHECKING:
    from kproducer.accumulator.batch import ProducerBatch

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
_MAX_SEQUENCE = 2**31 - 1


class TxnPartitionMap:
    """Sequences and in-flight batches of every partition this producer id has written to."""

    __slots__ = ("_next_sequence", "_last_acked", "_in_flight")

    def __init__(self) -> None:
        self._next_sequence: dict[TopicPartition, int] = {}
        self._last_acked: dict[TopicPartition, int] = {}
        # Batches sent (or drained) and not yet completed, per partition, in sequence order.
        self._in_flight: dict[TopicPartition, list[ProducerBatch]] = {}

    def reset_sequences(self) -> None:
        """A new producer id or epoch: every partition's sequence starts again at 0."""
        self._next_sequence.clear()
        self._last_acked.clear()

    def next_sequence(self, tp: TopicPartition) -> int:
        return self._next_sequence.get(tp, 0)

    def increment_sequence(self, tp: TopicPartition, increment: int) -> None:
        seq = self._next_sequence.get(tp, 0) + increment
        # Sequences wrap at Int32.MAX_VALUE, as the broker expects.
        self._next_sequence[tp] = seq - _MAX_SEQUENCE - 1 if seq > _MAX_SEQUENCE else seq

    def add_in_flight(self, batch: ProducerBatch) -> None:
        lst = self._in_flight.setdefault(batch.topic_partition, [])
        lst.append(batch)
        if len(lst) > 1 and lst[-2].base_sequence > batch.base_sequence:
            lst.sort(key=lambda b: b.base_sequence)

    def remove_in_flight(self, batch: ProducerBatch) -> None:
        lst = self._in_flight.get(batch.topic_partition)
        if lst is not None:
            try:
                lst.remove(batch)
            except ValueError:
                pass
            if not lst:
                del self._in_flight[batch.topic_partition]

    def has_in_flight(self) -> bool:
        return bool(self._in_flight)

    def is_next_sequence(self, batch: ProducerBatch) -> bool:
        """Whether ``batch`` directly follows the last acknowledged sequence of its partition."""
        last = self._last_acked.get(batch.topic_partition, -1)
        return batch.base_sequence == last + 1

    def first_in_flight_sequence(self, tp: TopicPartition) -> int:
        lst = self._in_flight.get(tp)
        return lst[0].base_sequence if lst else NO_SEQUENCE

    def retry_in_flight(self, tp: TopicPartition) -> bool:
        """Whether a batch of ``tp`` that was retried is in flight again (the drain's order gate)."""
        lst = self._in_flight.get(tp)
        return lst is not None and any(b.attempts > 0 for b in lst)

    def handle_completed_batch(self, batch: ProducerBatch) -> None:
        """The broker acknowledged ``batch``: its last sequence is the partition's last acknowledged one."""
        tp = batch.topic_partition
        last = batch.base_sequence + batch.record_count - 1
        if last > self._last_acked.get(tp, -1):
            self._last_acked[tp] = last
        self.remove_in_flight(batch)
