"""An aiokafka program as aiokafka's documentation writes one: serializers, keys, headers, send_and_wait,
futures with done-callbacks, flush. Returns what it observed."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiokafka import AIOKafkaProducer


async def main(bootstrap: str, topic: str) -> list[Any]:
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap,
        key_serializer=lambda k: k.encode("utf-8"),
        value_serializer=lambda v: json.dumps(v).encode("utf-8"),
        acks="all",
    )
    await producer.start()
    observed: list[Any] = []
    try:
        for i in range(20):
            md = await producer.send_and_wait(
                topic, {"n": i}, key=f"user-{i % 7}", headers=[("seq", str(i).encode()), ("kind", b"wait")]
            )
            observed.append(("waited", i, md.partition, md.offset, md.timestamp_type, md.topic == topic))
        futures = []
        for i in range(20, 60):
            fut = await producer.send(topic, {"n": i}, key=f"user-{i % 7}", headers=[("seq", str(i).encode())])

            def done(f: asyncio.Future[Any], i: int = i) -> None:
                md = f.result()
                observed.append(("callback", i, md.partition, md.offset, md.topic_partition.partition))

            fut.add_done_callback(done)
            futures.append(fut)
        await producer.flush()
        await asyncio.gather(*futures)
        # A record for an explicit partition, and a None value (aiokafka passes it to the serializer too).
        md = await producer.send_and_wait(topic, {"n": 60}, key="explicit", partition=0)
        observed.append(("explicit", md.partition, md.offset))
        md = await producer.send_and_wait(topic, None, key="user-3")
        observed.append(("none value", md.partition, md.offset))
        observed.append(("partitions", sorted(await producer.partitions_for(topic))))
    finally:
        await producer.stop()
    return sorted(observed, key=repr)
