"""Non-blocking socket I/O for many broker connections on one thread.

``selectors`` plus non-blocking sockets; a socketpair lets other threads
``wakeup()`` a blocked ``poll``. Sends are lists of buffers written with
``socket.sendmsg`` so that record batches are never joined into one blob.
Only the Sender thread calls anything here except ``wakeup()``.

TLS lives here and nowhere else: a connection given an ``ssl.SSLContext`` is wrapped once its TCP
connect completes (``do_handshake_on_connect=False``) and the handshake is driven by readiness like
any other I/O, so it never blocks the Sender. The connection is reported connected only after the
handshake, which keeps it under the client's connection-setup timeout. ``SSLSocket`` has no
``sendmsg``: small buffers are joined (up to 64 KiB) into one TLS write instead, and a write that
OpenSSL asked to retry is retried with the very same buffer, as it requires.

A *TLS probe* (``probe_tls``) is a throw-away connection that only asks whether a port answers a
TLS ClientHello. The client uses it when a plaintext connection was closed before the broker
answered its first request: a broker's TLS listener drops plaintext bytes without a word (stunnel
and OpenSSL-based listeners send no alert), and only a handshake that the port answers tells that
apart from a flaky broker.
"""

from __future__ import annotations

import errno
import itertools
import logging
import selectors
import socket
import ssl
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from kproducer.network.protocol import Buffer
from kproducer.network.sockio import poll_ready_for, recv, send_iov, wait_ready_for

_WAKE_BYTE = (b"\x00",)

__all__ = ["Selector", "PollResult"]

logger = logging.getLogger(__name__)

_IOV_MAX = 512
_RECV_CHUNK = 256 * 1024
# Small buffers (request headers, small batches) are joined up to this size into one TLS write.
_TLS_JOIN = 64 * 1024


@dataclass(slots=True)
class PollResult:
    connected: list[int] = field(default_factory=list)
    disconnected: list[tuple[int, str]] = field(default_factory=list)
    received: list[tuple[int, bytes]] = field(default_factory=list)
    sends_completed: list[int] = field(default_factory=list)
    # Per connection written to in this poll: its running total of bytes written (see bytes_sent).
    bytes_written: dict[int, int] = field(default_factory=dict)
    # Connections in ``disconnected`` whose TLS handshake failed (an authentication failure).
    handshake_failed: set[int] = field(default_factory=set)
    # Finished TLS probes: (probe id, whether the port answered the ClientHello with TLS, detail).
    tls_probes: list[tuple[int, bool, str]] = field(default_factory=list)


class _Channel:
    __slots__ = (
        "conn_id",
        "sock",
        "connecting",
        "pending",
        "pending_bytes",
        "written_bytes",
        "address",
        "tls_context",
        "server_hostname",
        "handshaking",
        "tls",
        "tls_retry",
        "probe",
        "events",
    )

    def __init__(self, conn_id: int, sock: socket.socket, address: tuple[str, int]) -> None:
        self.conn_id = conn_id
        self.sock: socket.socket = sock
        self.connecting = True
        self.tls_context: ssl.SSLContext | None = None
        self.server_hostname: str | None = None
        self.handshaking = False
        self.tls = False
        # OpenSSL asked to retry a write: the head buffer must not change until it succeeds.
        self.tls_retry = False
        # A TLS probe (see ``Selector.probe_tls``): reports to ``tls_probes``, never connects.
        self.probe = False
        self.pending: deque[memoryview] = deque()
        self.pending_bytes = 0
        self.written_bytes = 0
        self.address = address
        # The interest registered with the selector: epoll_ctl is a system call, made only on a change.
        self.events = 0


class Selector:
    """Moves bytes between sockets and connection ids (see module docstring)."""

    def __init__(self, *, send_buffer_bytes: int = 131072, receive_buffer_bytes: int = 32768) -> None:
        self._sel = selectors.DefaultSelector()
        self._channels: dict[int, _Channel] = {}
        self._send_buffer_bytes = send_buffer_bytes
        self._receive_buffer_bytes = receive_buffer_bytes
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._wake_r, selectors.EVENT_READ, None)
        # select(0) without releasing the GIL, where the C extension can (kproducer.network.sockio).
        self._ready_now = poll_ready_for(self._sel)
        # The wait itself: select(timeout), counted for the C send lane's GIL hand-over where C runs.
        self._wait: Callable[[float], list[tuple[selectors.SelectorKey, int]]] = (
            wait_ready_for(self._sel) or self._sel.select
        )
        self._wake_pending = False
        self._closed = False
        self._probe_ids = itertools.count(-(1 << 40), -1)
        self._probe_context: ssl.SSLContext | None = None

    # ------------------------------------------------------------- connections
    def connect(
        self,
        conn_id: int,
        host: str,
        port: int,
        family: int = socket.AF_INET,
        *,
        ssl_context: ssl.SSLContext | None = None,
        server_hostname: str | None = None,
    ) -> None:
        """Start a non-blocking connect; completion (after the TLS handshake, with a context) is
        reported by ``poll``. ``server_hostname`` is the name the certificate must match and the
        SNI sent (the broker's advertised host, not the address it resolved to)."""
        if conn_id in self._channels:
            raise ValueError(f"connection {conn_id} already exists")
        self._open(conn_id, host, port, family, ssl_context, server_hostname or host)

    def probe_tls(self, host: str, port: int, family: int = socket.AF_INET) -> int:
        """Start a TLS probe of ``host:port`` and return its id; ``poll`` reports the answer in
        ``tls_probes`` (close the id to give up). The probe verifies nothing: it only asks whether
        the port speaks TLS, and sends no Kafka bytes."""
        if self._probe_context is None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
            self._probe_context = ctx
        probe_id = next(self._probe_ids)
        self._open(probe_id, host, port, family, self._probe_context, None).probe = True
        return probe_id

    def _open(
        self,
        conn_id: int,
        host: str,
        port: int,
        family: int,
        ssl_context: ssl.SSLContext | None,
        server_hostname: str | None,
    ) -> _Channel:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        if self._send_buffer_bytes != -1:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self._send_buffer_bytes)
        if self._receive_buffer_bytes != -1:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, self._receive_buffer_bytes)
        ch = _Channel(conn_id, sock, (host, port))
        ch.tls_context = ssl_context
        ch.server_hostname = server_hostname
        rc = sock.connect_ex((host, port))
        if rc not in (0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN):
            sock.close()
            raise OSError(rc, f"connect to {host}:{port} failed: {errno.errorcode.get(rc, rc)}")
        self._channels[conn_id] = ch
        self._sel.register(sock, selectors.EVENT_WRITE, ch)
        ch.events = selectors.EVENT_WRITE
        return ch

    def close(self, conn_id: int) -> None:
        ch = self._channels.pop(conn_id, None)
        if ch is None:
            return
        try:
            self._sel.unregister(ch.sock)
        except (KeyError, ValueError):
            pass
        ch.sock.close()

    def is_handshaking(self, conn_id: int) -> bool:
        """Whether the connection's TCP connect is done but its TLS handshake is not."""
        ch = self._channels.get(conn_id)
        return ch is not None and ch.handshaking

    def is_connected(self, conn_id: int) -> bool:
        ch = self._channels.get(conn_id)
        return ch is not None and not ch.connecting

    def send(self, conn_id: int, buffers: list[Buffer]) -> None:
        """Queue buffers for writing; they go out on the next ``poll``.

        ``poll`` writes before it waits, and asks the selector for writability only for
        what the socket did not take then: registering it here first would cost two
        ``epoll_ctl`` calls per request (on, then off once written) for a socket that is
        almost always writable.
        """
        ch = self._channels[conn_id]
        for b in buffers:
            mv = b if isinstance(b, memoryview) else memoryview(b)
            if mv.nbytes:
                ch.pending.append(mv.cast("B") if mv.format != "B" or mv.ndim != 1 else mv)
                ch.pending_bytes += mv.nbytes

    def pending_bytes(self, conn_id: int) -> int:
        ch = self._channels.get(conn_id)
        return 0 if ch is None else ch.pending_bytes

    def bytes_sent(self, conn_id: int) -> int | None:
        """Bytes written to the connection's socket since it was opened (None: no such connection).

        With ``pending_bytes`` it tells when a given request has been fully written: the
        NetworkClient completes acks=0 requests then, as Java does on ``completedSends``.
        """
        ch = self._channels.get(conn_id)
        return None if ch is None else ch.written_bytes

    def wakeup_fd(self) -> int:
        """The socket ``wakeup()`` writes to: native threads write a byte to it to the same effect."""
        return self._wake_w.fileno()

    def wakeup(self) -> None:
        """Interrupt a blocked ``poll`` from any thread.

        Coalesced: while a wakeup byte is already waiting to be read, another
        one adds nothing, and send() calls this for every record appended while
        batches queue up (the profile showed the syscall as its top cost). The
        flag is cleared after the byte is drained: a wakeup skipped meanwhile
        happened before this poll returns, so the Sender's next loop sees it.
        """
        if self._wake_pending:
            return
        self._wake_pending = True
        try:
            # Through sockio, which keeps the GIL where it can: this runs on a caller's thread, and a
            # caller that let go of the GIL here waited for the Sender's turn to end to get it back.
            send_iov(self._wake_w, _WAKE_BYTE)
        except (BlockingIOError, OSError):
            pass

    # ------------------------------------------------------------- polling
    def poll(self, timeout_s: float) -> PollResult:
        result = PollResult()
        # Try writing first: most sends complete without waiting for the selector.
        for ch in list(self._channels.values()):
            if not ch.connecting and ch.pending:
                self._write_tls(ch, result) if ch.tls else self._write(ch, result)
        # Ask without letting go of the GIL first: the Sender releases it only to wait, since each
        # release costs it up to a switch interval while a caller thread is busy (sockio's docstring).
        ready_now = self._ready_now
        events = ready_now() if ready_now is not None else []
        if not events and (timeout_s > 0 or ready_now is None):
            events = self._wait(max(0.0, timeout_s))
        for key, mask in events:
            ch = key.data
            if ch is None:
                # Drain first, then clear the flag: a wakeup() skipped while the flag is
                # still set precedes this poll's return, so the Sender's next loop sees its
                # change; clearing first could lose a racing byte and leave the flag set for
                # good, after which every wakeup() would be a no-op.
                try:
                    while recv(self._wake_r, 4096):
                        pass
                except (BlockingIOError, OSError):
                    pass
                self._wake_pending = False
                continue
            if ch.conn_id not in self._channels:
                continue
            if ch.handshaking:
                self._handshake(ch, result)
                continue
            if ch.connecting:
                if mask & selectors.EVENT_WRITE:
                    err = ch.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                    if err:
                        self.close(ch.conn_id)
                        if ch.probe:
                            result.tls_probes.append((ch.conn_id, False, errno.errorcode.get(err, str(err))))
                            continue
                        result.disconnected.append(
                            (
                                ch.conn_id,
                                f"connect to {ch.address[0]}:{ch.address[1]} failed: {errno.errorcode.get(err, err)}",
                            )
                        )
                        continue
                    if ch.tls_context is not None:
                        self._start_tls(ch, result)
                        continue
                    ch.connecting = False
                    result.connected.append(ch.conn_id)
                    self._update_interest(ch)
                continue
            if mask & selectors.EVENT_READ:
                self._read(ch, result)
                if ch.conn_id not in self._channels:
                    continue
            if mask & selectors.EVENT_WRITE and ch.pending:
                self._write_tls(ch, result) if ch.tls else self._write(ch, result)
        return result

    # ------------------------------------------------------------- TLS
    def _start_tls(self, ch: _Channel, result: PollResult) -> None:
        assert ch.tls_context is not None
        self._sel.unregister(ch.sock)
        try:
            ch.sock = ch.tls_context.wrap_socket(
                ch.sock, server_side=False, do_handshake_on_connect=False, server_hostname=ch.server_hostname
            )
        except (ssl.SSLError, OSError, ValueError) as e:
            ch.sock.close()
            self._channels.pop(ch.conn_id, None)
            if ch.probe:
                result.tls_probes.append((ch.conn_id, False, str(e)))
                return
            result.disconnected.append((ch.conn_id, f"TLS set-up for {ch.address[0]}:{ch.address[1]} failed: {e}"))
            result.handshake_failed.add(ch.conn_id)
            return
        ch.tls = True
        ch.handshaking = True
        ch.events = selectors.EVENT_READ | selectors.EVENT_WRITE
        self._sel.register(ch.sock, ch.events, ch)
        self._handshake(ch, result)

    def _handshake(self, ch: _Channel, result: PollResult) -> None:
        sock = ch.sock
        assert isinstance(sock, ssl.SSLSocket)
        try:
            sock.do_handshake()
        except ssl.SSLWantReadError:
            self._set_events(ch, selectors.EVENT_READ)
            return
        except ssl.SSLWantWriteError:
            self._set_events(ch, selectors.EVENT_WRITE)
            return
        except (ssl.SSLError, OSError) as e:
            from kproducer.network.tls import describe_tls_error

            self.close(ch.conn_id)
            if ch.probe:
                # An alert is a TLS answer (e.g. a listener that wants a client certificate); a
                # close, a reset or non-TLS bytes (WRONG_VERSION_NUMBER...) are not.
                reason = getattr(e, "reason", None) or ""
                result.tls_probes.append((ch.conn_id, "ALERT" in reason, reason or str(e)))
                return
            address = f"{ch.server_hostname} ({ch.address[0]}:{ch.address[1]})"
            result.disconnected.append((ch.conn_id, describe_tls_error(e, address)))
            result.handshake_failed.add(ch.conn_id)
            return
        if ch.probe:
            self.close(ch.conn_id)
            result.tls_probes.append((ch.conn_id, True, f"{sock.version()} handshake completed"))
            return
        ch.handshaking = False
        ch.connecting = False
        logger.debug(
            "connection %s: TLS established (%s, %s)", ch.conn_id, sock.version(), (sock.cipher() or ("?",))[0]
        )
        result.connected.append(ch.conn_id)
        self._update_interest(ch)

    def _set_events(self, ch: _Channel, events: int) -> None:
        if events == ch.events:
            return
        try:
            self._sel.modify(ch.sock, events, ch)
        except (KeyError, ValueError):
            return
        ch.events = events

    def _write_tls(self, ch: _Channel, result: PollResult) -> None:
        pending = ch.pending
        sock = ch.sock
        while pending:
            head = pending[0]
            if not ch.tls_retry and head.nbytes < _TLS_JOIN and len(pending) > 1:
                parts = [pending.popleft()]
                size = head.nbytes
                while pending and size + pending[0].nbytes <= _TLS_JOIN:
                    nxt = pending.popleft()
                    parts.append(nxt)
                    size += nxt.nbytes
                head = memoryview(b"".join(parts))
                pending.appendleft(head)
            try:
                sent = sock.send(head)
            except (ssl.SSLWantWriteError, ssl.SSLWantReadError, BlockingIOError, InterruptedError):
                ch.tls_retry = True
                break
            except OSError as e:
                self.close(ch.conn_id)
                result.disconnected.append((ch.conn_id, f"write failed: {e}"))
                return
            ch.tls_retry = False
            ch.pending_bytes -= sent
            ch.written_bytes += sent
            result.bytes_written[ch.conn_id] = ch.written_bytes
            if sent >= head.nbytes:
                pending.popleft()
            else:
                pending[0] = head[sent:]
        if not pending:
            result.sends_completed.append(ch.conn_id)
        self._update_interest(ch)

    def _read(self, ch: _Channel, result: PollResult) -> None:
        chunks: list[bytes] = []
        tls = ch.tls
        while True:
            try:
                data = ch.sock.recv(_RECV_CHUNK) if tls else recv(ch.sock, _RECV_CHUNK)
            except (BlockingIOError, InterruptedError, ssl.SSLWantReadError, ssl.SSLWantWriteError):
                break
            except ssl.SSLZeroReturnError:
                data = b""
            except ssl.SSLError as e:
                # With TLS 1.3 a broker refuses a client certificate after the client's side of the
                # handshake ended: the alert arrives here, and is as much a handshake failure.
                from kproducer.network.tls import describe_tls_error

                self.close(ch.conn_id)
                address = f"{ch.server_hostname} ({ch.address[0]}:{ch.address[1]})"
                result.disconnected.append((ch.conn_id, describe_tls_error(e, address)))
                result.handshake_failed.add(ch.conn_id)
                break
            except OSError as e:
                self.close(ch.conn_id)
                result.disconnected.append((ch.conn_id, f"read failed: {e}"))
                break
            if not data:
                self.close(ch.conn_id)
                if chunks:
                    result.received.append((ch.conn_id, b"".join(chunks)))
                result.disconnected.append((ch.conn_id, "connection closed by the broker"))
                return
            chunks.append(data)
            # A TLS socket can hold decrypted bytes the selector does not see: read until it says so.
            if len(data) < _RECV_CHUNK and not tls:
                break
        if chunks:
            result.received.append((ch.conn_id, b"".join(chunks)))

    def _write(self, ch: _Channel, result: PollResult) -> None:
        while ch.pending:
            iov = list(itertools.islice(ch.pending, _IOV_MAX))
            try:
                sent = send_iov(ch.sock, iov)
            except (BlockingIOError, InterruptedError):
                break
            except OSError as e:
                self.close(ch.conn_id)
                result.disconnected.append((ch.conn_id, f"write failed: {e}"))
                return
            ch.pending_bytes -= sent
            ch.written_bytes += sent
            result.bytes_written[ch.conn_id] = ch.written_bytes
            while sent:
                head = ch.pending[0]
                if head.nbytes <= sent:
                    sent -= head.nbytes
                    ch.pending.popleft()
                else:
                    ch.pending[0] = head[sent:]
                    sent = 0
        if not ch.pending:
            result.sends_completed.append(ch.conn_id)
        self._update_interest(ch)

    def _update_interest(self, ch: _Channel) -> None:
        self._set_events(ch, selectors.EVENT_READ | (selectors.EVENT_WRITE if ch.pending else 0))

    def close_all(self) -> None:
        for conn_id in list(self._channels):
            self.close(conn_id)
        if not self._closed:
            self._closed = True
            self._sel.unregister(self._wake_r)
            self._wake_r.close()
            self._wake_w.close()
            self._sel.close()
