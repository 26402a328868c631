"""The default policy (KIP-693's FailureRateCircuitBreaker) and its settings."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Final

from kproducer.circuit_breaker.manager import CircuitBreakManager
from kproducer.circuit_breaker.policy import (
    CLASS_CONFIG,
    CONFIG_PREFIX,
    KEYED_REROUTE_CONFIG,
    PRODUCER_OWNED_KEYS,
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
    REASON_PROBE_FAILED,
    REASON_PROBE_SUCCEEDED,
)
from kproducer.config import CIRCUIT_BREAKER_KEYS, ConfigKey, coerce
from kproducer.errors import ConfigError, IllegalStateError, PartitionMutedError
from kproducer.structs import TopicPartition

#: The settings' rows in the config table (type, default, range, doc), by key.
_ROWS: Final[dict[str, ConfigKey]] = {k.name: k for k in CIRCUIT_BREAKER_KEYS}


def _setting(name: str) -> Any:
    """A FailureRateConfig field read from ``producer.circuit.breaker.<name>``, with that row's default."""
    key = CONFIG_PREFIX + name
    return field(default=_ROWS[key].default, metadata={"key": key})


@dataclass(frozen=True, slots=True)
class FailureRateConfig:
    """The default breaker's settings (KIP-693, *Proposed Changes*), validated."""

    trigger_message_count: int = _setting("trigger.message.count")
    trigger_failure_perc: int = _setting("trigger.failure.perc")
    window_ms: int = _setting("window.ms")
    mute_retry_interval_ms: int = _setting("mute.retry.interval")
    enable_mute_inflight_full: bool = _setting("enable.mute.inflight.full")

    @classmethod
    def from_configs(cls, configs: Mapping[str, Any]) -> FailureRateConfig:
        """Read ``producer.circuit.breaker.*`` keys; other keys are left to their owners.

        Values may be ints/bools or their string forms (properties files), checked against
        the keys' rows in the config table. Unknown keys under the prefix raise ConfigError
        with close matches.
        """
        values: dict[str, Any] = {}
        for key, raw in configs.items():
            if not isinstance(key, str) or not key.startswith(CONFIG_PREFIX) or key in PRODUCER_OWNED_KEYS:
                continue
            row = _ROWS.get(key)
            if row is None:
                known = [k.name for k in CIRCUIT_BREAKER_KEYS] + [CLASS_CONFIG, KEYED_REROUTE_CONFIG]
                import difflib  # only on this error path: it is slow to import

                close = difflib.get_close_matches(key, known, n=3, cutoff=0.6)
                hint = f"; did you mean {', '.join(close)}?" if close else ""
                raise ConfigError(
                    f"{key} is not a FailureRateCircuitBreaker config; known keys: {', '.join(known)}{hint}"
                )
            values[_FIELDS[key]] = coerce(row, raw)
        return cls(**values)


#: Which field each key fills.
_FIELDS: Final[dict[str, str]] = {f.metadata["key"]: f.name for f in fields(FailureRateConfig)}


# ---------------------------------------------------------------- the policy


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
        """Refresh node mutes against the cluster, mute the partitions of leaders whose connection
        stalled, then mute/unmute congested nodes."""
        manager = self._require_manager()
        manager.refresh(context.now_ms)
        stalled_muted = self._mute_stalled(manager, context) if context.stalled_connections else False
        return self._mute_congested(manager, context) or stalled_muted

    def _mute_stalled(self, manager: CircuitBreakManager, context: ProducerStatusContext) -> bool:
        """Mute every partition still open to records whose leader's connection stalled.

        A leader that has not completed a connection for ``request.timeout.ms`` (slow or
        refusing from the first contact, or gone since) never gets a request in flight, so
        neither the failure rate nor the silence rule can see it; left open, its partitions
        would take keyless records until the shared buffer filled. Its partitions are muted
        like a silent leader's, with a probe after ``mute.retry.interval``. A probe that falls
        due while the connection is still stalled cannot be sent: the partition is muted
        again for another interval. Once a connection is ready the probe goes out, and its
        success closes the breaker.
        """
        changed = False
        routing_muted = manager.routing_muted
        for node, since in context.stalled_connections.items():
            for tp in manager.partitions_of_node(node):
                if tp in routing_muted:
                    continue
                self._first_symptom.pop(tp, None)
                changed |= self._mute_forgetting(manager, tp, context.now_ms, REASON_CONNECTION_STALLED, None, since)
        return changed

    def _mute_congested(self, manager: CircuitBreakManager, context: ProducerStatusContext) -> bool:
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
        return self._mute_forgetting(manager, tp, now, REASON_LEADER_SILENT, 100.0, self._first_symptom.pop(tp, None))

    def _mute_forgetting(
        self,
        manager: CircuitBreakManager,
        tp: TopicPartition,
        now: int,
        reason: str,
        failure_rate: float | None,
        first_symptom_ms: int | None,
    ) -> bool:
        """Mute ``tp`` until a probe after ``mute.retry.interval``, forgetting its window (a silent or
        unreachable leader's past successes must not outvote it when the probe's outcome comes)."""
        self._windows.pop(tp, None)
        self._forgot_at.pop(tp, None)
        return manager.mute(
            tp,
            retry_after_ms=self._config.mute_retry_interval_ms,
            failure_rate=failure_rate,
            reason=reason,
            now_ms=now,
            first_symptom_ms=first_symptom_ms,
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
