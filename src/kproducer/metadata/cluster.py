"""The immutable :class:`Cluster` snapshot: brokers, topics and partitions, as one Metadata response left them.

The Sender thread replaces the snapshot as a whole on each metadata response,
so caller threads read ``metadata.cluster`` without a lock: a snapshot never
changes after it is built. Indexes that ``ready()``/``drain()`` and the
partitioner hit on every loop are computed once, here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType

from kproducer.structs import Node, PartitionInfo, TopicPartition


class Cluster:
    """An immutable view of brokers, topics and partitions.

    A metadata response names a few topics of a working set that may hold
    thousands, so :meth:`merged_with` derives the next snapshot from this one
    in time proportional to the topics that changed, not to all topics: the
    per-topic indexes are copied (a C-level dict copy) and patched, partitions
    that come back unchanged keep their objects, and a node's partition tuple
    is rebuilt only when one of its partitions moved or went away.
    """

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
        by_topic: dict[str, list[PartitionInfo]] = {}
        for p in partitions:
            by_topic.setdefault(p.topic, []).append(p)
        self._set(
            {n.id: n for n in nodes},
            {t: tuple(sorted(v, key=_partition_index)) for t, v in by_topic.items()},
            dict(topic_errors or {}),
            dict(topic_ids or {}),
            frozenset(internal_topics),
            cluster_id,
            controller_id,
        )

    def _set(
        self,
        nodes: dict[int, Node],
        parts_by_topic: dict[str, tuple[PartitionInfo, ...]],
        topic_errors: dict[str, int],
        topic_ids: dict[str, bytes],
        internal_topics: frozenset[str],
        cluster_id: str | None,
        controller_id: int,
        base: Cluster | None = None,
        changed: set[str] | None = None,
    ) -> None:
        """Fill the indexes: from scratch, or from ``base`` patched for the ``changed`` topics."""
        self.cluster_id = cluster_id
        self.controller_id = controller_id
        self.nodes: Mapping[int, Node] = MappingProxyType(nodes)
        self.topic_errors: Mapping[str, int] = MappingProxyType(topic_errors)
        self.topic_ids: Mapping[str, bytes] = MappingProxyType(topic_ids)
        self.internal_topics = internal_topics
        self._parts_by_topic = parts_by_topic
        if base is None or changed is None:
            by_tp: dict[TopicPartition, PartitionInfo] = {}
            node_lists: dict[int, list[PartitionInfo]] = {}
            for topic_parts in parts_by_topic.values():
                for p in topic_parts:
                    by_tp[TopicPartition(p.topic, p.partition)] = p
                    if p.leader >= 0:
                        node_lists.setdefault(p.leader, []).append(p)
            self._by_tp = by_tp
            self._parts_by_node = {n: tuple(v) for n, v in node_lists.items()}
            self._avail_by_topic = {t: self._live_partitions(v) for t, v in parts_by_topic.items()}
            self._count = {t: len(v) for t, v in parts_by_topic.items()}
            return
        by_tp = base._by_tp.copy()
        count = base._count.copy()
        if base.nodes.keys() == nodes.keys():
            avail = base._avail_by_topic.copy()
            stale_avail: Iterable[str] = changed
        else:  # a broker came or went: which leaders are reachable changed for every topic
            avail = {}
            stale_avail = parts_by_topic
        gone_from: set[int] = set()  # nodes that lose a partition
        added: dict[int, list[PartitionInfo]] = {}
        for t in changed:
            for p in base._parts_by_topic.get(t, ()):
                del by_tp[TopicPartition(t, p.partition)]
                if p.leader >= 0:
                    gone_from.add(p.leader)
            new = parts_by_topic.get(t)
            if new is None:
                count.pop(t, None)
                avail.pop(t, None)
                continue
            count[t] = len(new)
            for p in new:
                by_tp[TopicPartition(t, p.partition)] = p
                if p.leader >= 0:
                    added.setdefault(p.leader, []).append(p)
        for t in stale_avail:
            live = parts_by_topic.get(t)
            if live is not None:
                avail[t] = self._live_partitions(live)
        by_node = base._parts_by_node
        if gone_from or added:
            by_node = by_node.copy()
            for n in gone_from:
                kept = tuple(p for p in by_node.get(n, ()) if p.topic not in changed)
                if kept:
                    by_node[n] = kept
                else:
                    by_node.pop(n, None)
            for n, ps in added.items():
                by_node[n] = by_node.get(n, ()) + tuple(ps)
        self._by_tp = by_tp
        self._count = count
        self._avail_by_topic = avail
        self._parts_by_node = by_node

    def _live_partitions(self, parts: tuple[PartitionInfo, ...]) -> tuple[PartitionInfo, ...]:
        nodes = self.nodes
        return tuple(p for p in parts if p.leader >= 0 and p.leader in nodes)

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
        in which case only those survive (eviction). The cost is proportional
        to the response and to the topics that changed (see the class docstring);
        an answer that changes nothing returns this very snapshot.
        """
        refreshed = (
            refreshed_topics if isinstance(refreshed_topics, (set, frozenset)) else set(refreshed_topics)
        )
        old_by_topic = self._parts_by_topic
        old_by_tp = self._by_tp
        fresh: dict[str, list[PartitionInfo]] = {}
        for p in partitions:
            old = old_by_tp.get(TopicPartition(p.topic, p.partition))
            if old is not None and (
                old == p or (old.leader_epoch >= 0 and 0 <= p.leader_epoch < old.leader_epoch)
            ):
                p = old  # unchanged, or a stale answer: keep the known object
            fresh.setdefault(p.topic, []).append(p)
        parts = old_by_topic.copy()
        changed: set[str] = set()
        removed: set[str] = {t for t in refreshed if t not in fresh}
        keep: set[str] | frozenset[str] | None = None
        if retained_topics is not None:
            keep = retained_topics if isinstance(retained_topics, (set, frozenset)) else set(retained_topics)
            removed |= old_by_topic.keys() - keep - fresh.keys()
        for t in removed:
            if parts.pop(t, None) is not None:
                changed.add(t)
        for t, lst in fresh.items():
            lst.sort(key=_partition_index)
            new = tuple(lst)
            old_parts = old_by_topic.get(t)
            if (
                old_parts is not None
                and len(old_parts) == len(new)
                and all(a is b for a, b in zip(old_parts, new, strict=True))
            ):
                continue
            parts[t] = new
            changed.add(t)
        gone = refreshed | removed
        errors = dict(self.topic_errors)
        ids = dict(self.topic_ids)
        if keep is not None:
            gone = gone | (errors.keys() - keep) | (ids.keys() - keep)
        for t in gone:
            errors.pop(t, None)
            ids.pop(t, None)
        errors.update(topic_errors or {})
        ids.update(topic_ids or {})
        internal = frozenset(t for t in self.internal_topics if t not in gone) | frozenset(internal_topics)
        node_map = {n.id: n for n in nodes}
        new_cluster_id = cluster_id if cluster_id is not None else self.cluster_id
        if (
            not changed
            and node_map == self.nodes
            and errors == self.topic_errors
            and ids == self.topic_ids
            and internal == self.internal_topics
            and new_cluster_id == self.cluster_id
            and controller_id == self.controller_id
        ):
            return self  # nothing changed: whatever is keyed on this snapshot stays valid
        out = Cluster.__new__(Cluster)
        out._set(
            node_map,
            parts,
            errors,
            ids,
            internal,
            new_cluster_id,
            controller_id,
            base=self,
            changed=changed,
        )
        return out

    def __repr__(self) -> str:
        return (
            f"Cluster(id={self.cluster_id!r}, nodes={sorted(self.nodes)}, topics={len(self._parts_by_topic)})"
        )


def _partition_index(p: PartitionInfo) -> int:
    return p.partition
