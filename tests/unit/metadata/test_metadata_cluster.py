"""Cluster.merged_with patches the previous snapshot; it must equal a snapshot built from scratch.

Also the merge rules as Metadata.handle_response applies them to real (kio) responses:
per-topic errors and the stale-leader-epoch rule.
"""

from __future__ import annotations

import logging
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproducer.metadata import Cluster, Metadata
from kproducer.structs import Node, PartitionInfo, TopicPartition
from tests.support.kio_responses import PartitionSpec, metadata_response

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


# ----------------------------------------------------------- through Metadata.handle_response
# Real kio responses (any version) applied by Metadata.handle_response, as NetworkClient does.
UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5
INVALID_TOPIC_EXCEPTION = 17
TOPIC_AUTHORIZATION_FAILED = 29


def _kio_metadata(version: int, topics: dict[str, tuple[int, list[PartitionSpec]]]) -> Any:
    return metadata_response(version, [(1, "b1", 9092), (2, "b2", 9092)], topics)


@pytest.mark.parametrize("version", [1, 7, 9, 12])
def test_topic_errors_are_surfaced_per_topic(version: int, caplog: pytest.LogCaptureFixture) -> None:
    m = Metadata(retry_backoff_ms=100, retry_backoff_max_ms=1000, rng=random.Random(3))
    names = ["ok", "electing", "bad?name", "secret", "missing"]
    for t in names:
        m.add_topic(t, 0)
    resp = _kio_metadata(
        version,
        {
            "ok": (0, [(0, 1, 4, (1, 2)), (1, 2, 4, (2, 1))]),
            "electing": (LEADER_NOT_AVAILABLE, []),
            "bad?name": (INVALID_TOPIC_EXCEPTION, []),
            "secret": (TOPIC_AUTHORIZATION_FAILED, []),
            "missing": (UNKNOWN_TOPIC_OR_PARTITION, []),
        },
    )
    with caplog.at_level(logging.WARNING, logger="kproducer.metadata"):
        cluster = m.handle_response(resp, names, 10)
    assert cluster is m.cluster
    assert dict(cluster.topic_errors) == {
        "electing": LEADER_NOT_AVAILABLE,
        "bad?name": INVALID_TOPIC_EXCEPTION,
        "secret": TOPIC_AUTHORIZATION_FAILED,
        "missing": UNKNOWN_TOPIC_OR_PARTITION,
    }
    assert cluster.partition_count("ok") == 2 and "ok" not in cluster.topic_errors
    for t in names[1:]:
        assert cluster.partition_count(t) is None and cluster.partitions_for_topic(t) == ()
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], "surfaced errors are not warnings"
    # Retriable errors keep the topic urgent, with a backoff; the final ones (17, 29) do not.
    for t in ("electing", "missing"):
        st = m.topic_state(t)
        assert st is not None and st.urgent and st.errors == 1 and 10 + 80 <= st.retry_at_ms <= 10 + 120
    for t in ("ok", "bad?name", "secret"):
        st = m.topic_state(t)
        assert st is not None and not st.urgent and st.errors == 0

    # The election finishes: the next answer for that topic clears its error, the others stay.
    later = _kio_metadata(version, {"electing": (0, [(0, 2, 1, (2,))])})
    cluster = m.handle_response(later, ["electing"], 200)
    assert "electing" not in cluster.topic_errors and cluster.partition_count("electing") == 1
    assert cluster.topic_errors["secret"] == TOPIC_AUTHORIZATION_FAILED
    assert cluster.topic_errors["bad?name"] == INVALID_TOPIC_EXCEPTION


def test_unexpected_topic_error_is_kept_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    m = Metadata()
    with caplog.at_level(logging.WARNING, logger="kproducer.metadata"):
        cluster = m.handle_response(_kio_metadata(12, {"t": (37, [])}), ["t"], 0)  # INVALID_PARTITIONS
    assert cluster.topic_errors["t"] == 37
    assert any("topic t returned error 37" in r.getMessage() for r in caplog.records)


def test_older_leader_epoch_in_a_response_keeps_the_known_leader() -> None:
    m = Metadata()
    m.add_topic("t", 0)
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    first = {"t": (0, [(0, 1, 5, (1, 2)), (1, 1, 3, (1, 2))])}
    cluster = m.handle_response(_kio_metadata(12, first), ["t"], 10)
    assert cluster.leader_for(tp0) == Node(1, "b1", 9092, None)

    # A lagging broker answers with epoch 4 < 5 for partition 0 (leader 2) and a newer epoch for 1.
    stale = {"t": (0, [(0, 2, 4, (2, 1)), (1, 2, 4, (2, 1))])}
    cluster = m.handle_response(_kio_metadata(12, stale), ["t"], 20)
    p0 = cluster.partition(tp0)
    assert p0 is not None and (p0.leader, p0.leader_epoch, p0.replicas) == (1, 5, (1, 2))
    assert cluster.leader_for(tp0) == Node(1, "b1", 9092, None)
    p1 = cluster.partition(tp1)
    assert p1 is not None and (p1.leader, p1.leader_epoch) == (2, 4)
    assert {p.partition for p in cluster.partitions_for_node(1)} == {0}
    assert {p.partition for p in cluster.partitions_for_node(2)} == {1}

    # The same epoch, or a newer one, is taken.
    cluster = m.handle_response(
        _kio_metadata(12, {"t": (0, [(0, 2, 5, (2, 1)), (1, 2, 4, (2, 1))])}), ["t"], 30
    )
    assert cluster.leader_for(tp0) == Node(2, "b2", 9092, None)
    cluster = m.handle_response(
        _kio_metadata(12, {"t": (0, [(0, 1, 9, (1, 2)), (1, 2, 4, (2, 1))])}), ["t"], 40
    )
    p0 = cluster.partition(tp0)
    assert p0 is not None and (p0.leader, p0.leader_epoch) == (1, 9)


def test_response_without_leader_epochs_moves_the_leader() -> None:
    # Metadata v1–v6 carries no leader epoch (-1): nothing to compare, the answer is taken.
    m = Metadata()
    m.add_topic("t", 0)
    m.handle_response(_kio_metadata(12, {"t": (0, [(0, 1, 5, (1, 2))])}), ["t"], 10)
    cluster = m.handle_response(_kio_metadata(6, {"t": (0, [(0, 2, 0, (2, 1))])}), ["t"], 20)
    p0 = cluster.partition(TopicPartition("t", 0))
    assert p0 is not None and (p0.leader, p0.leader_epoch) == (2, -1)
