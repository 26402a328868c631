"""The tests' one fake clock: monotonic milliseconds that move when the test says so.

The producer's policies (linger, backoff, delivery timeout, metadata refresh, the circuit
breaker, metric windows) take a ``clock_ms`` callable instead of reading ``time`` themselves,
as the Java client's classes take a ``Time`` (``MockTime`` in its tests). A test passes a
:class:`FakeClock` and moves it with :meth:`FakeClock.advance` or by setting ``now``, so that
what it asserts about time does not depend on how busy the machine is.

A test that runs a real broker and a real Sender thread can start the clock following the
machine's monotonic clock (:meth:`FakeClock.following_real_time`), :meth:`~FakeClock.freeze`
it where it needs time to stand still or to move in exact steps, and let it
:meth:`~FakeClock.run_free` again from the frozen reading.
"""

from __future__ import annotations

import time


def _real_ms() -> int:
    return time.monotonic_ns() // 1_000_000


class FakeClock:
    """Milliseconds, read by calling the clock; they move only through ``advance``/``now``.

    Frozen (the default) the reading is ``now``. Following real time it is the machine's
    monotonic milliseconds plus a fixed offset, so it never jumps when the mode changes.
    """

    __slots__ = ("_frozen", "_offset")

    def __init__(self, now: int = 0) -> None:
        self._frozen: int | None = now
        self._offset = 0

    @classmethod
    def following_real_time(cls, start: int | None = None) -> FakeClock:
        """A clock that runs with real time (from ``start``, or the machine's own reading)."""
        clock = cls(_real_ms() if start is None else start)
        clock.run_free()
        return clock

    def __call__(self) -> int:
        frozen = self._frozen
        return frozen if frozen is not None else _real_ms() + self._offset

    @property
    def now(self) -> int:
        return self()

    @now.setter
    def now(self, value: int) -> None:
        assert self._frozen is not None, "set the time of a frozen clock only (freeze() first)"
        self._frozen = value

    def advance(self, ms: int) -> int:
        """Move a frozen clock ``ms`` forward; return the new reading."""
        assert self._frozen is not None, "advance a frozen clock only (freeze() first)"
        self._frozen += ms
        return self._frozen

    def freeze(self) -> None:
        """Stop following real time: the reading stays where it is until advanced."""
        self._frozen = self()

    def run_free(self) -> None:
        """Follow real time again, from the current reading."""
        now = self()
        self._offset = now - _real_ms()
        self._frozen = None
