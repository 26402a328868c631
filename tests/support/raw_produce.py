"""A minimal blocking Produce (v3, hand-framed) to put one record batch on a broker.

Used by the record-format tests before the network layer exists: it sends
exactly the bytes the builder produced, with acks=-1, and checks the error code.
Loopback only; every socket operation has a timeout.
"""

from __future__ import annotations

import socket
import struct

_PRODUCE = 0
_VERSION = 3


def _string(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack(">h", len(b)) + b


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError(f"broker closed the connection after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


def produce_batch(
    bootstrap: str,
    topic: str,
    partition: int,
    batch: bytes | bytearray | memoryview,
    timeout: float = 10.0,
    correlation_id: int = 7,
) -> int:
    """Send one batch with acks=-1; return the base offset the broker assigned.

    Raises AssertionError naming the broker's error code when it is not 0.
    """
    host, _, port = bootstrap.rpartition(":")
    if host not in ("127.0.0.1", "localhost", "::1"):
        raise ValueError(f"raw_produce only talks to loopback, got {host!r}")
    data = bytes(batch)
    header = struct.pack(">hhi", _PRODUCE, _VERSION, correlation_id) + _string("kproducer-raw")
    body = b"".join(
        (
            struct.pack(">h", -1),  # transactional_id: null
            struct.pack(">hi", -1, int(timeout * 1000)),  # acks=-1, timeout_ms
            struct.pack(">i", 1),
            _string(topic),
            struct.pack(">i", 1),
            struct.pack(">ii", partition, len(data)),
            data,
        )
    )
    request = header + body
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(request)) + request)
        (size,) = struct.unpack(">i", _recv_exact(sock, 4))
        resp = _recv_exact(sock, size)
    (cid,) = struct.unpack_from(">i", resp, 0)
    assert cid == correlation_id, f"correlation id {cid} != {correlation_id}"
    pos = 4
    (ntopics,) = struct.unpack_from(">i", resp, pos)
    pos += 4
    assert ntopics == 1, f"expected one topic in the produce response, got {ntopics}"
    (nlen,) = struct.unpack_from(">h", resp, pos)
    pos += 2
    name = resp[pos : pos + nlen].decode()
    pos += nlen
    assert name == topic, f"response topic {name!r} != {topic!r}"
    (nparts,) = struct.unpack_from(">i", resp, pos)
    pos += 4
    assert nparts == 1, f"expected one partition in the produce response, got {nparts}"
    index, error_code, base_offset, _log_append_time = struct.unpack_from(">ihqq", resp, pos)
    assert index == partition, f"response partition {index} != {partition}"
    assert error_code == 0, f"produce to {topic}-{partition} failed with error code {error_code}"
    return int(base_offset)
