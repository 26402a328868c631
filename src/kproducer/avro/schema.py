"""Avro schemas: parsed from their JSON text, or derived from an Arrow (Spark) schema.

The derivation is Spark's ``to_avro`` mapping (``SchemaConverters.toAvroType`` in
Spark's Avro connector), so that a job moving from ``to_avro`` keeps its schemas:

==========================  ==========================================================
Arrow (Spark)               Avro
==========================  ==========================================================
bool (BooleanType)          ``boolean``
int8/16/32, uint8/16        ``int``
int64, uint32 (LongType)    ``long``
float32 / float64           ``float`` / ``double``
string, large_string        ``string``
binary, large_binary        ``bytes``
date32 / date64 (DateType)  ``int`` with logicalType ``date``
timestamp with a time zone  ``long`` with ``timestamp-micros`` (``timestamp-millis`` for
(TimestampType)             unit ``s``/``ms``); unit ``ns`` is floored to microseconds
timestamp without a zone    ``long`` with ``local-timestamp-micros`` / ``-millis``
(TimestampNTZType)
time32 / time64             ``time-millis`` (int) / ``time-micros`` (long)
decimal128(p, s)            ``fixed`` of the fewest bytes holding ``p`` digits, logicalType
(DecimalType)               ``decimal``, named ``<namespace>.<field>.fixed`` as Spark names it
fixed_size_binary(n)        ``fixed`` of size ``n``
null (NullType)             ``null``
list / large_list /         ``array`` (a nullable item type is a union)
fixed_size_list
map<string, V>              ``map``
struct (StructType)         ``record``: the top one named ``topLevelRecord`` (or the given
                            name) in the given namespace; a nested one named after its field,
                            in the namespace ``<namespace>.<parent record name>``
==========================  ==========================================================

A nullable field is the union ``[T, "null"]``, as Spark writes it (a schema given by
the user may put ``"null"`` first instead; both are written).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = [
    "PRIMITIVES",
    "AvroSchema",
    "AvroSchemaError",
    "decimal_fixed_size",
    "derive_schema",
]

PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_NAMED = ("record", "enum", "fixed")


class AvroSchemaError(ValueError):
    """An Avro schema is malformed, or does not fit the Arrow data it is asked to write."""


def decimal_fixed_size(precision: int) -> int:
    """The fewest bytes whose two's complement holds every ``precision``-digit unscaled value."""
    n = 1
    while 2 ** (8 * n - 1) < 10**precision:
        n += 1
    return n


class AvroSchema:
    """One Avro schema: its JSON form (as registered) and the parsed tree with named types resolved.

    ``tree`` is the schema as JSON values where every reference to a named type is
    replaced by that type's definition (a dict), and every named type carries its
    full name under ``"name"``.
    """

    __slots__ = ("json", "tree", "names")

    def __init__(self, schema: str | Mapping[str, Any] | list[Any]) -> None:
        if isinstance(schema, str):
            try:
                parsed = json.loads(schema)
            except json.JSONDecodeError as e:
                # A bare primitive name ("string") is also a schema.
                if schema.strip() in PRIMITIVES:
                    parsed = schema.strip()
                else:
                    raise AvroSchemaError(f"the Avro schema is not valid JSON: {e}") from None
        else:
            parsed = schema
        self.names: dict[str, dict[str, Any]] = {}
        self.tree: Any = self._resolve(parsed, "", "schema")
        self.json: str = json.dumps(parsed, separators=(",", ":"))

    def __repr__(self) -> str:
        return f"AvroSchema({self.json})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, AvroSchema) and self.json == other.json

    def __hash__(self) -> int:
        return hash(self.json)

    @property
    def name(self) -> str | None:
        """The full name of the top-level named type (a record's), or None for an unnamed schema."""
        return self.tree.get("name") if isinstance(self.tree, dict) and self.tree.get("type") in _NAMED else None

    # ------------------------------------------------------------------ parsing
    def _fullname(self, node: Mapping[str, Any], namespace: str, where: str) -> tuple[str, str]:
        name = node.get("name")
        if not isinstance(name, str) or not name:
            raise AvroSchemaError(f"{where}: a {node.get('type')} needs a non-empty string 'name'")
        if "." in name:
            return name, name.rsplit(".", 1)[0]
        ns = node.get("namespace", namespace)
        if ns is not None and not isinstance(ns, str):
            raise AvroSchemaError(f"{where}: 'namespace' must be a string")
        full = f"{ns}.{name}" if ns else name
        return full, ns or ""

    def _resolve(self, node: Any, namespace: str, where: str) -> Any:
        if isinstance(node, str):
            if node in PRIMITIVES:
                return node
            full = node if "." in node or not namespace else f"{namespace}.{node}"
            found = self.names.get(full) or self.names.get(node)
            if found is None:
                raise AvroSchemaError(f"{where}: unknown type name {node!r} (not a primitive nor a named type defined before)")
            return found
        if isinstance(node, list):
            branches = [self._resolve(b, namespace, f"{where}[{i}]") for i, b in enumerate(node)]
            if not branches:
                raise AvroSchemaError(f"{where}: a union needs at least one branch")
            return branches
        if not isinstance(node, Mapping):
            raise AvroSchemaError(f"{where}: {node!r} is not an Avro schema (a name, a list or an object)")
        kind = node.get("type")
        if isinstance(kind, (list, dict)):
            return self._resolve(kind, namespace, where)
        if kind in PRIMITIVES:
            out = dict(node)
            return out if len(out) > 1 else kind
        if kind in _NAMED:
            full, ns = self._fullname(node, namespace, where)
            out = dict(node)
            out["name"] = full
            if full in self.names:
                raise AvroSchemaError(f"{where}: the name {full!r} is defined twice")
            self.names[full] = out
            if kind == "record":
                fields = node.get("fields")
                if not isinstance(fields, list):
                    raise AvroSchemaError(f"{where}: record {full!r} needs a list of 'fields'")
                resolved = []
                seen = set()
                for i, f in enumerate(fields):
                    if not isinstance(f, Mapping) or not isinstance(f.get("name"), str) or "type" not in f:
                        raise AvroSchemaError(f"{where}: field {i} of record {full!r} needs a 'name' and a 'type'")
                    if f["name"] in seen:
                        raise AvroSchemaError(f"{where}: record {full!r} has two fields named {f['name']!r}")
                    seen.add(f["name"])
                    g = dict(f)
                    g["type"] = self._resolve(f["type"], ns, f"{where}.{f['name']}")
                    resolved.append(g)
                out["fields"] = resolved
            elif kind == "fixed":
                size = node.get("size")
                if not isinstance(size, int) or size < 0:
                    raise AvroSchemaError(f"{where}: fixed {full!r} needs an integer 'size' >= 0")
            elif kind == "enum":
                symbols = node.get("symbols")
                if not isinstance(symbols, list) or not all(isinstance(s, str) for s in symbols):
                    raise AvroSchemaError(f"{where}: enum {full!r} needs a list of string 'symbols'")
            return out
        if kind == "array":
            if "items" not in node:
                raise AvroSchemaError(f"{where}: an array needs 'items'")
            return {**node, "items": self._resolve(node["items"], namespace, f"{where}[]")}
        if kind == "map":
            if "values" not in node:
                raise AvroSchemaError(f"{where}: a map needs 'values'")
            return {**node, "values": self._resolve(node["values"], namespace, f"{where}{{}}")}
        raise AvroSchemaError(f"{where}: unknown Avro type {kind!r}")


# ---------------------------------------------------------------------- derivation (Spark's mapping)
def derive_schema(arrow_type: Any, record_name: str = "topLevelRecord", namespace: str = "") -> AvroSchema:
    """The Avro schema Spark's ``to_avro`` gives a column of this Arrow type (see the module's table).

    ``record_name`` and ``namespace`` name the top-level record, as Spark's
    ``recordName`` and ``recordNamespace`` options do. The top level is not a union:
    a null row is a null Kafka value.
    """
    return AvroSchema(_derive(arrow_type, False, record_name, namespace, "value"))


def _nullable(t: Any, nullable: bool) -> Any:
    return [t, "null"] if nullable and t != "null" else t


def _time_unit(unit: str) -> str:
    return "millis" if unit in ("s", "ms") else "micros"


def _derive(t: Any, nullable: bool, record_name: str, namespace: str, where: str) -> Any:
    import pyarrow as pa

    types = pa.types
    out: Any
    if types.is_boolean(t):
        out = "boolean"
    elif types.is_int8(t) or types.is_int16(t) or types.is_int32(t) or types.is_uint8(t) or types.is_uint16(t):
        out = "int"
    elif types.is_int64(t) or types.is_uint32(t):
        out = "long"
    elif types.is_float32(t):
        out = "float"
    elif types.is_float64(t):
        out = "double"
    elif types.is_string(t) or types.is_large_string(t):
        out = "string"
    elif types.is_binary(t) or types.is_large_binary(t):
        out = "bytes"
    elif types.is_date32(t) or types.is_date64(t):
        out = {"type": "int", "logicalType": "date"}
    elif types.is_timestamp(t):
        local = "" if t.tz is not None else "local-"
        out = {"type": "long", "logicalType": f"{local}timestamp-{_time_unit(t.unit)}"}
    elif types.is_time32(t):
        out = {"type": "int", "logicalType": "time-millis"}
    elif types.is_time64(t):
        out = {"type": "long", "logicalType": "time-micros"}
    elif types.is_decimal128(t):
        name = f"{namespace}.{record_name}.fixed" if namespace else f"{record_name}.fixed"
        out = {
            "type": "fixed", "name": name, "size": decimal_fixed_size(t.precision),
            "logicalType": "decimal", "precision": t.precision, "scale": t.scale,
        }
    elif types.is_fixed_size_binary(t):
        name = f"{namespace}.{record_name}.fixed" if namespace else f"{record_name}.fixed"
        out = {"type": "fixed", "name": name, "size": t.byte_width}
    elif types.is_null(t):
        out = "null"
    elif types.is_list(t) or types.is_large_list(t) or types.is_fixed_size_list(t):
        f = t.value_field
        out = {"type": "array", "items": _derive(f.type, f.nullable, record_name, namespace, f"{where}[]")}
    elif types.is_map(t):
        if not (types.is_string(t.key_type) or types.is_large_string(t.key_type)):
            raise AvroSchemaError(f"{where}: Avro map keys are strings; this map's keys are {t.key_type}")
        f = t.item_field
        out = {"type": "map", "values": _derive(f.type, f.nullable, record_name, namespace, f"{where}{{}}")}
    elif types.is_struct(t):
        child_ns = f"{namespace}.{record_name}" if namespace else record_name
        fields = []
        for i in range(t.num_fields):
            f = t.field(i)
            fields.append({"name": f.name, "type": _derive(f.type, f.nullable, f.name, child_ns, f"{where}.{f.name}")})
        out = {"type": "record", "name": record_name}
        if namespace:
            out["namespace"] = namespace
        out["fields"] = fields
    else:
        raise AvroSchemaError(
            f"{where}: Arrow type {t} has no Avro mapping (supported: boolean, integers up to int64 and uint32, "
            "floats, string, binary, date, timestamp, time, decimal128, fixed_size_binary, null, lists, "
            "string-keyed maps, structs)"
        )
    return _nullable(out, nullable)
