"""confluent-kafka's producer API on kproducer: change ``from confluent_kafka import ...`` to this module.

``Producer(conf)`` and ``SerializingProducer(conf)`` behave as confluent-kafka's
do, on one :class:`kproducer.Producer` each:

- ``produce(topic, value=None, key=None, partition=-1, on_delivery=None,
  callback=None, timestamp=0, headers=None)`` queues a record and never blocks:
  past ``queue.buffering.max.messages`` records or ``queue.buffering.max.kbytes``
  not yet reported it raises ``BufferError``, as librdkafka does.
- Delivery reports run on the caller's thread, inside ``poll(timeout)`` and
  ``flush(timeout)`` (and the transactional calls that flush), as confluent-kafka
  serves them: kproducer's I/O thread only queues them. An exception raised by a
  delivery callback propagates out of ``poll()``/``flush()``; the reports after
  it stay queued for the next call, none is lost or served twice.
- ``flush()`` returns the number of records still outstanding; ``len(producer)``
  counts records whose report has not been served yet.
- ``msg.key()``/``msg.value()`` are the bytes sent, ``msg.headers()`` the
  ``(key, bytes)`` list, ``err.code()`` librdkafka's codes (``KafkaError._MSG_TIMED_OUT``...).
- Keys are partitioned with librdkafka's default, ``consistent_random`` (CRC32),
  unless ``partitioner`` says otherwise, so keys land where confluent-kafka put them.
- librdkafka's configuration names are translated to kproducer's (``CONFIG_NAMES``);
  the ones that have no meaning on kproducer are refused by name, with the reason
  and what to do instead (``REFUSED``). Java names are accepted as well.

What differs, and why, is listed in ``docs/migrating.md``.
"""

from __future__ import annotations

from typing import Any

from kproducer.compat.confluent_kafka.errors import (
    KafkaError,
    KafkaException,
    KeySerializationError,
    SerializationError,
    ValueSerializationError,
)
from kproducer.compat.confluent_kafka.message import (
    OFFSET_INVALID,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_LOG_APPEND_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    Message,
    _TopicPartition,
)
from kproducer.compat.confluent_kafka.metadata import (
    BrokerMetadata,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
)
from kproducer.compat.confluent_kafka.producer import Producer, SerializingProducer
from kproducer.compat.confluent_kafka.settings import CONFIG_NAMES, REFUSED

__all__ = [
    "CONFIG_NAMES",
    "OFFSET_INVALID",
    "REFUSED",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "BrokerMetadata",
    "ClusterMetadata",
    "KafkaError",
    "KafkaException",
    "KeySerializationError",
    "Message",
    "PartitionMetadata",
    "Producer",
    "SerializationError",
    "SerializingProducer",
    "TopicMetadata",
    "TopicPartition",  # noqa: F822 - provided by the module __getattr__ below
    "ValueSerializationError",
]


def __getattr__(name: str) -> Any:
    """``TopicPartition`` is confluent-kafka's own class when confluent-kafka is installed.

    A program that switched this import usually still consumes with confluent-kafka's
    ``Consumer`` (kproducer has none), whose ``committed()``, ``assign()``... accept
    only confluent-kafka's TopicPartition; kproducer's ``send_offsets_to_transaction``
    reads either. Resolved on first use, so importing this module loads no librdkafka.
    """
    if name == "TopicPartition":
        try:
            from confluent_kafka import TopicPartition as ConfluentTopicPartition
        except ImportError:
            cls: Any = _TopicPartition
        else:
            cls = ConfluentTopicPartition
        globals()["TopicPartition"] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
