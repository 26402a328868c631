"""aiokafka's transactional example: one transaction committed, one aborted by an exception inside
``async with producer.transaction()``. Returns what it observed."""

from __future__ import annotations

from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.errors import IllegalOperation
from aiokafka.structs import TopicPartition


async def main(bootstrap: str, topic: str, transactional_id: str, group_id: str) -> list[Any]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id)
    await producer.start()
    observed: list[Any] = []
    try:
        async with producer.transaction():
            for i in range(5):
                md = await producer.send_and_wait(topic, b"committed-%d" % i, key=b"k%d" % i)
                observed.append(("in transaction", i, md.partition))
            # consume-transform-produce: the consumer's offsets commit with the records.
            await producer.send_offsets_to_transaction({TopicPartition(topic, 0): 3}, group_id)
        try:
            await producer.send(topic, b"outside", key=b"k0")
        except IllegalOperation as e:
            observed.append(("outside a transaction", type(e).__name__))
        try:
            async with producer.transaction():
                await producer.send(topic, b"aborted", key=b"k0")
                raise RuntimeError("the application gives up")
        except RuntimeError as e:
            observed.append(("aborted", str(e)))
        await producer.begin_transaction()
        await producer.send(topic, b"committed-explicitly", key=b"k1")
        await producer.commit_transaction()
    finally:
        await producer.stop()
    return observed
