"""Records sent to a topic whose metadata is not known yet are parked; when the metadata arrives the
Sender appends them in the order they were sent, before any record sent after them (Java blocks
send() in waitOnMetadata instead; the order a caller sees is the same).

The scripted client here answers metadata only when the test says (``answer_metadata``), so that
a test can let the metadata arrive between two loops of the Sender, or between two sends.
"""

from __future__ import annotations

from typing import Any

from kproducer.errors import KafkaTimeoutError, UnknownTopicOrPartitionError
from kproducer.network.protocol import ApiKey
from kproducer.structs import TopicPartition
from tests.support.mock_client import produce_response
from tests.support.producer_rig import ProducerRig
from tests.unit.sender.conftest import MakeRig

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


def _parking_rig(make_rig: MakeRig, **config: Any) -> ProducerRig:
    """A producer that knows the brokers but no topic; the client answers metadata only on demand."""
    rig = make_rig(config, init=False, serve_metadata=False, known_topics=False, topics={"t": 2, "u": 1})
    rig.client.answer_metadata()  # the brokers only: what bootstrapping gives
    if rig.config.enable_idempotence:
        rig.init_producer_id()
    return rig


def test_parked_records_go_out_in_send_order_when_the_metadata_arrives(make_rig: MakeRig) -> None:
    rig = _parking_rig(make_rig)
    futs = [rig.send(bytes([i]), partition=0, label=i) for i in range(5)]
    rig.run(2)
    assert rig.produce_bodies() == [] and not any(f.done() for f in futs)
    rig.client.answer_metadata()
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 10))
    rig.run()
    assert rig.values() == [[bytes([i]) for i in range(5)]]
    assert [f.result(0).offset for f in futs] == [10, 11, 12, 13, 14]
    assert rig.outcomes.labels() == [0, 1, 2, 3, 4]


def test_records_sent_after_the_metadata_arrived_queue_behind_the_parked_ones(make_rig: MakeRig) -> None:
    rig = _parking_rig(make_rig)
    parked = [rig.send(b"p1", label="p1"), rig.send(b"p2", label="p2")]
    rig.client.answer_metadata()  # arrives on the I/O thread; the Sender has not released them yet
    later = rig.send(b"later", label="later")
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 0), produce_response(0, 3))
    rig.run_until(lambda: later.done() and all(f.done() for f in parked))
    sent = [v for batch in rig.values() for v in batch]
    assert sent == [b"p1", b"p2", b"later"]
    assert rig.outcomes.labels() == ["p1", "p2", "later"]
    assert parked[0].result(0).offset < parked[1].result(0).offset < later.result(0).offset


def test_keyless_parked_records_keep_their_order_with_idempotence(make_rig: MakeRig) -> None:
    rig = _parking_rig(make_rig, **{"enable.idempotence": True})
    futs = [rig.send(bytes([i]), partition=None, label=i) for i in range(4)]
    rig.client.answer_metadata()
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 0), produce_response(0, 0))
    rig.run_until(lambda: all(f.done() for f in futs))
    assert all(f.exception(0) is None for f in futs)
    assert rig.outcomes.labels() == [0, 1, 2, 3]
    # Sticky partitioning keeps them together: one batch, sequence 0, in send order.
    tps = {TopicPartition("t", f.result(0).partition) for f in futs}
    assert len(tps) == 1
    tp = tps.pop()
    assert rig.values(tp) == [[bytes([i]) for i in range(4)]]
    assert rig.sequences(tp)[0][2] == 0


def test_each_topic_is_released_when_its_own_metadata_arrives(make_rig: MakeRig) -> None:
    rig = _parking_rig(make_rig)
    rig.client.broker_topics.pop("u")  # u does not exist yet
    t = rig.send(b"t", topic="t")
    u = rig.send(b"u", topic="u")
    rig.client.answer_metadata()
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 1))
    rig.run()
    assert t.result(0).offset == 1 and not u.done()
    rig.client.broker_topics["u"] = 1  # created
    rig.clock.advance(1000)  # past u's metadata retry backoff (it was unknown)
    assert "u" in (rig.client.answer_metadata() or [])
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 2))
    rig.run()
    assert u.result(0).offset == 2


def test_a_record_for_a_partition_beyond_the_known_count_parks_until_it_exists(make_rig: MakeRig) -> None:
    rig = _parking_rig(make_rig)
    rig.client.answer_metadata()  # nothing to ask about yet
    first = rig.send(b"a", partition=0)
    rig.client.answer_metadata()  # t known, 2 partitions
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 1))
    rig.run()
    assert first.done()
    rig.client.broker_topics["t"] = 4  # partitions added
    fut = rig.send(b"p3", partition=3)
    rig.run()
    assert not fut.done()
    rig.client.answer_metadata()
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 7))
    rig.run()
    assert fut.result(0).offset == 7 and fut.result(0).partition == 3


def test_parked_records_fail_at_max_block_ms_when_the_topic_never_appears(make_rig: MakeRig) -> None:
    rig = _parking_rig(make_rig, **{"max.block.ms": 2000})
    rig.client.broker_topics.clear()
    futs = [rig.send(bytes([i]), topic="missing", label=i) for i in range(3)]
    rig.client.answer_metadata()  # UNKNOWN_TOPIC_OR_PARTITION
    rig.clock.advance(1999)
    rig.run()
    assert not any(f.done() for f in futs)
    rig.clock.advance(1)
    rig.run()
    for f in futs:
        exc = f.exception(0)
        # The brokers said the topic does not exist: that is the error, with max.block.ms in it.
        assert isinstance(exc, UnknownTopicOrPartitionError) and exc.topic == "missing"
        assert "max.block.ms" in str(exc)
    assert rig.outcomes.labels() == [0, 1, 2]
    assert rig.produce_bodies() == []


def test_parked_records_fail_with_a_timeout_when_no_metadata_answer_comes(make_rig: MakeRig) -> None:
    rig = _parking_rig(make_rig, **{"max.block.ms": 2000})
    fut = rig.send(b"x", topic="t")
    rig.clock.advance(2000)
    rig.run()
    exc = fut.exception(0)
    assert isinstance(exc, KafkaTimeoutError) and "'t'" in str(exc) and "2000 ms" in str(exc)


def test_parked_records_for_two_partitions_keep_the_order_within_each(make_rig: MakeRig) -> None:
    rig = _parking_rig(make_rig)
    for i in range(6):
        rig.send(bytes([i]), partition=i % 2, label=i)
    rig.client.answer_metadata()
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 0), produce_response(0, 0))
    rig.run_until(lambda: len(rig.outcomes.calls) == 6)
    assert rig.values(TP0) == [[b"\x00", b"\x02", b"\x04"]]
    assert rig.values(TP1) == [[b"\x01", b"\x03", b"\x05"]]


def test_parked_records_go_out_in_the_loop_whose_poll_brought_their_metadata(make_rig: MakeRig) -> None:
    """The Sender sends the metadata request before its ready/drain pass and releases the parked
    records as soon as the answer is in: they are drained in that same loop, not a poll later."""
    rig = make_rig({"enable.idempotence": False}, known_topics=False)  # the client answers metadata when due
    rig.client.answer_metadata()  # the brokers only
    futs = [rig.send(bytes([i]), partition=0) for i in range(3)]
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 30))
    asked = len(rig.client.metadata_requests)
    rig.clock.advance(100)  # past the metadata retry backoff of the bootstrap answer
    rig.run()
    assert rig.client.metadata_requests[asked:] == [["t"]]
    assert [f.result(0).offset for f in futs] == [30, 31, 32]
