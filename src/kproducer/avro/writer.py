"""One Avro schema written from Arrow arrays: the plan per Arrow type, the framing, the row errors.

An :class:`AvroColumnWriter` is made once per (schema, schema id) and reused for
every record batch: the plan is compiled once per Arrow type it sees (Spark
gives every batch of a query the same type), then each batch is bound and
encoded (:mod:`kproducer.avro.encoder`). The result is a ``large_binary`` Arrow
array, the value (or key) column the bulk path sends as it sends any binary
column, and the rows that could not be written with their
:class:`AvroRecordError`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from kproducer.avro import encoder as _encoder
from kproducer.avro.encoder import (
    RULE_DECIMAL_RANGE,
    RULE_INT_RANGE,
    RULE_MALFORMED,
    RULE_NULL,
    RULE_OVERFLOW,
)
from kproducer.avro.plan import K_DECIMAL, WritePlan, compile_plan
from kproducer.avro.schema import AvroSchema
from kproducer.errors import SerializationError

__all__ = ["AvroColumnWriter", "AvroRecordError", "EncodedArray", "registry_prefix"]

MAGIC_BYTE = 0


def registry_prefix(schema_id: int | None) -> bytes:
    """The Schema Registry wire format's header: magic byte 0, then the schema id as a big-endian int32."""
    if schema_id is None:
        return b""
    if not 0 <= schema_id < 2**31:
        raise ValueError(f"schema id {schema_id} is outside 0..2**31-1")
    return bytes([MAGIC_BYTE]) + schema_id.to_bytes(4, "big")


class AvroRecordError(SerializationError):
    """A row could not be written as Avro: names the row, the field and the rule it broke."""

    def __init__(self, message: str, row: int, field: str, rule: str) -> None:
        super().__init__(message)
        self.row = row
        self.field = field
        self.rule = rule

    @classmethod
    def of(cls, row: int, field: str, rule: str) -> AvroRecordError:
        return cls(f"row {row}: column {field!r} cannot be written as Avro: {rule}", row, field, rule)

    def at_row(self, row: int) -> AvroRecordError:
        """The same error for the caller's row number ``row`` (when the rows were a subset of the caller's)."""
        return AvroRecordError.of(row, self.field, self.rule)


class EncodedArray(NamedTuple):
    """``array``: the rows as a large_binary Arrow array (a failed row is an empty slot);
    ``errors``: ``(row, error)`` for each row that was not written."""

    array: Any
    errors: list[tuple[int, AvroRecordError]]


def _rule_text(plan: WritePlan, node: int, rule: int) -> str:
    if rule == RULE_NULL:
        return "null in a field whose Avro type is not a union with \"null\""
    if rule == RULE_INT_RANGE:
        return "value outside Avro int's range [-2147483648, 2147483647]"
    if rule == RULE_DECIMAL_RANGE:
        n = plan.nodes[node]
        precision = n.p[1] if n.kind == K_DECIMAL else 0
        return f"decimal with more than the schema's precision of {precision} digits"
    if rule == RULE_OVERFLOW:
        return "time value overflows Avro long once converted to the schema's unit"
    if rule == RULE_MALFORMED:
        return "Arrow offsets outside the column's buffers (a malformed array)"
    return f"rule {rule}"


class AvroColumnWriter:
    """Writes Arrow arrays as Avro with one schema, each row framed by ``schema_id`` (None: no framing)."""

    def __init__(self, schema: AvroSchema, schema_id: int | None, column: str = "value") -> None:
        self.schema = schema
        self.schema_id = schema_id
        self.column = column
        self.prefix = registry_prefix(schema_id)
        self._plans: dict[Any, WritePlan] = {}

    def plan_for(self, arrow_type: Any) -> WritePlan:
        """The compiled plan for this Arrow type (compiled once); raises AvroSchemaError when it does not fit."""
        plan = self._plans.get(arrow_type)
        if plan is None:
            plan = compile_plan(self.schema, arrow_type, self.column)
            self._plans[arrow_type] = plan
        return plan

    def encode(self, array: Any, row_base: int = 0) -> EncodedArray:
        """Encode one Arrow array (a ChunkedArray is combined first); ``row_base`` numbers its rows in errors."""
        import pyarrow as pa

        if isinstance(array, pa.ChunkedArray):
            array = array.combine_chunks()
        plan = self.plan_for(array.type)
        offsets, data, validity, failures = _encoder.encode(plan.bind(array), self.prefix)
        n = len(array)
        out = pa.Array.from_buffers(
            pa.large_binary(), n,
            [pa.py_buffer(validity) if validity is not None else None, pa.py_buffer(offsets), pa.py_buffer(data)],
        )
        errors = []
        for row, node, rule in failures:
            path = plan.path(node)
            text = _rule_text(plan, node, rule)
            errors.append((row, AvroRecordError.of(row_base + row, path, text)))
        return EncodedArray(out, errors)
