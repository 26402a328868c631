"""``value.format=avro`` / ``key.format=avro`` in the Spark sink: the driver pins the schema, the tasks encode.

On the driver (planning, before any task starts) the Avro options become one
:class:`kproducer.avro.AvroFormat` per side. With a ``topic`` option the subject
is known: the registry's compatibility check runs first, so that a schema the
subject's rule refuses fails the query with the registry's reasons (which name
the field), then the schema is registered (or looked up) once and pinned with its
id; the tasks only encode. With a topic column and the record subject name
strategy the same holds, since the subject is the record's name whatever the
topic. With a topic column and a topic-based strategy, each task resolves the
subjects of the topics it sees (once per topic and executor worker), and the
driver checks that the schema fits the column and that the registry answers.

In a task, each Arrow batch's value (and key) column is encoded
(:func:`kproducer.avro.table.encode_table`) before the batch is cut into bulk
calls; rows of a topic column are grouped by topic first (a stable grouping, so
each topic keeps its row order, as the bulk calls need anyway). A row that cannot
be written fails the task with the error naming the row, the field and the rule:
a Spark task is all or nothing, and a failed task never leaves a record silently
out (exactly-once aborts its transaction; at-least-once re-runs the task).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from kproducer.avro.plan import compile_plan
from kproducer.avro.schema import AvroSchema, derive_schema
from kproducer.avro.serializer import AvroFormat, avro_format_from_options
from kproducer.avro.table import encode_table
from kproducer.spark.contract import SinkOptions, SinkSchema, SinkSchemaError

__all__ = ["encode_batch", "pin_formats"]


def _arrow_type(spark_schema: Any, column: str) -> Any:
    from pyspark.sql.pandas.types import to_arrow_type

    field = next(f for f in spark_schema.fields if f.name == column)
    # The zone only labels the Arrow type (TimestampType is an instant, timestamp-micros in Avro either way).
    return to_arrow_type(field.dataType, timezone="UTC")


def pin_formats(opts: SinkOptions, cols: SinkSchema, spark_schema: Any) -> SinkOptions:
    """The options with ``value_avro``/``key_avro`` set: checked, registered and pinned when the topic is known."""
    options = dict(opts.avro_options)
    pinned: dict[str, AvroFormat] = {}
    for side, fmt_name, column in (("value", opts.value_format, cols.value), ("key", opts.key_format, cols.key)):
        if fmt_name != "avro" or column is None:
            continue
        fmt = avro_format_from_options(options, side)
        arrow_type = _arrow_type(spark_schema, column)
        # The record strategy's subject is the record's name whatever the topic, so a topic column
        # still lets the driver check and register before any task writes (the topic is not read).
        topic = opts.topic if opts.topic is not None or fmt.subject_depends_on_topic else ""
        if topic is None:
            given = options.get(f"{side}.avro.schema", options.get("avro.schema"))
            if given is not None:
                compile_plan(AvroSchema(given), arrow_type, side)  # refuses a schema that does not fit the column
            else:
                derive_schema(arrow_type)  # refuses a column type Avro cannot hold
            # The subjects come from the rows, so the tasks register them; a registry that is down
            # or refuses these credentials still fails the write here, before any task starts.
            fmt.check_registry()
            pinned[side] = fmt
            continue
        problems = fmt.check_compatible(topic, arrow_type)
        if problems:
            where = f"topic {topic!r}" if topic else "the record-named subject (the topic column's topics share it)"
            raise SinkSchemaError(
                f"the {side} schema for {where} is refused by the schema registry's compatibility "
                f"rule: {'; '.join(problems)}"
            )
        schema, schema_id = fmt.resolve(topic, arrow_type)
        fixed = fmt.pinned(schema, schema_id)
        fixed.writer(topic, arrow_type)  # the plan: a schema that does not fit the column fails here
        pinned[side] = fixed
    return dataclasses.replace(opts, value_avro=pinned.get("value"), key_avro=pinned.get("key"))


def encode_batch(batch: Any, cols: SinkSchema, topic_option: str | None, value_fmt: Any, key_fmt: Any) -> Any:
    """One Arrow batch with its value/key columns written as Avro (rows grouped by topic); raises on a bad row."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if batch.num_rows == 0:
        return batch
    groups: list[tuple[str, Any]]
    if topic_option is not None:
        groups = [(topic_option, batch)]
    else:
        assert cols.topic is not None
        topics = batch.column(cols.topic)
        if topics.null_count:
            raise ValueError("a row has a null topic and no 'topic' option is set")
        groups = [(t, batch.filter(pc.equal(topics, t))) for t in pc.unique(topics).to_pylist()]
    parts = []
    for topic, rows in groups:
        enc = encode_table(rows, topic, cols.value, cols.key if key_fmt is not None else None, value_fmt, key_fmt)
        if enc.errors:
            raise enc.errors[0][1]
        parts.append(enc.table)
    table = parts[0] if len(parts) == 1 else pa.concat_tables(parts)
    return table.combine_chunks().to_batches()[0]
