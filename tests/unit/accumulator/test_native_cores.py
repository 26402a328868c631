"""The C types that own the fields the send lane appends through, against their Python twins.

``MemoryRecordsBuilder`` builds on ``MemoryRecordsBuilderCore``, ``ProducerBatch`` on
``ProducerBatchCore``, ``PartitionDeque`` on ``PartitionDequeCore`` and ``BuiltInPartitioner`` on
``BuiltInPartitionerCore``, which makes ``StickyPartitionInfo`` objects: the C types in
``kproducer._speedups`` in the native pass, the Python twins (``Py`` + the name) in the pure pass.
Each case here runs on both and expects the same attributes, the same errors and the same
behaviour under the cyclic GC. What the C types do with those fields (append a record, count its
bytes to the sticky partition) is compared with the Python ``send()`` by
``tests/unit/producer/test_send_lane_twin.py``.
"""

from __future__ import annotations

import gc
import inspect
import os
import struct
import types
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kproducer import partitioner as partitioner_module
from kproducer.accumulator import batch as batch_module
from kproducer.accumulator import deques as deques_module
from kproducer.accumulator.batch import ProducerBatch, PyProducerBatchCore
from kproducer.accumulator.deques import PartitionDeque, PyPartitionDequeCore
from kproducer.partitioner import BuiltInPartitioner, PyBuiltInPartitionerCore, PyStickyPartitionInfo
from kproducer.record import builder as builder_module
from kproducer.record import native
from kproducer.record.builder import MemoryRecordsBuilder, PyMemoryRecordsBuilderCore
from kproducer.record.codecs import CompressionType
from kproducer.record.reader import read_batches

PURE = os.environ.get("KPRODUCER_PURE_PYTHON", "").strip() not in ("", "0")
native_only = pytest.mark.skipif(PURE, reason="the pure-Python pass has no C types (test_the_classes_build_on_the_pass_types)")

TWINS: dict[str, type] = {
    "MemoryRecordsBuilderCore": PyMemoryRecordsBuilderCore,
    "ProducerBatchCore": PyProducerBatchCore,
    "PartitionDequeCore": PyPartitionDequeCore,
    "BuiltInPartitionerCore": PyBuiltInPartitionerCore,
}
CLASSES: dict[str, tuple[type, types.ModuleType]] = {
    "MemoryRecordsBuilderCore": (MemoryRecordsBuilder, builder_module),
    "ProducerBatchCore": (ProducerBatch, batch_module),
    "PartitionDequeCore": (PartitionDeque, deques_module),
    "BuiltInPartitionerCore": (BuiltInPartitioner, partitioner_module),
}


def _native(name: str) -> Any:
    assert native.c is not None, "the C extension kproducer._speedups is not built: run `make test` to build it"
    return getattr(native.c, name)


CORES = [
    pytest.param(lambda name: TWINS[name], id="python"),
    pytest.param(_native, id="native", marks=native_only),
]


def test_the_classes_build_on_the_pass_types() -> None:
    for name, (cls, module) in CLASSES.items():
        expected = TWINS[name] if PURE else _native(name)
        assert getattr(module, name) is expected
        assert cls.__mro__[1] is expected, cls.__mro__
    sticky = PyStickyPartitionInfo if PURE else _native("StickyPartitionInfo")
    assert partitioner_module.StickyPartitionInfo is sticky


@native_only
@pytest.mark.parametrize("name", sorted(TWINS))
def test_the_c_type_declares_exactly_the_twins_fields(name: str) -> None:
    c_type = _native(name)
    members = {k for k, v in vars(c_type).items() if isinstance(v, types.MemberDescriptorType)}
    assert members == set(TWINS[name].__slots__)


@native_only
@pytest.mark.parametrize("name", sorted(TWINS))
def test_no_field_is_declared_twice(name: str) -> None:
    """The Python class must not declare a field of its base again (a second slot would hide the C one)."""
    cls = CLASSES[name][0]
    for field in TWINS[name].__slots__:
        assert inspect.getattr_static(cls, field) is vars(_native(name))[field], field


@pytest.mark.parametrize("kind", CORES)
@pytest.mark.parametrize("name", sorted(TWINS))
def test_fields_start_unset_and_hold_any_object(kind: Any, name: str) -> None:
    core = kind(name)()
    for field in TWINS[name].__slots__:
        with pytest.raises(AttributeError):
            getattr(core, field)
        value = object()
        setattr(core, field, value)
        assert getattr(core, field) is value
        delattr(core, field)
        with pytest.raises(AttributeError):
            getattr(core, field)
    with pytest.raises(AttributeError):
        core.not_a_field = 1


@pytest.mark.parametrize("kind", CORES)
@pytest.mark.parametrize("name", sorted(TWINS))
def test_a_cycle_through_a_field_is_collected(kind: Any, name: str) -> None:
    cls = kind(name)

    class Sub(cls):  # type: ignore[misc, valid-type]
        __slots__ = ("extra",)

    for field in TWINS[name].__slots__:
        gc.collect()
        a, b = Sub(), Sub()
        setattr(a, field, b)
        b.extra = a
        del a, b
        assert gc.collect() >= 2, field


@native_only
@given(st.data())
def test_c_and_python_hold_the_same_values(data: st.DataObject) -> None:
    """The same writes and deletes on both, compared field by field after each."""
    name = data.draw(st.sampled_from(sorted(TWINS)))
    fields = TWINS[name].__slots__
    c_core, py_core = _native(name)(), TWINS[name]()
    values = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), st.binary(max_size=8))
    for _ in range(data.draw(st.integers(1, 20))):
        field = data.draw(st.sampled_from(fields))
        if data.draw(st.booleans()):
            value = data.draw(values)
            setattr(c_core, field, value)
            setattr(py_core, field, value)
        else:
            for core in (c_core, py_core):
                try:
                    delattr(core, field)
                except AttributeError:
                    pass
        for f in fields:
            assert getattr(c_core, f, "<unset>") == getattr(py_core, f, "<unset>"), f


STICKY = [
    pytest.param(lambda: PyStickyPartitionInfo, id="python"),
    pytest.param(lambda: _native("StickyPartitionInfo"), id="native", marks=native_only),
]


@pytest.mark.parametrize("kind", STICKY)
def test_sticky_partition_info_counts_bytes(kind: Any) -> None:
    info = kind()(7)
    assert (info.partition, info.produced_bytes) == (7, 0)
    info.produced_bytes += 300
    info.produced_bytes += 12
    assert (info.partition, info.produced_bytes) == (7, 312)
    assert kind()(partition=3).partition == 3
    with pytest.raises(TypeError):
        kind()()
    with pytest.raises(TypeError):
        kind()(1, 2)
    with pytest.raises(AttributeError):
        info.other = 1


@native_only
@given(partition=st.integers(0, 2**31 - 1), counts=st.lists(st.integers(0, 2**20), max_size=20))
def test_sticky_partition_info_c_and_python_count_alike(partition: int, counts: list[int]) -> None:
    c_info, py_info = _native("StickyPartitionInfo")(partition), PyStickyPartitionInfo(partition)
    for n in counts:
        c_info.produced_bytes += n
        py_info.produced_bytes += n
        assert (c_info.partition, c_info.produced_bytes) == (py_info.partition, py_info.produced_bytes)


# ------------------------------------------------------------------ the batch header (Java's writeDefaultBatchHeader)
_HEADER_FIELDS: dict[str, tuple[int, int]] = {
    # name: the range the v2 header holds it in
    "_base_offset": (-(2**63), 2**63 - 1),
    "_partition_leader_epoch": (-(2**31), 2**31 - 1),
    "_base_timestamp": (-(2**63), 2**63 - 1),
    "_max_timestamp": (-(2**63), 2**63 - 1),
    "_producer_id": (-(2**63), 2**63 - 1),
    "_producer_epoch": (-(2**15), 2**15 - 1),
    "_base_sequence": (-(2**31), 2**31 - 1),
}


def _header_value(low: int, high: int) -> st.SearchStrategy[int]:
    """Mostly in range, sometimes just past either end."""
    return st.one_of(st.integers(low, high), st.sampled_from([low, high, low - 1, high + 1, -1, 0]))


def _written(core: Any, fields: dict[str, Any], buffer: bytes) -> tuple[Any, ...]:
    """Set ``fields`` and a copy of ``buffer`` on ``core``, write the header: (outcome, bytes, _size)."""
    for name, value in fields.items():
        setattr(core, name, value)
    core._buf = bytearray(buffer)
    core._size = 0
    try:
        core.write_default_batch_header(builder_module._crc32c)
    except Exception as e:  # noqa: BLE001 - the exception itself is what is compared
        outcome: Any = (type(e), str(e) if isinstance(e, ValueError) and not isinstance(e, struct.error) else "")
    else:
        outcome = None
    return outcome, bytes(core._buf), core._size


@native_only
@given(st.data())
def test_the_batch_header_written_by_c_and_python_alike(data: st.DataObject) -> None:
    """Every header field, the flags and the records' extent, on both: the same bytes, CRC, _size or error."""
    start = data.draw(st.sampled_from([builder_module.RECORD_BATCH_OVERHEAD, 0, 60, 70]))
    records = data.draw(st.integers(-2, 300))
    spare = data.draw(st.integers(0, 40))
    buffer = data.draw(st.binary(min_size=max(0, start + records) + spare, max_size=max(0, start + records) + spare))
    fields: dict[str, Any] = {name: data.draw(_header_value(*bounds)) for name, bounds in _HEADER_FIELDS.items()}
    fields |= {
        "_records_start": start,
        "_compressed_records_size": records,
        "_num_records": data.draw(_header_value(1, 2**31 - 1)),
        "_compression": data.draw(st.sampled_from(list(CompressionType))),
        "_timestamp_type": data.draw(st.sampled_from([0, 1])),
        "_is_transactional": data.draw(st.booleans()),
        "_is_control": data.draw(st.booleans()),
    }
    c_result = _written(_native("MemoryRecordsBuilderCore")(), fields, buffer)
    py_result = _written(PyMemoryRecordsBuilderCore(), fields, buffer)
    assert c_result == py_result
    outcome, written, size = py_result
    if outcome is None:
        # What the reader checks: the CRC over everything after it, and the length.
        assert size == start + records
        assert struct.unpack_from(">I", written, 17)[0] == builder_module._crc32c(written[21:size])
        assert struct.unpack_from(">i", written, 8)[0] == size - 12


@pytest.mark.parametrize("kind", CORES)
def test_a_built_batch_reads_back_from_the_header_either_core_writes(kind: Any) -> None:
    """A builder closed through either core's header: the reader accepts its CRC and reads its records."""
    core_type = kind("MemoryRecordsBuilderCore")
    builder = MemoryRecordsBuilder.for_batch(bytearray(1024), CompressionType.NONE, None, 1024, "t", None)
    for i in range(3):
        assert builder.try_append(1_700_000_000_000 + i, b"k%d" % i, b"v%d" % i)
    builder.set_producer_state(4000, 3, 17, True)
    builder._closed = True
    builder._compressed_records_size = builder._pos - builder._records_start
    bare = core_type()
    for name in PyMemoryRecordsBuilderCore.__slots__:
        setattr(bare, name, getattr(builder, name))
    bare.write_default_batch_header(builder_module._crc32c)
    (batch,) = read_batches(bytes(bare._buf[: bare._size]))
    batch.validate()
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence, batch.is_transactional) == (4000, 3, 17, True)
    assert [(r.key, r.value) for r in batch.records()] == [(b"k0", b"v0"), (b"k1", b"v1"), (b"k2", b"v2")]
