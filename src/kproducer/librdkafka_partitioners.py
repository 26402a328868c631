"""librdkafka's partitioners, so that keys land where confluent-kafka (and every librdkafka client) puts them.

librdkafka (``rdkafka_msg.c``, ``rd_kafka_msg_partitioner_*``) offers seven
policies under its ``partitioner`` setting; its default, ``consistent_random``,
hashes keys with CRC32, not with the murmur2 of Java's producer. A program moving
from confluent-kafka keeps its per-key order across the cut-over only if the same
keys go to the same partitions, so each policy is here, byte for byte:

===================== ========================================= ==========================
name                  keyed record (the serialized key)         empty key ``b""``
===================== ========================================= ==========================
``consistent``        ``crc32(key) % n``                        partition 0 (CRC32 of b"")
``consistent_random`` ``crc32(key) % n``                        keyless (see below)
``murmur2``           ``(murmur2(key) & 0x7fffffff) % n``       hashed like any key
``murmur2_random``    the same (Java's partitioner)             hashed like any key
``fnv1a``             ``abs32(fnv1a(key)) % n``                 hashed like any key
``fnv1a_random``      the same                                  hashed like any key
``random``            uniform over all partitions, per record   the same
===================== ========================================= ==========================

A record without a key (and, for ``consistent_random``, with an empty one) is
never hashed by librdkafka whatever the policy, except ``random``: it goes to the
topic's *sticky* partition, a random one kept for ``sticky.partitioning.linger.ms``
(``rd_kafka_msg_partitioner``). kproducer's equivalent is its own sticky
partitioner (KIP-794), so these classes answer :data:`STICKY` for such records and
the producer places them there. The ``_random`` suffix therefore changes only the
documented behaviour of a key librdkafka no longer hashes.

``fnv1a`` is FNV-1a 32-bit over the bytes, taken as a signed 32-bit int made
positive as Sarama's hash partitioner does (``rdfnv1a.c``): ``-h`` for a negative
``h``, which leaves ``-2**31`` as ``2**31`` once read unsigned.
"""

from __future__ import annotations

import random
import zlib
from abc import ABC, abstractmethod
from typing import Any, ClassVar

from kproducer.errors import no_partitions_error
from kproducer.metadata import Cluster
from kproducer.murmur2 import murmur2
from kproducer.structs import TopicPartition

__all__ = [
    "LIBRDKAFKA_PARTITIONERS",
    "STICKY",
    "ConsistentPartitioner",
    "ConsistentRandomPartitioner",
    "Fnv1aPartitioner",
    "Fnv1aRandomPartitioner",
    "LibrdkafkaPartitioner",
    "Murmur2Partitioner",
    "Murmur2RandomPartitioner",
    "RandomPartitioner",
    "fnv1a",
]

#: What :meth:`LibrdkafkaPartitioner.partition` answers for a record that goes to the sticky partition.
STICKY = -1

_FNV_OFFSET = 0x811C9DC5
_FNV_PRIME = 0x01000193
_MASK = 0xFFFFFFFF


def fnv1a(data: bytes) -> int:
    """librdkafka's ``rd_fnv1a``: FNV-1a 32-bit of ``data`` made positive (Sarama's convention), unsigned."""
    h = _FNV_OFFSET
    for byte in data:
        h = ((h ^ byte) * _FNV_PRIME) & _MASK
    if h & 0x80000000:  # negative as int32: negate in 32 bits (-2**31 stays 0x80000000)
        h = (-h) & _MASK
    return h


class LibrdkafkaPartitioner(ABC):
    """One of librdkafka's ``partitioner`` policies (a :class:`~kproducer.partitioner.Partitioner`).

    Subclasses define :meth:`for_key`; this class decides which records are hashed
    at all, as ``rd_kafka_msg_partitioner`` does before calling the policy.
    """

    #: librdkafka's name for the policy (its ``partitioner`` setting).
    name: ClassVar[str] = ""
    #: Whether an empty key counts as no key (only ``consistent_random``).
    empty_key_is_keyless: ClassVar[bool] = False
    #: Records this partitioner leaves to the sticky partition are answered with :data:`STICKY`.
    defers_keyless: ClassVar[bool] = True
    #: The rule the C send lane computes for a keyed record (``kproducer._speedups.SendLane``'s
    #: ``key_hash``: 0 murmur2, 1 CRC32, 2 FNV-1a), this class being its reference; None: the Python path.
    lane_key_hash: ClassVar[int | None] = None

    def partition(
        self,
        topic: str,
        key: Any,
        key_bytes: bytes | None,
        value: Any,
        value_bytes: bytes | None,
        cluster: Cluster,
    ) -> int:
        if key_bytes is None or (self.empty_key_is_keyless and not key_bytes):
            return STICKY
        count = cluster.partition_count(topic)
        if not count:
            raise no_partitions_error(topic)
        return self.for_key(bytes(key_bytes), count)

    @abstractmethod
    def for_key(self, key_bytes: bytes, num_partitions: int) -> int:
        """The partition librdkafka chooses for ``key_bytes`` among ``num_partitions``."""

    def close(self) -> None:  # noqa: B027 - a policy holds nothing to release; the producer calls close() on any
        """Holds nothing to release."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class ConsistentPartitioner(LibrdkafkaPartitioner):
    """``consistent``: CRC32 of the key (an empty key's CRC32 is 0, so partition 0)."""

    name = "consistent"
    lane_key_hash = 1

    def for_key(self, key_bytes: bytes, num_partitions: int) -> int:
        return zlib.crc32(key_bytes) % num_partitions


class ConsistentRandomPartitioner(ConsistentPartitioner):
    """``consistent_random`` (librdkafka's default): CRC32 of the key; empty keys go where keyless ones do."""

    name = "consistent_random"
    empty_key_is_keyless = True


class Murmur2Partitioner(LibrdkafkaPartitioner):
    """``murmur2``: Java's murmur2 key hash, as the Java producer uses it."""

    name = "murmur2"
    lane_key_hash = 0

    def for_key(self, key_bytes: bytes, num_partitions: int) -> int:
        return (murmur2(key_bytes) & 0x7FFFFFFF) % num_partitions


class Murmur2RandomPartitioner(Murmur2Partitioner):
    """``murmur2_random``: what the Java producer does (keyed: murmur2; keyless: sticky)."""

    name = "murmur2_random"


class Fnv1aPartitioner(LibrdkafkaPartitioner):
    """``fnv1a``: FNV-1a 32-bit of the key, Sarama's hash partitioner."""

    name = "fnv1a"
    lane_key_hash = 2

    def for_key(self, key_bytes: bytes, num_partitions: int) -> int:
        return fnv1a(key_bytes) % num_partitions


class Fnv1aRandomPartitioner(Fnv1aPartitioner):
    """``fnv1a_random``: FNV-1a for keyed records, sticky for keyless ones."""

    name = "fnv1a_random"


class RandomPartitioner(LibrdkafkaPartitioner):
    """``random``: every record, keyed or not, to a uniformly random partition (no stickiness).

    As ``rd_kafka_msg_partitioner_random``: one draw over all partitions, and a
    second one when the first partition has no leader.
    """

    name = "random"
    defers_keyless = False
    lane_key_hash = None

    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng if rng is not None else random.Random()

    def partition(
        self,
        topic: str,
        key: Any,
        key_bytes: bytes | None,
        value: Any,
        value_bytes: bytes | None,
        cluster: Cluster,
    ) -> int:
        count = cluster.partition_count(topic)
        if not count:
            raise no_partitions_error(topic)
        chosen = self._rng.randrange(count)
        if cluster.leader_for(TopicPartition(topic, chosen)) is None:
            chosen = self._rng.randrange(count)
        return chosen

    def for_key(self, key_bytes: bytes, num_partitions: int) -> int:
        return self._rng.randrange(num_partitions)


#: librdkafka's ``partitioner`` names -> the class implementing each.
LIBRDKAFKA_PARTITIONERS: dict[str, type[LibrdkafkaPartitioner]] = {
    cls.name: cls
    for cls in (
        ConsistentPartitioner,
        ConsistentRandomPartitioner,
        Murmur2Partitioner,
        Murmur2RandomPartitioner,
        Fnv1aPartitioner,
        Fnv1aRandomPartitioner,
        RandomPartitioner,
    )
}
