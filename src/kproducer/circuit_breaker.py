"""Partition circuit breaker (KIP-693): stop feeding partitions that keep failing.

KIP-693, *Motivation*: every partition shares one BufferPool, so a few slow or
failing partitions fill the buffer and starve the healthy ones. The breaker
"mutes" such partitions on the client side: the partitioner stops routing
records to them, ``send()`` can refuse an explicit muted partition with the
retriable :class:`~kproducer.errors.PartitionMutedError`, and the accumulator
stops draining them, until a probe batch shows the leader is healthy again.

The pieces, as in KIP-693's *Public Interfaces*:

* :class:`ProducerStatusContext`: the Sender's congestion snapshot handed to the
  breaker on every loop and on every completed batch.
* :class:`PartitionCircuitBreaker`: the policy protocol
  (``producer.circuit.breaker.class``). Policies are pure: they take time from the context, never from ``time``.
* :class:`CircuitBreakManager`: the mute state the policy writes and the hot path
  reads. ``is_muted`` is one frozenset lookup with no lock: writers build a new
  frozenset and swap the reference.
* :class:`FailureRateCircuitBreaker`: the default policy (KIP-693's FailureRateCircuitBreaker), a per-partition sliding window over
  records with Closed → Open → Half-open → Closed states.

Wiring (the Sender loop):

1. at the top of each loop: ``breaker.on_send(context)`` (it also calls
   ``manager.refresh()``, which re-derives node mutes after a metadata change);
2. in ``drain()``, for each partition: skip it when
   ``manager.is_muted(tp) and not manager.allow_probe(tp)``; ``allow_probe`` says
   yes once per retry interval, so exactly one probe batch is drained; if that
   batch is then not sent after all, call ``manager.cancel_probe(tp)``;
3. on every completed batch (success, error or expiry):
   ``breaker.on_complete(context, tp, exception, record_count)``;
4. the Sender sleeps no longer than ``manager.next_probe_delay_ms(now)``.

The partitioner reads ``manager.cluster_view(cluster).available_partitions_for_topic``;
when that is empty (every available partition is muted) it falls back to the
unfiltered ``cluster.available_partitions_for_topic``: availability wins over
muting, as a muted partition is a hint, not an outage.
"""

from __future__ import annotations

import enum
import importlib
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, runtime_checkable

from kproducer.errors import ConfigError, IllegalStateError, PartitionMutedError
from kproducer.metadata import Cluster
from kproducer.metrics import Avg, CumulativeSum, Max, Metrics, Rate, WindowedCount, WindowedSum
from kproducer.partitioner import murmur2
from kproducer.structs import PartitionInfo, TopicPartition

__all__ = [
    "CLASS_CONFIG",
    "CONFIG_PREFIX",
    "MUTED_PARTITIONS_METRIC",
    "MUTE_RATE_METRIC",
    "MUTE_TOTAL_METRIC",
    "UNMUTE_RATE_METRIC",
    "UNMUTE_TOTAL_METRIC",
    "KEYED_REROUTE_CONFIG",
    "BreakerState",
    "CircuitBreakManager",
    "CircuitBreakerClusterView",
    "CircuitStateChange",
    "FailureRateCircuitBreaker",
    "FailureRateConfig",
    "PartitionCircuitBreaker",
    "ProducerStatusContext",
    "SlidingWindow",
    "StateListener",
    "register_circuit_breaker_metrics",
    "resolve_circuit_breaker",
]

logger = logging.getLogger(__name__)

CONFIG_PREFIX: Final = "producer.circuit.breaker."
CLASS_CONFIG: Final = CONFIG_PREFIX + "class"
#: Read by the producer itself (keyed records may leave a muted partition), not by the policy.
KEYED_REROUTE_CONFIG: Final = CONFIG_PREFIX + "keyed.reroute"
_PRODUCER_OWNED_KEYS: Final = frozenset({CLASS_CONFIG, KEYED_REROUTE_CONFIG})

MUTED_PARTITIONS_METRIC: Final = "circuit-breaker-muted-partitions"
MUTE_RATE_METRIC: Final = "circuit-breaker-mute-rate"
UNMUTE_RATE_METRIC: Final = "circuit-breaker-unmute-rate"
MUTE_TOTAL_METRIC: Final = "circuit-breaker-mute-total"
UNMUTE_TOTAL_METRIC: Final = "circuit-breaker-unmute-total"
TIME_TO_MUTE_SENSOR: Final = "circuit-breaker-time-to-mute"
MOVED_RECORDS_SENSOR: Final = "circuit-breaker-moved-records"
MOVED_RECORDS_TOTAL_METRIC: Final = "circuit-breaker-moved-records-total"
MOVED_RECORDS_RATE_METRIC: Final = "circuit-breaker-moved-records-rate"

# Reasons carried by CircuitStateChange; node congestion ones are logged at DEBUG
# because with max.in.flight=1 they flip on every request.
REASON_MANUAL: Final = "manual"
REASON_FAILURE_RATE: Final = "failure-rate"
REASON_LEADER_SILENT: Final = "leader-silent"
REASON_PROBE: Final = "probe"
REASON_PROBE_SUCCEEDED: Final = "probe-succeeded"
REASON_PROBE_FAILED: Final = "probe-failed"
REASON_PROBE_CANCELLED: Final = "probe-cancelled"
REASON_IN_FLIGHT_FULL: Final = "in-flight-full"
REASON_IN_FLIGHT_DRAINED: Final = "in-flight-drained"
REASON_METADATA: Final = "metadata"
REASON_CLOSED: Final = "closed"
_QUIET_REASONS: Final = frozenset({REASON_IN_FLIGHT_FULL, REASON_IN_FLIGHT_DRAINED})

_INT_MAX: Final = 2**31 - 1
_NEVER: Final = 2**63 - 1
REASON_PROBE_DUE: Final = "probe-due"


# ---------------------------------------------------------------- context and protocol


@dataclass(frozen=True, slots=True)
class ProducerStatusContext:
    """The Sender's congestion snapshot (KIP-693, ``ProducerStatusContext``).

    ``in_flight_requests`` is per broker node id; ``in_flight_batches`` per partition.
    The breaker takes its time from ``now_ms`` (never from ``time``).

    ``unanswered_since_ms`` is set only on the completion of a batch whose leader
    never answered: its request timed out (``request.timeout.ms``) or its
    connection was lost while the request was in flight. It is when that request
    was sent, so the leader has been silent since then at the latest.
    """

    now_ms: int
    in_flight_requests: Mapping[int, int] = field(default_factory=dict)
    in_flight_batches: Mapping[TopicPartition, int] = field(default_factory=dict)
    max_in_flight_requests_per_connection: int = 5
    unanswered_since_ms: int | None = None


@runtime_checkable
class PartitionCircuitBreaker(Protocol):
    """A partition circuit breaker policy (KIP-693, ``PartitionCircuitBreaker``).

    The Sender thread calls every method; implementations need no locking of
    their own. They change mute state only through the manager.
    """

    def configure(self, configs: Mapping[str, Any]) -> None:
        """Read the ``producer.circuit.breaker.*`` keys; raise ConfigError on bad ones."""

    def set_circuit_break_manager(self, manager: CircuitBreakManager) -> None:
        """Hand over the manager whose mute state this breaker drives."""

    def on_send(self, context: ProducerStatusContext) -> bool:
        """Called once per Sender loop; returns whether it changed any mute state."""

    def on_complete(
        self,
        context: ProducerStatusContext,
        topic_partition: TopicPartition,
        exception: BaseException | None,
        record_count: int,
    ) -> bool:
        """Called once per completed batch; returns whether it changed any mute state."""

    def close(self) -> None:
        """Release what the breaker holds; it is not called again afterwards."""


# ---------------------------------------------------------------- state changes


class BreakerState(enum.Enum):
    """A partition's breaker state: CLOSED sends, OPEN is muted, HALF_OPEN has a probe out."""

    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half-open"


@dataclass(frozen=True, slots=True)
class CircuitStateChange:
    """One partition changed state; listeners get one of these per change.

    ``leader`` is the partition's leader node id in the manager's current cluster
    snapshot (-1 when unknown); ``failure_rate`` is a percentage, when known.
    ``first_symptom_ms``, on a mute, is when the first request of the partition that
    its leader never answered was sent (None when the mute came from error codes only).
    """

    topic_partition: TopicPartition
    leader: int
    previous: BreakerState
    current: BreakerState
    now_ms: int
    reason: str
    failure_rate: float | None = None
    first_symptom_ms: int | None = None

    @property
    def time_to_mute_ms(self) -> int | None:
        """On a mute that followed unanswered requests: from the first of them being sent to the mute."""
        if self.first_symptom_ms is None or not self.is_mute:
            return None
        return max(0, self.now_ms - self.first_symptom_ms)

    @property
    def is_mute(self) -> bool:
        """The partition stopped being sendable (counts toward circuit-breaker-mute-rate)."""
        return self.previous is BreakerState.CLOSED and self.current is not BreakerState.CLOSED

    @property
    def is_unmute(self) -> bool:
        """The partition became sendable again (counts toward circuit-breaker-unmute-rate)."""
        return self.previous is not BreakerState.CLOSED and self.current is BreakerState.CLOSED


StateListener = Callable[[CircuitStateChange], None]


# ---------------------------------------------------------------- the manager


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


class CircuitBreakerClusterView(Cluster):
    """A Cluster with muted partitions filtered out of ``available_partitions_for_topic``.

    KIP-693: "When a breaker is in effect, it will filter out muted partitions when
    calculating availablePartitionsForTopic." It *is* a Cluster (it shares the base
    snapshot's immutable tables), so every partitioner takes it where it takes a
    Cluster. ``muted`` holds the partitions closed to new records: muted ones, less
    those whose probe is due (they must receive a record to be probed at all).
    Immutable like Cluster; per-topic results are memoized.
    """

    __slots__ = ("cluster", "muted", "_available")

    def __init__(self, cluster: Cluster, muted: frozenset[TopicPartition]) -> None:
        for name in Cluster.__slots__:
            object.__setattr__(self, name, getattr(cluster, name))
        self.cluster = cluster
        self.muted = muted
        self._available: dict[str, tuple[PartitionInfo, ...]] = {}

    def is_muted(self, tp: TopicPartition) -> bool:
        return tp in self.muted

    def available_partitions_for_topic(self, topic: str) -> tuple[PartitionInfo, ...]:
        """Partitions with a live leader that are not muted; empty when all are muted."""
        cached = self._available.get(topic)
        if cached is None:
            muted = self.muted
            cached = tuple(
                p
                for p in self.cluster.available_partitions_for_topic(topic)
                if (p.topic, p.partition) not in muted
            )
            self._available[topic] = cached
        return cached

    def __repr__(self) -> str:
        return f"CircuitBreakerClusterView({self.cluster!r}, muted={len(self.muted)})"


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
        return available[(murmur2(key_bytes) & 0x7FFFFFFF) % len(available)].partition

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
        pub = self._published
        if tp in pub.probing:
            return BreakerState.HALF_OPEN
        if tp in pub.muted:
            return BreakerState.OPEN
        return BreakerState.CLOSED

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
            before = self._published
            m.probing = True
            events = self._publish_locked(before, REASON_PROBE, now, {tp: m.failure_rate})
        self._dispatch(events)
        return True

    def cancel_probe(self, tp: TopicPartition, now_ms: int | None = None) -> bool:
        """Give back a granted probe that was not sent; it is due again at once."""
        now = self._clock_ms() if now_ms is None else now_ms
        with self._lock:
            m = self._explicit.get(tp)
            if self._closed or m is None or not m.probing:
                return False
            before = self._published
            m.probing = False
            events = self._publish_locked(before, REASON_PROBE_CANCELLED, now, {tp: m.failure_rate})
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
            previous = _state(before, tp)
            current = _state(after, tp)
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
            _log_change(change)
            for listener in listeners:
                try:
                    listener(change)
                except Exception:
                    logger.exception(
                        "circuit breaker listener %r failed on %s", listener, change.topic_partition
                    )


def _state(pub: _Published, tp: TopicPartition) -> BreakerState:
    if tp in pub.probing:
        return BreakerState.HALF_OPEN
    if tp in pub.muted:
        return BreakerState.OPEN
    return BreakerState.CLOSED


def _log_change(change: CircuitStateChange) -> None:
    rate = "n/a" if change.failure_rate is None else f"{change.failure_rate:.1f}%"
    level = logging.DEBUG if change.reason in _QUIET_REASONS else logging.WARNING
    delay = change.time_to_mute_ms
    logger.log(
        level,
        "circuit breaker: partition %s (leader %s) %s -> %s (%s, failure rate %s%s)",
        change.topic_partition,
        change.leader,
        change.previous.value,
        change.current.value,
        change.reason,
        rate,
        "" if delay is None else f", {delay} ms after its first unanswered request was sent",
    )


def _by_topic(partitions: Iterable[PartitionInfo]) -> dict[str, list[PartitionInfo]]:
    out: dict[str, list[PartitionInfo]] = {}
    for p in partitions:
        out.setdefault(p.topic, []).append(p)
    return out


# ---------------------------------------------------------------- sliding window


class SlidingWindow:
    """Success and failure record counts over the last ``window_ms``, in fixed buckets.

    Updates are O(1) amortized (at most ``buckets`` slots are cleared per update).
    A record counted at ``t`` is still counted while ``now - t < window_ms - bucket_ms``
    and is forgotten once ``now - t >= window_ms + bucket_ms``.
    """

    __slots__ = ("window_ms", "bucket_ms", "_n", "_succ", "_fail", "_head", "_successes", "_failures")

    def __init__(self, window_ms: int, buckets: int = 10) -> None:
        if window_ms < 1 or buckets < 1:
            raise ValueError(f"window_ms and buckets must be >= 1, got {window_ms}, {buckets}")
        self.window_ms = window_ms
        self.bucket_ms = -(-window_ms // buckets)
        self._n = -(-window_ms // self.bucket_ms)
        self._succ = [0] * self._n
        self._fail = [0] * self._n
        self._head: int | None = None
        self._successes = 0
        self._failures = 0

    def _advance(self, now_ms: int) -> int:
        idx = now_ms // self.bucket_ms
        head = self._head
        if head is None:
            self._head = idx
            return idx
        if idx <= head:
            return head
        if idx - head >= self._n:
            self.reset()
        else:
            for i in range(head + 1, idx + 1):
                slot = i % self._n
                self._successes -= self._succ[slot]
                self._failures -= self._fail[slot]
                self._succ[slot] = 0
                self._fail[slot] = 0
        self._head = idx
        return idx

    def record(self, now_ms: int, successes: int, failures: int) -> None:
        """Count records at ``now_ms`` (an earlier time than the newest counts as the newest)."""
        slot = self._advance(now_ms) % self._n
        self._succ[slot] += successes
        self._fail[slot] += failures
        self._successes += successes
        self._failures += failures

    def counts(self, now_ms: int) -> tuple[int, int]:
        """(successes, failures) in the window ending at ``now_ms``."""
        self._advance(now_ms)
        return self._successes, self._failures

    def reset(self) -> None:
        self._succ = [0] * self._n
        self._fail = [0] * self._n
        self._successes = 0
        self._failures = 0

    def forget_successes(self) -> None:
        """Drop every success counted so far; failures stay until they age out."""
        self._succ = [0] * self._n
        self._successes = 0


# ---------------------------------------------------------------- default policy config


@dataclass(frozen=True, slots=True)
class _Key:
    field: str
    kind: type
    minimum: int = 0
    maximum: int = _INT_MAX


_KEYS: Final[dict[str, _Key]] = {
    "trigger.message.count": _Key("trigger_message_count", int, 1),
    "trigger.failure.perc": _Key("trigger_failure_perc", int, 1, 100),
    "window.ms": _Key("window_ms", int, 1),
    "mute.retry.interval": _Key("mute_retry_interval_ms", int, 0),
    "enable.mute.inflight.full": _Key("enable_mute_inflight_full", bool),
}


@dataclass(frozen=True, slots=True)
class FailureRateConfig:
    """The default breaker's settings (KIP-693, *Proposed Changes*), validated."""

    trigger_message_count: int = 100
    trigger_failure_perc: int = 50
    window_ms: int = 10_000
    mute_retry_interval_ms: int = 5_000
    enable_mute_inflight_full: bool = False

    @classmethod
    def from_configs(cls, configs: Mapping[str, Any]) -> FailureRateConfig:
        """Read ``producer.circuit.breaker.*`` keys; other keys are left to their owners.

        Values may be ints/bools or their string forms (properties files). Unknown keys
        under the prefix raise ConfigError with close matches.
        """
        values: dict[str, Any] = {}
        for key, raw in configs.items():
            if not isinstance(key, str) or not key.startswith(CONFIG_PREFIX) or key in _PRODUCER_OWNED_KEYS:
                continue
            suffix = key[len(CONFIG_PREFIX) :]
            spec = _KEYS.get(suffix)
            if spec is None:
                known = [CONFIG_PREFIX + k for k in (*_KEYS, "class", "keyed.reroute")]
                import difflib  # only on this error path: it is slow to import

                close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise ConfigError(
                    f"{key} is not a FailureRateCircuitBreaker config; known keys: {', '.join(known)}{hint}"
                )
            values[spec.field] = _parse_bool(key, raw) if spec.kind is bool else _parse_int(key, raw, spec)
        return cls(**values)


def _parse_int(key: str, raw: object, spec: _Key) -> int:
    allowed = f"an integer in [{spec.minimum}, {spec.maximum}]"
    if isinstance(raw, bool):
        raise ConfigError(f"{key} must be {allowed}, got {raw!r}")
    if isinstance(raw, int):
        value = raw
    elif isinstance(raw, str):
        try:
            value = int(raw.strip())
        except ValueError:
            raise ConfigError(f"{key} must be {allowed}, got {raw!r}")
    else:
        raise ConfigError(f"{key} must be {allowed}, got {type(raw).__name__} {raw!r}")
    if not spec.minimum <= value <= spec.maximum:
        raise ConfigError(f"{key} must be {allowed}, got {value}")
    return value


def _parse_bool(key: str, raw: object) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.strip().lower() in ("true", "false"):
        return raw.strip().lower() == "true"
    raise ConfigError(f"{key} must be a boolean (true or false), got {raw!r}")


# ---------------------------------------------------------------- default policy


class FailureRateCircuitBreaker:
    """The default breaker: mute a partition whose recent failure rate is too high.

    KIP-693, *Implementation of the default rate based circuit breaker*:

    * CLOSED → OPEN when the sliding window (``window.ms``) holds at least
      ``trigger.message.count`` records and at least ``trigger.failure.perc`` percent
      of them failed. Records are weighted by the batch's record count.
    * OPEN → HALF_OPEN after ``mute.retry.interval``: the manager grants one probe batch.
    * HALF_OPEN → CLOSED when the probe succeeds (window reset), → OPEN with a fresh
      interval when it fails.
    * With ``enable.mute.inflight.full`` and ``max.in.flight.requests.per.connection=1``,
      a node's partitions are muted while its in-flight window is full.

    Completions of batches sent before the mute (while OPEN, no probe out) do not move
    the state. ``PartitionMutedError`` completions are the breaker's own doing and are
    not counted.

    A batch whose leader never answered (its request timed out, or the connection
    was lost with it in flight: ``context.unanswered_since_ms``) also makes the
    window forget the successes it holds. They describe the leader before it went
    silent; left in, hours of healthy traffic would outvote a leader that has
    stopped answering, and the partition would be muted only once they aged out of
    ``window.ms``, long after the shared buffer had filled. So a leader that stops
    answering is muted at its first request timeout when that request carried
    ``trigger.message.count`` records, and otherwise as soon as its retries have
    failed that many (still at ``trigger.failure.perc`` of what came since). The
    silence is the leader's, not one partition's: once one of its partitions is
    muted for it, its other partitions whose requests went unanswered too, and its
    other partitions of the same topic, are muted with it (reason ``leader-silent``),
    however few records they carried. A timeout the Sender noticed late (this process
    was not running) does not count as silence.
    """

    WINDOW_BUCKETS: Final = 10

    def __init__(self, config: FailureRateConfig | None = None) -> None:
        self._config = config or FailureRateConfig()
        self._manager: CircuitBreakManager | None = None
        self._windows: dict[TopicPartition, SlidingWindow] = {}
        self._congested_nodes: frozenset[int] = frozenset()
        # Per partition: when its window last forgot its successes, and when the first request
        # its leader never answered was sent (cleared by a success, consumed by the mute).
        self._forgot_at: dict[TopicPartition, int] = {}
        self._first_symptom: dict[TopicPartition, int] = {}

    @property
    def config(self) -> FailureRateConfig:
        return self._config

    def configure(self, configs: Mapping[str, Any]) -> None:
        self._config = FailureRateConfig.from_configs(configs)
        self._windows.clear()
        self._forgot_at.clear()
        self._first_symptom.clear()

    def set_circuit_break_manager(self, manager: CircuitBreakManager) -> None:
        self._manager = manager

    def on_send(self, context: ProducerStatusContext) -> bool:
        """Refresh node mutes against the cluster, then mute/unmute congested nodes."""
        manager = self._require_manager()
        manager.refresh(context.now_ms)
        cfg = self._config
        limit = context.max_in_flight_requests_per_connection
        if cfg.enable_mute_inflight_full and limit == 1:
            full = frozenset(node for node, count in context.in_flight_requests.items() if count >= limit)
        else:
            full = frozenset()
        if full == self._congested_nodes:
            return False
        for node in sorted(full - self._congested_nodes):
            manager.mute_node(node, reason=REASON_IN_FLIGHT_FULL, now_ms=context.now_ms)
        for node in sorted(self._congested_nodes - full):
            manager.unmute_node(node, reason=REASON_IN_FLIGHT_DRAINED, now_ms=context.now_ms)
        self._congested_nodes = full
        return True

    def on_complete(
        self,
        context: ProducerStatusContext,
        topic_partition: TopicPartition,
        exception: BaseException | None,
        record_count: int,
    ) -> bool:
        """Count the batch's records and move the partition's state if a threshold is crossed."""
        if record_count < 0:
            raise ValueError(f"record_count must be >= 0, got {record_count}")
        manager = self._require_manager()
        if isinstance(exception, PartitionMutedError):
            return False
        failed = exception is not None
        now = context.now_ms
        tp = topic_partition
        if manager.probe_in_flight(tp):
            if failed:
                manager.mute(
                    tp,
                    retry_after_ms=self._config.mute_retry_interval_ms,
                    failure_rate=100.0,
                    reason=REASON_PROBE_FAILED,
                    now_ms=now,
                )
            else:
                self._windows.pop(tp, None)
                self._forgot_at.pop(tp, None)
                self._first_symptom.pop(tp, None)
                manager.unmute(tp, reason=REASON_PROBE_SUCCEEDED, now_ms=now)
            return True
        if manager.is_partition_muted(tp):
            return False
        window = self._windows.get(tp)
        if window is None:
            window = self._windows[tp] = SlidingWindow(self._config.window_ms, self.WINDOW_BUCKETS)
        if failed:
            silent_since = context.unanswered_since_ms
            if silent_since is not None:
                if silent_since > self._forgot_at.get(tp, -1):
                    # Sent after the window last forgot: what it counted since then predates the
                    # silence (or answers requests sent before it). Several batches of one lost
                    # request forget once, so their failures add up.
                    window.forget_successes()
                    self._forgot_at[tp] = now
                first = self._first_symptom.get(tp)
                if first is None or silent_since < first:
                    self._first_symptom[tp] = silent_since
            window.record(now, 0, record_count)
        else:
            self._first_symptom.pop(tp, None)
            window.record(now, record_count, 0)
        successes, failures = window.counts(now)
        total = successes + failures
        cfg = self._config
        if total < cfg.trigger_message_count or failures * 100 < cfg.trigger_failure_perc * total:
            if failed and context.unanswered_since_ms is not None:
                # Below the count on its own, but its leader has gone silent for a partition that
                # reached it: the silence is the leader's, so all its partitions that met it go.
                leader = manager.leader_of(tp)
                if manager.silent_mute_of_node(leader) is not None:
                    return self._mute_silent(manager, tp, now)
            return False
        del self._windows[tp]
        self._forgot_at.pop(tp, None)
        first = self._first_symptom.pop(tp, None)
        changed = manager.mute(
            tp,
            retry_after_ms=cfg.mute_retry_interval_ms,
            failure_rate=100.0 * failures / total,
            reason=REASON_FAILURE_RATE,
            now_ms=now,
            first_symptom_ms=first,
        )
        if first is not None:
            # The silence is the leader's: its partitions that met it too (below the count so far),
            # and its other partitions of this topic, whose batches waited behind the full in-flight
            # window and were never sent. Left open, those would keep taking keyless records that
            # only a request timeout after the next reconnect could divert, and a leader slower than
            # request.timeout.ms never completes that reconnect's ApiVersions.
            leader = manager.leader_of(tp)
            others = [o for o in self._first_symptom if o != tp and manager.leader_of(o) == leader]
            others += [o for o in manager.partitions_led_by(tp.topic, leader) if o != tp and o not in others]
            for other in others:
                if not manager.is_partition_muted(other):
                    self._mute_silent(manager, other, now)
        return changed

    def _mute_silent(self, manager: CircuitBreakManager, tp: TopicPartition, now: int) -> bool:
        self._windows.pop(tp, None)
        self._forgot_at.pop(tp, None)
        return manager.mute(
            tp,
            retry_after_ms=self._config.mute_retry_interval_ms,
            failure_rate=100.0,
            reason=REASON_LEADER_SILENT,
            now_ms=now,
            first_symptom_ms=self._first_symptom.pop(tp, None),
        )

    def failure_rate(self, tp: TopicPartition, now_ms: int) -> float | None:
        """The partition's failure percentage in the current window, None with no records."""
        window = self._windows.get(tp)
        if window is None:
            return None
        successes, failures = window.counts(now_ms)
        total = successes + failures
        return None if total == 0 else 100.0 * failures / total

    def record_counts(self, tp: TopicPartition, now_ms: int) -> tuple[int, int]:
        """(successes, failures) in the partition's current window."""
        window = self._windows.get(tp)
        return (0, 0) if window is None else window.counts(now_ms)

    def close(self) -> None:
        """Lift the node mutes this breaker placed and forget the windows."""
        manager = self._manager
        if manager is not None:
            for node in sorted(self._congested_nodes):
                manager.unmute_node(node, reason=REASON_CLOSED)
        self._congested_nodes = frozenset()
        self._windows.clear()
        self._forgot_at.clear()
        self._first_symptom.clear()
        self._manager = None

    def _require_manager(self) -> CircuitBreakManager:
        if self._manager is None:
            raise IllegalStateError("set_circuit_break_manager() must be called before the breaker is used")
        return self._manager


# ---------------------------------------------------------------- producer metrics


def register_circuit_breaker_metrics(metrics: Metrics, manager: CircuitBreakManager) -> StateListener:
    """Register the breaker's metrics in the producer's registry and feed them from a listener.

    ``circuit-breaker-muted-partitions`` is a gauge over the manager's muted set.
    ``circuit-breaker-mute-total`` / ``-unmute-total`` read the manager's counters,
    which change under the same lock as the muted set, so a reader never sees a
    muted partition whose mute is not yet counted (listeners run after the lock is
    released, so a listener-fed total could lag the gauge). The ``-rate`` metrics
    come from the listener's events. Returns the listener (to remove it later).
    """
    metrics.add_gauge(
        MUTED_PARTITIONS_METRIC,
        lambda: float(len(manager.muted_partitions())),
        "Partitions currently muted by the circuit breaker (OPEN or HALF_OPEN).",
    )
    metrics.add_gauge(
        MUTE_TOTAL_METRIC, lambda: float(manager.mute_total), "Partitions muted by the circuit breaker in total."
    )
    metrics.add_gauge(
        UNMUTE_TOTAL_METRIC, lambda: float(manager.unmute_total), "Partitions unmuted by the circuit breaker in total."
    )
    mutes = metrics.sensor("circuit-breaker-mutes")
    mutes.add(MUTE_RATE_METRIC, Rate(WindowedCount()), "Partitions muted by the circuit breaker per second.")
    unmutes = metrics.sensor("circuit-breaker-unmutes")
    unmutes.add(UNMUTE_RATE_METRIC, Rate(WindowedCount()), "Partitions unmuted by the circuit breaker per second.")
    time_to_mute = metrics.sensor(TIME_TO_MUTE_SENSOR)
    time_to_mute.add(
        TIME_TO_MUTE_SENSOR + "-avg",
        Avg(),
        "Average ms from sending a partition's first request its leader never answered to muting the partition.",
    )
    time_to_mute.add(
        TIME_TO_MUTE_SENSOR + "-max",
        Max(),
        "Longest ms from sending a partition's first request its leader never answered to muting the partition.",
    )
    moved = metrics.sensor(MOVED_RECORDS_SENSOR)
    moved.add(
        MOVED_RECORDS_TOTAL_METRIC,
        CumulativeSum(),
        "Keyless records of never-sent batches moved off muted partitions to open ones of their topic.",
    )
    moved.add(MOVED_RECORDS_RATE_METRIC, Rate(WindowedSum()), "Keyless records moved off muted partitions per second.")

    def on_change(change: CircuitStateChange) -> None:
        if change.is_mute:
            mutes.record(1.0)
            delay = change.time_to_mute_ms
            if delay is not None:
                time_to_mute.record(float(delay))
        elif change.is_unmute:
            unmutes.record(1.0)

    manager.add_listener(on_change)
    return on_change


# ---------------------------------------------------------------- producer.circuit.breaker.class

_ALIASES: Final[dict[str, type[FailureRateCircuitBreaker]]] = {
    "failure_rate": FailureRateCircuitBreaker,
    "failure-rate": FailureRateCircuitBreaker,
    "FailureRateCircuitBreaker": FailureRateCircuitBreaker,
}
_OFF: Final = frozenset({"", "none", "off"})
_ALLOWED: Final = (
    "None/'none' (off), 'failure_rate' or 'FailureRateCircuitBreaker', a dotted path 'pkg.mod:Class' "
    "or 'pkg.mod.Class', a class, or an instance implementing PartitionCircuitBreaker"
)


def resolve_circuit_breaker(
    spec: object, configs: Mapping[str, Any] | None = None
) -> PartitionCircuitBreaker | None:
    """Build and configure the breaker named by ``producer.circuit.breaker.class``.

    Returns None when the breaker is off. A class is instantiated without arguments;
    an instance is used as is. Either way ``configure(configs)`` is called.
    """
    if spec is None:
        return None
    target: object = spec
    if isinstance(spec, str):
        name = spec.strip()
        if name.lower() in _OFF:
            return None
        target = _ALIASES.get(name) or _import(name)
    if isinstance(target, type):
        try:
            target = target()
        except Exception as exc:
            raise ConfigError(f"{CLASS_CONFIG}: cannot instantiate {spec!r} without arguments: {exc}")
    if not isinstance(target, PartitionCircuitBreaker):
        raise ConfigError(f"{CLASS_CONFIG} must be {_ALLOWED}; got {spec!r}")
    target.configure(configs or {})
    return target


def _import(name: str) -> object:
    if ":" in name:
        module_name, _, attr_path = name.partition(":")
    elif "." in name:
        module_name, _, attr_path = name.rpartition(".")
    else:
        import difflib

        close = difflib.get_close_matches(name, list(_ALIASES), n=2, cutoff=0.6)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        raise ConfigError(f"{CLASS_CONFIG} must be {_ALLOWED}; got {name!r}{hint}")
    if not module_name or not attr_path:
        raise ConfigError(f"{CLASS_CONFIG} must be {_ALLOWED}; got {name!r}")
    try:
        obj: object = importlib.import_module(module_name)
        for part in attr_path.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{CLASS_CONFIG}: cannot import {name!r} ({exc}); expected {_ALLOWED}")
    return obj
