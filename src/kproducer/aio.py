"""asyncio facade: :class:`AsyncProducer`, on the same Sender thread and RecordAccumulator as :class:`Producer`.

The protocol work stays on the producer's I/O thread; what this module adds is
that a coroutine never blocks its event loop:

- ``await send(...)`` appends through the ordinary ``Producer.send`` (the same
  routing step and C fast lane) only when that cannot block. When
  ``buffer.memory`` is full it waits on an ``asyncio.Event`` that the I/O thread
  sets, through ``loop.call_soon_threadsafe``, when a batch's memory returns;
  the wait is bounded by ``max.block.ms`` (then the record fails with
  ``BufferExhaustedError`` through its future, as in Java). A topic without
  metadata is waited for in a worker thread (one per topic at a time).
- ``send()`` returns an ``asyncio.Future`` for the delivery. Completions reach
  the loop in batches: the I/O thread appends finished records to a deque and
  schedules one drain on the loop when the deque was empty, so a completion
  round that finishes thousands of records costs one thread-safe wakeup.
- Cancelling the awaiting task or the delivery future does not unsend a record
  once it was appended: it is delivered (or fails) as usual, and its outcome is
  only dropped for the cancelled future. A task cancelled while ``send()``
  still waits for memory leaves nothing appended.
- ``send_batch`` / ``send_arrow`` run the bulk call in a worker thread (a large
  call may wait for memory batch after batch) and resolve to the per-record
  metadata.
- ``flush`` / ``close`` / ``start`` run their blocking parts in a worker thread.

Transactions are not offered here yet: the synchronous producer has no
transactional API to build them on.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any

from kproducer.delivery import Callback, OnDelivery, check_callback, resolve_callback
from kproducer.errors import BufferExhaustedError, KafkaError, ProducerClosedError
from kproducer.producer import Producer
from kproducer.record.builder import estimate_size_upper_bound
from kproducer.structs import Headers, RecordMetadata

if TYPE_CHECKING:
    from kproducer.bulk import BulkFuture

__all__ = ["AsyncProducer"]

log = logging.getLogger(__name__)

# How long sends that need no wait may hold the event loop per loop iteration (checked every 16
# sends): the loop's timers, I/O and other tasks then run within a few milliseconds.
_SLICE_S = 0.002
# Futures settled per loop iteration by one drain of completions.
_DRAIN_MAX = 2048


class _Completions:
    """Records finished on the I/O thread, handed to the loop in batches (one wakeup per non-empty round)."""

    __slots__ = ("loop", "pending", "scheduled", "warned_closed", "batches")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pending: collections.deque[tuple[asyncio.Future[RecordMetadata] | None, Any, Any]] = collections.deque()
        self.scheduled = False
        self.warned_closed = False
        # The open batches' results that records without a callback went into: (loop future, RecordFuture)s.
        self.batches: dict[Any, list[tuple[asyncio.Future[RecordMetadata], Any]]] = {}

    def push(self, fut: asyncio.Future[RecordMetadata] | None, metadata: Any, exception: Any) -> None:
        """On the I/O thread: queue one outcome; wake the loop only if no drain is due yet.

        ``fut`` None queues a whole batch: ``metadata`` is the batch's result, ``exception`` the
        list of (loop future, RecordFuture) of the records sent into it without a callback.
        """
        self.pending.append((fut, metadata, exception))
        if not self.scheduled:
            self.scheduled = True
            try:
                self.loop.call_soon_threadsafe(self.drain)
            except RuntimeError:  # the loop was closed with deliveries outstanding
                if not self.warned_closed:
                    self.warned_closed = True
                    log.warning("kproducer AsyncProducer: event loop closed; delivery outcomes dropped")

    def drain(self) -> None:
        """On the loop: settle queued futures (a cancelled one is skipped: its record was not unsent).

        At most ``_DRAIN_MAX`` entries per call, then the rest in a later loop iteration, so that a
        round completing tens of thousands of records does not hold the loop for all of them at once.
        """
        self.scheduled = False
        pending = self.pending
        for _ in range(_DRAIN_MAX):
            if not pending:
                return
            fut, metadata, exception = pending.popleft()
            if fut is None:
                self._settle_batch(metadata, exception)
                continue
            if fut.done():
                continue
            if exception is None:
                fut.set_result(metadata)
            else:
                fut.set_exception(exception)
        if pending and not self.scheduled:
            self.scheduled = True
            self.loop.call_soon(self.drain)

    def _settle_batch(self, result: Any, records: list[tuple[asyncio.Future[RecordMetadata], Any]]) -> None:
        """The records of one completed batch: each outcome is read from its RecordFuture here, on the loop."""
        owner = self.batches.pop(result, None)
        del owner
        for fut, rf in records:
            if fut.done():
                continue
            if not rf.done():  # moved to another batch (split for MESSAGE_TOO_LARGE): follow it there
                rf.add_done_callback(partial(self._moved_done, fut))
                continue
            err = rf.record_error()
            if err is None:
                fut.set_result(rf.value())
            else:
                fut.set_exception(err)

    def _moved_done(self, fut: asyncio.Future[RecordMetadata], rf: Any) -> None:
        err = rf.record_error()
        self.push(fut, None if err is not None else rf.value(), err)

    def track(self, fut: asyncio.Future[RecordMetadata], rf: Any) -> None:
        """On the loop: settle ``fut`` when the batch ``rf`` went into completes (one push per batch)."""
        result = rf._batch_result
        group = self.batches.get(result)
        if group is None:
            group = self.batches[result] = []
            if not result._add_callback(partial(self.push, None, result, group)):
                # Already complete (a record that failed before reaching a batch): settle it now.
                del self.batches[result]
                self._settle_batch(result, [(fut, rf)])
                return
        group.append((fut, rf))


class _Delivery:
    """The Java-shaped callback of one record: its loop future, and an optional user callback to run first."""

    __slots__ = ("fut", "sink", "user")

    def __init__(self, fut: asyncio.Future[RecordMetadata], sink: _Completions, user: Callback | None) -> None:
        self.fut = fut
        self.sink = sink
        self.user = user

    def __call__(self, metadata: RecordMetadata | None, exception: KafkaError | None) -> None:
        user = self.user
        if user is not None:
            try:
                user(metadata, exception)
            except Exception:
                log.exception("delivery callback raised")
        self.sink.push(self.fut, metadata, exception)


class AsyncProducer:
    """A Kafka producer for asyncio code: ``async with AsyncProducer(config) as p: await p.send(...)``.

    Takes the same configuration as :class:`~kproducer.producer.Producer` (and is
    one underneath: ``producer`` gives it). ``await p.send(...)`` returns an
    ``asyncio.Future`` resolving to the record's RecordMetadata, so
    ``await (await p.send(...))`` and ``await p.send_and_wait(...)`` both wait
    for the acknowledgement, as in aiokafka. Delivery callbacks (``callback=``,
    ``on_delivery=``) run on the I/O thread exactly as with ``Producer``.
    """

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self._config = dict(config or {})
        self._kwargs = kwargs
        self._producer: Producer | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._completions: _Completions | None = None
        self._memory = asyncio.Event()
        self._memory_waiters = 0
        self._metadata_waits: dict[tuple[str, int | None], asyncio.Future[Any]] = {}
        self._closed = False
        self._sends = 0
        self._slice_start = time.monotonic()
        self._slice_used = False

    # ------------------------------------------------------------------ lifecycle
    async def start(self) -> None:
        """Create the producer (its I/O thread starts; bootstrap names are resolved off the loop)."""
        if self._producer is not None:
            return
        if self._closed:
            raise ProducerClosedError("this AsyncProducer was closed; create a new one")
        loop = asyncio.get_running_loop()
        producer = await loop.run_in_executor(None, lambda: Producer(self._config, **self._kwargs))
        self._loop = loop
        self._completions = _Completions(loop)
        self._producer = producer
        producer._pool.set_free_listener(self._memory_freed)

    async def __aenter__(self) -> AsyncProducer:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def flush(self, timeout: float | None = None) -> int:
        """Wait (off the loop) until every record sent so far completed; the count still undelivered."""
        p = self._require()
        loop = asyncio.get_running_loop()
        left = await loop.run_in_executor(None, p.flush, timeout)
        await self._settled()
        return left

    async def close(self, timeout: float | None = None) -> None:
        """Flush within ``timeout`` s (None: as long as it takes), fail what is left, stop the I/O thread."""
        if self._closed:
            return
        self._closed = True
        p = self._producer
        if p is None:
            return
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, p.close, timeout)
        finally:
            p._pool.set_free_listener(None)
            self._memory.set()  # a sender still waiting for memory sees the producer closed
        await self._settled()

    async def _settled(self) -> None:
        """Let the completions already handed to the loop settle their futures before returning."""
        c = self._completions
        while c is not None and c.pending:
            c.drain()
            await asyncio.sleep(0)

    @property
    def producer(self) -> Producer:
        """The underlying :class:`Producer` (for ``metrics()``, ``partitions_for()``...)."""
        return self._require()

    def metrics(self) -> dict[str, float]:
        return self._require().metrics()

    def _require(self) -> Producer:
        p = self._producer
        if p is None:
            if self._closed:
                raise ProducerClosedError("Cannot send after the producer has been closed")
            raise ProducerClosedError("AsyncProducer is not started: use `async with` or `await start()`")
        return p

    def _new_slice(self) -> None:
        """Queued behind the tasks that yielded: the loop went round, sends may hold it again."""
        self._slice_used = False
        self._slice_start = time.monotonic()

    # ------------------------------------------------------------------ memory (I/O thread → loop)
    def _memory_freed(self) -> None:
        """On the I/O thread, when a batch's memory returned: wake the loop only if a send waits for it."""
        if self._memory_waiters and self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._memory.set)
            except RuntimeError:
                pass  # loop closed: nobody is waiting any more

    async def _wait_for_memory(self, p: Producer, size: int, deadline: float) -> None:
        """Await until ``size`` bytes could be allocated without blocking; BufferExhaustedError at ``deadline``."""
        pool = p._pool
        self._memory_waiters += 1
        pool.add_external_waiter(1)
        p._wakeup()  # ready() now sees memory exhausted: batches go out without lingering
        try:
            while not pool.can_allocate_now(size):
                if p._closed or pool.closed:
                    raise ProducerClosedError("Cannot send after the producer has been closed")
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise BufferExhaustedError(
                        f"Failed to allocate memory within the configured max blocking time {p._max_block_ms} ms "
                        f"(buffer.memory={p._buffer_memory} is full)"
                    )
                self._memory.clear()
                if pool.can_allocate_now(size):  # freed between the check and the clear
                    break
                try:
                    await asyncio.wait_for(self._memory.wait(), remaining)
                except TimeoutError:
                    pass
        finally:
            self._memory_waiters -= 1
            pool.add_external_waiter(-1)

    async def _wait_for_metadata(self, p: Producer, topic: str, partition: int | None) -> None:
        """Wait for a topic's (and partition's) metadata in a worker thread, shared by the sends that need it."""
        key = (topic, partition)
        waiting = self._metadata_waits.get(key)
        if waiting is None:
            loop = asyncio.get_running_loop()
            waiting = loop.run_in_executor(None, p._wait_on_metadata, topic, partition, p._clock())
            self._metadata_waits[key] = waiting
            waiting.add_done_callback(lambda _f: self._metadata_waits.pop(key, None))
        await asyncio.shield(waiting)

    # ------------------------------------------------------------------ send
    async def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        *,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Headers | Iterable[tuple[str, bytes | None]] | None = None,
        callback: Callback | None = None,
        on_delivery: OnDelivery | None = None,
    ) -> asyncio.Future[RecordMetadata]:
        """Append one record without blocking the loop; returns the future of its delivery.

        Waits (awaiting, never blocking) only while ``buffer.memory`` is full or
        the topic's metadata is unknown, both bounded by ``max.block.ms``. A
        record's own failure (too large, buffer still full, metadata timeout, a
        broker error) arrives through the returned future, as with ``Producer``.
        """
        p = self._producer
        if p is None or p._closed:
            self._require()
            raise ProducerClosedError("Cannot send after the producer has been closed")
        completions = self._completions
        assert completions is not None and self._loop is not None
        fut: asyncio.Future[RecordMetadata] = self._loop.create_future()
        if on_delivery is not None:
            callback = resolve_callback(callback, on_delivery, topic, key, value, headers)
        elif callback is not None:
            check_callback(callback, "callback")
        delivery = _Delivery(fut, completions, callback)

        # Never let Producer.send block the loop: wait here for what it would wait for.
        count = p._metadata.cluster.partition_count(topic)
        if count is None or (partition is not None and partition >= count):
            try:
                await self._wait_for_metadata(p, topic, partition)
            except KafkaError as e:
                delivery(None, e)
                completions.drain()
                return fut
        pool = p._pool
        if pool._external_waiters or not pool.can_allocate_now(p._accumulator.batch_size):
            size = max(p._accumulator.batch_size, _record_size_bound(p, key, value))
            try:
                await self._wait_for_memory(p, size, time.monotonic() + p._max_block_ms / 1000.0)
            except BufferExhaustedError as e:
                e.topic, e.partition = topic, partition
                p._sensors.record_errors(topic, 1)
                delivery(None, e)
                completions.drain()
                return fut
        if callback is None:
            # No per-record callback on the I/O thread: the batch's completion settles its records here.
            rf = p.send(topic, value, key, partition=partition, timestamp=timestamp, headers=headers)
            completions.track(fut, rf)
        else:
            p.send(topic, value, key, partition=partition, timestamp=timestamp, headers=headers, callback=delivery)
        # A send that needs no wait would never suspend, so tasks sending in a tight loop would hold
        # the loop for as long as they have records. Sends share one time slice per loop iteration:
        # once it is used up, every send yields until the loop has been round (timers, I/O, other
        # tasks), however many tasks are sending.
        if self._slice_used:
            await asyncio.sleep(0)
        else:
            self._sends += 1
            if not self._sends & 15 and time.monotonic() - self._slice_start >= _SLICE_S:
                self._slice_used = True
                self._loop.call_soon(self._new_slice)
                await asyncio.sleep(0)
        return fut

    async def send_and_wait(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        *,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Headers | Iterable[tuple[str, bytes | None]] | None = None,
    ) -> RecordMetadata:
        """``await (await send(...))``: the record's metadata once acknowledged (raises its error)."""
        fut = await self.send(topic, value, key, partition=partition, timestamp=timestamp, headers=headers)
        return await fut

    async def send_batch(
        self,
        topic: str,
        values: Sequence[bytes | bytearray | memoryview | None],
        keys: Sequence[bytes | bytearray | memoryview | None] | None = None,
        *,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Iterable[tuple[str, bytes | None]] | None = None,
        callback: Callback | None = None,
        on_delivery: OnDelivery | None = None,
    ) -> asyncio.Future[list[RecordMetadata]]:
        """``Producer.send_batch`` off the loop; the future resolves to each record's metadata, in order."""
        p = self._require()
        loop = asyncio.get_running_loop()
        bulk = await loop.run_in_executor(
            None,
            lambda: p.send_batch(
                topic, values, keys, partition=partition, timestamp=timestamp, headers=headers, callback=callback,
                on_delivery=on_delivery,
            ),
        )
        return self._bulk_future(bulk)

    async def send_arrow(
        self,
        table_or_batch: Any,
        topic: str | None = None,
        *,
        value_column: str = "value",
        key_column: str | None = "key",
        topic_column: str = "topic",
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Iterable[tuple[str, bytes | None]] | None = None,
        callback: Callback | None = None,
        on_delivery: OnDelivery | None = None,
    ) -> asyncio.Future[list[RecordMetadata]]:
        """``Producer.send_arrow`` off the loop; the future resolves to each row's metadata, in row order."""
        p = self._require()
        loop = asyncio.get_running_loop()
        bulk = await loop.run_in_executor(
            None,
            lambda: p.send_arrow(
                table_or_batch, topic, value_column=value_column, key_column=key_column, topic_column=topic_column,
                partition=partition, timestamp=timestamp, headers=headers, callback=callback, on_delivery=on_delivery,
            ),
        )
        return self._bulk_future(bulk)

    def _bulk_future(self, bulk: BulkFuture) -> asyncio.Future[list[RecordMetadata]]:
        """One loop future for a bulk call, settled with one thread-safe wakeup when its last record completes."""
        loop = self._loop
        assert loop is not None
        fut: asyncio.Future[list[RecordMetadata]] = loop.create_future()

        def settle(_b: Any) -> None:
            if fut.done():
                return
            try:
                fut.set_result(bulk.result(0))
            except BaseException as e:  # noqa: BLE001 - the call's failure goes to its awaiter
                fut.set_exception(e)

        def done(_b: Any) -> None:
            try:
                loop.call_soon_threadsafe(settle, None)
            except RuntimeError:
                log.warning("kproducer AsyncProducer: event loop closed; a bulk call's outcome was dropped")

        bulk.add_done_callback(done)
        return fut

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("started" if self._producer is not None else "new")
        return f"<AsyncProducer {state}>"


def _record_size_bound(p: Producer, key: Any, value: Any) -> int:
    """An upper bound of one record's batch bytes (bytes only; other types are serialized later)."""
    k = key if isinstance(key, (bytes, bytearray)) else None
    v = value if isinstance(value, (bytes, bytearray)) else None
    try:
        return estimate_size_upper_bound(2, p._compression, k, v, None)
    except Exception:  # noqa: BLE001 - a bound only; send() checks the real size
        return 0

