"""Every branch of completing a batch, driven through Sender.run_once() with a scripted client and clock.

No broker, no thread, no sleep: tests/support/mock_client.py answers requests from
a script, the clock moves only when a test advances it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest

from kproducer.errors import (
    ClusterAuthorizationFailedError,
    InvalidProducerEpochError,
    InvalidRecordError,
    KafkaError,
    ProducerFencedError,
    SaslAuthenticationFailedError,
)
from kproducer.network.protocol import ApiKey
from kproducer.structs import TopicPartition
from tests.support.mock_client import (
    batches_of,
    init_producer_id_response,
    produce_response,
)
from tests.support.sender_rig import Rig, make_rig

TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)


@pytest.fixture
def rig() -> Iterator[Rig]:
    r = make_rig()
    r.client.prepare(ApiKey.INIT_PRODUCER_ID, init_producer_id_response(1000, 0))
    r.run()  # InitProducerId, answered in the same loop's poll
    assert r.tm is not None and r.tm.producer_id_and_epoch() == (1000, 0)
    yield r


def _batch_state(rig: Rig, index: int = -1) -> tuple[int, int, int]:
    """(producer id, epoch, base sequence) written in the index-th produce request's first batch."""
    body = rig.produce_bodies()[index]
    batch = next(iter(batches_of(body).values()))  # type: ignore[arg-type]
    pid, epoch, seq = struct.unpack_from(">qhi", batch, 43)
    return pid, epoch, seq


def test_success_completes_with_the_offset(rig: Rig) -> None:
    fut = rig.send()
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, base_offset=42))
    rig.run()
    assert fut.result(0).offset == 42
    assert _batch_state(rig) == (1000, 0, 0)
    assert rig.tm is not None and rig.tm.next_sequence(TP0) == 1


@pytest.mark.parametrize(
    "code",
    [6, 7, 19, 20, 13, 14, 3, 74],  # NOT_LEADER, REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS(_AFTER_APPEND), NETWORK, LOAD, UNKNOWN_TOPIC, FENCED_LEADER_EPOCH
)
def test_each_retriable_error_retries_the_same_sequence_after_the_backoff(rig: Rig, code: int) -> None:
    fut = rig.send()
    rig.client.prepare(ApiKey.PRODUCE, produce_response(code), produce_response(0, base_offset=7))
    rig.run()
    assert not fut.done()
    rig.run()  # still backing off: nothing new is sent
    assert len(rig.produce_bodies()) == 1
    rig.clock.advance(100)
    rig.run()
    assert fut.result(0).offset == 7
    assert [_batch_state(rig, i) for i in (0, 1)] == [(1000, 0, 0), (1000, 0, 0)]


def test_a_retriable_error_past_the_retries_fails_the_record() -> None:
    r = make_rig(retries=1)
    r.client.prepare(ApiKey.INIT_PRODUCER_ID, init_producer_id_response(1000, 0))
    r.run()
    fut = r.send()
    r.client.prepare(ApiKey.PRODUCE, produce_response(6), produce_response(6))
    r.run()
    r.clock.advance(100)
    r.run()
    with pytest.raises(KafkaError, match="NOT_LEADER"):
        fut.result(0)


def test_message_too_large_splits_under_the_same_producer_id_and_sequences() -> None:
    r = make_rig(batch_size=1024)
    r.client.prepare(ApiKey.INIT_PRODUCER_ID, init_producer_id_response(1000, 0))
    r.run()
    futs = [r.send(bytes(200)) for _ in range(4)]  # one batch of 4 records
    r.client.prepare(ApiKey.PRODUCE, produce_response(10))
    r.run()
    assert not any(f.done() for f in futs)
    # The split parts keep the batch's producer id, epoch and sequences (Java's ProducerBatch.split).
    r.client.prepare(ApiKey.PRODUCE, *[produce_response(0, base_offset=i * 10) for i in range(8)])
    for _ in range(10):
        r.clock.advance(100)
        r.run()
    assert all(f.done() for f in futs)
    assert [f.result(0).offset >= 0 for f in futs] == [True] * 4
    assert len(r.produce_bodies()) >= 2  # the rejected batch, then its part(s)
    assert all(_batch_state(r, i)[:2] == (1000, 0) for i in range(len(r.produce_bodies())))
    assert _batch_state(r, 1)[2] == 0
    assert len(r.client.requests(ApiKey.INIT_PRODUCER_ID)) == 1


def test_duplicate_sequence_is_a_success(rig: Rig) -> None:
    fut = rig.send()
    rig.client.prepare(ApiKey.PRODUCE, produce_response(46, base_offset=-1))
    rig.run()
    assert fut.done() and fut.exception(0) is None


def test_out_of_order_after_an_earlier_failure_is_retried_without_a_reset(rig: Rig) -> None:
    first = rig.send(b"a")
    rig.run()  # in flight, no scripted answer yet
    second = rig.send(b"b")
    rig.run()
    assert len(rig.produce_bodies()) == 2
    # The first timed out at the broker, the second was refused as out of order behind it.
    rig.client.prepare(ApiKey.PRODUCE, produce_response(7), produce_response(45))
    rig.run()
    assert rig.tm is not None and not rig.tm.reset_pending()
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 5), produce_response(0, 6))
    for _ in range(4):
        rig.clock.advance(100)
        rig.run()
    assert (first.result(0).offset, second.result(0).offset) == (5, 6)
    assert rig.tm.producer_id_and_epoch() == (1000, 0)


def test_out_of_order_for_the_next_sequence_restarts_under_a_new_producer_id(rig: Rig) -> None:
    fut = rig.send()
    rig.client.prepare(ApiKey.PRODUCE, produce_response(45))
    rig.run()
    assert rig.tm is not None and rig.tm.reset_pending()
    rig.client.prepare(ApiKey.INIT_PRODUCER_ID, init_producer_id_response(2000, 0))
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 3))
    for _ in range(3):
        rig.clock.advance(100)
        rig.run()
    assert fut.result(0).offset == 3
    assert _batch_state(rig) == (2000, 0, 0)


def test_unknown_producer_id_restarts_under_a_new_producer_id(rig: Rig) -> None:
    fut = rig.send()
    rig.client.prepare(ApiKey.PRODUCE, produce_response(59))
    rig.run()
    rig.client.prepare(ApiKey.INIT_PRODUCER_ID, init_producer_id_response(1000, 1))  # KIP-360: same id, new epoch
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 9))
    for _ in range(3):
        rig.clock.advance(100)
        rig.run()
    assert fut.result(0).offset == 9
    assert _batch_state(rig) == (1000, 1, 0)


@pytest.mark.parametrize("code, error", [(47, InvalidProducerEpochError), (90, ProducerFencedError), (31, ClusterAuthorizationFailedError)])
def test_fatal_errors_fail_the_record_and_everything_queued(rig: Rig, code: int, error: type[KafkaError]) -> None:
    fut = rig.send(partition=0)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(code))
    rig.run()
    with pytest.raises(error):
        fut.result(0)
    assert rig.tm is not None and isinstance(rig.tm.fatal_error, error)
    queued = rig.send(partition=1)
    rig.run()
    with pytest.raises(error):
        queued.result(0)
    assert len(rig.produce_bodies()) == 1


def test_a_non_retriable_error_fails_the_record_then_the_idempotent_epoch_bump(rig: Rig) -> None:
    fut = rig.send(partition=0)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(87, message="bad record"))
    rig.run()
    with pytest.raises(InvalidRecordError):
        fut.result(0)
    # Its sequence left a gap: the next batch waits for a bumped epoch and restarts at 0.
    assert rig.tm is not None and rig.tm.reset_pending()
    nxt = rig.send(partition=0)
    rig.client.prepare(ApiKey.INIT_PRODUCER_ID, init_producer_id_response(1000, 1))
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 11))
    rig.run(2)
    assert nxt.result(0).offset == 11
    assert _batch_state(rig) == (1000, 1, 0)
    assert [b.transactional_id for b in rig.client.requests(ApiKey.INIT_PRODUCER_ID)] == [None, None]


def test_init_producer_id_retries_a_retriable_error_after_a_backoff() -> None:
    r = make_rig()
    r.client.prepare(ApiKey.INIT_PRODUCER_ID, init_producer_id_response(error_code=15), init_producer_id_response(5, 0))
    r.run()
    assert r.tm is not None and not r.tm.has_producer_id()
    r.run()
    assert len(r.client.requests(ApiKey.INIT_PRODUCER_ID)) == 1  # backing off
    r.clock.advance(100)
    r.run()
    assert r.tm.producer_id_and_epoch() == (5, 0)


def test_a_disconnect_retries_and_refreshes_the_topic(rig: Rig) -> None:
    from tests.support.mock_client import DISCONNECT

    fut = rig.send()
    rig.client.prepare(ApiKey.PRODUCE, DISCONNECT, produce_response(0, 1))
    rig.run()
    st = rig.metadata.topic_state("t")
    assert st is not None and st.urgent
    rig.clock.advance(100)
    rig.run()
    assert fut.result(0).offset == 1


def test_a_leader_refusing_the_client_fails_its_queued_batches_with_the_refusal(rig: Rig) -> None:
    """A leader whose TLS handshake or SASL exchange fails: its batches end with that error at the next
    ready pass, not with a timeout at delivery.timeout.ms; the other leader's partitions are untouched,
    and once the leader accepts the client again its new records go through."""
    refusal = SaslAuthenticationFailedError("node 1 (127.0.0.1:9093): Authentication failed: invalid credentials")
    rig.client.unready.add(1)
    rig.client.refusals[1] = refusal
    refused = [rig.send(b"a", partition=1), rig.send(b"b", partition=1)]
    kept = rig.send(b"c", partition=0)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, base_offset=5))
    rig.run()
    for fut in refused:
        assert fut.done() and fut.exception(0) is refusal
    assert kept.result(0).offset == 5
    assert [tp for body in rig.produce_bodies() for tp in body.partitions] == [TP0]  # type: ignore[attr-defined]
    assert rig.acc.queued_batches_led_by(rig.metadata.cluster, 1) == []

    # The leader accepts the client again: a new record for it is sent, with the partition's first sequence.
    del rig.client.refusals[1]
    rig.client.unready.discard(1)
    later = rig.send(b"d", partition=1)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, base_offset=9))
    rig.run()
    assert later.result(0).offset == 9
    assert _batch_state(rig) == (1000, 0, 0)
