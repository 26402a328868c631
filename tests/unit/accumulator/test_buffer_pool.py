"""BufferPool, as Java's BufferPool behaves: fast path, non-pooled memory, FIFO waiters, no leaks."""

from __future__ import annotations

import sys
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kproducer.accumulator.buffer_pool import BufferPool
from kproducer.errors import BufferExhaustedError, ProducerClosedError
from tests.support.clock import FakeClock
from tests.support.latch import LATCH_S, wait_until
from tests.support.sensors import RecordingMetrics

POOLABLE = 256


class Allocator(threading.Thread):
    """Runs one blocking allocate() and keeps its outcome."""

    def __init__(self, pool: BufferPool, size: int, max_block_ms: int) -> None:
        super().__init__(daemon=True)
        self.pool = pool
        self.size = size
        self.max_block_ms = max_block_ms
        self.buffer: bytearray | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.buffer = self.pool.allocate(self.size, self.max_block_ms)
        except BaseException as e:  # noqa: BLE001 - kept for the assertion
            self.error = e


def test_fast_path_reuses_the_same_poolable_buffer() -> None:
    pool = BufferPool(4 * POOLABLE, POOLABLE)
    buf = pool.allocate(POOLABLE, 0)
    assert len(buf) == POOLABLE
    assert pool.available_memory() == 3 * POOLABLE
    pool.deallocate(buf)
    assert pool.available_memory() == 4 * POOLABLE
    assert pool.unallocated_memory() == 3 * POOLABLE  # one buffer now lives on the free list
    assert pool.free_size() == 1
    again = pool.allocate(POOLABLE, 0)
    assert again is buf
    pool.deallocate(again)
    assert pool.available_memory() == pool.total_memory


def test_non_poolable_sizes_come_from_and_return_to_non_pooled_memory() -> None:
    pool = BufferPool(4 * POOLABLE, POOLABLE)
    big = pool.allocate(POOLABLE + 10, 0)
    small = pool.allocate(10, 0)
    assert pool.available_memory() == 4 * POOLABLE - POOLABLE - 20
    pool.deallocate(big)
    pool.deallocate(small)
    assert pool.free_size() == 0  # never pooled
    assert pool.unallocated_memory() == pool.available_memory() == 4 * POOLABLE


def test_free_up_turns_pooled_buffers_back_into_non_pooled_memory() -> None:
    pool = BufferPool(4 * POOLABLE, POOLABLE)
    bufs = [pool.allocate(POOLABLE, 0) for _ in range(4)]
    for b in bufs:
        pool.deallocate(b)
    assert pool.free_size() == 4 and pool.unallocated_memory() == 0
    big = pool.allocate(3 * POOLABLE, 0)
    assert len(big) == 3 * POOLABLE
    assert pool.free_size() == 1
    assert pool.available_memory() == POOLABLE
    pool.deallocate(big)
    assert pool.available_memory() == 4 * POOLABLE


def test_a_grown_poolable_buffer_is_not_pooled_and_still_accounted() -> None:
    pool = BufferPool(2 * POOLABLE, POOLABLE)
    buf = pool.allocate(POOLABLE, 0)
    buf.extend(b"x" * 10)  # a builder that grew past batch.size
    pool.deallocate(buf, POOLABLE)
    assert pool.free_size() == 0
    assert pool.available_memory() == 2 * POOLABLE


def test_an_exported_buffer_is_not_pooled() -> None:
    pool = BufferPool(2 * POOLABLE, POOLABLE)
    buf = pool.allocate(POOLABLE, 0)
    view = memoryview(buf)  # a request still reading the batch bytes
    pool.deallocate(buf)
    assert pool.free_size() == 0
    assert pool.available_memory() == 2 * POOLABLE
    view.release()


def test_a_pooled_buffer_keeps_its_allocation() -> None:
    # The export check must not resize the buffer: CPython keeps a grown bytearray's larger
    # allocation, which would make every pooled buffer hold more memory than buffer.memory counts.
    pool = BufferPool(2 * POOLABLE, POOLABLE)
    buf = pool.allocate(POOLABLE, 0)
    buf[:] = bytes(range(256))
    allocated = sys.getsizeof(buf)  # the object plus its allocation (ob_alloc)
    pool.deallocate(buf)
    assert pool.free_size() == 1
    assert sys.getsizeof(buf) == allocated
    assert buf == bytes(range(256))  # the byte taken off to check is back
    assert pool.allocate(POOLABLE, 0) is buf


def test_size_above_buffer_memory_is_rejected_naming_the_config() -> None:
    pool = BufferPool(1000, 100)
    with pytest.raises(ValueError, match=r"buffer\.memory"):
        pool.allocate(1001, 10)
    assert pool.available_memory() == 1000


def test_timeout_message_says_what_was_waited_for_and_returns_partial_memory() -> None:
    metrics = RecordingMetrics()
    pool = BufferPool(4 * POOLABLE, POOLABLE, metrics=metrics)
    held = [pool.allocate(POOLABLE, 0) for _ in range(3)]
    t0 = time.monotonic()
    with pytest.raises(BufferExhaustedError) as info:
        pool.allocate(2 * POOLABLE, 40)
    assert time.monotonic() - t0 >= 0.035
    msg = str(info.value)
    assert f"Failed to allocate {2 * POOLABLE} bytes" in msg
    assert "40 ms" in msg
    assert f"Total memory: {4 * POOLABLE} bytes" in msg
    assert "Available memory: " in msg
    assert pool.queued() == 0
    # The waiter took the free POOLABLE bytes while waiting; they came back on timeout.
    assert pool.available_memory() == POOLABLE
    assert metrics.sensors["buffer-exhausted-records"].values == [1.0]
    assert metrics.sensors["bufferpool-wait-time"].values and metrics.sensors["bufferpool-wait-time"].values[0] > 0
    for b in held:
        pool.deallocate(b)
    assert pool.available_memory() == pool.total_memory


def test_zero_block_time_fails_at_once() -> None:
    """max.block.ms=0 never joins the waiters: a helper frees the memory the moment anyone waits
    for it, so an allocate that waited would get the buffer instead of failing."""
    pool = BufferPool(POOLABLE, POOLABLE)
    held = pool.allocate(POOLABLE, 0)
    done = threading.Event()

    def free_when_someone_waits() -> None:
        wait_until(lambda: pool.queued() > 0 or done.is_set())
        if not done.is_set():
            pool.deallocate(held)

    helper = threading.Thread(target=free_when_someone_waits, daemon=True)
    helper.start()
    try:
        with pytest.raises(BufferExhaustedError):
            pool.allocate(POOLABLE, 0)
    finally:
        done.set()
        helper.join()
    pool.deallocate(held)
    assert pool.available_memory() == POOLABLE


def test_waiters_are_served_first_in_first_out() -> None:
    pool = BufferPool(2 * POOLABLE, POOLABLE)
    held = [pool.allocate(POOLABLE, 0) for _ in range(2)]
    first = Allocator(pool, POOLABLE, 5000)
    first.start()
    wait_until(lambda: pool.queued() == 1)
    second = Allocator(pool, POOLABLE, 5000)
    second.start()
    wait_until(lambda: pool.queued() == 2)

    pool.deallocate(held[0])
    first.join(5)
    assert not first.is_alive() and first.error is None
    assert first.buffer is held[0]  # the pooled buffer went to the first waiter
    # Nothing left for the second: it is still queued (the pool's own state, no sleep needed).
    assert pool.queued() == 1 and pool.available_memory() == 0 and second.is_alive()

    pool.deallocate(held[1])
    second.join(5)
    assert second.error is None and second.buffer is held[1]
    assert first.buffer is not None and second.buffer is not None
    pool.deallocate(first.buffer)
    pool.deallocate(second.buffer)
    assert pool.available_memory() == pool.total_memory


def test_a_waiter_accumulates_memory_piece_by_piece() -> None:
    pool = BufferPool(4 * POOLABLE, POOLABLE)
    held = [pool.allocate(POOLABLE, 0) for _ in range(4)]
    waiter = Allocator(pool, 3 * POOLABLE, 5000)
    waiter.start()
    wait_until(lambda: pool.queued() == 1)
    pool.deallocate(held[0])
    # The waiter took those bytes (partial accumulation) and waits for the rest.
    wait_until(lambda: pool.available_memory() == 0)
    assert waiter.is_alive()
    pool.deallocate(held[1])
    wait_until(lambda: pool.available_memory() == 0)
    assert waiter.is_alive()
    pool.deallocate(held[2])
    waiter.join(5)
    assert waiter.error is None and waiter.buffer is not None and len(waiter.buffer) == 3 * POOLABLE
    pool.deallocate(waiter.buffer)
    pool.deallocate(held[3])
    assert pool.available_memory() == pool.total_memory


def test_a_big_waiter_at_the_head_passes_leftover_memory_on() -> None:
    """After the head waiter is served, any memory left wakes the next one (the allocate finally block)."""
    pool = BufferPool(4 * POOLABLE, POOLABLE)
    big = pool.allocate(4 * POOLABLE, 0)
    a = Allocator(pool, 2 * POOLABLE, 5000)
    a.start()
    wait_until(lambda: pool.queued() == 1)
    b = Allocator(pool, POOLABLE, 5000)
    b.start()
    wait_until(lambda: pool.queued() == 2)
    pool.deallocate(big)  # one signal, to the head waiter
    a.join(5)
    b.join(5)
    assert a.error is None and b.error is None
    assert a.buffer is not None and b.buffer is not None
    pool.deallocate(a.buffer)
    pool.deallocate(b.buffer)
    assert pool.available_memory() == pool.total_memory


def test_close_wakes_every_waiter_who_raises_and_nothing_leaks() -> None:
    pool = BufferPool(2 * POOLABLE, POOLABLE)
    held = [pool.allocate(POOLABLE, 0) for _ in range(2)]
    # Budgets far beyond the join's guard: a waiter that close() did not wake is still blocked then.
    waiters = [Allocator(pool, POOLABLE, 3_600_000), Allocator(pool, 2 * POOLABLE, 3_600_000)]
    for w in waiters:
        w.start()
    wait_until(lambda: pool.queued() == 2)
    pool.close()
    for w in waiters:
        w.join(LATCH_S)
        assert not w.is_alive(), "close() did not wake a waiter"
        assert isinstance(w.error, ProducerClosedError)
    assert pool.queued() == 0
    with pytest.raises(ProducerClosedError):
        pool.allocate(10, 0)
    for b in held:
        pool.deallocate(b)
    assert pool.available_memory() == pool.total_memory


def test_injected_clock_measures_the_wait() -> None:
    clock = FakeClock(1000)
    metrics = RecordingMetrics()
    pool = BufferPool(POOLABLE, POOLABLE, clock_ms=clock, metrics=metrics)
    held = pool.allocate(POOLABLE, 0)
    waiter = Allocator(pool, POOLABLE, 5000)
    waiter.start()
    wait_until(lambda: pool.queued() == 1)
    clock.advance(7)
    pool.deallocate(held)
    waiter.join(5)
    assert waiter.buffer is held
    assert metrics.sensors["bufferpool-wait-time"].values == [7_000_000.0]
    pool.deallocate(waiter.buffer)


# ---------------------------------------------------------------------- property: no leak on any path
_ops = st.lists(
    st.one_of(
        st.tuples(st.just("alloc"), st.sampled_from([POOLABLE, POOLABLE, 64, 300, 3 * POOLABLE])),
        st.tuples(st.just("free"), st.integers(0, 7)),
        st.tuples(st.just("wait"), st.sampled_from([POOLABLE, 500, 4 * POOLABLE])),
    ),
    max_size=25,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_ops, close_at_end=st.booleans())
def test_available_memory_always_returns_to_total(ops: list[tuple[str, int]], close_at_end: bool) -> None:
    total = 4 * POOLABLE
    pool = BufferPool(total, POOLABLE)
    held: list[bytearray] = []
    waiters: list[Allocator] = []
    for op, arg in ops:
        if op == "alloc":
            try:
                held.append(pool.allocate(arg, 0))
            except BufferExhaustedError:
                pass
        elif op == "free":
            if held:
                pool.deallocate(held.pop(arg % len(held)))
        else:
            w = Allocator(pool, arg, 30)
            w.start()
            waiters.append(w)
            # Give the waiter a chance to queue, then feed it some memory half of the time.
            time.sleep(0.002)
            if held and arg % 2 == 0:
                pool.deallocate(held.pop(0))
        # The invariant holds at every step: what is out plus what is free is the total.
        out = sum(len(b) for b in held)
        assert pool.available_memory() + out <= total
    if close_at_end:
        pool.close()
    for w in waiters:
        w.join(5)
        assert not w.is_alive()
        if w.buffer is not None:
            held.append(w.buffer)
        else:
            assert isinstance(w.error, BufferExhaustedError | ProducerClosedError)
    for b in held:
        pool.deallocate(b)
    assert pool.queued() == 0
    assert pool.available_memory() == total


# ---------------------------------------------------------------------- reserve / release (records waiting for metadata)
@given(st.lists(st.tuples(st.booleans(), st.integers(min_value=0, max_value=3 * POOLABLE)), max_size=30))
@settings(max_examples=60, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_reserve_and_release_keep_the_accounting(ops: list[tuple[bool, int]]) -> None:
    pool = BufferPool(4 * POOLABLE, POOLABLE)
    charged: list[int] = []
    buffers: list[bytearray] = []
    for is_reserve, size in ops:
        free = pool.available_memory()
        if is_reserve and size <= free:
            pool.reserve(size, 0)
            charged.append(size)
        elif not is_reserve and size <= free:
            buffers.append(pool.allocate(size, 0))
        elif charged:
            pool.release(charged.pop())
        held = sum(charged) + sum(len(b) for b in buffers)
        assert pool.available_memory() + held == 4 * POOLABLE
    for size in charged:
        pool.release(size)
    for b in buffers:
        pool.deallocate(b)
    assert pool.available_memory() == 4 * POOLABLE


def test_reserve_waits_for_memory_and_fails_after_max_block() -> None:
    pool = BufferPool(2 * POOLABLE, POOLABLE)
    pool.reserve(2 * POOLABLE, 0)
    with pytest.raises(BufferExhaustedError):
        pool.reserve(10, 50)
    got = threading.Event()
    t = threading.Thread(target=lambda: (pool.reserve(POOLABLE, 5000), got.set()))
    t.start()
    wait_until(lambda: pool.queued() == 1)
    assert not got.is_set()
    pool.release(POOLABLE)  # a parked record was appended or failed: its charge comes back
    t.join(5)
    assert got.is_set() and pool.available_memory() == 0


def test_try_allocate_answers_at_once_and_charges_nothing_when_memory_is_short() -> None:
    """The non-blocking allocation of a caller that may not wait (an event loop): a buffer or None."""
    pool = BufferPool(3 * 1024, 1024)
    held = [pool.allocate(1024, 10), pool.allocate(1500, 10)]
    assert pool.available_memory() == 548
    assert pool.try_allocate(1024) is None, "548 bytes free: a 1024-byte buffer is not there"
    assert pool.try_allocate(600) is None
    assert pool.available_memory() == 548, "a refused try charged nothing"
    assert pool.queued() == 0, "a refused try never joins the waiters"
    small = pool.try_allocate(500)
    assert small is not None and len(small) == 500
    assert pool.available_memory() == 48
    pool.deallocate(held[0])  # a poolable buffer back on the free list
    reused = pool.try_allocate(1024)
    assert reused is held[0], "the pooled buffer is handed out again, as allocate() does"
    pool.deallocate(reused)
    pool.deallocate(held[1])
    pool.deallocate(small)
    assert pool.available_memory() == 3 * 1024


def test_try_reserve_charges_only_when_memory_is_there() -> None:
    pool = BufferPool(2048, 1024)
    assert pool.try_reserve(1500)
    assert pool.available_memory() == 548
    assert not pool.try_reserve(600)
    assert not pool.try_reserve(1024), "the poolable size takes the allocate() path: refused too"
    assert pool.available_memory() == 548 and pool.queued() == 0
    pool.release(1500)
    assert pool.try_reserve(1024)
    assert pool.available_memory() == 1024


def test_try_allocate_raises_as_allocate_does_for_impossible_sizes_and_a_closed_pool() -> None:
    pool = BufferPool(1024, 512)
    with pytest.raises(ValueError, match="buffer.memory"):
        pool.try_allocate(2048)
    with pytest.raises(ValueError, match="buffer.memory"):
        pool.try_reserve(2048)
    pool.close()
    with pytest.raises(ProducerClosedError):
        pool.try_allocate(100)
    with pytest.raises(ProducerClosedError):
        pool.try_reserve(100)


def test_a_blocking_allocate_still_waits_while_try_allocate_is_refused() -> None:
    """Same pressure, two callers: the thread waits (max.block.ms) for the memory a try was refused."""
    pool = BufferPool(1024, 512)
    held = pool.allocate(1024, 10)
    assert pool.try_allocate(512) is None
    got: list[bytearray] = []
    waiter = threading.Thread(target=lambda: got.append(pool.allocate(512, 600_000)))
    waiter.start()
    wait_until(lambda: pool.queued() == 1, "the blocking allocate joins the waiters")
    assert not got and waiter.is_alive(), "it waits for memory"
    assert pool.try_allocate(512) is None, "a try under the same pressure is still refused, at once"
    pool.deallocate(held)
    waiter.join(LATCH_S)
    assert not waiter.is_alive() and len(got[0]) == 512
