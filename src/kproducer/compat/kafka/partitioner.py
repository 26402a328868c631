"""kafka-python's ``kafka.partitioner``: ``Partitioner``, ``DefaultPartitioner``, ``StickyPartitioner``, ``murmur2``.

Subclass :class:`Partitioner` for a custom choice, as with kafka-python.
``DefaultPartitioner`` and ``StickyPartitioner`` given as ``partitioner`` select
kproducer's built-in partitioner: keyed records go where these classes put them
(murmur2), keyless ones stick to a partition per batch (KIP-794).
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from typing import Any

from kproducer.compat._partitioners import murmur2

__all__ = ["DefaultPartitioner", "Partitioner", "StickyPartitioner", "murmur2"]


class Partitioner(ABC):
    """A custom partitioner: ``partition()`` returns the partition id for a record without one."""

    @abstractmethod
    def partition(
        self, topic: str, key: Any, serialized_key: bytes | None, value: Any, serialized_value: bytes | None,
        cluster: Any,
    ) -> int:
        """``cluster`` answers ``topics()``, ``partitions_for_topic(topic)`` and
        ``available_partitions_for_topic(topic)`` (sets of partition ids)."""


class DefaultPartitioner(Partitioner):
    """murmur2 of the serialized key modulo the partition count; a random available partition without a key."""

    def partition(
        self, topic: str, key: Any, serialized_key: bytes | None, value: Any, serialized_value: bytes | None,
        cluster: Any,
    ) -> int:
        if topic not in cluster.topics():
            raise ValueError(f"Topic {topic} not found in ClusterMetadata")
        all_partitions: list[int] = sorted(cluster.partitions_for_topic(topic))
        if serialized_key is not None:
            return all_partitions[(murmur2(serialized_key) & 0x7FFFFFFF) % len(all_partitions)]
        available: list[int] = list(cluster.available_partitions_for_topic(topic))
        return random.choice(available or all_partitions)


class StickyPartitioner(DefaultPartitioner):
    """kafka-python's KIP-480 partitioner; as ``partitioner``, kproducer's built-in (KIP-794) sticky choice."""
