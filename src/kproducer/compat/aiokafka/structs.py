"""aiokafka's result types (``aiokafka.structs``), as an aiokafka program reads them."""

from __future__ import annotations

from typing import NamedTuple

from kproducer.structs import TopicPartition

__all__ = ["OffsetAndMetadata", "RecordMetadata", "TopicPartition"]


class RecordMetadata(NamedTuple):
    """What ``await (await producer.send(...))`` gives: aiokafka's fields, in aiokafka's order.

    ``timestamp_type`` is 0 (CreateTime: the timestamp the record was sent with)
    or 1 (LogAppendTime: the broker's, when the topic is configured so).
    ``log_start_offset`` is None: kproducer does not keep it from the produce
    response.
    """

    topic: str
    partition: int
    topic_partition: TopicPartition
    offset: int
    timestamp: int | None
    timestamp_type: int
    log_start_offset: int | None


class OffsetAndMetadata(NamedTuple):
    """An offset to commit with ``send_offsets_to_transaction``, and its metadata string."""

    offset: int
    metadata: str
