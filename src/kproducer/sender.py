"""The Sender thread: ready → drain → produce → complete (Java's ``Sender.runOnce``).

One background thread owns the NetworkClient, every socket and all protocol
state. Each loop it asks the accumulator which leaders have sendable data,
keeps those the network layer can send to now (connected, in-flight window not
full), drains up to ``max.request.size`` per node, sends one ProduceRequest per
node, and polls for responses, completing or retrying batches. It sleeps exactly
until the earliest of: a linger or backoff expiring, a request timing out, a
metadata refresh falling due, or a wakeup from ``send()``.

Delivery callbacks run on this thread, as in Java: they must be quick. An
exception raised in one is caught and logged by the batch and never kills the
thread; neither does any other error in a loop.

The coordinator requests the loop sends before it drains (a transactional producer's queue,
an idempotent producer's InitProducerId) are ``kproducer.coordinator_requests``. The rest stays
one module (a little over 600 lines): the loop, the produce requests and the completion of
their batches share the in-flight map and the retry, mute and expiry bookkeeping, as in Java's
``Sender``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kproducer.coordinator_requests import MAX_POLL_MS, CoordinatorRequestSender
from kproducer.errors import (
    PRODUCER_FENCED_CODES,
    DuplicateSequenceNumberError,
    FatalError,
    FencedLeaderEpochError,
    KafkaError,
    KafkaTimeoutError,
    LeaderNotAvailableError,
    NetworkError,
    NotLeaderOrFollowerError,
    OutOfOrderSequenceNumberError,
    ProducerClosedError,
    RecordTooLargeError,
    UnknownProducerIdError,
    UnknownTopicOrPartitionError,
    error_codes,
    error_for_code,
)
from kproducer.failure_log import FailureLog
from kproducer.network.client import ClientRequest
from kproducer.network.kafka_client import KafkaClient
from kproducer.network.protocol import (
    ApiKey,
    ProduceRequestData,
    build_produce_request,
)
from kproducer.structs import TopicPartition
from kproducer.transaction_manager import NO_SEQUENCE, TransactionManager

if TYPE_CHECKING:
    from kproducer.accumulator.accumulator import RecordAccumulator
    from kproducer.accumulator.adaptive_linger import AdaptiveLinger
    from kproducer.accumulator.batch import ProducerBatch
    from kproducer.circuit_breaker import CircuitBreakManager, PartitionCircuitBreaker
    from kproducer.metadata import Metadata
    from kproducer.metrics import ProducerSensors
    from kproducer.router import RecordRouter

log = logging.getLogger(__name__)

_MESSAGE_TOO_LARGE = int(RecordTooLargeError.code)
_DUPLICATE_SEQUENCE_NUMBER = int(DuplicateSequenceNumberError.code)
_OUT_OF_ORDER_SEQUENCE_NUMBER = int(OutOfOrderSequenceNumberError.code)
_UNKNOWN_PRODUCER_ID = int(UnknownProducerIdError.code)
#: The leader this client knows for the partition is stale: refresh the topic's metadata, also
#: when the error handed in is not the code's own class.
_STALE_LEADER_CODES = error_codes(
    UnknownTopicOrPartitionError, LeaderNotAvailableError, NotLeaderOrFollowerError, FencedLeaderEpochError
)

#: The producer's clock: monotonic milliseconds (Java's ``Time``); tests pass a controllable one.
Clock = Callable[[], int]


class Sender:
    """Runs the producer's I/O loop on its own thread (``kafka-producer-network-thread | client.id``)."""

    def __init__(
        self,
        *,
        client: KafkaClient,
        metadata: Metadata,
        accumulator: RecordAccumulator,
        clock_ms: Clock,
        acks: int,
        retries: int,
        max_request_size: int,
        request_timeout_ms: int,
        delivery_timeout_ms: int,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        guarantee_message_order: bool,
        transaction_manager: TransactionManager | None = None,
        sensors: ProducerSensors | None = None,
        circuit_breaker: PartitionCircuitBreaker | None = None,
        circuit_break_manager: CircuitBreakManager | None = None,
        max_in_flight: int = 5,
        failure_log: FailureLog | None = None,
        router: RecordRouter | None = None,
        adaptive_linger: AdaptiveLinger | None = None,
    ) -> None:
        self._client = client
        self._metadata = metadata
        self._accumulator = accumulator
        self._clock = clock_ms
        self._acks = acks
        self._retries = retries
        self._max_request_size = max_request_size
        self._request_timeout_ms = request_timeout_ms
        self._delivery_timeout_ms = delivery_timeout_ms
        self._retry_backoff_ms = retry_backoff_ms
        self._retry_backoff_max_ms = retry_backoff_max_ms
        self._guarantee_order = guarantee_message_order
        self._tm = transaction_manager
        self._sensors = sensors
        self._breaker = circuit_breaker
        self._breaker_manager = circuit_break_manager
        self._max_in_flight = max_in_flight
        self._failure_log = failure_log if failure_log is not None else FailureLog(log)
        self._router = router
        # Told of every drain, it stretches the accumulator's linger while this thread's work keeps
        # the batches small (accumulator/adaptive_linger.py); None: linger.ms as configured.
        self._adaptive_linger = adaptive_linger
        # Batches handed to the network and not yet completed, per partition, for in-flight expiry.
        self._in_flight_batches: dict[TopicPartition, list[ProducerBatch]] = {}
        self._running = True
        self._force_close = False
        self._transactional_id = transaction_manager.transactional_id if transaction_manager is not None else None
        self._coordinator_requests = (
            CoordinatorRequestSender(
                client=client,
                metadata=metadata,
                accumulator=accumulator,
                transaction_manager=transaction_manager,
                clock_ms=clock_ms,
                retry_backoff_ms=retry_backoff_ms,
                retry_backoff_max_ms=retry_backoff_max_ms,
                has_in_flight_batches=lambda: bool(self._in_flight_batches),
            )
            if transaction_manager is not None
            else None
        )
        self._moved_unlogged = [0, 0]
        self._moved_logged_ms = -(2**62)

    # ------------------------------------------------------------------ lifecycle
    def run(self) -> None:
        """The thread body: loop until closed, then drain what is left (unless forced)."""
        log.debug("sender thread started")
        while self._running:
            self._run_once_safe()
        tm = self._tm
        if not self._force_close and tm is not None and tm.transactional and tm.fatal_error is None:
            # As Java: closing with a transaction open aborts it, so its records never become visible.
            try:
                if tm.is_in_transaction() or tm.has_abortable_error():
                    tm.begin_abort()
            except KafkaError as e:
                log.warning("could not abort the open transaction on close: %s", e)
        # Graceful close: keep sending until the accumulator is empty and nothing is in flight.
        while not self._force_close and self._has_pending_work():
            self._run_once_safe()
        if self._router is not None:
            # Whatever still waits for metadata now never gets it.
            self._router.fail_all(ProducerClosedError("producer was closed before the topic's metadata arrived"))
        if self._force_close:
            self._abort_everything(ProducerClosedError("producer was closed forcefully before the record was delivered"))
        self._failure_log.emit_all(self._clock())
        # Before the client closes the selector's wakeup socket, which the worker writes to.
        self._accumulator.stop_compression_worker()
        try:
            self._client.close()
        except Exception:  # pragma: no cover - best effort on shutdown
            log.exception("error closing the network client")
        log.debug("sender thread stopped")

    def _has_pending_work(self) -> bool:
        tm = self._tm
        if tm is not None and tm.fatal_error is not None:
            return self._client.in_flight_request_count() > 0
        if tm is not None and tm.transactional and (tm.has_in_flight_request() or tm.is_completing()):
            return True
        return self._accumulator.has_undrained() or self._client.in_flight_request_count() > 0 or bool(self._in_flight_batches)

    def initiate_close(self) -> None:
        """Stop accepting new work and drain what is queued (Java's Sender.initiateClose)."""
        self._accumulator.close()
        self._running = False
        self.wakeup()

    def force_close(self) -> None:
        """Abort whatever is left on the next loop."""
        self._force_close = True
        self.initiate_close()

    def wakeup(self) -> None:
        self._client.wakeup()

    def _run_once_safe(self) -> None:
        try:
            self.run_once()
        except Exception:
            # The thread must never die: log and go on (the next loop retries).
            log.exception("uncaught error in the kproducer sender thread")

    def _abort_everything(self, error: KafkaError) -> None:
        for batches in list(self._in_flight_batches.values()):
            for batch in list(batches):
                self._fail_batch(batch, error, deallocate=False)
        self._in_flight_batches.clear()
        now = self._clock()
        for batch in self._accumulator.incomplete_batches():
            if not batch.is_done:
                tp = batch.topic_partition
                self._failure_log.failed(tp.topic, tp.partition, batch.record_count, error, batch.attempts, now)
        self._accumulator.abort_incomplete_batches(error)

    # ------------------------------------------------------------------ one loop
    def run_once(self) -> None:
        tm = self._tm
        now = self._clock()
        self._failure_log.maybe_emit(now)
        parked_delay = MAX_POLL_MS
        router = self._router
        if router is not None and router.parked:
            # Records that waited for metadata go into batches before anything sent after them
            # (or fail at max.block.ms), whether or not a producer id is known yet.
            parked_delay = max(1, router.release(now))
            now = self._clock()
        coordinator_requests = self._coordinator_requests
        if tm is not None and coordinator_requests is not None:
            fatal = tm.fatal_error
            if fatal is not None:
                self._accumulator.abort_undrained_batches(fatal)
                coordinator_requests.end_txn_flush()
            elif tm.transactional:
                coordinator_requests.maybe_send_transactional_request(now)
            elif tm.needs_producer_id():
                wait = coordinator_requests.maybe_init_producer_id(now)
                if tm.needs_producer_id():
                    # Nothing is drained until a producer id is known; still poll for responses.
                    expired = self._accumulator.expired_batches(now)
                    for batch in expired:
                        self._fail_expired(batch, now)
                    self._client.poll(min(wait, MAX_POLL_MS, parked_delay), now)
                    return
        if self._client.metadata_request_due(now):
            # Records parked for a new topic wait for this request: send it before the
            # ready/drain pass (whose cost grows with the topics buffered), not after it.
            version = self._metadata.version
            self._client.poll(0, now)
            now = self._clock()
            if router is not None and router.parked and self._metadata.version != version:
                # An answer came in that poll: its topics' parked records go out in this loop,
                # not after the next poll's timeout.
                parked_delay = max(1, router.release(now))
        timeout = min(self._send_producer_data(now), parked_delay)
        if tm is not None and coordinator_requests is not None and tm.transactional:
            # Partitions the drain just found outside the transaction: AddPartitionsToTxn goes next loop.
            # (While a coordinator request is in flight its response wakes the poll instead.)
            if tm.has_pending_partitions() and not tm.has_in_flight_request():
                timeout = 0
            else:
                timeout = min(timeout, coordinator_requests.txn_wait_ms)
        # Full compressed batches that wait behind the in-flight window: compress them now (or take
        # what the compression worker has finished, without waiting for the rest), here rather than
        # on the caller's thread, so that they hold compressed bytes while they wait.
        self._accumulator.seal_full_batches(wait=False)
        self._client.poll(timeout, now)

    def _send_producer_data(self, now: int) -> int:
        acc = self._accumulator
        cluster = self._metadata.cluster
        result = acc.ready(cluster, now)
        if result.unknown_leader_topics:
            for topic in result.unknown_leader_topics:
                self._metadata.add_topic(topic, now)
                self._metadata.mark_urgent(topic, now)

        client = self._client
        ready_nodes: set[int] = set()
        not_ready_timeout = MAX_POLL_MS
        for node_id in result.ready_nodes:
            if client.ready(node_id, now):
                ready_nodes.add(node_id)
                acc.update_node_latency_stats(node_id, now, True)
            else:
                # KIP-794: a leader not drainable for partitioner.availability.timeout.ms leaves the choice.
                acc.update_node_latency_stats(node_id, now, False)
                not_ready_timeout = min(not_ready_timeout, max(client.connection_delay(node_id, now), 1))
                refusal = client.authentication_error(node_id)
                if refusal is not None:
                    # The leader refuses this client (TLS or SASL): its batches end with that error
                    # now, not with a timeout at delivery.timeout.ms (records waiting for metadata
                    # end with it the same way).
                    for batch in acc.queued_batches_led_by(cluster, node_id):
                        self._fail_batch(batch, refusal)

        if self._breaker is not None:
            # A leader whose connection has not come up within request.timeout.ms is a symptom too
            # (it never gets a request to time out): the breaker sees since when.
            stalled = client.stalled_connections(now, self._request_timeout_ms)
            self._breaker.on_send(self._status_context(now, stalled_connections=stalled))
            for node_id in stalled:
                # Its partitions are muted, so no batch of theirs asks for a connection any more:
                # keep reconnecting (within the reconnect backoff), or the stall would never be
                # seen to end and every probe would be muted again.
                if (
                    node_id >= 0
                    and node_id not in result.ready_nodes
                    and cluster.partitions_for_node(node_id)
                    and not client.ready(node_id, now)
                ):
                    not_ready_timeout = min(not_ready_timeout, max(client.connection_delay(node_id, now), 1))
            moved_batches, moved_records = acc.move_unsent_off_muted(cluster)
            if moved_records:
                self._log_moved(moved_batches, moved_records, now)

        batches_by_node: Mapping[int, list[ProducerBatch]] = acc.drain(cluster, ready_nodes, self._max_request_size, now) if ready_nodes else {}
        drained = 0
        for batches in batches_by_node.values():
            drained += len(batches)
            for batch in batches:
                in_flight = self._in_flight_batches.get(batch.topic_partition)
                if in_flight is None:
                    self._in_flight_batches[batch.topic_partition] = [batch]
                else:
                    in_flight.append(batch)
                if self._guarantee_order:
                    acc.mute_partition(batch.topic_partition)
                if self._tm is not None and batch.base_sequence != NO_SEQUENCE:
                    self._tm.add_in_flight(batch)
        if drained and self._adaptive_linger is not None:
            self._adaptive_linger.on_drain(drained, now)

        for batch in acc.expired_batches(now):
            self._fail_expired(batch, now)
        for batch in self._expired_in_flight(now):
            self._fail_expired(batch, now, in_flight=True)

        poll_timeout = min(result.next_ready_check_delay_ms, not_ready_timeout, MAX_POLL_MS)
        if self._breaker_manager is not None:
            # Wake up when a muted partition's probe falls due, not a long poll later.
            probe_delay = self._breaker_manager.next_probe_delay_ms(now)
            if probe_delay is not None:
                poll_timeout = min(poll_timeout, max(probe_delay, 1))
        if ready_nodes and any(batches_by_node.values()) and acc.drain_left_batches:
            # Java loops again at once after every drain; only a batch left behind can be sendable
            # now. Otherwise the ready pass's delay stands: a batch appended since then was either
            # seen by it or wakes this thread (NetworkClient.wakeup_by).
            poll_timeout = 0
        for node_id, batches in batches_by_node.items():
            if batches:
                self._send_produce_request(node_id, batches, now)
        return max(poll_timeout, 0)

    # ------------------------------------------------------------------ produce
    def _send_produce_request(self, node_id: int, batches: list[ProducerBatch], now: int) -> None:
        records = {b.topic_partition: b.records_buffer() for b in batches}
        by_tp = {b.topic_partition: b for b in batches}
        expect_response = self._acks != 0
        sensors = self._sensors
        if sensors is not None:
            sensors.record_drained(batches, now)

        def on_response(response: Any) -> None:
            # The request's views of the batch buffers: answered, so its bytes were written (an
            # acks=0 request completes on send, and then the selector may still hold a view). With
            # no view left, BufferPool.deallocate takes a batch.size buffer back for the next
            # batch, as Java's BufferPool does, instead of a fresh zero-filled one per batch.
            records.clear()
            self._handle_produce_response(node_id, by_tp, response, now)

        acks, timeout_ms, transactional_id = self._acks, self._request_timeout_ms, self._transactional_id

        def build(version: int) -> ProduceRequestData:
            return build_produce_request(version, acks, timeout_ms, transactional_id, records)

        self._client.send(
            ClientRequest(node_id, ApiKey.PRODUCE, build, expect_response=expect_response, callback=on_response, created_ms=now),
            now,
        )

    def _handle_produce_response(
        self, node_id: int, batches: Mapping[TopicPartition, ProducerBatch], response: Any, sent_ms: int
    ) -> None:
        now = self._clock()
        if self._sensors is not None:
            self._sensors.record_request_latency(now - sent_ms, node_id)
        if response.error is not None or response.disconnected:
            err = response.error if isinstance(response.error, KafkaError) else NetworkError(
                f"disconnected from node {node_id} with the request in flight"
            )
            log.debug("produce request to node %s failed: %s", node_id, err)
            code = err.code if err.code != -1 else NetworkError.code
            # The leader never answered this request: the circuit breaker learns since when.
            # Unless the timeout was noticed late: then this process was not running (a pause, a
            # starved machine) and the answer may be late for the same reason, not the leader's.
            silent_since: int | None = sent_ms
            if response.timed_out and now - sent_ms > self._request_timeout_ms * 3 // 2:
                silent_since = None
            for batch in batches.values():
                self._complete_batch(batch, code, None, -1, -1, now, error=err, unanswered_since_ms=silent_since)
            for topic in {tp.topic for tp in batches}:
                self._metadata.mark_urgent(topic, now)  # lost the leader: refresh these topics only
            return
        if not response.request.expect_response:
            # acks=0: complete on send with offset -1, as Java does.
            for batch in batches.values():
                self._complete_batch(batch, 0, None, -1, -1, now)
            return
        partitions, throttle_ms = response.response
        if self._sensors is not None and throttle_ms is not None:
            self._sensors.record_throttle(throttle_ms)
        for tp, batch in batches.items():
            pr = partitions.get(tp)
            if pr is None:
                self._complete_batch(
                    batch, -1, f"no response for {tp} in the produce response", -1, -1, now
                )
                continue
            self._complete_batch(
                batch,
                pr.error_code,
                pr.error_message,
                pr.base_offset,
                pr.log_append_time,
                now,
                record_errors=pr.record_errors,
            )

    def _complete_batch(
        self,
        batch: ProducerBatch,
        error_code: int,
        error_message: str | None,
        base_offset: int,
        log_append_time: int,
        now: int,
        *,
        record_errors: Any = None,
        error: KafkaError | None = None,
        unanswered_since_ms: int | None = None,
    ) -> None:
        tp = batch.topic_partition
        tm = self._tm
        self._remove_in_flight(batch)
        if batch.is_done:
            # Already failed (in-flight expiry); its buffer was kept until the request finished.
            self._accumulator.deallocate(batch)
            if self._guarantee_order:
                # Its request is over: the partition's next batch may go (Java's completeBatch
                # unmutes after every completion, an expired batch's included).
                self._accumulator.unmute_partition(tp)
            return
        if error_code == 0 or (error_code == _DUPLICATE_SEQUENCE_NUMBER and tm is not None):
            # DUPLICATE_SEQUENCE_NUMBER: the broker already has this batch; Java completes it as a success.
            if tm is not None and batch.base_sequence != NO_SEQUENCE:
                tm.handle_completed_batch(batch)
            self._finish(batch, base_offset, log_append_time, None, now)
            return

        exc = error or error_for_code(error_code, error_message, topic=tp.topic, partition=tp.partition)
        if error_code == _MESSAGE_TOO_LARGE and batch.record_count > 1 and not batch.is_done:
            log.warning("splitting a batch of %d records for %s after MESSAGE_TOO_LARGE", batch.record_count, tp)
            if tm is not None:
                # Not a failure: the parts carry the batch's producer id, epoch and sequences
                # (ProducerBatch.split), so the partition's sequence has no gap, no epoch bump is
                # due, and a transaction stays committable (Java's completeBatch only removes the
                # batch from the in-flight set before splitAndReenqueue).
                tm.remove_in_flight(batch)
            self._accumulator.split_and_reenqueue(batch)
            self._accumulator.deallocate(batch)
            if self._guarantee_order:
                self._accumulator.unmute_partition(tp)
            if self._breaker_manager is not None:
                # A split probe proved nothing either way: its parts probe again.
                self._breaker_manager.cancel_probe(tp, now)
            return

        if exc.invalid_metadata or error_code in _STALE_LEADER_CODES:
            self._metadata.add_topic(tp.topic, now)
            self._metadata.mark_urgent(tp.topic, now)

        if tm is not None and error_code == _UNKNOWN_PRODUCER_ID:
            # Idempotent: start over under a new producer id. Transactional: the broker lost
            # this producer's state; the transaction must abort (and the abort bumps the epoch).
            retriable = not tm.transactional
            tm.request_producer_id_reset(f"UNKNOWN_PRODUCER_ID for {tp}")
        elif tm is not None and error_code == _OUT_OF_ORDER_SEQUENCE_NUMBER:
            retriable = tm.can_retry_out_of_order(batch)
            if not retriable and not tm.transactional:
                # Not explained by an earlier failed batch: the broker lost our state. Start over
                # under a new producer id rather than fail the records (KIP-360's recovery).
                tm.request_producer_id_reset(f"OUT_OF_ORDER_SEQUENCE_NUMBER for {tp}")
                retriable = True
        else:
            retriable = bool(exc.retriable)

        if retriable and self._can_retry(batch, now):
            log.debug("retrying batch for %s (attempt %d): %s", tp, batch.attempts + 1, exc)
            self._failure_log.retried(tp.topic, tp.partition, batch.record_count, exc, batch.attempts + 1, now)
            if tm is not None:
                tm.remove_in_flight(batch)
            self._accumulator.reenqueue(batch, now)
            if self._sensors is not None:
                self._sensors.record_retries(tp.topic, batch.record_count)
            if self._guarantee_order:
                self._accumulator.unmute_partition(tp)
            self._notify_breaker(tp, exc, batch.record_count, now, unanswered_since_ms)
            return
        # A transactional producer classifies the failure itself (abortable or fatal) in
        # handle_failed_batch; an idempotent one is done after a fatal error or being fenced.
        if tm is not None and not tm.transactional and (isinstance(exc, FatalError) or error_code in PRODUCER_FENCED_CODES):
            tm.transition_to_fatal(exc)
        if tm is not None and tm.transactional and error_code in PRODUCER_FENCED_CODES:
            exc = tm.fenced_error(error_code, tp.topic, tp.partition)
        self._fail_batch(batch, exc, record_errors=record_errors, unanswered_since_ms=unanswered_since_ms)

    def _can_retry(self, batch: ProducerBatch, now: int) -> bool:
        if self._tm is not None and self._tm.fatal_error is not None:
            return False
        return batch.attempts < self._retries and not batch.has_reached_delivery_timeout(self._delivery_timeout_ms, now)

    def _finish(self, batch: ProducerBatch, base_offset: int, log_append_time: int, exc: KafkaError | None, now: int) -> None:
        batch.done(base_offset, log_append_time, exc)
        self._accumulator.deallocate(batch)
        if self._guarantee_order:
            self._accumulator.unmute_partition(batch.topic_partition)
        self._notify_breaker(batch.topic_partition, exc, batch.record_count, now)

    def _fail_batch(
        self,
        batch: ProducerBatch,
        exc: KafkaError,
        *,
        record_errors: Any = None,
        deallocate: bool = True,
        unanswered_since_ms: int | None = None,
    ) -> None:
        tp = batch.topic_partition
        self._remove_in_flight(batch)
        if self._tm is not None:
            self._tm.handle_failed_batch(batch, exc)
        if self._sensors is not None:
            self._sensors.record_errors(tp.topic, batch.record_count)
        if not batch.is_done:
            self._failure_log.failed(tp.topic, tp.partition, batch.record_count, exc, batch.attempts, self._clock())
        batch.done(-1, -1, exc, record_errors)
        if deallocate:
            self._accumulator.deallocate(batch)
        if self._guarantee_order:
            self._accumulator.unmute_partition(tp)
        self._notify_breaker(tp, exc, batch.record_count, self._clock(), unanswered_since_ms)

    # ------------------------------------------------------------------ expiry
    def _expired_in_flight(self, now: int) -> list[ProducerBatch]:
        """In-flight batches past ``delivery.timeout.ms`` (Java's ``Sender.getExpiredInflightBatches``).

        Every loop asks; with a thousand partitions a thousand batches or more are in flight, and
        nearly always none is that old. The accumulator knows when its oldest incomplete batch was
        created (every in-flight batch is one until deallocated), so the walk is taken only when
        one may be.
        """
        expired: list[ProducerBatch] = []
        if not self._in_flight_batches or self._accumulator.none_created_before(now - self._delivery_timeout_ms + 1):
            return expired
        for batches in self._in_flight_batches.values():
            for batch in batches:
                if not batch.is_done and batch.has_reached_delivery_timeout(self._delivery_timeout_ms, now):
                    expired.append(batch)
        return expired

    def _fail_expired(self, batch: ProducerBatch, now: int, in_flight: bool = False) -> None:
        tp = batch.topic_partition
        exc = KafkaTimeoutError(
            f"Expiring {batch.record_count} record(s) for {tp}: {now - batch.created_ms} ms has passed since batch "
            f"creation (delivery.timeout.ms={self._delivery_timeout_ms})",
            topic=tp.topic,
            partition=tp.partition,
        )
        if in_flight:
            # The request is still on the wire and reads the batch's buffer: complete the futures now,
            # return the memory when the request itself finishes.
            if self._tm is not None:
                self._tm.handle_failed_batch(batch, exc)
            if self._sensors is not None:
                self._sensors.record_errors(tp.topic, batch.record_count)
            self._failure_log.failed(tp.topic, tp.partition, batch.record_count, exc, batch.attempts, now)
            batch.done(-1, -1, exc)
            self._notify_breaker(tp, exc, batch.record_count, now)
        else:
            self._fail_batch(batch, exc)

    def _remove_in_flight(self, batch: ProducerBatch) -> None:
        lst = self._in_flight_batches.get(batch.topic_partition)
        if lst is None:
            return
        try:
            lst.remove(batch)
        except ValueError:
            return
        if not lst:
            del self._in_flight_batches[batch.topic_partition]

    def buffer_bytes_by_node(self) -> dict[int, int]:
        """Pool bytes held per leader node: queued batches plus those in flight (any thread may ask)."""
        cluster = self._metadata.cluster
        out = self._accumulator.queued_bytes_by_node(cluster)
        for tp, batches in list(self._in_flight_batches.items()):
            held = sum(b.capacity for b in tuple(batches) if not b.deallocated)
            if held:
                leader = cluster.leader_for(tp)
                node = -1 if leader is None else leader.id
                out[node] = out.get(node, 0) + held
        return out

    # ------------------------------------------------------------------ circuit breaker
    def _log_moved(self, batches: int, records: int, now: int) -> None:
        """Say at INFO how many records left muted partitions, at most once a second (summed)."""
        self._moved_unlogged[0] += batches
        self._moved_unlogged[1] += records
        if now - self._moved_logged_ms < 1000:
            return
        self._moved_logged_ms = now
        b, r = self._moved_unlogged
        self._moved_unlogged = [0, 0]
        log.info("moved %d never-sent keyless records (%d batches) off partitions muted by the circuit breaker", r, b)

    def _status_context(
        self, now: int, unanswered_since_ms: int | None = None, stalled_connections: Mapping[int, int] | None = None
    ) -> Any:
        from kproducer.circuit_breaker import ProducerStatusContext

        per_node = self._client.in_flight_requests_by_node()
        per_tp = {tp: len(b) for tp, b in self._in_flight_batches.items()}
        return ProducerStatusContext(
            now_ms=now,
            in_flight_requests=per_node,
            in_flight_batches=per_tp,
            max_in_flight_requests_per_connection=self._max_in_flight,
            unanswered_since_ms=unanswered_since_ms,
            stalled_connections={} if stalled_connections is None else stalled_connections,
        )

    def _notify_breaker(
        self,
        tp: TopicPartition,
        exc: BaseException | None,
        record_count: int,
        now: int,
        unanswered_since_ms: int | None = None,
    ) -> None:
        if self._breaker is None:
            return
        try:
            changed = self._breaker.on_complete(self._status_context(now, unanswered_since_ms), tp, exc, record_count)
            if changed:
                # A new mute: its never-sent keyless batches leave now, not a loop later.
                moved_batches, moved_records = self._accumulator.move_unsent_off_muted(self._metadata.cluster)
                if moved_records:
                    self._log_moved(moved_batches, moved_records, now)
        except Exception:
            log.exception("circuit breaker on_complete raised")


__all__ = ["Sender", "Clock"]
