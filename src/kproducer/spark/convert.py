"""Turn Spark's rows and Arrow batches into the producer's record fields.

The Arrow path (:func:`plan_arrow_batch`) cuts each batch into calls of the
producer's bulk API, ``Producer.send_arrow``, which encodes records straight
from the value and key columns' offsets and data buffers: no Python object per
row. ``send_arrow`` takes one topic, one partition (or none), one timestamp and
one header list per call, so the planner

* groups rows by the ``topic`` column (unless the ``topic`` option is given) and
  by the ``partition`` column when it has no nulls: a stable sort, so each
  Kafka partition still receives its rows in row order;
* then cuts each group into runs of consecutive rows that agree on everything
  else (a partition column with some nulls, ``timestamp``, ``headers``).

A run of at least ``min_run`` rows becomes one bulk call. Shorter runs (per-row
timestamps or headers that change from row to row) are sent row by row with
``send()``, converted by :func:`arrow_to_columns`, whose binary and string
columns are read as offsets and data buffers (:func:`binary_buffers`) and
sliced into ``bytes``. Either way the calls are made in row order, so the
order of records within a Kafka partition is the order of the rows, as with
Spark's own sink. The row path is kept for comparison (``writer=row``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from kproducer.record.arrow_column import arrow_column, column_nbytes
from kproducer.spark.contract import SinkSchema

__all__ = [
    "MIN_BULK_RUN",
    "BinaryBuffers",
    "BulkCall",
    "RecordColumns",
    "arrow_to_columns",
    "binary_buffers",
    "binary_nbytes",
    "plan_arrow_batch",
    "row_to_record",
]

# Rows sharing topic, partition, timestamp and headers below which a bulk call
# costs more than per-row send() calls (a bulk call has a fixed cost of tens of µs).
MIN_BULK_RUN = 16

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

    offsets_buf, data_buf, _validity, array_offset, n, width = arrow_column(arr, "value")
    off_dtype: Any = np.int32 if width == 4 else np.int64
    if n == 0 or offsets_buf is None:
        return BinaryBuffers(offsets=np.zeros(1, dtype=off_dtype), data=b"", valid=None, nbytes=0)
    offsets = np.frombuffer(offsets_buf, dtype=off_dtype, count=array_offset + n + 1)[array_offset:]
    start = int(offsets[0])
    end = int(offsets[-1])
    # One copy of just this slice's bytes; cells are then sliced out of it.
    data = data_buf.slice(start, end - start).to_pybytes() if data_buf is not None and end > start else b""
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


def _timestamps_ms_array(arr: Any) -> tuple[Any, Any]:
    """Arrow timestamps (any unit) as epoch milliseconds (int64 numpy, 0 where null) and the null mask.

    Floored like Java's ``Instant.toEpochMilli``. Spark sends TimestampType as
    UTC instants; TimestampNTZ wall-clock values are taken as UTC. The mask is
    None when there is no null.
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
    nulls = ints.is_null().to_numpy(zero_copy_only=False) if ints.null_count else None
    return ms, nulls


def _timestamps_ms(arr: Any) -> list[int | None]:
    """Arrow timestamps as epoch milliseconds, None where null (see :func:`_timestamps_ms_array`)."""
    ms, nulls = _timestamps_ms_array(arr)
    out: list[int | None] = ms.tolist()
    if nulls is not None:
        for i in nulls.nonzero()[0].tolist():
            out[i] = None
    return out


def _headers(arr: Any) -> list[list[Header] | None]:
    out: list[list[Header] | None] = []
    for cell in arr.to_pylist():
        out.append(None if cell is None else [(h["key"], h["value"]) for h in cell])
    return out


def arrow_to_columns(
    batch: Any,
    schema: SinkSchema,
    topic_option: str | None,
    headers: list[list[Header] | None] | None = None,
) -> RecordColumns:
    """Convert one ``pyarrow.RecordBatch`` from Spark into :class:`RecordColumns`.

    ``headers`` are the batch's headers when the caller has already converted them.
    """
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
    if headers is None and schema.headers is not None:
        headers = _headers(batch.column(schema.headers))
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


def binary_nbytes(arr: Any) -> int:
    """The bytes a binary or string Arrow array spans in its data buffer, read from two offsets."""
    return column_nbytes(arrow_column(arr, "value"))


@dataclass(slots=True, frozen=True)
class BulkCall:
    """Consecutive rows for one ``Producer.send_arrow`` call: they share every field but key and value.

    ``batch`` has the value column (and the key column, when the schema has
    one) as binary, in row order.
    """

    topic: str
    partition: int | None
    timestamp: int | None  # epoch ms; None: the producer's clock
    headers: list[Header] | None
    batch: Any  # pyarrow.RecordBatch


def _is_constant(arr: Any) -> bool:
    """True when a null-free Arrow array holds one distinct value (or none)."""
    import pyarrow.compute as pc

    if len(arr) < 2:
        return True
    mm = pc.min_max(arr)
    return bool(mm["min"] == mm["max"])


def _changes(arr: Any, nulls: Any = None) -> Any:
    """Where row i differs from row i-1 (a numpy bool array of ``len(arr) - 1``); nulls equal each other."""
    a = arr[1:] != arr[:-1]
    if nulls is not None:
        a |= nulls[1:] != nulls[:-1]
    return a


def _header_key(cell: list[Header] | None) -> tuple[Header, ...]:
    return tuple(cell) if cell else ()


def _bulk_columns(batch: Any, schema: SinkSchema) -> Any:
    """The value (and key) columns only, string columns viewed as binary (a zero-copy cast)."""
    import pyarrow as pa

    names = [schema.value] + ([schema.key] if schema.key is not None else [])
    cols = []
    for name in names:
        col = batch.column(name)
        if pa.types.is_string(col.type):
            col = col.cast(pa.binary())
        elif pa.types.is_large_string(col.type):
            col = col.cast(pa.large_binary())
        cols.append(col)
    return pa.RecordBatch.from_arrays(cols, names=names)


def plan_arrow_batch(
    batch: Any, schema: SinkSchema, topic_option: str | None, min_run: int = MIN_BULK_RUN
) -> list[BulkCall | RecordColumns]:
    """Cut one Arrow batch into bulk calls and row-by-row stretches, in the order they must be sent.

    See the module docstring for the rules; a null topic (with no ``topic``
    option) raises ValueError, as on the row path.
    """
    import numpy as np
    import pyarrow.compute as pc

    n = batch.num_rows
    if n == 0:
        return []
    topic_col = None
    if topic_option is None:
        assert schema.topic is not None  # validate_schema requires the column without the option
        topic_col = batch.column(schema.topic)
        if topic_col.null_count:
            raise ValueError("a row has a null topic and no 'topic' option is set")
        if _is_constant(topic_col):
            topic_option, topic_col = topic_col[0].as_py(), None
    part_col = batch.column(schema.partition) if schema.partition is not None else None
    if part_col is not None and part_col.null_count == n:
        part_col = None
    # Group by topic and by a null-free partition column: a stable sort keeps row order within a group.
    sort_keys = []
    if topic_col is not None:
        sort_keys.append((schema.topic, "ascending"))
    if part_col is not None and part_col.null_count == 0 and not _is_constant(part_col):
        sort_keys.append((schema.partition, "ascending"))
    if sort_keys:
        batch = batch.take(pc.sort_indices(batch, sort_keys=sort_keys))
        if topic_col is not None:
            topic_col = batch.column(schema.topic)
        if part_col is not None:
            part_col = batch.column(schema.partition)

    change = np.zeros(n - 1, dtype=bool)
    topics: Any = None  # dictionary indices, so that no Python str is made per row
    topic_names: list[str] = []
    if topic_col is not None:
        encoded = pc.dictionary_encode(topic_col)
        topics = encoded.indices.to_numpy(zero_copy_only=False)
        topic_names = encoded.dictionary.to_pylist()
        change |= _changes(topics)
    parts: Any = None
    part_nulls: Any = None
    if part_col is not None:
        parts = part_col.fill_null(0).to_numpy(zero_copy_only=False)
        part_nulls = part_col.is_null().to_numpy(zero_copy_only=False) if part_col.null_count else None
        change |= _changes(parts, part_nulls)
    stamps: Any = None
    stamp_nulls: Any = None
    if schema.timestamp is not None:
        ts_col = batch.column(schema.timestamp)
        if ts_col.null_count < n:
            stamps, stamp_nulls = _timestamps_ms_array(ts_col)
            change |= _changes(stamps, stamp_nulls)
    headers: list[list[Header] | None] | None = None
    if schema.headers is not None:
        h_col = batch.column(schema.headers)
        if h_col.null_count < n:
            headers = _headers(h_col)
            keys = [_header_key(h) for h in headers]
            change |= np.fromiter(
                (a != b for a, b in zip(keys, keys[1:], strict=False)), dtype=bool, count=n - 1
            )

    bounds = [0, *(np.flatnonzero(change) + 1).tolist(), n]
    out: list[BulkCall | RecordColumns] = []
    bulk = _bulk_columns(batch, schema)
    short_from = -1  # first row of the pending stretch of short runs
    whole = len(bounds) == 2  # one run: a bulk call whatever its length
    for start, end in zip(bounds, bounds[1:], strict=False):
        if end - start < min_run and not whole:
            if short_from < 0:
                short_from = start
            continue
        if short_from >= 0:
            out.append(_row_stretch(batch, schema, topic_option, headers, short_from, start))
            short_from = -1
        partition = None if parts is None or (part_nulls is not None and part_nulls[start]) else int(parts[start])
        stamp = None if stamps is None or (stamp_nulls is not None and stamp_nulls[start]) else int(stamps[start])
        topic = topic_option if topics is None else topic_names[topics[start]]
        assert topic is not None
        out.append(
            BulkCall(
                topic=topic,
                partition=partition,
                timestamp=stamp,
                headers=(headers[start] or None) if headers is not None else None,
                batch=bulk.slice(start, end - start),
            )
        )
    if short_from >= 0:
        out.append(_row_stretch(batch, schema, topic_option, headers, short_from, n))
    return out


def _row_stretch(
    batch: Any,
    schema: SinkSchema,
    topic_option: str | None,
    headers: list[list[Header] | None] | None,
    start: int,
    end: int,
) -> RecordColumns:
    return arrow_to_columns(
        batch.slice(start, end - start),
        schema,
        topic_option,
        headers=headers[start:end] if headers is not None else None,
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
