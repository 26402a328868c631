"""The mute state: written by the breaker policy, read lock-free by the hot path (KIP-693's CircuitBreakManager)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from kproducer.circuit_breaker.cluster_view import CircuitBreakerClusterView
from kproducer.circuit_breaker.metrics import MUTE_TOTAL_METRIC, MUTED_PARTITIONS_METRIC, UNMUTE_TOTAL_METRIC
from kproducer.circuit_breaker.state import (
    REASON_IN_FLIGHT_DRAINED,
    REASON_IN_FLIGHT_FULL,
    REASON_MANUAL,
    REASON_METADATA,
    REASON_PROBE,
    REASON_PROBE_CANCELLED,
    REASON_PROBE_DUE,
    BreakerState,
    CircuitStateChange,
    StateListener,
    log_change,
    logger,
)
from kproducer.metadata import Cluster
from kproducer.murmur2 import partition_for_key
from kproducer.structs import PartitionInfo, TopicPartition

_NEVER: Final = 2**63 - 1


@dataclass(slots=True)
class _PartitionMute:
    """An explicit (per-partition) mute: when its probe is due, and whether one is out."""

    retry_at_ms: int | None
    failure_rate: float | None
    probing: bool = False
    first_symptom_ms: int | None = None


@dataclass(frozen=True, slots=True)
class _Published:
    """What lock-free readers see: one consistent (cluster, muted, probing) triple."""

    cluster: Cluster
    muted: frozenset[TopicPartition]
    probing: frozenset[TopicPartition]

    def state(self, tp: TopicPartition) -> BreakerState:
        if tp in self.probing:
            return BreakerState.HALF_OPEN
        if tp in self.muted:
            return BreakerState.OPEN
        return BreakerState.CLOSED


class CircuitBreakManager:
    """The mute state shared by the breaker (writer) and the hot path (readers).

    KIP-693, ``CircuitBreakManager``. A partition is muted when it is muted on its
    own (``mute(tp)``, usually by the breaker) or when its leader node is muted
    (``mute_node``, in-flight congestion). Writers hold a lock, rebuild the muted
    frozenset and swap it in; ``is_muted`` reads it without a lock.

    Node mutes are resolved against the cluster from ``cluster_provider``; call
    :meth:`refresh` after a metadata update (``FailureRateCircuitBreaker.on_send``
    does, once per Sender loop) so that a moved leader takes its mute state along.
    Listeners run on the thread that made the change, outside the lock.
    """

    def __init__(self, cluster_provider: Callable[[], Cluster], clock_ms: Callable[[], int]) -> None:
        self._cluster_provider = cluster_provider
        self._clock_ms = clock_ms
        self._lock = threading.Lock()
        self._explicit: dict[TopicPartition, _PartitionMute] = {}
        self._muted_nodes: frozenset[int] = frozenset()
        self._node_tps_cache: dict[int, frozenset[TopicPartition]] = {}
        cluster = cluster_provider()
        self._published = _Published(cluster, frozenset(), frozenset())
        self._muted: frozenset[TopicPartition] = frozenset()
        # Closed to new records: muted less those whose probe is due (see refresh()).
        self._routing_muted: frozenset[TopicPartition] = frozenset()
        # Closed to records and muted on their own (not only through a congested node).
        self._vacate: frozenset[TopicPartition] = frozenset()
        self._next_due_ms = _NEVER
        self._view: CircuitBreakerClusterView | None = None
        self._listeners: tuple[StateListener, ...] = ()
        self._mute_total = 0
        self._unmute_total = 0
        self._closed = False

    # ----------------------------------------------------------- hot-path reads
    def is_muted(self, tp: TopicPartition) -> bool:
        """Whether the partition is muted (OPEN or HALF_OPEN). O(1), lock-free."""
        return tp in self._muted

    def muted_partitions(self) -> frozenset[TopicPartition]:
        """The current muted set: an immutable snapshot."""
        return self._muted

    @property
    def routing_muted(self) -> frozenset[TopicPartition]:
        """Partitions closed to new records: muted ones less those whose probe is due.

        A muted partition whose probe fell due must receive a record, or a keyless
        workload would never give it a probe batch; :meth:`refresh` (once per Sender
        loop) opens it, and granting the probe closes it again.
        """
        return self._routing_muted

    def partitions_to_vacate(self) -> frozenset[TopicPartition]:
        """Partitions whose never-sent keyless batches should move elsewhere. Lock-free.

        Those closed to records and muted on their own (by the policy or by hand),
        not those muted only while their node's in-flight window is full: that mute
        lifts with the next response, and moving batches for it would only churn.
        """
        return self._vacate

    def may_send(self, tp: TopicPartition) -> bool:
        """Whether a new record may go to ``tp`` now (not muted, or its probe is due). Lock-free."""
        return tp not in self._routing_muted

    def reroute_keyed(self, topic: str, partition: int, key_bytes: bytes, cluster: Cluster | None = None) -> int:
        """Where a keyed record hashed to ``partition`` goes while that partition is closed.

        Deterministic: murmur2 of the key over the available (unmuted) partitions, so
        one key keeps to one partition for the whole mute. ``partition`` itself when
        it is open, or when every partition is muted (availability wins; the record
        waits for the probe).
        """
        if partition < 0:
            raise ValueError(f"partition must be >= 0, got {partition}")
        if TopicPartition(topic, partition) not in self._routing_muted:
            return partition
        available = self.cluster_view(cluster).available_partitions_for_topic(topic)
        if not available:
            return partition
        return available[partition_for_key(key_bytes, len(available))].partition

    def probe_in_flight(self, tp: TopicPartition) -> bool:
        """Whether a probe batch was granted for the partition and has not completed."""
        return tp in self._published.probing

    def is_partition_muted(self, tp: TopicPartition) -> bool:
        """Whether the partition is muted on its own, not only through its leader node."""
        return tp in self._explicit

    def is_node_muted(self, node_id: int) -> bool:
        return node_id in self._muted_nodes

    def muted_nodes(self) -> frozenset[int]:
        return self._muted_nodes

    def state(self, tp: TopicPartition) -> BreakerState:
        return self._published.state(tp)

    def leader_of(self, tp: TopicPartition) -> int:
        """The partition's leader node id in the manager's cluster snapshot (-1 when unknown)."""
        info = self._published.cluster.partition(tp)
        return -1 if info is None else info.leader

    def partitions_led_by(self, topic: str, node_id: int) -> list[TopicPartition]:
        """The partitions of ``topic`` whose leader is ``node_id`` in the manager's cluster snapshot."""
        if node_id < 0:
            return []
        return [
            TopicPartition(p.topic, p.partition)
            for p in self._published.cluster.partitions_for_topic(topic)
            if p.leader == node_id
        ]

    def partitions_of_node(self, node_id: int) -> frozenset[TopicPartition]:
        """Every partition ``node_id`` leads in the manager's cluster snapshot, of every topic."""
        if node_id < 0:
            return frozenset()
        return self._node_tps(self._published.cluster, node_id)

    def silent_mute_of_node(self, node_id: int) -> int | None:
        """When the first unanswered request was sent, for a partition of ``node_id`` muted for it; else None."""
        if node_id < 0:
            return None
        for tp, m in list(self._explicit.items()):
            if m.first_symptom_ms is not None and self.leader_of(tp) == node_id:
                return m.first_symptom_ms
        return None

    def retry_at_ms(self, tp: TopicPartition) -> int | None:
        """When the partition's next probe is due, or None (not muted, or no probe scheduled)."""
        m = self._explicit.get(tp)
        return None if m is None else m.retry_at_ms

    def next_probe_delay_ms(self, now_ms: int | None = None) -> int | None:
        """Milliseconds until the earliest probe falls due (0 if one is due), or None.

        The Sender sleeps no longer than this, so a probe is not delayed by a long poll.
        """
        now = self._clock_ms() if now_ms is None else now_ms
        with self._lock:
            # A due probe already opened to records (refresh() ran) needs no wake-up: the
            # record that arrives for it wakes the Sender.
            opened = self._muted - self._routing_muted
            due = [
                m.retry_at_ms
                for tp, m in self._explicit.items()
                if m.retry_at_ms is not None and not m.probing and tp not in opened
            ]
        if not due:
            return None
        return max(0, min(due) - now)

    # ----------------------------------------------------------- writes
    def mute(
        self,
        tp: TopicPartition,
        *,
        retry_after_ms: int | None = None,
        failure_rate: float | None = None,
        reason: str = REASON_MANUAL,
        now_ms: int | None = None,
        first_symptom_ms: int | None = None,
    ) -> bool:
        """Mute one partition (→ OPEN); returns whether its state changed.

        With ``retry_after_ms`` a probe becomes due that long after ``now_ms`` (KIP-693,
        ``mute.retry.interval``); without it the partition stays muted until ``unmute``.
        Muting an already muted partition reschedules its probe and ends a probe in flight.
        ``first_symptom_ms`` (when the leader's first unanswered request was sent) goes
        into the state change, for the time-to-mute metric and the log line.
        """
        if retry_after_ms is not None and retry_after_ms < 0:
            raise ValueError(f"retry_after_ms must be >= 0, got {retry_after_ms}")
        now = self._clock_ms() if now_ms is None else now_ms
        retry_at = None if retry_after_ms is None else now + retry_after_ms
        with self._lock:
            if self._closed:
                return False
            events = self._sync_cluster_locked(now)
            before = self._published
            self._explicit[tp] = _PartitionMute(retry_at, failure_rate, first_symptom_ms=first_symptom_ms)
            changed = self._publish_locked(before, reason, now, {tp: failure_rate})
            events.extend(changed)
        self._dispatch(events)
        return bool(changed)

    def unmute(self, tp: TopicPartition, *, reason: str = REASON_MANUAL, now_ms: int | None = None) -> bool:
        """Lift a partition's own mute; it stays muted if its leader node is muted."""
        now = self._clock_ms() if now_ms is None else now_ms
        with self._lock:
            if self._closed or tp not in self._explicit:
                return False
            events = self._sync_cluster_locked(now)
            before = self._published
            del self._explicit[tp]
            changed = self._publish_locked(before, reason, now, {})
            events.extend(changed)
        self._dispatch(events)
        return bool(changed)

    def mute_node(
        self, node_id: int, *, reason: str = REASON_IN_FLIGHT_FULL, now_ms: int | None = None
    ) -> bool:
        """Mute every partition led by ``node_id`` (KIP-693, ``mute(int nodeId)``)."""
        return self._set_node(node_id, True, reason, now_ms)

    def unmute_node(
        self, node_id: int, *, reason: str = REASON_IN_FLIGHT_DRAINED, now_ms: int | None = None
    ) -> bool:
        """Lift a node mute; partitions muted on their own stay muted."""
        return self._set_node(node_id, False, reason, now_ms)

    def allow_probe(self, tp: TopicPartition, now_ms: int | None = None) -> bool:
        """May the accumulator drain one probe batch of this muted partition now?

        Yes at most once per retry interval: the first call after the probe fell due
        grants it (→ HALF_OPEN) and later calls say no until the probe's outcome is
        known (``mute`` again → OPEN with a fresh interval, ``unmute`` → CLOSED). No
        while the leader node is muted, and no for partitions that are not muted
        (they need no probe). Ask only when a batch is about to be drained.
        """
        m = self._explicit.get(tp)
        if m is None or m.retry_at_ms is None or m.probing:
            return False
        now = self._clock_ms() if now_ms is None else now_ms
        if now < m.retry_at_ms:
            return False
        with self._lock:
            if self._closed:
                return False
            m = self._explicit.get(tp)
            if m is None or m.retry_at_ms is None or m.probing or now < m.retry_at_ms:
                return False
            info = self._published.cluster.partition(tp)
            if info is not None and info.leader in self._muted_nodes:
                return False
            events = self._set_probing_locked(tp, m, True, REASON_PROBE, now)
        self._dispatch(events)
        return True

    def cancel_probe(self, tp: TopicPartition, now_ms: int | None = None) -> bool:
        """Give back a granted probe that was not sent; it is due again at once."""
        now = self._clock_ms() if now_ms is None else now_ms
        with self._lock:
            m = self._explicit.get(tp)
            if self._closed or m is None or not m.probing:
                return False
            events = self._set_probing_locked(tp, m, False, REASON_PROBE_CANCELLED, now)
        self._dispatch(events)
        return True

    def refresh(self, now_ms: int | None = None) -> bool:
        """Re-derive node mutes after a metadata change and open partitions whose probe fell due.

        Returns whether any partition's state changed (a due probe opening to records
        is not a state change: the partition stays OPEN until the probe is granted).
        """
        cluster = self._cluster_provider()
        now = self._clock_ms() if now_ms is None else now_ms
        if cluster is self._published.cluster and now < self._next_due_ms:
            return False
        with self._lock:
            if self._closed:
                return False
            events = self._sync_cluster_locked(now)
            if not events and now >= self._next_due_ms:
                self._publish_locked(self._published, REASON_PROBE_DUE, now, {})
        self._dispatch(events)
        return bool(events)

    def close(self) -> None:
        """Clear every mute and drop the listeners (no events: the producer is going away)."""
        with self._lock:
            self._closed = True
            self._explicit.clear()
            self._muted_nodes = frozenset()
            self._published = _Published(self._published.cluster, frozenset(), frozenset())
            self._muted = frozenset()
            self._routing_muted = frozenset()
            self._vacate = frozenset()
            self._next_due_ms = _NEVER
            self._view = None
            self._listeners = ()
        logger.debug("circuit break manager closed")

    # ----------------------------------------------------------- listeners and metrics
    def add_listener(self, listener: StateListener) -> None:
        """Call ``listener`` once per partition state change (metrics, logs)."""
        with self._lock:
            self._listeners = (*self._listeners, listener)

    def remove_listener(self, listener: StateListener) -> None:
        with self._lock:
            listeners = list(self._listeners)
            if listener in listeners:  # equality, so a fresh bound method matches
                listeners.remove(listener)
                self._listeners = tuple(listeners)

    @property
    def mute_total(self) -> int:
        """Partitions that went from CLOSED to muted, since construction."""
        return self._mute_total

    @property
    def unmute_total(self) -> int:
        """Partitions that went from muted back to CLOSED, since construction."""
        return self._unmute_total

    def metrics(self) -> dict[str, float]:
        """The gauge and the two event totals; the producer turns totals into rates."""
        return {
            MUTED_PARTITIONS_METRIC: float(len(self._muted)),
            MUTE_TOTAL_METRIC: float(self._mute_total),
            UNMUTE_TOTAL_METRIC: float(self._unmute_total),
        }

    # ----------------------------------------------------------- views (KIP-693)
    def cluster_view(self, cluster: Cluster | None = None) -> CircuitBreakerClusterView:
        """A muted-filtered view of ``cluster`` (default: the provider's current one).

        The partitioner passes the snapshot it already holds, so it never sees a
        topic missing because the manager's copy is older. Cached per (cluster, muted).
        """
        if cluster is None:
            cluster = self._cluster_provider()
        muted = self._routing_muted
        view = self._view
        if view is not None and view.cluster is cluster and view.muted is muted:
            return view
        view = CircuitBreakerClusterView(cluster, muted)
        self._view = view
        return view

    def available_partitions(self, topic: str) -> tuple[PartitionInfo, ...]:
        """The partitioner's list: live-leader partitions open to records (may be empty)."""
        return self.cluster_view().available_partitions_for_topic(topic)

    def available_partitions_for_topic(self, topic: str) -> list[PartitionInfo]:
        """Partitions with a live leader that are not muted."""
        pub = self._current()
        return [
            p for p in pub.cluster.available_partitions_for_topic(topic) if p.topic_partition not in pub.muted
        ]

    def muted_partitions_for_topic(self, topic: str) -> list[PartitionInfo]:
        """Partitions of the topic (with or without a leader) that are muted."""
        pub = self._current()
        return [p for p in pub.cluster.partitions_for_topic(topic) if p.topic_partition in pub.muted]

    def available_partitions_for_node(self, node_id: int) -> dict[str, list[PartitionInfo]]:
        """Partitions led by ``node_id`` that are not muted, by topic."""
        pub = self._current()
        return _by_topic(
            p for p in pub.cluster.partitions_for_node(node_id) if p.topic_partition not in pub.muted
        )

    def muted_partitions_for_node(self, node_id: int) -> dict[str, list[PartitionInfo]]:
        """Partitions led by ``node_id`` that are muted, by topic."""
        pub = self._current()
        return _by_topic(
            p for p in pub.cluster.partitions_for_node(node_id) if p.topic_partition in pub.muted
        )

    # ----------------------------------------------------------- internals
    def _current(self) -> _Published:
        self.refresh()
        return self._published

    def _set_node(self, node_id: int, muted: bool, reason: str, now_ms: int | None) -> bool:
        now = self._clock_ms() if now_ms is None else now_ms
        with self._lock:
            if self._closed or (node_id in self._muted_nodes) == muted:
                return False
            events = self._sync_cluster_locked(now)
            before = self._published
            self._muted_nodes = self._muted_nodes | {node_id} if muted else self._muted_nodes - {node_id}
            events.extend(self._publish_locked(before, reason, now, {}))
        self._dispatch(events)
        return True

    def _set_probing_locked(
        self, tp: TopicPartition, m: _PartitionMute, probing: bool, reason: str, now: int
    ) -> list[CircuitStateChange]:
        before = self._published
        m.probing = probing
        return self._publish_locked(before, reason, now, {tp: m.failure_rate})

    def _node_tps(self, cluster: Cluster, node_id: int) -> frozenset[TopicPartition]:
        tps = self._node_tps_cache.get(node_id)
        if tps is None:
            tps = frozenset(p.topic_partition for p in cluster.partitions_for_node(node_id))
            self._node_tps_cache[node_id] = tps
        return tps

    def _sync_cluster_locked(self, now: int) -> list[CircuitStateChange]:
        cluster = self._cluster_provider()
        before = self._published
        if cluster is before.cluster:
            return []
        self._node_tps_cache = {}
        return self._publish_locked(before, REASON_METADATA, now, {}, cluster)

    def _publish_locked(
        self,
        before: _Published,
        reason: str,
        now: int,
        rates: Mapping[TopicPartition, float | None],
        cluster: Cluster | None = None,
    ) -> list[CircuitStateChange]:
        """Rebuild and swap the snapshot; return one change per partition whose state moved."""
        cluster = before.cluster if cluster is None else cluster
        muted = frozenset(self._explicit).union(*(self._node_tps(cluster, n) for n in self._muted_nodes))
        probing = frozenset(tp for tp, m in self._explicit.items() if m.probing)
        after = _Published(cluster, muted, probing)
        due: set[TopicPartition] = set()
        next_due = _NEVER
        for tp, pm in self._explicit.items():
            if pm.probing or pm.retry_at_ms is None:
                continue
            if pm.retry_at_ms > now:
                next_due = min(next_due, pm.retry_at_ms)
                continue
            info = cluster.partition(tp)
            if info is None or info.leader not in self._muted_nodes:
                due.add(tp)
        self._published = after
        self._muted = muted
        self._routing_muted = muted - due if due else muted
        explicit = self._explicit
        self._vacate = frozenset(tp for tp in self._routing_muted if tp in explicit) if explicit else frozenset()
        self._next_due_ms = next_due
        events: list[CircuitStateChange] = []
        for tp in (before.muted ^ muted) | (before.probing ^ probing):
            previous = before.state(tp)
            current = after.state(tp)
            if previous is current:
                continue
            info = cluster.partition(tp)
            m = self._explicit.get(tp)
            rate = rates.get(tp, m.failure_rate if m is not None else None)
            change = CircuitStateChange(
                tp,
                info.leader if info is not None else -1,
                previous,
                current,
                now,
                reason,
                rate,
                m.first_symptom_ms if m is not None else None,
            )
            if change.is_mute:
                self._mute_total += 1
            elif change.is_unmute:
                self._unmute_total += 1
            events.append(change)
        return events

    def _dispatch(self, events: list[CircuitStateChange]) -> None:
        if not events:
            return
        listeners = self._listeners
        for change in events:
            log_change(change)
            for listener in listeners:
                try:
                    listener(change)
                except Exception:
                    logger.exception(
                        "circuit breaker listener %r failed on %s", listener, change.topic_partition
                    )


def _by_topic(partitions: Iterable[PartitionInfo]) -> dict[str, list[PartitionInfo]]:
    out: dict[str, list[PartitionInfo]] = {}
    for p in partitions:
        out.setdefault(p.topic, []).append(p)
    return out
