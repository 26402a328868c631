"""The breaker's metrics in the producer's registry, fed by a state-change listener."""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from kproducer.circuit_breaker.state import CircuitStateChange, StateListener
from kproducer.metrics import Avg, CumulativeSum, Max, Metrics, Rate, WindowedCount, WindowedSum

if TYPE_CHECKING:
    from kproducer.circuit_breaker.manager import CircuitBreakManager

MUTED_PARTITIONS_METRIC: Final = "circuit-breaker-muted-partitions"
MUTE_RATE_METRIC: Final = "circuit-breaker-mute-rate"
UNMUTE_RATE_METRIC: Final = "circuit-breaker-unmute-rate"
MUTE_TOTAL_METRIC: Final = "circuit-breaker-mute-total"
UNMUTE_TOTAL_METRIC: Final = "circuit-breaker-unmute-total"
TIME_TO_MUTE_SENSOR: Final = "circuit-breaker-time-to-mute"
MOVED_RECORDS_SENSOR: Final = "circuit-breaker-moved-records"
MOVED_RECORDS_TOTAL_METRIC: Final = "circuit-breaker-moved-records-total"
MOVED_RECORDS_RATE_METRIC: Final = "circuit-breaker-moved-records-rate"


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
