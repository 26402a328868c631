"""The producer's one clock: integer milliseconds from a monotonic source.

Every timer (linger, retry backoff, delivery and request timeouts, metadata refresh, the circuit
breaker's windows) compares values of this clock, so they must all read the same one. Components
take the clock as a ``Callable[[], int]`` argument defaulting to :func:`monotonic_ms`, so tests
drive them with a fake clock instead.
"""

from __future__ import annotations

import time

__all__ = ["monotonic_ms"]


def monotonic_ms() -> int:
    """Milliseconds of ``time.monotonic_ns()``: exact integers, never going backwards."""
    return time.monotonic_ns() // 1_000_000
