"""The accumulator's queues: one deque of batches per partition, grouped per topic with the topic's partitioner.

The C send lane (``kproducer._speedups.SendLane``) appends to the open batch of
a :class:`PartitionDeque` under its lock, reading the ``lock`` and ``batches``
slots by name: renaming them turns the lane off (with a WARNING).
"""

from __future__ import annotations

import threading
from collections import deque

from kproducer.accumulator.batch import ProducerBatch
from kproducer.accumulator.collaborators import StickyPartitioner
from kproducer.record.native import new_lock

__all__ = ["UNKNOWN_PARTITION", "PartitionDeque", "TopicInfo"]

# The partition an append names when the topic's built-in partitioner is to choose (KIP-794's sticky partition).
UNKNOWN_PARTITION = -1


class PartitionDeque:
    """The batches of one partition, oldest first, with the lock appends and drains take."""

    __slots__ = ("lock", "batches")

    def __init__(self) -> None:
        self.lock = new_lock()
        self.batches: deque[ProducerBatch] = deque()


class TopicInfo:
    """Per-topic state: partition → deque, and the topic's built-in partitioner."""

    __slots__ = ("batches", "partitioner", "lock")

    def __init__(self, partitioner: StickyPartitioner) -> None:
        self.batches: dict[int, PartitionDeque] = {}
        self.partitioner = partitioner
        self.lock = threading.Lock()

    def deque_for(self, partition: int) -> PartitionDeque:
        dq = self.batches.get(partition)
        if dq is None:
            with self.lock:
                dq = self.batches.get(partition)
                if dq is None:
                    dq = self.batches[partition] = PartitionDeque()
        return dq
