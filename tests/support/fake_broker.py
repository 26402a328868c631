"""A scripted Kafka broker on loopback, for clients facing bad or unusual bytes.

Each connection is served in turn by one background thread: every request frame the
client sends is passed to ``script(request)``, which returns a Reply: the bytes to answer
with, and whether to close the connection after them. The script may be swapped between
tests or hypothesis examples.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["FakeRequest", "Reply", "ScriptedBroker", "Script"]


@dataclass(frozen=True, slots=True)
class FakeRequest:
    """One request as received: its header fields and the whole frame (size prefix included)."""

    api_key: int
    api_version: int
    correlation_id: int
    frame: bytes


@dataclass(frozen=True, slots=True)
class Reply:
    data: bytes = b""
    close: bool = False


Script = Callable[[FakeRequest], Reply]

_IDLE_S = 0.1  # how often a waiting read checks for close()
_CONNECTION_S = 5.0  # no connection is served longer than this (a bound, not a timing)


class ScriptedBroker:
    """A loopback server answering every request with what its ``script`` returns (see module docstring)."""

    def __init__(self, script: Script) -> None:
        self.script = script
        self.connections = 0
        self.requests: list[FakeRequest] = []
        self._sock = socket.create_server(("127.0.0.1", 0), backlog=16)
        self._sock.settimeout(_IDLE_S)
        self.port: int = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, name="scripted-broker", daemon=True)
        self._thread.start()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            self.connections += 1
            with conn:
                self._serve_connection(conn)

    def _serve_connection(self, conn: socket.socket) -> None:
        conn.settimeout(_IDLE_S)
        buf = b""
        for _ in range(int(_CONNECTION_S / _IDLE_S)):
            if self._stop.is_set():
                return
            try:
                data = conn.recv(65536)
            except TimeoutError:
                continue
            except OSError:
                return
            if not data:
                return
            buf += data
            while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf, 0)[0]:
                size = struct.unpack_from(">i", buf, 0)[0]
                frame, buf = buf[: 4 + size], buf[4 + size :]
                api_key, version, cid = struct.unpack_from(">hhi", frame, 4)
                request = FakeRequest(api_key, version, cid, frame)
                self.requests.append(request)
                reply = self.script(request)
                try:
                    conn.sendall(reply.data)
                except OSError:
                    return
                if reply.close:
                    return

    def close(self) -> None:
        self._stop.set()
        self._thread.join(_CONNECTION_S + 1)
        self._sock.close()
