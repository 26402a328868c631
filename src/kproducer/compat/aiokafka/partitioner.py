"""aiokafka's ``aiokafka.partitioner``: ``DefaultPartitioner`` and ``murmur2``.

``AIOKafkaProducer(partitioner=DefaultPartitioner())`` (aiokafka's default) uses
kproducer's built-in partitioner, which places keyed records as this class does.
Called directly, it answers as aiokafka's does.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from kproducer.compat._partitioners import murmur2

__all__ = ["DefaultPartitioner", "murmur2"]


class DefaultPartitioner:
    """murmur2 of the key modulo the partition count (the Java client's choice); a random available
    partition for a record without a key."""

    def __call__(self, key: bytes | None, all_partitions: Sequence[int], available: Sequence[int]) -> int:
        if key is None:
            return random.choice(list(available) or list(all_partitions))
        return all_partitions[(murmur2(key) & 0x7FFFFFFF) % len(all_partitions)]
