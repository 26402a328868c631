"""The transaction state machine: its transition table, and every coordinator exchange driven
through Sender.run_once() with the scripted client and clock (no broker, no sleep)."""

from __future__ import annotations

import itertools
import logging

import pytest

from kproducer.errors import (
    IllegalStateError,
    InvalidRecordError,
    InvalidTxnStateError,
    KafkaError,
    KafkaTimeoutError,
    ProducerFencedError,
    TopicAuthorizationFailedError,
    TransactionAbortedError,
    TransactionalIdAuthorizationFailedError,
)
from kproducer.network.protocol import COORDINATOR_KEY_GROUP, COORDINATOR_KEY_TRANSACTION, ApiKey
from kproducer.structs import TopicPartition
from kproducer.transaction_manager import (
    ALLOWED_PREVIOUS_STATES,
    GroupMetadata,
    TransactionalRequestResult,
    TransactionManager,
    TransactionState,
)
from tests.support.mock_client import (
    add_partitions_response,
    batches_of,
    error_response,
    find_coordinator_response,
    init_producer_id_response,
    produce_response,
    txn_offset_commit_response,
)
from tests.support.sender_rig import Rig, make_rig

S = TransactionState
TP0 = TopicPartition("t", 0)


# ---------------------------------------------------------------------- the table
@pytest.mark.parametrize("source, target", list(itertools.product(TransactionState, TransactionState)))
def test_every_transition_is_allowed_or_refused_by_the_table(source: TransactionState, target: TransactionState) -> None:
    tm = TransactionManager("tid")
    tm._state = source  # noqa: SLF001 - put the machine in each state directly
    allowed = source in ALLOWED_PREVIOUS_STATES[target] or (source is S.FATAL_ERROR and target is S.FATAL_ERROR)
    if allowed:
        tm._transition_to(target, KafkaError("x"))  # noqa: SLF001
        assert tm.state is target
    else:
        with pytest.raises(IllegalStateError, match=f"invalid transition from {source.value} to {target.value}"):
            tm._transition_to(target)  # noqa: SLF001
        assert tm.state is source


def test_the_table_matches_the_java_client_rows() -> None:
    assert ALLOWED_PREVIOUS_STATES[S.IN_TRANSACTION] == {S.READY}
    assert ALLOWED_PREVIOUS_STATES[S.COMMITTING_TRANSACTION] == {S.IN_TRANSACTION}
    assert ALLOWED_PREVIOUS_STATES[S.ABORTING_TRANSACTION] == {S.IN_TRANSACTION, S.ABORTABLE_ERROR}
    assert ALLOWED_PREVIOUS_STATES[S.FATAL_ERROR] == set(TransactionState)
    assert ALLOWED_PREVIOUS_STATES[S.UNINITIALIZED] == set()


@pytest.mark.parametrize(
    "state, call, message",
    [
        (S.UNINITIALIZED, "begin_transaction", "state UNINITIALIZED: call init_transactions"),
        (S.UNINITIALIZED, "begin_commit", "commit_transaction.*UNINITIALIZED"),
        (S.READY, "begin_commit", "commit_transaction.*state READY: call begin_transaction"),
        (S.READY, "begin_abort", "abort_transaction.*state READY"),
        (S.READY, "initialize_transactions", "init_transactions.*state READY"),
        (S.IN_TRANSACTION, "begin_transaction", "begin_transaction.*IN_TRANSACTION"),
        (S.COMMITTING_TRANSACTION, "begin_abort", "abort_transaction.*COMMITTING_TRANSACTION"),
        (S.ABORTABLE_ERROR, "begin_commit", "abortable error"),
        (S.ABORTABLE_ERROR, "begin_transaction", "call abort_transaction"),
    ],
)
def test_calls_in_the_wrong_state_say_what_is_allowed(state: TransactionState, call: str, message: str) -> None:
    tm = TransactionManager("tid")
    tm._state = state  # noqa: SLF001
    with pytest.raises(IllegalStateError, match=message):
        getattr(tm, call)()


def test_a_non_transactional_manager_refuses_transactional_calls() -> None:
    tm = TransactionManager()
    with pytest.raises(IllegalStateError, match="needs a transactional producer: set transactional.id"):
        tm.begin_transaction()


# ---------------------------------------------------------------------- through the Sender
def txn_rig() -> Rig:
    from tests.support.clock import FakeClock

    clock = FakeClock(10_000)
    return make_rig(tm=TransactionManager("tid", clock_ms=clock, retry_backoff_ms=100), idempotent=True)


def settle(rig: Rig, result: TransactionalRequestResult | None = None, loops: int = 20, step_ms: int = 0) -> None:
    for _ in range(loops):
        if result is not None and result.is_completed:
            return
        rig.clock.advance(step_ms)
        rig.run()


def initialized(coordinator: int = 1, init_version: int = 4) -> Rig:
    rig = txn_rig()
    rig.client.versions[int(ApiKey.INIT_PRODUCER_ID)] = init_version
    # The manager's clock is the rig's own (make_rig built a separate one for it).
    rig.tm._clock = rig.clock  # type: ignore[union-attr]  # noqa: SLF001
    tm = rig.tm
    assert tm is not None
    rig.client.prepare(ApiKey.FIND_COORDINATOR, find_coordinator_response(coordinator))
    rig.client.prepare(ApiKey.INIT_PRODUCER_ID, init_producer_id_response(77, 3))
    result = tm.initialize_transactions()
    settle(rig, result)
    result.wait(0)
    assert tm.state is S.READY and tm.producer_id_and_epoch() == (77, 3)
    return rig


def test_init_finds_the_coordinator_then_gets_the_producer_id() -> None:
    rig = initialized(coordinator=1)
    find = rig.client.requests(ApiKey.FIND_COORDINATOR)[0]
    assert find.key_type == COORDINATOR_KEY_TRANSACTION and tuple(find.coordinator_keys) == ("tid",)
    init = rig.client.requests(ApiKey.INIT_PRODUCER_ID)[0]
    assert init.transactional_id == "tid" and init.transaction_timeout.total_seconds() == 60
    assert [r.node_id for r in rig.client.sent if r.api_key == ApiKey.INIT_PRODUCER_ID] == [1]


def test_a_partition_drains_only_after_add_partitions_and_commit_waits_for_acks() -> None:
    rig = initialized()
    tm = rig.tm
    assert tm is not None
    tm.begin_transaction()
    fut = rig.send(b"a", partition=0)
    rig.run()  # the drain finds t-0 outside the transaction: nothing produced yet
    assert rig.produce_bodies() == []
    rig.client.prepare(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    rig.run(2)
    add = rig.client.requests(ApiKey.ADD_PARTITIONS_TO_TXN)[0]
    assert add.v3_and_below_transactional_id == "tid" and add.v3_and_below_producer_id == 77
    assert len(rig.produce_bodies()) == 1
    body = rig.produce_bodies()[0]
    assert body.transactional_id == "tid"  # type: ignore[attr-defined]
    batch = next(iter(batches_of(body).values()))  # type: ignore[arg-type]
    assert int.from_bytes(batch[21:23], "big") & 0x10  # the transactional attribute bit
    commit = tm.begin_commit()
    rig.run(3)
    assert rig.client.requests(ApiKey.END_TXN) == []  # the batch is not acknowledged yet
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 5))
    rig.client.prepare(ApiKey.END_TXN, error_response(0))
    settle(rig, commit)
    commit.wait(0)
    assert fut.result(0).offset == 5
    end = rig.client.requests(ApiKey.END_TXN)[0]
    assert end.committed is True and (end.producer_id, end.producer_epoch) == (77, 3)
    assert tm.state is S.READY


def test_an_empty_transaction_commits_without_a_request() -> None:
    rig = initialized()
    tm = rig.tm
    assert tm is not None
    tm.begin_transaction()
    result = tm.begin_commit()
    settle(rig, result)
    result.wait(0)
    assert rig.client.requests(ApiKey.END_TXN) == [] and tm.state is S.READY


def _one_committed_record(rig: Rig) -> TransactionalRequestResult:
    tm = rig.tm
    assert tm is not None
    tm.begin_transaction()
    rig.send(b"a")
    rig.client.prepare(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 1))
    rig.run(4)
    return tm.begin_commit()


@pytest.mark.parametrize("code", [16, 15])  # NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE
def test_end_txn_follows_the_coordinator_when_it_moves(code: int) -> None:
    rig = initialized(coordinator=1)
    commit = _one_committed_record(rig)
    rig.client.prepare(ApiKey.END_TXN, error_response(code), error_response(0))
    rig.client.prepare(ApiKey.FIND_COORDINATOR, find_coordinator_response(0))
    settle(rig, commit)
    commit.wait(0)
    assert [r.node_id for r in rig.client.sent if r.api_key == ApiKey.END_TXN] == [1, 0]
    assert len(rig.client.requests(ApiKey.FIND_COORDINATOR)) == 2


@pytest.mark.parametrize("code", [51, 14])  # CONCURRENT_TRANSACTIONS, COORDINATOR_LOAD_IN_PROGRESS
def test_end_txn_retries_after_the_backoff(code: int) -> None:
    rig = initialized()
    commit = _one_committed_record(rig)
    rig.client.prepare(ApiKey.END_TXN, error_response(code), error_response(0))
    rig.run(3)
    assert len(rig.client.requests(ApiKey.END_TXN)) == 1 and not commit.is_completed
    rig.clock.advance(100)
    settle(rig, commit)
    commit.wait(0)
    assert len(rig.client.requests(ApiKey.END_TXN)) == 2


def test_concurrent_transactions_on_add_partitions_retries_quickly() -> None:
    rig = initialized()
    tm = rig.tm
    assert tm is not None
    tm.begin_transaction()
    rig.send(b"a")
    rig.client.prepare(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_response(51), add_partitions_response(0))
    rig.run(3)
    assert len(rig.client.requests(ApiKey.ADD_PARTITIONS_TO_TXN)) == 1
    rig.send(b"b", partition=1)  # a new partition while the retry waits: it joins the retry
    rig.run(2)
    assert rig.client.poll_timeouts[-2:] == [20, 20]  # waits out the backoff, no poll(0) spin
    rig.clock.advance(20)
    rig.run(3)
    adds = rig.client.requests(ApiKey.ADD_PARTITIONS_TO_TXN)
    assert len(adds) == 2 and len(rig.produce_bodies()) >= 1
    assert {q for t in adds[1].v3_and_below_topics for q in t.partitions} == {0, 1}


def test_add_partitions_waits_for_a_free_slot_not_a_backoff_and_takes_partitions_found_meanwhile() -> None:
    """The coordinator's in-flight window is full of produce requests: AddPartitionsToTxn goes out
    in the first loop after a response frees a slot (the clock never moves), carrying every partition
    found while it waited."""
    from tests.support.mock_client import make_cluster, set_cluster

    rig = initialized(coordinator=0)
    tm = rig.tm
    assert tm is not None
    set_cluster(rig.metadata, make_cluster({"t": 4}, nodes=1))
    rig.client.max_in_flight = 1
    tm.begin_transaction()
    first = rig.send(b"a", partition=0)
    rig.client.prepare(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    rig.run(3)
    assert len(rig.produce_bodies()) == 1 and not first.done()  # unanswered: node 0's only slot is taken
    rig.send(b"b", partition=1)
    rig.run(2)  # t-1 is found; its AddPartitionsToTxn waits for the slot
    rig.send(b"c", partition=3)
    rig.run(2)
    assert len(rig.client.requests(ApiKey.ADD_PARTITIONS_TO_TXN)) == 1
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0), produce_response(0))
    rig.client.prepare(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    rig.run(2)
    adds = rig.client.requests(ApiKey.ADD_PARTITIONS_TO_TXN)
    assert len(adds) == 2
    assert {q for t in adds[1].v3_and_below_topics for q in t.partitions} == {1, 3}
    assert first.done()


def test_init_retries_coordinator_load_and_follows_not_coordinator() -> None:
    rig = txn_rig()
    rig.tm._clock = rig.clock  # type: ignore[union-attr]  # noqa: SLF001
    tm = rig.tm
    assert tm is not None
    rig.client.prepare(ApiKey.FIND_COORDINATOR, find_coordinator_response(0), find_coordinator_response(1))
    rig.client.prepare(
        ApiKey.INIT_PRODUCER_ID,
        init_producer_id_response(error_code=14),
        init_producer_id_response(error_code=16),
        init_producer_id_response(8, 0),
    )
    result = tm.initialize_transactions()
    settle(rig, result, loops=40, step_ms=50)
    result.wait(0)
    assert [r.node_id for r in rig.client.sent if r.api_key == ApiKey.INIT_PRODUCER_ID] == [0, 0, 1]


@pytest.mark.parametrize(
    "code, error",
    [(90, ProducerFencedError), (53, TransactionalIdAuthorizationFailedError), (48, InvalidTxnStateError)],
)
def test_fatal_end_txn_errors_make_every_later_call_raise(code: int, error: type[KafkaError]) -> None:
    rig = initialized()
    tm = rig.tm
    assert tm is not None
    commit = _one_committed_record(rig)
    rig.client.prepare(ApiKey.END_TXN, error_response(code))
    settle(rig, commit)
    with pytest.raises(error):
        commit.wait(0)
    assert tm.state is S.FATAL_ERROR
    for call in (tm.begin_transaction, tm.begin_abort, tm.begin_commit, tm.initialize_transactions):
        with pytest.raises(error):
            call()


def test_commit_timeout_can_be_retried_by_calling_commit_again() -> None:
    rig = initialized()
    tm = rig.tm
    assert tm is not None
    commit = _one_committed_record(rig)
    with pytest.raises(KafkaTimeoutError, match="call commit_transaction\\(\\) again"):
        commit.wait(0)
    again = tm.begin_commit()
    assert again is commit  # the same operation, still going
    rig.client.prepare(ApiKey.END_TXN, error_response(0))
    settle(rig, again)
    again.wait(0)
    assert tm.state is S.READY


def test_an_abortable_produce_error_needs_an_abort_which_bumps_the_epoch(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="kproducer.transaction_manager")
    rig = initialized()
    tm = rig.tm
    assert tm is not None
    tm.begin_transaction()
    failed = rig.send(b"bad", partition=0)
    rig.client.prepare(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    rig.client.prepare(ApiKey.PRODUCE, produce_response(87))
    rig.run(4)
    with pytest.raises(InvalidRecordError):
        failed.result(0)
    assert tm.state is S.ABORTABLE_ERROR
    unsent = rig.send(b"later", partition=1)  # appended (as a send() racing the error would be)
    with pytest.raises(IllegalStateError, match="abortable error"):
        tm.begin_commit()
    abort = tm.begin_abort()
    rig.client.prepare(ApiKey.END_TXN, error_response(0))
    rig.client.prepare(ApiKey.INIT_PRODUCER_ID, init_producer_id_response(77, 4))
    settle(rig, abort)
    abort.wait(0)
    with pytest.raises(TransactionAbortedError, match="aborted before this record was sent"):
        unsent.result(0)
    assert rig.client.requests(ApiKey.END_TXN)[0].committed is False
    bump = rig.client.requests(ApiKey.INIT_PRODUCER_ID)[-1]
    assert (bump.producer_id, bump.producer_epoch) == (77, 3)  # KIP-360: the current id and epoch
    assert tm.state is S.READY and tm.producer_id_and_epoch() == (77, 4)
    assert tm.next_sequence(TP0) == 0
    changes = [(r.levelname, r.getMessage()) for r in caplog.records if "->" in r.getMessage()]
    assert ("WARNING", "transactional id tid: IN_TRANSACTION -> ABORTABLE_ERROR: INVALID_RECORD [t-0] (error 87)") in changes
    assert [m.split(": ", 1)[1] for lvl, m in changes if lvl == "INFO"] == [
        "UNINITIALIZED -> INITIALIZING",
        "INITIALIZING -> READY",
        "READY -> IN_TRANSACTION",
        "ABORTABLE_ERROR -> ABORTING_TRANSACTION",
        "ABORTING_TRANSACTION -> INITIALIZING",
        "INITIALIZING -> READY",
    ]


@pytest.mark.parametrize("code", [87, 59])  # INVALID_RECORD (a sequence gap), UNKNOWN_PRODUCER_ID
def test_a_needed_epoch_bump_is_fatal_when_the_coordinator_cannot_bump(code: int) -> None:
    """InitProducerId below v3 cannot say which epoch it bumps: re-initializing could fence a newer producer."""
    rig = initialized(init_version=2)
    tm = rig.tm
    assert tm is not None
    tm.begin_transaction()
    failed = rig.send(b"x")
    rig.client.prepare(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    rig.client.prepare(ApiKey.PRODUCE, produce_response(code))
    rig.run(4)
    with pytest.raises(KafkaError):
        failed.result(0)
    assert tm.state is S.FATAL_ERROR
    with pytest.raises(KafkaError, match="does not support bumping the producer epoch .*KIP-360.*close\\(\\)"):
        tm.begin_abort()
    assert len(rig.client.requests(ApiKey.INIT_PRODUCER_ID)) == 1  # no unconditional re-initialization


def test_unknown_producer_id_in_a_transaction_is_abortable() -> None:
    rig = initialized()
    tm = rig.tm
    assert tm is not None
    tm.begin_transaction()
    fut = rig.send(b"x")
    rig.client.prepare(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_response(0))
    rig.client.prepare(ApiKey.PRODUCE, produce_response(59))
    rig.run(4)
    with pytest.raises(KafkaError, match="UNKNOWN_PRODUCER_ID"):
        fut.result(0)
    assert tm.state is S.ABORTABLE_ERROR
    assert len(rig.client.requests(ApiKey.INIT_PRODUCER_ID)) == 1  # no idempotent reset in a transaction


def test_topic_authorization_on_add_partitions_is_abortable() -> None:
    rig = initialized()
    tm = rig.tm
    assert tm is not None
    tm.begin_transaction()
    fut = rig.send(b"x")
    rig.client.prepare(ApiKey.ADD_PARTITIONS_TO_TXN, add_partitions_response(29))
    rig.run(4)
    assert tm.state is S.ABORTABLE_ERROR
    assert isinstance(tm.last_error, TopicAuthorizationFailedError) and "t" in str(tm.last_error)
    with pytest.raises(TransactionAbortedError, match="TOPIC_AUTHORIZATION_FAILED|not authorized"):
        fut.result(0)
    abort = tm.begin_abort()
    rig.client.prepare(ApiKey.END_TXN, error_response(0))
    settle(rig, abort)
    abort.wait(0)
    assert tm.state is S.READY


def test_send_offsets_adds_the_group_then_commits_at_the_group_coordinator() -> None:
    rig = initialized(coordinator=1)
    tm = rig.tm
    assert tm is not None
    tm.begin_transaction()
    rig.client.prepare(ApiKey.ADD_OFFSETS_TO_TXN, error_response(0))
    rig.client.prepare(ApiKey.FIND_COORDINATOR, find_coordinator_response(0))
    rig.client.prepare(ApiKey.TXN_OFFSET_COMMIT, txn_offset_commit_response(16), txn_offset_commit_response(0))
    rig.client.prepare(ApiKey.FIND_COORDINATOR, find_coordinator_response(1))
    group = GroupMetadata("g1", generation_id=4, member_id="m-1")
    result = tm.send_offsets_to_transaction({TopicPartition("in", 0): (41, None)}, group)
    settle(rig, result)
    result.wait(0)
    add = rig.client.requests(ApiKey.ADD_OFFSETS_TO_TXN)[0]
    assert add.group_id == "g1"
    finds = rig.client.requests(ApiKey.FIND_COORDINATOR)
    assert [(f.key_type, tuple(f.coordinator_keys)) for f in finds[1:]] == [(COORDINATOR_KEY_GROUP, ("g1",))] * 2
    commits = rig.client.requests(ApiKey.TXN_OFFSET_COMMIT)
    assert len(commits) == 2  # NOT_COORDINATOR: found again, sent again
    assert commits[0].generation_id == 4 and commits[0].member_id == "m-1"
    assert commits[0].topics[0].partitions[0].committed_offset == 41
    # The transaction now holds the offsets: commit sends EndTxn even with no record.
    commit = tm.begin_commit()
    rig.client.prepare(ApiKey.END_TXN, error_response(0))
    settle(rig, commit)
    commit.wait(0)
    assert len(rig.client.requests(ApiKey.END_TXN)) == 1


def test_a_disconnected_coordinator_request_is_sent_again() -> None:
    from tests.support.mock_client import DISCONNECT

    rig = initialized()
    commit = _one_committed_record(rig)
    rig.client.prepare(ApiKey.END_TXN, DISCONNECT, error_response(0))
    rig.client.prepare(ApiKey.FIND_COORDINATOR, find_coordinator_response(1))
    settle(rig, commit, step_ms=100)
    commit.wait(0)
    assert len(rig.client.requests(ApiKey.END_TXN)) == 2


def test_coordinator_requests_go_out_by_priority() -> None:
    """FindCoordinator, then InitProducerId, then AddPartitions/AddOffsets/TxnOffsetCommit, then EndTxn."""
    from kproducer.transaction_manager import Priority, TxnRequest

    tm = TransactionManager("tid")
    names = ["EndTxn", "AddPartitionsToTxn", "InitProducerId", "FindCoordinator", "AddOffsetsToTxn"]
    prio = {
        "EndTxn": Priority.END_TXN,
        "AddPartitionsToTxn": Priority.ADD_PARTITIONS_OR_OFFSETS,
        "AddOffsetsToTxn": Priority.ADD_PARTITIONS_OR_OFFSETS,
        "InitProducerId": Priority.INIT_PRODUCER_ID,
        "FindCoordinator": Priority.FIND_COORDINATOR,
    }
    for name in names:
        tm._enqueue(TxnRequest(name, ApiKey.END_TXN, prio[name], lambda v: None, lambda b: None))  # noqa: SLF001
    order = []
    for _ in names:
        req, _wait = tm.next_request(False, 0)
        assert req is not None
        order.append(req.name)
    assert order == ["FindCoordinator", "InitProducerId", "AddPartitionsToTxn", "AddOffsetsToTxn", "EndTxn"]
