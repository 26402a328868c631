"""``kproducer._speedups.FutureRecordMetadata`` (C) against its twin ``PyFutureRecordMetadata``.

A record's future keeps its fields (batch result, relative offset, create time, key and value
sizes, the future it moved to) in one of the two; ``RecordFuture`` builds on the one that runs.
Each case runs on both types and expects the same results and the same exception types; the
state machine drives both through the same operations and compares every field after each. The
C type is part of the C extension: its cases run in the native pass, where a missing extension
fails them; the pure-Python pass has no C type (:func:`test_record_future_builds_on_the_pass_type`).
"""

from __future__ import annotations

import concurrent.futures
import gc
import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kproducer.accumulator import futures
from kproducer.accumulator.futures import ProduceRequestResult, PyFutureRecordMetadata, RecordFuture
from kproducer.record import native
from kproducer.structs import TopicPartition

PURE = os.environ.get("KPRODUCER_PURE_PYTHON", "").strip() not in ("", "0")
native_only = pytest.mark.skipif(PURE, reason="the pure-Python pass has no C type (test_record_future_builds_on_the_pass_type)")

FIELDS = ("_batch_result", "relative_offset", "create_timestamp", "serialized_key_size", "serialized_value_size", "_next")
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


def _native_type() -> Any:
    assert native.c is not None, "the C extension kproducer._speedups is not built: run `make test` to build it"
    return native.c.FutureRecordMetadata


TYPES = [
    pytest.param(lambda: PyFutureRecordMetadata, id="python"),
    pytest.param(_native_type, id="native", marks=native_only),
]


def _fields(f: Any) -> tuple[Any, ...]:
    return tuple(getattr(f, name) for name in FIELDS)


def test_record_future_builds_on_the_pass_type() -> None:
    expected = PyFutureRecordMetadata if PURE else _native_type()
    assert futures.FutureRecordMetadata is expected
    assert RecordFuture.__mro__[1] is expected
    assert issubclass(RecordFuture, concurrent.futures.Future)


@pytest.mark.parametrize("kind", TYPES)
def test_constructor_sets_every_field(kind: Any) -> None:
    cls = kind()
    result = ProduceRequestResult(TopicPartition("t", 3))
    f = cls(result, 7, 1_700_000_000_000, -1, 100)
    assert _fields(f) == (result, 7, 1_700_000_000_000, -1, 100, None)
    g = cls(
        result=result, relative_offset=0, create_timestamp=-1, serialized_key_size=5, serialized_value_size=-1
    )
    assert _fields(g) == (result, 0, -1, 5, -1, None)


@pytest.mark.parametrize("kind", TYPES)
def test_wrong_arguments_raise_type_error(kind: Any) -> None:
    cls = kind()
    result = ProduceRequestResult(TopicPartition("t", 0))
    with pytest.raises(TypeError):
        cls(result, 0, 0, 0)  # one missing
    with pytest.raises(TypeError):
        cls(result, 0, 0, 0, 0, 0)  # one too many
    with pytest.raises(TypeError):
        cls(result, 0, 0, 0, serialized_size=0)  # a name neither has


@pytest.mark.parametrize("kind", TYPES)
def test_next_is_writable_and_followed(kind: Any) -> None:
    cls = kind()
    result = ProduceRequestResult(TopicPartition("t", 0))
    a, b = cls(result, 0, 1, 2, 3), cls(result, 1, 1, 2, 3)
    a._next = b
    assert a._next is b and b._next is None
    a._next = None
    assert a._next is None


def test_the_python_twin_takes_part_in_the_cyclic_gc() -> None:
    """The twin is an ordinary class: a cycle through its fields is collected."""

    class Result:  # a result that refers back to its future closes a cycle only the collector frees
        future: Any = None

    gc.collect()
    result = Result()
    f = PyFutureRecordMetadata(result, 0, 0, 0, 0)
    result.future = f
    f._next = f
    del f, result
    assert gc.collect() >= 2


@native_only
def test_the_c_type_makes_every_future_untracked() -> None:
    """The C type keeps its objects out of the cyclic GC's generations, however they are made.

    Millions of futures are alive at once under load, and none refers back to anything that
    refers to it (its result does not, and ``_next`` points at a later future), so a collection
    scanning them would find nothing to free. The send lane's futures and those the Python
    ``send()`` makes (``ProducerBatch.try_append``) are both made by the type's ``tp_new``.
    """
    cls = _native_type()
    result = ProduceRequestResult(TopicPartition("t", 0))
    for f in (cls(result, 0, 0, 0, 0), RecordFuture(result, 0, 0, 0, 0), RecordFuture.failed(TopicPartition("t", 0), ValueError())):
        assert not gc.is_tracked(f)
        assert gc.get_referents(f)  # its traverse still reports what it holds (gc.get_referents)


@pytest.mark.parametrize("kind", TYPES)
def test_a_future_class_builds_on_it_with_the_stdlib_future(kind: Any) -> None:
    """RecordFuture's shape: the fields type first, concurrent.futures.Future second, slots of its own."""
    cls = kind()

    class Future(cls, concurrent.futures.Future[Any]):  # type: ignore[misc, valid-type]
        __slots__ = ("extra",)

    result = ProduceRequestResult(TopicPartition("t", 0))
    f = Future(result, 4, 5, 6, 7)
    assert isinstance(f, concurrent.futures.Future)
    assert _fields(f) == (result, 4, 5, 6, 7, None)
    f.extra = "x"
    assert f.extra == "x"


@native_only
@given(rel=INT64, ts=INT64, ks=INT64, vs=INT64)
def test_both_hold_any_int64_alike(rel: int, ts: int, ks: int, vs: int) -> None:
    result = ProduceRequestResult(TopicPartition("t", 0))
    assert _fields(_native_type()(result, rel, ts, ks, vs)) == _fields(PyFutureRecordMetadata(result, rel, ts, ks, vs))


class TwinMachine(RuleBasedStateMachine):
    """The same operations on a C and a Python list of futures; every field compared after each."""

    @initialize()
    def start(self) -> None:
        self.c: list[Any] = []
        self.py: list[Any] = []
        self.results = [ProduceRequestResult(TopicPartition("t", p)) for p in range(3)]

    @rule(r=st.integers(0, 2), rel=st.integers(0, 10_000), ts=INT64, ks=st.integers(-1, 2**31 - 1), vs=st.integers(-1, 2**31 - 1))
    def make(self, r: int, rel: int, ts: int, ks: int, vs: int) -> None:
        self.c.append(_native_type()(self.results[r], rel, ts, ks, vs))
        self.py.append(PyFutureRecordMetadata(self.results[r], rel, ts, ks, vs))

    @rule(data=st.data())
    def chain(self, data: st.DataObject) -> None:
        if not self.c:
            return
        i = data.draw(st.integers(0, len(self.c) - 1))
        j = data.draw(st.one_of(st.none(), st.integers(0, len(self.c) - 1)))
        self.c[i]._next = None if j is None else self.c[j]
        self.py[i]._next = None if j is None else self.py[j]

    @rule(data=st.data(), name=st.sampled_from(FIELDS[1:5]), value=INT64)
    def write(self, data: st.DataObject, name: str, value: int) -> None:
        if not self.c:
            return
        i = data.draw(st.integers(0, len(self.c) - 1))
        setattr(self.c[i], name, value)
        setattr(self.py[i], name, value)

    @rule(data=st.data())
    def drop(self, data: st.DataObject) -> None:
        if self.c:
            i = data.draw(st.integers(0, len(self.c) - 1))
            del self.c[i], self.py[i]
            gc.collect()

    @invariant()
    def equal(self) -> None:
        for fc, fp in zip(self.c, self.py, strict=True):
            assert _fields(fc)[:5] == _fields(fp)[:5]
            nc, np_ = fc._next, fp._next
            assert (nc is None) == (np_ is None)
            if nc is not None:
                assert _fields(nc)[:5] == _fields(np_)[:5]


TestTwinMachine = native_only(TwinMachine.TestCase)
TestTwinMachine.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
