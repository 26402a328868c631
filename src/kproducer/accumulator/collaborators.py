"""What the accumulator needs from its collaborators: the partitioner, the transaction manager, the circuit breaker, memory.

Structural types (``typing.Protocol``), so that the accumulator and its tests
depend on the behaviour, not on ``kproducer.partitioner``,
``kproducer.transaction_manager`` or ``kproducer.circuit_breaker``.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from kproducer.metadata import Cluster
from kproducer.structs import TopicPartition

__all__ = [
    "CircuitBreakManagerLike",
    "CircuitBreakRoutingLike",
    "MemorySource",
    "StickyPartitioner",
    "TransactionManagerLike",
]


class StickyPartitioner(Protocol):
    """The per-topic built-in partitioner the accumulator drives (KIP-794; ``kproducer.partitioner.BuiltInPartitioner``)."""

    def peek_current_partition(self, cluster: Cluster) -> int: ...

    def update_partition_info(
        self, partition: int, appended_bytes: int, cluster: Cluster, enable_switch: bool = False
    ) -> None: ...

    def move_off(self, partition: int, cluster: Cluster) -> None: ...

    def uses_load_stats(self) -> bool: ...

    def update_partition_load_stats(
        self, queue_sizes: list[int] | None, partition_ids: list[int] | None, length: int
    ) -> None: ...


class TransactionManagerLike(Protocol):
    """What drain needs for idempotence (``kproducer.transaction_manager.TransactionManager``)."""

    def should_stop_draining(self) -> bool: ...

    def producer_id_and_epoch(self) -> tuple[int, int]: ...

    def next_sequence(self, tp: TopicPartition) -> int: ...

    def increment_sequence(self, tp: TopicPartition, increment: int) -> None: ...

    def first_in_flight_sequence(self, tp: TopicPartition) -> int: ...

    def retry_in_flight(self, tp: TopicPartition) -> bool: ...

    def may_drain_partition(self, tp: TopicPartition) -> bool: ...


class CircuitBreakManagerLike(Protocol):
    """Partition mutes decided by the circuit breaker (KIP-693): muted partitions are not drained but for probes."""

    def is_muted(self, tp: TopicPartition) -> bool: ...

    def allow_probe(self, tp: TopicPartition, now_ms: int | None = None) -> bool: ...

    def retry_at_ms(self, tp: TopicPartition) -> int | None: ...

    def probe_in_flight(self, tp: TopicPartition) -> bool: ...


@runtime_checkable
class CircuitBreakRoutingLike(Protocol):
    """A breaker manager that also steers the built-in partitioner away from muted partitions."""

    def may_send(self, tp: TopicPartition) -> bool: ...

    def cluster_view(self, cluster: Cluster | None = None) -> Cluster: ...

    def partitions_to_vacate(self) -> frozenset[TopicPartition]: ...


class MemorySource(Protocol):
    """Where a new batch's buffer comes from: the BufferPool, or memory already charged to it."""

    def allocate(self, size: int, max_time_to_block_ms: int) -> bytearray: ...

    def deallocate(self, buffer: bytearray, size: int | None = None) -> None: ...
