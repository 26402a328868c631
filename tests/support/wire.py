"""Kafka wire frames as a broker writes and reads them (size prefix, header, kio body), no socket."""

from __future__ import annotations

import io
import struct
from typing import Any

from kio.serial import entity_reader, entity_writer

from kproducer.network import protocol


def frame_response(api_key: int, version: int, cid: int, body: Any) -> bytes:
    """A response frame: size, correlation id, the header's tagged fields when flexible, body."""
    buf = io.BytesIO()
    entity_writer(type(body))(buf, body)
    head = struct.pack(">i", cid)
    if protocol.response_header_version(api_key, version) == 1:
        head += b"\x00"
    payload = head + buf.getvalue()
    return struct.pack(">i", len(payload)) + payload


def parse_request(blob: bytes) -> tuple[int, int, int, Any]:
    """One whole request frame -> (api key, version, correlation id, decoded body)."""
    (size,) = struct.unpack_from(">i", blob, 0)
    assert size == len(blob) - 4
    api_key, version, cid = struct.unpack_from(">hhi", blob, 4)
    (clen,) = struct.unpack_from(">h", blob, 12)
    pos = 14 + max(clen, 0)
    if protocol.request_header_version(api_key, version) == 2:
        assert blob[pos] == 0
        pos += 1
    body, _ = entity_reader(protocol.request_class(api_key, version))(blob[pos:], 0)
    return api_key, version, cid, body


def api_versions_response(version: int, ranges: dict[int, tuple[int, int]], error: int = 0) -> Any:
    """An ApiVersions response body of ``version`` offering ``ranges`` (api key -> (min, max))."""
    from kio.schema.errors import ErrorCode

    mod = __import__(f"kio.schema.api_versions.v{version}.response", fromlist=["x"])
    keys = tuple(mod.ApiVersion(api_key=k, min_version=lo, max_version=hi) for k, (lo, hi) in ranges.items())
    kw: dict[str, Any] = {"error_code": ErrorCode(error), "api_keys": keys}
    if version >= 1:
        import datetime

        kw["throttle_time"] = datetime.timedelta(0)
    return mod.ApiVersionsResponse(**kw)
