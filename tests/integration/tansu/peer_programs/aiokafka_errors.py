"""An aiokafka program that catches aiokafka's exceptions: a record too large for max_request_size,
from send_and_wait() and from send(). Returns what it observed."""

from __future__ import annotations

from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import BrokerResponseError, KafkaError, MessageSizeTooLargeError


async def main(bootstrap: str, topic: str) -> list[Any]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, max_request_size=2000)
    await producer.start()
    observed: list[Any] = []
    try:
        await producer.send_and_wait(topic, b"warm-up", key=b"k")
        try:
            await producer.send_and_wait(topic, b"x" * 5000, key=b"k")
        except MessageSizeTooLargeError as e:
            observed.append(
                ("send_and_wait", type(e).__name__, e.errno, isinstance(e, BrokerResponseError), e.retriable)
            )
        try:
            await producer.send(topic, b"y" * 5000, key=b"k")
        except KafkaError as e:
            observed.append(("send", type(e).__name__, isinstance(e, MessageSizeTooLargeError)))
        md = await producer.send_and_wait(topic, b"after", key=b"k")
        observed.append(("after", md.partition, md.offset))
    finally:
        await producer.stop()
    return observed
