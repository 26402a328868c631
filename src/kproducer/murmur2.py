"""Kafka's murmur2 key hash (Java's ``Utils.murmur2``) and the keyed-partition formula built on it.

``murmur2`` must agree bit for bit with Java's ``Utils.murmur2`` (and librdkafka's
``murmur2_random``), or keyed records land on different partitions than other
clients put them. The function below is the reference; the C extension's
``murmur2_raw`` (``_speedups.c``) mirrors it and is what :func:`partition_for_key`
calls when it is built. Every keyed choice in kproducer (the partitioner, the
circuit breaker's reroute, the bulk path's per-key grouping) goes through
:func:`partition_for_key` or its C mirror.
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from kproducer.record import c_extension

__all__ = ["murmur2", "to_positive", "partition_for_key"]

_M = 0x5BD1E995
_MASK = 0xFFFFFFFF
_SEED = 0x9747B28C
_structs: dict[int, struct.Struct] = {}


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 (``Utils.murmur2``): signed 32-bit hash of ``data``, seed 0x9747b28c."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    n4 = length >> 2
    if n4:
        st = _structs.get(n4)
        if st is None:
            st = _structs.setdefault(n4, struct.Struct(f"<{n4}I"))
        m = _M
        mask = _MASK
        for k in st.unpack_from(data):
            k = (k * m) & mask
            h = ((h * m) ^ ((k ^ (k >> 24)) * m)) & mask
    rest = length & 3
    if rest:
        tail = length & ~3
        if rest == 3:
            h ^= data[tail + 2] << 16
        if rest >= 2:
            h ^= data[tail + 1] << 8
        h = ((h ^ data[tail]) * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - 0x100000000 if h & 0x80000000 else h


# The C murmur2 when built (same results), else the reference above.
_murmur2_hot: Callable[[bytes], int] = c_extension.c.murmur2 if c_extension.AVAILABLE else murmur2


def to_positive(n: int) -> int:
    """Java ``Utils.toPositive``: clears the sign bit (not abs(), which overflows on MIN_VALUE)."""
    return n & 0x7FFFFFFF


def partition_for_key(key_bytes: bytes, num_partitions: int) -> int:
    """The partition Java's producer (and librdkafka's murmur2_random) choose for a keyed record.

    ``toPositive(murmur2(key)) % numPartitions``, as in Java's ``BuiltInPartitioner.partitionForKey``.
    """
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
    return (_murmur2_hot(key_bytes) & 0x7FFFFFFF) % num_partitions
