"""asyncio facade: :class:`AsyncProducer`, on the same Sender thread and RecordAccumulator as :class:`Producer`.

(One file of ~650 lines: the facade and the completion hand-off to the loop below are
one mechanism; each method's wait is served by the same ``_Completions`` queue.)

The protocol work stays on the producer's I/O thread; what this module adds is
that a coroutine never blocks its event loop:

- ``await send(...)`` appends through the ordinary ``Producer.send`` (the same
  routing step and C fast lane). ``send()`` never waits for metadata (a record
  for a topic without it waits in the producer), so the one wait left is for
  ``buffer.memory``: the call is made with ``block=False``, so where it would
  wait it raises ``MemoryWouldBlock`` instead, having appended nothing. The coroutine
  then awaits an ``asyncio.Event`` that the I/O thread sets, through
  ``loop.call_soon_threadsafe``, when a batch's memory returns, and sends the
  record again; the wait is bounded by ``max.block.ms`` (then the record fails
  with ``BufferExhaustedError`` through its future, as in Java).
- ``send()`` returns an ``asyncio.Future`` for the delivery. Completions reach
  the loop in batches: records sent without a callback are grouped by the batch
  they went into, and the batch's completion hands the whole group to the loop
  (a deque, and one thread-safe wakeup when the deque was empty), so a completion
  round that finishes thousands of records costs one wakeup and no Python call
  per record on the I/O thread.
- Cancelling the awaiting task or the delivery future does not unsend a record
  once it was appended: it is delivered (or fails) as usual, and its outcome is
  only dropped for the cancelled future. A task cancelled while ``send()``
  still waits for memory leaves nothing appended.
- ``send_batch`` / ``send_arrow`` run the bulk call in a worker thread (a large
  call may wait for memory batch after batch) and resolve to the per-record
  metadata.
- ``flush`` / ``close`` (and ``stop``, aiokafka's name for it) / ``start`` /
  ``partitions_for`` and the transactional calls run their blocking parts in a
  worker thread; ``async with p.transaction():`` commits on
  success and aborts on an exception.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import asynccontextmanager
from functools import partial
from types import TracebackType
from typing import TYPE_CHECKING, Any

from kproducer.accumulator.futures import NO_OFFSET, NO_TIMESTAMP
from kproducer.callback_errors import callback_raised
from kproducer.delivery import Callback, OnDelivery, check_callback, resolve_callback
from kproducer.errors import KafkaError, MemoryWouldBlock, ProducerClosedError
from kproducer.producer import Producer
from kproducer.record import native
from kproducer.structs import Headers, PartitionInfo, RecordMetadata, TopicPartition, metadata_type

if TYPE_CHECKING:
    from kproducer.accumulator.futures import ProduceRequestResult, RecordFuture
    from kproducer.bulk import BulkFuture
    from kproducer.tracing import PendingSend
    from kproducer.transaction_manager import GroupMetadata

__all__ = ["AsyncProducer"]

log = logging.getLogger(__name__)

# How long sends that need no wait may hold the event loop per loop iteration (checked every 16
# sends): the loop's timers, I/O and other tasks then run within a few milliseconds.
_SLICE_S = 0.002
# Futures settled per loop iteration by one drain of completions.
_DRAIN_MAX = 2048


class _Completions:
    """Records finished on the I/O thread, handed to the loop in batches (one wakeup per non-empty round).

    Records sent without a callback are tracked per batch: ``group`` is a flat list
    ``[loop future, RecordFuture, loop future, RecordFuture, ...]`` that one
    done-callback of the batch's result pushes whole.
    """

    __slots__ = ("loop", "pending", "scheduled", "warned_closed", "last_result", "last_group")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.pending: collections.deque[tuple[asyncio.Future[RecordMetadata] | None, Any, Any]] = collections.deque()
        self.scheduled = False
        self.warned_closed = False
        # The group of the batch the last tracked record went into: consecutive records of one
        # batch join it without a lookup. A completed batch takes no more records, so a record
        # whose result is this one was appended before the batch completed (the group, pushed or
        # not, is drained on this thread, after the record joined it).
        self.last_result: ProduceRequestResult | None = None
        self.last_group: list[Any] = []

    def push(self, fut: asyncio.Future[RecordMetadata] | None, metadata: Any, exception: Any) -> None:
        """On the I/O thread: queue one outcome; wake the loop only if no drain is due yet.

        ``fut`` None queues a whole batch: ``metadata`` is the batch's result, ``exception``
        its group of records sent without a callback.
        """
        self.pending.append((fut, metadata, exception))
        if fut is None and metadata.topic_partition.partition < 0:
            # A record that waited for its topic's metadata was just appended to its real batch
            # (the router's placeholder result, partition -1, completes then). The loop follows it
            # there only when its drain runs: if the loop closes first, nothing would be pushed for
            # the real batch, so watch that batch here and report the dropped outcome then.
            self._watch_followed(exception)
        if not self.scheduled:
            self.scheduled = True
            try:
                self.loop.call_soon_threadsafe(self.drain)
            except RuntimeError:  # the loop was closed with deliveries outstanding
                self._warn_closed()

    def _warn_closed(self) -> None:
        if not self.warned_closed:
            self.warned_closed = True
            log.warning("kproducer AsyncProducer: event loop closed; delivery outcomes dropped")

    def _watch_followed(self, group: list[Any]) -> None:
        """On the I/O thread: when the batch a parked record went into completes, warn if the loop is gone."""
        for i in range(1, len(group), 2):
            nxt = group[i].next_future
            if nxt is not None and not nxt.batch_result.add_callback(self._check_closed):
                self._check_closed()

    def _check_closed(self) -> None:
        if self.loop.is_closed():
            self._warn_closed()

    def drain(self) -> None:
        """On the loop: settle queued futures (a cancelled one is skipped: its record was not unsent).

        At most ``_DRAIN_MAX`` entries per call, then the rest in a later loop iteration, so that a
        round completing tens of thousands of records does not hold the loop for all of them at once.
        """
        self.scheduled = False
        pending = self.pending
        budget = _DRAIN_MAX
        while pending and budget > 0:
            fut, metadata, exception = pending.popleft()
            if fut is None:
                group = exception
                if len(group) > 2 * budget:
                    # A batch of many records: settle a slice now, the rest in a later loop iteration.
                    pending.appendleft((None, metadata, group[2 * budget :]))
                    group = group[: 2 * budget]
                budget -= len(group) >> 1
                self._settle_batch(metadata, group)
                continue
            budget -= 1
            if fut.done():
                continue
            if exception is None:
                fut.set_result(metadata)
            else:
                fut.set_exception(exception)
        if pending and not self.scheduled:
            self.scheduled = True
            self.loop.call_soon(self.drain)

    def _settle_batch(self, result: ProduceRequestResult, group: list[Any]) -> None:
        """The records of one completed batch (or a slice of them): each outcome is read here, on the loop."""
        if result is self.last_result:
            self.last_result = None
            self.last_group = []
        if result.acknowledged_whole:
            # Acknowledged as a whole: each record's metadata comes from the batch's outcome.
            tp = result.topic_partition
            moved = _settle_group(
                group, metadata_type(result.log_append_time), tp.topic, tp.partition, result.base_offset,
                result.log_append_time,
            )
            for i in moved:
                self._settle_one(group[i], group[i + 1])
            return
        for i in range(0, len(group), 2):
            fut = group[i]
            if not fut.done():
                self._settle_one(fut, group[i + 1])

    def _settle_one(self, fut: asyncio.Future[RecordMetadata], rf: RecordFuture) -> None:
        moved = rf.chained
        if moved is not None:
            # The record went on into another batch (it waited for its topic's metadata, or its
            # batch was split): it joins that batch's group and is settled with it.
            self.track(fut, moved)
            return
        err = rf.record_error()
        if err is None:
            fut.set_result(rf.value())
        else:
            fut.set_exception(err)

    def track(self, fut: asyncio.Future[RecordMetadata], rf: RecordFuture) -> None:
        """On the loop: settle ``fut`` when the batch ``rf`` went into completes (one push per batch)."""
        result = rf.batch_result
        if result is self.last_result:
            group = self.last_group
            group.append(fut)
            group.append(rf)
            return
        group = [fut, rf]
        if not result.add_callback(partial(self.push, None, result, group)):
            # Already complete (a record that failed before reaching a batch, or one followed into
            # a batch that completed meanwhile): settle it now.
            self._settle_one(fut, rf)
            return
        self.last_result = result
        self.last_group = group


def _settle_group_py(
    group: list[Any], metadata_type: type[RecordMetadata], topic: str, partition: int, base_offset: int,
    log_append_time: int,
) -> list[int]:
    """Settle the loop futures of a batch acknowledged as a whole (see :class:`_Completions`).

    A future already done (cancelled) is skipped; a record that moved to another
    batch (``next_future`` set) is left for the caller, whose indices are returned. The C
    twin is ``kproducer._speedups.settle_group``; this is its reference.
    """
    moved: list[int] = []
    for i in range(0, len(group), 2):
        fut = group[i]
        if fut.done():
            continue
        rf = group[i + 1]
        if rf.next_future is not None:
            moved.append(i)
            continue
        fut.set_result(
            metadata_type(
                topic,
                partition,
                NO_OFFSET if base_offset == NO_OFFSET else base_offset + rf.relative_offset,
                rf.create_timestamp if log_append_time == NO_TIMESTAMP else log_append_time,
                rf.serialized_key_size,
                rf.serialized_value_size,
            )
        )
    return moved


_settle_group = getattr(native.c, "settle_group", None) or _settle_group_py


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
            except Exception as e:
                callback_raised(e, metadata.topic if metadata is not None else getattr(exception, "topic", "a record"))
        self.sink.push(self.fut, metadata, exception)

    def record_serialized(self, key: bytes | None, value: bytes | None, headers: Any) -> None:
        """Tell an ``on_delivery`` report the bytes sent (see :meth:`DeliveryReport.record_serialized`)."""
        sent_as = getattr(self.user, "record_serialized", None)
        if sent_as is not None:
            sent_as(key, value, headers)


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
        self._new_future: Any = None
        self._completions: _Completions | None = None
        self._memory = asyncio.Event()
        self._memory_waiters = 0
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
        if type(loop).create_future is asyncio.BaseEventLoop.create_future:
            # What BaseEventLoop.create_future does, without its Python frame per record.
            self._new_future = partial(asyncio.Future, loop=loop)
        else:
            self._new_future = loop.create_future  # a loop with futures of its own (uvloop...)
        self._completions = _Completions(loop)
        self._producer = producer
        producer.set_memory_freed_listener(self._memory_freed)

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
        left: int = await self._off_loop(p.flush, timeout)
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
        try:
            await self._off_loop(p.close, timeout)
        finally:
            p.set_memory_freed_listener(None)
            self._memory.set()  # a sender still waiting for memory sees the producer closed
        await self._settled()

    async def stop(self, timeout: float | None = None) -> None:
        """aiokafka's name for :meth:`close`: flush, then stop the I/O thread, never blocking the loop."""
        await self.close(timeout)

    async def partitions_for(self, topic: str, timeout: float | None = None) -> list[PartitionInfo]:
        """``Producer.partitions_for`` off the loop: the topic's partitions, waiting for its metadata
        up to ``max.block.ms`` (or ``timeout`` s) in a worker thread (Java's ``partitionsFor``)."""
        p = self._require()
        partitions: list[PartitionInfo] = await self._off_loop(p.partitions_for, topic, timeout)
        return partitions

    async def _off_loop(self, fn: Any, *args: Any) -> Any:
        """Run a blocking producer call in the loop's default executor, in a copy of the task's context.

        The copy carries the caller's contextvars, so a traced call (kproducer.tracing) is
        parented on the task's current span as it would be on the loop.
        """
        return await asyncio.get_running_loop().run_in_executor(None, contextvars.copy_context().run, fn, *args)

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

    # ------------------------------------------------------------------ transactions
    async def init_transactions(self, timeout: float | None = None) -> None:
        """``Producer.init_transactions`` off the loop: register ``transactional.id``, fence older producers."""
        await self._off_loop(self._require().init_transactions, timeout)

    async def begin_transaction(self) -> None:
        """Open a transaction: records sent until commit or abort belong to it."""
        self._require().begin_transaction()

    async def send_offsets_to_transaction(
        self,
        offsets: Mapping[TopicPartition, int] | Iterable[Any],
        group_metadata: str | GroupMetadata | Any,
        timeout: float | None = None,
    ) -> None:
        """``Producer.send_offsets_to_transaction`` off the loop (consume-transform-produce)."""
        await self._off_loop(self._require().send_offsets_to_transaction, offsets, group_metadata, timeout)

    async def commit_transaction(self, timeout: float | None = None) -> None:
        """Off the loop: send every record of the transaction, wait for their acknowledgement, commit.

        When it returns, the delivery futures of the transaction's records are settled.
        """
        await self._off_loop(self._require().commit_transaction, timeout)
        await self._settled()

    async def abort_transaction(self, timeout: float | None = None) -> None:
        """Off the loop: abort the transaction (its unsent records fail with TransactionAbortedError)."""
        await self._off_loop(self._require().abort_transaction, timeout)
        await self._settled()

    @asynccontextmanager
    async def transaction(self, timeout: float | None = None) -> AsyncIterator[AsyncProducer]:
        """``async with p.transaction():`` begins, commits on success and aborts on an exception.

        The exception (cancellation included) is re-raised after the abort; a failed
        commit raises its error. The blocking parts run off the loop.
        """
        p = self._require()
        await self.begin_transaction()
        try:
            yield self
        except BaseException:
            if p.can_abort_transaction():
                try:
                    await self.abort_transaction(timeout)
                except KafkaError:
                    log.warning("aborting the transaction after an error failed", exc_info=True)
            raise
        await self.commit_transaction(timeout)

    # ------------------------------------------------------------------ memory (I/O thread → loop)
    def _memory_freed(self) -> None:
        """On the I/O thread, when a batch's memory returned: wake the loop only if a send waits for it."""
        if self._memory_waiters and self._loop is not None:
            try:
                self._loop.call_soon_threadsafe(self._memory.set)
            except RuntimeError:
                pass  # loop closed: nobody is waiting any more

    def _try_send(
        self, p: Producer, topic: str, value: Any, key: Any, partition: int | None, timestamp: int | None,
        headers: Any, callback: Callback | None,
    ) -> RecordFuture:
        """``Producer.send`` that must not wait for memory (MemoryWouldBlock instead)."""
        if partition is None and timestamp is None and headers is None and callback is None:
            return p.send(topic, value, key, block=False)  # the C lane's shape
        return p.send(
            topic, value, key, partition=partition, timestamp=timestamp, headers=headers, callback=callback, block=False
        )

    async def _send_when_memory(
        self, p: Producer, topic: str, value: Any, key: Any, partition: int | None, timestamp: int | None,
        headers: Any, callback: Callback | None, pending: PendingSend | None = None,
    ) -> RecordFuture:
        """Await memory, then send; the record fails with BufferExhaustedError at ``max.block.ms``.

        The coroutine counts as a memory waiter (``BufferPool.queued()``), so ready()
        sends batches without lingering, as for a blocked thread. While any send
        waits, new sends join the waiters instead of taking freed memory first; the
        waiters retry in the order the event wakes them, which is the order they
        started waiting.

        ``pending``: the span a traced attempt started (MemoryWouldBlock's ``pending_send``):
        the attempts after it send its headers and the span ends with the record, so a record
        has one span however often it waited.
        """
        deadline = time.monotonic() + p.max_block_ms / 1000.0
        if pending is not None:
            headers = pending.headers
        self._memory_waiters += 1
        p.add_memory_waiter(1)
        try:
            while True:
                if not p.accepts_sends:
                    raise ProducerClosedError("Cannot send after the producer has been closed")
                try:
                    rf = self._try_send(p, topic, value, key, partition, timestamp, headers, callback)
                    break
                except MemoryWouldBlock as e:
                    size, poll_s = e.size, e.poll_s
                    if e.pending_send is not None:
                        pending = e.pending_send
                        headers = pending.headers
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    rf = p.fail_buffer_exhausted(topic, partition, callback)
                    break
                self._memory.clear()
                if poll_s is None and p.memory_available_now(size):
                    continue  # freed between the attempt and the clear
                try:
                    await asyncio.wait_for(self._memory.wait(), remaining if poll_s is None else min(remaining, poll_s))
                except TimeoutError:
                    pass
        except BaseException as e:
            if pending is not None:
                pending.failed(e)  # closed producer, cancelled task: the record's span ends with it
            raise
        finally:
            self._memory_waiters -= 1
            p.add_memory_waiter(-1)
        if pending is not None:
            pending.sent(rf)
        return rf

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

        Never waits for metadata (the record waits in the producer). Awaits,
        never blocks, only while ``buffer.memory`` is full, bounded by
        ``max.block.ms``. A record's own failure (too large, buffer still full,
        no metadata within ``max.block.ms``, a broker error) arrives through the
        returned future, as with ``Producer``; a misuse (closed producer, a
        transactional producer outside a transaction, bad argument types) raises here.
        """
        p = self._producer
        if p is None or p.closed:
            self._require()
            raise ProducerClosedError("Cannot send after the producer has been closed")
        completions = self._completions
        loop = self._loop
        assert completions is not None and loop is not None
        fut: asyncio.Future[RecordMetadata] = self._new_future()
        delivery: Callback | None = None
        if callback is not None or on_delivery is not None:
            if on_delivery is not None:
                callback = resolve_callback(callback, on_delivery, topic, key, value, headers)
            else:
                check_callback(callback, "callback")
            # The record's callback settles the loop future, after the user's own.
            delivery = _Delivery(fut, completions, callback)
        rf: RecordFuture | None = None
        pending: PendingSend | None = None
        if not self._memory_waiters:
            # _try_send, inline: this runs once per record. block=False: where the send would wait
            # for buffer.memory it raises MemoryWouldBlock instead (the C lane takes it too: it never
            # waits, and what it declines goes to the Python path with the same keywords).
            try:
                if delivery is None and partition is None and timestamp is None and headers is None:
                    rf = p.send(topic, value, key, block=False)  # the C lane's shape
                else:
                    rf = p.send(
                        topic, value, key, partition=partition, timestamp=timestamp, headers=headers, callback=delivery,
                        block=False,
                    )
            except MemoryWouldBlock as e:
                pending = e.pending_send  # a traced send: its span is the record's, carried on
        if rf is None:
            # buffer.memory is full (or other sends wait for it already): await it, in turn.
            rf = await self._send_when_memory(p, topic, value, key, partition, timestamp, headers, delivery, pending)
        if delivery is None:
            # No per-record callback on the I/O thread: the batch's completion settles its records here
            # (consecutive records of one batch join its group directly, as track() would).
            if rf.batch_result is completions.last_result:
                group = completions.last_group
                group.append(fut)
                group.append(rf)
            else:
                completions.track(fut, rf)
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
                loop.call_soon(self._new_slice)
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
        return await self._bulk_off_loop(
            lambda p: p.send_batch(
                topic, values, keys, partition=partition, timestamp=timestamp, headers=headers, callback=callback,
                on_delivery=on_delivery,
            )
        )

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
        value_format: Any = "bytes",
        key_format: Any = "bytes",
    ) -> asyncio.Future[list[RecordMetadata]]:
        """``Producer.send_arrow`` off the loop; the future resolves to each row's metadata, in row order.

        ``value_format``/``key_format``: as for ``Producer.send_arrow`` (``"bytes"`` or a
        ``kproducer.avro.AvroFormat``; the registry calls then also run off the loop).
        """
        return await self._bulk_off_loop(
            lambda p: p.send_arrow(
                table_or_batch, topic, value_column=value_column, key_column=key_column, topic_column=topic_column,
                partition=partition, timestamp=timestamp, headers=headers, callback=callback, on_delivery=on_delivery,
                value_format=value_format, key_format=key_format,
            )
        )

    async def _bulk_off_loop(self, call: Callable[[Producer], BulkFuture]) -> asyncio.Future[list[RecordMetadata]]:
        """Run a bulk call on the default executor (it may block for memory), then one loop future for it."""
        p = self._require()
        bulk: BulkFuture = await self._off_loop(call, p)
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

