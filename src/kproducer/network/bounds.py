"""Bounds check of a response body against its schema, before kio's native reader sees it.

kio's native reader sizes arrays from the count the frame declares before it reads
their elements. A frame whose bytes do not fit the schema (a corrupt frame, a
broker or proxy answering in another version than the one asked) can declare a
count near 2**32, and the reader then asks for that much memory and aborts the
whole process, which no ``except`` can catch. Measured: 1 in ~80,000 random
64-byte bodies for a Metadata v9 response aborted the interpreter with "memory
allocation of 153047453776 bytes failed".

This walk follows the schema's fields (the Kafka protocol guide's primitive
types: fixed-width integers, (compact) strings and bytes, (compact) arrays, and
the tagged-field section of flexible versions) and only moves an offset. It
refuses any declared length that does not fit in the bytes left: an array of n
elements needs at least n bytes, whatever its element type. A frame that passes
can still fail in kio's reader, as an ordinary exception.

Produce responses are parsed by hand (``parse_produce_response``) and do not
come through here; every other response does, so the walk is only ever over
small control-plane answers and Metadata.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable
from functools import cache

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_schema_field_type,
    is_optional,
)

__all__ = ["FrameBoundsError", "check_response_bounds", "read_uvarint", "skip_tagged_fields"]

# A step takes (buffer, offset) and returns the offset after its field.
_Step = Callable[[memoryview, int], int]

_FIXED_WIDTH = {
    "bool": 1,
    "int8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "datetime_i64": 8,
    "timedelta_i64": 8,
    "float64": 8,
    "uuid": 16,
}
_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class FrameBoundsError(ValueError):
    """The frame declares a length that runs past its end, or ends inside a field."""


def check_response_bounds(cls: type, buf: memoryview, offset: int) -> None:
    """Raise FrameBoundsError unless every length in ``buf[offset:]`` fits, following ``cls``'s schema."""
    try:
        end = _entity_step(cls)(buf, offset)
    except (IndexError, struct.error) as e:
        raise FrameBoundsError(f"the frame ends inside a field ({e})") from None
    if end > len(buf):
        raise FrameBoundsError(f"the frame's fields need {end - offset} bytes, it has {len(buf) - offset}")


def _need(buf: memoryview, pos: int, size: int, what: str) -> int:
    if size < 0 or pos + size > len(buf):
        raise FrameBoundsError(f"{what} of {size} at byte {pos} runs past the frame's {len(buf)} bytes")
    return pos + size


def read_uvarint(buf: memoryview, pos: int, error: type[Exception] = FrameBoundsError) -> tuple[int, int]:
    """The unsigned varint at ``pos`` (compact lengths, tags): (value, offset after it); ``error``
    names a truncated or over-long one (the protocol parser's own error class, or FrameBoundsError)."""
    value = shift = 0
    try:
        while True:
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value, pos
            shift += 7
            if shift > 28:
                raise error("varint longer than 5 bytes")
    except IndexError:
        raise error("truncated varint") from None


def skip_tagged_fields(buf: memoryview, pos: int, error: type[Exception] = FrameBoundsError) -> int:
    """The offset after the tagged-field section at ``pos`` (flexible versions): each field is
    skipped by its declared size, which must fit in the frame."""
    if pos < len(buf) and buf[pos] == 0:  # the usual case: no tagged fields
        return pos + 1
    count, pos = read_uvarint(buf, pos, error)
    if count > len(buf) - pos:  # a field takes at least two bytes: a corrupt count, not a long loop
        raise error("truncated tagged field")
    for _ in range(count):
        _tag, pos = read_uvarint(buf, pos, error)
        size, pos = read_uvarint(buf, pos, error)
        pos += size
        if pos > len(buf):
            raise error("truncated tagged field")
    return pos


def _array_count(flexible: bool) -> Callable[[memoryview, int], tuple[int, int]]:
    """Read an array's element count (-1 for null): compact (n+1 as uvarint) or int32."""
    if flexible:

        def compact(buf: memoryview, pos: int) -> tuple[int, int]:
            b = buf[pos]
            if b < 0x80:  # one-byte varint: arrays of fewer than 127 elements
                return b - 1, pos + 1
            n, pos = read_uvarint(buf, pos)
            return n - 1, pos

        return compact

    def legacy(buf: memoryview, pos: int) -> tuple[int, int]:
        return _I32.unpack_from(buf, pos)[0], pos + 4

    return legacy


def _primitive_step(kafka_type: str, flexible: bool) -> _Step:
    width = _FIXED_WIDTH.get(kafka_type)
    if width is not None:
        return lambda buf, pos: _need(buf, pos, width, kafka_type)
    if kafka_type not in ("string", "bytes", "records"):
        raise TypeError(f"no bounds rule for kafka_type {kafka_type!r}")
    if flexible:

        def compact(buf: memoryview, pos: int) -> int:
            n, pos = read_uvarint(buf, pos)
            return pos if n == 0 else _need(buf, pos, n - 1, kafka_type)

        return compact
    head = _I16 if kafka_type == "string" else _I32

    def legacy(buf: memoryview, pos: int) -> int:
        (n,) = head.unpack_from(buf, pos)
        pos += head.size
        return pos if n < 0 else _need(buf, pos, n, kafka_type)

    return legacy


def _array_step(element: _Step, flexible: bool, width: int | None) -> _Step:
    count_of = _array_count(flexible)

    def array(buf: memoryview, pos: int) -> int:
        n, pos = count_of(buf, pos)
        if n < 0:
            return pos
        # Every element takes at least one byte: a count beyond the bytes left is a corrupt frame.
        _need(buf, pos, n, "array count")
        if width is not None:
            return _need(buf, pos, n * width, "array")
        for _ in range(n):
            pos = element(buf, pos)
        return pos

    return array


@cache
def _entity_step(cls: type) -> _Step:
    flexible = bool(getattr(cls, "__flexible__", False))
    steps: list[_Step] = []
    fixed = 0  # a run of fixed-width fields is checked as one step: Metadata's partitions are mostly that

    def flush_fixed() -> None:
        nonlocal fixed
        if fixed:
            width = fixed
            steps.append(lambda buf, pos: _need(buf, pos, width, "fixed-width fields"))
            fixed = 0

    for f in dataclasses.fields(cls):
        if "tag" in f.metadata:
            continue  # tagged fields live in the tagged-field section, skipped by size
        kind = classify_field(f)
        if isinstance(kind, EntityField | EntityTupleField):
            flush_fixed()
            nested = _entity_step(kind.type_)  # Kafka schemas are trees: no cycle to defer
            if isinstance(kind, EntityTupleField):
                steps.append(_array_step(nested, flexible, None))
            else:
                steps.append(_nullable(nested) if is_optional(f) else nested)
            continue
        kafka_type = get_schema_field_type(f)
        width = _FIXED_WIDTH.get(kafka_type)
        if width is not None and not isinstance(kind, PrimitiveTupleField):
            fixed += width
            continue
        flush_fixed()
        element = _primitive_step(kafka_type, flexible)
        steps.append(_array_step(element, flexible, width) if isinstance(kind, PrimitiveTupleField) else element)
    flush_fixed()

    if flexible:

        def flexible_entity(buf: memoryview, pos: int) -> int:
            for step in steps:
                pos = step(buf, pos)
            return skip_tagged_fields(buf, pos)

        return flexible_entity

    def entity(buf: memoryview, pos: int) -> int:
        for step in steps:
            pos = step(buf, pos)
        return pos

    return entity


def _nullable(step: _Step) -> _Step:
    """A nullable struct: an int8 marker, -1 for null."""

    def nullable(buf: memoryview, pos: int) -> int:
        marker = buf[pos]
        return pos + 1 if marker == 0xFF else step(buf, pos + 1)

    return nullable
