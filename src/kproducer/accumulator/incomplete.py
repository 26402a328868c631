"""The batches created and not completed yet, queued or in flight (Java's ``IncompleteBatches``).

``flush()`` waits on them, a forced close aborts them, and ``deallocate`` forgets
each one exactly once. The lock also guards KIP-782's in-flight growth budget
(``RecordAccumulator.in_flight_growth_by_node``), because ``deallocate`` gives a batch's growth back in the same
step as it forgets the batch.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kproducer.accumulator.batch import ProducerBatch

__all__ = ["IncompleteBatches"]


class IncompleteBatches:
    """An insertion-ordered set of batches under one lock."""

    __slots__ = ("lock", "_batches", "_created_floor_ms")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._batches: dict[ProducerBatch, None] = {}
        # No incomplete batch was created before this (a lower bound: completions leave it be).
        self._created_floor_ms: int | None = None

    def add(self, batch: ProducerBatch) -> None:
        lock = self.lock
        lock.acquire()  # not ``with`` (docs/architecture.md, "Locks on the record path")
        try:
            self._batches[batch] = None
            floor = self._created_floor_ms
            if floor is None or batch.created_ms < floor:
                self._created_floor_ms = batch.created_ms
        finally:
            lock.release()

    def none_created_before(self, cutoff_ms: int) -> bool:
        """True when no incomplete batch was created before ``cutoff_ms``.

        The Sender asks this every loop before it looks through every partition's queue for
        batches past ``delivery.timeout.ms`` (Java's ``RecordAccumulator.expiredBatches`` walks
        them all each time): with the default two minutes, that walk over a thousand partitions'
        locks finds nothing nearly always. The floor is a lower bound kept as batches are added;
        when it says a batch may be that old it is computed again from the batches themselves,
        so the answer is exact, and cheap again once the old batches are gone.
        """
        floor = self._created_floor_ms
        if floor is None or floor >= cutoff_ms:
            return True
        with self.lock:
            oldest = min((b.created_ms for b in self._batches), default=None)
            self._created_floor_ms = oldest
        return oldest is None or oldest >= cutoff_ms

    def remove_locked(self, batch: ProducerBatch) -> None:
        """Forget ``batch`` (the caller holds :attr:`lock`)."""
        self._batches.pop(batch, None)

    def copy_all(self) -> list[ProducerBatch]:
        """A snapshot, oldest first."""
        with self.lock:
            return list(self._batches)

    def __bool__(self) -> bool:
        with self.lock:
            return bool(self._batches)

    def __len__(self) -> int:
        return len(self._batches)

    def record_count(self) -> int:
        """Records whose batch has not completed yet."""
        return sum(b.record_count for b in self.copy_all() if not b.result.completed)

    def await_completion(self, timeout: float | None = None) -> bool:
        """Wait for every batch incomplete now (and the parts of any that get split); False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        awaited: set[int] = set()
        targets = self.copy_all()
        while targets:
            for batch in targets:
                awaited.add(id(batch))
                remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
                if not batch.result.await_(remaining):
                    return False
            # Batches split for MESSAGE_TOO_LARGE carry the records on: wait for those too.
            targets = [b for b in self.copy_all() if b.is_split_batch and id(b) not in awaited]
        return True
