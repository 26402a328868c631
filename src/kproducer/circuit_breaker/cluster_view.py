"""The cluster as the partitioner sees it while partitions are muted (KIP-693's filtered Cluster)."""

from __future__ import annotations

from kproducer.metadata import Cluster
from kproducer.structs import PartitionInfo, TopicPartition


class CircuitBreakerClusterView(Cluster):
    """A Cluster with muted partitions filtered out of ``available_partitions_for_topic``.

    KIP-693: "When a breaker is in effect, it will filter out muted partitions when
    calculating availablePartitionsForTopic." It *is* a Cluster (it shares the base
    snapshot's immutable tables), so every partitioner takes it where it takes a
    Cluster. ``muted`` holds the partitions closed to new records: muted ones, less
    those whose probe is due (they must receive a record to be probed at all).
    Immutable like Cluster; per-topic results are memoized.
    """

    __slots__ = ("cluster", "muted", "_available")

    def __init__(self, cluster: Cluster, muted: frozenset[TopicPartition]) -> None:
        for name in Cluster.__slots__:
            object.__setattr__(self, name, getattr(cluster, name))
        self.cluster = cluster
        self.muted = muted
        self._available: dict[str, tuple[PartitionInfo, ...]] = {}

    def is_muted(self, tp: TopicPartition) -> bool:
        return tp in self.muted

    def available_partitions_for_topic(self, topic: str) -> tuple[PartitionInfo, ...]:
        """Partitions with a live leader that are not muted; empty when all are muted."""
        cached = self._available.get(topic)
        if cached is None:
            muted = self.muted
            cached = tuple(
                p
                for p in self.cluster.available_partitions_for_topic(topic)
                if (p.topic, p.partition) not in muted
            )
            self._available[topic] = cached
        return cached

    def __repr__(self) -> str:
        return f"CircuitBreakerClusterView({self.cluster!r}, muted={len(self.muted)})"
