"""Cluster metadata: the immutable :class:`Cluster` snapshot.

The Sender thread replaces the snapshot as a whole on each metadata response,
so caller threads read ``metadata.cluster`` without a lock: a snapshot never
changes after it is built. Indexes that ``ready()``/``drain()`` and the
partitioner hit on every loop are computed once, here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from kproducer.structs import Node, PartitionInfo, TopicPartition

__all__ = ["Cluster"]


class Cluster:
    """An immutable view of brokers, topics and partitions."""

    __slots__ = (
        "cluster_id",
        "controller_id",
        "nodes",
        "topic_errors",
        "topic_ids",
        "internal_topics",
        "_parts_by_topic",
        "_avail_by_topic",
        "_parts_by_node",
        "_by_tp",
        "_count",
    )

    def __init__(
        self,
        nodes: Iterable[Node] = (),
        partitions: Iterable[PartitionInfo] = (),
        *,
        cluster_id: str | None = None,
        controller_id: int = -1,
        topic_errors: Mapping[str, int] | None = None,
        topic_ids: Mapping[str, bytes] | None = None,
        internal_topics: Iterable[str] = (),
    ) -> None:
        self.cluster_id = cluster_id
        self.controller_id = controller_id
        self.nodes: Mapping[int, Node] = MappingProxyType({n.id: n for n in nodes})
        self.topic_errors: Mapping[str, int] = MappingProxyType(dict(topic_errors or {}))
        self.topic_ids: Mapping[str, bytes] = MappingProxyType(dict(topic_ids or {}))
        self.internal_topics = frozenset(internal_topics)
        by_topic: dict[str, list[PartitionInfo]] = {}
        by_node: dict[int, list[PartitionInfo]] = {}
        by_tp: dict[TopicPartition, PartitionInfo] = {}
        for p in partitions:
            by_topic.setdefault(p.topic, []).append(p)
            by_tp[TopicPartition(p.topic, p.partition)] = p
            if p.leader >= 0:
                by_node.setdefault(p.leader, []).append(p)
        for lst in by_topic.values():
            lst.sort(key=lambda p: p.partition)
        self._parts_by_topic = {t: tuple(v) for t, v in by_topic.items()}
        self._avail_by_topic = {
            t: tuple(p for p in v if p.leader >= 0 and p.leader in self.nodes) for t, v in self._parts_by_topic.items()
        }
        self._parts_by_node = {n: tuple(v) for n, v in by_node.items()}
        self._by_tp = by_tp
        self._count = {t: len(v) for t, v in self._parts_by_topic.items()}

    # ----------------------------------------------------------- lookups
    @property
    def topics(self) -> frozenset[str]:
        return frozenset(self._parts_by_topic)

    def node(self, node_id: int) -> Node | None:
        return self.nodes.get(node_id)

    def partition(self, tp: TopicPartition) -> PartitionInfo | None:
        return self._by_tp.get(tp)

    def leader_for(self, tp: TopicPartition) -> Node | None:
        """The leader's Node, or None when the partition has no known, reachable leader."""
        p = self._by_tp.get(tp)
        if p is None or p.leader < 0:
            return None
        return self.nodes.get(p.leader)

    def partition_count(self, topic: str) -> int | None:
        """Number of partitions, or None when the topic is not in this snapshot."""
        return self._count.get(topic)

    def partitions_for_topic(self, topic: str) -> tuple[PartitionInfo, ...]:
        return self._parts_by_topic.get(topic, ())

    def available_partitions_for_topic(self, topic: str) -> tuple[PartitionInfo, ...]:
        """Partitions that have a leader present in this snapshot."""
        return self._avail_by_topic.get(topic, ())

    def partitions_for_node(self, node_id: int) -> tuple[PartitionInfo, ...]:
        return self._parts_by_node.get(node_id, ())

    def all_partitions(self) -> Iterable[PartitionInfo]:
        return self._by_tp.values()

    # ----------------------------------------------------------- updates
    def merged_with(
        self,
        nodes: Iterable[Node],
        partitions: Iterable[PartitionInfo],
        *,
        refreshed_topics: Iterable[str],
        topic_errors: Mapping[str, int] | None = None,
        cluster_id: str | None = None,
        controller_id: int = -1,
        topic_ids: Mapping[str, bytes] | None = None,
        internal_topics: Iterable[str] = (),
        retained_topics: Iterable[str] | None = None,
    ) -> Cluster:
        """A new snapshot from a (possibly partial) metadata response.

        Topics named in ``refreshed_topics`` take the response's view, except
        that a partition whose leader epoch is older than the one already known
        keeps the known state (a stale broker must not move a leader back).
        Other topics are kept as they were, unless ``retained_topics`` is given,
        in which case only those survive (eviction).
        """
        refreshed = set(refreshed_topics)
        keep = None if retained_topics is None else set(retained_topics)
        new_parts: dict[TopicPartition, PartitionInfo] = {}
        for tp, p in self._by_tp.items():
            if tp.topic in refreshed:
                continue
            if keep is not None and tp.topic not in keep:
                continue
            new_parts[tp] = p
        for p in partitions:
            tp = TopicPartition(p.topic, p.partition)
            old = self._by_tp.get(tp)
            if old is not None and old.leader_epoch >= 0 and 0 <= p.leader_epoch < old.leader_epoch:
                new_parts[tp] = old
            else:
                new_parts[tp] = p
        errors = {t: e for t, e in self.topic_errors.items() if t not in refreshed and (keep is None or t in keep)}
        errors.update(topic_errors or {})
        ids = {t: i for t, i in self.topic_ids.items() if t not in refreshed and (keep is None or t in keep)}
        ids.update(topic_ids or {})
        internal = {t for t in self.internal_topics if t not in refreshed} | set(internal_topics)
        return Cluster(
            nodes,
            new_parts.values(),
            cluster_id=cluster_id if cluster_id is not None else self.cluster_id,
            controller_id=controller_id,
            topic_errors=errors,
            topic_ids=ids,
            internal_topics=internal,
        )

    def __repr__(self) -> str:
        return f"Cluster(id={self.cluster_id!r}, nodes={sorted(self.nodes)}, topics={len(self._parts_by_topic)})"
