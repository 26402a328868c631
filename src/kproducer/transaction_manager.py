"""Idempotent-producer state: producer id, epoch and per-partition sequence numbers.

Seed 003 ("The Ordering Hazard Without Idempotence"): with idempotence the broker
validates each batch's ``(producer id, epoch, base sequence)`` so that a retried
batch is never written twice and never lands out of order, even with up to five
requests in flight. This object is the client half of that contract. It is owned
by the Sender thread (the accumulator reads it while draining, on that same
thread), so it needs no lock except for the state callers read in ``send()``.

When the sequence state of a partition can no longer be trusted (a batch that
had a sequence failed, UNKNOWN_PRODUCER_ID, an out-of-order sequence that is not
explained by an earlier failed batch), the producer asks for a fresh producer id
once nothing is in flight and restarts every partition's sequence at 0: with a
new producer id the broker has no state to conflict with, so retried and queued
batches keep their order under new sequences.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from kproducer.errors import FatalError, KafkaError
from kproducer.structs import TopicPartition

if TYPE_CHECKING:
    from kproducer.accumulator.batch import ProducerBatch

log = logging.getLogger(__name__)

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
_MAX_SEQUENCE = 2**31 - 1


class TransactionManager:
    """Producer id, epoch and sequence bookkeeping for ``enable.idempotence=true``."""

    def __init__(self) -> None:
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self._next_sequence: dict[TopicPartition, int] = {}
        self._last_acked: dict[TopicPartition, int] = {}
        # Batches sent (or drained) and not yet completed, per partition, in sequence order.
        self._in_flight: dict[TopicPartition, list[ProducerBatch]] = {}
        self._reset_required = False
        self._init_in_progress = False
        self._fatal: KafkaError | None = None
        self._lock = threading.Lock()

    # ------------------------------------------------------------ producer id
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID

    def needs_producer_id(self) -> bool:
        """True when the Sender must send InitProducerId before draining."""
        return self._fatal is None and (not self.has_producer_id() or self._reset_required)

    def reset_pending(self) -> bool:
        return self._reset_required

    @property
    def init_in_progress(self) -> bool:
        return self._init_in_progress

    def begin_init(self) -> None:
        self._init_in_progress = True

    def init_failed(self) -> None:
        self._init_in_progress = False

    def set_producer_id_and_epoch(self, producer_id: int, epoch: int) -> None:
        """A new producer id: every partition's sequence starts again at 0."""
        log.info("producer id %d, epoch %d", producer_id, epoch)
        self.producer_id = producer_id
        self.producer_epoch = epoch
        self._next_sequence.clear()
        self._last_acked.clear()
        self._reset_required = False
        self._init_in_progress = False

    def request_producer_id_reset(self, reason: str) -> None:
        """Sequence state is no longer trustworthy: get a fresh producer id once nothing is in flight."""
        if not self._reset_required:
            log.info("requesting a new producer id: %s", reason)
        self._reset_required = True

    def producer_id_and_epoch(self) -> tuple[int, int]:
        return self.producer_id, self.producer_epoch

    # ------------------------------------------------------------ fatal state
    def transition_to_fatal(self, error: KafkaError) -> None:
        if self._fatal is None:
            log.error("idempotent producer entered a fatal state: %s", error)
            self._fatal = error

    @property
    def fatal_error(self) -> KafkaError | None:
        return self._fatal

    # ------------------------------------------------------------ sequences (accumulator drain hook)
    def should_stop_draining(self) -> bool:
        """No new batch gets a sequence while a producer-id reset is pending or none is known."""
        return self._fatal is not None or not self.has_producer_id() or self._reset_required

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

    # ------------------------------------------------------------ completion
    def handle_completed_batch(self, batch: ProducerBatch) -> None:
        tp = batch.topic_partition
        last = batch.base_sequence + batch.record_count - 1
        if last > self._last_acked.get(tp, -1):
            self._last_acked[tp] = last
        self.remove_in_flight(batch)

    def can_retry_out_of_order(self, batch: ProducerBatch) -> bool:
        """OUT_OF_ORDER_SEQUENCE_NUMBER is retriable when an earlier batch of the partition is still unresolved.

        The broker rejects every batch after one that failed; those followers are
        retried once the earlier one is, so they are not errors of their own.
        """
        if batch.producer_id != self.producer_id or batch.producer_epoch != self.producer_epoch:
            return True  # sent under an old producer id: it will be resequenced
        return not self.is_next_sequence(batch)

    def handle_failed_batch(self, batch: ProducerBatch, error: BaseException) -> None:
        """A batch that held a sequence failed for good: later sequences of its partition are now gaps."""
        self.remove_in_flight(batch)
        if isinstance(error, FatalError):
            return
        if batch.base_sequence != NO_SEQUENCE and batch.producer_id == self.producer_id:
            self.request_producer_id_reset(f"batch for {batch.topic_partition} failed with {type(error).__name__}")
