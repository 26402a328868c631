"""Partition choice: custom partitioners, round-robin, librdkafka's policies, and the KIP-794 built-in.

Keyed records go where Kafka's murmur2 key hash puts them
(:func:`kproducer.murmur2.partition_for_key`, re-exported here with ``murmur2``
and ``to_positive``). The built-in sticky partitioner keeps keyless records on
one partition until ``batch.size`` bytes went there, then moves on, preferring
partitions whose leaders have shorter queues (adaptive partitioning).
librdkafka's ``partitioner`` policies (``consistent_random``, ``murmur2_random``...)
are built in too, by name (:mod:`kproducer.librdkafka_partitioners`).
"""

from __future__ import annotations

import bisect
import itertools
import logging
import random
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from kproducer.common.loader import load_object
from kproducer.errors import ConfigError, KafkaError, no_partitions_error
from kproducer.librdkafka_partitioners import LIBRDKAFKA_PARTITIONERS
from kproducer.metadata import Cluster
from kproducer.murmur2 import murmur2, partition_for_key, to_positive
from kproducer.record.c_extension import c
from kproducer.record.native import new_lock

logger = logging.getLogger(__name__)

__all__ = [
    "murmur2",
    "to_positive",
    "partition_for_key",
    "Partitioner",
    "RoundRobinPartitioner",
    "CallablePartitioner",
    "BuiltInPartitioner",
    "PARTITIONER_NAMES",
    "resolve_partitioner",
]


@runtime_checkable
class Partitioner(Protocol):
    """Chooses a partition for a record, like Java's ``Partitioner``; may also define ``close()``."""

    def partition(
        self,
        topic: str,
        key: Any,
        key_bytes: bytes | None,
        value: Any,
        value_bytes: bytes | None,
        cluster: Cluster,
    ) -> int: ...


def _spread(cluster: Cluster, topic: str, n: int) -> int:
    """Partition ``n`` modulo the partitions with a leader, or modulo all of them when none has one."""
    available = cluster.available_partitions_for_topic(topic)
    if available:
        return available[n % len(available)].partition
    count = cluster.partition_count(topic)
    if not count:
        raise no_partitions_error(topic)
    return n % count


class RoundRobinPartitioner:
    """Java's RoundRobinPartitioner: a per-topic counter over available partitions (all when none is)."""

    def __init__(self) -> None:
        self._counters: dict[str, itertools.count[int]] = {}

    def partition(
        self,
        topic: str,
        key: Any,
        key_bytes: bytes | None,
        value: Any,
        value_bytes: bytes | None,
        cluster: Cluster,
    ) -> int:
        counter = self._counters.get(topic)
        if counter is None:
            counter = self._counters.setdefault(topic, itertools.count())
        n = next(counter) & 0x7FFFFFFF  # itertools.count's next() is atomic under the GIL
        return _spread(cluster, topic, n)

    def close(self) -> None:
        self._counters.clear()


class CallablePartitioner:
    """Adapts ``f(topic, key_bytes, num_partitions) -> int`` to the Partitioner protocol."""

    def __init__(self, func: Callable[[str, bytes | None, int], int]) -> None:
        self.func = func

    def partition(
        self,
        topic: str,
        key: Any,
        key_bytes: bytes | None,
        value: Any,
        value_bytes: bytes | None,
        cluster: Cluster,
    ) -> int:
        count = cluster.partition_count(topic)
        if not count:
            raise no_partitions_error(topic)
        result = self.func(topic, key_bytes, count)
        if type(result) is not int or not 0 <= result < count:
            raise KafkaError(
                f"partitioner.class callable {getattr(self.func, '__qualname__', self.func)!r} returned "
                f"{result!r} for topic {topic!r}; it must return an int in 0..{count - 1}",
                topic=topic,
            )
        return result

    def close(self) -> None:
        """A plain function holds nothing to release."""

    def __repr__(self) -> str:
        return f"CallablePartitioner({self.func!r})"


# ----------------------------------------------------------------------------- resolution

_BUILT_IN_NAMES = frozenset(
    {
        "default",
        "builtin",
        "built_in",
        "sticky",
        "org.apache.kafka.clients.producer.internals.DefaultPartitioner",
    }
)
_ROUND_ROBIN_NAMES = frozenset(
    {"round_robin", "roundrobin", "round-robin", "org.apache.kafka.clients.producer.RoundRobinPartitioner"}
)
PARTITIONER_NAMES: tuple[str, ...] = (
    "default",
    "round_robin",
    "org.apache.kafka.clients.producer.RoundRobinPartitioner",
    *LIBRDKAFKA_PARTITIONERS,
)

_ALLOWED = (
    "partitioner.class must be None (the built-in sticky/murmur2 partitioner), 'default', 'round_robin' or "
    "'org.apache.kafka.clients.producer.RoundRobinPartitioner', one of librdkafka's "
    f"{', '.join(repr(n) for n in LIBRDKAFKA_PARTITIONERS)}, a dotted path 'pkg.mod:Class' or "
    "'pkg.mod.Class', a Partitioner class or instance, or a callable f(topic, key_bytes, num_partitions) -> int"
)


def _load_dotted(spec: str) -> Any:
    return load_object(spec, "partitioner.class", _ALLOWED)


def resolve_partitioner(spec: Any) -> Partitioner | None:
    """Turn ``partitioner.class`` into a Partitioner; None means the built-in one (accumulator + murmur2)."""
    if spec is None:
        return None
    if isinstance(spec, str):
        name = spec.strip()
        if name.lower() in _BUILT_IN_NAMES or name in _BUILT_IN_NAMES:
            return None
        if name.lower() in _ROUND_ROBIN_NAMES or name in _ROUND_ROBIN_NAMES:
            return RoundRobinPartitioner()
        librdkafka = LIBRDKAFKA_PARTITIONERS.get(name.lower())
        if librdkafka is not None:
            return librdkafka()
        if "." not in name and ":" not in name:
            raise ConfigError(f"partitioner.class: unknown partitioner {spec!r}; {_ALLOWED}")
        spec = _load_dotted(name)
    if isinstance(spec, type):
        if not callable(getattr(spec, "partition", None)):
            raise ConfigError(f"partitioner.class: class {spec.__name__} has no partition(); {_ALLOWED}")
        try:
            spec = spec()
        except Exception as e:
            raise ConfigError(f"partitioner.class: cannot instantiate {spec.__name__} with no arguments: {e}")
    if callable(getattr(spec, "partition", None)):
        return cast(Partitioner, spec)
    if callable(spec):
        return CallablePartitioner(spec)
    raise ConfigError(f"partitioner.class: {spec!r} (type {type(spec).__name__}) is not usable; {_ALLOWED}")


# ----------------------------------------------------------------------------- KIP-794 built-in


class PyStickyPartitionInfo:
    """The current sticky partition and the bytes produced to it since it was chosen (Java's
    ``BuiltInPartitioner.StickyPartitionInfo``); the Python twin of ``kproducer._speedups.StickyPartitionInfo``,
    whose C function counts a record's bytes for the send lane."""

    __slots__ = ("partition", "produced_bytes")

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.produced_bytes = 0


class PyBuiltInPartitionerCore:
    """The partitioner's lock and current :class:`StickyPartitionInfo`; the Python twin of
    ``kproducer._speedups.BuiltInPartitionerCore``, whose C functions read the sticky partition and
    count a record's bytes for the send lane. :class:`BuiltInPartitioner` builds on the one that runs."""

    __slots__ = ("_lock", "_sticky")


if TYPE_CHECKING:
    StickyPartitionInfo = PyStickyPartitionInfo
    BuiltInPartitionerCore = PyBuiltInPartitionerCore
else:
    StickyPartitionInfo = c.StickyPartitionInfo if c is not None else PyStickyPartitionInfo
    BuiltInPartitionerCore = c.BuiltInPartitionerCore if c is not None else PyBuiltInPartitionerCore


class _PartitionLoadStats:
    """Cumulative frequency table of inverted queue sizes over the partitions with available leaders."""

    __slots__ = ("cumulative_frequency_table", "partition_ids", "length")

    def __init__(self, cumulative_frequency_table: list[int], partition_ids: list[int], length: int) -> None:
        self.cumulative_frequency_table = cumulative_frequency_table
        self.partition_ids = partition_ids
        self.length = length


_SHARED_RNG = random.Random()


class BuiltInPartitioner(BuiltInPartitionerCore):
    """Java's BuiltInPartitioner for one topic: sticky partition, switched every ``sticky_batch_size`` bytes.

    The next partition is drawn at random, weighted towards partitions whose
    leaders have shorter queues when load stats are given (adaptive
    partitioning), else uniformly over partitions with an available leader.
    Reading the current partition takes no lock; counting bytes and switching do.
    ``_lock`` and ``_sticky`` are :class:`BuiltInPartitionerCore`'s fields.
    """

    __slots__ = ("topic", "sticky_batch_size", "_rng", "_load_stats", "__dict__")

    def __init__(self, topic: str, sticky_batch_size: int, rng: random.Random | None = None) -> None:
        if sticky_batch_size < 1:
            raise ValueError(f"sticky_batch_size must be >= 1, got {sticky_batch_size}")
        self.topic = topic
        self.sticky_batch_size = sticky_batch_size
        # One generator for all topics: a Random per topic costs 2.5 KB and an os.urandom
        # call, for thousands of topics (getrandbits is atomic under the GIL).
        self._rng = rng if rng is not None else _SHARED_RNG
        self._lock = new_lock()
        self._sticky: StickyPartitionInfo | None = None
        self._load_stats: _PartitionLoadStats | None = None

    def peek_current_partition(self, cluster: Cluster) -> int:
        """The sticky partition now; chooses one if there is none yet."""
        info = self._sticky
        if info is not None:
            return info.partition
        with self._lock:
            info = self._sticky
            if info is None:
                info = self._sticky = StickyPartitionInfo(self._next_partition(cluster))
            return info.partition

    def uses_load_stats(self) -> bool:
        """Whether a keyless record has chosen a sticky partition here, so that the next choice reads the load stats.

        Until then the partitioner has never been consulted (every record of the topic carried a
        key or a partition), and the ready check need not count queue sizes for it. Once true it
        stays true. The read takes no lock: a pass that misses the first choice counts them on
        the next one.
        """
        return self._sticky is not None

    def sticky_state(self) -> tuple[int, int] | None:
        """(sticky partition, bytes counted to it since it was chosen), or None before the first choice."""
        with self._lock:
            info = self._sticky
            return None if info is None else (info.partition, info.produced_bytes)

    def update_partition_info(
        self, partition: int, appended_bytes: int, cluster: Cluster, enable_switch: bool = False
    ) -> None:
        """Count ``appended_bytes`` to the sticky partition; switch once it holds a batch's worth.

        Java's ``BuiltInPartitioner.updatePartitionInfo``: the switch comes at ``batch.size``
        bytes when ``enable_switch`` says every batch of the partition is full, and at twice
        ``batch.size`` regardless. Switching while the partition still has a batch with room
        would leave that batch to wait for its linger; holding on to twice the size bounds how
        long a partition whose batches keep room (keyed records sharing it) stays sticky.
        A call for a partition that is no longer the sticky one (another thread already
        switched) is ignored, as Java ignores a stale StickyPartitionInfo.
        """
        with self._lock:
            info = self._sticky
            if info is None or info.partition != partition:
                return
            info.produced_bytes += appended_bytes
            produced = info.produced_bytes
            if produced >= self.sticky_batch_size * 2:
                logger.debug(
                    "produced %d bytes to %s-%d, over twice the sticky batch size (switch enabled: %s)",
                    produced,
                    self.topic,
                    partition,
                    enable_switch,
                )
            if (produced >= self.sticky_batch_size and enable_switch) or produced >= self.sticky_batch_size * 2:
                self._sticky = StickyPartitionInfo(self._next_partition(cluster))

    def move_off(self, partition: int, cluster: Cluster) -> None:
        """Choose another sticky partition now, if ``partition`` is still the sticky one.

        For a sticky partition the circuit breaker (KIP-693) closed to new records: ``cluster``
        is the breaker's view, without the muted partitions.
        """
        with self._lock:
            info = self._sticky
            if info is not None and info.partition == partition:
                self._sticky = StickyPartitionInfo(self._next_partition(cluster))

    def update_partition_load_stats(
        self, queue_sizes: list[int] | None, partition_ids: list[int] | None, length: int
    ) -> None:
        """Replace the load stats; ``queue_sizes[i]`` batches are queued for ``partition_ids[i]``, i < length.

        Builds the cumulative frequency table of ``max_queue + 1 - size`` so that a
        shorter queue gets a larger share. None (or one partition, or all equal
        over every partition) means uniform choice over available partitions.
        """
        if queue_sizes is None or partition_ids is None:
            self._load_stats = None
            return
        if len(queue_sizes) != len(partition_ids):
            raise ValueError(
                f"queue_sizes ({len(queue_sizes)}) and partition_ids ({len(partition_ids)}) differ in length"
            )
        if length > len(queue_sizes) or length < 0:
            raise ValueError(f"length must be in 0..{len(queue_sizes)}, got {length}")
        if length < 1 or len(queue_sizes) < 2:
            self._load_stats = None
            return
        sizes = queue_sizes[:length]
        max_plus_1 = max(sizes) + 1
        if length == len(queue_sizes) and min(sizes) == max_plus_1 - 1:
            self._load_stats = None  # all equal over all partitions: uniform is the same and cheaper
            return
        table = list(itertools.accumulate(max_plus_1 - s for s in sizes))
        self._load_stats = _PartitionLoadStats(table, list(partition_ids[:length]), length)

    def _next_partition(self, cluster: Cluster) -> int:
        random_value = self._rng.getrandbits(31)
        stats = self._load_stats
        if stats is None:
            return _spread(cluster, self.topic, random_value)
        table = stats.cumulative_frequency_table
        weighted = random_value % table[stats.length - 1]
        # The first entry strictly greater than ``weighted``: entry i covers [table[i-1], table[i]).
        index = bisect.bisect_right(table, weighted, 0, stats.length)
        chosen = stats.partition_ids[index]
        # A circuit-breaker view (kproducer.circuit_breaker) names partitions closed to records;
        # load stats may predate a mute, so never let them pick one of those.
        muted = getattr(cluster, "muted", None)
        if muted and (self.topic, chosen) in muted:
            available = cluster.available_partitions_for_topic(self.topic)
            if available:
                return available[random_value % len(available)].partition
        return chosen
