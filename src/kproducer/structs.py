"""Small immutable values shared across the producer (frozen, slotted dataclasses)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

Headers = list[tuple[str, bytes | None]]


class TopicPartition(NamedTuple):
    """A topic and partition. A NamedTuple: hashing it is cheap on the hot path."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(slots=True, frozen=True)
class Node:
    """A broker as metadata describes it."""

    id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(slots=True, frozen=True)
class PartitionInfo:
    """One partition of a topic; ``leader`` is -1 when there is none."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int = -1
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    offline_replicas: tuple[int, ...] = ()

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(slots=True, frozen=True)
class RecordMetadata:
    """What a record's future resolves to once the broker acknowledged it.

    ``offset`` is -1 for acks=0, as in Java. ``timestamp`` is the broker's
    log-append time when the topic uses LogAppendTime, else the create time;
    ``timestamp_type`` says which (0 CreateTime, 1 LogAppendTime, the record
    format's timestamp-type bit): the metadata of a LogAppendTime record is a
    :class:`LogAppendTimeRecordMetadata` (see :func:`metadata_type`).
    """

    timestamp_type: ClassVar[int] = 0

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int = -1
    serialized_value_size: int = -1

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(slots=True, frozen=True)
class LogAppendTimeRecordMetadata(RecordMetadata):
    """The metadata of a record whose topic uses LogAppendTime: ``timestamp`` is the broker's."""

    timestamp_type: ClassVar[int] = 1


def metadata_type(log_append_time: int) -> type[RecordMetadata]:
    """The metadata class for a ProduceResponse's ``log_append_time`` (-1 when the topic keeps the create time)."""
    return RecordMetadata if log_append_time == -1 else LogAppendTimeRecordMetadata


@dataclass(slots=True)
class ProducerRecord:
    """A record to send; ``Producer.send`` accepts one in place of its arguments."""

    topic: str
    value: Any = None
    key: Any = None
    partition: int | None = None
    timestamp: int | None = None
    headers: Headers | None = field(default=None)
