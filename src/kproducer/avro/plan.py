"""The write plan: an Avro schema matched against an Arrow type, then bound to one Arrow array's buffers.

:func:`compile_plan` checks once per (schema, Arrow type) that every Avro type can
be written from its Arrow counterpart (refusing, with the path of the field, what
cannot), and gives a list of :class:`PlanNode`. :meth:`WritePlan.bind` then takes
one array (a column of one record batch) and gives the tuples both encoders read
(:mod:`kproducer.avro.encoder`): per node ``(kind, null_branch, value_branch,
validity, offset, length, buf1, buf2, children, p1, p2, p3, p4)``, where

- ``null_branch``/``value_branch``: the union branches written for a null and a
  value when the Avro type is a union with ``"null"``; ``null_branch`` is -1 when
  a null is not allowed;
- ``validity``/``offset``/``length``: the Arrow array's validity bitmap (or None),
  its offset into its buffers and its length; an index ``i`` given to a node reads
  slot ``offset + i`` (the Arrow columnar format's logical index);
- ``buf1``/``buf2`` and ``p1..p4``: per kind, as the ``K_*`` constants say;
- ``children``: node numbers (a struct's fields in the Avro schema's order, a
  list's items, a map's entries). A struct's field ``i`` is read at the struct's
  index ``i`` (pyarrow's ``StructArray.field`` applies the struct's offset); a
  list's or map's items at the indices its offsets give (``ListArray.values``
  does not apply the list's offset).

Buffer sizes are checked at bind time, so the encoders read fixed-width values
without a bound check; variable-width offsets are checked per row.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kproducer.avro.schema import AvroSchema, AvroSchemaError, decimal_fixed_size

__all__ = [
    "K_BOOL",
    "K_BYTES",
    "K_DECIMAL",
    "K_FIXED",
    "K_FLOAT",
    "K_INT",
    "K_LIST",
    "K_MAP",
    "K_NULL",
    "K_STRUCT",
    "PlanNode",
    "WritePlan",
    "compile_plan",
]

K_NULL = 0  # writes nothing (Avro null); in a union, the null branch
K_BOOL = 1  # buf1: the value bits
K_INT = 2  # buf1: values; p1: source width (1/2/4/8, negative: unsigned); p2: 0 int / 1 long; p3 multiply; p4 floor-divide
K_FLOAT = 3  # buf1: values; p1: source width 4/8; p2: Avro width 4 (float) / 8 (double)
K_BYTES = 4  # buf1: offsets, buf2: data; p1: offset width 4/8
K_FIXED = 5  # buf1: data; p1: byte width
K_DECIMAL = 6  # buf1: 16-byte little-endian unscaled values; p1: fixed size (0: bytes); p2: precision checked (0: none)
K_STRUCT = 7  # children: the fields in the Avro order
K_LIST = 8  # buf1: offsets; p1: offset width 4/8, or 0 for a fixed-size list of p2 items; children: (items,)
K_MAP = 9  # buf1: offsets (4 bytes); children: (entries,), a struct of (key, value)

_INT_MAX = {"int": 2**31 - 1, "long": 2**63 - 1}
_UNIT_PER_S = {"s": 1, "ms": 1000, "us": 1_000_000, "ns": 1_000_000_000}
_LOGICAL_UNIT = {
    "timestamp-millis": "ms", "timestamp-micros": "us", "timestamp-nanos": "ns",
    "local-timestamp-millis": "ms", "local-timestamp-micros": "us", "local-timestamp-nanos": "ns",
    "time-millis": "ms", "time-micros": "us",
}
# Refused with the reason: the encoders write none of these.
_REFUSED = {
    "enum": "Avro enums are not written (use a string field)",
}


@dataclass(slots=True)
class PlanNode:
    """One Avro position and the Arrow type it reads from; ``path`` names it in errors."""

    kind: int
    path: str
    null_branch: int = -1
    value_branch: int = 0
    p: tuple[int, int, int, int] = (0, 0, 0, 0)
    children: tuple[int, ...] = ()
    # How bind reaches each child's array from this node's: "field:<i>" (struct), "values" (list/map entries).
    child_access: tuple[str, ...] = field(default_factory=tuple)
    value_width: int = 0  # bytes per slot of buf1 when fixed-width (checked at bind)


class WritePlan:
    """A schema compiled against one Arrow type: the node list and the root."""

    __slots__ = ("nodes", "schema", "arrow_type")

    def __init__(self, nodes: list[PlanNode], schema: AvroSchema, arrow_type: Any) -> None:
        self.nodes = nodes
        self.schema = schema
        self.arrow_type = arrow_type

    def path(self, node: int) -> str:
        return self.nodes[node].path

    def bind(self, array: Any) -> tuple[tuple[Any, ...], ...]:
        """The node tuples for one Arrow array of the plan's type (see the module docstring)."""
        out: list[tuple[Any, ...] | None] = [None] * len(self.nodes)
        self._bind(0, array, out)
        return tuple(out)  # type: ignore[arg-type]

    def _bind(self, i: int, arr: Any, out: list[tuple[Any, ...] | None]) -> None:
        node = self.nodes[i]
        bufs = arr.buffers()
        validity = bufs[0] if arr.null_count and bufs and bufs[0] is not None else None
        offset, length = arr.offset, len(arr)
        buf1 = buf2 = None
        kind = node.kind
        if kind in (K_BOOL, K_INT, K_FLOAT, K_FIXED, K_DECIMAL):
            buf1 = bufs[1]
            need = ((offset + length) * node.value_width) if kind != K_BOOL else (offset + length + 7) // 8
            if length and (buf1 is None or buf1.size < need):
                raise AvroSchemaError(f"{node.path}: the Arrow values buffer is shorter than its {length} rows")
        elif kind in (K_BYTES, K_MAP) or (kind == K_LIST and node.p[0]):
            buf1 = bufs[1]
            if kind == K_BYTES:
                buf2 = bufs[2]
            width = node.p[0] if kind != K_MAP else 4
            if length and (buf1 is None or buf1.size < (offset + length + 1) * width):
                raise AvroSchemaError(f"{node.path}: the Arrow offsets buffer is shorter than its {length} rows")
        if validity is not None and validity.size < (offset + length + 7) // 8:
            raise AvroSchemaError(f"{node.path}: the Arrow validity bitmap is shorter than its {length} rows")
        if kind == K_NULL:
            offset, length = 0, len(arr)
        out[i] = (
            kind, node.null_branch, node.value_branch, validity, offset, length, buf1, buf2,
            node.children, *node.p,
        )
        for child, access in zip(node.children, node.child_access, strict=True):
            if access == "values":
                sub = arr.values
            else:
                sub = arr.field(int(access.split(":", 1)[1]))
            self._bind(child, sub, out)


def compile_plan(schema: AvroSchema, arrow_type: Any, root_name: str = "value") -> WritePlan:
    """Match ``schema`` against ``arrow_type``; raises AvroSchemaError naming the field that does not fit."""
    nodes: list[PlanNode] = []
    _compile(schema.tree, arrow_type, root_name, nodes)
    return WritePlan(nodes, schema, arrow_type)


def _kind_name(avro: Any) -> str:
    if isinstance(avro, list):
        return "union"
    if isinstance(avro, dict):
        lt = avro.get("logicalType")
        return f"{avro['type']} ({lt})" if lt else str(avro["type"])
    return str(avro)


def _compile(avro: Any, t: Any, path: str, nodes: list[PlanNode]) -> int:
    import pyarrow as pa

    types = pa.types
    null_branch, value_branch = -1, 0
    if isinstance(avro, list):
        non_null = [j for j, b in enumerate(avro) if b != "null"]
        nulls = [j for j, b in enumerate(avro) if b == "null"]
        if len(non_null) > 1 or len(nulls) > 1:
            raise AvroSchemaError(
                f"{path}: the union {[_kind_name(b) for b in avro]} is not supported; "
                'unions are written when they are ["null", T] or [T, "null"]'
            )
        null_branch = nulls[0] if nulls else -1
        if not non_null:
            index = len(nodes)
            nodes.append(PlanNode(K_NULL, path, null_branch, 0))
            return index
        value_branch = non_null[0]
        avro = avro[value_branch]
    index = len(nodes)
    node = PlanNode(K_NULL, path, null_branch, value_branch)
    nodes.append(node)
    kind = avro["type"] if isinstance(avro, dict) else avro
    logical = avro.get("logicalType") if isinstance(avro, dict) else None

    def refuse(extra: str = "") -> AvroSchemaError:
        return AvroSchemaError(f"{path}: Avro type {_kind_name(avro)} cannot be written from Arrow type {t}{extra}")

    if types.is_null(t):
        if kind != "null" and null_branch < 0:
            raise refuse(" (the column is all nulls; make the Avro type a union with null)")
        return index
    if kind in _REFUSED:
        raise AvroSchemaError(f"{path}: {_REFUSED[kind]}")
    if kind == "null":
        raise refuse(" (Avro null takes an Arrow null column)")
    if kind == "boolean":
        if not types.is_boolean(t):
            raise refuse()
        node.kind = K_BOOL
    elif kind in ("int", "long"):
        node.kind = K_INT
        target = 0 if kind == "int" else 1
        mul = div = 1
        if types.is_integer(t):
            if types.is_uint64(t):
                raise refuse(" (uint64 exceeds Avro long; cast the column to int64 first)")
            width = t.bit_width // 8
            src = -width if types.is_unsigned_integer(t) else width
        elif types.is_date32(t) or types.is_date64(t):
            if logical not in (None, "date"):
                raise refuse()
            src = 4 if types.is_date32(t) else 8
            div = 1 if types.is_date32(t) else 86_400_000
        elif types.is_timestamp(t) or types.is_time32(t) or types.is_time64(t):
            is_time = not types.is_timestamp(t)
            want = _LOGICAL_UNIT.get(logical or "")
            if want is None and logical is not None:
                raise refuse()
            if want is not None and is_time != logical.startswith("time-"):  # type: ignore[union-attr]
                raise refuse()
            src = t.bit_width // 8
            if want is not None:
                have, target_per_s = _UNIT_PER_S[t.unit], _UNIT_PER_S[want]
                if target_per_s >= have:
                    mul = target_per_s // have
                else:
                    div = have // target_per_s
        else:
            raise refuse()
        node.p = (src, target, mul, div)
        node.value_width = abs(src)
    elif kind in ("float", "double"):
        if not types.is_floating(t) or types.is_float16(t):
            raise refuse()
        if kind == "float" and types.is_float64(t):
            raise refuse(" (a double does not fit an Avro float; cast the column to float32 or use double)")
        node.kind = K_FLOAT
        node.p = (t.bit_width // 8, 4 if kind == "float" else 8, 0, 0)
        node.value_width = t.bit_width // 8
    elif kind in ("string", "bytes") and logical != "decimal":
        fits = (
            types.is_string(t) or types.is_large_string(t)
            if kind == "string"
            else types.is_binary(t) or types.is_large_binary(t)
        )
        if not fits:
            raise refuse()
        node.kind = K_BYTES
        node.p = (8 if types.is_large_string(t) or types.is_large_binary(t) else 4, 0, 0, 0)
    elif logical == "decimal" and kind in ("bytes", "fixed"):
        if not types.is_decimal128(t):
            raise refuse(" (decimals are written from decimal128 columns)")
        precision, scale = avro.get("precision"), avro.get("scale", 0)
        if not isinstance(precision, int) or precision < 1 or not isinstance(scale, int):
            raise AvroSchemaError(f"{path}: a decimal needs an integer 'precision' >= 1 and 'scale'")
        if scale != t.scale:
            raise refuse(f" (the Avro scale {scale} differs from the column's scale {t.scale})")
        size = 0
        if kind == "fixed":
            size = avro["size"]
            if size < decimal_fixed_size(min(precision, 38)):
                raise AvroSchemaError(f"{path}: fixed size {size} cannot hold decimal precision {precision}")
        node.kind = K_DECIMAL
        node.p = (size, precision if precision < 39 else 0, 16, 0)
        node.value_width = 16
    elif kind == "fixed":
        if not types.is_fixed_size_binary(t) or t.byte_width != avro["size"]:
            raise refuse(f" (a fixed of size {avro['size']} takes fixed_size_binary({avro['size']}))")
        node.kind = K_FIXED
        node.p = (t.byte_width, 0, 0, 0)
        node.value_width = t.byte_width
    elif kind == "record":
        if not types.is_struct(t):
            raise refuse()
        arrow_fields = {t.field(j).name: j for j in range(t.num_fields)}
        avro_names = {f["name"] for f in avro["fields"]}
        extra = [n for n in arrow_fields if n not in avro_names]
        if extra:
            raise AvroSchemaError(
                f"{path}: the column has field(s) {', '.join(map(repr, extra))} that record {avro['name']!r} "
                f"does not have (its fields: {', '.join(sorted(avro_names))})"
            )
        children, access = [], []
        for f in avro["fields"]:
            j = arrow_fields.get(f["name"])
            if j is None:
                raise AvroSchemaError(
                    f"{path}: record {avro['name']!r} has field {f['name']!r}, which the column does not have"
                )
            af = t.field(j)
            children.append(_compile(f["type"], af.type, f"{path}.{f['name']}", nodes))
            access.append(f"field:{j}")
        node.kind = K_STRUCT
        node.children, node.child_access = tuple(children), tuple(access)
    elif kind == "array":
        if types.is_list(t) or types.is_large_list(t):
            node.p = (4 if types.is_list(t) else 8, 0, 0, 0)
        elif types.is_fixed_size_list(t):
            node.p = (0, t.list_size, 0, 0)
        else:
            raise refuse()
        node.kind = K_LIST
        node.children = (_compile(avro["items"], t.value_type, f"{path}[]", nodes),)
        node.child_access = ("values",)
    elif kind == "map":
        if not types.is_map(t) or not (types.is_string(t.key_type) or types.is_large_string(t.key_type)):
            raise refuse(" (an Avro map takes a map column with string keys)")
        node.kind = K_MAP
        entries = len(nodes)
        nodes.append(PlanNode(K_STRUCT, f"{path}{{}}"))
        key = _compile("string", t.key_type, f"{path}{{key}}", nodes)
        value = _compile(avro["values"], t.item_type, f"{path}{{}}", nodes)
        nodes[entries].children = (key, value)
        nodes[entries].child_access = ("field:0", "field:1")
        node.children, node.child_access = (entries,), ("values",)
    else:
        raise refuse()
    if kind not in ("int", "long") and logical in _LOGICAL_UNIT:
        raise refuse()
    return index
