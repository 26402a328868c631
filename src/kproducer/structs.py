"""Small immutable values shared across the producer (frozen, slotted dataclasses)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Self

from kproducer.record.c_extension import c

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


_RECORD_METADATA_FIELDS = ("topic", "partition", "offset", "timestamp", "serialized_key_size", "serialized_value_size")


class PyRecordMetadata:
    """The fields of :class:`RecordMetadata`: the Python twin of ``kproducer._speedups.RecordMetadata``.

    ``RecordMetadata`` builds on the C type, or on this class in the pure-Python pass
    (``KPRODUCER_PURE_PYTHON=1``); ``tests/unit/test_record_metadata.py`` runs the same cases
    on both. The constructor is the type's own (a ``__new__``, as the C type's), so that the
    class above it adds no ``__init__`` and a record's metadata costs one call.
    """

    __slots__ = _RECORD_METADATA_FIELDS

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int
    serialized_value_size: int

    def __new__(cls, *args: Any, **kwargs: Any) -> Self:
        self = object.__new__(cls)
        # As object.__new__ does: a class with an __init__ of its own (a dataclass subclass
        # adding fields) takes its arguments there, and that __init__ sets these fields too.
        if cls.__init__ is object.__init__:
            topic, partition, offset, timestamp, key_size, value_size = _record_metadata_fields(*args, **kwargs)
            # Through the slots' own descriptors, as object.__setattr__ in a frozen dataclass's
            # __init__ would (the class above refuses assignment), one call each.
            _set_topic(self, topic)
            _set_partition(self, partition)
            _set_offset(self, offset)
            _set_timestamp(self, timestamp)
            _set_key_size(self, key_size)
            _set_value_size(self, value_size)
        return self


def _record_metadata_fields(
    topic: str,
    partition: int,
    offset: int,
    timestamp: int,
    serialized_key_size: int = -1,
    serialized_value_size: int = -1,
) -> tuple[str, int, int, int, int, int]:
    return topic, partition, offset, timestamp, serialized_key_size, serialized_value_size


_record_metadata_fields.__qualname__ = "RecordMetadata"  # an argument error names the class
_set_topic, _set_partition, _set_offset, _set_timestamp, _set_key_size, _set_value_size = (
    vars(PyRecordMetadata)[name].__set__ for name in _RECORD_METADATA_FIELDS
)


if TYPE_CHECKING:
    RecordMetadataFields = PyRecordMetadata
else:
    RecordMetadataFields = c.RecordMetadata if c is not None else PyRecordMetadata


def _fields_from_the_base(cls: type) -> None:
    # The class body's defaults (kept by the dataclass as each field's default) would hide the
    # base's fields: reading ``serialized_key_size`` would give -1 whatever the record's size.
    for name in _RECORD_METADATA_FIELDS:
        if name in vars(cls):
            delattr(cls, name)
    # The field names, as a slotted dataclass lists them: a subclass declared with
    # ``@dataclass(slots=True)`` then reuses the base's fields instead of declaring them again.
    type.__setattr__(cls, "__slots__", _RECORD_METADATA_FIELDS)


@dataclass(frozen=True, init=False)
class RecordMetadata(RecordMetadataFields):
    """What a record's future resolves to once the broker acknowledged it.

    ``offset`` is -1 for acks=0, as in Java. ``timestamp`` is the broker's
    log-append time when the topic uses LogAppendTime, else the create time;
    ``timestamp_type`` says which (0 CreateTime, 1 LogAppendTime, the record
    format's timestamp-type bit): the metadata of a LogAppendTime record is a
    :class:`LogAppendTimeRecordMetadata` (see :func:`metadata_type`).

    A frozen dataclass: ``dataclasses.fields``, ``replace`` and ``asdict`` work on it.
    """

    # The fields live in the base, a C type (kproducer._speedups.RecordMetadata; PyRecordMetadata
    # in the pure-Python pass): one of these is made for every delivered record.
    __slots__ = ()

    timestamp_type: ClassVar[int] = 0

    topic: str
    partition: int
    offset: int
    timestamp: int
    serialized_key_size: int = -1
    serialized_value_size: int = -1

    if TYPE_CHECKING:
        # The constructor is the fields' type's (at run time this class adds no __init__); declared
        # here so that type checkers and the API reference show its parameters.
        def __init__(
            self,
            topic: str,
            partition: int,
            offset: int,
            timestamp: int,
            serialized_key_size: int = -1,
            serialized_value_size: int = -1,
        ) -> None: ...

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def __reduce__(self) -> tuple[Any, ...]:
        # Rebuilt by calling the class with its fields in order (the fields' type has no empty
        # instance to fill in, as copy and pickle's default protocol would make); every field of
        # a dataclass subclass too, since its generated __init__ takes them all.
        return (type(self), tuple(getattr(self, f.name) for f in fields(self) if f.init))


_fields_from_the_base(RecordMetadata)


@dataclass(frozen=True, init=False)
class LogAppendTimeRecordMetadata(RecordMetadata):
    """The metadata of a record whose topic uses LogAppendTime: ``timestamp`` is the broker's."""

    __slots__ = ()

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
