"""Produce requests and their answers: offsets, callbacks, what each request carries, on the scripted client.

Java's SenderTest ``testSimple``, ``testDoNotPollWhenNoRequestSent`` and the metrics tests, driven
through ``Producer.run_sender_once()`` (tests/support/producer_rig.py).
"""

from __future__ import annotations

import logging

import pytest

from kproducer.network.protocol import ApiKey
from kproducer.structs import TopicPartition
from tests.support.mock_client import produce_response
from tests.support.producer_rig import ProducerRig
from tests.unit.sender.conftest import MakeRig

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def test_one_record_is_delivered_at_the_offset_the_leader_gave(rig: ProducerRig) -> None:
    fut = rig.send(b"a", label="a")
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, base_offset=42))
    rig.run()
    md = fut.result(0)
    assert (md.topic, md.partition, md.offset) == ("t", 0, 42)
    assert rig.outcomes.calls == [("a", 42, None)]
    assert rig.produce_nodes() == [0]  # partition 0's leader
    body = rig.produce_bodies()[0]
    assert (body.acks, body.timeout_ms, body.transactional_id) == (-1, rig.config.request_timeout_ms, None)
    assert rig.values() == [[b"a"]]


def test_records_of_one_batch_get_consecutive_offsets_and_callbacks_in_send_order(make_rig: MakeRig) -> None:
    rig = make_rig({"linger.ms": 50})
    futs = [rig.send(bytes([65 + i]), label=i) for i in range(5)]
    rig.run()
    assert rig.produce_bodies() == []  # lingering
    rig.clock.advance(50)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, base_offset=100))
    rig.run()
    assert [f.result(0).offset for f in futs] == [100, 101, 102, 103, 104]
    assert rig.outcomes.labels() == [0, 1, 2, 3, 4]
    assert rig.values() == [[b"A", b"B", b"C", b"D", b"E"]]


def test_partitions_of_different_leaders_go_in_one_request_per_leader(rig: ProducerRig) -> None:
    a = rig.send(b"a", partition=0)
    b = rig.send(b"b", partition=1)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 10), produce_response(0, 20))
    rig.run()
    assert sorted(rig.produce_nodes()) == [0, 1]
    assert sorted(tuple(body.partitions) for body in rig.produce_bodies()) == [(TP0,), (TP1,)]
    assert {a.result(0).offset, b.result(0).offset} == {10, 20}


def test_partitions_of_one_leader_share_a_request(make_rig: MakeRig) -> None:
    rig = make_rig(topics={"t": 4})  # partitions 0 and 2 are led by node 0
    futs = {p: rig.send(b"x", partition=p) for p in (0, 2)}
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 500))
    rig.run()
    bodies = rig.produce_bodies()
    assert len(bodies) == 1 and set(bodies[0].partitions) == {TP0, TopicPartition("t", 2)}
    assert rig.produce_nodes() == [0]
    # produce_response gives the i-th partition of the request base_offset + 100 * i.
    assert sorted(f.result(0).offset for f in futs.values()) == [500, 600]


def test_acks_1_asks_the_leader_only(make_rig: MakeRig) -> None:
    rig = make_rig({"acks": 1, "enable.idempotence": False})
    fut = rig.send()
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 3))
    rig.run()
    assert rig.produce_bodies()[0].acks == 1
    assert fut.result(0).offset == 3
    assert rig.client.requests(ApiKey.INIT_PRODUCER_ID) == []  # not idempotent: no producer id


def test_acks_0_completes_when_sent_with_no_offset(make_rig: MakeRig) -> None:
    rig = make_rig({"acks": 0, "enable.idempotence": False})
    fut = rig.send(label="x")
    rig.run()  # no answer is scripted: none is expected
    assert fut.result(0).offset == -1
    assert rig.outcomes.calls == [("x", -1, None)]
    assert rig.client.pending() == []


def test_a_non_idempotent_batch_carries_no_producer_id_or_sequence(make_rig: MakeRig) -> None:
    rig = make_rig({"enable.idempotence": False})
    rig.send()
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0))
    rig.run()
    assert rig.sequences() == [(-1, -1, -1, 1)]


def test_a_lingering_batch_goes_out_when_linger_ms_has_passed(make_rig: MakeRig) -> None:
    rig = make_rig({"linger.ms": 100})
    fut = rig.send()
    rig.run()
    rig.clock.advance(99)
    rig.run()
    assert rig.produce_bodies() == []
    rig.clock.advance(1)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 8))
    rig.run()
    assert fut.result(0).offset == 8


def test_a_full_batch_goes_out_before_linger_ms(make_rig: MakeRig) -> None:
    rig = make_rig({"linger.ms": 60_000, "batch.size": 1024, "batch.max.size": 1024})
    futs = [rig.send(bytes(300)) for _ in range(4)]  # the fourth record opens a second batch
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 0))
    rig.run()
    assert [b.record_count for b in rig.batches()] == [3]  # the full one only
    assert [f.done() for f in futs] == [True, True, True, False]


def test_the_sender_does_not_spin_when_nothing_is_sendable(make_rig: MakeRig) -> None:
    rig = make_rig({"linger.ms": 100})
    rig.send()
    rig.client.poll_timeouts.clear()
    rig.run()
    # Nothing is ready yet: the poll waits for the linger to pass, no longer and not zero.
    assert rig.client.poll_timeouts[-1] == 100


def test_a_callback_that_raises_does_not_stop_the_others(make_rig: MakeRig, caplog: pytest.LogCaptureFixture) -> None:
    rig = make_rig({"linger.ms": 10})
    seen: list[int] = []

    def bad(_md: object, _exc: object) -> None:
        raise RuntimeError("callback bug")

    rig.producer.send("t", b"a", partition=0, callback=bad)
    rig.producer.send("t", b"b", partition=0, callback=lambda md, exc: seen.append(md.offset if md is not None else -2))
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 5))
    rig.clock.advance(10)
    with caplog.at_level(logging.ERROR):
        rig.run()
    assert seen == [6]  # the second record of the batch
    assert "callback bug" in caplog.text
    nxt = rig.send(b"c")
    rig.clock.advance(10)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 20))
    rig.run()
    assert nxt.result(0).offset == 20  # the Sender goes on


def test_send_metrics_count_records_and_requests(rig: ProducerRig) -> None:
    for _ in range(3):
        rig.send(partition=0)
    rig.send(partition=1)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0), produce_response(0))
    rig.run()
    m = rig.producer.metrics()
    assert m["record-send-total"] == 4
    assert m["record-error-total"] == 0
    assert m["batch-size-avg"] > 0


def test_a_throttled_answer_is_recorded_in_the_throttle_metrics(rig: ProducerRig) -> None:
    """KIP-219: the broker's throttle time of a Produce answer shows in produce-throttle-time-avg/max."""
    fut = rig.send()
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 1, throttle_time_ms=250))
    rig.run()
    assert fut.result(0).offset == 1
    m = rig.producer.metrics()
    assert m["produce-throttle-time-max"] == 250


def test_a_record_sent_from_a_delivery_callback_goes_out_in_a_later_loop(rig: ProducerRig) -> None:
    chained: list[object] = []

    def send_next(md: object, exc: BaseException | None) -> None:
        if exc is None and not chained:
            chained.append(rig.producer.send("t", b"next", partition=0))

    rig.producer.send("t", b"first", partition=0, callback=send_next)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 1), produce_response(0, 2))
    rig.run(2)
    assert chained and chained[0].result(0).offset == 2  # type: ignore[attr-defined]
    assert rig.values() == [[b"first"], [b"next"]]
    assert [s[2] for s in rig.sequences()] == [0, 1]


@pytest.mark.parametrize("compression", ["none", "lz4"])
def test_record_size_max_is_the_largest_record_sent_and_avg_each_batch_mean(make_rig: MakeRig, compression: str) -> None:
    """Java's record-size-max: the largest record of the batches sent (as encoded, before compression),
    on every path alike; record-size-avg counts each batch's mean record size."""
    from kproducer.record.default_record import encode_record

    rig = make_rig({"linger.ms": 50, "compression.type": compression})
    values = [b"a" * 10, b"b" * 500, b"c" * 20]
    futs = [rig.producer.send("t", v, None, partition=0, timestamp=1_700_000_000_000) for v in values]
    rig.clock.advance(50)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, base_offset=0))
    rig.run()
    assert [f.result(0).offset for f in futs] == [0, 1, 2]
    encoded = [encode_record(i, 0, None, v, b"\x00") for i, v in enumerate(values)]
    metrics = rig.producer.metrics()
    assert metrics["record-size-max"] == len(encoded[1])  # the 500-byte value's record, not the mean
    assert metrics["record-size-avg"] == pytest.approx(sum(map(len, encoded)) / 3)


def test_after_a_drain_that_left_nothing_the_sender_waits_for_the_next_deadline(make_rig: MakeRig) -> None:
    """Java loops again at once after every drain; here only a batch left behind makes the poll 0."""
    rig = make_rig({"linger.ms": 100}, nodes=1)
    rig.send(partition=0)
    rig.clock.advance(40)
    rig.send(partition=1)  # sendable 60 ms after the first
    rig.clock.advance(60)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 0))
    rig.client.poll_timeouts.clear()
    rig.run()
    # The first batch's linger passed: both went in one request (Java's drain takes every partition
    # of a ready leader), and nothing is left to send, so the poll waits instead of spinning.
    (body,) = rig.produce_bodies()
    assert sorted(body.partitions) == [TopicPartition("t", 0), TopicPartition("t", 1)]
    assert rig.client.poll_timeouts[-1] > 0


def test_after_a_drain_that_left_a_batch_behind_the_sender_loops_at_once(make_rig: MakeRig) -> None:
    rig = make_rig({"linger.ms": 60_000, "batch.size": 1024, "batch.max.size": 1024})
    for _ in range(7):  # three full batches' worth on one partition: the drain takes the first only
        rig.send(bytes(300))
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 0))
    rig.client.poll_timeouts.clear()
    rig.run()
    assert [b.record_count for b in rig.batches()] == [3]
    assert rig.client.poll_timeouts[-1] == 0


def test_a_new_batch_tells_the_sender_when_it_becomes_sendable(make_rig: MakeRig) -> None:
    """Not full and alone in its deque, a new batch needs the Sender by linger.ms (NetworkClient.wakeup_by)."""
    rig = make_rig({"linger.ms": 25, "batch.size": 1024, "batch.max.size": 1024})
    wakeups = rig.client.wakeups
    rig.send(bytes(300))
    assert rig.client.wakeup_deadlines == [rig.clock() + 25]
    rig.send(bytes(300))  # appended to the open batch: nobody is told
    rig.send(bytes(300))
    assert (rig.client.wakeups - wakeups, rig.client.wakeup_deadlines) == (1, [rig.clock() + 25])
    rig.send(bytes(300))  # no room: a new batch behind the closed one, which is sendable now
    assert (rig.client.wakeups - wakeups, len(rig.client.wakeup_deadlines)) == (2, 1)
