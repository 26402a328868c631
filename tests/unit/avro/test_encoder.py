"""The Arrow -> Avro encoder: C against its Python twin, and both against fastavro's reader.

Tables of generated Arrow types (nested structs, lists, maps, nullable fields,
sliced arrays) are encoded by the C encoder and by the reference; the bytes and
the failure reports must be equal, and fastavro must read every row back to the
value pyarrow holds.
"""

from __future__ import annotations

import datetime
import decimal
import io
import json
from typing import Any

import fastavro
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings

from kproducer.avro import encoder
from kproducer.avro.schema import AvroSchema, AvroSchemaError, derive_schema
from kproducer.avro.writer import AvroColumnWriter, AvroRecordError
from tests.support.avro_values import arrow_tables, as_avro_reads


def _c_module() -> Any:
    try:
        from kproducer.avro import _avro_encoder
    except ImportError as e:
        pytest.fail(f"kproducer.avro._avro_encoder is not built ({e}); run `python setup.py build_ext --inplace`")
    return _avro_encoder


def _decode(schema: AvroSchema, body: bytes) -> Any:
    parsed = fastavro.parse_schema(json.loads(schema.json))
    return fastavro.schemaless_reader(io.BytesIO(body), parsed)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arrow_tables())
def test_c_and_reference_write_the_same_bytes_and_fastavro_reads_the_values(table: tuple[Any, Any]) -> None:
    t, arr = table
    schema = derive_schema(t)
    writer = AvroColumnWriter(schema, 42)
    nodes = writer.plan_for(t).bind(arr)
    ref = encoder.encode_reference(nodes, writer.prefix)
    c_offsets, c_data, c_validity, c_failures = _c_module().encode(nodes, writer.prefix)
    assert (bytes(c_data), c_offsets, c_validity, c_failures) == (bytes(ref.data), ref.offsets, ref.validity, ref.failures)
    assert ref.failures == []
    out = writer.encode(arr).array.to_pylist()
    for got, want in zip(out, arr.to_pylist(), strict=True):
        if want is None:
            assert got is None
            continue
        assert got[:5] == b"\x00\x00\x00\x00\x2a"
        assert _decode(schema, got[5:]) == as_avro_reads(want, t)


def test_a_null_in_a_non_nullable_field_fails_only_that_row_naming_row_column_and_rule() -> None:
    t = pa.struct([pa.field("id", pa.int64()), pa.field("name", pa.string())])
    schema = AvroSchema({"type": "record", "name": "r", "fields": [
        {"name": "id", "type": "long"}, {"name": "name", "type": "string"}]})
    arr = pa.array([{"id": 1, "name": "a"}, {"id": 2, "name": None}, {"id": 3, "name": "c"}], t)
    for run in (encoder.encode_reference, lambda nodes, prefix: encoder.EncodedColumn(*_c_module().encode(nodes, prefix))):
        writer = AvroColumnWriter(schema, 1)
        enc = run(writer.plan_for(t).bind(arr), writer.prefix)
        assert enc.failures == [(1, 2, encoder.RULE_NULL)]
    enc2 = AvroColumnWriter(schema, 1).encode(arr, row_base=10)
    [(row, err)] = enc2.errors
    assert row == 1 and isinstance(err, AvroRecordError)
    assert err.row == 11 and err.field == "value.name"
    assert "row 11" in str(err) and "'value.name'" in str(err) and "not a union with \"null\"" in str(err)
    values = enc2.array.to_pylist()
    assert values[1] == b""  # nothing half-written
    assert _decode(schema, values[0][5:]) == {"id": 1, "name": "a"}
    assert _decode(schema, values[2][5:]) == {"id": 3, "name": "c"}


def test_an_out_of_range_decimal_and_int_fail_their_rows() -> None:
    t = pa.struct([pa.field("price", pa.decimal128(10, 2)), pa.field("n", pa.int64())])
    schema = AvroSchema({"type": "record", "name": "r", "fields": [
        {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 4, "scale": 2}},
        {"name": "n", "type": "int"}]})
    arr = pa.array([
        {"price": decimal.Decimal("12.34"), "n": 1},
        {"price": decimal.Decimal("123.45"), "n": 2},
        {"price": decimal.Decimal("-99.99"), "n": 2**31},
    ], t)
    writer = AvroColumnWriter(schema, 3)
    nodes = writer.plan_for(t).bind(arr)
    ref = encoder.encode_reference(nodes, writer.prefix)
    assert ref.failures == [(1, 1, encoder.RULE_DECIMAL_RANGE), (2, 2, encoder.RULE_INT_RANGE)]
    assert encoder.EncodedColumn(*_c_module().encode(nodes, writer.prefix)) == ref
    enc = writer.encode(arr)
    assert [r for r, _ in enc.errors] == [1, 2]
    assert "precision of 4 digits" in str(enc.errors[0][1]) and "'value.price'" in str(enc.errors[0][1])
    assert "int's range" in str(enc.errors[1][1]) and "'value.n'" in str(enc.errors[1][1])
    assert _decode(schema, enc.array.to_pylist()[0][5:]) == {"price": decimal.Decimal("12.34"), "n": 1}


def test_a_given_schema_with_null_first_millis_and_bytes_decimals() -> None:
    t = pa.struct([
        pa.field("ts", pa.timestamp("us", tz="UTC")), pa.field("d", pa.decimal128(5, 1)),
        pa.field("f", pa.float32()), pa.field("tags", pa.list_(pa.string())),
    ])
    schema = AvroSchema({"type": "record", "name": "ev", "namespace": "com.example", "fields": [
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "ts", "type": ["null", {"type": "long", "logicalType": "timestamp-millis"}], "default": None},
        {"name": "d", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 1}]},
        {"name": "f", "type": "double"},
    ]})
    when = datetime.datetime(1969, 12, 31, 23, 59, 59, 999_500, tzinfo=datetime.UTC)
    arr = pa.array([
        {"ts": when, "d": decimal.Decimal("-1234.5"), "f": 0.5, "tags": ["a", "b"]},
        {"ts": None, "d": None, "f": -2.0, "tags": []},
    ], t)
    writer = AvroColumnWriter(schema, None)
    nodes = writer.plan_for(t).bind(arr)
    ref = encoder.encode_reference(nodes, b"")
    assert encoder.EncodedColumn(*_c_module().encode(nodes, b"")) == ref
    rows = writer.encode(arr).array.to_pylist()
    assert _decode(schema, rows[0]) == {
        "tags": ["a", "b"], "ts": when.replace(microsecond=999_000), "d": decimal.Decimal("-1234.5"), "f": 0.5,
    }
    assert _decode(schema, rows[1]) == {"tags": [], "ts": None, "d": None, "f": -2.0}


@pytest.mark.parametrize(
    ("avro", "arrow", "message"),
    [
        ({"type": "enum", "name": "e", "symbols": ["A"]}, pa.string(), "enums are not written"),
        (["null", "int", "string"], pa.int32(), "is not supported"),
        ("float", pa.float64(), "does not fit an Avro float"),
        ("string", pa.int32(), "cannot be written from Arrow type int32"),
        ({"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"}]},
         pa.struct([("a", pa.int32()), ("b", pa.int32())]), "field(s) 'b'"),
        ({"type": "record", "name": "r", "fields": [{"name": "a", "type": "int"}, {"name": "c", "type": "int"}]},
         pa.struct([("a", pa.int32())]), "has field 'c'"),
        ({"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2}, pa.decimal128(5, 1), "scale"),
        ("long", pa.uint64(), "uint64"),
    ],
)
def test_schemas_that_do_not_fit_the_column_are_refused_naming_the_field(avro: Any, arrow: Any, message: str) -> None:
    with pytest.raises(AvroSchemaError, match="value") as info:
        AvroColumnWriter(AvroSchema(avro), 1).plan_for(arrow)
    assert message in str(info.value)


def test_derived_schema_follows_spark_to_avro_naming() -> None:
    t = pa.struct([
        pa.field("id", pa.int64(), nullable=False),
        pa.field("amount", pa.decimal128(12, 2)),
        pa.field("inner", pa.struct([pa.field("x", pa.int32(), nullable=False)])),
    ])
    schema = derive_schema(t, record_name="Payment", namespace="com.acme")
    assert json.loads(schema.json) == {
        "type": "record", "name": "Payment", "namespace": "com.acme", "fields": [
            {"name": "id", "type": "long"},
            {"name": "amount", "type": [{"type": "fixed", "name": "com.acme.Payment.amount.fixed", "size": 6,
                                        "logicalType": "decimal", "precision": 12, "scale": 2}, "null"]},
            {"name": "inner", "type": [{"type": "record", "name": "inner", "namespace": "com.acme.Payment",
                                       "fields": [{"name": "x", "type": "int"}]}, "null"]},
        ],
    }
    assert derive_schema(pa.string()).json == '"string"'


def _strict(t: Any) -> Any:
    """The type with every field non-nullable (a null Arrow type stays nullable): its schema has no unions."""
    types = pa.types

    def f(field: Any) -> Any:
        return pa.field(field.name, _strict(field.type), nullable=types.is_null(field.type))

    if types.is_struct(t):
        return pa.struct([f(t.field(i)) for i in range(t.num_fields)])
    if types.is_map(t):
        return pa.map_(t.key_type, f(t.item_field))
    if types.is_fixed_size_list(t):
        return pa.list_(f(t.value_field), t.list_size)
    if types.is_large_list(t):
        return pa.large_list(f(t.value_field))
    if types.is_list(t):
        return pa.list_(f(t.value_field))
    return t


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(arrow_tables())
def test_c_and_reference_agree_on_rows_that_break_a_rule(table: tuple[Any, Any]) -> None:
    """Nulls written against a schema without unions: the same failed rows, the same bytes for the others."""
    t, arr = table
    schema = derive_schema(_strict(t))
    writer = AvroColumnWriter(schema, 7)
    nodes = writer.plan_for(t).bind(arr)
    ref = encoder.encode_reference(nodes, writer.prefix)
    c_offsets, c_data, c_validity, c_failures = _c_module().encode(nodes, writer.prefix)
    assert (bytes(c_data), c_offsets, c_validity, c_failures) == (bytes(ref.data), ref.offsets, ref.validity, ref.failures)
    failed = {row for row, _node, _rule in ref.failures}
    assert all(rule == encoder.RULE_NULL for _row, _node, rule in ref.failures)
    rows = writer.encode(arr).array.to_pylist()
    for i, (got, want) in enumerate(zip(rows, arr.to_pylist(), strict=True)):
        if i in failed:
            assert got == b""
        elif want is not None:
            assert _decode(schema, got[5:]) == as_avro_reads(want, t)
