"""The producer's one clock: integer milliseconds from a monotonic source (and the wall clock records are stamped with).

Every timer (linger, retry backoff, delivery and request timeouts, metadata refresh, the circuit
breaker's windows) compares values of this clock, so they must all read the same one. Components
take the clock as a ``Callable[[], int]`` argument defaulting to :func:`monotonic_ms`, so tests
drive them with a fake clock instead.
"""

from __future__ import annotations

import time

__all__ = ["monotonic_ms", "wall_clock_ms"]


def monotonic_ms() -> int:
    """Milliseconds of ``time.monotonic_ns()``: exact integers, never going backwards."""
    return time.monotonic_ns() // 1_000_000


def wall_clock_ms() -> int:
    """Milliseconds since the epoch: a record's create time when send() is given none.

    Not for timers (it may jump); the producer takes it as a ``Callable[[], int]`` too, so that
    tests can make records' timestamps, and so their batches' bytes, repeatable.
    """
    return int(time.time() * 1000)
