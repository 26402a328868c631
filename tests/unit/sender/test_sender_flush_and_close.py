"""flush() and close() with the Sender driven by the test: flush sends lingering batches at once and
returns when every record completed; a graceful close drains what is queued and in flight first;
close(0) (Java's close(Duration.ZERO)) fails whatever is left with ProducerClosedError.

flush() blocks its caller, so it runs on a helper thread; the test waits for the wakeup flush()
gives the Sender (a latch, not a timer), then drives the Sender until flush() returns.
"""

from __future__ import annotations

import pytest

from kproducer.errors import KafkaError, ProducerClosedError
from kproducer.network.protocol import ApiKey
from kproducer.structs import TopicPartition
from tests.support.latch import LATCH_S
from tests.support.mock_client import produce_response
from tests.support.producer_rig import ProducerRig
from tests.unit.sender.conftest import MakeRig, flush_in_thread

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def test_flush_sends_lingering_batches_now_and_returns_when_they_complete(make_rig: MakeRig) -> None:
    rig = make_rig({"linger.ms": 60_000})
    futs = [rig.send(partition=p) for p in (0, 1, 0)]
    rig.run()
    assert rig.produce_bodies() == []  # lingering
    thread, result = flush_in_thread(rig)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 1), produce_response(0, 2))
    rig.run()  # the clock has not moved: only the flush makes them ready
    thread.join(LATCH_S)
    assert result == [0]
    assert all(f.done() and f.exception(0) is None for f in futs)
    assert len(rig.produce_bodies()) == 2


def test_flush_waits_for_a_retry_too(make_rig: MakeRig) -> None:
    rig = make_rig({"linger.ms": 60_000, "retry.backoff.ms": 100, "retry.backoff.max.ms": 100})
    fut = rig.send()
    thread, result = flush_in_thread(rig)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(6))
    rig.run()
    assert not fut.done() and thread.is_alive()
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 3))
    rig.clock.advance(100)
    rig.run()
    thread.join(LATCH_S)
    assert result == [0] and fut.result(0).offset == 3


def test_flush_counts_failed_records_as_completed(make_rig: MakeRig) -> None:
    rig = make_rig({"linger.ms": 60_000, "enable.idempotence": False})
    fut = rig.send()
    thread, result = flush_in_thread(rig)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(87))
    rig.run()
    thread.join(LATCH_S)
    assert result == [0] and isinstance(fut.exception(0), KafkaError)
    assert rig.producer.take_failed_count() == 1


def test_flush_with_no_time_left_returns_what_has_not_completed(make_rig: MakeRig) -> None:
    rig = make_rig({"linger.ms": 60_000})
    for _ in range(3):
        rig.send()
    assert rig.producer.flush(0) == 3


def test_close_sends_what_is_queued_and_waits_for_what_is_in_flight(make_rig: MakeRig) -> None:
    rig = make_rig({"linger.ms": 60_000})
    in_flight = rig.send(partition=1)
    rig.clock.advance(60_000)
    rig.run()
    assert len(rig.client.pending(ApiKey.PRODUCE)) == 1
    queued = rig.send(partition=0)  # lingering
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 7), produce_response(0, 8))
    rig.producer.close()
    assert in_flight.exception(0) is None and queued.exception(0) is None
    assert sorted(f.result(0).offset for f in (in_flight, queued)) == [7, 8]
    assert rig.client.closed


def test_close_0_fails_queued_and_in_flight_records_with_producer_closed(make_rig: MakeRig) -> None:
    rig = make_rig({"linger.ms": 0})
    in_flight = rig.send(b"a", partition=0, label="a")
    rig.run()
    rig.client.unready.add(1)
    queued = rig.send(b"b", partition=1, label="b")
    sent_before = len(rig.client.sent)
    rig.producer.close(0)
    for fut in (in_flight, queued):
        assert isinstance(fut.exception(0), ProducerClosedError)
    assert sorted(rig.outcomes.labels()) == ["a", "b"]
    assert len(rig.client.sent) == sent_before  # nothing new went out
    assert rig.client.closed


def test_send_after_close_fails(rig: ProducerRig) -> None:
    rig.producer.close()
    with pytest.raises(KafkaError, match="closed"):
        rig.send()


def test_close_0_fails_parked_records_saying_their_metadata_never_came(make_rig: MakeRig) -> None:
    rig = make_rig({"enable.idempotence": False}, serve_metadata=False, known_topics=False)
    fut = rig.send(topic="t")
    rig.producer.close(0)
    exc = fut.exception(0)
    assert isinstance(exc, ProducerClosedError) and "metadata" in str(exc)


def test_an_answer_arriving_after_close_0_changes_nothing(make_rig: MakeRig) -> None:
    rig = make_rig()
    fut = rig.send()
    rig.run()
    rig.producer.close(0)
    assert isinstance(fut.exception(0), ProducerClosedError)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 1))
    rig.client.poll(0, rig.clock())  # the late answer reaches the Sender's callback
    assert isinstance(fut.exception(0), ProducerClosedError)
