"""delivery.timeout.ms and request.timeout.ms on the fake clock.

A batch fails with KafkaTimeoutError once delivery.timeout.ms has passed since it was created,
whether it waits in the accumulator (its leader unreachable, or backing off) or is in flight (its
request never answered: in-flight expiry, Java's ``testInflightBatchesExpireOnDeliveryTimeout``).
An in-flight request unanswered for request.timeout.ms fails as a lost connection: retried,
and the topic's metadata refreshed.
"""

from __future__ import annotations

from kproducer.errors import KafkaTimeoutError
from kproducer.network.protocol import ApiKey
from kproducer.structs import TopicPartition
from tests.support.mock_client import produce_response
from tests.unit.sender.conftest import MakeRig

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
TIMEOUTS = {"delivery.timeout.ms": 1500, "request.timeout.ms": 1000, "linger.ms": 0}


def _expiry(fut: object) -> KafkaTimeoutError:
    exc = fut.exception(0)  # type: ignore[attr-defined]
    assert isinstance(exc, KafkaTimeoutError), exc
    return exc


def test_a_batch_whose_leader_is_unreachable_expires_at_the_delivery_timeout(make_rig: MakeRig) -> None:
    rig = make_rig(TIMEOUTS)
    rig.client.unready.add(1)
    fut = rig.send(partition=1, label="x")
    rig.clock.advance(1499)
    rig.run()
    assert not fut.done()
    rig.clock.advance(1)
    rig.run()
    exc = _expiry(fut)
    assert (exc.topic, exc.partition) == ("t", 1)
    assert "delivery.timeout.ms=1500" in str(exc) and "t-1" in str(exc)
    assert rig.produce_bodies() == []
    assert rig.outcomes.calls == [("x", None, exc)]


def test_a_batch_created_later_expires_later(make_rig: MakeRig) -> None:
    rig = make_rig({**TIMEOUTS, "batch.size": 1024, "batch.max.size": 1024})
    rig.client.unready.add(1)
    stuck = rig.send(bytes(1000), partition=1)  # fills its batch
    rig.clock.advance(1000)
    fresh = rig.send(bytes(1000), partition=1)  # a second batch, 500 ms left
    rig.clock.advance(500)
    rig.run()
    _expiry(stuck)
    assert not fresh.done()
    rig.client.unready.discard(1)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 3))
    rig.run()
    assert fresh.result(0).offset == 3


def test_batches_of_several_partitions_expire_together(make_rig: MakeRig) -> None:
    rig = make_rig(TIMEOUTS)
    rig.client.unready.update({0, 1})
    futs = [rig.send(partition=p) for p in (0, 1)]
    rig.clock.advance(1500)
    rig.run()
    assert [(_expiry(f).topic, _expiry(f).partition) for f in futs] == [("t", 0), ("t", 1)]


def test_an_in_flight_batch_expires_while_its_request_is_unanswered(make_rig: MakeRig) -> None:
    rig = make_rig(TIMEOUTS)
    fut = rig.send(label="x")
    rig.run()  # sent; no answer scripted
    assert len(rig.client.pending(ApiKey.PRODUCE)) == 1
    rig.clock.advance(1499)
    rig.run()
    assert not fut.done()
    rig.clock.advance(1)
    rig.run()
    _expiry(fut)
    assert len(rig.client.pending(ApiKey.PRODUCE)) == 1  # the request itself is still out
    # Its late answer changes nothing: the record completed once, with the timeout.
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 9))
    rig.run()
    _expiry(fut)
    assert len(rig.outcomes.calls) == 1


def test_an_expired_in_flight_batch_is_not_split_on_message_too_large(make_rig: MakeRig) -> None:
    rig = make_rig({**TIMEOUTS, "linger.ms": 5, "enable.idempotence": False})
    futs = [rig.send(bytes(10)) for _ in range(3)]
    rig.clock.advance(5)
    rig.run()
    rig.clock.advance(1500)
    rig.run()
    assert all(isinstance(f.exception(0), KafkaTimeoutError) for f in futs)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(10))
    rig.run(3)
    assert len(rig.produce_bodies()) == 1  # no split parts went out
    assert all(isinstance(f.exception(0), KafkaTimeoutError) for f in futs)


def test_a_batch_backing_off_past_the_delivery_timeout_is_not_retried(make_rig: MakeRig) -> None:
    rig = make_rig({**TIMEOUTS, "retry.backoff.ms": 1000, "retry.backoff.max.ms": 1000})
    fut = rig.send()
    rig.client.prepare(ApiKey.PRODUCE, produce_response(6))
    rig.clock.advance(1000)  # the batch is 1000 ms old when its answer comes
    rig.run()
    assert not fut.done()
    rig.clock.advance(500)  # 1500 ms old, still backing off
    rig.run()
    _expiry(fut)
    rig.clock.advance(1000)
    rig.run()
    assert len(rig.produce_bodies()) == 1


def test_a_retriable_error_after_the_delivery_timeout_fails_instead_of_retrying(make_rig: MakeRig) -> None:
    rig = make_rig({**TIMEOUTS, "delivery.timeout.ms": 2000})
    fut = rig.send()
    rig.run()  # in flight
    rig.clock.advance(1999)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(6))
    rig.run()  # the error arrives 1999 ms in: still time for a retry
    assert not fut.done()
    rig.clock.advance(1)
    rig.run()
    _expiry(fut)
    assert len(rig.produce_bodies()) == 1


def test_the_delivery_timeout_counts_the_linger(make_rig: MakeRig) -> None:
    rig = make_rig({"delivery.timeout.ms": 1500, "request.timeout.ms": 1000, "linger.ms": 400})
    rig.client.unready.add(0)
    fut = rig.send()
    rig.clock.advance(1499)
    rig.run()
    assert not fut.done()
    rig.clock.advance(1)
    rig.run()
    _expiry(fut)


def test_an_unanswered_request_times_out_and_the_batch_is_retried(make_rig: MakeRig) -> None:
    rig = make_rig({"delivery.timeout.ms": 120_000, "request.timeout.ms": 1000, "retry.backoff.ms": 100, "retry.backoff.max.ms": 100})
    rig.client.request_timeout_ms = 1000
    fut = rig.send(b"q")
    rig.run()
    rig.clock.advance(999)
    rig.run()
    assert len(rig.produce_bodies()) == 1 and not fut.done()
    before = len(rig.client.metadata_requests)
    rig.clock.advance(1)
    rig.run()  # timed out: back to the queue, the topic marked for a refresh
    assert not fut.done()
    rig.run()
    assert len(rig.client.metadata_requests) > before and rig.client.metadata_requests[-1] == ["t"]
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 12))
    rig.run_until(fut.done, step_ms=50)
    assert fut.result(0).offset == 12
    assert rig.values() == [[b"q"], [b"q"]]


def test_request_timeouts_past_the_retries_fail_with_a_timeout(make_rig: MakeRig) -> None:
    rig = make_rig({"retries": 1, "request.timeout.ms": 1000, "delivery.timeout.ms": 120_000, "enable.idempotence": False})
    rig.client.request_timeout_ms = 1000
    fut = rig.send()
    rig.run_until(fut.done, loops=100, step_ms=100)
    _expiry(fut)
    assert len(rig.produce_bodies()) == 2


def test_the_first_batch_expiring_in_flight_holds_the_next_under_max_in_flight_1(make_rig: MakeRig) -> None:
    """Java's testWhenFirstBatchExpireNoSendSecondBatchIfGuaranteeOrder: the partition stays muted until
    the expired batch's request completes, so the second batch cannot overtake it."""
    rig = make_rig({**TIMEOUTS, "max.in.flight.requests.per.connection": 1, "enable.idempotence": False})
    rig.client.max_in_flight = 5  # the network would allow more: the Sender's own mute must hold it
    first = rig.send(b"1")
    rig.run()
    rig.clock.advance(1000)
    second = rig.send(b"2")
    rig.clock.advance(500)
    rig.run()
    _expiry(first)
    assert not second.done()
    assert rig.values() == [[b"1"]]
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 0), produce_response(0, 1))
    rig.run()  # the first request's answer unmutes the partition
    rig.run()
    assert rig.values() == [[b"1"], [b"2"]]
    assert second.result(0).offset == 1


def test_expiry_frees_the_memory_of_queued_batches(make_rig: MakeRig) -> None:
    rig = make_rig({**TIMEOUTS, "buffer.memory": 64 * 1024, "batch.size": 16 * 1024})
    rig.client.unready.add(0)
    for _ in range(3):
        rig.send(bytes(16_000))
    assert rig.producer.metrics()["buffer-available-bytes"] < 64 * 1024
    rig.clock.advance(1500)
    rig.run()
    assert rig.producer.metrics()["buffer-available-bytes"] == 64 * 1024




def test_a_record_sent_from_an_expiry_callback_is_delivered(make_rig: MakeRig) -> None:
    """Java's testAppendInExpiryCallback: callbacks run on the Sender's thread, inside its loop; a
    send() there appends to the accumulator the loop is walking, and the record still goes out."""
    rig = make_rig(TIMEOUTS)
    rig.client.unready.add(0)
    again: list[object] = []

    def resend(_md: object, exc: BaseException | None) -> None:
        if exc is not None:
            again.append(rig.producer.send("t", b"again", partition=1))

    rig.producer.send("t", b"first", partition=0, callback=resend)
    rig.clock.advance(1500)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 6))
    rig.run(2)
    assert len(again) == 1
    assert again[0].result(0).offset == 6  # type: ignore[attr-defined]
    assert rig.values(TP1) == [[b"again"]]
