"""The partition circuit breaker (KIP-693) and the Sender, on the fake clock: a partition muted by
failures is not drained; after ``mute.retry.interval`` one probe batch goes out, whose success
unmutes the partition and whose failure mutes it for another interval; never-sent keyless batches
leave a muted partition for a healthy one; keyless records avoid it meanwhile.
"""

from __future__ import annotations

from typing import Any

import pytest

from kproducer.circuit_breaker import BreakerState, CircuitBreakManager
from kproducer.errors import PartitionMutedError
from kproducer.network.protocol import ApiKey
from kproducer.structs import TopicPartition
from tests.support.mock_client import produce_response
from tests.support.producer_rig import ProducerRig
from tests.unit.sender.conftest import MakeRig

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
INTERVAL = 1000
#: One failed record in the window mutes the partition (at least 50 % failed of at least one record).
BREAKER: dict[str, Any] = {
    "producer.circuit.breaker.class": "failure_rate",
    "producer.circuit.breaker.trigger.message.count": 1,
    "producer.circuit.breaker.trigger.failure.perc": 50,
    "producer.circuit.breaker.mute.retry.interval": INTERVAL,
    "enable.idempotence": False,
    "retry.backoff.ms": 10,
    "retry.backoff.max.ms": 10,
}


def _breaker_rig(make_rig: MakeRig, **config: Any) -> tuple[ProducerRig, CircuitBreakManager]:
    rig = make_rig({**BREAKER, **config})
    manager = rig.producer.circuit_break_manager
    assert manager is not None
    return rig, manager


def _mute_t0_by_a_failure(rig: ProducerRig, manager: CircuitBreakManager) -> Any:
    fut = rig.send(b"a", partition=0)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(6))  # retriable: the batch waits for the probe
    rig.run()
    assert manager.state(TP0) is BreakerState.OPEN
    return fut


def test_a_muted_partition_is_not_drained_until_its_probe_is_due(make_rig: MakeRig) -> None:
    rig, manager = _breaker_rig(make_rig)
    fut = _mute_t0_by_a_failure(rig, manager)
    for _ in range(9):  # 900 ms: its retry backoff (10 ms) is long over, the mute is not
        rig.clock.advance(100)
        rig.run()
    assert len(rig.produce_bodies()) == 1 and not fut.done()
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 5))
    rig.clock.advance(100)
    rig.run()
    assert fut.result(0).offset == 5
    assert len(rig.produce_bodies()) == 2


def test_a_successful_probe_unmutes_the_partition(make_rig: MakeRig) -> None:
    rig, manager = _breaker_rig(make_rig)
    _mute_t0_by_a_failure(rig, manager)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 5))
    rig.clock.advance(INTERVAL)
    rig.run()
    assert manager.state(TP0) is BreakerState.CLOSED and not manager.is_muted(TP0)
    nxt = rig.send(b"b", partition=0)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 6))
    rig.run()
    assert nxt.result(0).offset == 6


def test_a_failed_probe_mutes_the_partition_for_another_interval(make_rig: MakeRig) -> None:
    rig, manager = _breaker_rig(make_rig)
    fut = _mute_t0_by_a_failure(rig, manager)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(6))
    rig.clock.advance(INTERVAL)
    rig.run()  # the probe fails
    assert manager.state(TP0) is BreakerState.OPEN and len(rig.produce_bodies()) == 2
    rig.clock.advance(INTERVAL - 1)
    rig.run()
    assert len(rig.produce_bodies()) == 2
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 8))
    rig.clock.advance(1)
    rig.run()
    assert fut.result(0).offset == 8 and manager.state(TP0) is BreakerState.CLOSED


def test_keyless_records_go_to_a_healthy_partition_while_one_is_muted(make_rig: MakeRig) -> None:
    rig, manager = _breaker_rig(make_rig)
    _mute_t0_by_a_failure(rig, manager)
    futs = [rig.send(bytes([i]), partition=None) for i in range(10)]
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 0))
    rig.run()
    assert {f.result(0).partition for f in futs} == {1}


def test_a_record_for_an_explicit_muted_partition_fails_with_partition_muted(make_rig: MakeRig) -> None:
    rig, manager = _breaker_rig(make_rig)
    _mute_t0_by_a_failure(rig, manager)
    fut = rig.send(b"x", partition=0)
    exc = fut.exception(0)
    assert isinstance(exc, PartitionMutedError) and (exc.topic, exc.partition) == ("t", 0)


def test_never_sent_keyless_batches_move_off_a_muted_partition(make_rig: MakeRig) -> None:
    rig, manager = _breaker_rig(make_rig, **{"linger.ms": 50})
    manager.mute(TP1)  # so that the keyless records below all go to t-0
    futs = [rig.send(bytes([i]), partition=None, label=i) for i in range(5)]
    rig.run()  # lingering on t-0
    manager.unmute(TP1)
    manager.mute(TP0, retry_after_ms=60_000)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 0))
    rig.run_until(lambda: all(f.done() for f in futs), step_ms=50)
    assert {f.result(0).partition for f in futs} == {1}
    assert [f.result(0).offset for f in futs] == [0, 1, 2, 3, 4]  # moved as one batch, in order
    assert rig.outcomes.labels() == [0, 1, 2, 3, 4]
    assert rig.producer.metrics()["circuit-breaker-moved-records-total"] == 5
    assert [tuple(body.partitions) for body in rig.produce_bodies()] == [(TP1,)]


def test_a_manual_mute_without_a_retry_holds_the_partition_until_unmuted(make_rig: MakeRig) -> None:
    rig, manager = _breaker_rig(make_rig, **{"linger.ms": 0})
    fut = rig.send(b"a", partition=0)
    manager.mute(TP0)
    rig.run(3)
    rig.clock.advance(60_000)
    rig.run()
    assert rig.produce_bodies() == [] and not fut.done()
    manager.unmute(TP0)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 4))
    rig.run()
    assert fut.result(0).offset == 4


@pytest.mark.parametrize("code", [87, 10])  # INVALID_RECORD, MESSAGE_TOO_LARGE (one record: no split)
def test_non_retriable_failures_count_toward_the_mute_too(make_rig: MakeRig, code: int) -> None:
    rig, manager = _breaker_rig(make_rig)
    fut = rig.send(b"a", partition=1)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(code))
    rig.run()
    assert fut.exception(0) is not None
    assert manager.state(TP1) is BreakerState.OPEN
    assert manager.state(TP0) is BreakerState.CLOSED


def test_a_full_in_flight_window_mutes_the_leader_until_its_answer(make_rig: MakeRig) -> None:
    """``enable.mute.inflight.full`` with max.in.flight.requests.per.connection=1: while node 0's one
    request is out its partitions are muted (keyless records go elsewhere); its answer lifts the mute."""
    rig, manager = _breaker_rig(
        make_rig,
        **{"producer.circuit.breaker.enable.mute.inflight.full": True, "max.in.flight.requests.per.connection": 1},
    )
    first = rig.send(b"a", partition=0)
    rig.run()  # in flight to node 0, unanswered
    rig.run()  # the next loop sees node 0's window full
    assert manager.is_muted(TP0)
    keyless = [rig.send(bytes([i]), partition=None) for i in range(3)]
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 1), produce_response(0, 2))
    rig.run_until(lambda: first.done() and all(f.done() for f in keyless))
    assert {f.result(0).partition for f in keyless} == {1}
    rig.run()
    assert not manager.is_muted(TP0)


def test_a_request_timeout_mutes_the_partition_at_request_timeout_ms(make_rig: MakeRig) -> None:
    """A leader that never answers: the request times out after request.timeout.ms, the failure mutes
    the partition at once, and the time-to-mute metric counts from when the request was sent."""
    rig, manager = _breaker_rig(make_rig, **{"request.timeout.ms": 1000, "delivery.timeout.ms": 120_000})
    rig.client.request_timeout_ms = 1000
    fut = rig.send(b"a", partition=0)
    rig.run()
    rig.clock.advance(999)
    rig.run()
    assert manager.state(TP0) is BreakerState.CLOSED
    rig.clock.advance(1)
    rig.run()
    assert manager.state(TP0) is BreakerState.OPEN and not fut.done()
    assert rig.producer.metrics()["circuit-breaker-time-to-mute-max"] == 1000


def test_records_of_a_muted_partition_still_expire_at_the_delivery_timeout(make_rig: MakeRig) -> None:
    rig, manager = _breaker_rig(make_rig, **{"delivery.timeout.ms": 1500, "request.timeout.ms": 1000})
    fut = rig.send(b"a", partition=0)
    manager.mute(TP0)  # no probe: muted until unmuted
    rig.clock.advance(1499)
    rig.run()
    assert not fut.done()
    rig.clock.advance(1)
    rig.run()
    exc = fut.exception(0)
    assert type(exc).__name__ == "KafkaTimeoutError" and "t-0" in str(exc)
    assert rig.produce_bodies() == []


def test_close_lifts_the_mutes_and_sends_what_waited_on_a_muted_partition(make_rig: MakeRig) -> None:
    rig, manager = _breaker_rig(make_rig)
    fut = rig.send(b"a", partition=0)
    manager.mute(TP0)
    rig.run()
    assert rig.produce_bodies() == []
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 3))
    rig.producer.close()
    assert fut.result(0).offset == 3
