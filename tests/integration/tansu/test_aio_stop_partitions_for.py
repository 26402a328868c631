"""AsyncProducer.stop() and partitions_for(), as aiokafka users call them: both wait off the loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from kproducer.aio import AsyncProducer
from kproducer.errors import ProducerClosedError, UnknownTopicOrPartitionError
from kproducer.structs import PartitionInfo, RecordMetadata
from tests.support.readback import create_topic, read_topic
from tests.support.tansu import TansuBroker


def test_stop_flushes_and_closes_while_the_loop_keeps_running(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 2)
    entered, released = threading.Event(), threading.Event()
    held: list[bool] = []

    def hold(metadata: Any, exception: Any) -> None:
        # On the I/O thread, while stop() waits for this record: only a coroutine on the loop releases it,
        # which it can do only if stop() left the loop free.
        entered.set()
        held.append(released.wait(60))

    async def run() -> list[RecordMetadata]:
        p = AsyncProducer({"bootstrap.servers": tansu.bootstrap, "linger.ms": 1000})
        await p.start()
        futures = [await p.send(topic_name, b"v%d" % i, b"k%d" % i) for i in range(20)]
        futures.append(await p.send(topic_name, b"held", b"k0", callback=hold))
        stopping = asyncio.ensure_future(p.stop())
        while not entered.is_set():
            await asyncio.sleep(0.001)
        assert not stopping.done()  # stop() is waiting for the held record
        released.set()
        await stopping
        with pytest.raises(ProducerClosedError):
            await p.send(topic_name, b"late")
        await p.stop()  # a second stop() is harmless, as in aiokafka
        return [f.result() for f in futures]

    results = asyncio.run(run())
    assert held == [True]
    assert len(results) == 21 and all(r.offset >= 0 for r in results)
    assert len(read_topic(tansu.bootstrap, topic_name, 21, partitions=2)) == 21


def test_partitions_for_waits_for_metadata_off_the_loop(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 3)

    async def run() -> tuple[list[PartitionInfo], int]:
        async with AsyncProducer({"bootstrap.servers": tansu.bootstrap}) as p:
            ticks = 0

            async def tick() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0)

            ticker = asyncio.ensure_future(tick())
            partitions = await p.partitions_for(topic_name)
            ticker.cancel()
            return partitions, ticks

    partitions, ticks = asyncio.run(run())
    assert [(pi.topic, pi.partition) for pi in partitions] == [(topic_name, i) for i in range(3)]
    assert all(pi.leader >= 0 for pi in partitions)
    assert ticks > 0  # the loop ran other tasks while the metadata was fetched


def test_partitions_for_an_absent_topic_fails_after_its_timeout(tansu: TansuBroker) -> None:
    async def run() -> None:
        async with AsyncProducer({"bootstrap.servers": tansu.bootstrap, "allow.auto.create.topics": False}) as p:
            with pytest.raises(UnknownTopicOrPartitionError, match="not present in metadata after 300 ms"):
                await p.partitions_for("compat-no-such-topic-for-partitions", timeout=0.3)

    asyncio.run(run())
