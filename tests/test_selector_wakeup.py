"""Selector.wakeup() coalescing must never lose a wakeup (a lost one stalled new-topic sends for 1 s)."""

from __future__ import annotations

import socket
import threading
import time

from kproducer.network.selector import Selector


class _RacingReader:
    """The wakeup socket's read end, with another thread's wakeup() landing inside the drain."""

    def __init__(self, real: socket.socket, on_first_recv: object) -> None:
        self._real = real
        self._hook = on_first_recv
        self.fired = False

    def recv(self, n: int) -> bytes:
        if not self.fired:
            self.fired = True
            self._hook()  # type: ignore[operator]
        return self._real.recv(n)


def test_wakeup_racing_with_the_drain_is_not_lost() -> None:
    sel = Selector()
    try:
        real = sel._wake_r
        sel.wakeup()
        racing = _RacingReader(real, sel.wakeup)
        sel._wake_r = racing  # type: ignore[assignment]
        sel.poll(1.0)  # returns at once: the first byte is there
        assert racing.fired
        sel._wake_r = real
        # A later wakeup must still interrupt a blocked poll.
        threading.Timer(0.05, sel.wakeup).start()
        t = time.monotonic()
        sel.poll(3.0)
        assert time.monotonic() - t < 1.5
    finally:
        sel.close_all()

