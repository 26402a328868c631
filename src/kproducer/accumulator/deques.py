"""The accumulator's queues: one deque of batches per partition, grouped per topic with the topic's partitioner.

The C send lane (``kproducer._speedups.SendLane``) appends to the open batch of
a :class:`PartitionDeque` under its lock. The deque's ``lock`` and ``batches``
are fields of :class:`PartitionDequeCore`: the C type
``kproducer._speedups.PartitionDequeCore``, through whose function the lane reads
them, or its Python twin :class:`PyPartitionDequeCore` in the pure-Python pass.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

from kproducer.accumulator.batch import ProducerBatch
from kproducer.accumulator.collaborators import StickyPartitioner
from kproducer.record.c_extension import c
from kproducer.record.native import new_lock
from kproducer.structs import TopicPartition

__all__ = ["UNKNOWN_PARTITION", "PartitionDeque", "TopicInfo"]

# The partition an append names when the topic's built-in partitioner is to choose (KIP-794's sticky partition).
UNKNOWN_PARTITION = -1


class PyPartitionDequeCore:
    """A partition's lock and batches; the Python twin of ``kproducer._speedups.PartitionDequeCore``."""

    __slots__ = ("lock", "batches")


if TYPE_CHECKING:
    from kproducer.metadata.cluster import Cluster
    from kproducer.structs import Node

    PartitionDequeCore = PyPartitionDequeCore
else:
    PartitionDequeCore = c.PartitionDequeCore if c is not None else PyPartitionDequeCore


class PartitionDeque(PartitionDequeCore):
    """The batches of one partition, oldest first, with the lock appends and drains take."""

    __slots__ = ("topic_partition", "drained_bytes")

    def __init__(self, topic_partition: TopicPartition) -> None:
        # The partition's one TopicPartition: its batches, the drain and the ready check all use
        # it, so no per-batch or per-loop step makes another.
        self.topic_partition = topic_partition
        self.lock = new_lock()
        self.batches: deque[ProducerBatch] = deque()
        # The size of the batch the Sender last drained from this deque (0: none yet), written by
        # the drain only; RecordAccumulator.new_batch_size sizes the partition's next buffer from it.
        self.drained_bytes = 0


class TopicInfo:
    """Per-topic state: partition → deque, and the topic's built-in partitioner."""

    __slots__ = ("topic", "batches", "partitioner", "lock", "_leaders", "_leaders_cluster", "_on_new_deque")

    def __init__(
        self, topic: str, partitioner: StickyPartitioner, on_new_deque: Callable[[], None] | None = None
    ) -> None:
        """``on_new_deque``: called after each deque this topic adds, under the topic's lock."""
        self.topic = topic
        self._on_new_deque = on_new_deque
        self.batches: dict[int, PartitionDeque] = {}
        self.partitioner = partitioner
        self.lock = threading.Lock()
        # partition_leaders' answer (one entry per deque), for the Cluster snapshot it was made from.
        self._leaders: list[tuple[int, PartitionDeque, TopicPartition, Node | None]] = []
        self._leaders_cluster: Cluster | None = None

    def partition_leaders(
        self, cluster: Cluster
    ) -> list[tuple[int, PartitionDeque, TopicPartition, Node | None]]:
        """Each deque of the topic, in the order they were made, with its partition and leader in ``cluster``.

        The Sender's ready check visits every deque on every loop (as Java's does), and over
        thousands of partitions making each ``TopicPartition`` and looking up its leader again on
        every loop is a cost per partition that need not recur. A ``Cluster`` is an immutable
        snapshot and deques are never removed, so the answer holds until the snapshot is
        replaced or a deque is added. Called by the Sender thread only.
        """
        if cluster is not self._leaders_cluster or len(self.batches) != len(self._leaders):
            with self.lock:  # deque_for adds deques under it
                entries = list(self.batches.items())
            leaders = [
                (partition, dq, dq.topic_partition, cluster.leader_for(dq.topic_partition)) for partition, dq in entries
            ]
            self._leaders, self._leaders_cluster = leaders, cluster
        return self._leaders

    def deque_for(self, partition: int) -> PartitionDeque:
        dq = self.batches.get(partition)
        if dq is None:
            with self.lock:
                dq = self.batches.get(partition)
                if dq is None:
                    dq = self.batches[partition] = PartitionDeque(TopicPartition(self.topic, partition))
                    if self._on_new_deque is not None:
                        self._on_new_deque()
        return dq
