"""The Sender's coordinator requests: a transactional producer's queued requests, an idempotent producer's InitProducerId.

The Sender thread calls :class:`CoordinatorRequestSender` once per loop, before it drains
(Java's ``Sender.maybeSendAndPollTransactionalRequest`` and ``maybeWaitForProducerId``):

* transactional: the next request of the
  :class:`~kproducer.transaction_manager.TransactionManager`'s queue goes to its coordinator
  (or any broker, for FindCoordinator), one at a time, while produce requests keep flowing;
  a commit or abort flushes the accumulator first;
* idempotent: InitProducerId to the least loaded broker when no producer id is known, or when
  a reset is due and nothing is in flight; failures back off exponentially up to
  ``retry.backoff.max.ms``.

(The driver of a Spark exactly-once job sends EndTxn and InitProducerId without a producer:
that is ``kproducer.coordinator``.)
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kproducer.errors import (
    FatalError,
    KafkaError,
    NetworkError,
    TransactionAbortedError,
    UnsupportedVersionError,
    error_for_code,
)
from kproducer.network.client import ClientRequest, ClientResponse
from kproducer.network.protocol import ApiKey, build_init_producer_id_request
from kproducer.transaction_manager import TransactionManager, TxnRequest

if TYPE_CHECKING:
    from kproducer.accumulator.accumulator import RecordAccumulator
    from kproducer.metadata import Metadata
    from kproducer.network.kafka_client import KafkaClient

# The Sender's logger: these lines were the Sender's before they moved here.
log = logging.getLogger("kproducer.sender")

#: The longest the Sender's poll waits when nothing else is due.
MAX_POLL_MS = 1000
#: ``connection_delay`` at or above this: the node is connected or connecting (no backoff to wait out).
_CONNECTED = 2**40


class CoordinatorRequestSender:
    """Sends the transaction manager's coordinator requests, or the idempotent producer's InitProducerId."""

    def __init__(
        self,
        *,
        client: KafkaClient,
        metadata: Metadata,
        accumulator: RecordAccumulator,
        transaction_manager: TransactionManager,
        clock_ms: Callable[[], int],
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        has_in_flight_batches: Callable[[], bool],
    ) -> None:
        self._client = client
        self._metadata = metadata
        self._accumulator = accumulator
        self._tm = transaction_manager
        self._clock = clock_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._retry_backoff_max_ms = retry_backoff_max_ms
        self._has_in_flight_batches = has_in_flight_batches
        self._transactional_id = transaction_manager.transactional_id
        self._init_pid_attempts = 0
        self._init_pid_next_ms = 0
        #: The Sender's own flush while a transaction completes (EndTxn waits for every batch).
        self.txn_flushing = False
        #: How long the Sender's poll may wait for the next transactional request to fall due.
        self.txn_wait_ms = MAX_POLL_MS

    def end_txn_flush(self) -> None:
        """Stop the flush a commit or abort started (the producer went fatal meanwhile)."""
        if self.txn_flushing:
            self._accumulator.end_flush()
            self.txn_flushing = False

    def maybe_send_transactional_request(self, now: int) -> None:
        """Send the next coordinator request, one at a time (Java's maybeSendAndPollTransactionalRequest).

        Produce requests keep flowing meanwhile: partitions not yet in the transaction
        are held back by the drain, and EndTxn waits until no batch is incomplete.
        """
        tm = self._tm
        assert tm is not None
        acc = self._accumulator
        self.txn_wait_ms = MAX_POLL_MS
        if (tm.has_abortable_error() or tm.is_aborting()) and acc.has_undrained():
            cause = tm.last_error
            acc.abort_undrained_batches(
                TransactionAbortedError(
                    f"the transaction of transactional id {self._transactional_id!r} was aborted before "
                    "this record was sent" + (f" (after {cause})" if cause is not None else "")
                )
            )
        if tm.is_completing():
            if not self.txn_flushing and acc.has_incomplete():
                # Committing or aborting sends every batch now, without waiting for linger.ms.
                acc.begin_flush()
                self.txn_flushing = True
        elif self.txn_flushing:
            acc.end_flush()
            self.txn_flushing = False
        if tm.is_in_transaction():
            # Add every partition that has a batch, ready or still lingering, so that
            # AddPartitionsToTxn overlaps the linger instead of following it.
            for tp in acc.partitions_with_batches():
                tm.may_drain_partition(tp)
        if tm.has_in_flight_request():
            return
        req, wait = tm.next_request(acc.has_incomplete(), now)
        if req is None:
            self.txn_wait_ms = min(wait, MAX_POLL_MS)
            return
        client = self._client
        node: int | None
        if req.coordinator is not None:
            node = tm.coordinator(req.coordinator, req.coordinator_key)
            if node is None:
                tm.lookup_coordinator(req.coordinator, req.coordinator_key)
                tm.requeue(req, now, 0)
                self.txn_wait_ms = 0
                return
            if self._metadata.cluster.node(node) is None:
                # The coordinator is a broker this client has not seen in metadata yet.
                self._metadata.request_update()
                tm.requeue(req, now, self._retry_backoff_ms)
                self.txn_wait_ms = self._retry_backoff_ms
                return
        else:
            node = client.least_loaded_node(now)
            if node is None:
                tm.requeue(req, now)
                self.txn_wait_ms = self._retry_backoff_ms
                return
        if not client.ready(node, now):
            delay = client.connection_delay(node, now)
            if delay <= 0 or delay >= _CONNECTED:
                # Connected with its in-flight window full (produce requests to the same broker),
                # or connecting: the request goes in the first loop after the network makes
                # progress (a response frees a slot, the connection completes), which wakes the
                # poll. A fixed delay here would hold AddPartitionsToTxn or EndTxn for that long
                # after the slot is free (Java's Sender polls until the node is ready).
                tm.requeue(req, now, 0)
                return
            # Disconnected, in the reconnect backoff: wait it out.
            delay = min(delay, self._retry_backoff_ms)
            tm.requeue(req, now, delay)
            self.txn_wait_ms = delay
            return

        def on_response(response: ClientResponse, req: TxnRequest = req) -> None:
            error: BaseException | None = response.error
            if error is None and (response.disconnected or response.response is None):
                error = NetworkError(f"{req.name} to node {response.node_id}: disconnected")
            tm.handle_response(req, response.response, error)

        request = ClientRequest(node, req.api_key, req.build, callback=on_response, created_ms=now)
        try:
            client.send(request, now)
        except UnsupportedVersionError as e:
            tm.transition_to_fatal(e)
            return
        tm.set_in_flight(req)
        if req.api_key is ApiKey.INIT_PRODUCER_ID:
            tm.note_init_producer_id_version(request.api_version)
        log.debug("sent %s to node %s", req.name, node)


    def maybe_init_producer_id(self, now: int) -> int:
        """Send InitProducerId when none is known, or when a reset is due and nothing is in flight."""
        tm = self._tm
        assert tm is not None
        if tm.init_in_progress:
            return MAX_POLL_MS
        if tm.reset_pending() and (self._client.in_flight_request_count() > 0 or self._has_in_flight_batches()):
            return MAX_POLL_MS
        if now < self._init_pid_next_ms:
            return self._init_pid_next_ms - now
        node = self._client.least_loaded_node(now)
        if node is None or not self._client.ready(node, now):
            return self._retry_backoff_ms if node is None else max(self._client.connection_delay(node, now), 1)
        tm.begin_init()
        self._client.send(
            ClientRequest(
                node,
                ApiKey.INIT_PRODUCER_ID,
                _idempotent_init_producer_id_request,
                callback=self._on_init_producer_id_response,
                created_ms=now,
            ),
            now,
        )
        return MAX_POLL_MS

    def _on_init_producer_id_response(self, response: ClientResponse) -> None:
        if response.error is not None or response.disconnected or response.response is None:
            self._handle_init_producer_id(-1, -1, -1, response.error or NetworkError("disconnected during InitProducerId"))
            return
        body = response.response
        self._handle_init_producer_id(int(body.error_code), int(body.producer_id), int(body.producer_epoch), None)

    def _handle_init_producer_id(self, error_code: int, producer_id: int, epoch: int, error: BaseException | None) -> None:
        tm = self._tm
        assert tm is not None
        now = self._clock()
        if error is None and error_code == 0:
            self._init_pid_attempts = 0
            if tm.reset_pending():
                self._accumulator.reset_producer_state_of_queued_batches()
            tm.set_producer_id_and_epoch(producer_id, epoch)
            return
        tm.init_failed()
        exc = error if isinstance(error, KafkaError) else error_for_code(error_code) if error_code else NetworkError(str(error))
        if isinstance(exc, FatalError):
            tm.transition_to_fatal(exc)
            return
        self._init_pid_attempts += 1
        backoff = min(self._retry_backoff_ms * (2 ** min(self._init_pid_attempts - 1, 20)), self._retry_backoff_max_ms)
        self._init_pid_next_ms = now + backoff
        log.warning("InitProducerId failed (%s); retrying in %d ms", exc, backoff)


def _idempotent_init_producer_id_request(version: int) -> Any:
    """InitProducerId for an idempotent (non-transactional) producer: no transactional id."""
    return build_init_producer_id_request(version, None, 60_000)
