"""The Producer's transactional API: init, begin, send offsets, commit, abort, and ``with producer.transaction()``.

Java's ``KafkaProducer`` transactional methods over the transaction manager
(:mod:`kproducer.transaction_manager`), which the Sender drives. Each function
takes the producer and is bound as a :class:`~kproducer.producer.Producer`
method; a transactional producer's ``send()`` calls
``_check_send_in_transaction`` first. Log lines keep the ``kproducer.producer``
logger.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from functools import update_wrapper
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from kproducer.errors import IllegalStateError, KafkaError, KafkaTimeoutError
from kproducer.structs import TopicPartition
from kproducer.transaction_manager import (
    GroupMetadata,
    TransactionalRequestResult,
    TransactionManager,
    TransactionState,
    group_metadata_from,
)

if TYPE_CHECKING:
    from kproducer.producer import Producer

__all__ = [
    "abort_transaction",
    "begin_transaction",
    "commit_transaction",
    "init_transactions",
    "send_offsets_to_transaction",
    "transaction",
]

log = logging.getLogger("kproducer.producer")


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _traced(
    operation: str,
) -> Callable[[Callable[Concatenate[Producer, _P], _R]], Callable[Concatenate[Producer, _P], _R]]:
    """A span around the transaction step when the producer traces (kproducer.tracing), else the plain call."""

    def wrap(fn: Callable[Concatenate[Producer, _P], _R]) -> Callable[Concatenate[Producer, _P], _R]:
        def step(producer: Producer, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            tracing = producer._tracing
            if tracing is None or not tracing.active():
                return fn(producer, *args, **kwargs)
            with tracing.transaction_step(operation, lambda: (producer.producer_id, producer.producer_epoch)):
                return fn(producer, *args, **kwargs)

        update_wrapper(step, fn)
        return step

    return wrap


def _require_transactional(producer: Producer, operation: str) -> TransactionManager:
    if producer._closed or producer._forked:
        producer._raise_unusable()
    if producer._txn is None:
        raise IllegalStateError(
            f"{operation}() needs a transactional producer: set transactional.id in the producer's config"
        )
    return producer._txn


def _check_send_in_transaction(producer: Producer) -> None:
    """A transactional producer sends only inside a transaction (Java's maybeAddPartition checks)."""
    tm = producer._txn
    assert tm is not None
    state = tm.state
    if state is TransactionState.IN_TRANSACTION:
        return
    if tm.fatal_error is not None:
        raise tm.fatal_error
    if state is TransactionState.ABORTABLE_ERROR:
        raise IllegalStateError(
            f"send() is not allowed: the transaction hit an abortable error ({tm.last_error}); "
            "call abort_transaction(), then begin a new transaction"
        ) from tm.last_error
    from kproducer.transaction_manager import ALLOWED_NEXT_CALLS

    raise IllegalStateError(
        f"send() on the transactional producer {producer._transactional_id!r} is only allowed inside a "
        f"transaction; it is in state {state.value}: {ALLOWED_NEXT_CALLS[state]}"
    )


def _txn_wait(producer: Producer, result: TransactionalRequestResult, timeout: float | None, metric: str, start_ns: int) -> None:
    producer._wakeup()
    wait = producer._max_block_ms / 1000.0 if timeout is None else timeout
    try:
        result.wait(wait)
    finally:
        if result.is_completed and producer._txn_sensors is not None:
            producer._txn_sensors[metric].record(float(time.perf_counter_ns() - start_ns))


def init_transactions(producer: Producer, timeout: float | None = None) -> None:
    """Register ``transactional.id`` with its coordinator: fences older producers with the same id
    and completes their open transaction. Call once, before the first transaction.

    ``timeout`` (seconds, default ``max.block.ms``): on KafkaTimeoutError call it again to keep
    waiting for the same initialization.
    """
    tm = _require_transactional(producer, "init_transactions")
    start = time.perf_counter_ns()
    result = tm.initialize_transactions()
    _txn_wait(producer, result, timeout, "init", start)


@_traced("begin_transaction")
def begin_transaction(producer: Producer) -> None:
    """Open a transaction: records sent until commit or abort belong to it."""
    tm = _require_transactional(producer, "begin_transaction")
    start = time.perf_counter_ns()
    tm.begin_transaction()
    if producer._lane is not None:
        producer._lane.enabled = True
    if producer._txn_sensors is not None:
        producer._txn_sensors["begin"].record(float(time.perf_counter_ns() - start))


def send_offsets_to_transaction(
    producer: Producer,
    offsets: Mapping[TopicPartition, int] | Iterable[Any],
    group_metadata: str | GroupMetadata | Any,
    timeout: float | None = None,
) -> None:
    """Commit a consumer group's offsets as part of the open transaction (consume-transform-produce).

    ``offsets``: ``{TopicPartition: next offset to consume}``, or confluent-kafka /
    kafka-python TopicPartition objects carrying ``offset`` (the next offset to
    consume, as ``consumer.position()`` gives). ``group_metadata``: a group id, or the
    consumer's group metadata, which also fences zombie members (KIP-447).
    """
    tm = _require_transactional(producer, "send_offsets_to_transaction")
    group = group_metadata_from(group_metadata)
    normalized = _normalize_offsets(offsets)
    start = time.perf_counter_ns()
    if not normalized:
        return
    result = tm.send_offsets_to_transaction(normalized, group)
    _txn_wait(producer, result, timeout, "send_offsets", start)


@_traced("commit_transaction")
def commit_transaction(producer: Producer, timeout: float | None = None) -> None:
    """Send every record of the transaction, wait for acknowledgement, then commit it.

    On KafkaTimeoutError the commit goes on: call commit_transaction() again to wait for it.
    An abortable error (a record failed) raises here: call abort_transaction() next.
    """
    _end_transaction(producer, "commit_transaction", timeout, commit=True)


@_traced("abort_transaction")
def abort_transaction(producer: Producer, timeout: float | None = None) -> None:
    """Abort the transaction: records not yet sent fail with TransactionAbortedError; those
    already written are hidden from read_committed consumers by the abort marker."""
    _end_transaction(producer, "abort_transaction", timeout, commit=False)


def _end_transaction(producer: Producer, operation: str, timeout: float | None, *, commit: bool) -> None:
    """commit_transaction() / abort_transaction(): the transaction's parked records first, then EndTxn."""
    tm = _require_transactional(producer, operation)
    start = time.perf_counter_ns()
    _await_parked_for_transaction(producer, operation, timeout)
    result = tm.begin_commit() if commit else tm.begin_abort()
    if producer._lane is not None:
        producer._lane.enabled = False
    _txn_wait(producer, result, timeout, "commit" if commit else "abort", start)


def _await_parked_for_transaction(producer: Producer, operation: str, timeout: float | None) -> None:
    """Records sent in the transaction that still wait for their topic's metadata belong to it.

    send() does not block on metadata, so such a record is not in a batch yet; the
    transaction may end only once it is (or once it failed at ``max.block.ms``), as
    Java's blocking send() guarantees. Until then the state is unchanged, so a
    KafkaTimeoutError here can be retried by calling the same method again.
    """
    router = producer._router
    if not router.has_parked():
        return
    producer._wakeup()
    wait = producer._max_block_ms / 1000.0 if timeout is None else timeout
    if not router.await_unparked(wait):
        raise KafkaTimeoutError(
            f"{operation}(): {router.parked_count} record(s) of this transaction still wait for their "
            f"topic's metadata after {wait:g} s; call {operation}() again to keep waiting"
        )


@contextmanager
def transaction(producer: Producer, timeout: float | None = None) -> Iterator[Producer]:
    """``with producer.transaction():`` begins, commits on success and aborts on an exception.

    The exception is re-raised after the abort; a failed commit raises its error.
    """
    producer.begin_transaction()
    try:
        yield producer
    except BaseException:
        if producer._may_abort_after_error():
            try:
                producer.abort_transaction(timeout)
            except KafkaError:
                log.warning("aborting the transaction after an error failed", exc_info=True)
        raise
    producer.commit_transaction(timeout)


def _may_abort_after_error(producer: Producer) -> bool:
    """Whether a transaction whose block raised can (and so should) be aborted now."""
    tm = producer._txn
    return tm is not None and tm.fatal_error is None and tm.state in (
        TransactionState.IN_TRANSACTION,
        TransactionState.ABORTABLE_ERROR,
        TransactionState.ABORTING_TRANSACTION,
    )


def _on_transaction_state_change(producer: Producer, source: TransactionState, target: TransactionState) -> None:
    if target is not TransactionState.IN_TRANSACTION and producer._lane is not None:
        producer._lane.enabled = False


def _normalize_offsets(offsets: Mapping[TopicPartition, int] | Iterable[Any]) -> dict[TopicPartition, tuple[int, str | None]]:
    """``{TopicPartition: offset}`` or objects with topic/partition/offset (and metadata) attributes or methods."""
    out: dict[TopicPartition, tuple[int, str | None]] = {}
    items: Iterable[Any] = offsets.items() if isinstance(offsets, Mapping) else offsets
    for item in items:
        if isinstance(item, tuple) and len(item) == 2:
            tp_like, offset = item
            meta = getattr(offset, "metadata", None)
            offset = getattr(offset, "offset", offset)
        else:
            tp_like, offset, meta = item, getattr(item, "offset", None), getattr(item, "metadata", None)
        topic = getattr(tp_like, "topic", None)
        partition = getattr(tp_like, "partition", None)
        topic = topic() if callable(topic) else topic
        partition = partition() if callable(partition) else partition
        offset = offset() if callable(offset) else offset
        meta = meta() if callable(meta) else meta
        if not isinstance(topic, str) or not isinstance(partition, int) or not isinstance(offset, int) or offset < 0:
            raise ValueError(
                f"send_offsets_to_transaction: {item!r} is not a (topic, partition) with a next offset >= 0 to commit"
            )
        out[TopicPartition(topic, partition)] = (offset, meta if isinstance(meta, str) else None)
    return out
