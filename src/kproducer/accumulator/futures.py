"""Per-batch result latch and per-record futures (Java's ``ProduceRequestResult`` and ``FutureRecordMetadata``).

DESIGN "Futures without per-record cost": a batch owns one
:class:`ProduceRequestResult` (the base offset, the log-append time and the
error; an Event only once somebody waits). A :class:`RecordFuture` is only a
pointer to that result plus the record's relative offset and sizes: no lock or
Event per record, and the batch keeps no reference to it unless the record has
a delivery callback. When a batch is split for MESSAGE_TOO_LARGE, the old result
learns where each of its records went (``moved``), and a future follows its
record there when it looks (``_forward``).

A record's own fields (Java's ``FutureRecordMetadata``: batch result, relative
offset, create time, key and value sizes, and the future it moved to) live in
:class:`FutureRecordMetadata`: the C type ``kproducer._speedups.FutureRecordMetadata``
when the C extension runs, whose constructor the C send lane calls, or its Python
twin :class:`PyFutureRecordMetadata`. RecordFuture builds on whichever runs.

A RecordFuture is a ``concurrent.futures.Future`` (it subclasses it without
running its ``__init__``, so it carries no Condition), which is what the
standard library checks: ``concurrent.futures.wait`` / ``as_completed`` and
``asyncio.wrap_future`` take it as it is, and ``await future`` works inside a
running event loop. The waiter list those functions use is made only for a
future they actually wait on, and every such future shares one module lock.
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
from collections.abc import Callable, Generator
from typing import TYPE_CHECKING, Any

from kproducer.callback_errors import on_callback_thread
from kproducer.errors import IllegalStateError, KafkaTimeoutError
from kproducer.record.c_extension import c
from kproducer.structs import RecordMetadata, TopicPartition, metadata_type

__all__ = [
    "NO_OFFSET", "NO_TIMESTAMP", "FutureRecordMetadata", "ProduceRequestResult", "PyFutureRecordMetadata", "RecordFuture",
]  # fmt: skip

log = logging.getLogger(__name__)

NO_OFFSET = -1
NO_TIMESTAMP = -1

ErrorFn = Callable[[int], BaseException | None]


# One lock for every result's state changes: a batch completes once and is rarely waited on, so
# a per-batch Event (a Condition and two locks) would be paid for by every batch but used by few.
_RESULTS_LOCK = threading.Lock()


class ProduceRequestResult:
    """The outcome of one batch: a latch plus base offset, log-append time and per-record errors.

    ``set()`` records the outcome, ``done()`` opens the latch and runs the
    callbacks registered through ``RecordFuture.add_done_callback``. The Event a
    waiter blocks on is made only when someone waits before the batch is done.
    """

    __slots__ = (
        "topic_partition", "base_offset", "log_append_time", "_error_fn", "_done", "_open", "_event", "_callbacks",
        "moved",
    )  # fmt: skip

    def __init__(self, topic_partition: TopicPartition) -> None:
        self.topic_partition = topic_partition
        self.base_offset = NO_OFFSET
        self.log_append_time = NO_TIMESTAMP
        self._error_fn: ErrorFn | None = None
        self._done = False  # the outcome is final (callbacks may still be running)
        self._open = False  # the latch: done-callbacks have all run
        self._event: threading.Event | None = None
        self._callbacks: list[Callable[[], None]] | None = None
        # After a split: (result, relative offset) of each record in its new batch, by old relative offset.
        self.moved: list[tuple[ProduceRequestResult, int]] | None = None

    def set(self, base_offset: int, log_append_time: int, error_fn: ErrorFn | None) -> None:
        """Record the outcome; ``error_fn(relative_index)`` gives a record's exception (None: success)."""
        self.base_offset = base_offset
        self.log_append_time = log_append_time
        self._error_fn = error_fn

    def done(self) -> None:
        """Run the done-callbacks registered so far, then open the latch (once).

        Callbacks first, as Java's ProducerBatch fires its thunks before the latch:
        whoever wakes from ``await_()`` (``flush()``) finds every callback already run.
        The result counts as completed from the start, so a callback reading it does not wait.
        """
        lock = _RESULTS_LOCK
        lock.acquire()  # not ``with`` (docs/architecture.md, "Locks on the record path")
        try:
            if self._done:
                return
            self._done = True
            callbacks, self._callbacks = self._callbacks, None
            if callbacks is None:
                # Nothing to run first: open the latch in the same turn of the lock.
                self._open = True
                event = self._event
        finally:
            lock.release()
        if callbacks is None:
            if event is not None:
                event.set()
            return
        for cb in callbacks:
            try:
                cb()
            except Exception:
                log.exception("error in a future done-callback for %s", self.topic_partition)
        lock.acquire()
        try:
            self._open = True
            event = self._event
        finally:
            lock.release()
        if event is not None:
            event.set()

    def await_(self, timeout: float | None = None) -> bool:
        """Block until ``done()`` finished (callbacks run); False when ``timeout`` seconds passed first."""
        if self._open:
            return True
        with _RESULTS_LOCK:
            if self._open:
                return True
            event = self._event
            if event is None:
                event = self._event = threading.Event()
        return event.wait(timeout)

    @property
    def completed(self) -> bool:
        return self._done

    @property
    def succeeded(self) -> bool:
        """Every record of the batch was acknowledged (the outcome is set and has no error)."""
        return self._done and self._error_fn is None

    @property
    def error(self) -> BaseException | None:
        """The batch-level error: the first record's exception (None on success)."""
        return self.error_at(0)

    @property
    def acknowledged_whole(self) -> bool:
        """Every record is still in this batch and none has an error: each record's metadata follows from
        the batch's base offset and log-append time (read once the result is set)."""
        return self._error_fn is None and self.moved is None

    def error_at(self, relative_index: int) -> BaseException | None:
        """The exception of the record at ``relative_index`` (None on success)."""
        fn = self._error_fn
        return None if fn is None else fn(relative_index)

    def add_callback(self, cb: Callable[[], None]) -> bool:
        """Register ``cb`` for ``done()``; False (not registered) when already done."""
        with _RESULTS_LOCK:
            if self._done:
                return False
            if self._callbacks is None:
                self._callbacks = []
            self._callbacks.append(cb)
            return True

    def __repr__(self) -> str:
        state = "done" if self.completed else "pending"
        return f"ProduceRequestResult({self.topic_partition}, {state}, base_offset={self.base_offset})"


# concurrent.futures.wait()/as_completed() take each future's ``_condition`` while they read its
# ``_state`` and add a waiter. One re-entrant Condition serves every RecordFuture (wait() acquires
# it once per future, in one thread): no future carries a lock, and the Sender thread takes this
# one only for a future somebody waits on that way.
_STDLIB_CONDITION = threading.Condition(threading.RLock())
_PENDING = "PENDING"
_FINISHED = "FINISHED"


class _StdlibWaiters(list[Any]):
    """The ``_waiters`` of a RecordFuture as concurrent.futures sees them, with the done flag they go by.

    ``notified`` flips (under the shared condition) when the record completes, at
    which point every waiter present hears about it once; ``_state`` reports
    FINISHED only from then on, so a waiter added after that is never told twice.
    """

    __slots__ = ("notified",)

    def __init__(self) -> None:
        super().__init__()
        self.notified = False


class PyFutureRecordMetadata:
    """The fields of one record's future (Java's ``FutureRecordMetadata``); the Python twin of the C type.

    ``kproducer._speedups.FutureRecordMetadata`` has the same constructor and attributes, with the
    four sizes and offsets held as C integers; the send lane sets them through that constructor.
    ``_next`` is the future of this record in the batch it moved to (after a split), or None.
    """

    __slots__ = (
        "_batch_result", "relative_offset", "create_timestamp", "serialized_key_size", "serialized_value_size", "_next",
    )  # fmt: skip

    def __init__(
        self,
        result: ProduceRequestResult,
        relative_offset: int,
        create_timestamp: int,
        serialized_key_size: int,
        serialized_value_size: int,
    ) -> None:
        self._batch_result = result
        self.relative_offset = relative_offset
        self.create_timestamp = create_timestamp
        self.serialized_key_size = serialized_key_size
        self.serialized_value_size = serialized_value_size
        self._next: RecordFuture | None = None


if TYPE_CHECKING:
    FutureRecordMetadata = PyFutureRecordMetadata
else:
    FutureRecordMetadata = c.FutureRecordMetadata if c is not None else PyFutureRecordMetadata
    """The implementation of a record's fields that runs: the C type, or its Python twin."""


class RecordFuture(FutureRecordMetadata, concurrent.futures.Future[RecordMetadata]):
    """The future of one record: a ``concurrent.futures.Future`` resolving to its RecordMetadata.

    Java's FutureRecordMetadata: it holds no synchronization of its own and
    ``result()`` waits on its batch's latch. It is accepted as it is by

    - ``concurrent.futures.wait(fs)`` and ``as_completed(fs)`` (a waiter list is
      made for the futures they wait on; the lock is one shared by all),
    - ``asyncio.wrap_future(f)`` (one thread-safe loop wakeup when it completes),
    - ``await f`` inside a running event loop (the same, through wrap_future).

    ``cancel()`` returns False: a record handed to the producer is not taken back.
    ``set_result``/``set_exception`` raise: only the producer completes it.
    For many records awaited by asyncio code, ``kproducer.aio.AsyncProducer``
    delivers completions to the loop in batches instead of one wakeup each.
    The record's fields and constructor are :class:`FutureRecordMetadata`'s; ``_next``
    is set when the record moved to another batch (split).
    """

    # Unset (no object) until concurrent.futures waits on this future.
    __slots__ = ("_stdlib_waiters",)

    @classmethod
    def failed(cls, topic_partition: TopicPartition, error: BaseException) -> RecordFuture:
        """A future that failed before its record reached a batch (Java's FutureFailure)."""
        result = ProduceRequestResult(topic_partition)
        result.set(NO_OFFSET, NO_TIMESTAMP, lambda _index: error)
        result.done()
        return cls(result, 0, NO_TIMESTAMP, -1, -1)

    # ------------------------------------------------------------------ chaining (split)
    def chain(self, future: RecordFuture) -> None:
        """Follow ``future`` from now on; a future chained twice follows the end of the chain."""
        if self._next is None:
            self._next = future
        else:
            self._next.chain(future)

    @property
    def chained(self) -> RecordFuture | None:
        """The future of this record in the batch it moved to (looking at a split), or None."""
        return self._forward()

    @property
    def next_future(self) -> RecordFuture | None:
        """The future this one follows as set so far (by chain() or an earlier look at a split), without looking."""
        return self._next

    @property
    def batch_result(self) -> ProduceRequestResult:
        """The result of the batch this future's record was appended to (before any move)."""
        return self._batch_result

    def _forward(self) -> RecordFuture | None:
        """The future of this record in the batch it was split into, or None (it was not moved)."""
        nxt = self._next
        if nxt is None:
            moved = self._batch_result.moved
            if moved is not None:
                result, relative_offset = moved[self.relative_offset]
                nxt = self._next = RecordFuture(
                    result, relative_offset, self.create_timestamp, self.serialized_key_size, self.serialized_value_size
                )
        return nxt

    # ------------------------------------------------------------------ state
    def done(self) -> bool:
        if not self._batch_result.completed:
            return False
        nxt = self._forward()
        return True if nxt is None else nxt.done()

    def cancelled(self) -> bool:
        """A produced record cannot be cancelled (as in Java's FutureRecordMetadata)."""
        return False

    def cancel(self) -> bool:
        return False

    def running(self) -> bool:
        return not self.done()

    def _wait(self, timeout: float | None) -> RecordFuture:
        """Wait for this future and its chain; the future that holds the final outcome."""
        deadline = None if timeout is None else time.monotonic() + timeout
        fut = self
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            # The outcome is final once completed (a done-callback may read it while the latch is still shut).
            if not fut.batch_result.completed:
                if on_callback_thread():
                    raise IllegalStateError(
                        f"result() of a pending record of {fut.batch_result.topic_partition} called from a delivery "
                        "callback would deadlock: callbacks run on the producer's I/O thread, which completes that "
                        "record only after the callback returns. Use the callback's own arguments, or wait on "
                        "another thread"
                    )
                if not fut.batch_result.await_(remaining):
                    raise KafkaTimeoutError(f"Timeout after waiting for {timeout * 1000 if timeout else 0:.0f} ms.")
            nxt = fut.chained
            if nxt is None:
                return fut
            fut = nxt

    def _metadata(self) -> RecordMetadata:
        r = self._batch_result
        offset = NO_OFFSET if r.base_offset == NO_OFFSET else r.base_offset + self.relative_offset
        timestamp = r.log_append_time if r.log_append_time != NO_TIMESTAMP else self.create_timestamp
        tp = r.topic_partition
        return metadata_type(r.log_append_time)(
            tp.topic, tp.partition, offset, timestamp, self.serialized_key_size, self.serialized_value_size
        )

    def value(self) -> RecordMetadata:
        """The metadata of a completed record (follows the chain); call once its batch's result is set."""
        nxt = self._forward()
        if nxt is not None:
            return nxt.value()
        return self._metadata()

    def record_error(self) -> BaseException | None:
        """The record's exception once completed (follows the chain)."""
        nxt = self._forward()
        if nxt is not None:
            return nxt.record_error()
        return self._batch_result.error_at(self.relative_offset)

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """The record's metadata; raises the record's exception, or KafkaTimeoutError after ``timeout`` s."""
        fut = self._wait(timeout)
        err = fut.record_error()
        if err is not None:
            raise err
        return fut.value()

    get = result

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The record's exception (None on success); KafkaTimeoutError after ``timeout`` s."""
        fut = self._wait(timeout)
        return fut.record_error()

    def add_done_callback(self, fn: Callable[[RecordFuture], Any]) -> None:
        """Call ``fn(self)`` once the record is complete (at once if it already is)."""

        def fire() -> None:
            nxt = self._forward()
            if nxt is not None:
                # The record moved to a split batch: wait for that one instead.
                nxt.add_done_callback(lambda _f: fn(self))
            else:
                fn(self)

        if not self._batch_result.add_callback(fire):
            try:
                fire()
            except Exception:
                log.exception("error in a future done-callback for %s", self._batch_result.topic_partition)

    # ------------------------------------------------------------------ standard-library interop
    def _stdlib_waiter_list(self) -> _StdlibWaiters:
        """The waiter list concurrent.futures uses, made (and hooked to completion) on first use."""
        with _STDLIB_CONDITION:
            waiters: _StdlibWaiters | None = getattr(self, "_stdlib_waiters", None)
            if waiters is not None:
                return waiters
            waiters = self._stdlib_waiters = _StdlibWaiters()

        def notify(fut: RecordFuture) -> None:
            failed = fut.record_error() is not None
            with _STDLIB_CONDITION:
                waiters.notified = True
                for waiter in list(waiters):
                    if failed:
                        waiter.add_exception(fut)
                    else:
                        waiter.add_result(fut)
                _STDLIB_CONDITION.notify_all()

        self.add_done_callback(notify)
        return waiters

    if not TYPE_CHECKING:  # the base declares these as plain attributes; here they are computed

        @property
        def _condition(self) -> threading.Condition:
            return _STDLIB_CONDITION

        @property
        def _state(self) -> str:
            # FINISHED only once the waiters were told (see _StdlibWaiters); callers hold _condition.
            return _FINISHED if self._stdlib_waiter_list().notified else _PENDING

        @property
        def _waiters(self) -> _StdlibWaiters:
            return self._stdlib_waiter_list()

    def set_running_or_notify_cancel(self) -> bool:
        return True

    def set_result(self, result: Any) -> None:
        raise TypeError("a RecordFuture is completed by its producer, not by set_result()")

    def set_exception(self, exception: BaseException | None) -> None:
        raise TypeError("a RecordFuture is completed by its producer, not by set_exception()")

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        """``await future`` inside a running loop: one thread-safe wakeup when the record completes."""
        if not self.done():
            import asyncio

            yield from asyncio.wrap_future(self).__await__()
        return self.result()

    def __repr__(self) -> str:
        state = "done" if self.done() else "pending"
        return f"RecordFuture({self._batch_result.topic_partition}, relative_offset={self.relative_offset}, {state})"
