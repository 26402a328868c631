"""aiokafka's TLS example: an SSLContext from aiokafka.helpers.create_ssl_context, security_protocol="SSL"."""

from __future__ import annotations

from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.helpers import create_ssl_context


async def main(bootstrap: str, topic: str, cafile: str) -> list[Any]:
    context = create_ssl_context(cafile=cafile)
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, security_protocol="SSL", ssl_context=context)
    await producer.start()
    observed: list[Any] = []
    try:
        for i in range(10):
            md = await producer.send_and_wait(topic, b"secret-%d" % i, key=b"k%d" % (i % 3))
            observed.append((i, md.partition, md.offset))
    finally:
        await producer.stop()
    return observed
