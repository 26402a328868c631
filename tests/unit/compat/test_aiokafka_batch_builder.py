"""The adapter's BatchBuilder takes exactly the records aiokafka's takes (hypothesis, against the installed
aiokafka): same accept/refuse decision, same record sizes and offsets, same batch size, so a program
filling batches until append() returns None sends the same batches on either."""

from __future__ import annotations

# aiokafka is a test dependency (pyproject's test extra): missing, this module fails to import.
from aiokafka.producer import message_accumulator  # noqa: E402
from hypothesis import given, settings
from hypothesis import strategies as st

from kproducer.compat.aiokafka import BatchBuilder


def test_aiokafka_runs_its_compiled_record_builder() -> None:
    # The adapter matches the compiled builder (aiokafka's wheels), which refuses a record that would end
    # exactly at max_batch_size; aiokafka's pure-Python fallback takes it.
    from aiokafka.record import default_records

    assert default_records.DefaultRecordBatchBuilder is not default_records._DefaultRecordBatchBuilderPy, (
        "aiokafka was installed without its C extensions: the comparison below is against the compiled builder"
    )

_bytes = st.one_of(st.none(), st.binary(max_size=300))
_headers = st.lists(st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=40))), max_size=3)
_record = st.tuples(_bytes, _bytes, _headers, st.integers(min_value=0, max_value=10_000))


@settings(max_examples=200, deadline=None)
@given(batch_size=st.integers(min_value=0, max_value=4000), records=st.lists(_record, max_size=40))
def test_same_records_accepted_with_the_same_sizes(batch_size: int, records: list[tuple]) -> None:
    theirs = message_accumulator.BatchBuilder(batch_size, 0)
    ours = BatchBuilder(batch_size, None, None)
    base = 1_700_000_000_000
    for key, value, headers, dt in records:
        a = theirs.append(timestamp=base + dt, key=key, value=value, headers=headers)
        b = ours.append(timestamp=base + dt, key=key, value=value, headers=headers)
        assert (a is None) == (b is None)
        if a is None:
            break
        assert (b.offset, b.size, b.timestamp, b.crc) == (a.offset, a.size, a.timestamp, a.crc)
    assert ours.record_count() == theirs.record_count()
    assert ours.size() == theirs.size()


def test_serializers_are_applied_and_a_full_batch_closes() -> None:
    ours = BatchBuilder(100, lambda k: k.encode(), lambda v: v.encode())
    assert ours.append(timestamp=None, key="k", value="v" * 10) is not None
    assert ours.append(timestamp=None, key="k", value="v" * 200) is None
    assert ours.closed() and ours.append(timestamp=None, key="k", value="v") is None
    assert [r[1:3] for r in ours.records()] == [(b"k", b"v" * 10)]
