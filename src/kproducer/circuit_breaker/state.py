"""A partition's breaker state, the change events listeners receive, and the log line of each change."""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from kproducer.structs import TopicPartition

# The package's one logger: users filter on this name.
logger = logging.getLogger("kproducer.circuit_breaker")

# Reasons carried by CircuitStateChange; node congestion ones are logged at DEBUG
# because with max.in.flight=1 they flip on every request.
REASON_MANUAL: Final = "manual"
REASON_FAILURE_RATE: Final = "failure-rate"
REASON_LEADER_SILENT: Final = "leader-silent"
REASON_CONNECTION_STALLED: Final = "connection-stalled"
REASON_PROBE: Final = "probe"
REASON_PROBE_SUCCEEDED: Final = "probe-succeeded"
REASON_PROBE_FAILED: Final = "probe-failed"
REASON_PROBE_CANCELLED: Final = "probe-cancelled"
REASON_IN_FLIGHT_FULL: Final = "in-flight-full"
REASON_IN_FLIGHT_DRAINED: Final = "in-flight-drained"
REASON_METADATA: Final = "metadata"
REASON_CLOSED: Final = "closed"
REASON_PROBE_DUE: Final = "probe-due"
_QUIET_REASONS: Final = frozenset({REASON_IN_FLIGHT_FULL, REASON_IN_FLIGHT_DRAINED})


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
        """On a mute that followed unanswered requests: from the first of them being sent to the mute
        (for a stalled connection: from its first failed attempt, or the start of its setup)."""
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


def log_change(change: CircuitStateChange) -> None:
    """WARNING for a partition's state change, DEBUG for node congestion (it flips on every request)."""
    rate = "n/a" if change.failure_rate is None else f"{change.failure_rate:.1f}%"
    level = logging.DEBUG if change.reason in _QUIET_REASONS else logging.WARNING
    delay = change.time_to_mute_ms
    symptom = (
        "its connection stopped or never came up"
        if change.reason == REASON_CONNECTION_STALLED
        else "its first unanswered request was sent"
    )
    logger.log(
        level,
        "circuit breaker: partition %s (leader %s) %s -> %s (%s, failure rate %s%s)",
        change.topic_partition,
        change.leader,
        change.previous.value,
        change.current.value,
        change.reason,
        rate,
        "" if delay is None else f", {delay} ms after {symptom}",
    )
