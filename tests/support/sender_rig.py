"""A Sender with its accumulator, metadata and scripted client (``MockClient``) on the fake clock.

``Sender.run_once()`` drives one loop of ready -> drain -> produce -> complete with no thread and
no socket; the test scripts the responses and moves the clock.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from kproducer.accumulator import BufferPool, RecordAccumulator, RecordFuture
from kproducer.metadata import Metadata
from kproducer.network.protocol import ApiKey
from kproducer.partitioner import BuiltInPartitioner
from kproducer.sender import Sender
from kproducer.transaction_manager import TransactionManager
from tests.support.clock import FakeClock
from tests.support.mock_client import MockClient, make_cluster, set_cluster


@dataclass
class Rig:
    clock: FakeClock
    client: MockClient
    metadata: Metadata
    acc: RecordAccumulator
    tm: TransactionManager | None
    sender: Sender

    def send(self, value: bytes = b"v", partition: int = 0, topic: str = "t") -> RecordFuture:
        result = self.acc.append(topic, partition, 0, b"k", value, None, None, 0, False, self.clock.now, None)
        assert result.future is not None
        return result.future

    def run(self, loops: int = 1) -> None:
        for _ in range(loops):
            self.sender.run_once()

    def produce_bodies(self) -> list[object]:
        return self.client.requests(ApiKey.PRODUCE)


def make_rig(
    *,
    idempotent: bool = True,
    retries: int = 10,
    batch_size: int = 16384,
    tm: TransactionManager | None = None,
    compression: str = "none",
    linger_ms: int = 0,
) -> Rig:
    clock = FakeClock(10_000)
    metadata = Metadata(retry_backoff_ms=100)
    set_cluster(metadata, make_cluster({"t": 2}))
    client = MockClient(clock, metadata)
    if tm is None and idempotent:
        tm = TransactionManager(clock_ms=clock)
    acc = RecordAccumulator(
        batch_size=batch_size,
        buffer_pool=BufferPool(1 << 22, batch_size),
        compression_type=compression,
        linger_ms=linger_ms,
        retry_backoff_ms=100,
        retry_backoff_max_ms=100,
        retry_backoff_jitter=0.0,
        delivery_timeout_ms=120_000,
        clock_ms=clock,
        transaction_manager=tm,
        partitioner_factory=lambda topic, n: BuiltInPartitioner(topic, n, random.Random(1)),
    )
    sender = Sender(
        client=client,
        metadata=metadata,
        accumulator=acc,
        clock_ms=clock,
        acks=-1,
        retries=retries,
        max_request_size=1 << 20,
        request_timeout_ms=30_000,
        delivery_timeout_ms=120_000,
        retry_backoff_ms=100,
        retry_backoff_max_ms=100,
        guarantee_message_order=False,
        transaction_manager=tm,
    )
    return Rig(clock, client, metadata, acc, tm, sender)
