"""A loopback TCP proxy that counts Kafka requests and response bytes per API key.

A Tansu broker started with ``advertised_port`` set to the proxy's port sends
every client connection through it (bootstrap and leader connections alike), so
the counts are the wire's, independent of the client under test.

Tansu quirk, corrected here: Tansu answers a Metadata v1+ request with an empty
topic list (the "brokers only" request clients send at start) with every topic of
the cluster; Kafka answers it with none. The proxy rewrites the answer to such a
request as Kafka would send it (``brokers_only_fix``); requests naming topics and
the null list that means "all topics" are forwarded untouched.
"""

from __future__ import annotations

import asyncio
import struct
import threading
from collections import Counter

__all__ = ["METADATA", "CountingProxy"]

METADATA = 3


class CountingProxy:
    """Loopback TCP proxy that counts Kafka requests and response bytes per API key."""

    def __init__(self, listen_port: int, target_port: int, *, brokers_only_fix: bool = True) -> None:
        self.listen_port = listen_port
        self.target_port = target_port
        self.brokers_only_fix = brokers_only_fix
        self.brokers_only_rewrites = 0
        self.requests: Counter[int] = Counter()
        self.response_bytes: Counter[int] = Counter()
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="counting-proxy", daemon=True)

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("counting proxy did not start")

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def reset(self) -> None:
        with self._lock:
            self.brokers_only_rewrites = 0
            self.requests.clear()
            self.response_bytes.clear()

    def snapshot(self) -> tuple[dict[int, int], dict[int, int]]:
        with self._lock:
            return dict(self.requests), dict(self.response_bytes)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", self.listen_port)
        )
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()

    async def _handle(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        try:
            breader, bwriter = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            cwriter.close()
            return
        pending: dict[int, int] = {}  # correlation id -> api key, for this connection
        brokers_only: dict[int, int] = {}  # correlation id -> version of a topic-less Metadata request

        async def upstream() -> None:
            buf = bytearray()
            while data := await creader.read(65536):
                bwriter.write(data)
                buf += data
                while len(buf) >= 12:
                    (size,) = struct.unpack_from(">i", buf, 0)
                    if len(buf) < 4 + size:
                        break
                    api_key, version, cid = struct.unpack_from(">hhi", buf, 4)
                    pending[cid] = api_key
                    if api_key == METADATA and self.brokers_only_fix and _is_brokers_only(buf, version, size):
                        brokers_only[cid] = version
                    with self._lock:
                        self.requests[api_key] += 1
                    del buf[: 4 + size]
                await bwriter.drain()
            bwriter.close()

        async def downstream() -> None:
            # Responses are forwarded whole (frame by frame), so that one can be rewritten.
            buf = bytearray()
            while data := await breader.read(65536):
                buf += data
                while len(buf) >= 8:
                    size, cid = struct.unpack_from(">ii", buf, 0)
                    if len(buf) < 4 + size:
                        break
                    frame = bytes(buf[: 4 + size])
                    del buf[: 4 + size]
                    api_key = pending.pop(cid, -1)
                    version = brokers_only.pop(cid, None)
                    if version is not None:
                        frame = _without_topics(frame, version)
                        with self._lock:
                            self.brokers_only_rewrites += 1
                    cwriter.write(frame)
                    with self._lock:
                        self.response_bytes[api_key] += len(frame)
                await cwriter.drain()
            cwriter.close()

        try:
            await asyncio.gather(upstream(), downstream())
        except (ConnectionError, OSError):
            pass
        finally:
            cwriter.close()
            bwriter.close()


def _is_brokers_only(frame: bytearray, version: int, size: int) -> bool:
    """A Metadata v1+ request naming an empty (not null) topic list: Kafka answers it with no topics."""
    from kio.serial import entity_reader

    from kproducer.network.protocol import is_flexible, request_class

    if version < 1:
        return False
    view = memoryview(bytes(frame[4 : 4 + size]))
    (client_id_len,) = struct.unpack_from(">h", view, 8)
    pos = 10 + max(client_id_len, 0)
    if is_flexible(METADATA, version):
        pos += 1  # empty tagged fields of request header v2
    req, _ = entity_reader(request_class(METADATA, version))(view, pos)
    return req.topics is not None and len(req.topics) == 0


def _without_topics(frame: bytes, version: int) -> bytes:
    """The response a Kafka broker gives a brokers-only request: Tansu's answer with its topics removed."""
    import dataclasses
    import io

    from kio.serial import entity_reader, entity_writer

    from kproducer.network.protocol import is_flexible, response_class

    cls = response_class(METADATA, version)
    header_len = 4 + (1 if is_flexible(METADATA, version) else 0)  # correlation id (+ empty tagged fields)
    if is_flexible(METADATA, version) and frame[8] != 0:
        return frame  # tagged fields in the header: leave the frame alone
    body, _ = entity_reader(cls)(memoryview(frame), 4 + header_len)
    out = io.BytesIO()
    entity_writer(cls)(out, dataclasses.replace(body, topics=()))
    payload = frame[4 : 4 + header_len] + out.getvalue()
    return struct.pack(">i", len(payload)) + payload


