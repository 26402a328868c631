"""murmur2 against Java and librdkafka, the KIP-794 built-in partitioner, round-robin, resolution."""

from __future__ import annotations

import random
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproducer.errors import ConfigError, KafkaError
from kproducer.metadata import Cluster
from kproducer.partitioner import (
    BuiltInPartitioner,
    CallablePartitioner,
    Partitioner,
    RoundRobinPartitioner,
    murmur2,
    partition_for_key,
    resolve_partitioner,
    to_positive,
)
from kproducer.structs import Node, PartitionInfo

TOPIC = "t"

# Expectations from Kafka's own UtilsTest.testMurmur2 (clients module).
JAVA_MURMUR2 = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}


def make_cluster(partitions: int, unavailable: Iterable[int] = (), topic: str = TOPIC) -> Cluster:
    nodes = [Node(i, "127.0.0.1", 9092 + i) for i in range(3)]
    down = set(unavailable)
    parts = [PartitionInfo(topic, p, -1 if p in down else p % 3) for p in range(partitions)]
    return Cluster(nodes, parts)


class SeqRandom(random.Random):
    """A Random whose getrandbits yields a fixed sequence: makes partition choices exact."""

    def __init__(self, values: Iterable[int]) -> None:
        super().__init__(0)
        self._values = iter(values)

    def getrandbits(self, k: int, /) -> int:
        return next(self._values)


# ------------------------------------------------------------------ murmur2


@pytest.mark.parametrize(("data", "expected"), sorted(JAVA_MURMUR2.items()))
def test_murmur2_matches_java(data: bytes, expected: int) -> None:
    assert murmur2(data) == expected


def test_murmur2_properties() -> None:
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2**31)) == 0
    assert to_positive(5) == 5
    for n in range(0, 64):
        h = murmur2(bytes(range(n)))
        assert -(2**31) <= h < 2**31
    assert partition_for_key(b"foobar", 7) == to_positive(-790332482) % 7
    with pytest.raises(ValueError, match="num_partitions must be >= 1"):
        partition_for_key(b"x", 0)


# ------------------------------------------------------------------ built-in sticky partitioner


def test_sticky_switches_after_batch_size_bytes() -> None:
    cluster = make_cluster(5)
    bp = BuiltInPartitioner(TOPIC, 100, rng=SeqRandom([0, 3, 3, 1, 4]))
    assert bp.peek_current_partition(cluster) == 0
    bp.update_partition_info(0, 60, cluster, enable_switch=True)
    assert bp.peek_current_partition(cluster) == 0
    bp.update_partition_info(0, 40, cluster, enable_switch=True)  # batch size, every batch full: switch
    assert bp.peek_current_partition(cluster) == 3
    bp.update_partition_info(3, 150, cluster)  # past batch size, but a batch has room: stay
    assert bp.peek_current_partition(cluster) == 3
    bp.update_partition_info(3, 50, cluster)  # twice batch size: switches, and may draw the same partition ...
    assert bp.peek_current_partition(cluster) == 3
    bp.update_partition_info(3, 50, cluster, enable_switch=True)  # ... with its byte count reset
    assert bp.peek_current_partition(cluster) == 3
    bp.update_partition_info(0, 500, cluster)  # stale partition (another thread switched): ignored
    assert bp.peek_current_partition(cluster) == 3
    bp.move_off(3, cluster)  # the circuit breaker closed it
    assert bp.peek_current_partition(cluster) == 1
    bp.move_off(3, cluster)  # no longer the sticky one: nothing
    assert bp.peek_current_partition(cluster) == 1
    bp.update_partition_info(1, 10_000, cluster)  # one huge record: a single switch
    assert bp.peek_current_partition(cluster) == 4


def test_sticky_uses_available_partitions_then_all() -> None:
    bp = BuiltInPartitioner(TOPIC, 10, rng=random.Random(1))
    cluster = make_cluster(6, unavailable=[0, 2, 4])
    seen = set()
    for _ in range(200):
        p = bp.peek_current_partition(cluster)
        seen.add(p)
        bp.update_partition_info(p, 10, cluster)
    assert seen == {1, 3, 5}
    none_available = make_cluster(4, unavailable=range(4))
    seen = set()
    for _ in range(200):
        p = bp.peek_current_partition(none_available)
        seen.add(p)
        bp.update_partition_info(p, 10, none_available)
    assert seen == {0, 1, 2, 3}
    with pytest.raises(KafkaError, match="no partitions"):
        BuiltInPartitioner("missing", 10).peek_current_partition(cluster)
    with pytest.raises(ValueError, match="sticky_batch_size"):
        BuiltInPartitioner(TOPIC, 0)


def _exact_counts(queue_sizes: Sequence[int], partition_ids: Sequence[int], length: int) -> Counter[int]:
    """Draw once for every value of the weighted random: counts are the exact weights."""
    total = sum(max(queue_sizes[:length]) + 1 - s for s in queue_sizes[:length])
    cluster = make_cluster(max(partition_ids) + 1)
    bp = BuiltInPartitioner(TOPIC, 1, rng=SeqRandom(range(total + 1)))
    bp.update_partition_load_stats(list(queue_sizes), list(partition_ids), length)
    counts: Counter[int] = Counter()
    p = bp.peek_current_partition(cluster)  # consumes random value 0
    counts[p] += 1
    for _ in range(total - 1):
        bp.update_partition_info(p, 1, cluster, enable_switch=True)
        p = bp.peek_current_partition(cluster)
        counts[p] += 1
    return counts


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.integers(min_value=0, max_value=30), min_size=2, max_size=9).flatmap(
        lambda sizes: st.tuples(st.just(sizes), st.permutations(list(range(len(sizes)))))
    )
)
def test_adaptive_shorter_queue_is_never_less_likely(case: tuple[list[int], list[int]]) -> None:
    sizes, ids = case
    if len(set(sizes)) == 1:
        sizes = [*sizes[:-1], sizes[-1] + 1]  # all-equal means uniform (no stats); covered separately
    counts = _exact_counts(sizes, ids, len(sizes))
    top = max(sizes) + 1
    for i, pid in enumerate(ids):
        assert counts[pid] == top - sizes[i]
    for i in range(len(sizes)):
        for j in range(len(sizes)):
            if sizes[i] < sizes[j]:
                assert counts[ids[i]] > counts[ids[j]]


def test_adaptive_frequencies_follow_inverted_weights() -> None:
    sizes = [0, 5, 10, 2, 7]
    ids = [4, 0, 3, 1, 2]
    cluster = make_cluster(5)
    bp = BuiltInPartitioner(TOPIC, 1, rng=random.Random(20220329))
    bp.update_partition_load_stats(sizes, ids, len(sizes))
    draws = 40_000
    counts: Counter[int] = Counter()
    for _ in range(draws):
        p = bp.peek_current_partition(cluster)
        counts[p] += 1
        bp.update_partition_info(p, 1, cluster, enable_switch=True)
    weights = [11 - s for s in sizes]
    for pid, w in zip(ids, weights, strict=True):
        expected = w / sum(weights)
        assert abs(counts[pid] / draws - expected) < 0.01, (pid, counts[pid] / draws, expected)


def test_load_stats_edge_cases() -> None:
    cluster = make_cluster(4)
    # Only the first `length` entries count: partitions beyond it are never chosen.
    counts = _exact_counts([3, 1, 0, 0], [2, 0, 1, 3], 2)
    assert counts == Counter({2: 1, 0: 3})
    # All equal over all partitions: no stats, uniform over available partitions.
    bp = BuiltInPartitioner(TOPIC, 1, rng=random.Random(3))
    bp.update_partition_load_stats([2, 2, 2, 2], [0, 1, 2, 3], 4)
    seen: Counter[int] = Counter()
    for _ in range(400):
        p = bp.peek_current_partition(cluster)
        seen[p] += 1
        bp.update_partition_info(p, 1, cluster, enable_switch=True)
    assert set(seen) == {0, 1, 2, 3} and min(seen.values()) > 60
    # All equal over a subset (others unavailable): only the subset.
    bp.update_partition_load_stats([2, 2, 0, 0], [1, 3, 0, 2], 2)
    # The partition chosen before the stats changed stays sticky until the next switch.
    bp.move_off(bp.peek_current_partition(cluster), cluster)
    seen.clear()
    for _ in range(100):
        p = bp.peek_current_partition(cluster)
        seen[p] += 1
        bp.update_partition_info(p, 1, cluster, enable_switch=True)
    assert set(seen) == {1, 3}
    bp.update_partition_load_stats(None, None, 0)
    with pytest.raises(ValueError, match="differ in length"):
        bp.update_partition_load_stats([1, 2], [0], 1)
    with pytest.raises(ValueError, match="length must be in 0..2"):
        bp.update_partition_load_stats([1, 2], [0, 1], 3)


def test_concurrent_peek_and_update() -> None:
    cluster = make_cluster(8)
    bp = BuiltInPartitioner(TOPIC, 1000, rng=random.Random(5))
    switches: Counter[int] = Counter()
    failures: list[BaseException] = []
    deadline = time.monotonic() + 10

    def worker() -> None:
        try:
            for _ in range(3000):
                if time.monotonic() > deadline:
                    break
                p = bp.peek_current_partition(cluster)
                assert 0 <= p < 8
                bp.update_partition_info(p, 10, cluster)
                switches[p] += 1
        except BaseException as e:  # surfaced below
            failures.append(e)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert failures == []
    assert not any(t.is_alive() for t in threads)
    assert len(switches) > 1  # 240 kB through a 1 kB sticky size moved across partitions


# ------------------------------------------------------------------ round robin and resolution


def test_round_robin_covers_available_partitions_evenly() -> None:
    rr = RoundRobinPartitioner()
    cluster = make_cluster(6, unavailable=[2])
    counts = Counter(rr.partition(TOPIC, None, None, None, None, cluster) for _ in range(500))
    assert set(counts) == {0, 1, 3, 4, 5}
    assert set(counts.values()) == {100}
    # Per-topic counters: another topic starts at its own first partition.
    other = make_cluster(3, topic="other")
    assert rr.partition("other", None, None, None, None, other) == 0
    # No available leader: all partitions.
    dark = make_cluster(4, unavailable=range(4))
    assert Counter(rr.partition(TOPIC, None, None, None, None, dark) for _ in range(40)) == {
        0: 10,
        1: 10,
        2: 10,
        3: 10,
    }
    with pytest.raises(KafkaError, match="'missing' has no partitions"):
        rr.partition("missing", None, None, None, None, dark)
    rr.close()


class ConstPartitioner:
    def partition(
        self, topic: str, key: Any, key_bytes: Any, value: Any, value_bytes: Any, cluster: Cluster
    ) -> int:
        return 1


class NotAPartitioner:
    pass


def test_resolve_partitioner() -> None:
    assert resolve_partitioner(None) is None
    assert resolve_partitioner("default") is None
    assert resolve_partitioner("org.apache.kafka.clients.producer.internals.DefaultPartitioner") is None
    for name in (
        "round_robin",
        "org.apache.kafka.clients.producer.RoundRobinPartitioner",
        RoundRobinPartitioner,
    ):
        assert isinstance(resolve_partitioner(name), RoundRobinPartitioner)
    inst = ConstPartitioner()
    assert resolve_partitioner(inst) is inst
    from_path = resolve_partitioner("tests.unit.partitioner.test_partitioner:ConstPartitioner")
    assert isinstance(from_path, ConstPartitioner) and isinstance(from_path, Partitioner)
    cluster = make_cluster(4)
    fn = resolve_partitioner(lambda topic, key_bytes, n: len(key_bytes or b"") % n)
    assert isinstance(fn, CallablePartitioner)
    assert fn.partition(TOPIC, "k", b"abcdef", None, None, cluster) == 2
    bad = resolve_partitioner(lambda topic, key_bytes, n: n)
    assert bad is not None
    with pytest.raises(KafkaError, match=r"returned 4 for topic 't'; it must return an int in 0..3"):
        bad.partition(TOPIC, None, None, None, None, cluster)


@pytest.mark.parametrize(
    ("spec", "pattern"),
    [
        ("hash", r"partitioner\.class: unknown partitioner 'hash'; .*'round_robin'"),
        ("no_such_module_xyz:P", r"partitioner\.class: cannot import module 'no_such_module_xyz'"),
        (
            "tests.unit.partitioner.test_partitioner:Missing",
            r"partitioner\.class: module 'tests.unit.partitioner.test_partitioner' has no attribute",
        ),
        (NotAPartitioner, r"partitioner\.class: class NotAPartitioner has no partition\(\)"),
        (3.5, r"partitioner\.class: 3\.5 \(type float\) is not usable"),
    ],
)
def test_resolve_partitioner_errors(spec: Any, pattern: str) -> None:
    with pytest.raises(ConfigError, match=pattern):
        resolve_partitioner(spec)
