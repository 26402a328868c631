"""Ordering: with max.in.flight.requests.per.connection=1 a partition has one batch in flight at a
time, and a retried batch goes out again before any later batch of its partition (Java's
``testSendInOrder``); with idempotence and up to five in flight, retries go back in sequence order.
"""

from __future__ import annotations

from kproducer.network.protocol import ApiKey
from kproducer.structs import TopicPartition
from tests.support.mock_client import DISCONNECT, produce_response
from tests.support.producer_rig import ProducerRig
from tests.unit.sender.conftest import MakeRig

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
ONE_IN_FLIGHT = {"max.in.flight.requests.per.connection": 1, "enable.idempotence": False, "retries": 5}


def _one_in_flight(make_rig: MakeRig, **extra: object) -> ProducerRig:
    rig = make_rig({**ONE_IN_FLIGHT, **extra})
    # The network would take more requests: what holds the next batch back is the Sender's partition mute.
    rig.client.max_in_flight = 5
    return rig


def test_one_batch_of_a_partition_in_flight_at_a_time(make_rig: MakeRig) -> None:
    rig = _one_in_flight(make_rig)
    a = rig.send(b"a")
    rig.run()
    b = rig.send(b"b")
    rig.run(3)
    assert rig.values() == [[b"a"]]
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 0), produce_response(0, 1))
    rig.run()
    assert a.done() and not b.done()
    rig.run()
    assert rig.values() == [[b"a"], [b"b"]]
    assert b.result(0).offset == 1


def test_a_retry_is_sent_before_the_next_batch_of_its_partition(make_rig: MakeRig) -> None:
    rig = _one_in_flight(make_rig, **{"retry.backoff.ms": 100, "retry.backoff.max.ms": 100})
    a = rig.send(b"a", label="a")
    rig.run()
    b = rig.send(b"b", label="b")
    rig.client.prepare(ApiKey.PRODUCE, produce_response(6))
    rig.run()  # a fails retriably; b must not overtake it while a backs off
    rig.run()
    assert rig.values() == [[b"a"]]
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 10), produce_response(0, 11))
    rig.run_until(lambda: a.done() and b.done(), step_ms=50)
    assert rig.values() == [[b"a"], [b"a"], [b"b"]]
    assert rig.outcomes.calls == [("a", 10, None), ("b", 11, None)]


def test_a_lost_connection_keeps_the_order_too(make_rig: MakeRig) -> None:
    rig = _one_in_flight(make_rig)
    a = rig.send(b"a", label="a")
    rig.run()
    b = rig.send(b"b", label="b")
    rig.client.prepare(ApiKey.PRODUCE, DISCONNECT, produce_response(0, 0), produce_response(0, 1))
    rig.run_until(lambda: a.done() and b.done(), step_ms=50)
    assert rig.values() == [[b"a"], [b"a"], [b"b"]]
    assert rig.outcomes.calls == [("a", 0, None), ("b", 1, None)]


def test_the_mute_is_per_partition_other_partitions_keep_going(make_rig: MakeRig) -> None:
    rig = _one_in_flight(make_rig)
    rig.send(b"a", partition=0)
    rig.run()  # t-0 in flight, unanswered
    other = rig.send(b"b", partition=1)
    rig.client.prepare(ApiKey.PRODUCE)
    rig.run()
    assert rig.produce_nodes() == [0, 1]
    assert not other.done()


def test_records_of_one_partition_are_acknowledged_in_send_order_across_many_retries(make_rig: MakeRig) -> None:
    rig = _one_in_flight(make_rig, **{"retry.backoff.ms": 10, "retry.backoff.max.ms": 10, "batch.size": 1024, "batch.max.size": 1024})
    labels = list(range(6))
    for i in labels:
        rig.send(bytes([i]) * 600, label=i)  # one record a batch
    answers = []
    for i in labels:
        answers += [produce_response(7), produce_response(0, i)]  # every batch fails once, then succeeds
    rig.client.prepare(ApiKey.PRODUCE, *answers)
    rig.run_until(lambda: len(rig.outcomes.calls) == 6, loops=200, step_ms=10)
    assert rig.outcomes.labels() == labels
    assert [o for _l, o, _e in rig.outcomes.calls] == labels
    assert [(b[0] or b"")[:1] for b in rig.values()] == [bytes([i]) for i in labels for _ in (0, 1)]


def test_idempotent_retries_of_several_in_flight_batches_go_back_in_sequence_order(rig: ProducerRig) -> None:
    futs = []
    for i in range(3):
        futs.append(rig.send(bytes([i])))
        rig.run()  # one batch a request, all three in flight
    assert [s[2] for s in rig.sequences()] == [0, 1, 2]
    rig.client.prepare(ApiKey.PRODUCE, produce_response(6), produce_response(6), produce_response(6))
    rig.run()
    rig.client.prepare(ApiKey.PRODUCE, *[produce_response(0, i) for i in range(3)])
    rig.run_until(lambda: all(f.done() for f in futs), step_ms=20)
    assert [s[2] for s in rig.sequences()] == [0, 1, 2, 0, 1, 2]
    assert [f.result(0).offset for f in futs] == [0, 1, 2]
