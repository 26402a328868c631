"""The C hot path (kproducer._speedups) against its pure-Python references.

The references are kproducer.record.default_record (the v2 record encoder),
kproducer.murmur2 (the key hash and partition formula), kproducer.record.arrow_column
(the Arrow column reader) and kproducer.record.native.py built on them. Both sides
must write the same bytes, make the same room decisions and pick the same
partitions, and whole batches built by the builder either way must be identical;
the reader must decode what they write. These tests compare the two
implementations directly, so they run the same whichever one the process uses.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import struct
from collections.abc import Iterator
from typing import Any, ClassVar

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproducer.murmur2 import murmur2, partition_for_key
from kproducer.record import builder as builder_module
from kproducer.record import default_record, native
from kproducer.record.builder import MemoryRecordsBuilder, _encode_headers
from kproducer.record.codecs import CompressionType
from kproducer.record.reader import read_batches
from kproducer.structs import RecordMetadata, TopicPartition


def _c() -> object:
    """The C module; `make test` builds it, so its absence is a build failure, not a skip."""
    try:
        from kproducer import _speedups
    except ImportError as e:
        pytest.fail(f"kproducer._speedups is not built ({e}); `pip install -e .` compiles src/kproducer/_speedups.c")
    return _speedups


def test_env_switch_selects_implementation() -> None:
    forced = os.environ.get("KPRODUCER_PURE_PYTHON", "").strip() not in ("", "0")
    assert native.AVAILABLE is (not forced)
    assert (native.append_record == native.py.append_record) is forced


@settings(deadline=None)
@given(st.binary(max_size=64))
def test_murmur2_agrees(data: bytes) -> None:
    assert _c().murmur2(data) == murmur2(data) == native.py.murmur2(data)  # type: ignore[attr-defined]


@settings(deadline=None, max_examples=200)
@given(
    st.lists(
        st.tuples(st.none() | st.binary(max_size=40), st.none() | st.binary(max_size=3000), st.integers(-5000, 5000)),
        max_size=30,
    ),
    st.binary(max_size=20),
)
def test_largest_record_agrees_and_is_the_largest_encoded_record(
    records: list[tuple[bytes | None, bytes | None, int]], head: bytes
) -> None:
    """C and Python read the same largest record from a batch's bytes: the longest encoded one."""
    encoded = [default_record.encode_record(i, ts, k, v, b"\x00") for i, (k, v, ts) in enumerate(records)]
    buf = bytearray(head) + b"".join(encoded) + b"tail"
    start, end = len(head), len(head) + sum(map(len, encoded))
    want = max(map(len, encoded), default=0)
    assert _c().largest_record(buf, start, end) == want  # type: ignore[attr-defined]
    assert native.py.largest_record(buf, start, end) == want


def test_largest_record_refuses_records_that_run_past_the_end() -> None:
    record = default_record.encode_record(0, 0, None, b"x" * 300, b"\x00")
    buf = bytearray(record)
    for impl in (_c(), native.py):
        with pytest.raises(ValueError, match="corrupt record at byte 0: length 30[0-9] past the end"):
            impl.largest_record(buf, 0, len(buf) - 1)  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="outside the buffer"):
        _c().largest_record(buf, 0, len(buf) + 1)  # type: ignore[attr-defined]


@settings(max_examples=100, deadline=None)
@given(keys=st.lists(st.one_of(st.none(), st.binary(max_size=40)), max_size=60), partitions=st.integers(1, 50))
def test_partition_formula_agrees_with_the_c_mirror(keys: list[bytes | None], partitions: int) -> None:
    """C's partition_seq groups every key where the Python reference formula puts it."""
    groups = _c().partition_seq(keys, 0, len(keys), partitions)  # type: ignore[attr-defined]
    assert groups == native.py.partition_seq(keys, 0, len(keys), partitions)
    where = {row: p for p, g in enumerate(groups) for row in struct.unpack(f"<{len(g) // 8}q", g)}
    for row, key in enumerate(keys):
        assert where[row] == (partitions if key is None else partition_for_key(key, partitions))
        if key is not None:  # the formula over the pure murmur2, whichever murmur2 partition_for_key uses
            assert where[row] == (murmur2(key) & 0x7FFFFFFF) % partitions


def test_murmur2_java_vectors() -> None:
    # From Kafka's UtilsTest.testMurmur2.
    vectors = {b"21": -973932308, b"foobar": -790332482, b"a-little-bit-long-string": -985981536}
    for data, expected in vectors.items():
        assert _c().murmur2(data) == expected  # type: ignore[attr-defined]


keys_values = st.one_of(st.none(), st.binary(max_size=300))


@settings(max_examples=150, deadline=None)
@given(
    records=st.lists(st.tuples(keys_values, keys_values), min_size=1, max_size=40),
    ts_delta=st.integers(min_value=-(2**40), max_value=2**40),
    limit=st.integers(min_value=61, max_value=4000),
    ratio=st.sampled_from([0.0, 0.3, 1.0, 1.7]),
    headers=st.one_of(st.none(), st.just([("h", b"v"), ("n", None)])),
)
def test_append_record_same_bytes_and_room(
    records: list[tuple[bytes | None, bytes | None]], ts_delta: int, limit: int, ratio: float, headers: list | None
) -> None:
    enc = _encode_headers(headers)[0] if headers else None
    out = []
    for impl in (_c(), native.py):
        buf = bytearray(61)
        pos, n, decisions = 61, 0, []
        for key, value in records:
            new = impl.append_record(buf, pos, limit, 61, ratio, n, ts_delta if n else 0, key, value, enc)  # type: ignore[attr-defined]
            decisions.append(new)
            if new >= 0:
                pos, n = new, n + 1
        out.append((bytes(buf[:pos]), decisions))
    assert out[0] == out[1]


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(keys_values, min_size=1, max_size=60),
    keyed=st.booleans(),
    limit=st.integers(min_value=100, max_value=3000),
    ratio=st.sampled_from([0.0, 0.5, 1.2]),
)
def test_append_seq_and_arrow_agree_with_pure(values: list[bytes | None], keyed: bool, limit: int, ratio: float) -> None:
    keys = [v[:3] if v is not None else None for v in values] if keyed else None
    n = len(values)
    results = []
    for impl in (_c(), native.py):
        buf = bytearray(61)
        got = impl.append_seq(buf, 61, limit, 61, ratio, 0, 0, values, keys, None, 0, n, None)  # type: ignore[attr-defined]
        # The bytes written are buf[:pos]; the C side may leave spare capacity after them.
        results.append((got, bytes(buf[: got[0]])))
    assert results[0] == results[1]
    varr = pa.array(values, pa.binary())
    vcol = (varr.buffers()[1], varr.buffers()[2], varr.buffers()[0], varr.offset, len(varr), 4)
    kcol = None
    if keys is not None:
        karr = pa.array(keys, pa.large_binary())
        kcol = (karr.buffers()[1], karr.buffers()[2], karr.buffers()[0], karr.offset, len(karr), 8)
    for impl in (_c(), native.py):
        buf = bytearray(61)
        got = impl.append_arrow(buf, 61, limit, 61, ratio, 0, 0, vcol, kcol, None, 0, n, None)  # type: ignore[attr-defined]
        assert (got, bytes(buf[: got[0]])) == results[0]


def test_append_many_with_indices_and_sliced_arrow() -> None:
    values = [f"value-{i}".encode() for i in range(50)]
    arr = pa.array(values, pa.string()).slice(10, 30)
    col = (arr.buffers()[1], arr.buffers()[2], None, arr.offset, len(arr), 4)
    idx = struct.pack("<3q", 29, 0, 7)
    for impl in (_c(), native.py):
        buf = bytearray(61)
        pos, count = impl.append_arrow(buf, 61, 10_000, 61, 0.0, 0, 0, col, None, idx, 0, 3, None)  # type: ignore[attr-defined]
        assert count == 3
        builder = MemoryRecordsBuilder(bytearray(61), write_limit=10_000)
        for row in (39, 10, 17):
            builder.append(0, None, values[row])
        builder.close()
        assert bytes(buf[61:pos]) == bytes(builder.buffer()[61:])


def test_partition_groups_keep_order_and_put_null_keys_last() -> None:
    keys = [f"k{i % 13}".encode() if i % 5 else None for i in range(200)]
    for impl in (_c(), native.py):
        groups = impl.partition_seq(keys, 0, 200, 7)  # type: ignore[attr-defined]
        assert len(groups) == 8
        rows = [list(struct.unpack(f"<{len(g) // 8}q", g)) for g in groups]
        for p, r in enumerate(rows[:7]):
            assert r == sorted(r)
            assert all((murmur2(keys[i]) & 0x7FFFFFFF) % 7 == p for i in r)  # type: ignore[arg-type]
        assert rows[7] == [i for i in range(200) if i % 5 == 0]
    arr = pa.array(keys, pa.binary())
    col = (arr.buffers()[1], arr.buffers()[2], arr.buffers()[0], 0, 200, 4)
    assert _c().partition_arrow(col, 0, 200, 7) == native.py.partition_arrow(col, 0, 200, 7) == _c().partition_seq(keys, 0, 200, 7)  # type: ignore[attr-defined]


def test_builder_try_append_and_append_many_decode() -> None:
    builder = MemoryRecordsBuilder(bytearray(1024), write_limit=1024, compression="lz4")
    assert builder.try_append(1000, b"k", b"v" * 10, [("h", b"x")])
    assert builder.try_append(1005, None, None)
    n = builder.append_many(1010, [b"a" * 20] * 500, None, None, 0, 500, None)
    assert 0 < n < 500
    builder.close()
    (batch,) = list(read_batches(builder.buffer()))
    recs = list(batch.records())
    assert len(recs) == 2 + n
    assert (recs[0].key, recs[0].value, list(recs[0].headers)) == (b"k", b"v" * 10, [("h", b"x")])
    assert (recs[1].key, recs[1].value, recs[1].timestamp) == (None, None, 1005)
    assert [r.offset for r in recs] == list(range(2 + n))
    assert recs[-1].value == b"a" * 20 and recs[-1].timestamp == 1010


def test_bad_input_errors_name_the_culprit() -> None:
    for impl in (_c(), native.py):
        with pytest.raises(TypeError, match="values\\[1\\] must be bytes"):
            impl.append_seq(bytearray(61), 61, 1000, 61, 0.0, 0, 0, [b"a", 5], None, None, 0, 2, None)  # type: ignore[attr-defined]
        with pytest.raises(ValueError, match="same length"):
            impl.append_seq(bytearray(61), 61, 1000, 61, 0.0, 0, 0, [b"a"], [b"k", b"l"], None, 0, 1, None)  # type: ignore[attr-defined]
        with pytest.raises(ValueError, match="out of range"):
            impl.append_seq(bytearray(61), 61, 1000, 61, 0.0, 0, 0, [b"a"], None, None, 0, 2, None)  # type: ignore[attr-defined]
        with pytest.raises(TypeError, match="key must be bytes"):
            impl.append_record(bytearray(61), 61, 1000, 61, 0.0, 0, 0, "text", b"v", None)  # type: ignore[attr-defined]
        with pytest.raises(ValueError, match="num_partitions"):
            impl.partition_seq([b"a"], 0, 1, 0)  # type: ignore[attr-defined]
        with pytest.raises(ValueError, match="offset width"):
            impl.append_arrow(bytearray(61), 61, 1000, 61, 0.0, 0, 0, (b"", b"", None, 0, 0, 2), None, None, 0, 0, None)  # type: ignore[attr-defined]


# ---------------------------------------------------------------- whole batches, C against pure Python
@contextlib.contextmanager
def _encoder(pure: bool) -> Iterator[None]:
    """The builder's record encoders set to the pure-Python references (or to C) for the block."""
    saved = (builder_module._append_record, native.append_seq, native.append_arrow)
    impl: Any = native.py if pure else _c()
    builder_module._append_record = default_record.append_record if pure else impl.append_record
    native.append_seq, native.append_arrow = impl.append_seq, impl.append_arrow
    try:
        yield
    finally:
        builder_module._append_record, native.append_seq, native.append_arrow = saved


header_lists = st.one_of(
    st.none(),
    st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))), max_size=3),
)
timestamps = st.integers(min_value=0, max_value=2**42)
one_record = st.tuples(st.just("one"), timestamps, keys_values, keys_values, header_lists)
many_records = st.tuples(
    st.just("many"),
    timestamps,
    st.lists(keys_values, min_size=1, max_size=30),
    st.booleans(),  # keyed
    st.booleans(),  # Arrow columns (else lists of bytes)
    header_lists,
)


def _build_batch(ops: list[tuple[Any, ...]], codec: CompressionType, limit: int, ratio: float | None) -> tuple[bytes, list[Any]]:
    builder = MemoryRecordsBuilder(
        bytearray(61), compression=codec, write_limit=limit, estimated_compression_ratio=ratio
    )
    outcomes: list[Any] = []
    for op in ops:
        if op[0] == "one":
            _, ts, key, value, headers = op
            outcomes.append(builder.try_append(ts, key, value, headers))
            continue
        _, ts, values, keyed, arrow, headers = op
        keys = [v[:4] if v is not None else None for v in values] if keyed else None
        encoded = _encode_headers(headers)[0] if headers else None
        vcol: Any = values
        kcol: Any = keys
        if arrow:
            varr = pa.array(values, pa.binary())
            vcol = (varr.buffers()[1], varr.buffers()[2], varr.buffers()[0], varr.offset, len(varr), 4)
            if keys is not None:
                karr = pa.array(keys, pa.large_binary())
                kcol = (karr.buffers()[1], karr.buffers()[2], karr.buffers()[0], karr.offset, len(karr), 8)
        outcomes.append(builder.append_many(ts, vcol, kcol, None, 0, len(values), encoded, arrow=arrow))
    builder.close()
    return bytes(builder.buffer()), outcomes


@settings(max_examples=120, deadline=None)
@given(
    ops=st.lists(st.one_of(one_record, many_records), min_size=1, max_size=12),
    codec=st.sampled_from(list(CompressionType)),
    limit=st.integers(min_value=100, max_value=6000),
    ratio=st.sampled_from([None, 0.25, 0.7]),
)
def test_whole_batches_built_in_c_and_in_pure_python_are_identical(
    ops: list[tuple[Any, ...]], codec: CompressionType, limit: int, ratio: float | None
) -> None:
    """The builder's output, byte for byte, with the C encoders and with the Python references."""
    with _encoder(pure=False):
        c_bytes, c_outcomes = _build_batch(ops, codec, limit, ratio)
    with _encoder(pure=True):
        py_bytes, py_outcomes = _build_batch(ops, codec, limit, ratio)
    assert c_outcomes == py_outcomes
    assert c_bytes == py_bytes
    appended = sum(int(o) for o in c_outcomes)  # try_append: True/False; append_many: a count
    batches = list(read_batches(c_bytes))
    assert sum(len(list(b.records())) for b in batches) == appended


# ---------------------------------------------------------------- settle_group makes metadata through its class
@dataclasses.dataclass(frozen=True, slots=True)
class _CountedMetadata(RecordMetadata):
    """A metadata class whose own __post_init__ runs: settle_group must build through the class."""

    made: ClassVar[list[int]] = []

    def __post_init__(self) -> None:
        _CountedMetadata.made.append(self.offset)


@dataclasses.dataclass(frozen=True, slots=True)
class _RefusingMetadata(RecordMetadata):
    """A metadata class that refuses the third record: its error must reach settle_group's caller."""

    def __post_init__(self) -> None:
        if self.offset == 102:
            raise ValueError(f"offset {self.offset} refused")


def _settle_with(settle: Any, metadata_cls: type[RecordMetadata]) -> tuple[list[Any], BaseException | None]:
    """Settle four records of a batch at base offset 100; each future's result (or 'pending') and the error."""
    from kproducer.accumulator.futures import ProduceRequestResult

    class CFields(_c().FutureRecordMetadata):  # type: ignore[misc]
        """The C fields both read (in the pure pass RecordFuture builds on the Python twin)."""

        @property
        def next_future(self) -> Any:
            return self._next

    async def main() -> tuple[list[Any], BaseException | None]:
        loop = asyncio.get_running_loop()
        result = ProduceRequestResult(TopicPartition("t", 2))
        group: list[Any] = []
        for i in range(4):
            group += [loop.create_future(), CFields(result, i, 1_700_000_000_000 + i, 3, 5)]
        error: BaseException | None = None
        try:
            settle(group, metadata_cls, "t", 2, 100, -1)
        except ValueError as e:
            error = e
        return [f.result() if f.done() else "pending" for f in group[::2]], error

    return asyncio.run(main())


def test_settle_group_builds_each_metadata_by_calling_its_class() -> None:
    """settle_group makes each record's metadata through its class, as its Python reference does.

    A subclass with a constructor of its own (here a dataclass's ``__init__`` calling
    ``__post_init__``) is called for every record, and an error it raises stops settle_group
    there, with the records before it settled and the rest not. (The plain class is made by its
    C type's constructor: tests/integration/tansu/test_aio.py compares that with the reference.)
    """
    from kproducer.aio import _settle_group_py

    for settle in (_c().settle_group, _settle_group_py):  # type: ignore[attr-defined]
        _CountedMetadata.made.clear()
        results, error = _settle_with(settle, _CountedMetadata)
        assert error is None and _CountedMetadata.made == [100, 101, 102, 103], settle
        assert [type(md) for md in results] == [_CountedMetadata] * 4
        assert results[1] == _CountedMetadata("t", 2, 101, 1_700_000_000_001, 3, 5)
    c_refused = _settle_with(_c().settle_group, _RefusingMetadata)  # type: ignore[attr-defined]
    py_refused = _settle_with(_settle_group_py, _RefusingMetadata)
    assert str(c_refused[1]) == str(py_refused[1]) == "offset 102 refused"
    assert c_refused[0] == py_refused[0]
    assert c_refused[0][2:] == ["pending", "pending"] and c_refused[0][1].offset == 101


def test_settle_group_untracks_settled_futures_without_attributes() -> None:
    """settle_group takes a settled future out of the cyclic GC only when it has no attributes of its own.

    The check reads public type fields (and PyObject_VisitManagedDict on 3.13, where asyncio's
    Future keeps a managed dict): a future given an attribute may be in a cycle and stays tracked.
    """
    import gc

    from kproducer.accumulator.futures import ProduceRequestResult
    from kproducer.structs import RecordMetadata, TopicPartition

    async def main() -> tuple[bool, bool, bool]:
        loop = asyncio.get_running_loop()
        result = ProduceRequestResult(TopicPartition("t", 0))
        plain, tagged, subclassed = loop.create_future(), loop.create_future(), _TaggedFuture(loop=loop)
        tagged.note = "kept"  # type: ignore[attr-defined]
        group: list[object] = []
        for i, fut in enumerate((plain, tagged, subclassed)):
            # The C type's fields (in the pure pass RecordFuture builds on the Python twin).
            group += [fut, _c().FutureRecordMetadata(result, i, 1_700_000_000_000, -1, 1)]  # type: ignore[attr-defined]
        _c().settle_group(group, RecordMetadata, "t", 0, 100, -1)  # type: ignore[attr-defined]
        assert [f.result().offset for f in (plain, tagged, subclassed)] == [100, 101, 102]
        return gc.is_tracked(plain), gc.is_tracked(tagged), gc.is_tracked(subclassed)

    assert asyncio.run(main()) == (False, True, False)


def test_settle_group_refuses_a_future_without_the_c_fields() -> None:
    """settle_group reads a record's fields through the C FutureRecordMetadata only; the Python twin's
    future (which the pure pass settles in Python) gets a TypeError naming its type, nothing settled."""
    from kproducer.accumulator.futures import ProduceRequestResult, PyFutureRecordMetadata
    from kproducer.structs import RecordMetadata, TopicPartition

    async def main() -> None:
        fut = asyncio.get_running_loop().create_future()
        twin = PyFutureRecordMetadata(ProduceRequestResult(TopicPartition("t", 0)), 0, 1, -1, 1)
        with pytest.raises(TypeError, match="FutureRecordMetadata, got PyFutureRecordMetadata"):
            _c().settle_group([fut, twin], RecordMetadata, "t", 0, 100, -1)  # type: ignore[attr-defined]
        assert not fut.done()

    asyncio.run(main())


class _TaggedFuture(asyncio.Future):  # type: ignore[type-arg]
    """A Python subclass of asyncio.Future: its instances get a dict managed by the interpreter."""
