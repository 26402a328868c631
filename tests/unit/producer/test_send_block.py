"""Waiting for ``buffer.memory``: a thread's send() blocks (up to ``max.block.ms``), an event loop's never does.

The same pressure for both: records of 20,000 bytes, each its own batch, fill a 64 KiB
``buffer.memory`` on the scripted client (``tests/support/producer_rig.py``), and the next send
finds no room. A ``Producer.send`` on a thread waits in the BufferPool; ``AsyncProducer.send``
asks with ``block=False`` and awaits instead, while the loop keeps running other tasks. Each
then completes once the Sender's acknowledged batches give their memory back. Keyed sends: the
C send lane's shape, so in the native pass the lane declines the call (a new batch is needed)
and the Python path it hands it to must carry the request not to block. No timing assertions:
the waits are observed through the pool's count of waiters (the ``waiting-threads`` metric,
which counts an awaiting coroutine too) and latches.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from kproducer.aio import AsyncProducer
from kproducer.errors import MemoryWouldBlock
from kproducer.network.protocol import ApiKey
from tests.support.latch import LATCH_S, wait_until
from tests.support.mock_client import produce_response
from tests.support.producer_rig import ProducerRig

CONFIG = {
    "buffer.memory": 64 * 1024,
    "batch.size": 16 * 1024,
    "max.block.ms": 600_000,  # never reached: the tests free the memory themselves
    "acks": "1",
    "enable.idempotence": False,
}
BIG = b"x" * 20_000  # larger than batch.size: every record is a batch of its own
FILL = 3  # three such batches leave less than a fourth needs


def _drain_acknowledged(rig: ProducerRig, futures: list[Any]) -> None:
    """Run the Sender until ``futures`` are acknowledged (their batches' memory goes back to the pool)."""
    rig.client.prepare(ApiKey.PRODUCE, *[produce_response() for _ in range(2 * len(futures))])
    rig.run_until(lambda: all(f.done() for f in futures), loops=50)
    assert all(f.exception() is None for f in futures), [f.exception() for f in futures]


def test_thread_send_blocks_for_memory_until_batches_free_it() -> None:
    rig = ProducerRig(CONFIG)
    p = rig.producer
    filled = [p.send("t", BIG, b"k%d" % i) for i in range(FILL)]
    assert p.metrics()["buffer-available-bytes"] < len(BIG), "buffer.memory is full for the next record"
    sent: list[Any] = []
    caller = threading.Thread(target=lambda: sent.append(p.send("t", BIG, b"late")))
    caller.start()
    wait_until(lambda: p.metrics()["waiting-threads"] == 1, "the thread's send() waits for memory")
    assert not sent and caller.is_alive(), "a thread's send() blocks while buffer.memory is full"
    _drain_acknowledged(rig, filled)
    caller.join(LATCH_S)
    assert not caller.is_alive() and len(sent) == 1, "the send returned once memory came back"
    _drain_acknowledged(rig, sent)
    rig.close()


def test_send_with_block_false_raises_memory_would_block_and_appends_nothing() -> None:
    rig = ProducerRig(CONFIG)
    p = rig.producer
    filled = [p.send("t", BIG, b"k%d" % i) for i in range(FILL)]
    available = p.metrics()["buffer-available-bytes"]
    with pytest.raises(MemoryWouldBlock) as e:
        p.send("t", BIG, b"late", block=False)
    assert e.value.size > available
    with pytest.raises(MemoryWouldBlock):
        p.send("t", BIG, partition=1, block=False)  # the Python path's shape too
    assert p.metrics()["buffer-available-bytes"] == available, "nothing was charged"
    assert p.metrics()["waiting-threads"] == 0, "nobody joined the pool's waiters"
    _drain_acknowledged(rig, filled)
    assert not rig.client.pending(), "only the three records were sent"
    requests = rig.client.requests(ApiKey.PRODUCE)
    assert sum(len(list(r.partitions)) for r in requests) == FILL, "the refused sends appended nothing"
    late = p.send("t", BIG, b"late", block=False)
    _drain_acknowledged(rig, [late])
    rig.close()


def test_asyncio_send_awaits_memory_without_blocking_the_loop() -> None:
    rig = ProducerRig(CONFIG, build_producer=False)

    async def main() -> None:
        # As the rig's own, with max.block.ms at the latch's bound: a send that blocked the loop
        # instead would fail with BufferExhaustedError after it, and the test would say so.
        config = {
            "bootstrap.servers": "127.0.0.1:9092",
            "linger.ms": 0,
            **CONFIG,
            "max.block.ms": int(LATCH_S * 1000),
        }
        ap = AsyncProducer(config, **rig.seams())
        await ap.start()
        try:
            rig.producer = ap.producer
            loop = asyncio.get_running_loop()
            filled = [await ap.send("t", BIG, b"k%d" % i) for i in range(FILL)]
            ticks = 0
            stop = asyncio.Event()

            async def ticker() -> None:
                nonlocal ticks
                while not stop.is_set():
                    ticks += 1
                    await asyncio.sleep(0)

            ticking = asyncio.create_task(ticker())
            late = asyncio.create_task(ap.send("t", BIG, b"late"))
            # The send waits as an external waiter of the pool: counted, but no thread is blocked.
            while ap.producer.metrics()["waiting-threads"] < 1 and not late.done():
                await asyncio.sleep(0)
            assert not late.done(), f"the send did not wait for memory: {late.result().exception()!r}"
            seen = ticks
            for _ in range(100):
                await asyncio.sleep(0)
            assert ticks > seen, "another coroutine keeps running while the send waits for memory"
            assert not late.done(), "the send waits: buffer.memory is full"
            # The Sender (here on a worker thread, as the I/O thread) acknowledges the batches; their
            # memory returns, the pool's free listener wakes the loop, and the send goes through.
            all_free = lambda: ap.producer.metrics()["buffer-available-bytes"] == CONFIG["buffer.memory"]  # noqa: E731
            rig.client.prepare(ApiKey.PRODUCE, *[produce_response() for _ in range(2 * FILL)])
            await asyncio.wait_for(loop.run_in_executor(None, rig.run_until, all_free, 50), LATCH_S)
            delivery = await asyncio.wait_for(late, LATCH_S)
            stop.set()
            await ticking
            rig.client.prepare(ApiKey.PRODUCE, produce_response(), produce_response())
            await asyncio.wait_for(loop.run_in_executor(None, rig.run_until, all_free, 50), LATCH_S)
            metadata = await delivery
            assert metadata.topic == "t" and metadata.offset >= 0
            for f in filled:
                assert (await f).offset >= 0
        finally:
            await ap.close(0)  # no I/O thread here to flush: close at once

    asyncio.run(main())


def test_block_false_is_honoured_by_the_share_of_records_waiting_for_metadata() -> None:
    """Records parked for a topic without metadata may hold half of buffer.memory; past it a
    ``block=False`` send raises (with a poll interval: no memory event ends this wait) instead of waiting."""
    # max.block.ms at the latch's bound: a send that waited instead would fail after it, not hang.
    rig = ProducerRig({**CONFIG, "max.block.ms": int(LATCH_S * 1000)}, serve_metadata=False)
    p = rig.producer
    parked = p.send("not-yet-known", BIG, b"k0", block=False)  # 20,000 bytes: within the half
    assert not parked.done()
    available = p.metrics()["buffer-available-bytes"]
    with pytest.raises(MemoryWouldBlock) as e:
        p.send("not-yet-known", BIG, b"k1", block=False)  # 40,000 bytes would pass the half
    assert e.value.poll_s is not None and e.value.poll_s > 0
    assert p.metrics()["buffer-available-bytes"] == available, "the refused record charged nothing"
    assert p.metrics()["waiting-threads"] == 0
    rig.close()
