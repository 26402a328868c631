"""A pyarrow Table's value (and key) column encoded as Avro, for ``send_arrow``: the encoded table and the failed rows.

Every record batch of the table is encoded with the format's writer for the
topic; the value/key column is replaced by the encoded ``large_binary`` column,
which the bulk path then sends as any binary column. Rows that could not be
written are taken out of the table (their row numbers and errors are returned),
so nothing half-written is sent and the other rows go on.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, NamedTuple

from kproducer.avro.serializer import AvroFormat
from kproducer.avro.writer import AvroRecordError

__all__ = ["EncodedTable", "encode_table"]

log = logging.getLogger(__name__)


class EncodedTable(NamedTuple):
    """``table``: the rows that were written (value/key columns as Avro); ``rows``: their row numbers
    in the caller's table (None when every row was written); ``errors``: ``(row, error)`` of the others."""

    table: Any
    rows: list[int] | None
    errors: list[tuple[int, AvroRecordError]]


def _encode_column(fmt: AvroFormat, topic: str, batches: list[Any], name: str) -> tuple[Any, list[tuple[int, AvroRecordError]]]:
    import pyarrow as pa

    chunks = []
    errors: list[tuple[int, AvroRecordError]] = []
    base = 0
    for batch in batches:
        col = batch.column(name)
        enc = fmt.writer(topic, col.type).encode(col, base)
        chunks.append(enc.array)
        errors += [(base + row, err) for row, err in enc.errors]
        base += batch.num_rows
    return pa.chunked_array(chunks, type=pa.large_binary()), errors


def encode_table(
    data: Any,
    topic: str,
    value_column: str,
    key_column: str | None,
    value_format: AvroFormat | None,
    key_format: AvroFormat | None,
    row_numbers: Sequence[int] | None = None,
) -> EncodedTable:
    """Encode ``data``'s value column with ``value_format`` and key column with ``key_format`` (None: as is).

    ``row_numbers``: the caller's number of each row of ``data`` (when ``data`` is a subset of the
    caller's rows, e.g. one topic's), used in the errors' messages.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
    batches = table.to_batches()
    errors: list[tuple[int, AvroRecordError]] = []
    for fmt, name in ((value_format, value_column), (key_format, key_column)):
        if fmt is None or name is None:
            continue
        column, errs = _encode_column(fmt, topic, batches, name)
        table = table.set_column(table.schema.get_field_index(name), pa.field(name, pa.large_binary()), column)
        errors += errs
    if not errors:
        return EncodedTable(table, None, [])
    errors.sort(key=lambda e: e[0])
    bad = {row for row, _ in errors}
    first: dict[int, AvroRecordError] = {}
    for row, err in errors:
        first.setdefault(row, err if row_numbers is None else err.at_row(row_numbers[row]))
    rows = [i for i in range(table.num_rows) if i not in bad]
    log.warning(
        "%d of %d rows for topic %s not written as Avro (their futures fail); first: %s",
        len(first), table.num_rows, topic, next(iter(first.values())),
    )
    return EncodedTable(table.take(pc.cast(pa.array(rows, pa.int64()), pa.int64())), rows, sorted(first.items()))
