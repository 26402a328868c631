"""The Producer's bulk calls: ``send_batch`` (sequences of bytes) and ``send_arrow`` (pyarrow columns).

Checked on the caller's thread, then handed to the same routing step as
``send()`` (``RecordRouter.route_many``) a range of rows at a time, without a
Python object per record; the column readers and the bulk future are in
:mod:`kproducer.bulk`. Interceptors and a custom partitioner must see each
record, so then the rows go through ``send()`` one by one. Each function takes
the producer and is bound as a :class:`~kproducer.producer.Producer` method.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from kproducer.bulk import BulkFuture, _encoded_headers, _fail_bulk, _OffsetSink
from kproducer.delivery import Callback, OnDelivery, resolve_bulk_callback
from kproducer.errors import KafkaError, ProducerClosedError
from kproducer.record.arrow_column import arrow_column as _arrow_column
from kproducer.record.builder import MAX_TIMESTAMP
from kproducer.validation import check_headers, check_partition, check_timestamp

if TYPE_CHECKING:
    from kproducer.avro.serializer import AvroFormat
    from kproducer.producer import Producer

log = logging.getLogger(__name__)

__all__ = ["send_arrow", "send_batch"]


def send_batch(
    producer: Producer,
    topic: str,
    values: Sequence[bytes | bytearray | memoryview | None],
    keys: Sequence[bytes | bytearray | memoryview | None] | None = None,
    *,
    partition: int | None = None,
    timestamp: int | None = None,
    headers: Iterable[tuple[str, bytes | None]] | None = None,
    callback: Callback | None = None,
    on_delivery: OnDelivery | None = None,
) -> BulkFuture:
    """Queue many records of one topic at once, without a Python object per record (see :mod:`kproducer.bulk`).

    ``values``: a list or tuple of ``bytes``, ``bytearray``, ``memoryview`` or
    ``None`` (serializers are applied when configured; without them other types
    are refused). ``keys``: ``None``, or a sequence of the same types and the
    same length as ``values``. ``partition``, ``timestamp``: as for :meth:`send`,
    applied to every record. ``headers``: one list of ``(str, bytes | str | None)``
    pairs (or a dict) put on every record.
    ``callback(metadata, exception)`` or ``on_delivery(err, msg)``: as for
    :meth:`send`, called once per record on the I/O thread.

    Returns one BulkFuture resolving to the records' RecordMetadata, in order. The
    rows take the same routing step as :meth:`send`.
    """
    tracing = producer._tracing
    if tracing is not None and tracing.active():
        # One span for the call (kproducer.tracing); its context goes into the rows' headers when asked.
        rows = len(values) if isinstance(values, Sequence) else 0
        return tracing.send_bulk(
            topic if type(topic) is str else None, rows, _payload_bytes(values) + _payload_bytes(keys), headers,
            lambda traced: _send_batch(producer, topic, values, keys, partition, timestamp, traced, callback, on_delivery),
        )
    return _send_batch(producer, topic, values, keys, partition, timestamp, headers, callback, on_delivery)


def _send_batch(
    producer: Producer,
    topic: str,
    values: Sequence[bytes | bytearray | memoryview | None],
    keys: Sequence[bytes | bytearray | memoryview | None] | None,
    partition: int | None,
    timestamp: int | None,
    headers: Iterable[tuple[str, bytes | None]] | None,
    callback: Callback | None,
    on_delivery: OnDelivery | None,
) -> BulkFuture:
    """send_batch() once its span, if any, is current."""
    producer._check_usable()
    if type(topic) is not str:
        raise TypeError(f"topic must be a str, got {type(topic).__name__}")
    if isinstance(values, (str, bytes, bytearray, memoryview)) or not isinstance(values, Sequence):
        raise TypeError(f"values must be a sequence (list or tuple) of bytes, got {type(values).__name__}")
    if keys is not None:
        if isinstance(keys, (str, bytes, bytearray, memoryview)) or not isinstance(keys, Sequence):
            raise TypeError(f"keys must be a sequence of bytes (or None), got {type(keys).__name__}")
        if len(keys) != len(values):
            raise ValueError(
                f"keys has {len(keys)} entries but values has {len(values)}; they must be the same length"
            )
    headers, partition, timestamp = _check_common(producer, headers, partition, timestamp)
    n = len(values)
    cb = None
    if callback is not None or on_delivery is not None:
        cb = resolve_bulk_callback(callback, on_delivery, topic, keys, values)
    if _needs_per_record(producer):
        rows = list(zip(keys or [None] * n, values, strict=True))
        return _send_each(producer, topic, rows, partition, timestamp, headers, cb)
    fut = BulkFuture(topic, n)
    if not isinstance(values, (list, tuple)):
        values = list(values)
    if keys is not None and not isinstance(keys, (list, tuple)):
        keys = list(keys)
    try:
        encoded = _encoded_headers(headers)
        wake = producer._router.route_many(topic, n, values, keys, False, partition, timestamp, encoded, cb, fut, fut)
    except ProducerClosedError:
        raise
    except KafkaError as e:
        return _fail_bulk(fut, e, cb)
    if wake:
        producer._wakeup()
    return fut


def send_arrow(
    producer: Producer,
    table_or_batch: Any,
    topic: str | None = None,
    *,
    value_column: str = "value",
    key_column: str | None = "key",
    topic_column: str = "topic",
    partition: int | None = None,
    timestamp: int | None = None,
    headers: Iterable[tuple[str, bytes | None]] | None = None,
    callback: Callback | None = None,
    on_delivery: OnDelivery | None = None,
    value_format: str | AvroFormat = "bytes",
    key_format: str | AvroFormat = "bytes",
) -> BulkFuture:
    """Queue the rows of a pyarrow Table or RecordBatch, encoded straight from the column buffers.

    ``value_column`` (and ``key_column`` when the table has it; ``None``: no keys)
    must be ``binary``, ``string``, ``large_binary`` or ``large_string`` columns;
    a null is a ``None`` value or key. ``topic``: every row's topic, or ``None`` to
    read each row's topic from the string column ``topic_column``.
    ``partition``, ``timestamp``, ``headers``: as for :meth:`send_batch`.
    ``callback(metadata, exception)`` or ``on_delivery(err, msg)``: as for
    :meth:`send`, called once per row on the I/O thread.
    ``value_format``/``key_format``: ``"bytes"`` (the column's bytes as they are), or a
    :class:`kproducer.avro.AvroFormat`: the column (a struct is a record) is written as
    Schema Registry framed Avro; a row that cannot be written fails on its own with an
    :class:`~kproducer.avro.AvroRecordError` naming the row, the field and the rule.

    Returns one BulkFuture resolving to the rows' RecordMetadata, in row order.
    """
    tracing = producer._tracing
    if tracing is not None and tracing.active():
        # One span for the call (kproducer.tracing); its context goes into the rows' headers when asked.
        return tracing.send_bulk(
            topic, int(getattr(table_or_batch, "num_rows", 0)),
            _arrow_bytes(table_or_batch, value_column) + _arrow_bytes(table_or_batch, key_column), headers,
            lambda traced: _send_arrow_call(
                producer, table_or_batch, topic, value_column, key_column, topic_column, partition, timestamp, traced,
                callback, on_delivery, value_format, key_format,
            ),
        )
    return _send_arrow_call(
        producer, table_or_batch, topic, value_column, key_column, topic_column, partition, timestamp, headers,
        callback, on_delivery, value_format, key_format,
    )


def _send_arrow_call(
    producer: Producer,
    table_or_batch: Any,
    topic: str | None,
    value_column: str,
    key_column: str | None,
    topic_column: str,
    partition: int | None,
    timestamp: int | None,
    headers: Iterable[tuple[str, bytes | None]] | None,
    callback: Callback | None,
    on_delivery: OnDelivery | None,
    value_format: str | AvroFormat,
    key_format: str | AvroFormat,
) -> BulkFuture:
    """send_arrow() once its span, if any, is current."""
    producer._check_usable()

    formats = _check_formats(value_format, key_format)
    headers, partition, timestamp = _check_common(producer, headers, partition, timestamp)
    data = table_or_batch
    cb = None
    if callback is not None or on_delivery is not None:
        cb = resolve_bulk_callback(
            callback, on_delivery, topic or "", _arrow_column_or_none(data, key_column),
            _arrow_column_or_none(data, value_column),
        )
    return _send_arrow(
        producer, data, topic, value_column, key_column, topic_column, partition, timestamp, headers, cb, formats
    )


def _check_formats(value_format: Any, key_format: Any) -> tuple[AvroFormat | None, AvroFormat | None] | None:
    """The formats of send_arrow's value and key columns: None when both are plain bytes."""
    from kproducer.avro.serializer import AvroFormat

    out: list[AvroFormat | None] = []
    for side, fmt in (("value", value_format), ("key", key_format)):
        if isinstance(fmt, AvroFormat):
            out.append(fmt.for_side(side == "key"))
        elif fmt == "bytes":
            out.append(None)
        else:
            raise ValueError(
                f"{side}_format must be 'bytes' or a kproducer.avro.AvroFormat (which holds the registry "
                f"settings and the schema ids it registered), got {fmt!r}"
            )
    return None if out == [None, None] else (out[0], out[1])


def _send_arrow(
    producer: Producer,
    data: Any,
    topic: str | None,
    value_column: str,
    key_column: str | None,
    topic_column: str,
    partition: int | None,
    timestamp: int | None,
    headers: Any,
    on_delivery: Callback | None,
    formats: tuple[AvroFormat | None, AvroFormat | None] | None = None,
    row_numbers: Sequence[int] | None = None,
) -> BulkFuture:
    """send_arrow() with its per-row callback resolved (``row_numbers``: the caller's, for a topic's subset)."""
    import pyarrow as pa

    if formats is not None and topic is not None:
        return _send_arrow_encoded(
            producer, data, topic, value_column, key_column, topic_column, partition, timestamp, headers,
            on_delivery, formats, row_numbers,
        )

    if isinstance(data, pa.RecordBatch):
        batches = [data]
        schema = data.schema
    elif isinstance(data, pa.Table):
        batches = data.to_batches()
        schema = data.schema
    else:
        raise TypeError(f"send_arrow takes a pyarrow Table or RecordBatch, got {type(data).__name__}")
    names = schema.names
    if value_column not in names:
        raise ValueError(f"value column {value_column!r} not in the Arrow schema (columns: {', '.join(names)})")
    has_keys = key_column is not None and key_column in names
    n = data.num_rows
    if topic is None:
        if topic_column not in names:
            raise ValueError(
                f"send_arrow needs topic=... or a {topic_column!r} string column (columns: {', '.join(names)})"
            )
        return _send_arrow_by_topic(
            producer, data, value_column, key_column if has_keys else None, topic_column, partition, timestamp,
            headers, on_delivery, formats,
        )
    if type(topic) is not str:
        raise TypeError(f"topic must be a str, got {type(topic).__name__}")
    for batch in batches:
        _arrow_column(batch.column(value_column), value_column)
        if has_keys:
            _arrow_column(batch.column(key_column), key_column)  # type: ignore[arg-type]
    if _needs_per_record(producer):
        vals = data.column(value_column).to_pylist()
        ks = data.column(key_column).to_pylist() if has_keys else [None] * n
        return _send_each(producer, topic, list(zip(ks, vals, strict=True)), partition, timestamp, headers, on_delivery)
    fut = BulkFuture(topic, n)
    wake = False
    row = 0
    route_many = producer._router.route_many
    try:
        encoded = _encoded_headers(headers)
        for batch in batches:
            m = batch.num_rows
            values = _arrow_column(batch.column(value_column), value_column)
            keys = _arrow_column(batch.column(key_column), key_column) if has_keys else None  # type: ignore[arg-type]
            sink = fut if not row else _OffsetSink(fut, row)
            # Rows of a chunk are numbered from 0: per-row delivery reports look them up from the call's row.
            at_offset = getattr(on_delivery, "at_offset", None)
            chunk_cb = on_delivery if at_offset is None or not row else at_offset(row)
            wake |= route_many(topic, m, values, keys, True, partition, timestamp, encoded, chunk_cb, sink, fut)
            row += m
    except ProducerClosedError:
        raise
    except KafkaError as e:
        return _fail_bulk(fut, e, on_delivery)
    finally:
        if wake:
            producer._wakeup()
    return fut


def _send_arrow_by_topic(
    producer: Producer,
    data: Any,
    value_column: str,
    key_column: str | None,
    topic_column: str,
    partition: int | None,
    timestamp: int | None,
    headers: Any,
    on_delivery: Callback | None,
    formats: tuple[AvroFormat | None, AvroFormat | None] | None = None,
) -> BulkFuture:
    """One bulk call per distinct topic (rows keep their order within a topic); one future over all rows."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
    topics_col = table.column(topic_column)
    if not (pa.types.is_string(topics_col.type) or pa.types.is_large_string(topics_col.type)):
        raise TypeError(f"topic column {topic_column!r} must be a string column, got {topics_col.type}")
    if topics_col.null_count:
        raise ValueError(f"topic column {topic_column!r} has {topics_col.null_count} null rows; every row needs a topic")
    outer = BulkFuture("<several>", table.num_rows)
    for t in pc.unique(topics_col).to_pylist():
        rows = pc.indices_nonzero(pc.equal(topics_col, t))
        row_list = rows.to_pylist()
        sub = table.take(rows)
        for_columns = getattr(on_delivery, "for_columns", None)  # per-row reports follow the rows to `sub`
        inner = _send_arrow(
            producer, sub, t, value_column, key_column, topic_column, partition, timestamp, headers,
            on_delivery if for_columns is None else for_columns(
                t, sub.column(key_column) if key_column is not None else None, sub.column(value_column)
            ),
            formats,
            row_list,
        )
        outer._appended(len(rows))
        inner.add_done_callback(partial(outer._forward_from, row_list, t))
    return outer


def _send_arrow_encoded(
    producer: Producer,
    data: Any,
    topic: str,
    value_column: str,
    key_column: str | None,
    topic_column: str,
    partition: int | None,
    timestamp: int | None,
    headers: Any,
    on_delivery: Callback | None,
    formats: tuple[AvroFormat | None, AvroFormat | None],
    row_numbers: Sequence[int] | None = None,
) -> BulkFuture:
    """send_arrow() of one topic's rows whose value/key columns are written as Avro first.

    The registry is asked (once per format and Arrow type) before any row is routed:
    a registry that is down or refuses the schema raises here. Rows that cannot be
    written fail on their own; the others go as one bulk call.
    """
    import pyarrow as pa

    from kproducer.avro.table import encode_table

    if not isinstance(data, (pa.Table, pa.RecordBatch)):
        raise TypeError(f"send_arrow takes a pyarrow Table or RecordBatch, got {type(data).__name__}")
    names = data.schema.names
    if value_column not in names:
        raise ValueError(f"value column {value_column!r} not in the Arrow schema (columns: {', '.join(names)})")
    keys = key_column if key_column is not None and key_column in names else None
    if formats[1] is not None and keys is None:
        raise ValueError(f"key_format is Avro but the table has no key column {key_column!r}")
    encoded = encode_table(data, topic, value_column, keys, formats[0], formats[1], row_numbers)
    table = encoded.table
    for_columns = getattr(on_delivery, "for_columns", None)  # per-row reports show the encoded bytes
    cb = on_delivery if for_columns is None else for_columns(
        topic, table.column(keys) if keys is not None else None, table.column(value_column)
    )
    inner = _send_arrow(producer, table, topic, value_column, keys, topic_column, partition, timestamp, headers, cb)
    if encoded.rows is None:
        return inner
    outer = BulkFuture(topic, data.num_rows)
    outer._appended(len(encoded.rows))
    inner.add_done_callback(partial(outer._forward_from, encoded.rows, topic))
    outer._fail_rows(encoded.errors, topic)
    if on_delivery is not None:
        for _row, err in encoded.errors:
            try:
                on_delivery(None, err)
            except Exception:
                log.exception("delivery callback raised")
    return outer


def _needs_per_record(producer: Producer) -> bool:
    """Interceptors, custom partitioners and serializers see each record: bulk calls then go through send()."""
    return (
        bool(producer._interceptors)
        or producer._partitioner is not None
        or not (producer._key_passthrough and producer._value_passthrough)
    )


def _send_each(
    producer: Producer,
    topic: str,
    rows: list[tuple[Any, Any]],
    partition: int | None,
    timestamp: int | None,
    headers: Any,
    on_delivery: Callback | None,
) -> BulkFuture:
    fut = BulkFuture(topic, len(rows))
    hdrs = list(headers) if headers else None
    for_row = getattr(on_delivery, "for_row", None)  # per-row delivery reports (kproducer.delivery)
    for row, (key, value) in enumerate(rows):
        cb = on_delivery if for_row is None else for_row(row)
        rf = producer.send(topic, value, key, partition=partition, timestamp=timestamp, headers=hdrs, callback=cb)
        fut._follow(row, rf)
    return fut


def _payload_bytes(column: Any) -> int:
    """The bytes of a send_batch() column (its span's size); 0 for what the call will refuse."""
    if not isinstance(column, Sequence) or isinstance(column, str | bytes | bytearray | memoryview):
        return 0
    return sum(len(v) for v in column if isinstance(v, bytes | bytearray | memoryview))


def _arrow_bytes(data: Any, name: str | None) -> int:
    """The bytes of a send_arrow() binary or string column (its span's size); 0 for what the call will refuse."""
    column = _arrow_column_or_none(data, name) if hasattr(data, "schema") else None
    if column is None:
        return 0
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        total = pc.sum(pc.binary_length(column)).as_py()
    except (TypeError, ValueError, pa.ArrowException):  # not a binary column (an Avro struct): no size
        return 0
    return int(total or 0)


def _arrow_column_or_none(data: Any, name: str | None) -> Any:
    """A pyarrow Table/RecordBatch column by name (None when absent): rows for on_delivery's reports."""
    if name is None or name not in data.schema.names:
        return None
    return data.column(name)


def _check_common(
    producer: Producer, headers: Any, partition: Any, timestamp: Any
) -> tuple[Any, int | None, int | None]:
    """The bulk calls' per-call arguments, checked as send() checks them."""
    if headers is not None:
        headers = check_headers(headers)
    if partition is not None:
        check_partition(partition)
    if timestamp is not None:
        check_timestamp(timestamp, MAX_TIMESTAMP, producer._timestamp_seconds_warning())
    return headers, partition, timestamp
