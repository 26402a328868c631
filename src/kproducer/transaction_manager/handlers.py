"""The coordinator requests of a transactional producer and their response handlers.

One function per request, as Java's ``TransactionManager`` has one ``TxnRequestHandler``
subclass per request (FindCoordinator, InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
TxnOffsetCommit, EndTxn). Each returns a :class:`~kproducer.transaction_manager.requests.TxnRequest`
whose ``build`` makes the request body for the version the Sender negotiated and whose
``on_response`` applies the answer to the manager, on the Sender thread. A broker error goes
to the manager's one error handler, which reads the tables of ``error_classes``. Like Java's
inner handler classes, these work on the manager's own state.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from kproducer.errors import ABORTABLE_ERRORS, PRODUCER_FENCED_CODES, KafkaError, error_for_code
from kproducer.network.api_keys import COORDINATOR_KEY_GROUP, ApiKey
from kproducer.structs import TopicPartition
from kproducer.transaction_manager.error_classes import (
    CONCURRENT_TRANSACTIONS,
    COORDINATOR_MOVED_ERRORS,
    FATAL_ERRORS,
    INVALID_PRODUCER_ID_MAPPING,
    OPERATION_NOT_ATTEMPTED,
    RETRY_ERRORS,
    RETRY_OR_MOVED_ERRORS,
    TOPIC_AUTHORIZATION_FAILED,
    UNKNOWN_PRODUCER_ID,
)
from kproducer.transaction_manager.group_metadata import GroupMetadata
from kproducer.transaction_manager.requests import Priority, TransactionalRequestResult, TxnRequest
from kproducer.transaction_manager.sequences import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from kproducer.transaction_manager.state import TransactionState

if TYPE_CHECKING:
    from kproducer.transaction_manager.manager import TransactionManager

# The package's logger, as when the transaction manager was one module.
log = logging.getLogger("kproducer.transaction_manager")

#: A consumer group's offsets to commit in the transaction: the offset and its metadata, per partition.
Offsets = Mapping[TopicPartition, tuple[int, str | None]]


def _transactional_id(tm: TransactionManager) -> str:
    tid = tm.transactional_id
    assert tid is not None, "only a transactional producer sends this request"
    return tid


def end_txn(tm: TransactionManager, result: TransactionalRequestResult, committed: bool) -> TxnRequest:
    """EndTxn(COMMIT or ABORT): on success the transaction is complete."""
    tid = _transactional_id(tm)

    from kproducer.network import protocol  # the schemas load with the network layer

    def build(version: int) -> Any:
        return protocol.build_end_txn_request(version, tid, tm.producer_id, tm.producer_epoch, committed)

    def on_response(body: Any) -> None:
        code = int(body.error_code)
        if code == 0:
            tm._complete_transaction(result)
        else:
            handle_error(tm, req, code, None)

    req = TxnRequest("EndTxn", ApiKey.END_TXN, Priority.END_TXN, build, on_response, result=result, is_end_txn=True)
    return req


def add_offsets_to_txn(
    tm: TransactionManager, offsets: Offsets, group: GroupMetadata, result: TransactionalRequestResult
) -> TxnRequest:
    """AddOffsetsToTxn: the group's offsets join the transaction; then TxnOffsetCommit writes them."""
    tid = _transactional_id(tm)

    from kproducer.network import protocol  # the schemas load with the network layer

    def build(version: int) -> Any:
        return protocol.build_add_offsets_to_txn_request(version, tid, tm.producer_id, tm.producer_epoch, group.group_id)

    def on_response(body: Any) -> None:
        code = int(body.error_code)
        if code != 0:
            handle_error(tm, req, code, None)
            return
        tm._transaction_started = True
        tm._enqueue(txn_offset_commit(tm, offsets, group, result))

    req = TxnRequest(
        "AddOffsetsToTxn", ApiKey.ADD_OFFSETS_TO_TXN, Priority.ADD_PARTITIONS_OR_OFFSETS, build, on_response, result=result
    )
    return req


def txn_offset_commit(
    tm: TransactionManager, offsets: Offsets, group: GroupMetadata, result: TransactionalRequestResult
) -> TxnRequest:
    """TxnOffsetCommit, to the group coordinator: a retry carries only the partitions that failed."""
    tid = _transactional_id(tm)
    remaining = dict(offsets)

    from kproducer.network import protocol  # the schemas load with the network layer

    def build(version: int) -> Any:
        return protocol.build_txn_offset_commit_request(
            version,
            tid,
            group.group_id,
            tm.producer_id,
            tm.producer_epoch,
            remaining,
            generation_id=group.generation_id,
            member_id=group.member_id,
            group_instance_id=group.group_instance_id,
        )

    def on_response(body: Any) -> None:
        errors = protocol.txn_offset_commit_errors(body)
        failed = {tp: c for tp, c in errors.items() if c != 0}
        for tp in errors:
            if tp not in failed:
                remaining.pop(tp, None)
        if not failed:
            result.done()
            return
        # The worst error decides; only the partitions that failed are sent again.
        code = next((c for c in failed.values() if c in FATAL_ERRORS or c not in RETRY_OR_MOVED_ERRORS), None)
        if code is None:
            code = next(iter(failed.values()))
        handle_error(tm, req, code, None)

    req = TxnRequest(
        "TxnOffsetCommit",
        ApiKey.TXN_OFFSET_COMMIT,
        Priority.ADD_PARTITIONS_OR_OFFSETS,
        build,
        on_response,
        coordinator=COORDINATOR_KEY_GROUP,
        coordinator_key=group.group_id,
        result=result,
    )
    return req


def init_producer_id(tm: TransactionManager, result: TransactionalRequestResult, bump: bool) -> TxnRequest:
    """InitProducerId for the transactional id; with ``bump``, naming the current id and epoch (KIP-360)."""
    tid = tm.transactional_id

    from kproducer.network import protocol  # the schemas load with the network layer

    def build(version: int) -> Any:
        pid, epoch = (tm.producer_id, tm.producer_epoch) if bump else (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        return protocol.build_init_producer_id_request(version, tid, tm.transaction_timeout_ms, pid, epoch)

    def on_response(body: Any) -> None:
        code = int(body.error_code)
        if code != 0:
            handle_error(tm, req, code, None)
            return
        tm.set_producer_id_and_epoch(int(body.producer_id), int(body.producer_epoch))
        with tm._lock:
            tm._epoch_bump_required = False
            tm._transition_to(TransactionState.READY)
        result.done()

    req = TxnRequest("InitProducerId", ApiKey.INIT_PRODUCER_ID, Priority.INIT_PRODUCER_ID, build, on_response, result=result)
    return req


def add_partitions_to_txn(tm: TransactionManager, partitions: set[TopicPartition]) -> TxnRequest:
    """AddPartitionsToTxn: the partitions join the transaction before their first batch drains."""
    tid = _transactional_id(tm)

    from kproducer.network import protocol  # the schemas load with the network layer

    def build(version: int) -> Any:
        return protocol.build_add_partitions_to_txn_request(
            version, tid, tm.producer_id, tm.producer_epoch, sorted(req.partitions or ())
        )

    def on_response(body: Any) -> None:
        parts = set(req.partitions or ())
        errors = protocol.add_partitions_to_txn_errors(body)
        failed = {tp: c for tp, c in errors.items() if c != 0 and c != OPERATION_NOT_ATTEMPTED}
        with tm._lock:
            if not failed:
                tm._partitions_in_txn.update(parts)
                tm._partitions_being_added.difference_update(parts)
                tm._transaction_started = True
                return
        code = next((c for c in failed.values() if c != TOPIC_AUTHORIZATION_FAILED), None)
        if code is None:
            topics = sorted({tp.topic for tp in failed})
            with tm._lock:
                tm._partitions_being_added.difference_update(parts)
            tm.transition_to_abortable(
                error_for_code(
                    TOPIC_AUTHORIZATION_FAILED,
                    f"not authorized to write to topic(s) {', '.join(topics)} in a transaction",
                )
            )
            return
        handle_error(tm, req, code, None)

    req = TxnRequest(
        "AddPartitionsToTxn",
        ApiKey.ADD_PARTITIONS_TO_TXN,
        Priority.ADD_PARTITIONS_OR_OFFSETS,
        build,
        on_response,
        partitions=set(partitions),
    )
    return req


def find_coordinator(tm: TransactionManager, key_type: int, key: str) -> TxnRequest:
    """FindCoordinator for ``key`` (the transactional id or a group id), to any broker."""

    from kproducer.network import protocol  # the schemas load with the network layer

    def build(version: int) -> Any:
        return protocol.build_find_coordinator_request(version, key, key_type)

    def on_response(body: Any) -> None:
        try:
            found = protocol.find_coordinator_result(body, key)
        except protocol.ProtocolError as e:
            tm.transition_to_fatal(KafkaError(str(e)))
            return
        if found.error_code == 0:
            tm._coordinators[(key_type, key)] = found.node_id
            log.debug("coordinator for %s is node %d (%s:%d)", key, found.node_id, found.host, found.port)
            return
        handle_error(tm, req, found.error_code, found.error_message)

    req = TxnRequest(
        "FindCoordinator", ApiKey.FIND_COORDINATOR, Priority.FIND_COORDINATOR, build, on_response, coordinator=None, coordinator_key=key
    )
    return req


def handle_error(tm: TransactionManager, req: TxnRequest, code: int, message: str | None) -> None:
    """One broker error on a coordinator request, by the tables of ``error_classes``."""
    now = tm._clock()
    req.attempts += 1
    if code in COORDINATOR_MOVED_ERRORS:
        if req.api_key is ApiKey.FIND_COORDINATOR:
            tm.requeue(req, now)
            return
        log.info("%s: %s; finding the coordinator again", req.name, error_for_code(code).name)
        if req.coordinator is not None:
            tm.lookup_coordinator(req.coordinator, req.coordinator_key)
        tm.requeue(req, now, 0)
        return
    if code in RETRY_ERRORS:
        # CONCURRENT_TRANSACTIONS on a transaction's first AddPartitionsToTxn means the previous
        # transaction's markers are still being written, which clears within a few ms: retry
        # after 20 ms there instead of retry.backoff.ms, as Java's AddPartitionsToTxnHandler does.
        quick = (
            code == CONCURRENT_TRANSACTIONS
            and req.api_key is ApiKey.ADD_PARTITIONS_TO_TXN
            and not tm._partitions_in_txn
        )
        log.debug("%s: %s; retrying", req.name, error_for_code(code).name)
        tm.requeue(req, now, 20 if quick else None)
        return
    exc = error_for_code(code, message)
    if code in ABORTABLE_ERRORS and tm._state is not TransactionState.INITIALIZING:
        if req.api_key is ApiKey.ADD_PARTITIONS_TO_TXN:
            tm._partitions_being_added.clear()
        if code in (UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_ID_MAPPING):
            tm._epoch_bump_required = True
            if not tm._epoch_bump_possible(exc):
                return
        if req.is_end_txn and tm._state is TransactionState.ABORTING_TRANSACTION:
            tm.transition_to_fatal(exc)
            return
        tm.transition_to_abortable(exc)
        if req.result is not None and req.api_key is not ApiKey.END_TXN:
            req.result.done(exc)
        return
    if code in PRODUCER_FENCED_CODES:
        exc = tm.fenced_error(code)
    tm.transition_to_fatal(exc)
