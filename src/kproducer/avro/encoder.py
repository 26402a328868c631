"""Arrow columns to Avro binary bodies, one column of one record batch at a time.

Why C, one row at a time: a row's Avro body interleaves every field (zig-zag
varints, length-prefixed strings, union branches, array blocks), so a
column-at-a-time numpy encoder would need a scatter pass per field plus
per-row offset bookkeeping for every nested list and map; the C encoder
(``kproducer.avro._avro_encoder``) walks the bound plan
(:mod:`kproducer.avro.plan`) row by row straight over the Arrow buffers, with
the GIL released, into one output buffer and an int64 offsets array. Its twin is
:class:`ReferenceEncoder` below, the same walk in Python, used when the
extension is not built or ``KPRODUCER_PURE_PYTHON=1``; the tests prove both give
the same bytes on generated tables (benchmarks/RESULTS.md, "Avro from Arrow",
has the figures).

Each row is written with ``prefix`` first (the Schema Registry framing: magic
byte 0 and the big-endian schema id, see docs/spark.md). A row that cannot be
written (a null where the schema has no null, an int or a decimal out of range)
is rolled back to its start: it gets an empty slot and is reported as
``(row, node, rule)``; the other rows are written. A null at the top level is a
null Kafka value, as confluent-kafka's serializers give for ``None``.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from kproducer.avro.plan import (
    K_BOOL,
    K_BYTES,
    K_DECIMAL,
    K_FIXED,
    K_FLOAT,
    K_INT,
    K_LIST,
    K_MAP,
    K_NULL,
    K_STRUCT,
)
from kproducer.record.c_extension import load

__all__ = [
    "AVAILABLE",
    "RULE_DECIMAL_RANGE",
    "RULE_INT_RANGE",
    "RULE_MALFORMED",
    "RULE_NULL",
    "RULE_OVERFLOW",
    "EncodedColumn",
    "ReferenceEncoder",
    "encode",
    "encode_reference",
]

RULE_NULL = 1
RULE_INT_RANGE = 2
RULE_DECIMAL_RANGE = 3
RULE_OVERFLOW = 4
RULE_MALFORMED = 5

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


class EncodedColumn(NamedTuple):
    """An encoded column: ``offsets`` (n + 1 int64), ``data``, ``validity`` (a bitmap, None when no
    top-level null) and ``failures``: ``(row, node, rule)`` for each row that was not written."""

    offsets: bytes
    data: bytearray
    validity: bytes | None
    failures: list[tuple[int, int, int]]


class _RowError(Exception):
    def __init__(self, node: int, rule: int) -> None:
        self.node = node
        self.rule = rule


def _zigzag(v: int, out: bytearray) -> None:
    u = ((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)


_INT_FMT = {1: "b", 2: "h", 4: "i", 8: "q", -1: "B", -2: "H", -4: "I"}


def _view(buf: Any, fmt: str) -> Any:
    mv = memoryview(buf).cast("B")
    size = struct.calcsize(fmt)
    return mv[: len(mv) - len(mv) % size].cast(fmt)  # type: ignore[call-overload]


class ReferenceEncoder:
    """The pure-Python encoder over bound plan tuples: the reference the C encoder mirrors."""

    def __init__(self, nodes: tuple[tuple[Any, ...], ...]) -> None:
        self.nodes = nodes
        self.views: list[tuple[Any, Any, Any]] = []
        for kind, _nb, _vb, validity, _off, _len, buf1, buf2, _ch, p1, _p2, _p3, _p4 in nodes:
            val = memoryview(validity).cast("B") if validity is not None else None
            v1: Any = None
            v2: Any = None
            if kind == K_INT and buf1 is not None:
                v1 = _view(buf1, _INT_FMT[p1])
            elif kind == K_FLOAT and buf1 is not None:
                v1 = _view(buf1, "f" if p1 == 4 else "d")
            elif kind in (K_BOOL, K_FIXED, K_DECIMAL) and buf1 is not None:
                v1 = memoryview(buf1).cast("B")
            elif kind in (K_BYTES, K_LIST, K_MAP) and buf1 is not None:
                v1 = _view(buf1, "i" if (p1 == 4 or kind == K_MAP) else "q")
                if kind == K_BYTES:
                    v2 = memoryview(buf2).cast("B") if buf2 is not None else memoryview(b"")
            self.views.append((val, v1, v2))

    def is_null(self, n: int, i: int) -> bool:
        val = self.views[n][0]
        if self.nodes[n][0] == K_NULL:
            return True
        if val is None:
            return False
        j = self.nodes[n][4] + i
        return not (val[j >> 3] >> (j & 7)) & 1

    def write(self, n: int, i: int, out: bytearray) -> None:
        kind, null_branch, value_branch, _v, offset, _length, _b1, _b2, children, p1, p2, p3, p4 = self.nodes[n]
        if self.is_null(n, i):
            if null_branch >= 0:
                _zigzag(null_branch, out)
                return
            if kind == K_NULL:
                return
            raise _RowError(n, RULE_NULL)
        if null_branch >= 0:
            _zigzag(value_branch, out)
        _val, v1, v2 = self.views[n]
        j = offset + i
        if kind == K_INT:
            v = int(v1[j])
            if p3 != 1:
                v *= p3
                if not _INT64_MIN <= v <= _INT64_MAX:
                    raise _RowError(n, RULE_OVERFLOW)
            if p4 != 1:
                v //= p4
            if p2 == 0 and not _INT32_MIN <= v <= _INT32_MAX:
                raise _RowError(n, RULE_INT_RANGE)
            _zigzag(v, out)
        elif kind == K_BYTES:
            a, b = v1[j], v1[j + 1]
            if a < 0 or b < a or b > len(v2):
                raise _RowError(n, RULE_MALFORMED)
            _zigzag(b - a, out)
            out += v2[a:b]
        elif kind == K_STRUCT:
            for c in children:
                self.write(c, i, out)
        elif kind == K_FLOAT:
            out += struct.pack("<f" if p2 == 4 else "<d", v1[j])
        elif kind == K_BOOL:
            out.append((v1[j >> 3] >> (j & 7)) & 1)
        elif kind in (K_LIST, K_MAP):
            if kind == K_LIST and p1 == 0:
                a, b = j * p2, (j + 1) * p2
            else:
                a, b = v1[j], v1[j + 1]
            item = children[0]
            if a < 0 or b < a or b > self.nodes[item][5]:
                raise _RowError(n, RULE_MALFORMED)
            if b > a:
                _zigzag(b - a, out)
                for k in range(a, b):
                    self.write(item, k, out)
            out.append(0)
        elif kind == K_DECIMAL:
            unscaled = int.from_bytes(v1[16 * j : 16 * j + 16], "little", signed=True)
            if p2 and abs(unscaled) >= 10**p2:
                raise _RowError(n, RULE_DECIMAL_RANGE)
            if p1:
                out += unscaled.to_bytes(p1, "big", signed=True)
            else:
                size = 1
                while not -(1 << (8 * size - 1)) <= unscaled < (1 << (8 * size - 1)):
                    size += 1
                _zigzag(size, out)
                out += unscaled.to_bytes(size, "big", signed=True)
        elif kind == K_FIXED:
            out += v1[p1 * j : p1 * (j + 1)]
        elif kind == K_NULL:
            pass
        else:  # pragma: no cover - compile_plan makes no other kind
            raise ValueError(f"unknown plan node kind {kind}")


def encode_reference(nodes: tuple[tuple[Any, ...], ...], prefix: bytes) -> EncodedColumn:
    """Encode every row of the bound plan ``nodes`` (root: node 0) in Python."""
    enc = ReferenceEncoder(nodes)
    n = nodes[0][5]
    out = bytearray()
    offsets = [0] * (n + 1)
    validity: bytearray | None = None
    failures: list[tuple[int, int, int]] = []
    root_has_nulls = nodes[0][3] is not None or nodes[0][0] == K_NULL
    for i in range(n):
        if root_has_nulls and enc.is_null(0, i):
            if validity is None:
                validity = bytearray(b"\xff" * ((n + 7) // 8))
            validity[i >> 3] &= ~(1 << (i & 7)) & 0xFF
            offsets[i + 1] = len(out)
            continue
        start = len(out)
        out += prefix
        try:
            enc.write(0, i, out)
        except _RowError as e:
            del out[start:]
            failures.append((i, e.node, e.rule))
        offsets[i + 1] = len(out)
    return EncodedColumn(struct.pack(f"<{n + 1}q", *offsets), out, bytes(validity) if validity else None, failures)


# The C encoder, or None with the reason recorded for kproducer.native_available().
_c: Any = load("kproducer.avro._avro_encoder")
AVAILABLE: bool = _c is not None
"""Whether the C encoder runs (else the reference)."""


def encode(nodes: tuple[tuple[Any, ...], ...], prefix: bytes) -> EncodedColumn:
    """Encode every row of the bound plan ``nodes``, with the C encoder when it is built."""
    if _c is None:
        return encode_reference(nodes, prefix)
    offsets, data, validity, failures = _c.encode(nodes, prefix)
    return EncodedColumn(offsets, data, validity, failures)
