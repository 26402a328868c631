"""The Producer facade: ``send``/``flush``/``close``/``metrics`` on the caller's thread.

``send()`` serializes, then hands the record to the routing step
(:mod:`kproducer.router`): the topic's metadata, the size check, the partition
choice and the append to the RecordAccumulator, waking the Sender when a batch
filled or a new one was created. A record whose topic has no metadata yet is
parked there instead of blocking the caller. Everything else happens on the
Sender thread.

The hot path is kept lean: bytes skip the serializers, the partition count is
read from the immutable Cluster snapshot without a lock, and attribute look-ups
are bound once in ``__init__``.

This module keeps the construction (config to components), ``send()`` and the
C send lane's set-up. The facade's other jobs live next to it as functions
taking the producer, bound here as its methods: :mod:`kproducer.producer_bulk`
(``send_batch``, ``send_arrow``), :mod:`kproducer.producer_transactions` (the
transactional API), :mod:`kproducer.producer_interceptors` and
:mod:`kproducer.producer_lifecycle` (``flush``, ``close``, the exit flush and
the fork guard).
"""

from __future__ import annotations

import copy
import importlib
import itertools
import logging
import math
import os
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kproducer import producer_interceptors, producer_lifecycle
from kproducer.accumulator import BufferPool, RecordAccumulator, RecordFuture
from kproducer.callback_errors import CallbackErrors, run_as_callback_thread
from kproducer.common import monotonic_ms, wall_clock_ms
from kproducer.config import ProducerConfig
from kproducer.delivery import (
    Callback,
    DeliveryReport,
    OnDelivery,
    check_callback,
    resolve_callback,
)
from kproducer.errors import (
    IllegalStateError,
    ProducerClosedError,
    SerializationError,
    error_for_code,
)
from kproducer.failure_log import FailureLog
from kproducer.metadata import FINAL_TOPIC_ERRORS, Cluster, Metadata
from kproducer.metrics import (
    Metrics,
    NodeBufferMetrics,
    register_producer_metrics,
    register_transaction_metrics,
)
from kproducer.partitioner import resolve_partitioner
from kproducer.producer_interceptors import resolve_interceptors
from kproducer.producer_lifecycle import EXIT_FLUSH_TIMEOUT_S, live_producers  # noqa: F401 (its name here before)
from kproducer.record.builder import MAX_TIMESTAMP
from kproducer.record.c_extension import report_implementation_once
from kproducer.record.codecs import CompressionType
from kproducer.router import RecordRouter
from kproducer.serialization import is_passthrough, resolve_serializer
from kproducer.structs import Headers, PartitionInfo, ProducerRecord
from kproducer.tracing import GATE_KEY, ProducerTracing
from kproducer.transaction_manager import (
    TransactionManager,
    TransactionState,
)
from kproducer.validation import (
    SECONDS_LIKE_BELOW,
    SecondsTimestampWarning,
    check_headers,
    check_partition,
    check_timestamp,
)

if TYPE_CHECKING:
    # Loaded by the first Producer (the Sender and the network layer) or when a breaker is configured.
    from kproducer import producer_bulk, producer_transactions
    from kproducer.circuit_breaker import CircuitBreakManager, PartitionCircuitBreaker
    from kproducer.network.kafka_client import KafkaClient
    from kproducer.sender import Clock


class _LoadedOnUse:
    """A Producer method kept in a module of its own that is imported on the method's first use.

    On first access the module's function of the same name replaces this descriptor on the class,
    so every later call is an ordinary method call.
    """

    def __init__(self, module: str) -> None:
        self._module = module
        self._name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        function = getattr(importlib.import_module(self._module), self._name)
        for cls in (owner or type(instance)).__mro__:
            if cls.__dict__.get(self._name) is self:
                setattr(cls, self._name, function)
                break
        return function.__get__(instance, owner)

log = logging.getLogger(__name__)

__all__ = ["Callback", "OnDelivery", "Producer"]


_client_ids = itertools.count(1)


def _metadata_coalescing(linger_ms: int) -> tuple[int, int]:
    """(coalesce_ms, coalesce_quiet_ms) for new topics that several caller threads send to at once.

    A caller thread that is ready to run can wait one GIL switch interval (5 ms by
    default) while the Sender holds the GIL, so arrivals of one burst land up to
    that far apart: the quiet gap that ends a burst is one switch interval, and a
    request waits at most two after the first arrival. Measured on benchmarks/metadata_scale.py's
    workload (13 new topics per 100 ms from a pool of callers): 2 ms / 5 ms gave
    238 requests, 5 ms / 10 ms gave 179, at a p50 cost of about 2 ms. ``linger.ms=0``
    asks for no waiting at all, so it keeps Java's behaviour of sending at once.
    """
    if linger_ms <= 0:
        return 0, 1
    quiet = max(2, math.ceil(sys.getswitchinterval() * 1000))
    return 2 * quiet, quiet



class Producer:
    """A thread-safe Kafka producer.

    ``Producer({"bootstrap.servers": "host:9092", "linger.ms": 5})`` or
    ``Producer(bootstrap_servers="host:9092", linger_ms=5)``. Use it as a context
    manager, or call :meth:`close`. Delivery callbacks run on the producer's I/O
    thread and must be quick; hand slow work to your own executor.
    """

    def __init__(
        self,
        config: Mapping[str, Any] | None = None,
        *,
        _clock: Clock | None = None,
        _wall_clock: Clock | None = None,
        _client: KafkaClient | None = None,
        _metadata: Metadata | None = None,
        _start_io_thread: bool = True,
        **kwargs: Any,
    ) -> None:
        # ``_clock``, ``_client`` and ``_metadata`` are seams for tests (the Time, KafkaClient and
        # ProducerMetadata that Java's KafkaProducer test constructor takes): a controllable clock
        # and a scripted client that answers metadata requests into the same Metadata drive the
        # Sender without a broker. With ``_start_io_thread=False`` no I/O thread runs: the test
        # calls :meth:`run_sender_once` itself, so that a whole producer runs deterministically on
        # one thread. ``_wall_clock`` stamps records sent without a timestamp (Java's ``Time`` does
        # both), so that a test can make batches' bytes repeatable.
        cfg = ProducerConfig(config, **kwargs)
        self.config = cfg
        self.client_id: str = cfg.client_id or f"producer-{next(_client_ids)}"
        self._seconds_warning = SecondsTimestampWarning(log, self.client_id)
        self._clock = _clock if _clock is not None else monotonic_ms
        self._wall_clock = _wall_clock if _wall_clock is not None else wall_clock_ms
        self._closed = False
        self._forked = False
        self._pid = os.getpid()
        self._close_lock = threading.Lock()

        self._metrics = Metrics(
            clock_ms=self._clock, sample_window_ms=cfg.metrics_sample_window_ms, num_samples=cfg.metrics_num_samples
        )
        self._sensors = register_producer_metrics(self._metrics)
        # Failed and retried records, summarised at WARNING; also counts failures for take_failed_count().
        self._failure_log = FailureLog(logging.getLogger("kproducer.sender"))
        # Exceptions raised by delivery callbacks: counted, logged, never silent (kproducer.callback_errors).
        self._callback_errors = CallbackErrors(self.client_id)
        self._metrics.add_provider(self._callback_errors)
        # metric.reporters: resolved (and their libraries imported) before any thread starts.
        self._reporters: list[Any] = []
        if cfg.metric_reporters:
            from kproducer.metrics.reporters import resolve_reporters

            self._reporters = resolve_reporters(cfg.metric_reporters, cfg.as_dict())

        self._key_serializer = resolve_serializer(cfg.key_serializer, is_key=True)
        self._value_serializer = resolve_serializer(cfg.value_serializer, is_key=False)
        self._key_passthrough = is_passthrough(self._key_serializer)
        self._value_passthrough = is_passthrough(self._value_serializer)
        self._partitioner = resolve_partitioner(cfg.partitioner_class)
        self._ignore_keys = bool(cfg.partitioner_ignore_keys)
        self._interceptors = resolve_interceptors(cfg.interceptor_classes)
        # OpenTelemetry spans (kproducer.tracing); None: tracing.enabled=false or no opentelemetry-api.
        self._tracing = ProducerTracing.create(
            cfg.tracing_enabled, self.client_id, bulk_headers=cfg.tracing_bulk_headers,
            transactional_id=cfg.transactional_id,
        )

        self._max_block_ms = cfg.max_block_ms
        self._max_request_size = cfg.max_request_size
        self._buffer_memory = cfg.buffer_memory
        self._compression = CompressionType(_compression_code(cfg.compression_type))
        self._idempotent = bool(cfg.enable_idempotence)

        coalesce_ms, coalesce_quiet_ms = _metadata_coalescing(int(cfg.linger_ms))
        self._metadata = _metadata if _metadata is not None else Metadata(
            metadata_max_age_ms=cfg.metadata_max_age_ms,
            metadata_max_idle_ms=cfg.metadata_max_idle_ms,
            retry_backoff_ms=cfg.retry_backoff_ms,
            retry_backoff_max_ms=cfg.retry_backoff_max_ms,
            allow_auto_topic_creation=cfg.allow_auto_create_topics,
            # New topics arriving together (several caller threads) share one request.
            coalesce_ms=coalesce_ms,
            coalesce_quiet_ms=coalesce_quiet_ms,
        )
        self._pool = BufferPool(cfg.buffer_memory, cfg.batch_size, clock_ms=self._clock, metrics=self._metrics)
        self._transactional_id: str | None = cfg.transactional_id
        self._tm = (
            TransactionManager(
                cfg.transactional_id,
                transaction_timeout_ms=cfg.transaction_timeout_ms,
                retry_backoff_ms=cfg.retry_backoff_ms,
                clock_ms=self._clock,
                on_state_change=self._on_transaction_state_change if cfg.transactional_id is not None else None,
            )
            if self._idempotent
            else None
        )
        self._txn: TransactionManager | None = self._tm if cfg.transactional_id is not None else None
        self._txn_sensors = register_transaction_metrics(self._metrics) if self._txn is not None else None

        # The network layer (and the kio protocol schemas it encodes with, which import asyncio) is
        # loaded by the first Producer, not by 'import kproducer'.
        from kproducer.network.client import NetworkClient, security_options
        from kproducer.network.protocol import ApiKey, preload
        from kproducer.sender import Sender

        # The schemas of the first requests, loaded here rather than by the Sender thread while the
        # caller's first send()s hold the GIL (see protocol.preload).
        preload(
            [ApiKey.API_VERSIONS, ApiKey.METADATA]
            + ([ApiKey.INIT_PRODUCER_ID] if self._idempotent else [])
            + ([ApiKey.FIND_COORDINATOR] if cfg.transactional_id is not None else [])
        )

        self._client: KafkaClient = _client if _client is not None else NetworkClient(
            bootstrap_servers=cfg.bootstrap_servers,
            client_id=self.client_id,
            metadata=self._metadata,
            request_timeout_ms=cfg.request_timeout_ms,
            reconnect_backoff_ms=cfg.reconnect_backoff_ms,
            reconnect_backoff_max_ms=cfg.reconnect_backoff_max_ms,
            socket_connection_setup_timeout_ms=cfg.socket_connection_setup_timeout_ms,
            socket_connection_setup_timeout_max_ms=cfg.socket_connection_setup_timeout_max_ms,
            connections_max_idle_ms=cfg.connections_max_idle_ms,
            max_in_flight_requests_per_connection=cfg.max_in_flight_requests_per_connection,
            send_buffer_bytes=cfg.send_buffer_bytes,
            receive_buffer_bytes=cfg.receive_buffer_bytes,
            client_dns_lookup=cfg.client_dns_lookup,
            clock_ms=self._clock,
            bootstrap_warning_ms=cfg.max_block_ms,
            **security_options(cfg),
        )

        self._breaker, self._breaker_manager = _resolve_breaker(cfg, self._metadata, self._clock, self._metrics)
        self._keyed_reroute = bool(cfg.producer_circuit_breaker_keyed_reroute)

        self._accumulator = RecordAccumulator.from_config(
            cfg,
            buffer_pool=self._pool,
            clock_ms=self._clock,
            metrics=self._metrics,
            transaction_manager=self._tm,
            magic=self._client.max_usable_produce_magic,
            circuit_break_manager=self._breaker_manager,
        )
        self._sensors.bind_gauges(self._pool, self._client)
        self._metadata.bind_metrics(self._sensors, on_evict=self._sensors.remove_topic)

        self._router = RecordRouter(
            metadata=self._metadata,
            accumulator=self._accumulator,
            pool=self._pool,
            clock_ms=self._clock,
            wakeup=self._client.wakeup,
            sensors=self._sensors,
            breaker_manager=self._breaker_manager,
            partitioner=self._partitioner,
            keyed_reroute=self._keyed_reroute,
            ignore_keys=self._ignore_keys,
            compression=self._compression,
            max_request_size=cfg.max_request_size,
            buffer_memory=cfg.buffer_memory,
            max_block_ms=cfg.max_block_ms,
            retry_backoff_ms=cfg.retry_backoff_ms,
            retry_backoff_max_ms=cfg.retry_backoff_max_ms,
            failure_log=self._failure_log,
            wall_clock_ms=self._wall_clock,
        )
        router = self._router
        # KIP-526: a topic still holding records (in batches or parked) is never evicted.
        self._metadata.set_buffered_records_check(
            lambda t: router.has_parked(t) or self._accumulator.has_buffered_records(t)
        )
        self._sender = Sender(
            client=self._client,
            metadata=self._metadata,
            accumulator=self._accumulator,
            clock_ms=self._clock,
            acks=cfg.acks,
            retries=cfg.retries,
            max_request_size=cfg.max_request_size,
            request_timeout_ms=cfg.request_timeout_ms,
            delivery_timeout_ms=cfg.delivery_timeout_ms,
            retry_backoff_ms=cfg.retry_backoff_ms,
            retry_backoff_max_ms=cfg.retry_backoff_max_ms,
            guarantee_message_order=cfg.max_in_flight_requests_per_connection == 1,
            transaction_manager=self._tm,
            sensors=self._sensors,
            circuit_breaker=self._breaker,
            circuit_break_manager=self._breaker_manager,
            max_in_flight=cfg.max_in_flight_requests_per_connection,
            failure_log=self._failure_log,
            router=self._router,
        )
        if isinstance(self._client, NetworkClient):
            # lz4/zstd batches compressed on a native thread (record.compression_worker); a test's
            # scripted client keeps the Python path, which compresses at a deterministic moment.
            self._accumulator.start_compression_worker(self._client.wakeup_fd())
        self._metrics.add_provider(NodeBufferMetrics(self._sender.buffer_bytes_by_node))
        self._io_thread = threading.Thread(
            target=run_as_callback_thread(self._sender.run, self._callback_errors),
            name=f"kafka-producer-network-thread | {self.client_id}",
            daemon=True,
        )
        self._io_thread_started = _start_io_thread
        if _start_io_thread:
            self._io_thread.start()
        # Bound once: send() is called millions of times.
        self._wakeup = self._sender.wakeup
        self._route = self._router.route
        self._lane = self._make_send_lane()
        self._router.lane = self._lane
        if self._lane is not None:
            # The instance attribute shadows the method: p.send(...) goes straight into C.
            self.__dict__["send"] = self._lane
            if self._txn is not None:
                # A transactional producer sends only inside a transaction: the lane is on while
                # one is open, and every other send takes the Python path, which says why not.
                self._lane.enabled = False
        live_producers.add(self)
        for reporter in self._reporters:
            reporter.init(self._metrics, self.client_id)
        log.info("kproducer %s started (bootstrap %s)", self.client_id, ",".join(cfg.bootstrap_servers))
        report_implementation_once(log)  # without its C extensions: a WARNING with the cause, once per process

    def _make_send_lane(self) -> Any:
        """The C fast lane for send() (``kproducer._speedups.SendLane``), or None.

        Only when nothing between send() and the accumulator can differ per record:
        the built-in partitioner (or one of librdkafka's hashing policies, which the
        lane computes too), serializers that pass bytes through, no
        interceptors, and a class that does not override send(). With a circuit
        breaker, records for a muted partition take the Python path. Every call the
        lane does not take runs the Python :meth:`send` unchanged.
        """
        from kproducer.record import native

        # librdkafka's hashing policies are computed in the lane too (key_hash), unless keys are ignored.
        lane_key_hash = getattr(self._partitioner, "lane_key_hash", None) if not self._ignore_keys else None
        if (
            native.c is None
            or type(self).send is not Producer.send
            or self._interceptors
            or (self._partitioner is not None and lane_key_hash is None)
            or not (self._key_passthrough and self._value_passthrough)
        ):
            return None
        from kproducer.accumulator.batch import ProducerBatch, Thunk
        from kproducer.accumulator.deques import PartitionDeque
        from kproducer.partitioner import BuiltInPartitioner, _StickyPartitionInfo
        from kproducer.record.builder import MemoryRecordsBuilder

        # The lane compares the metadata's current Cluster by identity on every call: read the
        # attribute behind the ``cluster`` property when there is one (no Python call per send).
        md = self._metadata
        cluster_attr = "_cluster" if getattr(md, "_cluster", None) is md.cluster else "cluster"
        try:
            return native.c.SendLane(
                slow=Producer.send.__get__(self),
                metadata=md,
                cluster_attr=cluster_attr,
                accumulator=self._accumulator,
                wakeup=self._wakeup,
                none_compression=CompressionType.NONE,
                batch_type=ProducerBatch,
                builder_type=MemoryRecordsBuilder,
                future_type=RecordFuture,
                thunk_type=Thunk,
                deque_type=PartitionDeque,
                sticky_type=_StickyPartitionInfo,
                partitioner_type=BuiltInPartitioner,
                max_record_size=min(self._max_request_size, self._buffer_memory),
                sticky_batch_size=self._accumulator.batch_size,
                ignore_keys=self._ignore_keys,
                check_callback=check_callback,
                report_type=DeliveryReport,
                breaker=self._breaker_manager,
                # Once a tracer provider is set, every call takes the Python path, which traces it.
                gate=self._tracing.gate if self._tracing is not None else None,
                gate_key=GATE_KEY,
                key_hash=lane_key_hash or 0,
                empty_key_keyless=bool(getattr(self._partitioner, "empty_key_is_keyless", False)),
                # The lane reads the system clocks itself unless a test injected its own.
                clock=None if self._clock is monotonic_ms else self._clock,
                wall_clock=None if self._wall_clock is wall_clock_ms else self._wall_clock,
            )
        except (AttributeError, TypeError) as e:  # a class lost a slot the lane needs: stay on Python
            log.warning("kproducer: send() fast lane unavailable (%s); using the Python path", e)
            return None

    # ------------------------------------------------------------------ context manager
    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<Producer {self.client_id} {'closed' if self._closed else 'open'}>"

    # ------------------------------------------------------------------ send
    def send(
        self,
        topic: str | ProducerRecord,
        value: Any = None,
        key: Any = None,
        *,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Headers | Iterable[tuple[str, bytes | None]] | None = None,
        callback: Callback | None = None,
        on_delivery: OnDelivery | None = None,
    ) -> RecordFuture:
        """Queue one record; returns a RecordFuture resolving to its RecordMetadata.

        ``topic``: a topic name (ASCII letters, digits, ``.``, ``_``, ``-``; at most
        249 characters), or a ProducerRecord carrying all the fields.
        ``value``, ``key``: ``bytes``, ``bytearray``, ``memoryview``, ``str`` (sent as
        UTF-8) or ``None``; anything else needs ``value.serializer`` /
        ``key.serializer`` (e.g. ``'json'``, ``'int'``, or a Serializer). A ``None``
        value is a tombstone on a compacted topic.
        ``partition``: an ``int`` >= 0, or ``None`` to let the partitioner choose
        (murmur2 of the key as in Java; without a key, KIP-794's sticky partitioner).
        ``timestamp``: an ``int``, milliseconds since the epoch, or ``None`` for now.
        ``headers``: a list of ``(str, bytes | str | None)`` pairs, or a dict of the
        same (str values are sent as UTF-8); keys may repeat in a list.
        ``callback``: ``callback(metadata, exception)`` (Java's order), called once per
        record with ``(RecordMetadata, None)`` when delivered or ``(None, exception)``
        when it failed; ``on_delivery(err, msg)`` is the confluent-kafka shape. Both
        run on the producer's I/O thread, so they must be quick.

        Never waits for metadata: a record whose topic has none yet waits in the
        producer (charged to ``buffer.memory``) and goes into a batch, in send
        order, when its metadata arrives. The call blocks only while the buffer is
        full, up to ``max.block.ms``. Errors that concern this record (no metadata
        within ``max.block.ms``, an invalid topic name, too large, a serializer
        failure, a muted partition, the buffer stayed full, its retries ran out)
        complete the future and the callback, as Java's send() does; a misuse
        (closed producer, an argument of the wrong type or value) raises here, with
        a message naming the argument and what is allowed.

        ``callback(metadata, exception)`` is Java's order; ``on_delivery(err, msg)``
        is confluent-kafka's (see :mod:`kproducer.delivery`). A callable that
        cannot take two positional arguments raises TypeError here.

        Once the application has set an OpenTelemetry tracer provider (and unless
        ``tracing.enabled`` is false) the send is a PRODUCER span, child of the
        caller's current span, ended with the record's outcome, and the record's
        headers carry its ``traceparent`` (:mod:`kproducer.tracing`).
        """
        if not isinstance(topic, str):
            if isinstance(topic, ProducerRecord):
                rec = topic
                topic, value, key = rec.topic, rec.value, rec.key
                partition = rec.partition if partition is None else partition
                timestamp = rec.timestamp if timestamp is None else timestamp
                headers = rec.headers if headers is None else headers
            else:
                raise TypeError(f"topic must be a str or a ProducerRecord, got {type(topic).__name__}")
        if self._tracing is not None and self._tracing.should_trace(headers):
            return self._tracing.send(self, topic, value, key, partition, timestamp, headers, callback, on_delivery)
        if self._closed or self._forked:
            self._raise_unusable()
        if self._txn is not None:
            self._check_send_in_transaction()
        sent_as: Callable[[Any, Any, Any], None] | None = None
        if callback is not None or on_delivery is not None:
            callback = resolve_callback(callback, on_delivery, topic, key, value, headers)
            # A confluent-kafka style report gives back the bytes sent, not the objects passed.
            sent_as = getattr(callback, "record_serialized", None)
        if self._interceptors:
            topic, value, key, partition, timestamp, headers = self._intercept_send(
                topic, value, key, partition, timestamp, headers
            )
            callback = self._intercept_callback(callback)
        if headers is not None:
            headers = check_headers(headers)
        if partition is not None and (type(partition) is not int or partition < 0):
            check_partition(partition)
        if timestamp is not None and (
            type(timestamp) is not int or timestamp < SECONDS_LIKE_BELOW or timestamp > MAX_TIMESTAMP
        ):
            check_timestamp(timestamp, MAX_TIMESTAMP, self._seconds_warning)

        # Serialize (bytes skip the serializers), then the routing step: metadata, size check,
        # partition choice, append. A topic without metadata parks the record, not the caller.
        try:
            if type(key) is bytes or key is None:
                key_bytes = key
                if key is not None and not self._key_passthrough:
                    key_bytes = self._key_serializer.serialize(topic, key, headers)
            else:
                key_bytes = self._key_serializer.serialize(topic, key, headers)
            if type(value) is bytes or value is None:
                value_bytes = value
                if value is not None and not self._value_passthrough:
                    value_bytes = self._value_serializer.serialize(topic, value, headers)
            else:
                value_bytes = self._value_serializer.serialize(topic, value, headers)
        except Exception as e:
            # The record's own error: it reaches its future and callback, naming topic and partition.
            error = e if isinstance(e, SerializationError) else SerializationError(f"serializer raised {e!r}")
            if error is not e:
                error.__cause__ = e
            return self._router.fail_now(topic, partition, error, callback)
        if sent_as is not None:
            sent_as(key_bytes, value_bytes, headers)
        return self._route(topic, partition, key, value, key_bytes, value_bytes, timestamp, headers, callback)

    def _timestamp_seconds_warning(self) -> SecondsTimestampWarning:
        """This producer's once-only WARNING for timestamps that look like seconds (the bulk calls use it)."""
        return self._seconds_warning

    def _check_usable(self) -> None:
        if self._closed or self._forked:
            self._raise_unusable()
        if self._txn is not None:
            self._check_send_in_transaction()

    def _raise_unusable(self) -> None:
        if self._forked:
            raise IllegalStateError(
                f"this Producer was created in process {self._pid} and cannot be used in a forked child "
                f"(pid {os.getpid()}): its I/O thread does not exist here. Create a new Producer in the child."
            )
        raise ProducerClosedError("Cannot send after the producer has been closed")

    def _wait_on_metadata(self, topic: str, start: int, max_block_ms: int) -> Cluster:
        """Block until ``topic`` is known, or ``max_block_ms`` passes (Java's ``KafkaProducer.waitOnMetadata``).

        The budget is an argument, not ``self._max_block_ms`` changed for the call: a send() on
        another thread meanwhile keeps the configured max.block.ms.
        """
        md = self._metadata
        deadline = start + max_block_ms
        md.add_topic(topic, start)
        first = True
        while True:
            cluster = md.cluster
            count = cluster.partition_count(topic)
            if count is not None:
                return cluster
            err = cluster.topic_errors.get(topic)
            if err in FINAL_TOPIC_ERRORS:
                raise error_for_code(err, topic=topic)
            auth_error = md.authentication_error
            if auth_error is not None:
                # TLS or SASL refused: the same settings cannot succeed, so do not wait out max.block.ms.
                raise copy.copy(auth_error)
            now = self._clock()
            if now >= deadline:
                raise self._router.metadata_error(topic, None, count, err, max_block_ms)
            if self._closed or self._forked:
                self._raise_unusable()
            st = md.topic_state(topic)
            was_urgent = st is not None and st.urgent
            version = md.request_update_for_topic(topic, now)  # urgent: joins the next request
            if first or not was_urgent:
                # The Sender may sleep on a long poll: tell it when this topic becomes urgent. While
                # it stays urgent (it missed a request in flight) the Sender, which just handled that
                # response, sends the next request when it is due without being woken by every waiter.
                self._wakeup()
                first = False
            md.await_update(version, min(deadline - now, 1000) / 1000.0)

    # ------------------------------------------------------------------ transactions
    @property
    def transactional_id(self) -> str | None:
        return self._transactional_id

    @property
    def producer_id(self) -> int:
        """The producer id from InitProducerId (-1 until known); with the epoch, what a transaction is committed under."""
        return self._tm.producer_id if self._tm is not None else -1

    @property
    def producer_epoch(self) -> int:
        return self._tm.producer_epoch if self._tm is not None else -1

    @property
    def transaction_state(self) -> TransactionState | None:
        """The transactional producer's state (None for a non-transactional producer)."""
        return self._txn.state if self._txn is not None else None

    def run_sender_once(self) -> None:
        """One loop of the Sender on the calling thread (Java's ``Sender.runOnce``).

        Only for a producer built without its I/O thread (the ``_start_io_thread=False`` seam):
        deterministic tests drive the Sender loop by loop with a scripted client and clock.
        """
        if self._io_thread_started:
            raise IllegalStateError("run_sender_once() is for a producer without its I/O thread; this one runs it")
        self._sender.run_once()

    # ------------------------------------------------------------------ jobs kept in modules of their own
    # Functions taking the producer, bound here as its methods (no extra call per use).
    # The bulk calls and the transaction API load their modules on first use (_LoadedOnUse), so
    # that a producer that uses neither does not pay for importing them.
    if TYPE_CHECKING:
        send_batch = producer_bulk.send_batch
        send_arrow = producer_bulk.send_arrow
        init_transactions = producer_transactions.init_transactions
        begin_transaction = producer_transactions.begin_transaction
        send_offsets_to_transaction = producer_transactions.send_offsets_to_transaction
        commit_transaction = producer_transactions.commit_transaction
        abort_transaction = producer_transactions.abort_transaction
        transaction = producer_transactions.transaction
        _check_send_in_transaction = producer_transactions._check_send_in_transaction
        _may_abort_after_error = producer_transactions._may_abort_after_error
        _on_transaction_state_change = producer_transactions._on_transaction_state_change
    else:
        send_batch = _LoadedOnUse("kproducer.producer_bulk")
        send_arrow = _LoadedOnUse("kproducer.producer_bulk")
        init_transactions = _LoadedOnUse("kproducer.producer_transactions")
        begin_transaction = _LoadedOnUse("kproducer.producer_transactions")
        send_offsets_to_transaction = _LoadedOnUse("kproducer.producer_transactions")
        commit_transaction = _LoadedOnUse("kproducer.producer_transactions")
        abort_transaction = _LoadedOnUse("kproducer.producer_transactions")
        transaction = _LoadedOnUse("kproducer.producer_transactions")
        _check_send_in_transaction = _LoadedOnUse("kproducer.producer_transactions")
        _may_abort_after_error = _LoadedOnUse("kproducer.producer_transactions")
        _on_transaction_state_change = _LoadedOnUse("kproducer.producer_transactions")
    _intercept_send = producer_interceptors.intercept_send
    _intercept_callback = producer_interceptors.intercept_callback
    flush = producer_lifecycle.flush
    take_failed_count = producer_lifecycle.take_failed_count
    purge = producer_lifecycle.purge
    close = producer_lifecycle.close

    # ------------------------------------------------------------------ info
    def partitions_for(self, topic: str, timeout: float | None = None) -> list[PartitionInfo]:
        """The topic's partitions, waiting for metadata up to ``max.block.ms`` (or ``timeout`` seconds)."""
        if self._closed or self._forked:
            self._raise_unusable()
        cluster = self._metadata.cluster
        if cluster.partition_count(topic) is None:
            budget_ms = self._max_block_ms if timeout is None else int(timeout * 1000)
            cluster = self._wait_on_metadata(topic, self._clock(), budget_ms)
        return list(cluster.partitions_for_topic(topic))

    def metrics(self) -> dict[str, float]:
        """Current metric values, by Java metric name (``record-send-rate``, ``batch-size-avg``...)."""
        return self._metrics.snapshot()

    @property
    def metric_reporters(self) -> tuple[Any, ...]:
        """The reporters ``metric.reporters`` created, in order (``PrometheusReporter.http_port``: the port it serves)."""
        return tuple(self._reporters)

    @property
    def circuit_break_manager(self) -> CircuitBreakManager | None:
        """The partition circuit breaker's mute state (KIP-693); None when no breaker is configured."""
        return self._breaker_manager


# ---------------------------------------------------------------------- helpers
def _compression_code(name: str | int) -> int:
    from kproducer.record.codecs import compression_type_for_name

    return int(name) if isinstance(name, int) else int(compression_type_for_name(name))


def _resolve_breaker(
    cfg: ProducerConfig, metadata: Metadata, clock: Callable[[], int], metrics: Metrics
) -> tuple[PartitionCircuitBreaker | None, CircuitBreakManager | None]:
    """``producer.circuit.breaker.class``: the breaker and its manager, metrics registered; (None, None) when off."""
    spec = cfg.producer_circuit_breaker_class
    if spec is None:
        return None, None
    # Loaded only when a breaker is configured.
    from kproducer.circuit_breaker import (
        CircuitBreakManager,
        register_circuit_breaker_metrics,
        resolve_circuit_breaker,
    )

    breaker = resolve_circuit_breaker(spec, cfg.prefixed("producer.circuit.breaker."))
    if breaker is None:
        return None, None
    manager = CircuitBreakManager(lambda: metadata.cluster, clock_ms=clock)
    breaker.set_circuit_break_manager(manager)
    register_circuit_breaker_metrics(metrics, manager)
    return breaker, manager
