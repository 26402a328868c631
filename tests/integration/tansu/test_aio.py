"""kproducer.aio.AsyncProducer under a running event loop, on Tansu, read back by confluent-kafka.

The loop must never block: each test that waits (memory full, broker
unreachable) runs a ticker coroutine beside it and checks that the ticker kept
ticking while the send waited, which a blocked loop cannot do. No wall-clock
upper bounds: waits are bounded by latches and counts.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from typing import Any

import pytest

from kproducer.aio import AsyncProducer
from kproducer.errors import (
    BufferExhaustedError,
    KafkaError,
    KafkaTimeoutError,
    ProducerClosedError,
    RecordTooLargeError,
)
from kproducer.partitioner import partition_for_key
from kproducer.structs import RecordMetadata
from tests.support.latch import wait_until
from tests.support.readback import create_topic, read_topic
from tests.support.tansu import TansuBroker


def _config(tansu: TansuBroker, **kw: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = {"bootstrap.servers": tansu.bootstrap, "linger.ms": 5, "max.block.ms": 10_000}
    cfg.update({k.replace("_", "."): v for k, v in kw.items()})
    return cfg


class Ticker:
    """A coroutine that sleeps 1 ms at a time and records its ticks and its worst gap."""

    def __init__(self) -> None:
        self.ticks = 0
        self.worst_gap = 0.0
        self._stop = False
        self._task: asyncio.Task[None] | None = None

    async def _run(self) -> None:
        last = time.perf_counter()
        while not self._stop:
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            self.worst_gap = max(self.worst_gap, now - last)
            last = now
            self.ticks += 1

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        self._stop = True
        assert self._task is not None
        await self._task


async def _take_all_memory(pool: Any) -> list[bytearray]:
    """Hold every byte of the producer's buffer (as in-flight batches would); first let finished batches return theirs."""
    for _ in range(10_000):
        if pool.available_memory() == pool.total_memory:
            break
        await asyncio.sleep(0.001)
    assert pool.available_memory() == pool.total_memory, "a batch kept its memory after its delivery"
    return [pool.allocate(pool.poolable_size, 0) for _ in range(pool.total_memory // pool.poolable_size)]


async def _ticks_while(ticker: Ticker, pending: asyncio.Future[Any], at_least: int) -> int:
    """Wait until the ticker ticked ``at_least`` times while ``pending`` stays unfinished; the ticks seen."""
    start = ticker.ticks
    while ticker.ticks - start < at_least and not pending.done():
        await asyncio.sleep(0.001)
    return ticker.ticks - start


def test_100k_sends_from_50_tasks_are_all_read_back(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 8)
    tasks_n, per_task = 50, 2000

    async def main() -> tuple[list[RecordMetadata], Ticker, int]:
        ticker = Ticker()
        ticker.start()
        async with AsyncProducer(_config(tansu)) as p:
            completions = p._completions
            assert completions is not None
            wakeups = 0
            loop = completions.loop

            class CountingLoop:
                """The loop, counting the thread-safe wakeups the I/O thread asks of it."""

                def call_soon_threadsafe(self, *a: Any) -> Any:
                    nonlocal wakeups
                    wakeups += 1
                    return loop.call_soon_threadsafe(*a)

                def __getattr__(self, name: str) -> Any:
                    return getattr(loop, name)

            completions.loop = CountingLoop()  # type: ignore[assignment]

            async def producer_task(t: int) -> list[RecordMetadata]:
                futs = []
                for i in range(per_task):
                    futs.append(await p.send(topic_name, b"v-%d-%d" % (t, i), b"k-%d" % t))
                return [await f for f in futs]

            per = await asyncio.gather(*(producer_task(t) for t in range(tasks_n)))
            mds = [md for mds_ in per for md in mds_]
        await ticker.stop()
        return mds, ticker, wakeups

    mds, ticker, wakeups = asyncio.run(main())
    n = tasks_n * per_task
    assert len(mds) == n and all(isinstance(md, RecordMetadata) for md in mds)
    # Completions reach the loop in batches: far fewer thread-safe wakeups than records.
    assert 0 < wakeups <= n // 20, f"{wakeups} loop wakeups for {n} records"
    back = read_topic(tansu.bootstrap, topic_name, n, timeout=120)
    assert len(back) == n
    by_pos = {(r.partition, r.offset): (r.key, r.value) for r in back}
    assert len({(md.partition, md.offset) for md in mds}) == n
    # Each task's records are in send order within their (keyed) partition.
    seen: dict[bytes, int] = {}
    for r in back:
        assert r.key is not None and r.value is not None
        t, i = (int(x) for x in r.value.split(b"-")[1:])
        assert r.key == b"k-%d" % t
        assert seen.get(r.key, -1) < i, "records of one key were reordered"
        seen[r.key] = i
    assert all(by_pos[(md.partition, md.offset)] is not None for md in mds)
    print(f"ticker: {ticker.ticks} ticks, worst gap {ticker.worst_gap * 1000:.1f} ms; {wakeups} wakeups for {n} records")


def test_full_buffer_is_awaited_without_blocking_the_loop(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)

    async def main() -> None:
        ticker = Ticker()
        ticker.start()
        async with AsyncProducer(_config(tansu, buffer_memory=64 * 1024, batch_size=16 * 1024)) as p:
            await (await p.send(topic_name, b"warm"))  # metadata known: only memory can make a send wait
            pool = p.producer._pool
            hostage = await _take_all_memory(pool)
            assert not pool.can_allocate_now(16 * 1024)
            sending = asyncio.ensure_future(p.send(topic_name, b"after-the-wait", b"k"))
            ticks = await _ticks_while(ticker, sending, 20)
            assert not sending.done() and ticks >= 20, "the loop stopped while send() waited for memory"
            assert pool.queued() == 1, "the waiting coroutine counts as a memory waiter (batches stop lingering)"
            for buf in hostage:
                pool.deallocate(buf)
            md = await (await sending)
            assert md.topic == topic_name and md.offset >= 0
            assert pool.queued() == 0
        await ticker.stop()
        print(f"memory wait: worst loop gap {ticker.worst_gap * 1000:.1f} ms")

    asyncio.run(main())
    back = read_topic(tansu.bootstrap, topic_name, 2)
    assert [r.value for r in back] == [b"warm", b"after-the-wait"]


def test_full_buffer_fails_the_record_after_max_block_ms(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)

    async def main() -> None:
        async with AsyncProducer(_config(tansu, buffer_memory=32 * 1024, batch_size=16 * 1024, max_block_ms=50)) as p:
            await (await p.send(topic_name, b"warm"))
            pool = p.producer._pool
            hostage = await _take_all_memory(pool)
            fut = await p.send(topic_name, b"never")
            with pytest.raises(BufferExhaustedError, match="max blocking time 50 ms"):
                await fut
            for buf in hostage:
                pool.deallocate(buf)

    asyncio.run(main())


def test_unreachable_broker_never_blocks_the_loop() -> None:
    async def main() -> None:
        ticker = Ticker()
        ticker.start()
        cfg = {"bootstrap.servers": "127.0.0.1:1", "max.block.ms": 1000, "reconnect.backoff.ms": 20}
        async with AsyncProducer(cfg) as p:
            # send() does not wait for metadata: the record waits in the producer, the loop goes on.
            fut = await p.send("nowhere", b"v")
            ticks = await _ticks_while(ticker, fut, 5)
            assert ticks >= 5 and not fut.done(), "the loop did not run while the record waited for metadata"
            with pytest.raises(KafkaTimeoutError, match="not present in metadata"):
                await fut
            await p.close(0)
        await ticker.stop()
        print(f"unreachable broker: worst loop gap {ticker.worst_gap * 1000:.1f} ms")

    asyncio.run(main())


def test_cancellation_does_not_unsend(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)

    async def main() -> None:
        async with AsyncProducer(_config(tansu, linger_ms=200, buffer_memory=128 * 1024)) as p:
            await (await p.send(topic_name, b"warm"))

            # 1. the awaiting task is cancelled while the record lingers in its batch
            appended = asyncio.Event()

            async def send_and_wait() -> RecordMetadata:
                delivery = await p.send(topic_name, b"task-cancelled")
                appended.set()
                return await delivery

            task = asyncio.ensure_future(send_and_wait())
            await appended.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            # 2. the delivery future itself is cancelled, and 3. wait_for times out on it
            fut = await p.send(topic_name, b"future-cancelled")
            fut.cancel()
            slow = await p.send(topic_name, b"wait-for-timed-out")
            with pytest.raises(asyncio.TimeoutError):
                await asyncio.wait_for(slow, 0.001)
            assert await p.flush() == 0

            # 4. a task cancelled while it waits for memory appends nothing
            pool = p.producer._pool
            hostage = await _take_all_memory(pool)
            waiting = asyncio.ensure_future(p.send(topic_name, b"never-appended"))
            while pool.queued() == 0:
                await asyncio.sleep(0.001)
            waiting.cancel()
            with pytest.raises(asyncio.CancelledError):
                await waiting
            assert pool.queued() == 0
            for buf in hostage:
                pool.deallocate(buf)
            await (await p.send(topic_name, b"last"))

    asyncio.run(main())
    back = read_topic(tansu.bootstrap, topic_name, 5)
    assert [r.value for r in back] == [b"warm", b"task-cancelled", b"future-cancelled", b"wait-for-timed-out", b"last"]


def test_close_with_pending_sends_delivers_them(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 2)

    async def main() -> list[RecordMetadata]:
        p = AsyncProducer(_config(tansu, linger_ms=1000))
        await p.start()
        futs = [await p.send(topic_name, b"p%d" % i) for i in range(1000)]
        await p.close()
        assert all(f.done() for f in futs), "close() returned before every delivery reached the loop"
        with pytest.raises(ProducerClosedError):
            await p.send(topic_name, b"after-close")
        return [f.result() for f in futs]

    mds = asyncio.run(main())
    assert len(mds) == 1000
    assert len(read_topic(tansu.bootstrap, topic_name, 1000)) == 1000


def test_errors_and_callbacks_from_the_loops_side(
    tansu: TansuBroker, topic_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    java: list[Any] = []
    confluent: list[Any] = []

    async def main() -> None:
        async with AsyncProducer(_config(tansu, max_request_size=2000)) as p:
            too_big = await p.send(topic_name, b"z" * 5000)
            with pytest.raises(RecordTooLargeError):
                await too_big

            def boom(md: RecordMetadata | None, exc: KafkaError | None) -> None:
                raise RuntimeError("user callback failed")

            # A failing user callback does not keep the outcome from the loop.
            assert (await (await p.send(topic_name, b"a", callback=boom))).offset >= 0
            await (await p.send(topic_name, b"b", callback=lambda md, exc: java.append((md, exc))))
            await (await p.send(topic_name, b"c", b"kc", on_delivery=lambda err, msg: confluent.append((err, msg))))
            with pytest.raises(TypeError, match="cannot take 2 positional arguments"):
                await p.send(topic_name, b"d", on_delivery=lambda msg: None)

    with caplog.at_level(logging.ERROR):
        asyncio.run(main())
    assert "delivery callback raised" in caplog.text
    assert java[0][0].offset >= 0 and java[0][1] is None
    err, msg = confluent[0]
    assert err is None and msg.value() == b"c" and msg.key() == b"kc" and msg.offset() >= 0


def test_loop_closed_before_delivery_does_not_break_the_producer(
    tansu: TansuBroker, topic_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    loop = asyncio.new_event_loop()
    p = AsyncProducer(_config(tansu, linger_ms=300))
    loop.run_until_complete(p.start())
    # With the topic's metadata known the record goes straight into a batch (linger.ms=300), whose
    # completion reaches the loop only after it closed. (A record that waits for metadata first:
    # test_loop_closed_after_a_parked_record_was_released.)
    p.producer.partitions_for(topic_name)
    fut = loop.run_until_complete(p.send(topic_name, b"orphan"))
    loop.close()  # nobody will ever drain this loop again
    with caplog.at_level(logging.WARNING):
        assert p.producer.flush(20) == 0
        # The batch's latch opens before its done-callbacks run: give the I/O thread its turn.
        for _ in range(2000):
            if "event loop closed" in caplog.text:
                break
            time.sleep(0.005)
    assert not fut.done()
    assert "event loop closed" in caplog.text
    # The producer under it still works for the next loop.
    p.producer.send(topic_name, b"next").result(20)
    p.producer.close()
    assert [r.value for r in read_topic(tansu.bootstrap, topic_name, 2)] == [b"orphan", b"next"]


def test_loop_closed_after_a_parked_record_was_released(
    tansu: TansuBroker, topic_name: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A record waits for its topic's metadata, is released into its batch, and the loop closes before
    it ran the drain that would follow the record there: the dropped outcome is still reported."""
    create_topic(tansu.bootstrap, topic_name, 1)
    loop = asyncio.new_event_loop()
    # linger.ms far above the test's steps: the batch completes only when flush() sends it, after the close.
    p = AsyncProducer(_config(tansu, linger_ms=60_000))
    loop.run_until_complete(p.start())
    fut = loop.run_until_complete(p.send(topic_name, b"parked"))  # no metadata yet: the record waits
    completions = p._completions
    assert completions is not None
    # The release completes the record's placeholder and queues it for a drain this loop never runs.
    wait_until(lambda: len(completions.pending) > 0, "the parked record's release queued for the loop")
    with caplog.at_level(logging.WARNING):
        loop.close()
        assert "event loop closed" not in caplog.text  # nothing was dropped yet: the batch is open
        assert p.producer.flush(20) == 0
        wait_until(lambda: "event loop closed" in caplog.text, "the WARNING for the dropped outcome")
    assert not fut.done()
    p.producer.close()
    assert [r.value for r in read_topic(tansu.bootstrap, topic_name, 1)] == [b"parked"]


def test_send_batch_and_send_arrow(tansu: TansuBroker, topic_name: str) -> None:
    import pyarrow as pa

    create_topic(tansu.bootstrap, topic_name, 3)
    values = [b"b%d" % i for i in range(3000)]

    async def main() -> tuple[list[RecordMetadata], list[RecordMetadata]]:
        async with AsyncProducer(_config(tansu)) as p:
            f1 = await p.send_batch(topic_name, values, [b"k%d" % (i % 5) for i in range(3000)])
            f2 = await p.send_arrow(pa.table({"value": pa.array(values, pa.binary())}), topic_name)
            return await f1, await f2

    a, b = asyncio.run(main())
    assert len(a) == len(b) == 3000
    back = {(r.partition, r.offset): r.value for r in read_topic(tansu.bootstrap, topic_name, 6000)}
    assert [back[(md.partition, md.offset)] for md in a] == values
    assert [back[(md.partition, md.offset)] for md in b] == values
    assert Counter(md.partition for md in a) == Counter(partition_for_key(b"k%d" % (i % 5), 3) for i in range(3000))


def test_not_started_and_closed_errors() -> None:
    async def main() -> None:
        p = AsyncProducer({"bootstrap.servers": "127.0.0.1:1"})
        with pytest.raises(ProducerClosedError, match="not started"):
            await p.send("t", b"v")
        await p.close()
        with pytest.raises(ProducerClosedError):
            await p.start()

    asyncio.run(main())


def test_the_loop_keeps_turning_while_the_io_thread_is_held(tansu: TansuBroker, topic_name: str) -> None:
    """No send waits for the I/O thread on the loop, checked with latches instead of a clock.

    A delivery callback holds the I/O thread until the loop has gone round 50
    more times. Meanwhile nothing frees memory and no metadata arrives, so the
    sending tasks fill ``buffer.memory`` and send to a topic nobody asked for
    yet. If any send blocked the loop (on memory, on metadata, on the Sender),
    the loop could not go round, the held callback would give up after its
    bound, and the test fails on that count; the bound only detects a stall.
    """
    create_topic(tansu.bootstrap, topic_name, 4)
    fresh = f"{topic_name}-fresh"
    create_topic(tansu.bootstrap, fresh, 2)
    tasks_n, per_task, hold_every = 20, 1000, 2500
    loop_turns = 0
    holding_since: list[int] = []  # the loop's turn count when the I/O thread started waiting
    released = threading.Event()
    holds = 0
    stalls = 0
    most_waiting = 0

    def hold_io_thread(md: RecordMetadata | None, exc: KafkaError | None) -> None:
        nonlocal holds, stalls
        released.clear()
        holding_since.append(loop_turns)
        if released.wait(60):
            holds += 1
        else:
            stalls += 1
        holding_since.clear()

    async def main() -> list[RecordMetadata]:
        nonlocal loop_turns, most_waiting
        cfg = _config(tansu, buffer_memory=96 * 1024, batch_size=16 * 1024, linger_ms=0, max_block_ms=120_000)
        stop = False
        async with AsyncProducer(cfg) as p:
            await (await p.send(topic_name, b"warm"))

            async def turns() -> None:
                nonlocal loop_turns, most_waiting
                while not stop:
                    await asyncio.sleep(0)
                    loop_turns += 1
                    most_waiting = max(most_waiting, p._memory_waiters)
                    since = holding_since[:1]
                    if since and loop_turns - since[0] >= 50:
                        released.set()

            counter = asyncio.ensure_future(turns())

            async def producer_task(t: int) -> list[RecordMetadata]:
                futs = []
                for i in range(per_task):
                    n = t * per_task + i
                    topic = fresh if n % 97 == 0 else topic_name
                    cb = hold_io_thread if n % hold_every == 0 else None
                    futs.append(await p.send(topic, b"x" * 200, b"k%d" % (n % 13), callback=cb))
                return [await f for f in futs]

            per = await asyncio.gather(*(producer_task(t) for t in range(tasks_n)))
            stop = True
            await counter
        return [md for mds in per for md in mds]

    mds = asyncio.run(main())
    n = tasks_n * per_task
    assert stalls == 0, f"{stalls} times the loop did not go round while the I/O thread was held"
    assert holds == n // hold_every
    assert most_waiting > 0, "the buffer never filled: the test did not exercise the memory wait"
    assert len(mds) == n and len({(md.topic, md.partition, md.offset) for md in mds}) == n
    fresh_n = len(range(0, n, 97))
    assert sum(md.topic == fresh for md in mds) == fresh_n
    main_n = n - fresh_n + 1  # and the warm-up record
    assert len(read_topic(tansu.bootstrap, topic_name, main_n, timeout=120)) == main_n
    assert len(read_topic(tansu.bootstrap, fresh, fresh_n)) == fresh_n


def test_transactions_from_the_loop(tansu: TansuBroker, topic_name: str) -> None:
    from kproducer.errors import IllegalStateError
    from kproducer.transaction_manager import TransactionState
    from tests.support.txn_reader import read_transactional_topics

    create_topic(tansu.bootstrap, topic_name, 2)
    late = f"{topic_name}-late"  # created now, first sent to inside a transaction: no metadata yet
    create_topic(tansu.bootstrap, late, 1)
    committed: list[bytes] = []
    aborted: list[bytes] = []

    async def main() -> None:
        ticker = Ticker()
        ticker.start()
        cfg = {"bootstrap.servers": tansu.bootstrap, "transactional.id": f"aio-{topic_name}", "linger.ms": 5}
        async with AsyncProducer(cfg) as p:
            with pytest.raises(IllegalStateError, match="only allowed inside a transaction"):
                await p.send(topic_name, b"outside")
            blocking_calls_on: list[int] = []
            sync = p.producer

            def recording(call: Any) -> Any:
                def wrapper(*a: Any, **kw: Any) -> Any:
                    blocking_calls_on.append(threading.get_ident())
                    return call(*a, **kw)

                return wrapper

            for name in ("init_transactions", "commit_transaction", "abort_transaction", "send_offsets_to_transaction"):
                setattr(sync, name, recording(getattr(sync, name)))
            await p.init_transactions(30)
            async with p.transaction(30):
                futs = [await p.send(topic_name, b"c1-%d" % i, b"k%d" % (i % 3)) for i in range(200)]
                futs.append(await p.send(late, b"c1-late"))
            # Every delivery future of the transaction is settled when the commit returns.
            assert all(f.done() and f.result().offset >= 0 for f in futs)
            committed.extend([b"c1-%d" % i for i in range(200)] + [b"c1-late"])

            with pytest.raises(RuntimeError, match="abort this one"):
                async with p.transaction(30):
                    futs = [await p.send(topic_name, b"a-%d" % i) for i in range(50)]
                    await p.flush(30)  # written, then aborted: the marker hides them
                    raise RuntimeError("abort this one")
            aborted.extend(b"a-%d" % i for i in range(50))
            assert p.producer.transaction_state is TransactionState.READY

            async def cancelled_body() -> None:
                async with p.transaction(30):
                    await p.send(topic_name, b"cancelled")
                    await asyncio.Event().wait()

            task = asyncio.ensure_future(cancelled_body())
            for _ in range(100):
                await asyncio.sleep(0)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert p.producer.transaction_state is TransactionState.READY

            await p.begin_transaction()
            await p.send(topic_name, b"c2")
            await p.send_offsets_to_transaction({}, "no-offsets-group")  # nothing to commit: a no-op
            await p.commit_transaction(30)
            committed.append(b"c2")
            # init, commit, abort (error), abort (cancelled), send_offsets, commit: all in worker threads.
            assert len(blocking_calls_on) == 6 and threading.get_ident() not in blocking_calls_on
        await ticker.stop()

    asyncio.run(main())
    view = read_transactional_topics(tansu.bootstrap, [topic_name, late])
    assert sorted(r.value for r in view.committed) == sorted(committed)
    got_aborted = sorted(r.value for r in view.aborted)
    # The cancelled transaction's record was written or not when the abort came: never committed.
    assert [v for v in got_aborted if v != b"cancelled"] == sorted(aborted)
    assert view.open == []


def test_settle_group_c_and_python_agree() -> None:
    """The loop-side settling of a batch acknowledged as a whole: C and its Python reference agree."""
    from kproducer import _speedups  # type: ignore[attr-defined]
    from kproducer.accumulator.futures import ProduceRequestResult, RecordFuture
    from kproducer.aio import _settle_group_py
    from kproducer.structs import TopicPartition

    class CFields(_speedups.FutureRecordMetadata):  # type: ignore[misc]
        """The C fields settle_group reads (in the pure pass RecordFuture builds on the Python twin)."""

        @property
        def next_future(self) -> Any:
            return self._next

    def outcomes(impl: Any, base: int, append_time: int, future: Any) -> tuple[list[Any], list[int]]:
        async def main() -> tuple[list[Any], list[int]]:
            loop = asyncio.get_running_loop()
            result = ProduceRequestResult(TopicPartition("t", 3))
            other = ProduceRequestResult(TopicPartition("t", 4))
            group: list[Any] = []
            for i in range(7):
                rf = future(result, i, 1_700_000_000_000 + i, i - 1, 10 * i)
                if i == 5:
                    rf._next = future(other, 0, 1, 2, 3)  # moved to another batch: left to the caller
                group += [loop.create_future(), rf]
            group[4].cancel()  # a cancelled delivery future is skipped
            moved = impl(group, RecordMetadata, "t", 3, base, append_time)
            futs = group[::2]
            return [
                "cancelled" if f.cancelled() else (f.result() if f.done() else "pending") for f in futs
            ], list(moved)

        return asyncio.run(main())

    for base, append_time in ((100, -1), (-1, -1), (100, 1_800_000_000_000)):
        c = outcomes(_speedups.settle_group, base, append_time, CFields)
        py = outcomes(_settle_group_py, base, append_time, RecordFuture)
        assert c == py
        mds, moved = py
        assert moved == [10] and mds[2] == "cancelled" and mds[5] == "pending"
        assert mds[1] == RecordMetadata(
            "t", 3, -1 if base == -1 else base + 1, 1_700_000_000_001 if append_time == -1 else append_time, 0, 10
        )
