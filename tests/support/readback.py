"""Read a topic back with confluent-kafka's consumer: the independent check of what kproducer wrote."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ConsumedRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    timestamp: int
    timestamp_type: int


def create_topic(bootstrap: str, topic: str, partitions: int = 1, timeout: float = 10.0) -> None:
    """Create a topic with confluent-kafka's admin client (independent of kproducer.admin)."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(topic, partitions, 1)], operation_timeout=timeout).values():
        fut.result(timeout)


def read_topic(
    bootstrap: str,
    topic: str,
    expected: int,
    partitions: int | None = None,
    timeout: float = 30.0,
    security: dict[str, Any] | None = None,
) -> list[ConsumedRecord]:
    """Consume from offset 0 of every partition until ``expected`` records arrived.

    Uses assign() (no consumer group), so it does not depend on the broker's
    group coordinator. Raises AssertionError, naming what was missing, on timeout.
    Returns records sorted by (partition, offset). ``security`` adds librdkafka settings
    (security.protocol, ssl.ca.location, sasl.*) to read through the same TLS/SASL path.
    """
    return read_topics(bootstrap, {topic: partitions}, expected, timeout, security)


def read_topics(
    bootstrap: str,
    topics: dict[str, int | None],
    expected: int,
    timeout: float = 30.0,
    security: dict[str, Any] | None = None,
) -> list[ConsumedRecord]:
    """:func:`read_topic` over several topics with one consumer (``None``: ask for the partition count).

    Returns records sorted by (topic, partition, offset).
    """
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "kproducer-readback",
            "enable.auto.commit": False,
            "fetch.wait.max.ms": 50,
            # Verify every batch's CRC on the consumer side too: a corrupt batch is an error, not data.
            "check.crcs": True,
            **(security or {}),
        }
    )
    transient = {KafkaError._PARTITION_EOF, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN}
    names = ", ".join(repr(t) for t in list(topics)[:3]) + (f" and {len(topics) - 3} more" if len(topics) > 3 else "")

    def take(batch: list[Any], out: list[ConsumedRecord]) -> None:
        for m in batch:
            err = m.error()
            if err is not None:
                if err.code() in transient or (err.retriable() and not err.fatal()):
                    continue
                raise AssertionError(f"reading back {m.topic()!r} partition {m.partition()}: {err}")
            ts_type, ts = m.timestamp()
            out.append(
                ConsumedRecord(
                    m.topic(), m.partition(), m.offset(), m.key(), m.value(), list(m.headers() or []), ts, ts_type
                )
            )

    try:
        assignment = []
        for topic, partitions in topics.items():
            if partitions is None:
                md = c.list_topics(topic, timeout=10)
                partitions = len(md.topics[topic].partitions)
            assignment.extend(TopicPartition(topic, p, 0) for p in range(partitions))
        c.assign(assignment)
        out: list[ConsumedRecord] = []
        deadline = time.monotonic() + timeout
        while len(out) < expected and time.monotonic() < deadline:
            take(c.consume(num_messages=10000, timeout=0.2), out)
        if len(out) < expected:
            raise AssertionError(f"read back {len(out)} of {expected} records from {names} within {timeout}s")
        # Drain a little longer so that extra (duplicate) records are caught too.
        take(c.consume(num_messages=10000, timeout=0.3), out)
        out.sort(key=lambda r: (r.topic, r.partition, r.offset))
        return out
    finally:
        c.close()
