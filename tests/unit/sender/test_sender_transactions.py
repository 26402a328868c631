"""A transactional producer's requests, in the order the Sender sends them (Java's SenderTest and
TransactionManagerTest through the Sender): FindCoordinator and InitProducerId first,
AddPartitionsToTxn before the first Produce of each partition, EndTxn only once every Produce of
the transaction has completed, AddOffsetsToTxn and TxnOffsetCommit before EndTxn.

The blocking transactional calls are made with ``timeout=0``: they raise KafkaTimeoutError with
the operation started, the test runs the Sender, and calling again returns the outcome.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from kproducer.errors import (
    InvalidRecordError,
    KafkaError,
    KafkaTimeoutError,
    ProducerClosedError,
    TransactionAbortedError,
)
from kproducer.network.protocol import ApiKey
from kproducer.structs import TopicPartition
from kproducer.transaction_manager import TransactionState
from tests.support.mock_client import (
    add_partitions_response,
    error_response,
    find_coordinator_response,
    init_producer_id_response,
    produce_response,
    txn_offset_commit_response,
)
from tests.support.producer_rig import ProducerRig
from tests.unit.sender.conftest import MakeRig

S = TransactionState
TP0 = TopicPartition("t", 0)
TP1 = TopicPartition("t", 1)
A = ApiKey


def _call(rig: ProducerRig, operation: Callable[[float], None], until: Callable[[], bool]) -> None:
    """A blocking transactional call: started with timeout 0, completed by the Sender, then returned."""
    with pytest.raises(KafkaTimeoutError):
        operation(0)
    rig.run_until(until)
    operation(0)


@pytest.fixture
def txn(make_rig: MakeRig) -> ProducerRig:
    """A transactional producer, initialized (producer id 500, epoch 2; coordinator node 1), in a transaction."""
    return _txn_rig(make_rig)


def _txn_rig(make_rig: MakeRig, **config: object) -> ProducerRig:
    rig = make_rig({"transactional.id": "tid", **config}, init=False)
    p = rig.producer
    rig.client.prepare(A.FIND_COORDINATOR, find_coordinator_response(1))
    rig.client.prepare(A.INIT_PRODUCER_ID, init_producer_id_response(500, 2))
    _call(rig, p.init_transactions, lambda: p.transaction_state is S.READY)
    p.begin_transaction()
    return rig


def _after_init(rig: ProducerRig) -> list[ApiKey]:
    keys = rig.sent_api_keys()
    assert keys[:2] == [A.FIND_COORDINATOR, A.INIT_PRODUCER_ID]
    return keys[2:]


def test_add_partitions_goes_before_the_first_produce_of_the_partition(txn: ProducerRig) -> None:
    fut = txn.send(partition=0)
    txn.run()
    assert _after_init(txn) == [A.ADD_PARTITIONS_TO_TXN]
    txn.run(2)  # AddPartitionsToTxn unanswered: the batch waits
    assert txn.produce_bodies() == []
    txn.client.prepare(A.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    txn.client.prepare(A.PRODUCE, produce_response(0, 4))
    txn.run_until(fut.done)
    assert _after_init(txn) == [A.ADD_PARTITIONS_TO_TXN, A.PRODUCE]
    assert [r.node_id for r in txn.client.sent if r.api_key == A.ADD_PARTITIONS_TO_TXN] == [1]
    body = txn.produce_bodies()[0]
    assert body.transactional_id == "tid"
    batch = txn.batches()[0]
    assert batch.is_transactional and (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (500, 2, 0)


def test_a_partition_joining_later_is_added_before_its_produce_and_does_not_hold_the_others(txn: ProducerRig) -> None:
    first = txn.send(partition=0)
    txn.client.prepare(A.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    txn.client.prepare(A.PRODUCE, produce_response(0, 1))
    txn.run_until(first.done)
    second = txn.send(partition=1)
    again = txn.send(partition=0)
    txn.client.prepare(A.PRODUCE, produce_response(0, 2))
    txn.run()  # t-0 is in the transaction already: it goes; t-1 waits for its AddPartitionsToTxn
    assert again.done() and not second.done()
    txn.client.prepare(A.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    txn.client.prepare(A.PRODUCE, produce_response(0, 3))
    txn.run_until(second.done)
    add = txn.client.requests(A.ADD_PARTITIONS_TO_TXN)
    assert [{(t.name, q) for t in a.v3_and_below_topics for q in t.partitions} for a in add] == [{("t", 0)}, {("t", 1)}]
    keys = _after_init(txn)
    second_add = len(keys) - 1 - keys[::-1].index(A.ADD_PARTITIONS_TO_TXN)
    produce_of_t1 = [i for i, r in enumerate(txn.client.sent[2:]) if r.api_key == A.PRODUCE and TP1 in txn.client.sent_bodies[i + 2].partitions]
    assert keys[0] == A.ADD_PARTITIONS_TO_TXN and produce_of_t1 and produce_of_t1[0] > second_add


def test_a_retriable_add_partitions_error_is_retried_before_any_produce(txn: ProducerRig) -> None:
    fut = txn.send(partition=0)
    txn.client.prepare(A.ADD_PARTITIONS_TO_TXN, add_partitions_response(51), add_partitions_response(0))  # CONCURRENT_TRANSACTIONS
    txn.client.prepare(A.PRODUCE, produce_response(0, 6))
    txn.run_until(fut.done, step_ms=20)
    assert _after_init(txn) == [A.ADD_PARTITIONS_TO_TXN, A.ADD_PARTITIONS_TO_TXN, A.PRODUCE]
    assert fut.result(0).offset == 6


def test_end_txn_waits_for_every_produce_in_flight(txn: ProducerRig) -> None:
    p = txn.producer
    fut = txn.send(partition=0)
    txn.client.prepare(A.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    txn.run_until(lambda: bool(txn.produce_bodies()))  # the Produce is out, unanswered
    with pytest.raises(KafkaTimeoutError):
        p.commit_transaction(0)
    txn.client.prepare(A.END_TXN, error_response(0))
    txn.run(3)
    assert txn.client.requests(A.END_TXN) == []
    txn.client.prepare(A.PRODUCE, produce_response(0, 8))
    txn.run_until(lambda: p.transaction_state is S.READY)
    p.commit_transaction(0)
    assert fut.result(0).offset == 8
    assert _after_init(txn) == [A.ADD_PARTITIONS_TO_TXN, A.PRODUCE, A.END_TXN]
    assert [(e.committed, e.producer_id, e.producer_epoch) for e in txn.client.requests(A.END_TXN)] == [(True, 500, 2)]


def test_commit_sends_lingering_batches_first(make_rig: MakeRig) -> None:
    rig = _txn_rig(make_rig, **{"linger.ms": 60_000})
    p = rig.producer
    futs = [rig.send(partition=q) for q in (0, 1)]
    rig.client.prepare(A.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    rig.client.prepare(A.PRODUCE, produce_response(0, 1), produce_response(0, 2))
    rig.client.prepare(A.END_TXN, error_response(0))
    _call(rig, p.commit_transaction, lambda: p.transaction_state is S.READY)
    assert all(f.done() and f.exception(0) is None for f in futs)
    keys = _after_init(rig)
    assert keys[0] == A.ADD_PARTITIONS_TO_TXN and keys[-1] == A.END_TXN and keys.count(A.PRODUCE) == 2


def test_abort_fails_unsent_records_and_ends_with_an_abort_marker(txn: ProducerRig) -> None:
    p = txn.producer
    sent = txn.send(partition=0)
    txn.client.prepare(A.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    txn.client.prepare(A.PRODUCE, produce_response(0, 3))
    txn.run_until(sent.done)
    txn.client.unready.add(1)  # t-1's leader is away: its record is still queued at the abort
    unsent = txn.send(partition=1)
    txn.client.unready.discard(1)
    txn.client.prepare(A.END_TXN, error_response(0))
    _call(txn, p.abort_transaction, lambda: p.transaction_state is S.READY)
    assert isinstance(unsent.exception(0), TransactionAbortedError)
    assert [e.committed for e in txn.client.requests(A.END_TXN)] == [False]


def test_a_produce_error_makes_the_transaction_abortable(txn: ProducerRig) -> None:
    p = txn.producer
    fut = txn.send(partition=0)
    txn.client.prepare(A.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    txn.client.prepare(A.PRODUCE, produce_response(87))
    txn.run_until(fut.done)
    assert isinstance(fut.exception(0), InvalidRecordError)
    assert p.transaction_state is S.ABORTABLE_ERROR
    with pytest.raises(KafkaError):
        p.commit_transaction(0)
    txn.client.prepare(A.END_TXN, error_response(0))
    # The failed batch left a sequence gap: the abort bumps the epoch (KIP-360) after EndTxn.
    txn.client.prepare(A.INIT_PRODUCER_ID, init_producer_id_response(500, 3))
    _call(txn, p.abort_transaction, lambda: p.transaction_state is S.READY)
    assert [e.committed for e in txn.client.requests(A.END_TXN)] == [False]
    assert p.producer_epoch == 3


def test_offsets_are_committed_in_the_transaction_before_end_txn(txn: ProducerRig) -> None:
    p = txn.producer
    fut = txn.send(partition=0)
    txn.client.prepare(A.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    txn.client.prepare(A.PRODUCE, produce_response(0, 1))
    txn.run_until(fut.done)
    txn.client.prepare(A.ADD_OFFSETS_TO_TXN, error_response(0))
    txn.client.prepare(A.FIND_COORDINATOR, find_coordinator_response(0))  # the group's coordinator
    txn.client.prepare(A.TXN_OFFSET_COMMIT, txn_offset_commit_response(0))
    with pytest.raises(KafkaTimeoutError):
        p.send_offsets_to_transaction({TopicPartition("in", 0): 42}, "group", 0)
    txn.run_until(lambda: bool(txn.client.requests(A.TXN_OFFSET_COMMIT)) and not txn.client.pending())
    txn.client.prepare(A.END_TXN, error_response(0))
    _call(txn, p.commit_transaction, lambda: p.transaction_state is S.READY)
    keys = _after_init(txn)
    assert keys == [A.ADD_PARTITIONS_TO_TXN, A.PRODUCE, A.ADD_OFFSETS_TO_TXN, A.FIND_COORDINATOR, A.TXN_OFFSET_COMMIT, A.END_TXN]
    commit = txn.client.requests(A.TXN_OFFSET_COMMIT)[0]
    assert [(t.name, [(q.partition_index, q.committed_offset) for q in t.partitions]) for t in commit.topics] == [("in", [(0, 42)])]


def test_close_with_an_open_transaction_aborts_it(txn: ProducerRig) -> None:
    """Java's testIncompleteTransactionAbortOnShutdown."""
    p = txn.producer
    written = txn.send(partition=0)
    txn.client.prepare(A.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    txn.client.prepare(A.PRODUCE, produce_response(0, 1))
    txn.run_until(written.done)
    txn.client.prepare(A.END_TXN, error_response(0))
    p.close()
    assert [e.committed for e in txn.client.requests(A.END_TXN)] == [False]
    assert written.result(0).offset == 1


def test_a_forced_close_sends_no_end_txn_and_fails_what_is_in_flight(txn: ProducerRig) -> None:
    """Java's testForceShutdownWithIncompleteTransaction."""
    fut = txn.send(partition=0)
    txn.client.prepare(A.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    txn.run_until(lambda: bool(txn.produce_bodies()))
    txn.producer.close(0)
    assert isinstance(fut.exception(0), ProducerClosedError)
    assert txn.client.requests(A.END_TXN) == []


def test_a_split_inside_a_transaction_still_commits(make_rig: MakeRig) -> None:
    """Java's testTransactionalSplitBatchAndSend: the parts are sent in the same transaction, which commits."""
    rig = _txn_rig(make_rig, **{"batch.size": 1024, "batch.max.size": 16384, "linger.ms": 1000})
    p = rig.producer
    futs = [rig.send(bytes([i]) * 300, label=i) for i in range(6)]
    rig.client.prepare(A.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    rig.run()
    rig.clock.advance(1000)
    rig.client.prepare(A.PRODUCE, produce_response(10), produce_response(0, 100), produce_response(0, 200))
    rig.run_until(lambda: all(f.done() for f in futs), step_ms=100)
    assert [f.exception(0) for f in futs] == [None] * 6
    rig.client.prepare(A.END_TXN, error_response(0))
    _call(rig, p.commit_transaction, lambda: p.transaction_state is S.READY)
    assert [e.committed for e in rig.client.requests(A.END_TXN)] == [True]


def test_an_abort_waits_for_the_produce_in_flight_before_end_txn(txn: ProducerRig) -> None:
    p = txn.producer
    fut = txn.send(partition=0)
    txn.client.prepare(A.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    txn.run_until(lambda: bool(txn.produce_bodies()))
    with pytest.raises(KafkaTimeoutError):
        p.abort_transaction(0)
    txn.client.prepare(A.END_TXN, error_response(0))
    txn.run(3)
    assert txn.client.requests(A.END_TXN) == []  # the Produce is still out
    txn.client.prepare(A.PRODUCE, produce_response(0, 2))
    txn.run_until(lambda: p.transaction_state is S.READY)
    p.abort_transaction(0)
    assert fut.result(0).offset == 2  # written, and hidden by the abort marker
    assert _after_init(txn) == [A.ADD_PARTITIONS_TO_TXN, A.PRODUCE, A.END_TXN]
    assert [e.committed for e in txn.client.requests(A.END_TXN)] == [False]


def test_the_next_transaction_adds_its_partitions_again(txn: ProducerRig) -> None:
    p = txn.producer
    for committed in (True, False):
        fut = txn.send(partition=0)
        txn.client.prepare(A.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
        txn.client.prepare(A.PRODUCE, produce_response(0, 1))
        txn.run_until(fut.done)
        txn.client.prepare(A.END_TXN, error_response(0))
        end = p.commit_transaction if committed else p.abort_transaction
        _call(txn, end, lambda: p.transaction_state is S.READY)
        p.begin_transaction()
    assert _after_init(txn) == [A.ADD_PARTITIONS_TO_TXN, A.PRODUCE, A.END_TXN] * 2
    assert [s[2] for s in txn.sequences()] == [0, 1]  # same producer id and epoch: the sequence goes on
    assert [e.committed for e in txn.client.requests(A.END_TXN)] == [True, False]


def test_unknown_producer_id_in_a_transaction_aborts_it_and_the_abort_bumps_the_epoch(txn: ProducerRig) -> None:
    """KIP-360: the broker lost the producer's state; the transaction cannot commit, and its abort
    re-initializes the producer id with a bumped epoch, after which a new transaction works."""
    p = txn.producer
    fut = txn.send(partition=0)
    txn.client.prepare(A.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    txn.client.prepare(A.PRODUCE, produce_response(59))
    txn.run_until(fut.done)
    assert fut.exception(0) is not None
    assert p.transaction_state is S.ABORTABLE_ERROR
    txn.client.prepare(A.END_TXN, error_response(0))
    txn.client.prepare(A.INIT_PRODUCER_ID, init_producer_id_response(500, 3))
    _call(txn, p.abort_transaction, lambda: p.transaction_state is S.READY)
    assert (p.producer_id, p.producer_epoch) == (500, 3)
    p.begin_transaction()
    nxt = txn.send(partition=0)
    txn.client.prepare(A.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    txn.client.prepare(A.PRODUCE, produce_response(0, 4))
    txn.run_until(nxt.done)
    assert txn.sequences()[-1] == (500, 3, 0, 1)
