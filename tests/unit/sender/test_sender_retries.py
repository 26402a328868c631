"""Retriable errors: the batch goes back to its queue and is sent again after retry.backoff.ms, growing
exponentially to retry.backoff.max.ms (KIP-580), until retries or delivery.timeout.ms run out.

The backoff has Java's ±20 % jitter, so each retry is checked inside its window on the fake
clock: not sent at 80 % of the nominal backoff less a millisecond, sent by 120 % of it.
"""

from __future__ import annotations

import pytest

from kproducer.errors import KafkaError, NetworkError, NotEnoughReplicasError, NotLeaderOrFollowerError
from kproducer.network.protocol import ApiKey
from kproducer.structs import TopicPartition
from tests.support.mock_client import DISCONNECT, produce_response
from tests.support.producer_rig import ProducerRig
from tests.unit.sender.conftest import MakeRig

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def _retried_within(rig: ProducerRig, nominal_ms: int) -> int:
    """Move the clock through the jitter window of one retry; the ms after which it was sent."""
    sent = len(rig.produce_bodies())
    low, high = nominal_ms * 8 // 10, nominal_ms * 12 // 10
    rig.clock.advance(low - 1)
    rig.run()
    assert len(rig.produce_bodies()) == sent, f"retried before {low - 1} ms of a {nominal_ms} ms backoff"
    for waited in range(low, high + 1):
        rig.clock.advance(1)
        rig.run()
        if len(rig.produce_bodies()) > sent:
            return waited
    raise AssertionError(f"not retried within {high} ms of a {nominal_ms} ms backoff")


@pytest.mark.parametrize("code", [6, 7, 19, 20, 13, 14, 3, 74, 2])
def test_a_retriable_error_sends_the_same_records_again_after_the_backoff(make_rig: MakeRig, code: int) -> None:
    rig = make_rig({"retry.backoff.ms": 100, "retry.backoff.max.ms": 100})
    fut = rig.send(b"r", label="r")
    rig.client.prepare(ApiKey.PRODUCE, produce_response(code), produce_response(0, base_offset=77))
    rig.run()
    assert not fut.done() and rig.outcomes.calls == []
    rig.clock.advance(99)  # max == initial: a constant backoff, no jitter
    rig.run()
    assert len(rig.produce_bodies()) == 1
    rig.clock.advance(1)
    rig.run()
    assert fut.result(0).offset == 77
    assert rig.values() == [[b"r"], [b"r"]]
    assert rig.outcomes.calls == [("r", 77, None)]


def test_retry_backoff_grows_exponentially_up_to_the_maximum(make_rig: MakeRig) -> None:
    rig = make_rig({"retry.backoff.ms": 100, "retry.backoff.max.ms": 350, "retries": 10})
    fut = rig.send()
    rig.client.prepare(ApiKey.PRODUCE, *[produce_response(6)] * 5, produce_response(0, 1))
    rig.run()
    waits = [_retried_within(rig, nominal) for nominal in (100, 200, 350, 350)]
    # The third and fourth retries are capped: within [280, 350], never past the maximum.
    assert all(w <= 350 for w in waits[2:]), waits
    _retried_within(rig, 350)
    assert fut.result(0).offset == 1
    assert len(rig.produce_bodies()) == 6


def test_retries_exhausted_fail_the_record_with_the_last_error(make_rig: MakeRig) -> None:
    rig = make_rig({"retries": 2, "retry.backoff.ms": 10, "retry.backoff.max.ms": 10})
    fut = rig.send(partition=1, label="x")
    rig.client.prepare(ApiKey.PRODUCE, produce_response(19), produce_response(19), produce_response(6, message="moved"))
    rig.run_until(fut.done, step_ms=10)
    exc = fut.exception(0)
    assert isinstance(exc, NotLeaderOrFollowerError)
    assert (exc.topic, exc.partition) == ("t", 1)
    assert "moved" in str(exc)
    assert len(rig.produce_bodies()) == 3  # the first attempt and two retries
    assert rig.outcomes.calls == [("x", None, exc)]
    assert rig.producer.metrics()["record-retry-total"] == 2
    assert rig.producer.take_failed_count() == 1


def test_retries_0_fails_at_the_first_retriable_error(make_rig: MakeRig) -> None:
    rig = make_rig({"retries": 0, "enable.idempotence": False})
    fut = rig.send()
    rig.client.prepare(ApiKey.PRODUCE, produce_response(19))
    rig.run()
    assert isinstance(fut.exception(0), NotEnoughReplicasError)
    assert len(rig.produce_bodies()) == 1


def test_a_lost_connection_retries_the_batch(rig: ProducerRig) -> None:
    fut = rig.send(b"d")
    rig.client.prepare(ApiKey.PRODUCE, DISCONNECT, produce_response(0, 4))
    rig.run()
    assert not fut.done()
    rig.run_until(fut.done, step_ms=20)
    assert fut.result(0).offset == 4
    assert rig.values() == [[b"d"], [b"d"]]


def test_a_lost_connection_past_the_retries_fails_with_a_network_error(make_rig: MakeRig) -> None:
    rig = make_rig({"retries": 1, "retry.backoff.ms": 10, "retry.backoff.max.ms": 10})
    fut = rig.send()
    rig.client.prepare(ApiKey.PRODUCE, DISCONNECT, DISCONNECT)
    rig.run_until(fut.done, step_ms=10)
    assert isinstance(fut.exception(0), NetworkError)


def test_one_partition_retrying_does_not_hold_back_another_in_the_same_request(make_rig: MakeRig) -> None:
    rig = make_rig(topics={"t": 4})
    a = rig.send(b"a", partition=0)
    b = rig.send(b"b", partition=2)  # same leader: one request
    rig.client.prepare(ApiKey.PRODUCE, produce_response({TP0: 7}, base_offset=0), produce_response(0, 50))
    rig.run()
    assert b.done() and b.exception(0) is None
    assert not a.done()
    rig.run_until(a.done, step_ms=20)
    assert a.result(0).offset == 50
    assert [tuple(body.partitions) for body in rig.produce_bodies()] == [(TP0, TopicPartition("t", 2)), (TP0,)]


def test_new_records_of_another_partition_go_out_while_one_backs_off(rig: ProducerRig) -> None:
    backing = rig.send(b"a", partition=0)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(6))
    rig.run()
    other = rig.send(b"b", partition=1)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 3))
    rig.run()
    assert other.result(0).offset == 3 and not backing.done()
    assert rig.produce_nodes() == [0, 1]


def test_a_retried_batch_keeps_its_records_and_is_not_merged_with_newer_ones(rig: ProducerRig) -> None:
    first = rig.send(b"a")
    rig.client.prepare(ApiKey.PRODUCE, produce_response(7))
    rig.run()
    later = rig.send(b"b")  # a new batch behind the one backing off
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 10), produce_response(0, 11))
    rig.run_until(lambda: first.done() and later.done(), step_ms=20)
    assert rig.values() == [[b"a"], [b"a"], [b"b"]]
    assert (first.result(0).offset, later.result(0).offset) == (10, 11)


def test_a_retriable_error_is_logged_as_a_retry_not_a_failure(rig: ProducerRig) -> None:
    fut = rig.send()
    rig.client.prepare(ApiKey.PRODUCE, produce_response(6), produce_response(0, 2))
    rig.run_until(fut.done, step_ms=20)
    assert fut.exception(0) is None
    m = rig.producer.metrics()
    assert (m["record-retry-total"], m["record-error-total"]) == (1, 0)
    assert rig.producer.take_failed_count() == 0


def test_the_error_reaches_the_future_as_a_kafka_error_with_its_code(make_rig: MakeRig) -> None:
    rig = make_rig({"retries": 0, "enable.idempotence": False})
    fut = rig.send()
    rig.client.prepare(ApiKey.PRODUCE, produce_response(7))
    rig.run()
    exc = fut.exception(0)
    assert isinstance(exc, KafkaError) and exc.code == 7 and exc.retriable
