"""The BufferPool: ``buffer.memory`` bytes handed out as batch buffers (Java's ``BufferPool``).

Only buffers of exactly ``batch.size`` (the poolable size) are kept for reuse on
a free list; any other size is carved out of the non-pooled memory and simply
dropped on ``deallocate`` (its bytes go back to the non-pooled count). When
there is not enough memory, the caller joins a FIFO queue of waiters, each with
its own Condition on the pool lock, and accumulates memory piece by piece as
other threads give it back, up to ``max.block.ms``. A caller that must never
block (the asyncio facade's event loop) asks with :meth:`BufferPool.try_allocate`
or :meth:`BufferPool.try_reserve` instead, which answer at once and charge nothing
when the memory is not there; the pool does not need to know who calls. The invariant is

    available_memory() == non_pooled_available + len(free) * poolable_size

plus whatever is currently handed out, which always adds up to ``total_memory``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Protocol

from kproducer.errors import BufferExhaustedError, ProducerClosedError

__all__ = ["BufferPool", "MetricsLike", "SensorLike"]

log = logging.getLogger(__name__)


class SensorLike(Protocol):
    """What the pool and the accumulator need of a metrics sensor."""

    def record(self, value: float = 1.0, now_ms: int | None = None) -> None: ...

    def record_each(self, values: Sequence[float], now_ms: int | None = None) -> None: ...


class MetricsLike(Protocol):
    """The slice of ``kproducer.metrics.Metrics`` used here: named sensors."""

    def sensor(self, name: str) -> SensorLike: ...


def _exported(buffer: bytearray) -> bool:
    """Whether a memoryview still reads the buffer (a request not yet garbage): then it must not be reused.

    A bytearray with exports refuses any resize, so the check is one: a byte taken off the end
    and put back. Shrinking first keeps the allocation as it is; growing first (an append, then
    a pop) makes CPython reallocate the buffer an eighth larger, which it keeps, and every pooled
    buffer would then hold that much memory ``buffer.memory`` does not count.
    """
    if not buffer:
        return False  # no byte a reader could see change (and nothing to take off)
    try:
        last = buffer.pop()
    except BufferError:
        return True
    buffer.append(last)
    return False


class BufferPool:
    """A pool of ``bytearray`` batch buffers bounded by ``total_memory`` (Java's ``BufferPool``).

    ``clock_ms`` measures how long a waiter blocked (for its remaining budget and
    the ``bufferpool-wait-time`` sensor); the blocking itself is a real
    ``Condition.wait`` so that a caller never waits past ``max_time_to_block_ms``.
    """

    def __init__(
        self,
        total_memory: int,
        poolable_size: int,
        clock_ms: Callable[[], int] | None = None,
        metrics: MetricsLike | None = None,
    ) -> None:
        if total_memory < 0:
            raise ValueError(f"buffer.memory must be >= 0, got {total_memory}")
        if poolable_size <= 0:
            raise ValueError(f"batch.size must be > 0, got {poolable_size}")
        self._total_memory = total_memory
        self._poolable_size = poolable_size
        self._lock = threading.Lock()
        self._free: deque[bytearray] = deque()
        self._waiters: deque[threading.Condition] = deque()
        self._non_pooled_available_memory = total_memory
        self._closed = False
        # An event-loop facade waits for memory without a thread: it counts as a waiter for
        # ready() (memory is exhausted: send without lingering) and is told when memory returns.
        self._external_waiters = 0
        self._free_listener: Callable[[], None] | None = None
        if clock_ms is None:
            self._now_ns: Callable[[], int] = time.monotonic_ns
        else:
            ms = clock_ms
            self._now_ns = lambda: ms() * 1_000_000
        self._wait_time_sensor: SensorLike | None = None
        self._exhausted_sensor: SensorLike | None = None
        if metrics is not None:
            # bufferpool-wait-time-ns-total and buffer-exhausted-rate hang off these sensors.
            self._wait_time_sensor = metrics.sensor("bufferpool-wait-time")
            self._exhausted_sensor = metrics.sensor("buffer-exhausted-records")

    # ------------------------------------------------------------------ properties
    @property
    def total_memory(self) -> int:
        return self._total_memory

    @property
    def poolable_size(self) -> int:
        return self._poolable_size

    # ------------------------------------------------------------------ allocate
    def allocate(self, size: int, max_time_to_block_ms: int) -> bytearray:
        """A buffer of ``size`` bytes, blocking up to ``max_time_to_block_ms`` for memory.

        Raises ``ValueError`` when ``size`` exceeds ``buffer.memory`` (it could
        never be satisfied), ``BufferExhaustedError`` when the wait runs out and
        ``ProducerClosedError`` when the pool is closed before or during the wait.
        """
        buffer = self._allocate(size, max_time_to_block_ms)
        assert buffer is not None  # only a call that may not wait gets None
        return buffer

    def _allocate(self, size: int, max_time_to_block_ms: int | None) -> bytearray | None:
        """:meth:`allocate`; with ``max_time_to_block_ms`` None, None instead of waiting (:meth:`try_allocate`)."""
        if size > self._total_memory:
            raise ValueError(
                f"Attempt to allocate {size} bytes, but there is a hard limit of {self._total_memory} "
                f"on memory allocations (buffer.memory)"
            )
        if size < 0:
            raise ValueError(f"Attempt to allocate a negative size ({size} bytes)")
        buffer: bytearray | None = None
        lock = self._lock
        lock.acquire()  # not ``with`` (docs/architecture.md, "Locks on the record path")
        try:
            if self._closed:
                raise ProducerClosedError("Producer closed while allocating memory")
            try:
                # Fast path: a pooled buffer of exactly the poolable size.
                if size == self._poolable_size and self._free:
                    return self._free.popleft()
                free_list_size = len(self._free) * self._poolable_size
                if self._non_pooled_available_memory + free_list_size >= size:
                    # Enough memory without waiting: shrink the free list if needed.
                    if self._non_pooled_available_memory < size:
                        self._free_up(size)
                    self._non_pooled_available_memory -= size
                elif max_time_to_block_ms is None:
                    return None
                else:
                    buffer = self._wait_for_memory(size, max_time_to_block_ms)
            finally:
                # Pass the baton: there is memory left, so let the next waiter try.
                if not (self._non_pooled_available_memory == 0 and not self._free) and self._waiters:
                    self._waiters[0].notify()
        finally:
            lock.release()
        if buffer is not None:
            return buffer
        # Made outside the lock (Java's safeAllocateByteBuffer): if making it fails, the memory
        # charged above goes back and the next waiter is woken.
        try:
            return bytearray(size)
        except BaseException:
            with lock:
                self._non_pooled_available_memory += size
                if self._waiters:
                    self._waiters[0].notify()
            raise

    def reserve(self, size: int, max_time_to_block_ms: int) -> None:
        """Charge ``size`` bytes to ``buffer.memory`` without making a buffer, blocking like :meth:`allocate`.

        Records held while their topic has no metadata are counted this way, so that
        ``buffer.memory`` bounds everything the producer holds; :meth:`release` gives
        the bytes back.
        """
        self._reserve(size, max_time_to_block_ms)

    def _reserve(self, size: int, max_time_to_block_ms: int | None) -> bool:
        """:meth:`reserve`; with ``max_time_to_block_ms`` None, False instead of waiting (:meth:`try_reserve`)."""
        if size == self._poolable_size or size > self._total_memory or size < 0:
            # A pooled buffer's bytes stay charged and the object is dropped; a bad size raises.
            return self._allocate(size, max_time_to_block_ms) is not None
        with self._lock:
            if self._closed:
                raise ProducerClosedError("Producer closed while allocating memory")
            try:
                if self._non_pooled_available_memory + len(self._free) * self._poolable_size >= size:
                    self._free_up(size)
                    self._non_pooled_available_memory -= size
                elif max_time_to_block_ms is None:
                    return False
                else:
                    pooled = self._wait_for_memory(size, max_time_to_block_ms)
                    del pooled  # a whole pooled buffer of this size: its bytes are the charge
                return True
            finally:
                if not (self._non_pooled_available_memory == 0 and not self._free) and self._waiters:
                    self._waiters[0].notify()

    def try_allocate(self, size: int) -> bytearray | None:
        """A buffer of ``size`` bytes if one is there now, else None: :meth:`allocate` that never waits.

        For a caller that must not block (an event loop): None when :meth:`allocate`
        would join the waiters, and then nothing was charged. Raises as :meth:`allocate`
        does for a size that can never be satisfied and for a closed pool.
        """
        return self._allocate(size, None)

    def try_reserve(self, size: int) -> bool:
        """:meth:`reserve` that never waits: False (nothing charged) when it would have to."""
        return self._reserve(size, None)

    def release(self, size: int) -> None:
        """Give back bytes charged by :meth:`reserve` (or by a buffer that was dropped)."""
        if size <= 0:
            return
        with self._lock:
            self._non_pooled_available_memory += size
            if self._waiters:
                self._waiters[0].notify()

    def _wait_for_memory(self, size: int, max_time_to_block_ms: int) -> bytearray | None:
        """Join the FIFO waiters and accumulate ``size`` bytes (lock held). Returns a pooled buffer or None."""
        accumulated = 0
        buffer: bytearray | None = None
        more_memory = threading.Condition(self._lock)
        remaining_ns = max(0, max_time_to_block_ms) * 1_000_000
        self._waiters.append(more_memory)
        try:
            while accumulated < size:
                start_ns = self._now_ns()
                real_start = time.monotonic_ns()
                try:
                    signalled = more_memory.wait(remaining_ns / 1e9) if remaining_ns > 0 else False
                finally:
                    waited_ns = max(0, self._now_ns() - start_ns)
                    if self._wait_time_sensor is not None:
                        self._wait_time_sensor.record(float(waited_ns))
                if self._closed:
                    raise ProducerClosedError("Producer closed while allocating memory")
                if not signalled:
                    if self._exhausted_sensor is not None:
                        self._exhausted_sensor.record()
                    raise BufferExhaustedError(
                        f"Failed to allocate {size} bytes within the configured max blocking time "
                        f"{max_time_to_block_ms} ms (max.block.ms). Total memory: {self._total_memory} bytes. "
                        f"Available memory: {self._available_memory_locked()} bytes. "
                        f"Poolable size: {self._poolable_size} bytes"
                    )
                # The injected clock may stand still (tests); real time always bounds the wait.
                real_waited_ns = max(0, time.monotonic_ns() - real_start)
                remaining_ns -= max(waited_ns, real_waited_ns)
                if accumulated == 0 and size == self._poolable_size and self._free:
                    # A whole pooled buffer came back: take it as is.
                    buffer = self._free.popleft()
                    accumulated = size
                else:
                    # Take what there is now and keep waiting for the rest.
                    self._free_up(size - accumulated)
                    got = min(size - accumulated, self._non_pooled_available_memory)
                    self._non_pooled_available_memory -= got
                    accumulated += got
            accumulated = 0
            return buffer
        finally:
            # On any failure give back the partial accumulation: nothing leaks.
            self._non_pooled_available_memory += accumulated
            self._waiters.remove(more_memory)

    def _free_up(self, size: int) -> None:
        """Release pooled buffers into non-pooled memory until ``size`` bytes are there (lock held)."""
        while self._free and self._non_pooled_available_memory < size:
            self._non_pooled_available_memory += len(self._free.pop())

    # ------------------------------------------------------------------ growth (KIP-782)
    def try_grow(self, size: int, keep_free: int = 0) -> bool:
        """Charge ``size`` more bytes to a batch that already holds memory, only if that needs no wait.

        KIP-782's expandable batches: an open batch's buffer grows as records keep
        arriving while its partition is hot. Growth is an optimisation, so it must
        never make anyone wait: it is refused while a caller is queued for memory,
        or when it would leave less than ``keep_free`` bytes available (the
        accumulator keeps four ``batch.size`` buffers' worth for new batches, so that growth
        stops well before ``allocate`` would have to block). The bytes come back
        with the batch's buffer, through :meth:`deallocate` with the batch's whole
        charged size.
        """
        if size <= 0:
            return size == 0
        with self._lock:
            if self._closed or self._waiters or self._external_waiters:  # asyncio senders waiting count too
                return False
            if self._available_memory_locked() - size < keep_free:
                return False
            self._free_up(size)
            self._non_pooled_available_memory -= size
            return True

    # ------------------------------------------------------------------ deallocate
    def deallocate(self, buffer: bytearray, size: int | None = None) -> None:
        """Give back ``size`` bytes (``len(buffer)`` when omitted) and wake the first waiter.

        A buffer of exactly the poolable size goes back on the free list; any other
        (including a pooled buffer that grew) is dropped and its ``size`` bytes
        return to non-pooled memory.
        """
        if size is None:
            size = len(buffer)
        lock = self._lock
        lock.acquire()  # not ``with`` (docs/architecture.md, "Locks on the record path")
        try:
            if size == self._poolable_size and len(buffer) == self._poolable_size and not _exported(buffer):
                self._free.append(buffer)
            else:
                self._non_pooled_available_memory += size
            if self._waiters:
                self._waiters[0].notify()
        finally:
            lock.release()
        listener = self._free_listener
        if listener is not None:
            listener()

    # ------------------------------------------------------------------ waiting without a thread
    def can_allocate_now(self, size: int) -> bool:
        """Would ``allocate(size)`` return without waiting? (No thread queued first, and the memory is there.)

        Called before every asyncio send: plenty of room (twice ``size``) is read
        without the lock, since memory only grows behind a caller's back unless
        other threads allocate too, which the margin covers.
        """
        if (
            not self._waiters
            and self._non_pooled_available_memory + len(self._free) * self._poolable_size >= 2 * size
        ):
            return True
        with self._lock:
            if self._closed or self._waiters:
                return self._closed
            if size == self._poolable_size and self._free:
                return True
            return self._available_memory_locked() >= size

    def set_free_listener(self, listener: Callable[[], None] | None) -> None:
        """Call ``listener()`` (on the thread that frees it) whenever memory returns, and on close."""
        self._free_listener = listener

    def add_external_waiter(self, delta: int) -> None:
        """A waiter outside the pool's queue starts (+1) or stops (-1) waiting for memory."""
        with self._lock:
            self._external_waiters += delta

    # ------------------------------------------------------------------ introspection
    def _available_memory_locked(self) -> int:
        return self._non_pooled_available_memory + len(self._free) * self._poolable_size

    def available_memory(self) -> int:
        """Free memory: non-pooled bytes plus the pooled buffers on the free list."""
        with self._lock:
            return self._available_memory_locked()

    def unallocated_memory(self) -> int:
        """Memory never turned into a pooled buffer (non-pooled bytes only)."""
        with self._lock:
            return self._non_pooled_available_memory

    def free_size(self) -> int:
        """Number of pooled buffers on the free list."""
        with self._lock:
            return len(self._free)

    def queued(self) -> int:
        """Callers waiting for memory (ready() treats > 0 as 'exhausted'), threads or event-loop tasks."""
        lock = self._lock
        lock.acquire()  # not ``with`` (docs/architecture.md, "Locks on the record path"): asked per new batch
        try:
            return len(self._waiters) + self._external_waiters
        finally:
            lock.release()

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """Refuse new allocations and wake every waiter, who then raises ProducerClosedError."""
        with self._lock:
            self._closed = True
            for waiter in self._waiters:
                waiter.notify()
        listener = self._free_listener
        if listener is not None:
            listener()

    def __repr__(self) -> str:
        return (
            f"BufferPool(total={self._total_memory}, poolable={self._poolable_size}, "
            f"available={self.available_memory()}, waiters={self.queued()})"
        )
