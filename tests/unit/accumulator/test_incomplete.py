"""IncompleteBatches' creation floor: the Sender skips the expiry walk only when no batch can be old enough."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from kproducer.accumulator.batch import ProducerBatch
from kproducer.accumulator.incomplete import IncompleteBatches
from kproducer.record.builder import MemoryRecordsBuilder
from kproducer.structs import TopicPartition


def _batch(created_ms: int) -> ProducerBatch:
    return ProducerBatch(TopicPartition("t", 0), MemoryRecordsBuilder(bytearray(256), write_limit=256), created_ms)


@settings(max_examples=300, deadline=None)
@given(
    ops=st.lists(
        st.one_of(
            # Added with any creation time: split parts keep their parent's, so adds need not be in order.
            st.tuples(st.just("add"), st.integers(min_value=0, max_value=1_000)),
            st.tuples(st.just("remove"), st.integers(min_value=0, max_value=50)),
            st.tuples(st.just("ask"), st.integers(min_value=-10, max_value=1_100)),
        ),
        max_size=40,
    )
)
def test_none_created_before_is_exact(ops: list[tuple[str, int]]) -> None:
    incomplete = IncompleteBatches()
    live: list[ProducerBatch] = []
    for op, n in ops:
        if op == "add":
            batch = _batch(n)
            live.append(batch)
            incomplete.add(batch)
        elif op == "remove" and live:
            batch = live.pop(n % len(live))
            with incomplete.lock:
                incomplete.remove_locked(batch)
        elif op == "ask":
            assert incomplete.none_created_before(n) == all(b.created_ms >= n for b in live), (n, live)
