"""RecordMetadata: a frozen dataclass whose fields live in a C type, or in its Python twin.

``kproducer.structs.RecordMetadata`` builds on ``kproducer._speedups.RecordMetadata``, or on
``kproducer.structs.PyRecordMetadata`` in the pure-Python pass. The field types' cases run on
both in one pass; the public class's cases (what a frozen dataclass gives) run on the one this
pass builds on, so the two passes together cover both.
"""

from __future__ import annotations

import copy
import dataclasses
import gc
import pickle
import weakref
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kproducer.record.c_extension import c
from kproducer.structs import LogAppendTimeRecordMetadata, PyRecordMetadata, RecordMetadata, TopicPartition

FIELDS = ("topic", "partition", "offset", "timestamp", "serialized_key_size", "serialized_value_size")


def _c_type() -> Any:
    """The C type; `make test` builds it, so its absence is a build failure, not a skip."""
    try:
        from kproducer import _speedups
    except ImportError as e:
        pytest.fail(f"kproducer._speedups is not built ({e}); `pip install -e .` compiles src/kproducer/_speedups.c")
    return _speedups.RecordMetadata


@pytest.fixture(params=["c", "python"])
def fields_type(request: pytest.FixtureRequest) -> Any:
    return _c_type() if request.param == "c" else PyRecordMetadata


def _values(md: Any) -> tuple[Any, ...]:
    return tuple(getattr(md, name) for name in FIELDS)


def test_the_public_class_builds_on_this_passes_type() -> None:
    expected = PyRecordMetadata if c is None else _c_type()
    assert RecordMetadata.__mro__[1] is expected
    assert LogAppendTimeRecordMetadata.__mro__[2] is expected


# ---------------------------------------------------------------- the field types, both in every pass
def test_constructor_takes_positions_keywords_and_defaults(fields_type: Any) -> None:
    assert _values(fields_type("t", 1, 2, 3)) == ("t", 1, 2, 3, -1, -1)
    assert _values(fields_type("t", 1, 2, 3, 4, 5)) == ("t", 1, 2, 3, 4, 5)
    md = fields_type(serialized_value_size=7, timestamp=3, offset=2, partition=1, topic="t")
    assert _values(md) == ("t", 1, 2, 3, -1, 7)


@pytest.mark.parametrize(
    ("args", "kwargs", "message"),
    [
        ((), {}, "topic"),
        (("t", 1, 2), {}, "timestamp"),
        (("t", 1, 2, 3, 4, 5, 6), {}, "7 given|7 were given"),
        (("t", 1, 2, 3), {"bogus": 1}, "bogus"),
        (("t", 1, 2, 3), {"topic": "u"}, "topic"),
    ],
)
def test_wrong_arguments_get_a_type_error_naming_what_is_wrong(
    fields_type: Any, args: tuple[Any, ...], kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(TypeError, match=message) as raised:
        fields_type(*args, **kwargs)
    assert "RecordMetadata()" in str(raised.value)


def test_fields_are_set_through_object_setattr_as_a_frozen_dataclass_does(fields_type: Any) -> None:
    md = fields_type("t", 1, 2, 3)
    object.__setattr__(md, "offset", 99)
    assert md.offset == 99
    object.__delattr__(md, "offset")
    with pytest.raises(AttributeError):
        _ = md.offset
    with pytest.raises(AttributeError):
        object.__setattr__(md, "not_a_field", 1)  # no __dict__: only the six fields


def test_a_subclass_with_its_own_init_takes_the_arguments_there(fields_type: Any) -> None:
    class WithInit(fields_type):  # type: ignore[misc]
        def __init__(self, *args: Any) -> None:
            for name, value in zip(FIELDS, args, strict=False):
                object.__setattr__(self, name, value)

    md = WithInit("t", 1)  # the type's constructor does not read the arguments
    assert (md.topic, md.partition) == ("t", 1)
    with pytest.raises(AttributeError):
        _ = md.offset  # unset until an __init__ sets it


@given(
    topic=st.text(max_size=20),
    ints=st.lists(st.integers(min_value=-(2**63), max_value=2**63 - 1), min_size=5, max_size=5),
    as_keywords=st.booleans(),
)
def test_both_types_hold_the_same_fields(topic: str, ints: list[int], as_keywords: bool) -> None:
    args: tuple[Any, ...] = (topic, *ints)
    made = []
    both: tuple[Any, ...] = (_c_type(), PyRecordMetadata)
    for fields_type in both:
        made.append(fields_type(**dict(zip(FIELDS, args, strict=True))) if as_keywords else fields_type(*args))
    assert _values(made[0]) == _values(made[1]) == args


def test_a_cycle_through_a_field_is_collected(fields_type: Any) -> None:
    class Holder:
        pass

    holder = Holder()
    md = fields_type(holder, 0, 0, 0)  # no check of the fields' types, as with the dataclass
    holder.md = md  # type: ignore[attr-defined]
    alive = weakref.ref(holder)
    del holder, md
    gc.collect()
    assert alive() is None


def test_c_metadata_of_a_str_and_ints_is_kept_out_of_the_cyclic_gc() -> None:
    """Nothing a str and ints refer to can refer back; any other field keeps it tracked."""
    c_type = _c_type()
    assert not gc.is_tracked(c_type("t", 1, 2, 3, 4, 5))
    assert gc.is_tracked(c_type(["t"], 1, 2, 3))
    assert gc.is_tracked(c_type("t", 1, 2, 3.0))


# ---------------------------------------------------------------- the public class (this pass's type)
def test_a_frozen_dataclass_repr_equality_and_hash() -> None:
    md = RecordMetadata("t", 1, 2, 3, 4, 5)
    assert repr(md) == (
        "RecordMetadata(topic='t', partition=1, offset=2, timestamp=3, serialized_key_size=4, serialized_value_size=5)"
    )
    assert md == RecordMetadata("t", 1, 2, 3, 4, 5) and hash(md) == hash(RecordMetadata("t", 1, 2, 3, 4, 5))
    assert md != RecordMetadata("t", 1, 2, 3, 4, 6)
    la = LogAppendTimeRecordMetadata("t", 1, 2, 3, 4, 5)
    assert md != la  # equal fields, another class: as dataclasses compare
    assert repr(la).startswith("LogAppendTimeRecordMetadata(topic='t'")
    assert (md.timestamp_type, la.timestamp_type) == (0, 1)
    assert md.topic_partition == TopicPartition("t", 1)


def test_assignment_is_refused() -> None:
    md = RecordMetadata("t", 1, 2, 3)
    with pytest.raises(dataclasses.FrozenInstanceError, match="offset"):
        md.offset = 5  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        del md.topic
    with pytest.raises(dataclasses.FrozenInstanceError):
        md.other = 1  # type: ignore[attr-defined]
    assert md.offset == 2


def test_dataclasses_functions_work_on_it() -> None:
    md = RecordMetadata("t", 1, 2, 3, 4, 5)
    assert dataclasses.is_dataclass(md)
    assert [f.name for f in dataclasses.fields(md)] == list(FIELDS)
    assert [f.default for f in dataclasses.fields(md)][4:] == [-1, -1]
    assert dataclasses.asdict(md) == dict(zip(FIELDS, ("t", 1, 2, 3, 4, 5), strict=True))
    assert dataclasses.astuple(md) == ("t", 1, 2, 3, 4, 5)
    moved = dataclasses.replace(md, offset=9)
    assert type(moved) is RecordMetadata and _values(moved) == ("t", 1, 9, 3, 4, 5)
    la = dataclasses.replace(LogAppendTimeRecordMetadata("t", 1, 2, 3), timestamp=7)
    assert type(la) is LogAppendTimeRecordMetadata and la.timestamp == 7


def test_a_class_reading_default_sizes_reads_the_records_own() -> None:
    """The class body's defaults are the dataclass's, never values that hide a record's own."""
    assert "serialized_key_size" not in vars(RecordMetadata)
    assert RecordMetadata("t", 1, 2, 3, 40, 50).serialized_key_size == 40


@dataclasses.dataclass(frozen=True, slots=True)
class _WithExtra(RecordMetadata):
    """A user's dataclass subclass adding a field (module level, so that pickle finds it)."""

    extra: int = 0


def test_pickle_and_copy_keep_class_and_fields() -> None:
    for md in (
        RecordMetadata("t", 1, 2, 3, 4, 5),
        LogAppendTimeRecordMetadata("t", 1, 2, 3),
        _WithExtra("t", 1, 2, 3, 4, 5, extra=6),
    ):
        for protocol in range(pickle.HIGHEST_PROTOCOL + 1):
            back = pickle.loads(pickle.dumps(md, protocol))
            assert type(back) is type(md) and back == md
        assert copy.copy(md) == md and copy.deepcopy(md) == md


def test_match_by_position() -> None:
    match RecordMetadata("t", 1, 2, 3):
        case RecordMetadata(topic, partition, offset):
            assert (topic, partition, offset) == ("t", 1, 2)
        case _:
            pytest.fail("RecordMetadata did not match by position")


def test_dataclass_subclasses_adding_fields_work_as_before() -> None:
    """A user's dataclass subclass (slotted or not) gets its generated __init__ and __post_init__."""
    posted: list[int] = []

    @dataclasses.dataclass(frozen=True, slots=True)
    class Slotted(RecordMetadata):
        extra: int = 0

        def __post_init__(self) -> None:
            posted.append(self.extra)

    @dataclasses.dataclass(frozen=True)
    class Plain(RecordMetadata):
        note: str = ""

    slotted = Slotted("t", 1, 2, 3, 4, 5, 6)
    assert _values(slotted) == ("t", 1, 2, 3, 4, 5) and slotted.extra == 6 and posted == [6]
    assert vars(Slotted)["__slots__"] == ("extra",), "the base's fields are not declared again"
    assert slotted == Slotted("t", 1, 2, 3, 4, 5, 6) and slotted != Slotted("t", 1, 2, 3, 4, 5, 7)
    plain = Plain("t", 1, 2, 3, note="n")
    assert _values(plain) == ("t", 1, 2, 3, -1, -1) and plain.note == "n"
    assert repr(plain).endswith(".Plain(topic='t', partition=1, offset=2, timestamp=3, serialized_key_size=-1, serialized_value_size=-1, note='n')")
