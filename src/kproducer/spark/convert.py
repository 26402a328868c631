"""Turn Spark's rows and Arrow batches into the producer's record fields.

The Arrow path works column by column: a binary or string column is read as
its offsets and data buffers (:func:`binary_buffers`, the shape the producer's
bulk API takes) and sliced into the ``bytes`` that ``send()`` needs, with no
intermediate Python object per cell; nulls come from the validity bitmap. The
row path is kept for comparison and for the ``writer=row`` option.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from kproducer.spark.contract import SinkSchema

__all__ = [
    "BinaryBuffers",
    "RecordColumns",
    "arrow_to_columns",
    "binary_buffers",
    "row_to_record",
]

Header = tuple[str, bytes | None]
RecordFields = tuple[str, bytes | None, bytes | None, int | None, int | None, list[Header] | None]


@dataclass(slots=True, frozen=True)
class BinaryBuffers:
    """An Arrow binary/string column as raw buffers: ``data[offsets[i]:offsets[i+1]]`` is cell i.

    ``offsets`` has ``length + 1`` entries, already shifted for a sliced array;
    ``valid`` is None when the column has no nulls.
    """

    offsets: Any  # numpy int32/int64 array
    data: bytes
    valid: Any  # numpy bool array or None
    nbytes: int  # bytes of non-null cells

    def to_list(self) -> list[bytes | None]:
        """The cells as bytes (None for null), one slice each: what per-record send() takes."""
        data = self.data
        offs = self.offsets.tolist()
        out: list[bytes | None] = [data[a:b] for a, b in zip(offs, offs[1:], strict=False)]
        if self.valid is not None:
            for i in (~self.valid).nonzero()[0].tolist():
                out[i] = None
        return out


def binary_buffers(arr: Any) -> BinaryBuffers:
    """The offsets/data/validity buffers of a pyarrow binary, string or large variant."""
    import numpy as np
    import pyarrow as pa

    t = arr.type
    if pa.types.is_large_binary(t) or pa.types.is_large_string(t):
        off_dtype: Any = np.int64
    elif pa.types.is_binary(t) or pa.types.is_string(t):
        off_dtype = np.int32
    else:
        raise TypeError(f"expected a binary or string Arrow array, got {t}")
    n = len(arr)
    bufs = arr.buffers()
    if n == 0 or bufs[1] is None:
        return BinaryBuffers(offsets=np.zeros(1, dtype=off_dtype), data=b"", valid=None, nbytes=0)
    offsets = np.frombuffer(bufs[1], dtype=off_dtype, count=arr.offset + n + 1)[arr.offset :]
    start = int(offsets[0])
    end = int(offsets[-1])
    # One copy of just this slice's bytes; cells are then sliced out of it.
    data = bufs[2].slice(start, end - start).to_pybytes() if bufs[2] is not None and end > start else b""
    if start:
        offsets = offsets - start
    valid = None
    if arr.null_count:
        valid = arr.is_valid().to_numpy(zero_copy_only=False)
    return BinaryBuffers(offsets=offsets, data=data, valid=valid, nbytes=end - start)


@dataclass(slots=True)
class RecordColumns:
    """One Arrow batch as per-field lists (or a single topic), ready for a tight send loop."""

    num_rows: int
    values: list[bytes | None]
    keys: list[bytes | None] | None
    topic: str | None  # the one topic, when the option is given (or the column is absent)
    topics: list[str | None] | None
    partitions: list[int | None] | None
    timestamps: list[int | None] | None
    headers: list[list[Header] | None] | None
    nbytes: int  # key + value bytes


def _timestamps_ms(arr: Any) -> list[int | None]:
    """Arrow timestamps (any unit) as epoch milliseconds, floored like Java's ``Instant.toEpochMilli``.

    Spark sends TimestampType as UTC instants; TimestampNTZ wall-clock values are taken as UTC.
    """
    import numpy as np
    import pyarrow as pa

    unit = arr.type.unit
    ints = arr.cast(pa.int64())
    vals = ints.fill_null(0).to_numpy(zero_copy_only=False)
    if unit == "s":
        ms = vals * 1000
    elif unit == "ms":
        ms = vals
    else:
        ms = np.floor_divide(vals, 1000 if unit == "us" else 1_000_000)
    out: list[int | None] = ms.tolist()
    if ints.null_count:
        for i in ints.is_null().to_numpy(zero_copy_only=False).nonzero()[0].tolist():
            out[i] = None
    return out


def _headers(arr: Any) -> list[list[Header] | None]:
    out: list[list[Header] | None] = []
    for cell in arr.to_pylist():
        out.append(None if cell is None else [(h["key"], h["value"]) for h in cell])
    return out


def arrow_to_columns(batch: Any, schema: SinkSchema, topic_option: str | None) -> RecordColumns:
    """Convert one ``pyarrow.RecordBatch`` from Spark into :class:`RecordColumns`."""
    value_bufs = binary_buffers(batch.column(schema.value))
    nbytes = value_bufs.nbytes
    keys = None
    if schema.key is not None:
        key_bufs = binary_buffers(batch.column(schema.key))
        nbytes += key_bufs.nbytes
        keys = key_bufs.to_list()
    topics = None
    topic = topic_option
    if topic is None and schema.topic is not None:
        topics = batch.column(schema.topic).to_pylist()
    partitions = batch.column(schema.partition).to_pylist() if schema.partition is not None else None
    timestamps = _timestamps_ms(batch.column(schema.timestamp)) if schema.timestamp is not None else None
    headers = _headers(batch.column(schema.headers)) if schema.headers is not None else None
    return RecordColumns(
        num_rows=batch.num_rows,
        values=value_bufs.to_list(),
        keys=keys,
        topic=topic,
        topics=topics,
        partitions=partitions,
        timestamps=timestamps,
        headers=headers,
        nbytes=nbytes,
    )


def _to_bytes(v: Any) -> bytes | None:
    if v is None:
        return None
    if isinstance(v, str):
        return v.encode("utf-8")
    return bytes(v)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MS = timedelta(milliseconds=1)


def _to_ms(ts: datetime | None) -> int | None:
    """Exact epoch milliseconds; a naive datetime is local time, as PySpark hands TimestampType to rows."""
    if ts is None:
        return None
    aware = ts if ts.tzinfo is not None else ts.astimezone(UTC)
    return (aware - _EPOCH) // _ONE_MS


def row_to_record(row: Any, schema: SinkSchema, topic_option: str | None) -> RecordFields:
    """One Spark ``Row`` as ``(topic, key, value, partition, timestamp_ms, headers)``."""
    topic = (
        topic_option
        if topic_option is not None
        else (row[schema.topic] if schema.topic is not None else None)
    )
    if topic is None:
        raise ValueError("a row has a null topic and no 'topic' option is set")
    key = _to_bytes(row[schema.key]) if schema.key is not None else None
    value = _to_bytes(row[schema.value])
    partition = row[schema.partition] if schema.partition is not None else None
    timestamp = _to_ms(row[schema.timestamp]) if schema.timestamp is not None else None
    headers = None
    if schema.headers is not None:
        cells = row[schema.headers]
        headers = None if cells is None else [(h["key"], _to_bytes(h["value"])) for h in cells]
    return topic, key, value, partition, timestamp, headers
