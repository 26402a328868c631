"""Idempotent sequences (KIP-98, KIP-360): a producer id and epoch from InitProducerId, a base sequence
per partition that advances by the records of each batch, is kept across retries, and starts over at
0 under a bumped epoch when the broker lost the producer's state or a batch left a gap.

Sequences are read from the batches the scripted client received (their v2 headers).
"""

from __future__ import annotations

import pytest

from kproducer.accumulator import RecordFuture
from kproducer.errors import ClusterAuthorizationFailedError, KafkaTimeoutError
from kproducer.network.protocol import ApiKey
from kproducer.structs import TopicPartition
from tests.support.mock_client import init_producer_id_response, produce_response
from tests.support.producer_rig import ProducerRig
from tests.unit.sender.conftest import MakeRig

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def _send_batches(rig: ProducerRig, sizes: list[int], partition: int = 0) -> list[RecordFuture]:
    """One batch of ``size`` records per entry, each drained (and left in flight) before the next."""
    futs: list[RecordFuture] = []
    for size in sizes:
        futs += [rig.send(bytes([size]), partition=partition) for _ in range(size)]
        rig.run()
    return futs


def test_nothing_is_produced_before_the_producer_id_is_known(make_rig: MakeRig) -> None:
    rig = make_rig(init=False)
    fut = rig.send()
    rig.run(3)  # InitProducerId is out, unanswered
    assert rig.sent_api_keys() == [ApiKey.INIT_PRODUCER_ID]
    assert rig.client.requests(ApiKey.INIT_PRODUCER_ID)[0].transactional_id is None
    rig.client.prepare(ApiKey.INIT_PRODUCER_ID, init_producer_id_response(77, 3))
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 1))
    rig.run_until(fut.done)
    assert rig.sequences() == [(77, 3, 0, 1)]


def test_base_sequences_advance_by_the_records_of_each_batch(rig: ProducerRig) -> None:
    _send_batches(rig, [2, 3, 1])
    assert [(s[2], s[3]) for s in rig.sequences()] == [(0, 2), (2, 3), (5, 1)]
    assert {s[:2] for s in rig.sequences()} == {(1000, 0)}


def test_each_partition_has_its_own_sequence(rig: ProducerRig) -> None:
    _send_batches(rig, [2], partition=0)
    _send_batches(rig, [1], partition=1)
    _send_batches(rig, [1], partition=0)
    assert [s[2] for s in rig.sequences(TP0)] == [0, 2]
    assert [s[2] for s in rig.sequences(TP1)] == [0]


def test_a_retry_keeps_its_producer_id_epoch_and_base_sequence(rig: ProducerRig) -> None:
    _send_batches(rig, [2])
    futs = _send_batches(rig, [3])
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 0), produce_response(6))
    rig.run()
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 2))
    rig.run_until(lambda: all(f.done() for f in futs), step_ms=20)
    assert rig.sequences() == [(1000, 0, 0, 2), (1000, 0, 2, 3), (1000, 0, 2, 3)]


def test_sequences_continue_after_acknowledged_batches(rig: ProducerRig) -> None:
    rig.client.prepare(ApiKey.PRODUCE, *[produce_response(0, i) for i in range(3)])
    for n in (1, 4, 2):
        _send_batches(rig, [n])
    assert [s[2] for s in rig.sequences()] == [0, 1, 5]


def test_unknown_producer_id_bumps_the_epoch_and_restarts_every_partition_at_0(rig: ProducerRig) -> None:
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 0))
    _send_batches(rig, [2], partition=1)  # t-1 reaches sequence 2
    fut = rig.send(partition=0)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(59))
    rig.run()
    rig.client.prepare(ApiKey.INIT_PRODUCER_ID, init_producer_id_response(1000, 1))
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 5), produce_response(0, 6))
    rig.run_until(fut.done, step_ms=20)
    later = rig.send(partition=1)
    rig.run_until(later.done)
    assert rig.sequences(TP0)[-1] == (1000, 1, 0, 1)
    assert rig.sequences(TP1)[-1] == (1000, 1, 0, 1)
    assert rig.producer.producer_epoch == 1


def test_the_epoch_bump_waits_for_the_requests_in_flight(rig: ProducerRig) -> None:
    """Java's maybeWaitForProducerId: no InitProducerId while other batches are still unanswered."""
    fut = rig.send(partition=0)
    rig.run()
    other = rig.send(partition=1)
    rig.run()  # both in flight
    rig.client.prepare(ApiKey.PRODUCE, produce_response(45))  # the first request (t-0): out of order at sequence 0
    rig.run()
    assert not fut.done() and not other.done()
    rig.run(2)
    assert len(rig.client.requests(ApiKey.INIT_PRODUCER_ID)) == 1  # only the first one
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 3))
    rig.run()  # t-1 answered: nothing is in flight any more
    assert other.result(0).offset == 3
    rig.client.prepare(ApiKey.INIT_PRODUCER_ID, init_producer_id_response(1000, 1))
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 4))
    rig.run_until(fut.done, step_ms=20)
    assert len(rig.client.requests(ApiKey.INIT_PRODUCER_ID)) == 2
    assert rig.sequences(TP0)[-1] == (1000, 1, 0, 1)
    assert fut.result(0).offset == 4


def test_queued_batches_take_the_new_epoch_and_fresh_sequences(rig: ProducerRig) -> None:
    fut = rig.send(partition=0)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(59))
    rig.run()
    queued = [rig.send(bytes([i]), partition=0) for i in range(2)]  # wait behind the bump
    rig.client.prepare(ApiKey.INIT_PRODUCER_ID, init_producer_id_response(1000, 1))
    rig.client.prepare(ApiKey.PRODUCE, *[produce_response(0, 10 + i) for i in range(3)])
    rig.run_until(lambda: fut.done() and all(q.done() for q in queued), step_ms=20)
    after = rig.sequences()[1:]
    assert all(s[:2] == (1000, 1) for s in after)
    # The retried batch first, then the queued records, with no gap.
    # The retried batch first, then the queued records, with no gap.
    assert after == [(1000, 1, 0, 1), (1000, 1, 1, 2)]
    assert rig.values()[1:] == [[b"v"], [b"\x00", b"\x01"]]


@pytest.mark.parametrize("failures, waits", [(1, [100]), (3, [100, 200, 400])])
def test_init_producer_id_retries_with_exponential_backoff(make_rig: MakeRig, failures: int, waits: list[int]) -> None:
    rig = make_rig({"retry.backoff.ms": 100, "retry.backoff.max.ms": 1000}, init=False)
    rig.client.prepare(
        ApiKey.INIT_PRODUCER_ID, *[init_producer_id_response(error_code=15)] * failures, init_producer_id_response(5, 0)
    )
    rig.run()
    for n, wait in enumerate(waits, start=1):
        rig.clock.advance(wait - 1)
        rig.run()
        assert len(rig.client.requests(ApiKey.INIT_PRODUCER_ID)) == n, f"retry {n} before {wait} ms"
        rig.clock.advance(1)
        rig.run()
        assert len(rig.client.requests(ApiKey.INIT_PRODUCER_ID)) == n + 1
    assert (rig.producer.producer_id, rig.producer.producer_epoch) == (5, 0)


def test_a_fatal_init_producer_id_error_fails_the_queued_records(make_rig: MakeRig) -> None:
    rig = make_rig(init=False)
    fut = rig.send(label="x")
    rig.client.prepare(ApiKey.INIT_PRODUCER_ID, init_producer_id_response(error_code=31))
    rig.run(2)
    assert isinstance(fut.exception(0), ClusterAuthorizationFailedError)
    assert rig.produce_bodies() == []
    later = rig.send()
    rig.run()
    assert isinstance(later.exception(0), ClusterAuthorizationFailedError)


def test_duplicate_sequence_on_a_retry_completes_the_batch(rig: ProducerRig) -> None:
    """The first attempt was written though its answer was lost: the broker says DUPLICATE_SEQUENCE_NUMBER."""
    fut = rig.send(label="x")
    rig.client.prepare(ApiKey.PRODUCE, produce_response(7), produce_response(46))
    rig.run_until(fut.done, step_ms=20)
    assert fut.exception(0) is None
    assert rig.sequences() == [(1000, 0, 0, 1), (1000, 0, 0, 1)]
    nxt = rig.send()
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 1))
    rig.run_until(nxt.done)
    assert rig.sequences()[-1] == (1000, 0, 1, 1)  # the duplicate counted as delivered


def test_a_failed_first_batch_resequences_the_one_behind_it_under_a_new_epoch(rig: ProducerRig) -> None:
    """Java's testIdempotenceWithMultipleInflightsWhereFirstFailsFatallyAndSequenceOfFutureBatchesIsAdjusted:
    the first batch fails for good (its records end with the error), the second, refused as out of
    order behind it, is retried, under a bumped epoch from sequence 0."""
    first = rig.send(b"1", label=1)
    rig.run()
    second = rig.send(b"2", label=2)
    rig.run()
    assert [s[2] for s in rig.sequences()] == [0, 1]
    rig.client.prepare(ApiKey.PRODUCE, produce_response(87), produce_response(45))
    rig.run()
    assert first.done() and not second.done()
    rig.client.prepare(ApiKey.INIT_PRODUCER_ID, init_producer_id_response(1000, 1))
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 9))
    rig.run_until(second.done, step_ms=20)
    assert second.result(0).offset == 9
    assert rig.sequences()[-1] == (1000, 1, 0, 1)
    assert rig.values()[-1] == [b"2"]
    assert rig.outcomes.labels() == [1, 2]


def test_an_idempotent_batch_expiring_in_flight_bumps_the_epoch_once_its_request_is_over(make_rig: MakeRig) -> None:
    rig = make_rig({"delivery.timeout.ms": 1500, "request.timeout.ms": 1000, "linger.ms": 0})
    expired = rig.send(b"x")
    rig.run()
    rig.clock.advance(1500)
    rig.run()
    assert isinstance(expired.exception(0), KafkaTimeoutError)
    nxt = rig.send(b"y")
    rig.run(2)
    # Its request is still out: no InitProducerId yet, and nothing new is sent meanwhile.
    assert len(rig.client.requests(ApiKey.INIT_PRODUCER_ID)) == 1
    assert len(rig.produce_bodies()) == 1
    rig.client.prepare(ApiKey.PRODUCE, produce_response(7))  # the expired request's late answer
    rig.run()
    rig.client.prepare(ApiKey.INIT_PRODUCER_ID, init_producer_id_response(1000, 1))
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 3))
    rig.run_until(nxt.done, step_ms=20)
    assert nxt.result(0).offset == 3
    assert rig.sequences()[-1] == (1000, 1, 0, 1)
