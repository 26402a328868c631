"""Waiting for a condition without racing the clock.

A test that waits on real threads (a Sender, a broker, a blocked caller) waits for the event it
expects, not for a fixed time, and never asserts how long something took on a shared machine.
The bound here only turns a hang into a failure that says what never happened; it is far above
anything a loaded machine needs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

#: How long a latch waits before it calls the wait a hang.
LATCH_S = 60.0


def wait_until(condition: Callable[[], bool], what: str = "the condition", timeout_s: float = LATCH_S) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` if it never does."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s:.0f} s: {what}"
        time.sleep(0.001)


def returns(call: Callable[[], T], what: str, timeout_s: float = LATCH_S) -> T:
    """Run ``call`` on a helper thread and give back its result (or raise its exception).

    For a call that must come back by itself (a timeout honoured, a waiter woken): a call that
    hangs fails the test after ``timeout_s`` naming ``what``, instead of hanging the run.
    """
    outcome: list[tuple[bool, object]] = []

    def run() -> None:
        try:
            outcome.append((True, call()))
        except BaseException as e:  # noqa: BLE001 - handed to the test's thread
            outcome.append((False, e))

    worker = threading.Thread(target=run, daemon=True, name=f"latch: {what}")
    worker.start()
    worker.join(timeout_s)
    assert outcome, f"{what} did not return within {timeout_s:.0f} s"
    ok, value = outcome[0]
    if not ok:
        assert isinstance(value, BaseException)
        raise value
    return value  # type: ignore[return-value]
