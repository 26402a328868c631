"""What a partition circuit breaker is: the policy protocol and the snapshot it decides on.

KIP-693, *Public Interfaces*: ``producer.circuit.breaker.class`` names a
:class:`PartitionCircuitBreaker`; the Sender hands it a
:class:`ProducerStatusContext` on every loop and on every completed batch.
Every other ``producer.circuit.breaker.*`` key is the policy's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from kproducer.structs import TopicPartition

if TYPE_CHECKING:
    from kproducer.circuit_breaker.manager import CircuitBreakManager

CONFIG_PREFIX: Final = "producer.circuit.breaker."
CLASS_CONFIG: Final = CONFIG_PREFIX + "class"
#: Read by the producer itself (keyed records may leave a muted partition), not by the policy.
KEYED_REROUTE_CONFIG: Final = CONFIG_PREFIX + "keyed.reroute"
PRODUCER_OWNED_KEYS: Final = frozenset({CLASS_CONFIG, KEYED_REROUTE_CONFIG})


@dataclass(frozen=True, slots=True)
class ProducerStatusContext:
    """The Sender's congestion snapshot (KIP-693, ``ProducerStatusContext``).

    ``in_flight_requests`` is per broker node id; ``in_flight_batches`` per partition.
    The breaker takes its time from ``now_ms`` (never from ``time``).

    ``unanswered_since_ms`` is set only on the completion of a batch whose leader
    never answered: its request timed out (``request.timeout.ms``) or its
    connection was lost while the request was in flight. It is when that request
    was sent, so the leader has been silent since then at the latest.

    ``stalled_connections`` (on ``on_send`` only) holds the nodes whose connection has
    not been ready for ``request.timeout.ms``: failing, or still in its setup (connect,
    ApiVersions, SASL), with since when. Such a leader never gets a request in flight,
    so it shows no other symptom.
    """

    now_ms: int
    in_flight_requests: Mapping[int, int] = field(default_factory=dict)
    in_flight_batches: Mapping[TopicPartition, int] = field(default_factory=dict)
    max_in_flight_requests_per_connection: int = 5
    unanswered_since_ms: int | None = None
    stalled_connections: Mapping[int, int] = field(default_factory=dict)


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
