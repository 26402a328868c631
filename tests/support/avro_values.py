"""Generated Arrow tables for the Avro encoder's tests, and Arrow rows as an Avro reader gives them back.

``arrow_tables()`` (hypothesis) draws a struct type of every kind the encoder
writes (nested structs, lists, maps, nullable fields, decimals, timestamps), rows
of it, and a slice of the array; ``as_avro_reads`` is what fastavro or
confluent-kafka's AvroDeserializer gives back for a pyarrow row.
"""

from __future__ import annotations

import datetime
import decimal
from typing import Any

import pyarrow as pa
from hypothesis import strategies as st


def as_avro_reads(value: Any, t: Any) -> Any:
    """pyarrow's ``to_pylist`` value of type ``t`` as fastavro (and confluent-kafka's AvroDeserializer) read it:
    maps are dicts, the rest is as pyarrow gives it."""
    import pyarrow as pa

    if value is None:
        return None
    if pa.types.is_map(t):
        return {k: as_avro_reads(v, t.item_type) for k, v in value}
    if pa.types.is_struct(t):
        return {t.field(i).name: as_avro_reads(value[t.field(i).name], t.field(i).type) for i in range(t.num_fields)}
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [as_avro_reads(v, t.value_type) for v in value]
    return value


_LEAVES = [
    pa.bool_(), pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(),
    pa.float32(), pa.float64(), pa.string(), pa.large_string(), pa.binary(), pa.large_binary(),
    pa.date32(), pa.timestamp("us", tz="UTC"), pa.timestamp("ms", tz="UTC"), pa.timestamp("us"),
    pa.decimal128(9, 2), pa.decimal128(20, 0), pa.decimal128(38, 10), pa.null(),
    pa.date64(), pa.time32("s"), pa.time32("ms"), pa.time64("us"), pa.binary(3),
]


def _names(n: int) -> list[str]:
    return [f"f{i}" for i in range(n)]


def _arrow_types() -> st.SearchStrategy[Any]:
    leaves = st.sampled_from(_LEAVES)

    def extend(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
        field = st.tuples(children, st.booleans()).map(lambda c: pa.field("item", c[0], nullable=c[1] or pa.types.is_null(c[0])))
        return st.one_of(
            st.lists(st.tuples(children, st.booleans()), min_size=1, max_size=4).map(
                lambda fs: pa.struct(
                    [pa.field(n, t, nullable=nl or pa.types.is_null(t)) for n, (t, nl) in zip(_names(len(fs)), fs, strict=True)]
                )
            ),
            field.map(pa.list_),
            field.map(pa.large_list),
            field.map(lambda f: pa.list_(f, 2)),
            st.tuples(children, st.booleans()).map(
                lambda c: pa.map_(pa.string(), pa.field("value", c[0], nullable=c[1] or pa.types.is_null(c[0])))
            ),
        )

    return st.recursive(leaves, extend, max_leaves=6)


def _value(t: Any, nullable: bool) -> st.SearchStrategy[Any]:
    base: st.SearchStrategy[Any]
    types = pa.types
    if types.is_null(t):
        return st.none()
    if types.is_boolean(t):
        base = st.booleans()
    elif types.is_integer(t):
        info = {8: 7, 16: 15, 32: 31, 64: 63}[t.bit_width]
        if types.is_unsigned_integer(t):
            base = st.integers(0, 2 ** t.bit_width - 1)
        else:
            base = st.integers(-(2**info), 2**info - 1)
    elif types.is_float32(t):
        base = st.floats(allow_nan=False, width=32)
    elif types.is_float64(t):
        base = st.floats(allow_nan=False)
    elif types.is_string(t) or types.is_large_string(t):
        base = st.text(max_size=12)
    elif types.is_binary(t) or types.is_large_binary(t):
        base = st.binary(max_size=12)
    elif types.is_date32(t) or types.is_date64(t):
        base = st.dates()
    elif types.is_time32(t) or types.is_time64(t):
        base = st.times().map(
            lambda v: v.replace(microsecond=0 if t.unit == "s" else v.microsecond - v.microsecond % 1000 if t.unit == "ms" else v.microsecond)
        )
    elif types.is_fixed_size_binary(t):
        base = st.binary(min_size=t.byte_width, max_size=t.byte_width)
    elif types.is_timestamp(t):
        tz = datetime.UTC if t.tz else None
        base = st.datetimes(
            min_value=datetime.datetime(1900, 1, 1), max_value=datetime.datetime(2200, 1, 1)
        ).map(lambda d: d.replace(tzinfo=tz, microsecond=d.microsecond - d.microsecond % 1000 if t.unit == "ms" else d.microsecond))
    elif types.is_decimal128(t):
        digits = t.precision
        wide = decimal.Context(prec=60)  # the default context (28 digits) would round 38-digit values
        base = st.integers(-(10**digits) + 1, 10**digits - 1).map(
            lambda u: decimal.Decimal(u).scaleb(-t.scale, context=wide)
        )
    elif types.is_struct(t):
        base = st.fixed_dictionaries({t.field(i).name: _value(t.field(i).type, t.field(i).nullable) for i in range(t.num_fields)})
    elif types.is_fixed_size_list(t):
        base = st.lists(_value(t.value_type, t.value_field.nullable), min_size=t.list_size, max_size=t.list_size)
    elif types.is_list(t) or types.is_large_list(t):
        base = st.lists(_value(t.value_type, t.value_field.nullable), max_size=4)
    elif types.is_map(t):
        base = st.dictionaries(st.text(max_size=5), _value(t.item_type, t.item_field.nullable), max_size=3).map(
            lambda d: list(d.items())
        )
    else:  # pragma: no cover
        raise AssertionError(t)
    return st.one_of(st.none(), base) if nullable else base


@st.composite
def arrow_tables(draw: Any) -> tuple[Any, Any]:
    t = draw(_arrow_types())
    if not pa.types.is_struct(t):
        t = pa.struct([pa.field("v", t, nullable=True)])
    rows = draw(st.lists(_value(t, True), min_size=0, max_size=8))
    arr = pa.array(rows, type=t)
    start = draw(st.integers(0, len(rows)))
    return t, arr.slice(start)
