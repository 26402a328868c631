"""Cluster.merged_with patches the previous snapshot; it must equal a snapshot built from scratch."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kproducer.metadata import Cluster
from kproducer.structs import Node, PartitionInfo, TopicPartition

TOPICS = [f"t{i}" for i in range(8)]


def _reference(
    base: dict[TopicPartition, PartitionInfo],
    partitions: list[PartitionInfo],
    refreshed: set[str],
    keep: set[str] | None,
) -> dict[TopicPartition, PartitionInfo]:
    """The merge rule, stated plainly: drop refreshed and evicted topics, take the answer, never an older epoch."""
    out = {
        tp: p for tp, p in base.items() if tp.topic not in refreshed and (keep is None or tp.topic in keep)
    }
    for p in partitions:
        tp = TopicPartition(p.topic, p.partition)
        old = base.get(tp)
        if old is not None and old.leader_epoch >= 0 and 0 <= p.leader_epoch < old.leader_epoch:
            out[tp] = old
        else:
            out[tp] = p
    return out


@st.composite
def partition_sets(draw: st.DrawFn, topics: list[str]) -> list[PartitionInfo]:
    out = []
    for t in topics:
        for i in range(draw(st.integers(0, 3))):
            out.append(
                PartitionInfo(t, i, draw(st.integers(-1, 3)), draw(st.integers(-1, 4)), (1, 2), (1,), ())
            )
    return out


@st.composite
def merges(draw: st.DrawFn) -> tuple[list[int], list[PartitionInfo], list[tuple[Any, ...]]]:
    nodes = draw(st.lists(st.integers(0, 3), unique=True, max_size=4))
    base = draw(partition_sets(draw(st.lists(st.sampled_from(TOPICS), unique=True))))
    steps = []
    for _ in range(draw(st.integers(1, 4))):
        step_nodes = draw(st.lists(st.integers(0, 3), unique=True, max_size=4))
        answered = draw(st.lists(st.sampled_from(TOPICS), unique=True))
        parts = draw(partition_sets(answered))
        requested = set(draw(st.lists(st.sampled_from(TOPICS), unique=True))) | set(answered)
        keep = draw(st.none() | st.sets(st.sampled_from(TOPICS)))
        errors = {t: 3 for t in draw(st.lists(st.sampled_from(sorted(requested) or TOPICS), max_size=2))}
        steps.append((step_nodes, parts, requested, keep, errors))
    return nodes, base, steps


def _nodes(ids: list[int]) -> list[Node]:
    return [Node(i, "h", 9000 + i, None) for i in ids]


def _assert_same(got: Cluster, want: Cluster) -> None:
    assert got.topics == want.topics
    assert dict(got.nodes) == dict(want.nodes)
    assert dict(got.topic_errors) == dict(want.topic_errors)
    assert got.internal_topics == want.internal_topics
    assert {tp: p for tp, p in ((TopicPartition(p.topic, p.partition), p) for p in got.all_partitions())} == {
        TopicPartition(p.topic, p.partition): p for p in want.all_partitions()
    }
    for t in TOPICS:
        assert got.partition_count(t) == want.partition_count(t)
        assert got.partitions_for_topic(t) == want.partitions_for_topic(t)
        assert got.available_partitions_for_topic(t) == want.available_partitions_for_topic(t)
    for n in range(-1, 5):
        assert sorted(got.partitions_for_node(n), key=repr) == sorted(want.partitions_for_node(n), key=repr)
        for p in got.partitions_for_node(n):
            assert got.partition(TopicPartition(p.topic, p.partition)) is p


@settings(max_examples=300, deadline=None)
@given(merges())
def test_incremental_merge_equals_a_rebuild(case: tuple) -> None:  # type: ignore[type-arg]
    node_ids, base_parts, steps = case
    cluster = Cluster(_nodes(node_ids), base_parts)
    errors: dict[str, int] = {}
    for step_nodes, parts, requested, keep, step_errors in steps:
        before = {TopicPartition(p.topic, p.partition): p for p in cluster.all_partitions()}
        retained = None if keep is None else keep | requested
        cluster = cluster.merged_with(
            _nodes(step_nodes),
            parts,
            refreshed_topics=requested,
            topic_errors=step_errors,
            retained_topics=retained,
        )
        errors = {
            t: e for t, e in errors.items() if t not in requested and (retained is None or t in retained)
        } | step_errors
        want = Cluster(
            _nodes(step_nodes),
            _reference(before, parts, requested, retained).values(),
            topic_errors=errors,
        )
        _assert_same(cluster, want)


def test_unchanged_refresh_keeps_the_partition_objects_and_node_index() -> None:
    nodes = _nodes([1, 2])
    parts = [PartitionInfo(f"t{i}", 0, 1 + i % 2, 0, (1,), (1,), ()) for i in range(100)]
    c1 = Cluster(nodes, parts)
    same = [PartitionInfo("t5", 0, 2, 0, (1,), (1,), ())]
    c2 = c1.merged_with(nodes, same, refreshed_topics={"t5"})
    assert c2 is c1  # nothing changed: the same snapshot (caches keyed on it stay valid)
    c2 = c1.merged_with(
        nodes, [*same, PartitionInfo("new", 0, 1, 0, (1,), (1,), ())], refreshed_topics={"t5", "new"}
    )
    assert c2 is not c1 and c2.partition_count("new") == 1
    assert c2.partition(TopicPartition("t5", 0)) is c1.partition(TopicPartition("t5", 0))
    assert c2.partitions_for_node(2) is c1.partitions_for_node(2)
    moved = [PartitionInfo("t5", 0, 1, 1, (1,), (1,), ())]
    c3 = c2.merged_with(nodes, moved, refreshed_topics={"t5"})
    assert c3.leader_for(TopicPartition("t5", 0)) == nodes[0]
    assert "t5" in {p.topic for p in c3.partitions_for_node(1)}
    assert "t5" not in {p.topic for p in c3.partitions_for_node(2)}
    assert len(c3.partitions_for_node(1)) + len(c3.partitions_for_node(2)) == 101
