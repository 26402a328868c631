"""kproducer.network.sockio: the C calls that keep the GIL answer exactly as the socket methods they mirror."""

from __future__ import annotations

import errno
import selectors
import socket
from collections.abc import Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproducer.network import sockio
from kproducer.network.sockio import _recv_py, _send_iov_py, poll_ready_for


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def _drain(sock: socket.socket) -> bytes:
    out = bytearray()
    while True:
        try:
            chunk = sock.recv(1 << 16)
        except BlockingIOError:
            return bytes(out)
        if not chunk:
            return bytes(out)
        out += chunk


buffers = st.lists(st.binary(max_size=300), max_size=40).map(
    # every kind of buffer the selector queues: bytes, bytearray, memoryview slices
    lambda bs: [b if i % 3 == 0 else bytearray(b) if i % 3 == 1 else memoryview(b"_" + b)[1:] for i, b in enumerate(bs)]
)


@settings(max_examples=60, deadline=None)
@given(bufs=buffers)
def test_send_iov_writes_what_sendmsg_writes(bufs: list[bytes | bytearray | memoryview]) -> None:
    expected = b"".join(bytes(b) for b in bufs)
    for send in (sockio.send_iov, _send_iov_py):
        a, b = socket.socketpair()
        try:
            a.setblocking(False)
            b.setblocking(False)
            assert send(a, bufs) == len(expected)
            assert _drain(b) == expected
        finally:
            a.close()
            b.close()


@settings(max_examples=40, deadline=None)
@given(data=st.binary(min_size=1, max_size=5000), size=st.integers(min_value=1, max_value=6000))
def test_recv_reads_what_socket_recv_reads(data: bytes, size: int) -> None:
    for receive in (sockio.recv, _recv_py):
        a, b = socket.socketpair()
        try:
            b.setblocking(False)
            a.sendall(data)
            got = receive(b, size)
            assert got == data[:size]
            assert type(got) is bytes
        finally:
            a.close()
            b.close()


def test_errors_are_the_socket_methods_errors(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    for receive in (sockio.recv, _recv_py):
        with pytest.raises(BlockingIOError):
            receive(b, 100)  # nothing to read on a non-blocking socket
    # A full send buffer: both say BlockingIOError once nothing more fits.
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    chunk = [b"x" * 65536]
    for send in (sockio.send_iov, _send_iov_py):
        with pytest.raises(BlockingIOError):
            for _ in range(10_000):
                send(a, chunk)
        _drain(b)
    b.close()
    # The peer is gone: EPIPE (or ECONNRESET), an OSError either way, and no SIGPIPE kills the process.
    for send in (sockio.send_iov, _send_iov_py):
        with pytest.raises(OSError):
            for _ in range(3):
                send(a, [b"after close"])
    for receive in (sockio.recv, _recv_py):
        got_or_error: bytes | None
        try:
            got_or_error = receive(a, 10)
        except OSError:
            got_or_error = None
        assert got_or_error in (b"", None)  # end of stream, or the reset


def test_recv_at_end_of_stream_returns_empty_bytes() -> None:
    for receive in (sockio.recv, _recv_py):
        a, b = socket.socketpair()
        try:
            b.setblocking(False)
            a.sendall(b"last")
            a.shutdown(socket.SHUT_WR)
            assert receive(b, 2) == b"la"
            assert receive(b, 10) == b"st"
            assert receive(b, 10) == b""
            assert receive(b, 10) == b""  # end of stream stays end of stream
        finally:
            a.close()
            b.close()


def test_bad_arguments_name_what_is_wrong() -> None:
    # The extension itself, whichever implementation this pass uses: it is built by the install.
    from kproducer.network import _sockio  # type: ignore[attr-defined]

    with pytest.raises(TypeError, match="send_iov"):
        _sockio.send_iov(0)
    with pytest.raises(TypeError, match="list or tuple"):
        _sockio.send_iov(0, 5)
    with pytest.raises(ValueError, match="negative"):
        _sockio.recv(0, -1)
    with pytest.raises(OverflowError):
        _sockio.recv(1 << 40, 1)


def test_poll_ready_answers_as_select_zero(pair: tuple[socket.socket, socket.socket]) -> None:
    a, b = pair
    c, d = socket.socketpair()
    try:
        sel = selectors.DefaultSelector()
        sel.register(a, selectors.EVENT_READ | selectors.EVENT_WRITE, "a")
        sel.register(b, selectors.EVENT_READ, "b")
        sel.register(c, selectors.EVENT_READ, "c")
        ready = poll_ready_for(sel)
        if sockio.HELD:
            assert ready is not None, "the C extension is in use: an epoll selector must get poll_ready"
        else:
            assert ready is None

        def both() -> list[set[tuple[str, int]]]:
            want = {(k.data, ev) for k, ev in sel.select(0)}
            got = want if ready is None else {(k.data, ev) for k, ev in ready()}
            return [want, got]

        want, got = both()
        assert want == got == {("a", selectors.EVENT_WRITE)}
        a.send(b"to b")
        d.send(b"to c")
        want, got = both()
        assert want == got == {("a", selectors.EVENT_WRITE), ("b", selectors.EVENT_READ), ("c", selectors.EVENT_READ)}
        d.close()  # a hang-up: reported the way EpollSelector reports it
        _drain(c)
        want, got = both()
        assert want == got
        assert ("c", selectors.EVENT_READ) in got
        sel.unregister(c)
        want, got = both()
        assert want == got and all(name != "c" for name, _ in got)
        sel.close()
    finally:
        c.close()


def test_a_closed_socket_raises_os_error_in_both_implementations() -> None:
    """A closed socket's fileno() is -1: both calls raise what the socket methods raise (EBADF)."""
    for send, receive in ((sockio.send_iov, sockio.recv), (_send_iov_py, _recv_py)):
        a, b = socket.socketpair()
        a.close()
        b.close()
        with pytest.raises(OSError) as sent:
            send(a, [b"\x00"])
        with pytest.raises(OSError) as received:
            receive(a, 16)
        assert sent.value.errno == received.value.errno == errno.EBADF


def test_a_wakeup_after_the_selector_closed_is_a_no_op() -> None:
    """Producer.close(0) can wake the Sender after the Sender closed its selector (a race seen in CI)."""
    from kproducer.network.selector import Selector

    sel = Selector()
    sel.close_all()
    sel.wakeup()  # must not raise


def test_wait_ready_answers_as_select_and_counts_nobody_after_it(pair: tuple[socket.socket, socket.socket]) -> None:
    """wait_ready_for's wait gives sel.select(timeout)'s answer; once it returned, no thread is counted
    as waiting for the GIL (the count the C send lane hands the GIL over by)."""
    a, b = pair
    sel = selectors.DefaultSelector()
    try:
        sel.register(a, selectors.EVENT_READ, "a")
        sel.register(b, selectors.EVENT_READ, "b")
        wait = sockio.wait_ready_for(sel)
        if not sockio.HELD:
            assert wait is None and sockio.GIL_WANTED is None
            return
        from kproducer.network import _sockio  # type: ignore[attr-defined]

        assert wait is not None, "the C extension is in use: an epoll selector must get wait_ready"
        assert wait(0.0) == sel.select(0) == []
        b.send(b"to a")
        assert {(k.data, ev) for k, ev in wait(5.0)} == {(k.data, ev) for k, ev in sel.select(5.0)} == {
            ("a", selectors.EVENT_READ)
        }
        _drain(a)
        assert wait(0.001) == []
        b.send(b"again")
        assert [k.data for k, _ev in wait(float("inf"))] == ["a"]  # no timeout at all: ready at once here
        assert _sockio.gil_waiters() == 0
        with pytest.raises(TypeError, match="wait_ready"):
            _sockio.wait_ready(sel.fileno(), 1)
        with pytest.raises(ValueError, match="negative"):
            _sockio.wait_ready(-1, 1, 0)
    finally:
        sel.close()
