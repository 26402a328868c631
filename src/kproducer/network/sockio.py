"""The Sender's non-blocking socket calls: the C versions that keep the GIL, or plain Python.

``kproducer.network._sockio`` (C, built by setup.py beside ``kproducer._speedups``)
makes ``sendmsg``, ``recv`` and a zero-timeout ``epoll_wait`` without releasing the
GIL. CPython's own socket methods release it around every system call; on the
Sender thread, with a caller thread busy in ``send()``, each release costs up to
one switch interval (5 ms) before the Sender runs again, because the caller takes
the GIL at once and keeps it until the interval runs out (the "convoy effect").
The calls here cannot block, so holding the GIL through them costs the caller
microseconds. docs/architecture.md ("The GIL and the Sender's system calls") has the
reasoning, benchmarks/RESULTS.md the measurements.

The one wait that lets go of the GIL, :func:`wait_ready_for`'s ``epoll_wait`` with a
timeout, counts the threads back from it that wait to take the GIL again; ``GIL_WANTED``
shares that count with the C send lane (``kproducer._speedups``), which lets go of the GIL
on a caller's ``send()`` while a Sender waits for it, instead of holding it to the end of
the caller's switch interval.

Without the extension, or with ``KPRODUCER_PURE_PYTHON=1``, the same names are the
socket and selector methods themselves: the same results and errors, only the GIL
is released as usual. ``HELD`` says which one runs.
"""

from __future__ import annotations

import errno
import math
import selectors
import socket
from collections.abc import Callable, Sequence
from typing import Any

from kproducer.record.c_extension import load

__all__ = ["GIL_WANTED", "HELD", "poll_ready_for", "recv", "send_iov", "wait_ready_for"]


_c: Any = load("kproducer.network._sockio")
HELD: bool = _c is not None
"""True when the calls below keep the GIL (the C extension is in use)."""
GIL_WANTED: Any = _c.GIL_WANTED if _c is not None else None
"""The capsule of the count of threads back from :func:`wait_ready_for`'s wait that want the GIL (None without C)."""


def _send_iov_py(sock: socket.socket, buffers: Sequence[Any]) -> int:
    return sock.sendmsg(buffers)


def _recv_py(sock: socket.socket, size: int) -> bytes:
    return sock.recv(size)


if _c is not None:
    _c_send_iov = _c.send_iov
    _c_recv = _c.recv

    def _fd(sock: socket.socket) -> int:
        # A closed socket's fileno() is -1; its own methods then raise OSError(EBADF), so these do too.
        fd = sock.fileno()
        if fd < 0:
            raise OSError(errno.EBADF, "Bad file descriptor (the socket is closed)")
        return fd

    def send_iov(sock: socket.socket, buffers: Sequence[Any]) -> int:
        """``sock.sendmsg(buffers)`` on a non-blocking socket (at most IOV_MAX buffers are written)."""
        return int(_c_send_iov(_fd(sock), buffers))

    def recv(sock: socket.socket, size: int) -> bytes:
        """``sock.recv(size)`` on a non-blocking socket."""
        return bytes(_c_recv(_fd(sock), size))

else:
    send_iov = _send_iov_py
    recv = _recv_py


def _epoll_fd(sel: selectors.BaseSelector) -> int | None:
    """The epoll descriptor of an epoll selector, when the C extension can wait on it; else None."""
    epoll_selector = getattr(selectors, "EpollSelector", None)
    if _c is None or epoll_selector is None or not isinstance(sel, epoll_selector):
        return None
    return int(sel.fileno())


def _keys_of(sel: selectors.BaseSelector) -> Callable[[list[tuple[int, int]]], list[tuple[selectors.SelectorKey, int]]]:
    """Turns epoll's (fd, events) pairs into ``sel.select()``'s answer, as ``EpollSelector.select`` does
    (an error or hang-up is reported as both readable and writable)."""
    import select

    get_map = sel.get_map()
    not_in, not_out = ~select.EPOLLIN, ~select.EPOLLOUT
    read_ev, write_ev = selectors.EVENT_READ, selectors.EVENT_WRITE

    def keys(pairs: list[tuple[int, int]]) -> list[tuple[selectors.SelectorKey, int]]:
        out = []
        for fd, ev in pairs:
            key = get_map.get(fd)
            if key is None:
                continue
            events = (write_ev if ev & not_in else 0) | (read_ev if ev & not_out else 0)
            out.append((key, events & key.events))
        return out

    return keys


_LONGEST_WAIT_S = (2**31 - 1) / 1000


def wait_ready_for(sel: selectors.BaseSelector) -> Callable[[float], list[tuple[selectors.SelectorKey, int]]] | None:
    """``sel.select(timeout)``, letting go of the GIL to wait and counted in ``GIL_WANTED``, or None.

    Only for an epoll selector with the C extension; otherwise the caller uses ``sel.select``.
    The timeout in seconds is rounded up to milliseconds, as ``EpollSelector.select`` does.
    """
    epfd = _epoll_fd(sel)
    if epfd is None:
        return None
    wait_ready = _c.wait_ready
    keys = _keys_of(sel)
    get_map = sel.get_map()

    def wait(timeout_s: float) -> list[tuple[selectors.SelectorKey, int]]:
        # epoll takes a C int of milliseconds: a negative or longer timeout (24 days and more) waits for ever.
        timeout_ms = math.ceil(timeout_s * 1000) if 0 <= timeout_s < _LONGEST_WAIT_S else -1
        return keys(wait_ready(epfd, max(len(get_map), 1), timeout_ms))

    return wait


def poll_ready_for(sel: selectors.BaseSelector) -> Callable[[], list[tuple[selectors.SelectorKey, int]]] | None:
    """A function giving ``sel.select(0)``'s answer without releasing the GIL, or None.

    Only for an epoll selector with the C extension; otherwise the caller uses
    ``sel.select(0)``. The event masks are translated as ``EpollSelector.select``
    does (an error or hang-up is reported as both readable and writable).
    """
    epfd = _epoll_fd(sel)
    if epfd is None:
        return None
    poll_ready = _c.poll_ready
    keys = _keys_of(sel)
    get_map = sel.get_map()

    def ready() -> list[tuple[selectors.SelectorKey, int]]:
        return keys(poll_ready(epfd, max(len(get_map), 1)))

    return ready
