"""The peers' murmur2 (unsigned, as aiokafka and kafka-python return it) over kproducer's one implementation."""

from __future__ import annotations

from kproducer.murmur2 import murmur2 as _murmur2

__all__ = ["murmur2"]


def murmur2(data: bytes) -> int:
    """Kafka's murmur2 of ``data`` as an unsigned 32-bit int (kproducer's returns Java's signed int)."""
    return _murmur2(data) & 0xFFFFFFFF
