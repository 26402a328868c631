"""Arrow binary and string columns as the record encoder reads them: buffers, not Python objects.

A column is the tuple ``(offsets, data, validity, array_offset, length, offset_width)``
of a binary/string (offset width 4) or large_binary/large_string (width 8) array,
as the Arrow columnar format lays it out: row ``i`` is
``data[offsets[array_offset + i]:offsets[array_offset + i + 1]]``, null when its
validity bit is clear. :func:`arrow_column` takes those buffers from a pyarrow
array (without importing pyarrow); :func:`column_reader` is the pure-Python
reader of one row, which ``column_from_arrow``/``column_get`` in ``_speedups.c``
mirror. Every Arrow path (``Producer.send_arrow``, the Spark sink, the legacy
magic 0/1 builder) gets its columns here.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["ArrowColumn", "ColumnReader", "arrow_column", "column_nbytes", "column_reader", "column_rows"]

ArrowColumn = tuple[Any, Any, Any, int, int, int]
ColumnReader = Callable[[int], "bytes | None"]

_BINARY_WIDTH = {"binary": 4, "string": 4, "utf8": 4, "large_binary": 8, "large_string": 8, "large_utf8": 8}


def arrow_column(array: Any, name: str) -> ArrowColumn:
    """The (offsets, data, validity, offset, length, width) of a binary/string Arrow array."""
    width = _BINARY_WIDTH.get(str(array.type))
    if width is None:
        raise TypeError(
            f"column {name!r} has Arrow type {array.type}; it must be binary, string, large_binary or large_string"
        )
    validity, offsets, data = array.buffers()[:3]
    if array.null_count == 0:
        validity = None
    return (offsets, data, validity, array.offset, len(array), width)


def _offsets(offsets: Any, width: int) -> memoryview:
    return memoryview(offsets).cast("B").cast("i" if width == 4 else "q")


def column_reader(col: ArrowColumn, name: str) -> ColumnReader:
    """A function giving row ``i`` of the column as bytes (None for null), with the C reader's checks."""
    if not isinstance(col, tuple) or len(col) != 6:
        raise TypeError(
            f"{name} column must be (offsets, data, validity, array_offset, length, offset_width), "
            f"got {type(col).__name__}"
        )
    offsets, data, validity, array_offset, length, width = col
    if width not in (4, 8):
        raise ValueError(f"{name} column offset width must be 4 or 8, got {width}")
    off = _offsets(offsets, width)
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

    return get


def column_rows(col: ArrowColumn, name: str = "value") -> list[bytes | None]:
    """Every row of the column as Python bytes (None for null): for paths that need objects."""
    get = column_reader(col, name)
    return [get(i) for i in range(col[4])]


def column_nbytes(col: ArrowColumn) -> int:
    """The bytes the column's rows span in its data buffer (two offsets read, nulls included)."""
    offsets, _data, _validity, array_offset, length, width = col
    if length == 0 or offsets is None:
        return 0
    off = _offsets(offsets, width)
    return int(off[array_offset + length] - off[array_offset])
