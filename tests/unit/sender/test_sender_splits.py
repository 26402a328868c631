"""MESSAGE_TOO_LARGE on a batch of several records: the batch is split into batches of batch.size
and they are sent again, every record and future preserved, in order (Java's
``testIdempotentSplitBatchAndSend``, ``testSplitBatchAndSend``). A batch grows past batch.size
(KIP-782) while its partition is hot; a broker whose message.max.bytes is lower refuses it.
"""

from __future__ import annotations

import pytest

from kproducer.accumulator import RecordFuture
from kproducer.errors import KafkaTimeoutError, RecordTooLargeError
from kproducer.network.protocol import ApiKey
from kproducer.structs import TopicPartition
from tests.support.mock_client import produce_response
from tests.support.producer_rig import ProducerRig
from tests.unit.sender.conftest import MakeRig

TP0 = TopicPartition("t", 0)
#: batch.size 1 KiB, growing up to 16 KiB: six 300-byte records make one batch of about 1.9 KB.
GROWING = {"batch.size": 1024, "batch.max.size": 16384, "linger.ms": 1000}


def _one_big_batch(rig: ProducerRig, n: int = 6, size: int = 300, partition: int = 0) -> list[RecordFuture]:
    futs = [rig.send(bytes([i]) * size, label=i, partition=partition) for i in range(n)]
    rig.clock.advance(1000)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(10))
    rig.run()
    assert [b.record_count for b in rig.batches()] == [n]
    return futs


def _first_bytes(rig: ProducerRig) -> list[list[int]]:
    return [[(v or b"\xff")[0] for v in batch] for batch in rig.values()]


def test_an_idempotent_split_keeps_every_record_and_future_in_order(make_rig: MakeRig) -> None:
    rig = make_rig(GROWING)
    futs = _one_big_batch(rig)
    assert not any(f.done() for f in futs)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 100), produce_response(0, 200))
    rig.run_until(lambda: all(f.done() for f in futs), step_ms=100)
    assert _first_bytes(rig) == [[0, 1, 2, 3, 4, 5], [0, 1, 2], [3, 4, 5]]
    assert [f.result(0).offset for f in futs] == [100, 101, 102, 200, 201, 202]
    assert rig.outcomes.labels() == [0, 1, 2, 3, 4, 5]
    # The parts carry the batch's producer id and epoch and its sequences, contiguously (Java's
    # ProducerBatch.split): no gap, so no epoch bump and no InitProducerId.
    assert rig.sequences()[1:] == [(1000, 0, 0, 3), (1000, 0, 3, 3)]
    assert len(rig.client.requests(ApiKey.INIT_PRODUCER_ID)) == 1
    assert all(b.size_in_bytes <= 1024 for b in rig.batches()[1:])
    nxt = rig.send(b"n")
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 300))
    rig.run_until(nxt.done, step_ms=1000)  # linger.ms
    assert rig.sequences()[-1] == (1000, 0, 6, 1)  # the partition's sequence goes on after the parts


def test_a_split_without_idempotence_needs_no_producer_id(make_rig: MakeRig) -> None:
    rig = make_rig({**GROWING, "enable.idempotence": False})
    futs = _one_big_batch(rig)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 0), produce_response(0, 3))
    rig.run_until(lambda: all(f.done() for f in futs), step_ms=100)
    assert rig.client.requests(ApiKey.INIT_PRODUCER_ID) == []
    assert _first_bytes(rig)[1:] == [[0, 1, 2], [3, 4, 5]]
    assert [f.result(0).offset for f in futs] == [0, 1, 2, 3, 4, 5]
    assert [s[:3] for s in rig.sequences()] == [(-1, -1, -1)] * 3


def test_split_parts_keep_keys_headers_and_timestamps(make_rig: MakeRig) -> None:
    rig = make_rig({**GROWING, "enable.idempotence": False})
    futs = []
    for i in range(5):
        futs.append(
            rig.producer.send("t", bytes([i]) * 400, f"key-{i}".encode(), partition=0, timestamp=1_700_000_000_000 + i, headers=[("h", bytes([i]))])
        )
    rig.clock.advance(1000)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(10))
    rig.run()
    rig.client.prepare(ApiKey.PRODUCE, *[produce_response(0, 10 * i) for i in range(5)])
    rig.run_until(lambda: all(f.done() for f in futs), step_ms=100)
    records = [r for b in rig.batches()[1:] for r in b.records()]
    assert [(r.key, r.timestamp, list(r.headers)) for r in records] == [
        (f"key-{i}".encode(), 1_700_000_000_000 + i, [("h", bytes([i]))]) for i in range(5)
    ]


@pytest.mark.parametrize("compression", ["lz4", "gzip"])
def test_a_compressed_batch_splits_with_its_records_intact(make_rig: MakeRig, compression: str) -> None:
    rig = make_rig({**GROWING, "enable.idempotence": False, "compression.type": compression})
    values = [bytes(range(i, i + 200)) * 2 for i in range(8)]  # compressible, but not to nothing
    futs = [rig.send(v) for v in values]
    rig.clock.advance(1000)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(10), *[produce_response(0, 0)] * 8)
    rig.run_until(lambda: all(f.done() for f in futs), step_ms=100)
    assert all(f.exception(0) is None for f in futs)
    parts = rig.values()[1:]
    assert len(parts) >= 1 and [v for part in parts for v in part] == values


def test_a_split_part_refused_again_is_split_again_ahead_of_the_rest(make_rig: MakeRig) -> None:
    rig = make_rig({**GROWING, "enable.idempotence": False, "batch.size": 700})
    futs = _one_big_batch(rig, n=4)
    # The parts hold two records each (batch.size); the first is refused too: split again, it still
    # goes before the second part, and every record is delivered once, in order.
    rig.client.prepare(ApiKey.PRODUCE, produce_response(10), produce_response(0, 10), produce_response(0, 20))
    rig.run_until(lambda: all(f.done() for f in futs), step_ms=100)
    assert _first_bytes(rig) == [[0, 1, 2, 3], [0, 1], [0, 1], [2, 3]]
    assert [f.result(0).offset for f in futs] == [10, 11, 20, 21]
    assert rig.outcomes.labels() == [0, 1, 2, 3]


def test_single_record_parts_refused_again_fail_with_message_too_large(make_rig: MakeRig) -> None:
    """A part of one record cannot be split further: the broker's MESSAGE_TOO_LARGE is its outcome."""
    rig = make_rig({**GROWING, "enable.idempotence": False})
    futs = _one_big_batch(rig, n=2, size=800)  # parts of one record each
    rig.client.prepare(ApiKey.PRODUCE, produce_response(10), produce_response(10))
    rig.run_until(lambda: all(f.done() for f in futs), step_ms=100)
    for f in futs:
        exc = f.exception(0)
        assert isinstance(exc, RecordTooLargeError) and (exc.topic, exc.partition) == ("t", 0)
    assert [len(b) for b in rig.values()] == [2, 1, 1]
    assert rig.outcomes.labels() == [0, 1]


def test_split_records_expire_from_the_original_batch_creation(make_rig: MakeRig) -> None:
    rig = make_rig({**GROWING, "enable.idempotence": False, "delivery.timeout.ms": 31_000, "request.timeout.ms": 30_000})
    futs = _one_big_batch(rig)
    rig.client.unready.add(0)  # the parts cannot go out
    rig.clock.advance(31_000 - 1000 - 1)
    rig.run()
    assert not any(f.done() for f in futs)
    rig.clock.advance(1)
    rig.run()
    assert all(isinstance(f.exception(0), KafkaTimeoutError) for f in futs)


def test_a_batch_in_flight_behind_a_split_one_is_retried_after_the_parts(make_rig: MakeRig) -> None:
    """Idempotence with several requests in flight: the broker refuses the big batch (sequence 0) as too
    large and the batch behind it (sequence 6) as out of order; the parts take sequences 0 and 3 and
    go first, then the batch behind them is retried with its own sequence: no gap, no new epoch."""
    rig = make_rig(GROWING)
    big = [rig.send(bytes([i]) * 300, label=i) for i in range(6)]
    rig.clock.advance(1000)
    rig.run()  # the big batch is out
    behind = rig.send(b"behind", label="behind")
    rig.clock.advance(1000)
    rig.run()  # and the one behind it
    assert [s[2:] for s in rig.sequences()] == [(0, 6), (6, 1)]
    rig.client.prepare(ApiKey.PRODUCE, produce_response(10), produce_response(45))
    rig.run()
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 100), produce_response(0, 200), produce_response(0, 300))
    rig.run_until(lambda: behind.done() and all(f.done() for f in big), step_ms=100)
    assert rig.sequences()[2:] == [(1000, 0, 0, 3), (1000, 0, 3, 3), (1000, 0, 6, 1)]
    assert rig.outcomes.labels() == [0, 1, 2, 3, 4, 5, "behind"]
    assert behind.result(0).offset == 300
    assert len(rig.client.requests(ApiKey.INIT_PRODUCER_ID)) == 1
