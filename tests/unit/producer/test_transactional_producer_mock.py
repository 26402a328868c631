"""A whole transactional Producer on the scripted client and clock: init, begin, send, commit and abort.

The Producer is built with ``_client`` (tests/support/mock_client.py), ``_clock`` and no
I/O thread (``_start_io_thread=False``): each test calls ``Producer.run_sender_once()``
itself, so the public API (send, the C lane when built, the state checks, futures,
metrics, close) runs on one thread with nothing left to timing. A blocking call is made
with ``timeout=0``: it raises KafkaTimeoutError with the operation started, the test runs
the Sender until the coordinator has answered, and calling the same method again returns
the outcome, which is Java's "a timed-out call may be retried" rule at work.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import Future

import pytest

from kproducer import Producer
from kproducer.errors import (
    IllegalStateError,
    KafkaTimeoutError,
    ProducerClosedError,
    TransactionAbortedError,
)
from kproducer.metadata import Metadata
from kproducer.network.protocol import ApiKey
from kproducer.structs import RecordMetadata, TopicPartition
from kproducer.transaction_manager import TransactionState
from tests.support.clock import FakeClock
from tests.support.mock_client import (
    MockClient,
    add_partitions_response,
    batches_of,
    error_response,
    find_coordinator_response,
    init_producer_id_response,
    make_cluster,
    produce_response,
    set_cluster,
)

S = TransactionState


class Rig:
    def __init__(self, **config: object) -> None:
        self.clock = FakeClock(10_000)
        metadata = Metadata(clock_ms=self.clock)
        set_cluster(metadata, make_cluster({"t": 2, "u": 1}))
        self.client = MockClient(self.clock, metadata)
        conf: dict[str, object] = {"bootstrap.servers": "127.0.0.1:9092", "transactional.id": "tid", **config}
        self.producer = Producer(
            conf, _clock=self.clock, _client=self.client, _metadata=metadata, _start_io_thread=False
        )

    def run(self, until: Callable[[], bool], loops: int = 30) -> None:
        """Run the Sender's loop until ``until()`` holds (bounded)."""
        for _ in range(loops):
            if until():
                return
            self.producer.run_sender_once()
        assert until(), "the Sender did not get there"

    def produce_bodies(self) -> list[object]:
        return self.client.requests(ApiKey.PRODUCE)


@pytest.fixture
def rig() -> Iterator[Rig]:
    r = Rig()
    try:
        yield r
    finally:
        r.producer.close(0)  # fails what is left: nothing may wait on an unscripted answer


def init(rig: Rig) -> None:
    p = rig.producer
    rig.client.prepare(ApiKey.FIND_COORDINATOR, find_coordinator_response(1))
    rig.client.prepare(ApiKey.INIT_PRODUCER_ID, init_producer_id_response(500, 2))
    with pytest.raises(KafkaTimeoutError, match="call init_transactions\\(\\) again"):
        p.init_transactions(0)
    assert p.transaction_state is S.INITIALIZING
    rig.run(lambda: p.transaction_state is S.READY)
    p.init_transactions(0)  # completed in the background: calling again returns its outcome
    assert (p.producer_id, p.producer_epoch) == (500, 2)


def test_init_begin_send_commit_through_the_public_api(rig: Rig) -> None:
    p = rig.producer
    with pytest.raises(IllegalStateError, match="state UNINITIALIZED: call init_transactions"):
        p.begin_transaction()
    init(rig)
    with pytest.raises(IllegalStateError, match="only allowed inside a transaction; it is in state READY"):
        p.send("t", b"outside")
    p.begin_transaction()
    assert p.transaction_state is S.IN_TRANSACTION
    futures = [p.send("t", b"a", partition=0), p.send("t", b"b", partition=1), p.send("u", b"c", partition=0)]
    bulk = p.send_batch("t", [b"d", b"e"], partition=1)
    # The batches linger (linger.ms, frozen clock) but their partitions join the transaction now.
    rig.client.prepare(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    rig.run(lambda: len(rig.client.requests(ApiKey.ADD_PARTITIONS_TO_TXN)) == 1 and not rig.client.pending())
    add = rig.client.requests(ApiKey.ADD_PARTITIONS_TO_TXN)[0]
    added = {TopicPartition(t.name, q) for t in add.v3_and_below_topics for q in t.partitions}
    assert added == {TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("u", 0)}  # one request for all
    assert rig.produce_bodies() == []  # nothing is ready yet: linger.ms has not passed

    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 40), produce_response(0, 70))
    rig.client.prepare(ApiKey.END_TXN, error_response(0))
    with pytest.raises(KafkaTimeoutError, match="call commit_transaction\\(\\) again"):
        p.commit_transaction(0)  # the commit flushes the lingering batches, then ends the transaction
    assert p.transaction_state is S.COMMITTING_TRANSACTION
    with pytest.raises(IllegalStateError, match="previous call to commit_transaction\\(\\) timed out"):
        p.begin_transaction()
    rig.run(lambda: p.transaction_state is S.READY)
    p.commit_transaction(0)

    assert all(f.done() for f in futures) and bulk.done()
    offsets = [f.result(0).offset for f in futures] + [m.offset for m in bulk.result(0)]
    assert all(o >= 40 for o in offsets) and len(offsets) == 5
    for body in rig.produce_bodies():
        assert body.transactional_id == "tid"  # type: ignore[attr-defined]
        batch = next(iter(batches_of(body).values()))  # type: ignore[arg-type]
        assert int.from_bytes(batch[21:23], "big") & 0x10  # the transactional attribute bit
    end = rig.client.requests(ApiKey.END_TXN)
    assert [(e.committed, e.producer_id, e.producer_epoch) for e in end] == [(True, 500, 2)]
    assert [r.node_id for r in rig.client.sent if r.api_key == ApiKey.END_TXN] == [1]  # at the coordinator
    assert rig.producer.metrics()["txn-commit-time-ns-total"] > 0
    with pytest.raises(IllegalStateError, match="commit_transaction.*state READY"):
        p.commit_transaction(0)


def send_acknowledged(rig: Rig, value: bytes, offset: int) -> Future[RecordMetadata]:
    """A record to t-0 in the open transaction, acknowledged at ``offset``."""
    p = rig.producer
    future = p.send("t", value, partition=0)
    rig.client.prepare(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, offset))
    rig.clock.advance(p.config.linger_ms)  # the batch is ready: it drains once t-0 is in the transaction
    rig.run(lambda: future.done())
    return future


def test_abort_fails_unsent_records_and_keeps_acknowledged_offsets(rig: Rig) -> None:
    p = rig.producer
    init(rig)
    p.begin_transaction()
    sent = send_acknowledged(rig, b"acknowledged", 9)
    assert sent.result(0).offset == 9
    unsent = p.send("t", b"never sent", partition=1)  # its partition is not in the transaction yet
    rig.client.prepare(ApiKey.END_TXN, error_response(0))
    with pytest.raises(KafkaTimeoutError, match="call abort_transaction\\(\\) again"):
        p.abort_transaction(0)
    rig.run(lambda: p.transaction_state is S.READY)
    p.abort_transaction(0)
    with pytest.raises(TransactionAbortedError, match="was aborted before this record was sent"):
        unsent.result(0)
    assert sent.result(0).offset == 9  # written, then hidden by the abort marker
    assert [e.committed for e in rig.client.requests(ApiKey.END_TXN)] == [False]
    assert len(rig.client.requests(ApiKey.ADD_PARTITIONS_TO_TXN)) == 1  # t-1 never joined
    assert len(rig.produce_bodies()) == 1

    # The next transaction starts clean: its partition is added again, and it commits.
    p.begin_transaction()
    again = p.send("t", b"next", partition=0)
    rig.client.prepare(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 12))
    rig.client.prepare(ApiKey.END_TXN, error_response(0))
    with pytest.raises(KafkaTimeoutError):
        p.commit_transaction(0)
    rig.run(lambda: p.transaction_state is S.READY)
    p.commit_transaction(0)
    assert again.result(0).offset == 12
    assert [e.committed for e in rig.client.requests(ApiKey.END_TXN)] == [False, True]


def test_the_context_manager_aborts_on_an_exception_and_close_aborts_an_open_transaction() -> None:
    rig = Rig()
    p = rig.producer
    init(rig)
    unsent = None
    with pytest.raises(RuntimeError, match="the transform failed"), p.transaction(timeout=0):  # re-raised after the abort
        unsent = p.send("t", b"x", partition=0)
        raise RuntimeError("the transform failed")
    # The abort (started by the context manager, timed out at 0 s) finishes; nothing reached the
    # broker, so the coordinator has no transaction to end and no EndTxn goes out.
    rig.run(lambda: p.transaction_state is S.READY)
    p.abort_transaction(0)
    assert unsent is not None
    with pytest.raises(TransactionAbortedError):
        unsent.result(0)
    assert rig.client.requests(ApiKey.END_TXN) == []

    # close() with a transaction open aborts it (Java's close); with no I/O thread, the Sender's
    # closing work runs inside close().
    p.begin_transaction()
    written = p.send("t", b"y", partition=0)
    rig.client.prepare(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 3))
    rig.clock.advance(p.config.linger_ms)
    rig.run(lambda: written.done())
    left = p.send("t", b"z", partition=0)  # lingers: never sent
    rig.client.prepare(ApiKey.END_TXN, error_response(0))
    p.close()
    assert written.result(0).offset == 3
    with pytest.raises(TransactionAbortedError):
        left.result(0)
    assert [e.committed for e in rig.client.requests(ApiKey.END_TXN)] == [False]
    assert p.transaction_state is S.READY and rig.client.closed


def test_close_keeping_transaction_open_sends_no_end_txn_and_leaves_the_transaction_open() -> None:
    # The two-phase commit hand-over: the writer flushed, another process ends the transaction.
    # A plain close() would abort it (the test above); this one must not send EndTxn at all.
    rig = Rig()
    p = rig.producer
    init(rig)
    p.begin_transaction()
    written = send_acknowledged(rig, b"y", 7)
    rig.client.prepare(ApiKey.END_TXN, error_response(0))  # would be taken by an abort
    p.close_keeping_transaction_open(timeout=0)
    assert written.result(0).offset == 7
    assert rig.client.requests(ApiKey.END_TXN) == []
    assert p.transaction_state is S.IN_TRANSACTION and rig.client.closed
    with pytest.raises(ProducerClosedError):
        p.send("t", b"after", partition=0)
