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

    __slots__ = ("lock", "_batches")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._batches: dict[ProducerBatch, None] = {}

    def add(self, batch: ProducerBatch) -> None:
        with self.lock:
            self._batches[batch] = None

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
