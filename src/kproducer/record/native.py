"""The native hot path (``kproducer._speedups``, C) and its pure-Python twin, behind one set of names.

The C extension is built at install time with the machine's compiler (setup.py).
When it is missing, or ``KPRODUCER_PURE_PYTHON=1`` is set, the pure-Python
functions below run instead; they define the semantics and the tests check that
both agree byte for byte. ``AVAILABLE`` says which one is in use.

Argument conventions shared by both:

- ``ratio``: the batch's estimated compression ratio, or ``0.0`` for an
  uncompressed batch (sizes are then exact).
- ``headers``: the encoded v2 headers block (count + entries) or None (no headers).
- Arrow columns are ``(offsets, data, validity, array_offset, length, offset_width)``:
  the buffers of a binary/string (width 4) or large_binary/large_string (width 8) array.
- ``indices``: None (rows ``start..end``) or an int64 buffer of row numbers,
  of which entries ``start..end`` are appended.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Sequence
from typing import Any

__all__ = [
    "AVAILABLE",
    "ArrowColumn",
    "append_arrow",
    "append_record",
    "append_seq",
    "murmur2",
    "partition_arrow",
    "partition_seq",
    "py",
    "sizes_arrow",
    "sizes_seq",
]

log = logging.getLogger(__name__)

ArrowColumn = tuple[Any, Any, Any, int, int, int]
COMPRESSION_RATE_ESTIMATION_FACTOR = 1.05
_NO_HEADERS = b"\x00"


def encode_unsigned_varint(u: int) -> bytes:
    """Base-128 little-endian varint of a non-negative int (records and the protocol's compact fields)."""
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


# ---------------------------------------------------------------- pure Python
class _Pure:
    """The reference implementation (also the fallback)."""

    _uvarint = staticmethod(encode_unsigned_varint)

    @classmethod
    def _varint(cls, n: int) -> bytes:
        return cls._uvarint(n << 1 if n >= 0 else ((-n) << 1) - 1)

    @staticmethod
    def _as_bytes(field: str, data: Any) -> bytes | None:
        if data is None or data.__class__ is bytes:
            return data
        if isinstance(data, (bytes, bytearray)):
            return bytes(data)
        if isinstance(data, memoryview):
            return data.tobytes()
        raise TypeError(f"{field} must be bytes, bytearray, memoryview or None, got {type(data).__name__}")

    @classmethod
    def _encode(cls, offset_delta: int, ts_delta: int, key: bytes | None, value: bytes | None, headers: bytes) -> bytes:
        v = cls._varint
        parts = [b"\x00", v(ts_delta), v(offset_delta)]
        for data in (key, value):
            if data is None:
                parts.append(b"\x01")
            else:
                parts.append(v(len(data)))
                parts.append(data)
        parts.append(headers)
        body = b"".join(parts)
        return v(len(body)) + body

    @staticmethod
    def _has_room(
        pos: int, write_limit: int, records_start: int, ratio: float, num_records: int, size: int
    ) -> bool:
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

    @classmethod
    def append_record(
        cls,
        buf: bytearray,
        pos: int,
        write_limit: int,
        records_start: int,
        ratio: float,
        num_records: int,
        ts_delta: int,
        key: Any,
        value: Any,
        headers: bytes | None,
    ) -> int:
        if not isinstance(buf, bytearray):
            raise TypeError(f"buffer must be a bytearray, got {type(buf).__name__}")
        k = cls._as_bytes("key", key)
        v = cls._as_bytes("value", value)
        rec = cls._encode(num_records, ts_delta, k, v, headers if headers is not None else _NO_HEADERS)
        if not cls._has_room(pos, write_limit, records_start, ratio, num_records, len(rec)):
            return -1
        end = pos + len(rec)
        buf[pos:end] = rec
        return end

    @staticmethod
    def _seq_get(col: Sequence[Any] | None, i: int, name: str) -> bytes | None:
        if col is None:
            return None
        item = col[i]
        if item is None or item.__class__ is bytes:
            return item
        if isinstance(item, (bytes, bytearray)):
            return bytes(item)
        if isinstance(item, memoryview) and item.c_contiguous:
            return item.tobytes()
        raise TypeError(f"{name}s[{i}] must be bytes, bytearray, memoryview or None, got {type(item).__name__}")

    @staticmethod
    def _arrow_reader(col: ArrowColumn | None, name: str) -> Any:
        if col is None:
            return None
        if not isinstance(col, tuple) or len(col) != 6:
            raise TypeError(
                f"{name} column must be (offsets, data, validity, array_offset, length, offset_width), "
                f"got {type(col).__name__}"
            )
        offsets, data, validity, array_offset, length, width = col
        if width not in (4, 8):
            raise ValueError(f"{name} column offset width must be 4 or 8, got {width}")
        off = memoryview(offsets).cast("B").cast("i" if width == 4 else "q")
        dat = memoryview(data).cast("B") if data is not None else memoryview(b"")
        val = memoryview(validity).cast("B") if validity is not None else None
        if len(off) < array_offset + length + 1:
            raise ValueError(f"{name} column offsets buffer is too short for {length} values")

        def get(i: int) -> bytes | None:
            j = array_offset + i
            if val is not None and not (val[j >> 3] >> (j & 7)) & 1:
                return None
            a, b = off[j], off[j + 1]
            if a < 0 or b < a or b > len(dat):
                raise ValueError(f"{name} column offsets [{a}, {b}) at row {i} are outside the data buffer")
            return bytes(dat[a:b])

        get.length = length  # type: ignore[attr-defined]
        return get

    @classmethod
    def _append_many(
        cls,
        get_value: Any,
        get_key: Any,
        n_values: int,
        n_keys: int | None,
        buf: bytearray,
        pos: int,
        write_limit: int,
        records_start: int,
        ratio: float,
        num_records: int,
        ts_delta: int,
        indices: Any,
        start: int,
        end: int,
        headers: bytes | None,
    ) -> tuple[int, int]:
        if not isinstance(buf, bytearray):
            raise TypeError(f"buffer must be a bytearray, got {type(buf).__name__}")
        if n_keys is not None and n_keys != n_values:
            raise ValueError(f"keys has {n_keys} entries but values has {n_values}; they must be the same length")
        idx = memoryview(indices).cast("B").cast("q") if indices is not None else None
        limit = len(idx) if idx is not None else n_values
        if start < 0 or end < start or end > limit:
            raise ValueError(f"start/end [{start}, {end}) out of range 0..{limit}")
        hdr = headers if headers is not None else _NO_HEADERS
        count = 0
        for j in range(start, end):
            i = idx[j] if idx is not None else j
            if not 0 <= i < n_values:
                raise ValueError(f"record index {i} out of range 0..{n_values}")
            k = get_key(i) if get_key is not None else None
            v = get_value(i)
            rec = cls._encode(num_records, ts_delta, k, v, hdr)
            if not cls._has_room(pos, write_limit, records_start, ratio, num_records, len(rec)):
                break
            end_pos = pos + len(rec)
            buf[pos:end_pos] = rec
            pos = end_pos
            num_records += 1
            count += 1
        return pos, count

    @classmethod
    def append_seq(
        cls,
        buf: bytearray,
        pos: int,
        write_limit: int,
        records_start: int,
        ratio: float,
        num_records: int,
        ts_delta: int,
        values: Sequence[Any],
        keys: Sequence[Any] | None,
        indices: Any,
        start: int,
        end: int,
        headers: bytes | None,
    ) -> tuple[int, int]:
        if values is None:
            raise TypeError("values must not be None")
        if not isinstance(values, Sequence):
            raise TypeError(f"values must be a sequence of bytes (or None), got {type(values).__name__}")
        if keys is not None and not isinstance(keys, Sequence):
            raise TypeError(f"keys must be a sequence of bytes (or None), got {type(keys).__name__}")
        return cls._append_many(
            lambda i: cls._seq_get(values, i, "value"),
            (lambda i: cls._seq_get(keys, i, "key")) if keys is not None else None,
            len(values),
            len(keys) if keys is not None else None,
            buf, pos, write_limit, records_start, ratio, num_records, ts_delta, indices, start, end, headers,
        )

    @classmethod
    def append_arrow(
        cls,
        buf: bytearray,
        pos: int,
        write_limit: int,
        records_start: int,
        ratio: float,
        num_records: int,
        ts_delta: int,
        values: ArrowColumn,
        keys: ArrowColumn | None,
        indices: Any,
        start: int,
        end: int,
        headers: bytes | None,
    ) -> tuple[int, int]:
        if values is None:
            raise TypeError("values must not be None")
        gv = cls._arrow_reader(values, "value")
        gk = cls._arrow_reader(keys, "key")
        return cls._append_many(
            gv, gk, gv.length, gk.length if gk is not None else None,
            buf, pos, write_limit, records_start, ratio, num_records, ts_delta, indices, start, end, headers,
        )

    @staticmethod
    def _partition(get: Any, length: int, start: int, end: int, num_partitions: int) -> list[bytes]:
        from kproducer.partitioner import murmur2 as _py_murmur2

        if num_partitions < 1:
            raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
        if start < 0 or end < start or end > length:
            raise ValueError(f"start/end [{start}, {end}) out of range 0..{length}")
        groups: list[list[int]] = [[] for _ in range(num_partitions + 1)]
        for i in range(start, end):
            k = get(i)
            p = num_partitions if k is None else (_py_murmur2(k) & 0x7FFFFFFF) % num_partitions
            groups[p].append(i)
        return [struct.pack(f"<{len(g)}q", *g) for g in groups]

    @classmethod
    def partition_seq(cls, keys: Sequence[Any], start: int, end: int, num_partitions: int) -> list[bytes]:
        if keys is None:
            raise TypeError("keys must not be None")
        return cls._partition(lambda i: cls._seq_get(keys, i, "key"), len(keys), start, end, num_partitions)

    @classmethod
    def partition_arrow(cls, keys: ArrowColumn, start: int, end: int, num_partitions: int) -> list[bytes]:
        if keys is None:
            raise TypeError("keys must not be None")
        get = cls._arrow_reader(keys, "key")
        return cls._partition(get, get.length, start, end, num_partitions)

    @staticmethod
    def _sizes(get: Any, length: int, start: int, end: int) -> tuple[int, int]:
        if start < 0 or end < start or end > length:
            raise ValueError(f"start/end [{start}, {end}) out of range 0..{length}")
        total, largest = 0, -1
        for i in range(start, end):
            item = get(i)
            n = -1 if item is None else len(item)
            total += max(n, 0)
            largest = max(largest, n)
        return total, largest

    @classmethod
    def sizes_seq(cls, values: Sequence[Any] | None, start: int, end: int) -> tuple[int, int]:
        if values is None:
            return 0, -1
        return cls._sizes(lambda i: cls._seq_get(values, i, "value"), len(values), start, end)

    @classmethod
    def sizes_arrow(cls, values: ArrowColumn | None, start: int, end: int) -> tuple[int, int]:
        if values is None:
            return 0, -1
        get = cls._arrow_reader(values, "value")
        return cls._sizes(get, get.length, start, end)

    @staticmethod
    def murmur2(data: Any) -> int:
        from kproducer.partitioner import murmur2 as _py_murmur2

        return _py_murmur2(data)


py = _Pure
"""The pure-Python implementation, always importable (the tests compare it with the C one)."""


def _load_native() -> Any:
    if os.environ.get("KPRODUCER_PURE_PYTHON", "").strip() not in ("", "0"):
        log.debug("KPRODUCER_PURE_PYTHON is set: using the pure-Python hot path")
        return None
    try:
        from kproducer import _speedups  # type: ignore[attr-defined]
    except ImportError as e:
        log.info("kproducer C speedups unavailable (%s); using the pure-Python hot path", e)
        return None
    return _speedups


c: Any = _load_native()
"""The C module, or None when it is not built or KPRODUCER_PURE_PYTHON=1."""

AVAILABLE: bool = c is not None
_impl: Any = c if c is not None else _Pure

murmur2 = _impl.murmur2
append_record = _impl.append_record
append_seq = _impl.append_seq
append_arrow = _impl.append_arrow
partition_seq = _impl.partition_seq
partition_arrow = _impl.partition_arrow
sizes_seq = _impl.sizes_seq
sizes_arrow = _impl.sizes_arrow
