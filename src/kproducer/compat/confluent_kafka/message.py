"""confluent-kafka's ``Message`` (what a delivery report carries) and ``TopicPartition``, with librdkafka's constants."""

from __future__ import annotations

from kproducer.compat.confluent_kafka.errors import KafkaError

__all__ = ["OFFSET_INVALID", "TIMESTAMP_CREATE_TIME", "TIMESTAMP_LOG_APPEND_TIME", "TIMESTAMP_NOT_AVAILABLE", "Message"]

TIMESTAMP_NOT_AVAILABLE = 0
TIMESTAMP_CREATE_TIME = 1
TIMESTAMP_LOG_APPEND_TIME = 2
OFFSET_INVALID = -1001  # librdkafka's RD_KAFKA_OFFSET_INVALID: no offset (acks=0, or the record failed)
_PARTITION_UA = -1  # librdkafka's RD_KAFKA_PARTITION_UA: let the partitioner choose


class _TopicPartition:
    """confluent-kafka's ``TopicPartition(topic, partition=-1, offset=-1001, metadata=None, leader_epoch=None)``.

    Used when confluent-kafka is not installed (see the package's ``__getattr__``).
    """

    __slots__ = ("topic", "partition", "offset", "metadata", "leader_epoch", "error")

    def __init__(
        self,
        topic: str,
        partition: int = -1,
        offset: int = OFFSET_INVALID,
        metadata: str | None = None,
        leader_epoch: int | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.metadata = metadata
        self.leader_epoch = leader_epoch
        self.error: KafkaError | None = None

    def _key(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _TopicPartition):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: _TopicPartition) -> bool:
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"TopicPartition{{topic={self.topic},partition={self.partition},offset={self.offset},"
            f"leader_epoch={self.leader_epoch},error={self.error}}}"
        )


class Message:
    """confluent-kafka's ``Message``, as a delivery report carries it."""

    __slots__ = ("_topic", "_partition", "_offset", "_key", "_value", "_headers", "_error", "_timestamp", "_latency")

    def __init__(
        self,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
        key: bytes | None = None,
        value: bytes | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
        error: KafkaError | None = None,
        timestamp: tuple[int, int] = (TIMESTAMP_NOT_AVAILABLE, 0),
        latency: float | None = None,
    ) -> None:
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._key = key
        self._value = value
        self._headers = headers
        self._error = error
        self._timestamp = timestamp
        self._latency = latency

    def topic(self) -> str | None:
        return self._topic

    def partition(self) -> int | None:
        return self._partition

    def offset(self) -> int | None:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return None if self._headers is None else list(self._headers)

    def error(self) -> KafkaError | None:
        return self._error

    def timestamp(self) -> tuple[int, int]:
        return self._timestamp

    def latency(self) -> float | None:
        """Seconds from produce() to the broker's answer."""
        return self._latency

    def leader_epoch(self) -> int | None:
        return None

    def set_key(self, key: bytes | None) -> None:
        self._key = key

    def set_value(self, value: bytes | None) -> None:
        self._value = value

    def set_headers(self, headers: list[tuple[str, bytes | None]] | None) -> None:
        self._headers = headers

    def __len__(self) -> int:
        return 0 if self._value is None else len(self._value)

    def __repr__(self) -> str:
        return f"Message({self._topic}-{self._partition}@{self._offset}{', ' + repr(self._error) if self._error else ''})"
