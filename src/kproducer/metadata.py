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
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Protocol

from kproducer.common import ExponentialBackoff, monotonic_ms
from kproducer.errors import (
    InvalidTopicError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
    error_codes,
)
from kproducer.structs import Node, PartitionInfo, TopicPartition

__all__ = [
    "Cluster",
    "Metadata",
    "MetadataRefreshPolicy",
    "RefreshSelection",
    "TopicState",
    "WorkingSetPolicy",
    "FINAL_TOPIC_ERRORS",
    "SURFACED_TOPIC_ERRORS",
]

logger = logging.getLogger(__name__)

# Per-topic errors that keep a topic urgent (with backoff).
_RETRIABLE_TOPIC_ERRORS = error_codes(UnknownTopicOrPartitionError, LeaderNotAvailableError)
#: Per-topic errors that no refresh can cure: records for the topic fail at once.
FINAL_TOPIC_ERRORS = error_codes(InvalidTopicError, TopicAuthorizationFailedError)
# Per-topic errors kept in ``cluster.topic_errors`` for callers to act on.
SURFACED_TOPIC_ERRORS = _RETRIABLE_TOPIC_ERRORS | FINAL_TOPIC_ERRORS


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


# ====================================================================== refresh policy


@dataclass(slots=True)
class TopicState:
    """Bookkeeping for one topic of the working set (times are the holder's clock, in ms)."""

    last_used_ms: int
    last_refresh_ms: int = -1  # -1: never fetched, so the topic has no metadata yet
    urgent: bool = True  # new, or flagged by a metadata-changing error
    retry_at_ms: int = 0  # per-topic backoff after a per-topic error in a response
    errors: int = 0  # consecutive per-topic errors
    mark_seq: int = 0  # when it was last flagged urgent (Metadata's flag counter)
    added_ms: int = 0


@dataclass(frozen=True, slots=True)
class RefreshSelection:
    """What one metadata request names, and why (KIP-526's T, U and target)."""

    topics: list[str]
    urgent: int
    non_urgent: int
    target: int


class MetadataRefreshPolicy:
    """KIP-526's partial-refresh algorithm over the working set; pure (the caller passes ``now``).

    * urgent T: topics with no metadata yet, topics flagged by a metadata-changing
      error, topics not refreshed for ``metadata.max.age.ms`` (skipping those in
      their per-topic error backoff);
    * non-urgent U: the others not refreshed for half of ``metadata.max.age.ms``,
      oldest first;
    * target = max(cached / (max_age_s) × 10, 20): all of T plus U up to the
      target when T is non-empty, else the target's oldest of U once |U| reaches it.

    Topics idle for ``metadata.max.idle.ms`` are evicted unless they still have
    buffered records (``has_buffered_records``). All topics of the cluster are
    never chosen here: that is only the explicit ``request_update_for_all_topics``.
    """

    MIN_TARGET = 20
    TARGET_WINDOW_S = 10

    def __init__(
        self,
        metadata_max_age_ms: int = 300_000,
        metadata_max_idle_ms: int = 300_000,
        has_buffered_records: Callable[[str], bool] | None = None,
    ) -> None:
        if metadata_max_age_ms < 0:
            raise ValueError(f"metadata.max.age.ms must be >= 0, got {metadata_max_age_ms}")
        if metadata_max_idle_ms < 0:
            raise ValueError(f"metadata.max.idle.ms must be >= 0, got {metadata_max_idle_ms}")
        self.metadata_max_age_ms = metadata_max_age_ms
        self.metadata_max_idle_ms = metadata_max_idle_ms
        self.has_buffered_records: Callable[[str], bool] = has_buffered_records or (lambda _t: False)

    # ------------------------------------------------------------- pieces
    def target_size(self, cached_topics: int) -> int:
        """targetMetadataFetchSize = max(topicsPerSec × 10, 20)."""
        if self.metadata_max_age_ms <= 0:
            return max(cached_topics, self.MIN_TARGET)
        topics_per_sec = cached_topics / (self.metadata_max_age_ms / 1000)
        return max(int(topics_per_sec * self.TARGET_WINDOW_S), self.MIN_TARGET)

    def is_urgent(self, st: TopicState, now: int) -> bool:
        """In T (ignoring the per-topic backoff)."""
        return st.urgent or st.last_refresh_ms < 0 or now - st.last_refresh_ms >= self.metadata_max_age_ms

    def evictable(self, topics: Mapping[str, TopicState], now: int) -> list[str]:
        """Topics idle for longer than metadata.max.idle.ms and holding no buffered records."""
        idle = self.metadata_max_idle_ms
        return [
            t for t, st in topics.items() if now - st.last_used_ms > idle and not self.has_buffered_records(t)
        ]

    def classify(self, topics: Mapping[str, TopicState], now: int) -> tuple[list[str], list[str]]:
        """(T due now, U oldest first)."""
        half = self.metadata_max_age_ms / 2
        urgent: list[str] = []
        non_urgent: list[tuple[int, str]] = []
        for t, st in topics.items():
            if self.is_urgent(st, now):
                if st.retry_at_ms <= now:
                    urgent.append(t)
            elif now - st.last_refresh_ms >= half:
                non_urgent.append((st.last_refresh_ms, t))
        non_urgent.sort()
        return urgent, [t for _, t in non_urgent]

    def piggyback_quota(self, target: int, now: int, last_request_ms: int | None) -> int:
        """The share of the target accrued since the last request: how many of U an urgent request may carry.

        The target is a quota per 10-second window (the topics to refresh in that
        time so that each is refreshed about once per max age). Urgent requests
        can go out every few milliseconds while new topics keep arriving; filling
        each one up to the whole target would refresh every topic as soon as it
        reaches half its max age, twice as often as needed. A request takes only
        the share of the quota that accrued since the previous one, so the refresh
        rate stays at the target's rate however often urgent requests go out.
        """
        if last_request_ms is None or last_request_ms < 0:
            return target
        elapsed = max(0, now - last_request_ms)
        window = self.TARGET_WINDOW_S * 1000
        return target if elapsed >= window else -(-target * elapsed // window)

    def select(
        self, topics: Mapping[str, TopicState], now: int, last_request_ms: int | None = None
    ) -> RefreshSelection:
        """The topics the next request names; empty when nothing is due.

        T is always taken whole. What it may piggyback of U (oldest first, and
        never past the target) is further limited when ``last_request_ms`` (the
        previous request) is known:

        * to the target's share accrued since that request (:meth:`piggyback_quota`);
        * when T holds new or flagged topics (arrivals, which recur at about the
          pace they came so far), to the topics of U that would turn urgent
          before the next such request: those at least ``max age - elapsed`` old.
          A topic refreshed earlier than that would be fetched again too soon.

        Without ``last_request_ms``, T takes U up to the target, as KIP-526 states it.
        """
        urgent, non_urgent = self.classify(topics, now)
        target = self.target_size(len(topics))
        if urgent:
            room = target - len(urgent)
            if last_request_ms is not None and last_request_ms >= 0 and room > 0 and non_urgent:
                room = min(room, self.piggyback_quota(target, now, last_request_ms))
                if any(topics[t].urgent or topics[t].last_refresh_ms < 0 for t in urgent):
                    # U is sorted oldest first: count the prefix old enough to go stale before then.
                    edge = now - self.metadata_max_age_ms + max(0, now - last_request_ms)
                    room = min(room, bisect_right([topics[t].last_refresh_ms for t in non_urgent], edge))
            chosen = urgent + non_urgent[: max(0, room)]
        elif len(non_urgent) >= target:
            chosen = non_urgent[:target]
        else:
            chosen = []
        return RefreshSelection(chosen, len(urgent), len(non_urgent), target)

    def next_due_ms(self, topics: Mapping[str, TopicState], now: int) -> int | None:
        """The earliest time ``select`` would name a topic (≤ now: due now); None if never without a change."""
        if not topics:
            return None
        max_age = self.metadata_max_age_ms
        best: int | None = None
        refresh_times: list[int] = []
        for st in topics.values():
            if st.urgent or st.last_refresh_ms < 0:
                due = st.retry_at_ms
            else:
                due = max(st.retry_at_ms, st.last_refresh_ms + max_age)
                refresh_times.append(st.last_refresh_ms)
            if best is None or due < best:
                best = due
        target = self.target_size(len(topics))
        if len(refresh_times) >= target:
            # |U| reaches the target once the target-th oldest refresh is half max age old.
            refresh_times.sort()
            u_due = refresh_times[target - 1] + (max_age + 1) // 2
            best = u_due if best is None else min(best, u_due)
        return best


#: The name the working-set policy had before KIP-526's algorithm replaced it.
WorkingSetPolicy = MetadataRefreshPolicy


class _SensorsLike(Protocol):
    metadata_request: Any
    metadata_response_bytes: Any

    def add_gauge(self, name: str, fn: Callable[[], float]) -> None: ...


# ====================================================================== Metadata


class Metadata:
    """The current Cluster (replaced atomically), its version and the topic working set.

    The Sender thread's NetworkClient drives refreshes (``time_to_next_update`` →
    ``topics_for_request`` → ``handle_response``/``handle_failure``); caller
    threads add topics, flag them (``mark_urgent``) and wait with ``await_update``.
    Coalescing: only one metadata request is in flight at a time, so topics
    that become urgent meanwhile join the next request. With ``coalesce_ms`` > 0
    a request due because urgent topics arrived also waits while more keep
    arriving (each within ``coalesce_quiet_ms`` of the last), for at most
    ``coalesce_ms`` after the first: the new topics several caller threads
    send to at once then share one request instead of two or three.
    """

    def __init__(
        self,
        *,
        metadata_max_age_ms: int = 300_000,
        metadata_max_idle_ms: int = 300_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1000,
        allow_auto_topic_creation: bool = True,
        policy: MetadataRefreshPolicy | None = None,
        rng: random.Random | None = None,
        clock_ms: Callable[[], int] | None = None,
        coalesce_ms: int = 0,
        coalesce_quiet_ms: int = 2,
    ) -> None:
        self.policy = policy or MetadataRefreshPolicy(metadata_max_age_ms, metadata_max_idle_ms)
        self._clock: Callable[[], int] = clock_ms or monotonic_ms
        self.metadata_max_age_ms = self.policy.metadata_max_age_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = max(retry_backoff_max_ms, retry_backoff_ms)
        self.allow_auto_topic_creation = allow_auto_topic_creation
        self._backoff = ExponentialBackoff(retry_backoff_ms, self.retry_backoff_max_ms, rng=rng)
        self._cond = threading.Condition()
        self._cluster = Cluster()
        self._version = 0
        self._topics: dict[str, TopicState] = {}
        self._need_update = True
        self._need_all_topics = False
        self._last_refresh_ms = -1
        self._last_success_ms = -1
        self._last_request_ms = -1
        self.coalesce_ms = max(0, coalesce_ms)
        self.coalesce_quiet_ms = max(1, coalesce_quiet_ms)
        self._burst_first_ms = -1  # first and latest urgent arrival since the last request
        self._burst_last_ms = -1
        self._failures = 0
        self._backoff_ms = 0
        self._mark_seq = 0
        self._request_mark_seq = 0
        self._due_ms: int | None = None
        self._dirty = True
        self._sensors: _SensorsLike | None = None
        self._on_evict: Callable[[str], None] | None = None
        self.requests_sent = 0
        self.last_selection: RefreshSelection | None = None
        self.bootstrap_nodes: tuple[Node, ...] = ()
        self.tried_addresses: dict[str, str] = {}
        self.last_error: Exception | None = None
        # The last TLS or SASL failure (Java's Metadata.fatalException for AuthenticationException):
        # callers waiting for metadata end with it instead of waiting out max.block.ms.
        self.authentication_error: Exception | None = None

    # ------------------------------------------------------------- wiring
    def set_buffered_records_check(self, fn: Callable[[str], bool]) -> None:
        """The producer's accumulator answers "does this topic still hold records?" (never evict those)."""
        self.policy.has_buffered_records = fn

    def bind_metrics(self, sensors: _SensorsLike, on_evict: Callable[[str], None] | None = None) -> None:
        """Record the metadata sensors and register the urgent-topics and age gauges."""
        self._sensors = sensors
        self._on_evict = on_evict
        sensors.add_gauge("metadata-urgent-topics", lambda: float(self.urgent_topic_count()))
        sensors.add_gauge("metadata-age-max", lambda: self.max_age_ms() / 1000.0)

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

    def topic_state(self, topic: str) -> TopicState | None:
        return self._topics.get(topic)

    def urgent_topic_count(self, now: int | None = None) -> int:
        """|T| now, counting topics in their per-topic backoff (the ``metadata-urgent-topics`` gauge)."""
        now = self._clock() if now is None else now
        with self._cond:
            return sum(1 for st in self._topics.values() if self.policy.is_urgent(st, now))

    def max_age_ms(self, now: int | None = None) -> int:
        """Age of the least recently refreshed topic (never-fetched topics count from when they were added)."""
        now = self._clock() if now is None else now
        with self._cond:
            return max(
                (
                    now - (st.last_refresh_ms if st.last_refresh_ms >= 0 else st.added_ms)
                    for st in self._topics.values()
                ),
                default=0,
            )

    def bootstrap(self, nodes: Iterable[Node]) -> None:
        """Seed with the bootstrap brokers (negative ids) until the first response names the real ones."""
        self.bootstrap_nodes = tuple(nodes)

    # ------------------------------------------------------------- working set
    def add_topic(self, topic: str, now: int) -> bool:
        """Add (or touch) a topic; a new topic is urgent, and skips a failed request's backoff."""
        with self._cond:
            st = self._topics.get(topic)
            if st is None:
                self._topics[topic] = TopicState(now, added_ms=now)
                self._backoff_ms = 0
                self._dirty = True
                self._note_urgent_arrival(now)
                return True
            st.last_used_ms = now
            return False

    def _note_urgent_arrival(self, now: int) -> None:
        """A topic joined T: the burst it belongs to may hold the request briefly (see ``coalesce_ms``)."""
        if self._burst_first_ms < 0:
            self._burst_first_ms = now
        self._burst_last_ms = max(self._burst_last_ms, now)

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

    def mark_urgent(self, topic: str, now: int | None = None) -> int:
        """Flag one topic urgent (a metadata-changing error or a lost leader); returns the version to wait past.

        Only this topic joins the next request (with the non-urgent topics the
        target allows). A topic in its per-topic error backoff keeps the backoff.
        """
        with self._cond:
            st = self._topics.get(topic)
            if st is None:
                t = self._clock() if now is None else now
                st = self._topics[topic] = TopicState(t, added_ms=t)
                self._backoff_ms = 0
                self._mark_seq += 1
                st.mark_seq = self._mark_seq
                self._dirty = True
                self._note_urgent_arrival(t)
            elif not st.urgent:
                st.urgent = True
                self._mark_seq += 1
                st.mark_seq = self._mark_seq
                self._dirty = True
                self._note_urgent_arrival(self._clock() if now is None else now)
            return self._version

    request_update_for_topic = mark_urgent

    def describe_reachability(self) -> str:
        """Which bootstrap addresses were tried and why they failed, for timeout messages."""
        with self._cond:
            tried = ", ".join(f"{a} ({r})" for a, r in self.tried_addresses.items())
            boot = ", ".join(n.address for n in self.bootstrap_nodes)
        return f"bootstrap servers {boot or 'none'}" + (
            f"; addresses tried: {tried}"
            if tried
            else ""
            if self._cluster.nodes
            else "; no broker answered yet"
        )

    def request_update(self) -> int:
        """Ask for a request as soon as the backoff allows (brokers, plus what the policy selects).

        It never widens the request to the whole working set: errors about one
        topic use :meth:`mark_urgent`.
        """
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
        return self._need_update or self._need_all_topics

    def time_to_next_update(self, now: int) -> int:
        """Milliseconds until a metadata request is due (0 = now)."""
        with self._cond:
            backoff_end = self._last_refresh_ms + self._backoff_ms if self._last_refresh_ms >= 0 else 0
            if self._need_update or self._need_all_topics:
                return max(0, backoff_end - now)
            if self._dirty:
                # The due time depends on the topics' states only, never on the clock, so it is
                # recomputed (a pass over every topic) only after one of them changed; a request
                # already due stays due until one is sent and answered, which marks a change.
                self._due_ms = self.policy.next_due_ms(self._topics, now)
                self._dirty = False
            due = self._due_ms
            if not self._topics:
                # Nothing to ask about: keep the broker list fresh every metadata.max.age.ms.
                due = self._last_success_ms + self.metadata_max_age_ms if self._last_success_ms >= 0 else 0
            if due is None:
                return 2**31 - 1
            wait = max(0, due - now, backoff_end - now)
            if wait == 0 and self._burst_last_ms >= 0 and self.coalesce_ms > 0:
                # Coalescing: while urgent topics keep arriving (each within coalesce_quiet_ms of
                # the last), hold the request, for at most coalesce_ms after the first of them.
                hold = min(
                    self.coalesce_quiet_ms - (now - self._burst_last_ms),
                    self.coalesce_ms - (now - self._burst_first_ms),
                )
                if hold > 0:
                    return hold
            return wait

    def topics_for_request(self, now: int) -> list[str] | None:
        """Evict idle topics, then choose the next request's topics; None means all topics (explicit only).

        The NetworkClient calls this only when it sends the request, so this is
        where the request is counted and logged.
        """
        with self._cond:
            self._request_mark_seq = self._mark_seq
            self._burst_first_ms = self._burst_last_ms = -1
            if self._need_all_topics:
                self._record_request(None, now)
                return None
            evicted = self.policy.evictable(self._topics, now)
            for t in evicted:
                logger.debug("evicting idle topic %s from the metadata working set", t)
                del self._topics[t]
            if evicted:
                self._dirty = True
            selection = self.policy.select(self._topics, now, self._last_request_ms)
            self._last_request_ms = now
            self.last_selection = selection
            self._record_request(selection, now)
        if evicted and self._on_evict is not None:
            for t in evicted:
                self._on_evict(t)
        return list(selection.topics)

    def _record_request(self, selection: RefreshSelection | None, now: int) -> None:
        self.requests_sent += 1
        if selection is None:
            logger.debug("metadata request for all topics (explicit)")
        elif logger.isEnabledFor(logging.DEBUG):
            cached = self._cluster
            logger.debug(
                "metadata request: |T|=%d |U|=%d target=%d topics(%d)=%s; %d of them already cached",
                selection.urgent,
                selection.non_urgent,
                selection.target,
                len(selection.topics),
                selection.topics,
                sum(1 for t in selection.topics if cached.partition_count(t) is not None),
            )
        if self._sensors is not None:
            self._sensors.metadata_request.record(float(len(selection.topics) if selection else 0), now)

    # ------------------------------------------------------------- updates
    def handle_response(
        self, response: Any, requested_topics: list[str] | None, now: int, size_bytes: int = 0
    ) -> Cluster:
        """Apply a Metadata response (any version) for ``requested_topics`` (None = all).

        Topics come back refreshed, except those flagged urgent after the request
        went out (the answer may predate the error) and those with a retriable
        per-topic error or a partition without a leader: they stay urgent, with
        a per-topic backoff.
        """
        nodes = [
            Node(int(b.node_id), str(b.host), int(b.port), getattr(b, "rack", None)) for b in response.brokers
        ]
        parts: list[PartitionInfo] = []
        errors: dict[str, int] = {}
        internal: list[str] = []
        names: list[str] = []
        leaderless: set[str] = set()
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
                leader = int(p.leader_id)
                if leader < 0:
                    leaderless.add(name)
                parts.append(
                    PartitionInfo(
                        name,
                        int(p.partition_index),
                        leader,
                        int(getattr(p, "leader_epoch", -1)),
                        tuple(int(r) for r in p.replica_nodes),
                        tuple(int(r) for r in p.isr_nodes),
                        tuple(int(r) for r in getattr(p, "offline_replicas", ())),
                    )
                )
        refreshed = names if requested_topics is None else list(set(requested_topics) | set(names))
        if self._sensors is not None and size_bytes > 0:
            self._sensors.metadata_response_bytes.record(float(size_bytes), now)
        with self._cond:
            cluster = self._cluster.merged_with(
                nodes,
                parts,
                refreshed_topics=refreshed,
                topic_errors=errors,
                cluster_id=getattr(response, "cluster_id", None),
                controller_id=int(getattr(response, "controller_id", -1)),
                internal_topics=internal,
                # A partial answer also drops evicted topics from the snapshot (they are forgotten).
                retained_topics=None if requested_topics is None else set(self._topics) | set(refreshed),
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
                if st is None:
                    continue
                if (
                    errors.get(name) in _RETRIABLE_TOPIC_ERRORS
                    or name in leaderless
                    or (name not in names and requested_topics is not None)
                ):
                    st.errors += 1
                    st.urgent = True
                    st.retry_at_ms = now + self._topic_backoff(st.errors)
                    if st.last_refresh_ms < 0 and cluster.partition_count(name) is not None:
                        st.last_refresh_ms = now
                    continue
                st.last_refresh_ms = now
                st.errors = 0
                st.retry_at_ms = 0
                if st.mark_seq <= self._request_mark_seq:
                    st.urgent = False
            self._dirty = True
            self.last_error = None
            self._cond.notify_all()
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug(
                "metadata response: %d topics (%d with errors, %d without a leader), %d bytes; %d cached",
                len(names),
                len(errors),
                len(leaderless),
                size_bytes,
                len(cluster.topics),
            )
        return cluster

    def _topic_backoff(self, errors: int) -> int:
        return self._backoff.backoff(errors - 1)

    def handle_failure(self, now: int, error: Exception | None = None) -> None:
        """A metadata request failed: back off exponentially (with ±20% jitter) up to retry.backoff.max.ms.

        The topics it named keep their state: urgent ones stay urgent for the retry.
        """
        with self._cond:
            self._failures += 1
            self._backoff_ms = self._topic_backoff(self._failures)
            self._last_refresh_ms = now
            self._need_update = True
            self._dirty = True
            if error is not None:
                self.last_error = error
            self._cond.notify_all()

    def record_authentication_failure(self, error: Exception | None) -> None:
        """A broker refused the TLS handshake or the SASL credentials (None: one accepted them)."""
        with self._cond:
            if error is None and self.authentication_error is None:
                return
            self.authentication_error = error
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

