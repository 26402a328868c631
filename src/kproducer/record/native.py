"""The native hot path (``kproducer._speedups``, C) and its pure-Python twin, behind one set of names.

The C extension is built at install time with the machine's compiler (setup.py);
:mod:`kproducer.record.c_extension` decides which one runs. When it is missing,
or ``KPRODUCER_PURE_PYTHON=1`` is set, the pure-Python functions below run
instead. They are built on the references the C code mirrors: the v2 record
encoder :func:`kproducer.record.default_record.append_record`, the key hash
:func:`kproducer.murmur2.partition_for_key` and the Arrow column reader
:func:`kproducer.record.arrow_column.column_reader`; the tests check that both
agree byte for byte. ``AVAILABLE`` says which one is in use.

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

import struct
import threading
from collections.abc import Callable, Sequence
from typing import Any, cast

from kproducer.murmur2 import murmur2 as _murmur2
from kproducer.murmur2 import partition_for_key
from kproducer.record.arrow_column import ArrowColumn, column_reader
from kproducer.record.c_extension import AVAILABLE, c
from kproducer.record.default_record import NO_HEADERS
from kproducer.record.default_record import append_record as _append_record
from kproducer.record.default_record import largest_record as _largest_record

__all__ = [
    "AVAILABLE",
    "ArrowColumn",
    "append_arrow",
    "append_record",
    "append_seq",
    "c",
    "largest_record",
    "murmur2",
    "new_lock",
    "partition_arrow",
    "partition_seq",
    "py",
    "sizes_arrow",
    "sizes_seq",
]


# ---------------------------------------------------------------- pure Python
class _Pure:
    """The pure-Python twin of each C function (the fallback), on the references named above."""

    append_record = staticmethod(_append_record)
    largest_record = staticmethod(_largest_record)
    murmur2 = staticmethod(_murmur2)

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
        hdr = headers if headers is not None else NO_HEADERS
        count = 0
        for j in range(start, end):
            i = idx[j] if idx is not None else j
            if not 0 <= i < n_values:
                raise ValueError(f"record index {i} out of range 0..{n_values}")
            k = get_key(i) if get_key is not None else None
            end_pos = _append_record(buf, pos, write_limit, records_start, ratio, num_records, ts_delta, k, get_value(i), hdr)
            if end_pos < 0:
                break
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
        gv = column_reader(values, "value")
        gk = column_reader(keys, "key") if keys is not None else None
        return cls._append_many(
            gv, gk, values[4], keys[4] if keys is not None else None,
            buf, pos, write_limit, records_start, ratio, num_records, ts_delta, indices, start, end, headers,
        )

    @staticmethod
    def _partition(get: Callable[[int], bytes | None], length: int, start: int, end: int, num_partitions: int) -> list[bytes]:
        if num_partitions < 1:
            raise ValueError(f"num_partitions must be >= 1, got {num_partitions}")
        if start < 0 or end < start or end > length:
            raise ValueError(f"start/end [{start}, {end}) out of range 0..{length}")
        groups: list[list[int]] = [[] for _ in range(num_partitions + 1)]
        for i in range(start, end):
            k = get(i)
            p = num_partitions if k is None else partition_for_key(k, num_partitions)
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
        return cls._partition(column_reader(keys, "key"), keys[4], start, end, num_partitions)

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
        return cls._sizes(column_reader(values, "value"), values[4], start, end)


py = _Pure
"""The pure-Python implementation, always importable (the tests compare it with the C one)."""


_impl: Any = c if c is not None else _Pure

murmur2 = _impl.murmur2
largest_record = _impl.largest_record
append_record = _impl.append_record
append_seq = _impl.append_seq
append_arrow = _impl.append_arrow
partition_seq = _impl.partition_seq
partition_arrow = _impl.partition_arrow
sizes_seq = _impl.sizes_seq
sizes_arrow = _impl.sizes_arrow


def new_lock() -> threading.Lock:
    """A new lock for a partition deque or a sticky partitioner: ``kproducer._speedups.Lock`` when
    the C extension runs, so that its send lane takes and releases the lock without calling Python
    methods; its twin ``threading.Lock`` otherwise. Both have the same interface and errors."""
    if c is not None:
        return cast("threading.Lock", c.Lock())
    return threading.Lock()
