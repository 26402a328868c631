"""Cluster metadata: the immutable :class:`Cluster` snapshot and the mutable :class:`Metadata` holder.

The Sender thread replaces the snapshot as a whole on each metadata response,
so caller threads read ``metadata.cluster`` without a lock: a snapshot never
changes after it is built. Indexes that ``ready()``/``drain()`` and the
partitioner hit on every loop are computed once, here.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from kproducer.errors import KafkaTimeoutError
from kproducer.structs import Node, PartitionInfo, TopicPartition

__all__ = ["Cluster", "Metadata", "TopicState", "WorkingSetPolicy", "SURFACED_TOPIC_ERRORS"]

logger = logging.getLogger(__name__)

# Per-topic errors kept in ``cluster.topic_errors`` for callers to act on:
# UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, INVALID_TOPIC_EXCEPTION, TOPIC_AUTHORIZATION_FAILED.
SURFACED_TOPIC_ERRORS = frozenset({3, 5, 17, 29})


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
            t: tuple(p for p in v if p.leader >= 0 and p.leader in self.nodes)
            for t, v in self._parts_by_topic.items()
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
        errors = {
            t: e for t, e in self.topic_errors.items() if t not in refreshed and (keep is None or t in keep)
        }
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
        return (
            f"Cluster(id={self.cluster_id!r}, nodes={sorted(self.nodes)}, topics={len(self._parts_by_topic)})"
        )


# ====================================================================== Metadata


@dataclass(slots=True)
class TopicState:
    """Bookkeeping for one topic of the working set."""

    last_used_ms: int
    last_refresh_ms: int = -1
    urgent: bool = True


class WorkingSetPolicy:
    """Which topics a metadata request names: the working set minus idle topics.

    A pure object (no clock reads). The KIP-526 issue replaces it with the
    urgent/non-urgent partial-refresh algorithm behind the same ``select``.
    """

    def __init__(self, metadata_max_idle_ms: int = 300_000) -> None:
        self.metadata_max_idle_ms = metadata_max_idle_ms

    def evictable(self, topics: Mapping[str, TopicState], now: int) -> list[str]:
        return [t for t, st in topics.items() if now - st.last_used_ms > self.metadata_max_idle_ms]

    def select(self, topics: Mapping[str, TopicState], now: int) -> list[str]:
        idle = set(self.evictable(topics, now))
        return [t for t in topics if t not in idle]


class Metadata:
    """The current Cluster (replaced atomically), its version and the topic working set.

    The Sender thread's NetworkClient drives refreshes (``time_to_next_update`` →
    ``topics_for_request`` → ``handle_response``/``handle_failure``); caller
    threads add topics and wait with ``await_update``.
    """

    def __init__(
        self,
        *,
        metadata_max_age_ms: int = 300_000,
        metadata_max_idle_ms: int = 300_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        allow_auto_topic_creation: bool = True,
        policy: WorkingSetPolicy | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.metadata_max_age_ms = metadata_max_age_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = max(retry_backoff_max_ms, retry_backoff_ms)
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self.policy = policy or WorkingSetPolicy(metadata_max_idle_ms)
        self._rng = rng or random.Random()
        self._cond = threading.Condition()
        self._cluster = Cluster()
        self._version = 0
        self._topics: dict[str, TopicState] = {}
        self._need_update = True
        self._need_all_topics = False
        self._last_refresh_ms = -1
        self._last_success_ms = -1
        self._failures = 0
        self._backoff_ms = 0
        self.bootstrap_nodes: tuple[Node, ...] = ()
        self.tried_addresses: dict[str, str] = {}
        self.last_error: Exception | None = None

    # ------------------------------------------------------------- readers
    @property
    def cluster(self) -> Cluster:
        return self._cluster

    @property
    def version(self) -> int:
        return self._version

    @property
    def topics(self) -> frozenset[str]:
        with self._cond:
            return frozenset(self._topics)

    def bootstrap(self, nodes: Iterable[Node]) -> None:
        """Seed with the bootstrap brokers (negative ids) until the first response names the real ones."""
        self.bootstrap_nodes = tuple(nodes)

    # ------------------------------------------------------------- working set
    def add_topic(self, topic: str, now: int) -> bool:
        """Add (or touch) a topic; a topic with no metadata yet makes the next update urgent."""
        with self._cond:
            st = self._topics.get(topic)
            if st is None:
                self._topics[topic] = TopicState(now)
                if self._cluster.partition_count(topic) is None:
                    self._need_update = True
                    self._backoff_ms = 0
                return True
            st.last_used_ms = now
            return False

    def touch(self, topic: str, now: int) -> None:
        """Mark a known topic as used, without taking the lock (send()'s hot path).

        A racing eviction can at worst drop a topic that is then re-added by the
        next send() to it, which is what idle eviction means anyway.
        """
        st = self._topics.get(topic)
        if st is None:
            self.add_topic(topic, now)
        else:
            st.last_used_ms = now

    def describe_reachability(self) -> str:
        """Which bootstrap addresses were tried and why they failed, for timeout messages."""
        with self._cond:
            tried = ", ".join(f"{a} ({r})" for a, r in self.tried_addresses.items())
            boot = ", ".join(n.address for n in self.bootstrap_nodes)
        return f"bootstrap servers {boot or 'none'}" + (
            f"; addresses tried: {tried}" if tried else "" if self._cluster.nodes else "; no broker answered yet"
        )

    def request_update(self) -> int:
        """Ask for a refresh as soon as the backoff allows; returns the version to wait past."""
        with self._cond:
            self._need_update = True
            return self._version

    def request_update_for_all_topics(self) -> int:
        """An explicit "all topics" refresh (the CLI listing); normal refreshes name a subset."""
        with self._cond:
            self._need_update = True
            self._need_all_topics = True
            return self._version

    def update_requested(self) -> bool:
        return self._need_update

    def time_to_next_update(self, now: int) -> int:
        """Milliseconds until a metadata request is due (0 = now)."""
        with self._cond:
            backoff_end = self._last_refresh_ms + self._backoff_ms if self._last_refresh_ms >= 0 else 0
            if self._need_update:
                return max(0, backoff_end - now)
            expire = self._last_success_ms + self.metadata_max_age_ms
            return max(0, expire - now, backoff_end - now)

    def topics_for_request(self, now: int) -> list[str] | None:
        """Topics the next request names; None means all topics (explicit request only)."""
        with self._cond:
            if self._need_all_topics:
                return None
            for t in self.policy.evictable(self._topics, now):
                logger.debug("evicting idle topic %s from the metadata working set", t)
                del self._topics[t]
            return self.policy.select(self._topics, now)

    # ------------------------------------------------------------- updates
    def handle_response(self, response: Any, requested_topics: list[str] | None, now: int) -> Cluster:
        """Apply a Metadata response (any version) for ``requested_topics`` (None = all)."""
        nodes = [
            Node(int(b.node_id), str(b.host), int(b.port), getattr(b, "rack", None)) for b in response.brokers
        ]
        parts: list[PartitionInfo] = []
        errors: dict[str, int] = {}
        internal: list[str] = []
        names: list[str] = []
        for t in response.topics:
            name = t.name
            if name is None:
                continue
            name = str(name)
            names.append(name)
            code = int(t.error_code)
            if code != 0:
                errors[name] = code
                if code not in SURFACED_TOPIC_ERRORS:
                    logger.warning("metadata for topic %s returned error %d", name, code)
            if getattr(t, "is_internal", False):
                internal.append(name)
            for p in t.partitions:
                parts.append(
                    PartitionInfo(
                        name,
                        int(p.partition_index),
                        int(p.leader_id),
                        int(getattr(p, "leader_epoch", -1)),
                        tuple(int(r) for r in p.replica_nodes),
                        tuple(int(r) for r in p.isr_nodes),
                        tuple(int(r) for r in getattr(p, "offline_replicas", ())),
                    )
                )
        refreshed = names if requested_topics is None else list(set(requested_topics) | set(names))
        with self._cond:
            cluster = self._cluster.merged_with(
                nodes,
                parts,
                refreshed_topics=refreshed,
                topic_errors=errors,
                cluster_id=getattr(response, "cluster_id", None),
                controller_id=int(getattr(response, "controller_id", -1)),
                internal_topics=internal,
            )
            self._cluster = cluster
            self._version += 1
            self._last_refresh_ms = now
            self._last_success_ms = now
            self._failures = 0
            self._backoff_ms = 0
            self._need_update = False
            if requested_topics is None:
                self._need_all_topics = False
            for name in refreshed:
                st = self._topics.get(name)
                if st is not None:
                    st.last_refresh_ms = now
                    st.urgent = False
            self.last_error = None
            self._cond.notify_all()
            return cluster

    def handle_failure(self, now: int, error: Exception | None = None) -> None:
        """A metadata request failed: back off exponentially (with ±20% jitter) up to retry.backoff.max.ms."""
        with self._cond:
            self._failures += 1
            base = min(self.retry_backoff_ms * (2 ** (self._failures - 1)), self.retry_backoff_max_ms)
            self._backoff_ms = int(base * self._rng.uniform(0.8, 1.2))
            self._last_refresh_ms = now
            self._need_update = True
            if error is not None:
                self.last_error = error
            self._cond.notify_all()

    def record_connection_failure(self, address: str, reason: str) -> None:
        """Remember why an address was unreachable, for the timeout message callers see."""
        with self._cond:
            self.tried_addresses[address] = reason

    # ------------------------------------------------------------- waiting
    def await_update(self, last_version: int, timeout_s: float) -> bool:
        """Block until ``version`` moves past ``last_version``; False on timeout."""
        deadline = time.monotonic() + timeout_s
        with self._cond:
            while self._version <= last_version:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(remaining)
            return True

    def wait_for_update(self, last_version: int, timeout_s: float) -> None:
        """Like ``await_update`` but raises KafkaTimeoutError naming the addresses tried."""
        if not self.await_update(last_version, timeout_s):
            with self._cond:
                tried = ", ".join(f"{a} ({r})" for a, r in self.tried_addresses.items())
                boot = ", ".join(n.address for n in self.bootstrap_nodes)
            raise KafkaTimeoutError(
                f"metadata not updated within {timeout_s:.1f}s; bootstrap servers {boot or 'none'}"
                + (f"; addresses tried: {tried}" if tried else "; no connection attempt completed")
            )
