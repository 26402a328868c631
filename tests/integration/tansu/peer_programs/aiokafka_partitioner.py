"""aiokafka with a custom partitioner ``f(key_bytes, all_partitions, available)``, and with aiokafka's
DefaultPartitioner given explicitly. Returns what it observed."""

from __future__ import annotations

from typing import Any

from aiokafka import AIOKafkaProducer
from aiokafka.partitioner import DefaultPartitioner


def by_length(key_bytes: bytes | None, all_partitions: list[int], available: list[int]) -> int:
    return all_partitions[len(key_bytes or b"") % len(all_partitions)]


async def main(bootstrap: str, topic: str) -> list[Any]:
    observed: list[Any] = []
    for name, partitioner in (("custom", by_length), ("default", DefaultPartitioner())):
        async with AIOKafkaProducer(bootstrap_servers=bootstrap, partitioner=partitioner) as producer:
            for i in range(12):
                key = b"k" * (i % 5 + 1) + str(i).encode()
                md = await producer.send_and_wait(topic, b"%s-%d" % (name.encode(), i), key=key)
                observed.append((name, i, md.partition, md.offset))
    return observed
