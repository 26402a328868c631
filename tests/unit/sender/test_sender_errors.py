"""Errors that are not retried: each fails its records' futures and callbacks with the error's class,
naming the topic and partition and keeping the broker's message; nothing else is held back.
"""

from __future__ import annotations

import logging

import pytest

from kproducer.errors import (
    InvalidRecordError,
    InvalidRequiredAcksError,
    KafkaError,
    PolicyViolationError,
    RecordListTooLargeError,
    RecordTooLargeError,
    TopicAuthorizationFailedError,
)
from kproducer.network.protocol import ApiKey
from kproducer.structs import TopicPartition
from tests.support.mock_client import produce_response
from tests.support.producer_rig import ProducerRig
from tests.unit.sender.conftest import MakeRig

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


@pytest.mark.parametrize(
    "code, error",
    [
        (87, InvalidRecordError),
        (18, RecordListTooLargeError),
        (29, TopicAuthorizationFailedError),
        (21, InvalidRequiredAcksError),
        (44, PolicyViolationError),
    ],
)
def test_a_non_retriable_error_fails_the_records_with_its_class_topic_and_partition(
    make_rig: MakeRig, code: int, error: type[KafkaError]
) -> None:
    rig = make_rig({"enable.idempotence": False, "linger.ms": 5})
    futs = [rig.send(bytes([i]), partition=1, label=i) for i in range(3)]
    rig.client.prepare(ApiKey.PRODUCE, produce_response(code, message="the broker says no"))
    rig.clock.advance(5)
    rig.run()
    for fut in futs:
        exc = fut.exception(0)
        assert isinstance(exc, error)
        assert (exc.topic, exc.partition, exc.code) == ("t", 1, code)
        assert "the broker says no" in str(exc)
    assert rig.outcomes.labels() == [0, 1, 2]
    assert all(isinstance(e, error) and o is None for _l, o, e in rig.outcomes.calls)
    assert len(rig.produce_bodies()) == 1  # never retried


def test_the_failure_of_one_partition_leaves_the_other_delivered(make_rig: MakeRig) -> None:
    rig = make_rig({"enable.idempotence": False}, topics={"t": 4})
    bad = rig.send(partition=0)
    good = rig.send(partition=2)
    rig.client.prepare(ApiKey.PRODUCE, produce_response({TP0: 87}, base_offset=0))
    rig.run()
    assert isinstance(bad.exception(0), InvalidRecordError)
    assert good.result(0).offset == 100  # the second partition of the request


def test_message_too_large_for_one_record_fails_it_without_a_split(make_rig: MakeRig) -> None:
    rig = make_rig({"enable.idempotence": False})
    fut = rig.send(bytes(100))
    rig.client.prepare(ApiKey.PRODUCE, produce_response(10))
    rig.run(3)
    exc = fut.exception(0)
    assert isinstance(exc, RecordTooLargeError) and (exc.topic, exc.partition) == ("t", 0)
    assert len(rig.produce_bodies()) == 1


def test_a_failed_record_is_counted_and_logged_at_warning(make_rig: MakeRig, caplog: pytest.LogCaptureFixture) -> None:
    rig = make_rig({"enable.idempotence": False})
    rig.send(partition=1)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(87, message="corrupt"))
    with caplog.at_level(logging.WARNING, logger="kproducer"):
        rig.run()
        rig.close()  # emits the failure summaries still held back by the rate limit
    assert rig.producer.take_failed_count() == 1
    assert rig.producer.metrics()["record-error-total"] == 1
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("t-1" in m and "INVALID_RECORD" in m and "corrupt" in m for m in warnings), warnings


def test_a_partition_missing_from_the_answer_fails_its_batch(make_rig: MakeRig) -> None:
    rig = make_rig({"enable.idempotence": False, "retries": 0})
    fut = rig.send()

    def answer_nothing(req: object) -> object:
        from kproducer.network.protocol import ProduceResponseData

        return ProduceResponseData({}, 0)

    rig.client.prepare(ApiKey.PRODUCE, answer_nothing)
    rig.run()
    exc = fut.exception(0)
    assert isinstance(exc, KafkaError) and "no response for t-0" in str(exc)


def test_after_an_idempotent_batch_fails_the_next_one_waits_for_a_new_epoch(rig: ProducerRig) -> None:
    """Its sequence is a gap now: the next batch of any partition goes out under a bumped epoch, from 0."""
    failed = rig.send(partition=0)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(87))
    rig.run()
    assert isinstance(failed.exception(0), InvalidRecordError)
    nxt = rig.send(partition=1)
    rig.run()
    assert len(rig.produce_bodies()) == 1  # held until the epoch is bumped
    from tests.support.mock_client import init_producer_id_response

    rig.client.prepare(ApiKey.INIT_PRODUCER_ID, init_producer_id_response(1000, 1))
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 5))
    rig.run_until(nxt.done)
    assert nxt.result(0).offset == 5
    assert rig.sequences(TP1) == [(1000, 1, 0, 1)]


def test_record_errors_reach_the_records_they_name(make_rig: MakeRig) -> None:
    """KIP-467 (Java's testRecordErrorPropagatedToApplication): the record the broker named fails with
    its own message; the other records of the batch fail saying their batch held an invalid record."""
    rig = make_rig({"enable.idempotence": False, "linger.ms": 5})
    futs = [rig.send(bytes([i]), label=i) for i in range(3)]
    rig.clock.advance(5)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(87, message="batch refused", record_errors=((1, "record 1 has a bad timestamp"),)))
    rig.run()
    named = futs[1].exception(0)
    assert isinstance(named, InvalidRecordError) and "record 1 has a bad timestamp" in str(named)
    for i in (0, 2):
        other = futs[i].exception(0)
        assert isinstance(other, KafkaError) and other is not named
        assert "record 1 has a bad timestamp" not in str(other)
    assert rig.outcomes.labels() == [0, 1, 2]


def test_several_record_errors_each_reach_their_record(make_rig: MakeRig) -> None:
    rig = make_rig({"enable.idempotence": False, "linger.ms": 5})
    futs = [rig.send(bytes([i])) for i in range(4)]
    rig.clock.advance(5)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(87, record_errors=((0, "first is bad"), (3, "last is bad"))))
    rig.run()
    assert "first is bad" in str(futs[0].exception(0)) and "last is bad" in str(futs[3].exception(0))
    assert all(isinstance(f.exception(0), InvalidRecordError) for f in (futs[0], futs[3]))
    assert all("bad" not in str(f.exception(0)) for f in (futs[1], futs[2]))
