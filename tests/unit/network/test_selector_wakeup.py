"""Selector.wakeup() coalescing must never lose a wakeup (a lost one stalled new-topic sends for 1 s)."""

from __future__ import annotations

import select
import socket
import threading

from kproducer.network.selector import Selector

#: Only turns a lost wakeup (a poll blocked for its whole hour) into a failure.
LATCH_S = 60.0


class _RacingReader:
    """The wakeup socket's read end, with another thread's wakeup() landing inside the drain."""

    def __init__(self, real: socket.socket, on_first_recv: object) -> None:
        self._real = real
        self._hook = on_first_recv
        self.fired = False

    def _fire_once(self) -> None:
        if not self.fired:
            self.fired = True
            self._hook()  # type: ignore[operator]

    def recv(self, n: int) -> bytes:  # the pure-Python drain reads through the socket object
        self._fire_once()
        return self._real.recv(n)

    def fileno(self) -> int:  # the C drain (kproducer.network.sockio) asks for the descriptor per read
        self._fire_once()
        return self._real.fileno()


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
        # A later wakeup must still reach the socket (a lost one leaves the coalescing flag set,
        # and then wakeup() sends nothing) ...
        sel.wakeup()
        assert select.select([real], [], [], 0)[0], "wakeup() after the race sent no byte"
        sel.poll(0)  # drains it
        # ... and interrupt a poll blocked for an hour: returning at all is the wakeup's doing.
        polled = threading.Event()
        poller = threading.Thread(target=lambda: (sel.poll(3600.0), polled.set()), daemon=True)
        poller.start()
        threading.Timer(0.05, sel.wakeup).start()
        assert polled.wait(LATCH_S), f"poll(3600) still blocked {LATCH_S:.0f} s after wakeup()"
        poller.join()
    finally:
        sel.close_all()

