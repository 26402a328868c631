"""Partition circuit breaker (KIP-693): stop feeding partitions that keep failing.

KIP-693, *Motivation*: every partition shares one BufferPool, so a few slow or
failing partitions fill the buffer and starve the healthy ones. The breaker
"mutes" such partitions on the client side: the partitioner stops routing
records to them, ``send()`` can refuse an explicit muted partition with the
retriable :class:`~kproducer.errors.PartitionMutedError`, and the accumulator
stops draining them, until a probe batch shows the leader is healthy again.

The pieces, as in KIP-693's *Public Interfaces*, one module each:

* ``policy``: :class:`ProducerStatusContext`, the Sender's congestion snapshot handed
  to the breaker on every loop and on every completed batch, and
  :class:`PartitionCircuitBreaker`, the policy protocol
  (``producer.circuit.breaker.class``). Policies are pure: they take time from the
  context, never from ``time``.
* ``manager``: :class:`CircuitBreakManager`, the mute state the policy writes and the
  hot path reads. ``is_muted`` is one frozenset lookup with no lock: writers build a
  new frozenset and swap the reference.
* ``cluster_view``: :class:`CircuitBreakerClusterView`, the Cluster the partitioner
  sees, with muted partitions filtered out.
* ``state``: :class:`BreakerState`, the :class:`CircuitStateChange` events listeners
  receive, and the log line of each change.
* ``failure_rate``: :class:`FailureRateCircuitBreaker`, the default policy (KIP-693's
  FailureRateCircuitBreaker), a per-partition ``sliding_window`` over records with
  Closed → Open → Half-open → Closed states, and its settings.
* ``metrics``: the breaker's metrics in the producer's registry.
* ``loader``: :func:`resolve_circuit_breaker`, from the ``producer.circuit.breaker.class``
  value to a configured breaker.

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

from kproducer.circuit_breaker.cluster_view import CircuitBreakerClusterView
from kproducer.circuit_breaker.failure_rate import FailureRateCircuitBreaker, FailureRateConfig
from kproducer.circuit_breaker.loader import resolve_circuit_breaker
from kproducer.circuit_breaker.manager import CircuitBreakManager
from kproducer.circuit_breaker.metrics import (
    MOVED_RECORDS_RATE_METRIC,
    MOVED_RECORDS_SENSOR,
    MOVED_RECORDS_TOTAL_METRIC,
    MUTE_RATE_METRIC,
    MUTE_TOTAL_METRIC,
    MUTED_PARTITIONS_METRIC,
    TIME_TO_MUTE_SENSOR,
    UNMUTE_RATE_METRIC,
    UNMUTE_TOTAL_METRIC,
    register_circuit_breaker_metrics,
)
from kproducer.circuit_breaker.policy import (
    CLASS_CONFIG,
    CONFIG_PREFIX,
    KEYED_REROUTE_CONFIG,
    PartitionCircuitBreaker,
    ProducerStatusContext,
)
from kproducer.circuit_breaker.sliding_window import SlidingWindow
from kproducer.circuit_breaker.state import (
    REASON_CLOSED,
    REASON_CONNECTION_STALLED,
    REASON_FAILURE_RATE,
    REASON_IN_FLIGHT_DRAINED,
    REASON_IN_FLIGHT_FULL,
    REASON_LEADER_SILENT,
    REASON_MANUAL,
    REASON_METADATA,
    REASON_PROBE,
    REASON_PROBE_CANCELLED,
    REASON_PROBE_DUE,
    REASON_PROBE_FAILED,
    REASON_PROBE_SUCCEEDED,
    BreakerState,
    CircuitStateChange,
    StateListener,
)

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
    "MOVED_RECORDS_RATE_METRIC",
    "MOVED_RECORDS_SENSOR",
    "MOVED_RECORDS_TOTAL_METRIC",
    "TIME_TO_MUTE_SENSOR",
    "REASON_CLOSED",
    "REASON_FAILURE_RATE",
    "REASON_IN_FLIGHT_DRAINED",
    "REASON_IN_FLIGHT_FULL",
    "REASON_LEADER_SILENT",
    "REASON_CONNECTION_STALLED",
    "REASON_MANUAL",
    "REASON_METADATA",
    "REASON_PROBE",
    "REASON_PROBE_CANCELLED",
    "REASON_PROBE_DUE",
    "REASON_PROBE_FAILED",
    "REASON_PROBE_SUCCEEDED",
]
