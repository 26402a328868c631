"""A caller busy in send() lets go of the GIL for a Sender thread back from its wait.

The Sender waits for its sockets in ``kproducer.network._sockio.wait_ready``, which counts the
threads back from that wait and not yet holding the GIL again. The C send lane reads the count
on every call and, while it is not zero, lets go of the GIL until that thread has it. Without
that, a caller looping over send() would keep the GIL until its switch interval ran out.

The test makes the switch interval ten seconds, so that the interpreter never takes the GIL from
the looping caller on its own: the thread waiting in ``wait_ready`` gets to run only through the
lane's hand-over. It asserts that the thread ran while the caller was still sending, not how
fast.
"""

from __future__ import annotations

import os
import selectors
import socket
import sys
import threading

import pytest

from kproducer.network import sockio
from kproducer.record import native
from tests.support.producer_rig import ProducerRig

PURE = os.environ.get("KPRODUCER_PURE_PYTHON", "").strip() not in ("", "0")
native_only = pytest.mark.skipif(PURE, reason="the pure-Python pass has no C send lane (test_no_lane_in_the_pure_pass)")


@native_only
def test_a_sending_caller_hands_the_gil_to_a_thread_back_from_wait_ready() -> None:
    assert native.c is not None, "the C extension kproducer._speedups is not built: run `make test` to build it"
    assert sockio.HELD, "the C extension kproducer.network._sockio is not built: run `make test` to build it"
    rig = ProducerRig({"acks": "1"}, topics={"a": 1})
    a, b = socket.socketpair()
    sel = selectors.DefaultSelector()
    interval = sys.getswitchinterval()
    try:
        lane = rig.producer._lane
        assert lane is not None
        rig.producer.send("a", b"warm", b"k")  # registers the topic: the next sends are the lane's
        sel.register(a, selectors.EVENT_READ)
        wait = sockio.wait_ready_for(sel)
        assert wait is not None
        started, woke = threading.Event(), threading.Event()

        def sender() -> None:
            started.set()
            wait(60.0)
            woke.set()  # runs only once this thread holds the GIL again

        thread = threading.Thread(target=sender, daemon=True)
        thread.start()
        assert started.wait(30)
        # Let the thread enter its wait (it lets go of the GIL there); the caller then holds the GIL
        # for the whole loop below unless the lane hands it over.
        while thread.is_alive() and not _in_wait(thread):
            started.wait(0.001)
        sys.setswitchinterval(10.0)
        b.send(b"x")  # the wait ends; the thread now wants the GIL
        calls = lane.fast_calls
        sent = 0
        while not woke.is_set() and sent < 200_000:
            rig.producer.send("a", b"v", b"k")
            sent += 1
        sys.setswitchinterval(interval)
        assert woke.is_set(), f"the waiting thread never got the GIL during {sent} sends"
        # The lane took the sends (a record that does not fit the open batch goes to Python, which
        # opens the next one: a few in thousands).
        assert lane.fast_calls - calls >= sent * 0.9, "the sends did not go through the C lane"
        thread.join(30)
    finally:
        sys.setswitchinterval(interval)
        sel.close()
        a.close()
        b.close()
        rig.close()


def _in_wait(thread: threading.Thread) -> bool:
    """Whether ``thread`` is blocked in a system call (its /proc state is S), i.e. in epoll_wait."""
    try:
        with open(f"/proc/self/task/{thread.native_id}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "S"
    except OSError:
        return True
