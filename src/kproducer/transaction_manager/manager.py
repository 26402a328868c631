"""The TransactionManager: producer id and epoch (idempotence) and, with a transactional id, transactions.

As in the Java client's ``TransactionManager``, one object holds both halves:

* **Idempotence** (KIP-98): the producer id and epoch, and each partition's sequences
  (:class:`~kproducer.transaction_manager.sequences.TxnPartitionMap`). When the sequence
  state of a partition can no longer be trusted (a batch that had a sequence failed,
  UNKNOWN_PRODUCER_ID, an out-of-order sequence not explained by an earlier failed
  batch), an idempotent producer asks for a fresh producer id once nothing is in flight
  and restarts every partition's sequence at 0 (KIP-360).

* **Transactions** (``transactional.id``): the state machine of ``state`` (changed only by
  :meth:`TransactionManager._transition_to`), the caller-thread operations that start
  each step, and the Sender's side: the priority queue of coordinator requests (one
  method per request, as Java's ``TxnRequestHandler`` subclasses, each with its response
  handler), sent between produce requests, and the one handler of their broker errors,
  which reads the tables of ``error_classes``.

The Sender thread owns the protocol state; the caller threads only start
operations (``begin_transaction()``, ``commit_transaction()``...) under
``self._lock`` and wait on a :class:`TransactionalRequestResult`.

One class owns this state, so the state machine's guards, the operations that use them
and the request handlers that change it are its methods; the sequences, state tables,
queued-request types and error classes are the types it is made of, in their own modules.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kproducer.errors import (
    ABORTABLE_ERRORS,
    PRODUCER_FENCED_CODES,
    FatalError,
    IllegalStateError,
    KafkaError,
    TransactionAbortedError,
    error_for_code,
)
from kproducer.network.api_keys import COORDINATOR_KEY_GROUP, ApiKey
from kproducer.structs import TopicPartition
from kproducer.transaction_manager.error_classes import (
    CONCURRENT_TRANSACTIONS,
    COORDINATOR_MOVED_ERRORS,
    FATAL_ERRORS,
    FATAL_PRODUCE_ERRORS,
    INVALID_PRODUCER_ID_MAPPING,
    OPERATION_NOT_ATTEMPTED,
    RETRY_ERRORS,
    RETRY_OR_MOVED_ERRORS,
    TOPIC_AUTHORIZATION_FAILED,
    UNKNOWN_PRODUCER_ID,
)
from kproducer.transaction_manager.group_metadata import GroupMetadata
from kproducer.transaction_manager.requests import Priority, TransactionalRequestResult, TxnRequest
from kproducer.transaction_manager.sequences import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TxnPartitionMap,
)
from kproducer.transaction_manager.state import ALLOWED_NEXT_CALLS, ALLOWED_PREVIOUS_STATES, TransactionState

if TYPE_CHECKING:
    from kproducer.accumulator.batch import ProducerBatch

# The package's logger, as when the transaction manager was one module.
log = logging.getLogger("kproducer.transaction_manager")


#: A consumer group's offsets to commit in the transaction: the offset and its metadata, per partition.
Offsets = Mapping[TopicPartition, tuple[int, str | None]]


class TransactionManager:
    """Producer id, epoch and sequences; with a ``transactional_id``, the transaction state machine."""

    def __init__(
        self,
        transactional_id: str | None = None,
        *,
        transaction_timeout_ms: int = 60_000,
        retry_backoff_ms: int = 100,
        clock_ms: Callable[[], int] | None = None,
        on_state_change: Callable[[TransactionState, TransactionState], None] | None = None,
    ) -> None:
        self.transactional_id = transactional_id
        self.transactional = transactional_id is not None
        self.transaction_timeout_ms = transaction_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self._clock = clock_ms or (lambda: 0)
        self._on_state_change = on_state_change
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self._sequences = TxnPartitionMap()
        self._reset_required = False
        self._init_in_progress = False
        self._fatal: KafkaError | None = None
        self._lock = threading.RLock()
        # ---- transactions
        self._state = TransactionState.UNINITIALIZED
        self._last_error: KafkaError | None = None
        self._queue: list[tuple[int, int, TxnRequest]] = []
        self._seq = itertools.count()
        self._in_flight_request: TxnRequest | None = None
        self._coordinators: dict[tuple[int, str], int] = {}
        self._partitions_in_txn: set[TopicPartition] = set()
        self._pending_partitions: set[TopicPartition] = set()
        self._partitions_being_added: set[TopicPartition] = set()
        self._transaction_started = False
        self._epoch_bump_required = False
        # Whether the coordinator takes InitProducerId v3+ (KIP-360: the current id and epoch
        # in the request), learnt from the version InitProducerId was sent with.
        self._coordinator_supports_epoch_bump = True
        self._pending_results: dict[str, TransactionalRequestResult] = {}

    # ================================================================== states
    @property
    def state(self) -> TransactionState:
        return self._state

    def _transition_to(self, target: TransactionState, error: KafkaError | None = None) -> None:
        """The one place a state changes: checked against ALLOWED_PREVIOUS_STATES."""
        with self._lock:
            source = self._state
            if source is TransactionState.FATAL_ERROR and target is TransactionState.FATAL_ERROR:
                return
            if source not in ALLOWED_PREVIOUS_STATES[target]:
                raise IllegalStateError(
                    f"transactional id {self.transactional_id!r}: invalid transition from {source.value} to "
                    f"{target.value}; in {source.value}: {ALLOWED_NEXT_CALLS[source]}"
                )
            if target is TransactionState.FATAL_ERROR or target is TransactionState.ABORTABLE_ERROR:
                self._last_error = error
            elif target is not TransactionState.ABORTING_TRANSACTION:
                self._last_error = None
            self._state = target
        if not self.transactional:
            # An idempotent producer's id changes are logged where they happen.
            log.debug("idempotent producer: %s -> %s", source.value, target.value)
        elif target in (TransactionState.ABORTABLE_ERROR, TransactionState.FATAL_ERROR):
            log.warning(
                "transactional id %s: %s -> %s: %s", self.transactional_id, source.value, target.value, error
            )
        else:
            log.info("transactional id %s: %s -> %s", self.transactional_id, source.value, target.value)
        if self._on_state_change is not None:
            self._on_state_change(source, target)

    @property
    def last_error(self) -> KafkaError | None:
        return self._last_error

    def has_abortable_error(self) -> bool:
        return self._state is TransactionState.ABORTABLE_ERROR

    def is_aborting(self) -> bool:
        return self._state is TransactionState.ABORTING_TRANSACTION

    def is_completing(self) -> bool:
        return self._state in (TransactionState.COMMITTING_TRANSACTION, TransactionState.ABORTING_TRANSACTION)

    def is_in_transaction(self) -> bool:
        return self._state is TransactionState.IN_TRANSACTION

    # ================================================================== producer id (idempotence)
    def has_producer_id(self) -> bool:
        return self.producer_id != NO_PRODUCER_ID

    def needs_producer_id(self) -> bool:
        """True when the Sender must send an idempotent InitProducerId before draining (never when transactional)."""
        if self.transactional:
            return False
        return self._fatal is None and (not self.has_producer_id() or self._reset_required)

    def reset_pending(self) -> bool:
        return self._reset_required

    @property
    def init_in_progress(self) -> bool:
        return self._init_in_progress

    def begin_init(self) -> None:
        self._init_in_progress = True
        if self._state is not TransactionState.INITIALIZING and self._state is not TransactionState.FATAL_ERROR:
            self._transition_to(TransactionState.INITIALIZING)

    def init_failed(self) -> None:
        self._init_in_progress = False

    def set_producer_id_and_epoch(self, producer_id: int, epoch: int) -> None:
        """A new producer id or epoch: every partition's sequence starts again at 0."""
        log.info("producer id %d, epoch %d", producer_id, epoch)
        self.producer_id = producer_id
        self.producer_epoch = epoch
        self._sequences.reset_sequences()
        self._reset_required = False
        self._init_in_progress = False
        if not self.transactional and self._state is TransactionState.INITIALIZING:
            self._transition_to(TransactionState.READY)

    def request_producer_id_reset(self, reason: str) -> None:
        """Sequence state is no longer trustworthy: get a fresh producer id once nothing is in flight."""
        if self.transactional:
            # A transactional producer recovers by aborting and bumping the epoch instead.
            self._epoch_bump_required = True
            return
        if not self._reset_required:
            log.info("requesting a new producer id: %s", reason)
        self._reset_required = True

    def producer_id_and_epoch(self) -> tuple[int, int]:
        return self.producer_id, self.producer_epoch

    # ================================================================== fatal state
    def transition_to_fatal(self, error: KafkaError) -> None:
        with self._lock:
            if self._fatal is None:
                self._fatal = error
                if not self.transactional:
                    log.error("idempotent producer entered a fatal state: %s", error)
            self._transition_to(TransactionState.FATAL_ERROR, error)
            pending = list(self._pending_results.values())
            self._pending_results.clear()
            queued = [r for _p, _s, r in self._queue]
            self._queue.clear()
        for req in queued:
            if req.result is not None:
                req.result.done(error)
        for result in pending:
            result.done(error)

    def transition_to_abortable(self, error: KafkaError) -> None:
        error.mark_transaction_abortable()  # confluent-kafka's err.txn_requires_abort()
        with self._lock:
            if self._state is TransactionState.ABORTING_TRANSACTION or self._fatal is not None:
                # Already aborting: the abort goes on; the error is still logged.
                log.warning("transactional id %s: %s while aborting", self.transactional_id, error)
                return
            if self._state is TransactionState.COMMITTING_TRANSACTION:
                # The commit can no longer succeed: its waiter gets the error.
                commit = self._pending_results.pop("commit_transaction", None)
                self._queue = [e for e in self._queue if not e[2].is_end_txn]
                heapq.heapify(self._queue)
                if commit is not None:
                    commit.done(error)
            if self._state in ALLOWED_PREVIOUS_STATES[TransactionState.ABORTABLE_ERROR]:
                self._transition_to(TransactionState.ABORTABLE_ERROR, error)
            else:
                self._last_error = error

    @property
    def fatal_error(self) -> KafkaError | None:
        return self._fatal

    # ================================================================== sequences (accumulator drain hook)
    def should_stop_draining(self) -> bool:
        """No new batch gets a sequence while a producer-id reset is pending or none is known."""
        return self._fatal is not None or not self.has_producer_id() or self._reset_required

    def next_sequence(self, tp: TopicPartition) -> int:
        return self._sequences.next_sequence(tp)

    def increment_sequence(self, tp: TopicPartition, increment: int) -> None:
        self._sequences.increment_sequence(tp, increment)

    def add_in_flight(self, batch: ProducerBatch) -> None:
        self._sequences.add_in_flight(batch)

    def remove_in_flight(self, batch: ProducerBatch) -> None:
        self._sequences.remove_in_flight(batch)

    def has_in_flight(self) -> bool:
        return self._sequences.has_in_flight()

    def is_next_sequence(self, batch: ProducerBatch) -> bool:
        """Whether ``batch`` directly follows the last acknowledged sequence of its partition."""
        return self._sequences.is_next_sequence(batch)

    def first_in_flight_sequence(self, tp: TopicPartition) -> int:
        return self._sequences.first_in_flight_sequence(tp)

    def retry_in_flight(self, tp: TopicPartition) -> bool:
        """Whether a batch of ``tp`` that was retried is in flight again (the drain's order gate)."""
        return self._sequences.retry_in_flight(tp)

    def may_drain_partition(self, tp: TopicPartition) -> bool:
        """Whether ``tp`` is in the open transaction; if not, it is queued for AddPartitionsToTxn.

        The drain's transactional gate (Java adds partitions on send(); here the Sender
        adds them before the first batch of each new partition drains, so that no send
        path, the C lane included, has to know about transactions).
        """
        if tp in self._partitions_in_txn:
            return True
        state = self._state
        if (
            state is TransactionState.IN_TRANSACTION or state is TransactionState.COMMITTING_TRANSACTION
        ) and tp not in self._partitions_being_added:
            self._pending_partitions.add(tp)
        return False

    # ================================================================== completion
    def handle_completed_batch(self, batch: ProducerBatch) -> None:
        self._sequences.handle_completed_batch(batch)

    def can_retry_out_of_order(self, batch: ProducerBatch) -> bool:
        """OUT_OF_ORDER_SEQUENCE_NUMBER is retriable when an earlier batch of the partition is still unresolved.

        The broker rejects every batch after one that failed; those followers are
        retried once the earlier one is, so they are not errors of their own.
        """
        if batch.producer_id != self.producer_id or batch.producer_epoch != self.producer_epoch:
            return True  # sent under an old producer id: it will be resequenced
        return not self.is_next_sequence(batch)

    def handle_failed_batch(self, batch: ProducerBatch, error: BaseException) -> None:
        """A batch that held a sequence failed for good: later sequences of its partition are now gaps."""
        self.remove_in_flight(batch)
        if self.transactional:
            self._handle_failed_transactional_batch(batch, error)
            return
        if isinstance(error, FatalError):
            return
        if batch.base_sequence != NO_SEQUENCE and batch.producer_id == self.producer_id:
            self.request_producer_id_reset(f"batch for {batch.topic_partition} failed with {type(error).__name__}")

    def _handle_failed_transactional_batch(self, batch: ProducerBatch, error: BaseException) -> None:
        if isinstance(error, TransactionAbortedError):
            return  # the abort itself failed it
        code = getattr(error, "code", -1)
        kerr = error if isinstance(error, KafkaError) else KafkaError(str(error))
        if code in FATAL_PRODUCE_ERRORS:
            if code in PRODUCER_FENCED_CODES:
                kerr = self.fenced_error(code)
            self.transition_to_fatal(kerr)
            return
        if batch.base_sequence != NO_SEQUENCE and batch.producer_id == self.producer_id:
            # The sequence of this partition has a gap now: the abort must bump the epoch (KIP-360).
            self._epoch_bump_required = True
        if self._epoch_bump_required and not self._epoch_bump_possible(kerr):
            return
        self.transition_to_abortable(kerr)

    def note_init_producer_id_version(self, version: int) -> None:
        """The Sender tells the InitProducerId version negotiated with the transaction coordinator."""
        if version >= 0:
            self._coordinator_supports_epoch_bump = version >= 3

    def _epoch_bump_possible(self, error: KafkaError) -> bool:
        """Whether the epoch bump this error needs can happen; if not, the producer is done.

        Bumping the epoch of a transactional id needs InitProducerId v3+ (KIP-360), which
        names the current producer id and epoch, so that the coordinator refuses it if a
        newer producer has fenced this one. An older coordinator would re-initialize the id
        unconditionally and could fence the newer producer instead: as Java's producer
        does, this is then a fatal error.
        """
        if self._coordinator_supports_epoch_bump:
            return True
        message = (
            f"{error}; the producer's sequence numbers are no longer in step with the broker and the "
            "transaction coordinator does not support bumping the producer epoch (InitProducerId v3, "
            "KIP-360): it is not safe to continue; close() this producer"
        )
        code = getattr(error, "code", -1)
        topic, partition = getattr(error, "topic", None), getattr(error, "partition", None)
        self.transition_to_fatal(
            error_for_code(code, message, topic=topic, partition=partition) if code > 0 else KafkaError(message)
        )
        return False

    # ================================================================== caller-thread operations
    def _check_not_failed(self, operation: str) -> None:
        if self._fatal is not None:
            raise self._fatal
        if not self.transactional:
            raise IllegalStateError(
                f"{operation}() needs a transactional producer: set transactional.id in the producer's config"
            )

    def _illegal(self, operation: str) -> IllegalStateError:
        state = self._state
        return IllegalStateError(
            f"{operation}() is not allowed while the transactional producer {self.transactional_id!r} is in "
            f"state {state.value}: {ALLOWED_NEXT_CALLS[state]}"
        )

    def _pending(self, operation: str) -> TransactionalRequestResult | None:
        """The result of an earlier call of ``operation`` that timed out, to wait on again.

        It stays pending until a caller has seen its outcome, even when it completed in
        the background after the timeout: calling the method again then returns at once
        with that outcome (as Java's producer does), instead of refusing a commit that has
        already happened. A call of another method meanwhile is refused.
        """
        for op, earlier in list(self._pending_results.items()):
            if earlier.acked:
                del self._pending_results[op]
        result = self._pending_results.get(operation)
        if result is None:
            self._refuse_while_pending(operation)
        return result

    def _refuse_while_pending(self, operation: str) -> None:
        """Java's throwIfPendingState: an init, commit or abort that timed out must be called again first."""
        for op, result in self._pending_results.items():
            if op != operation and not result.acked:
                raise IllegalStateError(
                    f"{operation}() is not allowed: the previous call to {op}() timed out; call {op}() again "
                    "to wait for its outcome first"
                )

    def initialize_transactions(self) -> TransactionalRequestResult:
        with self._lock:
            self._check_not_failed("init_transactions")
            pending = self._pending("init_transactions")
            if pending is not None:
                return pending
            if self._state is not TransactionState.UNINITIALIZED:
                raise self._illegal("init_transactions")
            self._transition_to(TransactionState.INITIALIZING)
            result = TransactionalRequestResult("init_transactions")
            self._pending_results["init_transactions"] = result
            self._enqueue(self._init_producer_id_request(result, bump=False))
            return result

    def begin_transaction(self) -> None:
        with self._lock:
            self._check_not_failed("begin_transaction")
            self._pending("begin_transaction")
            if self._state is not TransactionState.READY:
                raise self._illegal("begin_transaction")
            self._transition_to(TransactionState.IN_TRANSACTION)

    def begin_commit(self) -> TransactionalRequestResult:
        with self._lock:
            self._check_not_failed("commit_transaction")
            pending = self._pending("commit_transaction")
            if pending is not None:
                return pending
            if self._state is TransactionState.ABORTABLE_ERROR:
                err = self._last_error
                refused = IllegalStateError(
                    f"commit_transaction() is not allowed: the transaction hit an abortable error ({err}); "
                    f"{ALLOWED_NEXT_CALLS[self._state]}"
                )
                refused.mark_transaction_abortable()
                raise refused from err
            if self._state is not TransactionState.IN_TRANSACTION:
                raise self._illegal("commit_transaction")
            self._transition_to(TransactionState.COMMITTING_TRANSACTION)
            return self._end_transaction("commit_transaction", committed=True)

    def begin_abort(self) -> TransactionalRequestResult:
        with self._lock:
            self._check_not_failed("abort_transaction")
            pending = self._pending("abort_transaction")
            if pending is not None:
                return pending
            if self._state not in (TransactionState.IN_TRANSACTION, TransactionState.ABORTABLE_ERROR):
                raise self._illegal("abort_transaction")
            self._transition_to(TransactionState.ABORTING_TRANSACTION)
            # Partitions not yet added hold only records that were never sent: they need no marker.
            self._pending_partitions.clear()
            return self._end_transaction("abort_transaction", committed=False)

    def _end_transaction(self, operation: str, committed: bool) -> TransactionalRequestResult:
        result = TransactionalRequestResult(operation)
        self._pending_results[operation] = result
        self._enqueue(self._end_txn_request(result, committed))
        return result

    def _complete_transaction(self, result: TransactionalRequestResult) -> None:
        """EndTxn succeeded (or there was nothing to end): READY again, or bump the epoch first."""
        with self._lock:
            self._partitions_in_txn.clear()
            self._pending_partitions.clear()
            self._partitions_being_added.clear()
            self._transaction_started = False
            if self._epoch_bump_required and self._state is TransactionState.ABORTING_TRANSACTION:
                # KIP-360: after an abort whose batches left a sequence gap, get a new epoch
                # (the coordinator checks ours first) so the next transaction starts clean.
                self._transition_to(TransactionState.INITIALIZING)
                self._enqueue(self._init_producer_id_request(result, bump=True))
                return
            self._transition_to(TransactionState.READY)
        result.done()

    def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, tuple[int, str | None]], group: GroupMetadata
    ) -> TransactionalRequestResult:
        with self._lock:
            self._check_not_failed("send_offsets_to_transaction")
            self._pending("send_offsets_to_transaction")
            if self._state is not TransactionState.IN_TRANSACTION:
                raise self._illegal("send_offsets_to_transaction")
            result = TransactionalRequestResult("send_offsets_to_transaction")
            self._enqueue(self._add_offsets_to_txn_request(offsets, group, result))
            return result

    # ================================================================== the Sender's side
    def _enqueue(self, req: TxnRequest) -> None:
        with self._lock:
            req.seq = next(self._seq)
            heapq.heappush(self._queue, (int(req.priority), req.seq, req))

    def has_in_flight_request(self) -> bool:
        return self._in_flight_request is not None

    def has_pending_partitions(self) -> bool:
        """Partitions found outside the transaction that no queued AddPartitionsToTxn will carry yet."""
        if not self._pending_partitions:
            return False
        with self._lock:
            return not any(r.api_key is ApiKey.ADD_PARTITIONS_TO_TXN for _p, _s, r in self._queue)

    def has_pending_requests(self) -> bool:
        return bool(self._queue) or bool(self._pending_partitions)

    def next_request(self, has_incomplete_batches: bool, now: int) -> tuple[TxnRequest | None, int]:
        """The request to send now (and None), or None and how long until one may be due."""
        with self._lock:
            if self._pending_partitions and self._state in (
                TransactionState.IN_TRANSACTION,
                TransactionState.COMMITTING_TRANSACTION,
            ) and not any(r.api_key is ApiKey.ADD_PARTITIONS_TO_TXN for _p, _s, r in self._queue):
                parts = set(self._pending_partitions)
                self._pending_partitions.clear()
                self._partitions_being_added.update(parts)
                self._enqueue(self._add_partitions_to_txn_request(parts))
            wait = 1 << 30
            skipped: list[tuple[int, int, TxnRequest]] = []
            chosen: TxnRequest | None = None
            while self._queue:
                entry = heapq.heappop(self._queue)
                req = entry[2]
                if req.is_end_txn and has_incomplete_batches:
                    # EndTxn waits until every batch of the transaction is acknowledged (or failed).
                    skipped.append(entry)
                    continue
                if req.retry_at_ms > now:
                    wait = min(wait, req.retry_at_ms - now)
                    skipped.append(entry)
                    continue
                if req.is_end_txn and not self._transaction_started and not self._partitions_being_added:
                    # Every batch is done and none was added to the transaction (nor any offsets):
                    # the coordinator has no transaction to end.
                    assert req.result is not None
                    self._complete_transaction(req.result)
                    continue
                chosen = req
                break
            for entry in skipped:
                heapq.heappush(self._queue, entry)
            if chosen is not None and chosen.partitions is not None and self._pending_partitions:
                # Partitions found while this request waited (for a free slot, a backoff) go in it
                # too: one round trip adds every partition known when it is sent.
                if self._state in (TransactionState.IN_TRANSACTION, TransactionState.COMMITTING_TRANSACTION):
                    chosen.partitions.update(self._pending_partitions)
                    self._partitions_being_added.update(self._pending_partitions)
                self._pending_partitions.clear()
            return chosen, wait

    def requeue(self, req: TxnRequest, now: int, backoff_ms: int | None = None) -> None:
        req.retry_at_ms = now + (self.retry_backoff_ms if backoff_ms is None else backoff_ms)
        self._enqueue(req)

    def coordinator(self, key_type: int, key: str | None) -> int | None:
        return self._coordinators.get((key_type, key or self.transactional_id or ""))

    def lookup_coordinator(self, key_type: int, key: str | None) -> None:
        """Queue FindCoordinator (first in line) unless one for this key is queued already."""
        k = key or self.transactional_id or ""
        self._coordinators.pop((key_type, k), None)
        with self._lock:
            if any(r.api_key is ApiKey.FIND_COORDINATOR and r.coordinator_key == k for _p, _s, r in self._queue):
                return
            flying = self._in_flight_request
            if flying is not None and flying.api_key is ApiKey.FIND_COORDINATOR and flying.coordinator_key == k:
                return
        self._enqueue(self._find_coordinator_request(key_type, k))

    def set_in_flight(self, req: TxnRequest | None) -> None:
        self._in_flight_request = req

    def handle_response(self, req: TxnRequest, body: Any, error: BaseException | None) -> None:
        """Called on the Sender thread with the response body, or with the transport error."""
        self._in_flight_request = None
        now = self._clock()
        if error is not None or body is None:
            # Disconnected or timed out: the coordinator may have moved.
            log.debug("%s failed (%s): finding the coordinator again", req.name, error)
            if req.api_key is not ApiKey.FIND_COORDINATOR and req.coordinator is not None:
                self.lookup_coordinator(req.coordinator, req.coordinator_key)
            self.requeue(req, now)
            return
        try:
            req.on_response(body)
        except KafkaError as e:
            self.transition_to_fatal(e)
        except Exception as e:  # a response this client cannot read: nothing safe is left to do
            log.exception("cannot handle the %s response", req.name)
            self.transition_to_fatal(KafkaError(f"cannot handle the {req.name} response: {e}"))

    def fenced_error(self, code: int, topic: str | None = None, partition: int | None = None) -> KafkaError:
        """PRODUCER_FENCED / INVALID_PRODUCER_EPOCH, saying what it means for this producer."""
        return error_for_code(
            code,
            f"producer id {self.producer_id} epoch {self.producer_epoch} of transactional id "
            f"{self.transactional_id!r} was fenced by a newer producer with the same transactional.id; "
            "close() this producer",
            topic=topic,
            partition=partition,
        )

    def fail_queued(self, error: KafkaError) -> None:
        with self._lock:
            queued = [r for _p, _s, r in self._queue]
            self._queue.clear()
        for req in queued:
            if req.result is not None:
                req.result.done(error)

    @property
    def partitions_in_transaction(self) -> frozenset[TopicPartition]:
        return frozenset(self._partitions_in_txn)

    # ------------------------------------------------------------------ coordinator requests and their handlers
    #
    # One method per request, as Java's ``TransactionManager`` has one ``TxnRequestHandler``
    # subclass per request (FindCoordinator, InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn,
    # TxnOffsetCommit, EndTxn). Each returns a :class:`~kproducer.transaction_manager.requests.TxnRequest`
    # whose ``build`` makes the request body for the version the Sender negotiated and whose
    # ``on_response`` applies the answer to the manager, on the Sender thread. A broker error goes
    # to the manager's one error handler, which reads the tables of ``error_classes``. Like Java's
    # inner handler classes, these work on the manager's own state.

    def _required_transactional_id(self) -> str:
        tid = self.transactional_id
        assert tid is not None, "only a transactional producer sends this request"
        return tid

    def _end_txn_request(self, result: TransactionalRequestResult, committed: bool) -> TxnRequest:
        """EndTxn(COMMIT or ABORT): on success the transaction is complete."""
        tid = self._required_transactional_id()

        from kproducer.network import protocol  # the schemas load with the network layer

        def build(version: int) -> Any:
            return protocol.build_end_txn_request(version, tid, self.producer_id, self.producer_epoch, committed)

        def on_response(body: Any) -> None:
            code = int(body.error_code)
            if code == 0:
                self._complete_transaction(result)
            else:
                self._handle_error(req, code, None)

        req = TxnRequest("EndTxn", ApiKey.END_TXN, Priority.END_TXN, build, on_response, result=result, is_end_txn=True)
        return req

    def _add_offsets_to_txn_request(
        self, offsets: Offsets, group: GroupMetadata, result: TransactionalRequestResult
    ) -> TxnRequest:
        """AddOffsetsToTxn: the group's offsets join the transaction; then TxnOffsetCommit writes them."""
        tid = self._required_transactional_id()

        from kproducer.network import protocol  # the schemas load with the network layer

        def build(version: int) -> Any:
            return protocol.build_add_offsets_to_txn_request(version, tid, self.producer_id, self.producer_epoch, group.group_id)

        def on_response(body: Any) -> None:
            code = int(body.error_code)
            if code != 0:
                self._handle_error(req, code, None)
                return
            self._transaction_started = True
            self._enqueue(self._txn_offset_commit_request(offsets, group, result))

        req = TxnRequest(
            "AddOffsetsToTxn", ApiKey.ADD_OFFSETS_TO_TXN, Priority.ADD_PARTITIONS_OR_OFFSETS, build, on_response, result=result
        )
        return req

    def _txn_offset_commit_request(
        self, offsets: Offsets, group: GroupMetadata, result: TransactionalRequestResult
    ) -> TxnRequest:
        """TxnOffsetCommit, to the group coordinator: a retry carries only the partitions that failed."""
        tid = self._required_transactional_id()
        remaining = dict(offsets)

        from kproducer.network import protocol  # the schemas load with the network layer

        def build(version: int) -> Any:
            return protocol.build_txn_offset_commit_request(
                version,
                tid,
                group.group_id,
                self.producer_id,
                self.producer_epoch,
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
            self._handle_error(req, code, None)

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

    def _init_producer_id_request(self, result: TransactionalRequestResult, bump: bool) -> TxnRequest:
        """InitProducerId for the transactional id; with ``bump``, naming the current id and epoch (KIP-360)."""
        tid = self.transactional_id

        from kproducer.network import protocol  # the schemas load with the network layer

        def build(version: int) -> Any:
            pid, epoch = (self.producer_id, self.producer_epoch) if bump else (NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
            return protocol.build_init_producer_id_request(version, tid, self.transaction_timeout_ms, pid, epoch)

        def on_response(body: Any) -> None:
            code = int(body.error_code)
            if code != 0:
                self._handle_error(req, code, None)
                return
            self.set_producer_id_and_epoch(int(body.producer_id), int(body.producer_epoch))
            with self._lock:
                self._epoch_bump_required = False
                self._transition_to(TransactionState.READY)
            result.done()

        req = TxnRequest("InitProducerId", ApiKey.INIT_PRODUCER_ID, Priority.INIT_PRODUCER_ID, build, on_response, result=result)
        return req

    def _add_partitions_to_txn_request(self, partitions: set[TopicPartition]) -> TxnRequest:
        """AddPartitionsToTxn: the partitions join the transaction before their first batch drains."""
        tid = self._required_transactional_id()

        from kproducer.network import protocol  # the schemas load with the network layer

        def build(version: int) -> Any:
            return protocol.build_add_partitions_to_txn_request(
                version, tid, self.producer_id, self.producer_epoch, sorted(req.partitions or ())
            )

        def on_response(body: Any) -> None:
            parts = set(req.partitions or ())
            errors = protocol.add_partitions_to_txn_errors(body)
            failed = {tp: c for tp, c in errors.items() if c != 0 and c != OPERATION_NOT_ATTEMPTED}
            with self._lock:
                if not failed:
                    self._partitions_in_txn.update(parts)
                    self._partitions_being_added.difference_update(parts)
                    self._transaction_started = True
                    return
            code = next((c for c in failed.values() if c != TOPIC_AUTHORIZATION_FAILED), None)
            if code is None:
                topics = sorted({tp.topic for tp in failed})
                with self._lock:
                    self._partitions_being_added.difference_update(parts)
                self.transition_to_abortable(
                    error_for_code(
                        TOPIC_AUTHORIZATION_FAILED,
                        f"not authorized to write to topic(s) {', '.join(topics)} in a transaction",
                    )
                )
                return
            self._handle_error(req, code, None)

        req = TxnRequest(
            "AddPartitionsToTxn",
            ApiKey.ADD_PARTITIONS_TO_TXN,
            Priority.ADD_PARTITIONS_OR_OFFSETS,
            build,
            on_response,
            partitions=set(partitions),
        )
        return req

    def _find_coordinator_request(self, key_type: int, key: str) -> TxnRequest:
        """FindCoordinator for ``key`` (the transactional id or a group id), to any broker."""

        from kproducer.network import protocol  # the schemas load with the network layer

        def build(version: int) -> Any:
            return protocol.build_find_coordinator_request(version, key, key_type)

        def on_response(body: Any) -> None:
            try:
                found = protocol.find_coordinator_result(body, key)
            except protocol.ProtocolError as e:
                self.transition_to_fatal(KafkaError(str(e)))
                return
            if found.error_code == 0:
                self._coordinators[(key_type, key)] = found.node_id
                log.debug("coordinator for %s is node %d (%s:%d)", key, found.node_id, found.host, found.port)
                return
            self._handle_error(req, found.error_code, found.error_message)

        req = TxnRequest(
            "FindCoordinator", ApiKey.FIND_COORDINATOR, Priority.FIND_COORDINATOR, build, on_response, coordinator=None, coordinator_key=key
        )
        return req

    def _handle_error(self, req: TxnRequest, code: int, message: str | None) -> None:
        """One broker error on a coordinator request, by the tables of ``error_classes``."""
        now = self._clock()
        req.attempts += 1
        if code in COORDINATOR_MOVED_ERRORS:
            if req.api_key is ApiKey.FIND_COORDINATOR:
                self.requeue(req, now)
                return
            log.info("%s: %s; finding the coordinator again", req.name, error_for_code(code).name)
            if req.coordinator is not None:
                self.lookup_coordinator(req.coordinator, req.coordinator_key)
            self.requeue(req, now, 0)
            return
        if code in RETRY_ERRORS:
            # CONCURRENT_TRANSACTIONS on a transaction's first AddPartitionsToTxn means the previous
            # transaction's markers are still being written, which clears within a few ms: retry
            # after 20 ms there instead of retry.backoff.ms, as Java's AddPartitionsToTxnHandler does.
            quick = (
                code == CONCURRENT_TRANSACTIONS
                and req.api_key is ApiKey.ADD_PARTITIONS_TO_TXN
                and not self._partitions_in_txn
            )
            log.debug("%s: %s; retrying", req.name, error_for_code(code).name)
            self.requeue(req, now, 20 if quick else None)
            return
        exc = error_for_code(code, message)
        if code in ABORTABLE_ERRORS and self._state is not TransactionState.INITIALIZING:
            if req.api_key is ApiKey.ADD_PARTITIONS_TO_TXN:
                self._partitions_being_added.clear()
            if code in (UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_ID_MAPPING):
                self._epoch_bump_required = True
                if not self._epoch_bump_possible(exc):
                    return
            if req.is_end_txn and self._state is TransactionState.ABORTING_TRANSACTION:
                self.transition_to_fatal(exc)
                return
            self.transition_to_abortable(exc)
            if req.result is not None and req.api_key is not ApiKey.END_TXN:
                req.result.done(exc)
            return
        if code in PRODUCER_FENCED_CODES:
            exc = self.fenced_error(code)
        self.transition_to_fatal(exc)
