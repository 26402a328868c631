"""``kproducer._speedups.Lock`` (the lock the C send lane takes from C) against its twin ``threading.Lock``.

Each case runs on both types and expects the same results and the same exception types. The
native type is part of the C extension: its cases run in the native pass, where a missing
extension fails them; the pure-Python pass has no native lock (:func:`test_new_lock_follows_the_pass`).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Callable
from typing import Any

import pytest

from kproducer.record import native

PURE = os.environ.get("KPRODUCER_PURE_PYTHON", "").strip() not in ("", "0")
native_only = pytest.mark.skipif(PURE, reason="the pure-Python pass has no native lock (test_new_lock_follows_the_pass)")


def _native_lock() -> Any:
    assert native.c is not None, "the C extension kproducer._speedups is not built: run `make test` to build it"
    return native.c.Lock()


LOCKS = [
    pytest.param(threading.Lock, id="threading"),
    pytest.param(_native_lock, id="native", marks=native_only),
]


@pytest.mark.parametrize("new", LOCKS)
def test_acquire_release_locked(new: Callable[[], Any]) -> None:
    lock = new()
    assert lock.locked() is False
    assert lock.acquire() is True
    assert lock.locked() is True
    assert lock.acquire(False) is False
    assert lock.acquire(blocking=False) is False
    assert lock.acquire(True, 0) is False
    assert lock.acquire(timeout=0.01) is False  # held: the timed wait ends without it
    assert lock.locked() is True
    assert lock.release() is None
    assert lock.locked() is False
    assert lock.acquire(blocking=False) is True
    lock.release()
    assert lock.acquire(timeout=0.5) is True
    lock.release()
    assert lock.acquire(True, -1) is True
    lock.release()
    with pytest.raises(RuntimeError, match="release unlocked lock"):
        lock.release()


@pytest.mark.parametrize("new", LOCKS)
def test_context_manager(new: Callable[[], Any]) -> None:
    lock = new()
    with lock as entered:
        assert entered is True and lock.locked()
    assert not lock.locked()
    with pytest.raises(KeyError), lock:
        raise KeyError("x")
    assert not lock.locked()


@pytest.mark.parametrize("new", LOCKS)
def test_a_lock_released_by_another_thread(new: Callable[[], Any]) -> None:
    """Not owned by a thread, as threading.Lock: another thread may release it and wake a waiter."""
    lock = new()
    lock.acquire()
    waiting, got = threading.Event(), []

    def waiter() -> None:
        waiting.set()
        got.append(lock.acquire())
        lock.release()

    t = threading.Thread(target=waiter)
    t.start()
    assert waiting.wait(60)
    releaser = threading.Thread(target=lock.release)
    releaser.start()
    releaser.join(60)
    t.join(60)
    assert got == [True] and not lock.locked()


BAD_ARGUMENTS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((), {"blocking": False, "timeout": 1}),
    ((False, 0), {}),
    ((), {"timeout": -2}),
    ((), {"timeout": -0.5}),
    ((), {"timeout": "1"}),
    ((), {"timeout": None}),
    ((), {"timeout": math.nan}),
    ((), {"timeout": 1e300}),
    ((True, 1, 2), {}),
    ((), {"wait": True}),
]


@pytest.mark.parametrize(("args", "kwargs"), BAD_ARGUMENTS)
@native_only
def test_bad_arguments_raise_what_threading_lock_raises(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    errors = []
    locks: tuple[Any, Any] = (threading.Lock(), _native_lock())
    for lock in locks:
        with pytest.raises(Exception) as info:
            lock.acquire(*args, **kwargs)
        errors.append(type(info.value))
        assert not lock.locked()
    assert errors[0] is errors[1], f"acquire(*{args}, **{kwargs}): threading.Lock raises {errors[0]}, native {errors[1]}"


@native_only
def test_the_same_messages_for_the_errors_users_see() -> None:
    for args, kwargs in [((), {"blocking": False, "timeout": 1}), ((), {"timeout": -2})]:
        messages = []
        for lock in (threading.Lock(), _native_lock()):
            with pytest.raises(ValueError) as info:
                lock.acquire(*args, **kwargs)
            messages.append(str(info.value))
        assert messages[0] == messages[1]


@pytest.mark.parametrize("new", LOCKS)
def test_contention_loses_no_increment(new: Callable[[], Any]) -> None:
    """Several threads increment one counter under the lock, each a read, a hand-off of the GIL
    and a write: without mutual exclusion increments are lost."""
    lock = new()
    counter = [0]
    threads_n, rounds = 4, 2000
    go = threading.Barrier(threads_n)

    def worker() -> None:
        go.wait()
        for i in range(rounds):
            if i % 2:
                with lock:
                    value = counter[0]
                    os.sched_yield()
                    counter[0] = value + 1
            else:
                lock.acquire()
                try:
                    value = counter[0]
                    os.sched_yield()
                    counter[0] = value + 1
                finally:
                    lock.release()

    workers = [threading.Thread(target=worker) for _ in range(threads_n)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(120)
    assert counter[0] == threads_n * rounds
    assert not lock.locked()


def test_new_lock_follows_the_pass() -> None:
    """new_lock() gives the native Lock in the native pass and threading.Lock in the pure pass."""
    lock = native.new_lock()
    if PURE:
        assert native.c is None and type(lock) is type(threading.Lock())
    else:
        assert native.c is not None, "the C extension kproducer._speedups is not built: run `make test` to build it"
        assert type(lock) is native.c.Lock
