"""Full lz4/zstd batches handed to the compression worker, and the Sender: a batch still on the worker
is not drained, the Sender does not wait for it (it asks to be woken and drains other partitions),
and once the worker is done the batch goes out with the codec's bytes, in order.

The worker here is held by the test (tests/support/held_compression.py), installed on the
accumulator's ``compression_worker`` as the producer installs the native one; a call that would
block on an unfinished job is counted, and must not happen on the Sender's loop.
"""

from __future__ import annotations

import pytest

from kproducer.network.protocol import ApiKey
from kproducer.record.codecs import CompressionType
from kproducer.record.reader import DefaultRecordBatch
from kproducer.structs import TopicPartition
from tests.support.held_compression import HeldWorker
from tests.support.mock_client import batches_of, produce_response
from tests.support.sender_rig import Rig, make_rig

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def _rig(codec: str = "lz4") -> tuple[Rig, HeldWorker]:
    rig = make_rig(batch_size=1024, compression=codec, idempotent=False)
    worker = HeldWorker(on_wake=rig.client.wakeup)
    rig.acc.compression_worker = worker
    return rig, worker


def _sent(rig: Rig, tp: TopicPartition = TP0) -> list[list[bytes | None]]:
    out = []
    for body in rig.produce_bodies():
        data = batches_of(body).get(tp)  # type: ignore[arg-type]
        if data is not None:
            out.append([r.value for r in DefaultRecordBatch(memoryview(data)).records()])
    return out


@pytest.mark.parametrize("codec", ["lz4", "zstd"])
def test_a_batch_on_the_worker_is_not_drained_and_the_sender_does_not_wait(codec: str) -> None:
    rig, worker = _rig(codec)
    futs = [rig.send(bytes([i]) * 300) for i in range(3)]  # the third record closes the first batch
    assert len(worker.jobs) == 1
    rig.run(3)
    assert rig.produce_bodies() == []
    assert worker.blocking_waits == 0
    assert worker.jobs[0].wake_requested  # the Sender asked to be woken instead
    assert not any(f.done() for f in futs)


def test_the_worker_finishing_wakes_the_sender_and_the_batch_goes_out() -> None:
    rig, worker = _rig()
    futs = [rig.send(bytes([i]) * 300) for i in range(2)]
    rig.send(bytes([9]) * 300)  # does not fit: closes the first batch, which goes to the worker
    assert len(worker.jobs) == 1
    rig.run()
    wakeups = rig.client.wakeups
    worker.release()
    assert rig.client.wakeups == wakeups + 1
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 40))
    rig.run()
    assert [f.result(0).offset for f in futs] == [40, 41]
    assert worker.blocking_waits == 0


def test_other_partitions_drain_while_one_batch_is_on_the_worker() -> None:
    rig, worker = _rig()
    held = [rig.send(bytes([i]) * 300, partition=0) for i in range(3)]
    other = rig.send(b"small", partition=1)  # an open batch, not the worker's
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 9))
    rig.run()
    assert other.result(0).offset == 9
    assert not any(f.done() for f in held)
    assert worker.blocking_waits == 0


def test_batches_leave_in_order_as_the_worker_finishes_them() -> None:
    rig, worker = _rig()
    for i in range(7):  # three full batches of two records, and one open
        rig.send(bytes([i]) * 300)
    assert len(worker.jobs) == 3
    rig.client.prepare(ApiKey.PRODUCE, *[produce_response(0, 10 * n) for n in range(5)])
    for expected in (1, 2, 3):
        rig.run(2)
        assert len(_sent(rig)) == expected - 1
        worker.release(1)
        rig.run()
        assert len(_sent(rig)) == expected
    assert [[(v or b"?")[0] for v in batch] for batch in _sent(rig)] == [[0, 1], [2, 3], [4, 5]]
    assert worker.blocking_waits == 0


def test_a_released_batch_carries_the_codec_bytes_of_its_records() -> None:
    rig, worker = _rig()
    values = [bytes([i]) * 300 for i in range(2)]
    for v in values:
        rig.send(v)
    rig.send(bytes([9]) * 300)  # closes the first batch
    assert len(worker.jobs) == 1
    worker.release()
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 0))
    rig.run()
    data = batches_of(rig.produce_bodies()[0]).get(TP0)  # type: ignore[arg-type]
    assert data is not None
    batch = DefaultRecordBatch(memoryview(data))
    assert batch.compression is CompressionType.LZ4
    assert [r.value for r in batch.records()] == values
    assert len(data) < sum(map(len, values))  # compressed


def test_a_batch_on_the_worker_expires_without_the_sender_waiting_for_it() -> None:
    rig, worker = _rig()
    futs = [rig.send(bytes([i]) * 300) for i in range(2)]
    rig.send(bytes([9]) * 300)  # closes the first batch
    assert len(worker.jobs) == 1
    rig.clock.advance(120_000)  # the rig's delivery.timeout.ms
    rig.run()
    assert all(f.done() for f in futs)
    assert all(type(f.exception(0)).__name__ == "KafkaTimeoutError" for f in futs)
    assert worker.blocking_waits == 0
