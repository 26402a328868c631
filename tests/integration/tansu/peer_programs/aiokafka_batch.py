"""aiokafka's batch example (create_batch / append / send_batch / partitions_for), with the partition
chosen in turn rather than at random, and timestamps given rather than taken at append (a record's
size depends on its distance from the batch's first timestamp), so that two runs can be compared.
Returns what it observed."""

from __future__ import annotations

import time
from typing import Any

from aiokafka import AIOKafkaProducer


async def main(bootstrap: str, topic: str) -> list[Any]:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, max_batch_size=4096)
    await producer.start()
    observed: list[Any] = []
    sent = 0
    try:
        batch = producer.create_batch()
        start = int(time.time() * 1000)
        i = 0
        while i < 300:
            msg = (f"Test message {i} " + "x" * (i % 37)).encode("utf-8")
            metadata = batch.append(key=None, value=msg, timestamp=start + i, headers=[("i", str(i).encode())])
            if metadata is None:
                partitions = await producer.partitions_for(topic)
                partition = sorted(partitions)[sent % len(partitions)]
                fut = await producer.send_batch(batch, topic, partition=partition)
                md = await fut
                observed.append(("batch", batch.record_count(), partition, md.partition, md.offset))
                sent += 1
                batch = producer.create_batch()
                continue
            observed.append(("appended", i, metadata.offset, metadata.size))
            i += 1
        partitions = await producer.partitions_for(topic)
        partition = sorted(partitions)[sent % len(partitions)]
        md = await (await producer.send_batch(batch, topic, partition=partition))
        observed.append(("last batch", batch.record_count(), partition, md.partition, md.offset))
    finally:
        await producer.stop()
    return observed
