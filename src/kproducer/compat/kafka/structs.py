"""kafka-python's value types (``kafka.structs`` and the producer's ``RecordMetadata``)."""

from __future__ import annotations

from typing import NamedTuple

from kproducer.structs import TopicPartition

__all__ = ["OffsetAndMetadata", "RecordMetadata", "TopicPartition"]


class RecordMetadata(NamedTuple):
    """What ``future.get()`` returns: kafka-python's fields, in its order (``checksum`` is None for format v2)."""

    topic: str
    partition: int
    topic_partition: TopicPartition
    offset: int
    timestamp: int
    checksum: int | None
    serialized_key_size: int
    serialized_value_size: int
    serialized_header_size: int


class OffsetAndMetadata(NamedTuple):
    """An offset to commit with ``send_offsets_to_transaction``, its metadata and leader epoch."""

    offset: int
    metadata: str
    leader_epoch: int = -1
