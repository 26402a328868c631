"""The v2 record (Java's ``DefaultRecord``): the reference encoder, its size and the room rule.

This module is the one Python definition of how a record of a magic-2 batch is
laid out (the Kafka protocol guide, "Record"): a varint length, then attributes
(0), the timestamp delta and offset delta as zigzag varlongs/varints, the key and
value each as a zigzag varint length (-1 for null) and their bytes, and the
headers block (a varint count, then each header's key and value the same way).

The builder (:mod:`kproducer.record.builder`) encodes with these functions in
pure-Python mode. The C extension mirrors them function for function:
``append_record`` in ``_speedups.c`` (``append_one``, ``record_size``,
``has_room``) does what :func:`append_record` here does, and a property test
compares whole batches built both ways byte for byte.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = [
    "COMPRESSION_RATE_ESTIMATION_FACTOR",
    "NO_HEADERS",
    "append_record",
    "byte_len",
    "coerce_bytes",
    "encode_headers",
    "encode_record",
    "encode_unsigned_varint",
    "encode_varint",
    "has_room",
    "largest_record",
    "record_size",
    "varint_size",
    "zigzag",
]

Header = tuple[str, "bytes | bytearray | memoryview | None"]
BytesLike = bytes | bytearray | memoryview

#: Java's ``CompressionRatioEstimator`` margin: sizes under compression are estimated 5% high.
COMPRESSION_RATE_ESTIMATION_FACTOR = 1.05
#: The headers block of a record without headers: a count of 0.
NO_HEADERS = b"\x00"
_NULL_LEN = b"\x01"  # zigzag(-1): a null key or value
_ATTRIBUTES = b"\x00"  # record attributes: unused, always 0


# ---------------------------------------------------------------- varints
def encode_unsigned_varint(u: int) -> bytes:
    """Base-128 little-endian varint of a non-negative int (records and the protocol's compact fields)."""
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def zigzag(n: int) -> int:
    """Map a signed int onto an unsigned one so that small magnitudes stay short."""
    return n << 1 if n >= 0 else ((-n) << 1) - 1


_TABLE_SIZE = 16384
# Precomputed zigzag varints for 0..16383: offset deltas, lengths and small deltas.
# Built from its three byte-length ranges (zigzag values 0..126 take one byte, ..16382 two, ..32766
# three) rather than by 16384 calls of encode_unsigned_varint: a quarter of the import time; equal
# to those calls (tests/unit/record).
_VARINT: tuple[bytes, ...] = (
    tuple(bytes((v,)) for v in range(0, 0x80, 2))
    + tuple(bytes((lo | 0x80, hi)) for hi in range(1, 0x80) for lo in range(0, 0x80, 2))
    + tuple(bytes((lo | 0x80, mid | 0x80, 1)) for mid in range(0x80) for lo in range(0, 0x80, 2))
)
_VARINT_LEN: tuple[int, ...] = (1,) * 64 + (2,) * (8192 - 64) + (3,) * (_TABLE_SIZE - 8192)


def encode_varint(n: int) -> bytes:
    """Zigzag varint/varlong as used by v2 records."""
    if 0 <= n < _TABLE_SIZE:
        return _VARINT[n]
    return encode_unsigned_varint(zigzag(n))


def varint_size(n: int) -> int:
    """Encoded size of a zigzag varint/varlong."""
    u = zigzag(n)
    size = 1
    while u >= 0x80:
        u >>= 7
        size += 1
    return size


# ---------------------------------------------------------------- fields
def coerce_bytes(field: str, data: object) -> BytesLike | None:
    """Accept bytes-like or None; a multi-byte-format memoryview is viewed as raw bytes."""
    if data is None or isinstance(data, (bytes, bytearray)):
        return data
    if isinstance(data, memoryview):
        if data.itemsize != 1 or data.ndim != 1 or not data.c_contiguous:
            return data.tobytes()
        return data
    raise TypeError(f"{field} must be bytes, bytearray, memoryview or None, got {type(data).__name__}")


def byte_len(data: BytesLike | None) -> int:
    """Length on the wire: -1 for null."""
    if data is None:
        return -1
    if isinstance(data, memoryview):
        return data.nbytes
    return len(data)


def encode_headers(headers: Sequence[Header]) -> tuple[bytes, int]:
    """Encode the v2 headers block (count + entries); returns (bytes, size)."""
    if isinstance(headers, (str, bytes, bytearray, memoryview)) or not isinstance(headers, Sequence):
        raise TypeError(
            f"headers must be a sequence of (str, bytes | None) tuples, got {type(headers).__name__}"
        )
    parts = [encode_varint(len(headers))]
    for i, header in enumerate(headers):
        if not isinstance(header, tuple) or len(header) != 2:
            raise TypeError(f"header {i} must be a (str, bytes | None) tuple, got {header!r:.80}")
        hkey, hval = header
        if not isinstance(hkey, str):
            raise TypeError(f"header {i} key must be a str, got {type(hkey).__name__}")
        kb = hkey.encode("utf-8")
        parts.append(encode_varint(len(kb)))
        parts.append(kb)
        try:
            hv = coerce_bytes(f"header {hkey!r} value", hval)
        except TypeError:
            raise TypeError(
                f"header {hkey!r} value must be bytes, bytearray, memoryview or None, got {type(hval).__name__}"
            ) from None
        if hv is None:
            parts.append(_NULL_LEN)
        else:
            parts.append(encode_varint(byte_len(hv)))
            parts.append(bytes(hv))
    out = b"".join(parts)
    return out, len(out)


# ---------------------------------------------------------------- one record
def record_size(offset_delta: int, timestamp_delta: int, key_size: int, value_size: int, headers_size: int) -> int:
    """Bytes the record takes in the batch, its length prefix included (``record_size`` in C).

    ``key_size``/``value_size`` are -1 for null; ``headers_size`` is the encoded headers block's.
    """
    L = _VARINT_LEN
    td, od, k, v = timestamp_delta, offset_delta, key_size, value_size
    body = (
        1
        + (L[td] if 0 <= td < _TABLE_SIZE else varint_size(td))
        + (L[od] if 0 <= od < _TABLE_SIZE else varint_size(od))
        + (L[k] + k if 0 <= k < _TABLE_SIZE else varint_size(k) + (k if k > 0 else 0))
        + (L[v] + v if 0 <= v < _TABLE_SIZE else varint_size(v) + (v if v > 0 else 0))
        + headers_size
    )
    return (L[body] if body < _TABLE_SIZE else varint_size(body)) + body


def encode_record(
    offset_delta: int, timestamp_delta: int, key: BytesLike | None, value: BytesLike | None, headers: bytes
) -> bytes:
    """One record, length prefix included (``append_one`` in C writes the same bytes in place).

    ``key``/``value`` are bytes-like (a memoryview of single bytes) or None; ``headers``
    is the encoded headers block (:data:`NO_HEADERS` for none).
    """
    V = _VARINT
    td = timestamp_delta
    tde = V[td] if 0 <= td < _TABLE_SIZE else encode_unsigned_varint(zigzag(td))
    od = offset_delta
    ode = V[od] if 0 <= od < _TABLE_SIZE else encode_unsigned_varint(zigzag(od))
    klen = -1 if key is None else len(key)
    vlen = -1 if value is None else len(value)
    ke = _NULL_LEN if klen < 0 else V[klen] if klen < _TABLE_SIZE else encode_unsigned_varint(klen << 1)
    ve = _NULL_LEN if vlen < 0 else V[vlen] if vlen < _TABLE_SIZE else encode_unsigned_varint(vlen << 1)
    body = len(tde) + len(ode) + len(ke) + len(ve) + len(headers) + 1
    if klen > 0:
        body += klen
    if vlen > 0:
        body += vlen
    length = V[body] if body < _TABLE_SIZE else encode_unsigned_varint(body << 1)
    return b"".join((length, _ATTRIBUTES, tde, ode, ke, key or b"", ve, value or b"", headers))


def has_room(pos: int, write_limit: int, records_start: int, ratio: float, num_records: int, size: int) -> bool:
    """The builder's room rule (Java's ``MemoryRecordsBuilder.hasRoomFor``; ``has_room`` in C).

    Always true for an empty batch. ``ratio`` is the estimated compression ratio, or
    0.0 for an uncompressed batch, whose sizes are exact; a compressed batch's bytes
    so far and the record's are estimated as ``ratio * 1.05`` of their uncompressed size.
    """
    if num_records == 0:
        return True
    if ratio > 0:
        written = records_start + int((pos - records_start) * ratio * COMPRESSION_RATE_ESTIMATION_FACTOR)
        size = int(size * ratio * COMPRESSION_RATE_ESTIMATION_FACTOR)
    else:
        written = pos
    if write_limit <= written:
        return False
    return write_limit >= written + size


def append_record(
    buf: bytearray,
    pos: int,
    write_limit: int,
    records_start: int,
    ratio: float,
    num_records: int,
    timestamp_delta: int,
    key: Any,
    value: Any,
    headers: bytes | None,
) -> int:
    """Append one record at ``pos`` if it has room; the new position, or -1 (nothing written).

    The reference of ``kproducer._speedups.append_record``, argument for argument:
    the record's offset delta is ``num_records``; ``headers`` is the encoded
    headers block or None (no headers).
    """
    if not isinstance(buf, bytearray):
        raise TypeError(f"buffer must be a bytearray, got {type(buf).__name__}")
    if key is not None and key.__class__ is not bytes:
        key = coerce_bytes("key", key)
    if value is not None and value.__class__ is not bytes:
        value = coerce_bytes("value", value)
    rec = encode_record(num_records, timestamp_delta, key, value, headers if headers is not None else NO_HEADERS)
    if not has_room(pos, write_limit, records_start, ratio, num_records, len(rec)):
        return -1
    end = pos + len(rec)
    buf[pos:end] = rec
    return end


# ---------------------------------------------------------------- records already written
def largest_record(buf: BytesLike, start: int, end: int) -> int:
    """The size of the largest v2 record in ``buf[start:end]`` (records as written, uncompressed),
    0 when there is none: each record is its length as a zigzag varint, then that many bytes.

    What ``record-size-max`` reports per batch, as Java's Sender records each batch's largest
    record (``ProducerBatch.maxRecordSize``); read from the bytes so that every append path
    (send, the C send lane, the bulk calls) is counted alike at no cost per record.
    """
    largest = 0
    pos = start
    while pos < end:
        first = pos
        u = buf[pos]
        pos += 1
        if u & 0x80:  # a length of 64 bytes or more: more varint bytes
            u &= 0x7F
            shift = 7
            while True:
                byte = buf[pos]
                pos += 1
                u |= (byte & 0x7F) << shift
                if not byte & 0x80:
                    break
                shift += 7
        length = (u >> 1) ^ -(u & 1)
        if length < 0 or pos + length > end:
            raise ValueError(f"corrupt record at byte {first}: length {length} past the end of the records ({end})")
        size = pos - first + length
        if size > largest:
            largest = size
        pos += length
    return largest
