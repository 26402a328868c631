"""RecordAccumulator.has_buffered_records: the public check that keeps KIP-526 eviction away from queued topics."""

from __future__ import annotations

from kproducer.metadata import Metadata, MetadataRefreshPolicy
from tests.support.accumulator import START_MS, append, make_acc, make_cluster
from tests.support.clock import FakeClock


def test_has_buffered_records_follows_the_queue() -> None:
    clock = FakeClock(START_MS)
    acc = make_acc(clock)
    cluster = make_cluster(partitions=2, nodes=1, topic="t")
    assert not acc.has_buffered_records("t")
    append(acc, 0, clock)
    assert acc.has_buffered_records("t")
    assert not acc.has_buffered_records("other")
    (batch,) = acc.drain(cluster, {0}, 10**6, clock.now)[0]
    assert not acc.has_buffered_records("t")
    batch.done(0, -1, None)
    acc.deallocate(batch)


def test_metadata_never_evicts_a_topic_the_accumulator_still_queues() -> None:
    clock = FakeClock(0)
    acc = make_acc(clock)
    m = Metadata(policy=MetadataRefreshPolicy(10_000, 5_000), clock_ms=clock)
    m.set_buffered_records_check(acc.has_buffered_records)
    m.add_topic("t", 0)
    m.add_topic("idle", 0)
    append(acc, 0, clock, topic="t")
    m.topics_for_request(60_000)
    assert m.topics == frozenset({"t"})
