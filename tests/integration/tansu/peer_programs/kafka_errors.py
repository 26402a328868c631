"""A kafka-python program that catches kafka-python's exceptions: a record too large for
max_request_size, and a send after close(). Returns what it observed."""

from __future__ import annotations

from typing import Any

from kafka import KafkaProducer
from kafka.errors import BrokerResponseError, IllegalStateError, KafkaError, MessageSizeTooLargeError


def main(bootstrap: str, topic: str) -> list[Any]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, max_request_size=2000)
    observed: list[Any] = []
    producer.send(topic, b"warm-up", key=b"k").get(10)
    try:
        producer.send(topic, b"x" * 5000, key=b"k")
    except MessageSizeTooLargeError as e:
        observed.append(("too large", type(e).__name__, e.errno, isinstance(e, BrokerResponseError), e.retriable))
    md = producer.send(topic, b"after", key=b"k").get(10)
    observed.append(("after", md.partition, md.offset))
    producer.close()
    try:
        producer.send(topic, b"closed", key=b"k")
    except KafkaError as e:
        observed.append(("after close", type(e).__name__, isinstance(e, IllegalStateError)))
    return observed
