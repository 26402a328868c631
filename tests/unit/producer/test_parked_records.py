"""The placeholder result parked records share until their topic's metadata arrives (kproducer.parked_records)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kproducer.accumulator.futures import ProduceRequestResult, RecordFuture
from kproducer.errors import KafkaTimeoutError
from kproducer.parked_records import ParkedResult, TopicQueue, resolve_parked
from kproducer.structs import TopicPartition


def _real_batch(topic: str, partition: int, base_offset: int) -> ProduceRequestResult:
    result = ProduceRequestResult(TopicPartition(topic, partition))
    result.set(base_offset, -1, None)
    return result


def test_one_placeholder_for_a_burst_and_each_record_follows_its_own_batch() -> None:
    q = TopicQueue(whole=True)
    futures = [q.park_future("new-topic") for _ in range(3)]
    placeholder = futures[0]._batch_result
    assert isinstance(placeholder, ParkedResult)
    assert all(f._batch_result is placeholder for f in futures)
    assert [f.relative_offset for f in futures] == [0, 1, 2]
    assert placeholder.topic_partition == TopicPartition("new-topic", -1)

    batch = _real_batch("new-topic", 2, 40)
    fired: list[int] = []
    futures[0].add_done_callback(lambda f: fired.append(f.value().offset))
    for i, fut in enumerate(futures[:2]):
        fut._next = RecordFuture(batch, i, 0, 1, 1)
        resolve_parked(fut)
        # Not complete while a record of the burst is still parked.
        assert not placeholder.completed and not fut.done()
    error = KafkaTimeoutError("Topic 'new-topic' not present in metadata after 10 ms (max.block.ms)")
    resolve_parked(futures[2], error)
    assert placeholder.completed and not fired  # the first record's batch is not acknowledged yet
    batch.done()
    assert fired == [40]
    assert futures[1].result(0).partition == 2 and futures[1].result(0).offset == 41
    assert futures[2].exception(0) is error
    assert futures[0].exception(0) is None and futures[1].exception(0) is None


def test_a_resolved_placeholder_takes_no_more_records() -> None:
    q = TopicQueue(whole=True)
    first = q.park_future("t")
    second = q.park_future("t")
    first._next = RecordFuture(_real_batch("t", 0, 0), 0, 0, 1, 1)
    resolve_parked(first)
    # The release began: a record parked now (behind the rest) gets a placeholder of its own.
    third = q.park_future("t")
    assert third._batch_result is not first._batch_result
    assert third.relative_offset == 0
    second._next = RecordFuture(_real_batch("t", 0, 0), 1, 0, 1, 1)
    resolve_parked(second)
    assert first._batch_result.completed and not third._batch_result.completed


def test_a_placeholder_is_shared_by_at_most_share_records() -> None:
    q = TopicQueue(whole=True)
    futures = [q.park_future("t") for _ in range(ParkedResult.SHARE + 1)]
    assert len({id(f._batch_result) for f in futures}) == 2
    assert futures[-1].relative_offset == 0


@given(st.lists(st.sampled_from(["park", "append", "fail"]), max_size=60))
def test_a_placeholder_completes_exactly_when_every_record_that_joined_it_is_resolved(ops: list[str]) -> None:
    """Parks and resolutions in any order the router allows (records leave the queue in send order)."""
    q = TopicQueue(whole=True)
    parked: list[RecordFuture] = []
    results: list[ParkedResult] = []
    for op in ops:
        if op == "park":
            fut = q.park_future("t")
            placeholder = fut._batch_result
            assert isinstance(placeholder, ParkedResult)
            assert not placeholder.completed, "a record joined a completed placeholder"
            if placeholder not in results:
                results.append(placeholder)
            parked.append(fut)
        elif parked:
            fut = parked.pop(0)
            if op == "append":
                fut._next = RecordFuture(_real_batch("t", 0, 7), 0, 0, 1, 1)
                resolve_parked(fut)
            else:
                resolve_parked(fut, KafkaTimeoutError("no metadata"))
        for placeholder in results:
            waiting = any(f._batch_result is placeholder for f in parked)
            assert placeholder.completed is not waiting
    for fut in parked:
        assert not fut.done()
