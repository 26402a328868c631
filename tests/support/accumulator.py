"""A RecordAccumulator on a fake clock, and the steps tests take with it (append, drain all)."""

from __future__ import annotations

import random
from typing import Any

from kproducer.accumulator.accumulator import RecordAccumulator
from kproducer.accumulator.batch import ProducerBatch
from kproducer.accumulator.buffer_pool import BufferPool
from kproducer.accumulator.futures import RecordFuture
from kproducer.metadata import Cluster
from kproducer.partitioner import BuiltInPartitioner
from kproducer.structs import Node, PartitionInfo
from tests.support.clock import FakeClock

BATCH = 1024
MEMORY = 64 * BATCH
LINGER = 10
VALUE = b"v" * 100  # about 110 bytes a record: ~8 records per batch
#: Where the accumulator tests' clock starts (any reading > 0 will do; linger and backoff count from it).
START_MS = 10_000

def make_cluster(partitions: int = 4, nodes: int = 2, topic: str = "t", leaders: dict[int, int] | None = None) -> Cluster:
    node_list = [Node(i, "localhost", 9092 + i) for i in range(nodes)]
    parts = []
    for p in range(partitions):
        leader = (leaders or {}).get(p, p % nodes)
        parts.append(PartitionInfo(topic, p, leader))
    return Cluster(node_list, parts)


def make_acc(clock: FakeClock, **kw: Any) -> RecordAccumulator:
    pool = kw.pop("buffer_pool", None) or BufferPool(kw.pop("memory", MEMORY), kw.get("batch_size", BATCH))
    kw.setdefault("batch_size", BATCH)
    kw.setdefault("linger_ms", LINGER)
    kw.setdefault("retry_backoff_ms", 100)
    kw.setdefault("retry_backoff_max_ms", 1000)
    kw.setdefault("retry_backoff_jitter", 0.0)
    kw.setdefault("delivery_timeout_ms", 120_000)
    kw.setdefault("partitioner_factory", lambda topic, size: BuiltInPartitioner(topic, size, random.Random(7)))
    return RecordAccumulator(buffer_pool=pool, clock_ms=clock, **kw)


def append(acc: RecordAccumulator, partition: int, clock: FakeClock, value: bytes = VALUE, cb: Any = None, topic: str = "t") -> RecordFuture:
    result = acc.append(topic, partition, clock.now, b"key", value, None, cb, 0, False, clock.now, None)
    assert result.future is not None
    return result.future


def complete_all(acc: RecordAccumulator, cluster: Cluster, clock: FakeClock) -> None:
    """Drain everything, succeed it and give the memory back; then the pool must be whole again."""
    acc.begin_flush()
    for _ in range(1000):
        drained = acc.drain(cluster, set(cluster.nodes), 10**9, clock.now)
        batches = [b for lst in drained.values() for b in lst]
        if not batches:
            break
        for b in batches:
            b.done(0, -1, None)
            acc.deallocate(b)
    acc.end_flush()
    assert not acc.has_undrained()
    assert not acc.has_incomplete()
    assert acc.free.available_memory() == acc.free.total_memory


def flush_and_decode(
    acc: RecordAccumulator, cluster: Cluster, clock: FakeClock, partition: int | None = None
) -> list[bytes | None]:
    """Drain everything (as a flush) from node 0, completing each batch; the values of the records
    (of ``partition`` only, if given), in drain order. The pool must be whole again afterwards."""
    from kproducer.record.reader import read_batches

    decoded: list[bytes | None] = []
    acc.begin_flush()
    for _ in range(1000):
        batches = acc.drain(cluster, {0}, 10**9, clock.now)[0]
        if not batches:
            break
        for b in batches:
            if partition is None or b.topic_partition.partition == partition:
                decoded.extend(r.value for rb in read_batches(bytes(b.records_buffer())) for r in rb.records())
            b.done(0, -1, None)
            acc.deallocate(b)
    acc.end_flush()
    assert acc.free.available_memory() == acc.free.total_memory
    return decoded


def queued_batches(acc: RecordAccumulator, partition: int, topic: str = "t") -> list[ProducerBatch]:
    """The batches queued (not drained) for one partition, oldest first."""
    dq = acc.partition_state(topic)[0].get(partition)
    return [] if dq is None else list(dq.batches)


class CountingSink:
    """A bulk call's sink (``append_many``) that only counts the rows appended; outcomes are ignored."""

    def __init__(self) -> None:
        self.appended_count = 0

    def appended(self, count: int) -> None:
        self.appended_count += count

    def range_done(self, rng: Any, result: Any, futures: Any) -> None:
        pass
