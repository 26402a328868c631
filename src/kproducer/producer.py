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

One class, as Java's ``KafkaProducer`` is: construction (config to components),
``send()`` and the C send lane's set-up, the bulk calls (``send_batch``,
``send_arrow``; their column readers and future are in :mod:`kproducer.bulk`),
the transactional API, ``flush``/``purge``/``close``, and the two process-wide
hooks: the flush at interpreter exit and the fork guard.
"""

from __future__ import annotations

import atexit
import copy
import itertools
import logging
import math
import os
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from functools import partial, update_wrapper
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from kproducer.accumulator import BufferPool, RecordAccumulator, RecordFuture
from kproducer.accumulator.adaptive_linger import AdaptiveLinger
from kproducer.callback_errors import CallbackErrors, attributed_to, run_as_callback_thread
from kproducer.common import monotonic_ms, wall_clock_ms
from kproducer.config import ProducerConfig
from kproducer.delivery import (
    Callback,
    DeliveryReport,
    OnDelivery,
    check_callback,
    resolve_bulk_callback,
    resolve_callback,
)
from kproducer.errors import (
    BufferExhaustedError,
    IllegalStateError,
    KafkaError,
    KafkaTimeoutError,
    ProducerClosedError,
    RecordPurgedError,
    SerializationError,
    error_for_code,
)
from kproducer.failure_log import FailureLog, warn_data_loss
from kproducer.metadata import FINAL_TOPIC_ERRORS, Cluster, Metadata
from kproducer.metrics import (
    Metrics,
    NodeBufferMetrics,
    register_producer_metrics,
    register_transaction_metrics,
)
from kproducer.network.client_error_event import ClientErrorListener
from kproducer.partitioner import resolve_partitioner
from kproducer.producer_interceptors import ProducerInterceptors
from kproducer.record.builder import MAX_TIMESTAMP
from kproducer.record.c_extension import report_implementation_once
from kproducer.record.codecs import CompressionType
from kproducer.router import RecordRouter
from kproducer.serialization import is_passthrough, resolve_serializer
from kproducer.structs import Headers, PartitionInfo, ProducerRecord, TopicPartition
from kproducer.tracing import GATE_KEY, ProducerTracing
from kproducer.transaction_manager import (
    GroupMetadata,
    TransactionalRequestResult,
    TransactionManager,
    TransactionState,
    group_metadata_from,
    normalize_offsets,
)
from kproducer.validation import (
    SECONDS_LIKE_BELOW,
    SecondsTimestampWarning,
    check_headers,
    check_partition,
    check_timestamp,
)

if TYPE_CHECKING:
    # Loaded by the first Producer (the Sender and the network layer), when a breaker is configured,
    # or by the first bulk call.
    from kproducer.avro.serializer import AvroFormat
    from kproducer.bulk import BulkFuture
    from kproducer.circuit_breaker import CircuitBreakManager, PartitionCircuitBreaker
    from kproducer.network.kafka_client import KafkaClient
    from kproducer.sender import Clock


log = logging.getLogger(__name__)

__all__ = ["Callback", "OnDelivery", "Producer"]


_client_ids = itertools.count(1)

#: The producers of this process that are not closed (weakly held): the exit flush and the fork guard visit them.
live_producers: weakref.WeakSet[Producer] = weakref.WeakSet()

#: close() says what it waits for once it has waited this long, then this often.
_CLOSE_REPORT_AFTER_S = 5.0
_CLOSE_REPORT_EVERY_S = 30.0
#: At interpreter exit a producer still holding records flushes them for at most this long.
EXIT_FLUSH_TIMEOUT_S = 5.0

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _traced(
    operation: str,
) -> Callable[[Callable[Concatenate[Producer, _P], _R]], Callable[Concatenate[Producer, _P], _R]]:
    """A span around a transaction step when the producer traces (kproducer.tracing), else the plain call."""

    def wrap(fn: Callable[Concatenate[Producer, _P], _R]) -> Callable[Concatenate[Producer, _P], _R]:
        def step(self: Producer, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
            tracing = self._tracing
            if tracing is None or not tracing.active():
                return fn(self, *args, **kwargs)
            with tracing.transaction_step(operation, lambda: (self.producer_id, self.producer_epoch)):
                return fn(self, *args, **kwargs)

        update_wrapper(step, fn)
        return step

    return wrap


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
        _sender_cpu_clock: Callable[[], float] | None = None,
        client_error_listener: ClientErrorListener | None = None,
        **kwargs: Any,
    ) -> None:
        # ``client_error_listener`` is added (see :meth:`add_client_error_listener`) before the I/O
        # thread starts, so that it hears of the first connection attempt's failure too.
        # ``_clock``, ``_client`` and ``_metadata`` are seams for tests (the Time, KafkaClient and
        # ProducerMetadata that Java's KafkaProducer test constructor takes): a controllable clock
        # and a scripted client that answers metadata requests into the same Metadata drive the
        # Sender without a broker. With ``_start_io_thread=False`` no I/O thread runs: the test
        # calls :meth:`run_sender_once` itself, so that a whole producer runs deterministically on
        # one thread. ``_wall_clock`` stamps records sent without a timestamp (Java's ``Time`` does
        # both), so that a test can make batches' bytes repeatable. ``_sender_cpu_clock`` (ms of CPU
        # the Sender's thread used) turns the adaptive linger on under a test clock (see below).
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
        self._interceptors = ProducerInterceptors.from_config(cfg.interceptor_classes)  # None: no interceptors
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

        # The Sender stretches linger.ms while its own work keeps the batches small, judged by the
        # CPU its thread uses against the clock: on the real clock, or under a test clock with a
        # CPU clock the test moves (a test clock does not move with the CPU time a loop takes).
        adaptive_linger: AdaptiveLinger | None = None
        linger_budget_ms = cfg.delivery_timeout_ms - cfg.request_timeout_ms
        if _sender_cpu_clock is not None:
            adaptive_linger = AdaptiveLinger(cfg.linger_ms, max_ms=linger_budget_ms, sender_cpu_ms=_sender_cpu_clock)
        elif self._clock is monotonic_ms:
            adaptive_linger = AdaptiveLinger(cfg.linger_ms, max_ms=linger_budget_ms)
        self._accumulator = RecordAccumulator.from_config(
            cfg,
            buffer_pool=self._pool,
            clock_ms=self._clock,
            metrics=self._metrics,
            transaction_manager=self._tm,
            magic=self._client.max_usable_produce_magic,
            circuit_break_manager=self._breaker_manager,
            adaptive_linger=adaptive_linger,
        )
        self._sensors.bind_gauges(self._pool, self._client)
        self._metadata.bind_metrics(self._sensors, on_evict=self._sensors.remove_topic)

        self._router = RecordRouter(
            metadata=self._metadata,
            accumulator=self._accumulator,
            pool=self._pool,
            clock_ms=self._clock,
            wakeup=self._client.wakeup,
            wakeup_by=self._client.wakeup_by,
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
            callback_errors=self._callback_errors,
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
            adaptive_linger=adaptive_linger,
        )
        if isinstance(self._client, NetworkClient):
            # lz4/zstd batches compressed on a native thread (record.compression_worker); a test's
            # scripted client keeps the Python path, which compresses at a deterministic moment.
            self._accumulator.start_compression_worker(self._client.wakeup_fd())
        self._metrics.add_provider(NodeBufferMetrics(self._sender.buffer_bytes_by_node))
        if client_error_listener is not None:
            self.add_client_error_listener(client_error_listener)
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
            if self._tracing is not None:
                self._tracing.when_inert(self._ungate_send_lane)
        live_producers.add(self)
        for reporter in self._reporters:
            reporter.init(self._metrics, self.client_id)
        log.info("kproducer %s started (bootstrap %s)", self.client_id, ",".join(cfg.bootstrap_servers))
        report_implementation_once(log)  # without its C extensions: a WARNING with the cause, once per process

    def _ungate_send_lane(self) -> None:
        """The tracer provider set makes no spans (kproducer.tracing): the send lane stops checking for one."""
        lane = self._lane
        if lane is not None:
            lane.gate = None

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
            or self._interceptors is not None
            or (self._partitioner is not None and lane_key_hash is None)
            or not (self._key_passthrough and self._value_passthrough)
        ):
            return None
        from kproducer.accumulator.batch import ProducerBatch
        from kproducer.accumulator.deques import PartitionDeque
        from kproducer.network.sockio import GIL_WANTED  # with the Sender's network stack, not at import
        from kproducer.partitioner import BuiltInPartitioner, StickyPartitionInfo
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
                wake_for_new_batch=self._router.wake_for_new_batch,
                none_compression=CompressionType.NONE,
                batch_type=ProducerBatch,
                builder_type=MemoryRecordsBuilder,
                future_type=RecordFuture,
                deque_type=PartitionDeque,
                sticky_type=StickyPartitionInfo,
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
                # The Sender's wait counts itself here when it wants the GIL back (network.sockio):
                # the lane then lets go of it on the caller's thread rather than at the switch interval.
                gil_wanted=GIL_WANTED,
            )
        except (AttributeError, TypeError) as e:  # a class no longer builds on the lane's C types: stay on Python
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
        block: bool = True,
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

        ``block=False`` is for a caller that must never wait, such as an event loop
        (:class:`~kproducer.aio.AsyncProducer` sends so): where the call would wait
        for ``buffer.memory`` it raises :class:`kproducer.errors.MemoryWouldBlock`
        instead, with nothing appended or charged, and the caller sends the record
        again once memory returned (librdkafka's ``produce()`` without
        ``RD_KAFKA_MSG_F_BLOCK``). With ``max.block.ms=0`` the record fails at once
        with BufferExhaustedError either way. A traced send that raised it has started the
        record's span: the exception's ``pending_send`` gives the headers to send again with
        and takes the record's future (:class:`kproducer.tracing.PendingSend`).

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
            return self._tracing.send(
                self, topic, value, key, partition, timestamp, headers, callback, on_delivery, block
            )
        if self._closed or self._forked:
            self._raise_unusable()
        if self._txn is not None:
            self._check_send_in_transaction()
        sent_as: Callable[[Any, Any, Any], None] | None = None
        if callback is not None or on_delivery is not None:
            callback = resolve_callback(callback, on_delivery, topic, key, value, headers)
            # A confluent-kafka style report gives back the bytes sent, not the objects passed.
            sent_as = getattr(callback, "record_serialized", None)
        if self._interceptors is not None:
            topic, value, key, partition, timestamp, headers = self._interceptors.on_send(
                topic, value, key, partition, timestamp, headers
            )
            callback = self._interceptors.wrap_callback(callback)
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
        return self._route(topic, partition, key, value, key_bytes, value_bytes, timestamp, headers, callback, block)

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

    @property
    def fatal_error(self) -> KafkaError | None:
        """The error that made the idempotent or transactional producer fatal (fenced, say), None while it is
        not: every later send() and transactional call raises it until close()."""
        return self._tm.fatal_error if self._tm is not None else None

    def run_sender_once(self) -> None:
        """One loop of the Sender on the calling thread (Java's ``Sender.runOnce``).

        Only for a producer built without its I/O thread (the ``_start_io_thread=False`` seam):
        deterministic tests drive the Sender loop by loop with a scripted client and clock.
        """
        if self._io_thread_started:
            raise IllegalStateError("run_sender_once() is for a producer without its I/O thread; this one runs it")
        self._sender.run_once()

    # ------------------------------------------------------------------ transactional API
    # Java's KafkaProducer transactional methods over the TransactionManager, which the Sender
    # drives; a transactional producer's send() calls _check_send_in_transaction first.
    def _require_transactional(self, operation: str) -> TransactionManager:
        if self._closed or self._forked:
            self._raise_unusable()
        if self._txn is None:
            raise IllegalStateError(
                f"{operation}() needs a transactional producer: set transactional.id in the producer's config"
            )
        return self._txn

    def _check_send_in_transaction(self) -> None:
        """A transactional producer sends only inside a transaction (Java's maybeAddPartition checks)."""
        tm = self._txn
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
            f"send() on the transactional producer {self._transactional_id!r} is only allowed inside a "
            f"transaction; it is in state {state.value}: {ALLOWED_NEXT_CALLS[state]}"
        )

    def _txn_wait(self, result: TransactionalRequestResult, timeout: float | None, metric: str, start_ns: int) -> None:
        self._wakeup()
        wait = self._max_block_ms / 1000.0 if timeout is None else timeout
        try:
            result.wait(wait)
        finally:
            if result.is_completed and self._txn_sensors is not None:
                self._txn_sensors[metric].record(float(time.perf_counter_ns() - start_ns))

    def init_transactions(self, timeout: float | None = None) -> None:
        """Register ``transactional.id`` with its coordinator: fences older producers with the same id
        and completes their open transaction. Call once, before the first transaction.

        ``timeout`` (seconds, default ``max.block.ms``): on KafkaTimeoutError call it again to keep
        waiting for the same initialization.
        """
        tm = self._require_transactional("init_transactions")
        start = time.perf_counter_ns()
        result = tm.initialize_transactions()
        self._txn_wait(result, timeout, "init", start)

    @_traced("begin_transaction")
    def begin_transaction(self) -> None:
        """Open a transaction: records sent until commit or abort belong to it."""
        tm = self._require_transactional("begin_transaction")
        start = time.perf_counter_ns()
        tm.begin_transaction()
        if self._lane is not None:
            self._lane.enabled = True
        if self._txn_sensors is not None:
            self._txn_sensors["begin"].record(float(time.perf_counter_ns() - start))

    def send_offsets_to_transaction(
        self, offsets: Mapping[TopicPartition, int] | Iterable[Any],
        group_metadata: str | GroupMetadata | Any,
        timeout: float | None = None,
    ) -> None:
        """Commit a consumer group's offsets as part of the open transaction (consume-transform-produce).

        ``offsets``: ``{TopicPartition: next offset to consume}``, or confluent-kafka /
        kafka-python TopicPartition objects carrying ``offset`` (the next offset to
        consume, as ``consumer.position()`` gives). ``group_metadata``: a group id, or the
        consumer's group metadata, which also fences zombie members (KIP-447).
        """
        tm = self._require_transactional("send_offsets_to_transaction")
        group = group_metadata_from(group_metadata)
        normalized = normalize_offsets(offsets)
        start = time.perf_counter_ns()
        if not normalized:
            return
        result = tm.send_offsets_to_transaction(normalized, group)
        self._txn_wait(result, timeout, "send_offsets", start)

    @_traced("commit_transaction")
    def commit_transaction(self, timeout: float | None = None) -> None:
        """Send every record of the transaction, wait for acknowledgement, then commit it.

        On KafkaTimeoutError the commit goes on: call commit_transaction() again to wait for it.
        An abortable error (a record failed) raises here: call abort_transaction() next.
        """
        self._end_transaction("commit_transaction", timeout, commit=True)

    @_traced("abort_transaction")
    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort the transaction: records not yet sent fail with TransactionAbortedError; those
        already written are hidden from read_committed consumers by the abort marker."""
        self._end_transaction("abort_transaction", timeout, commit=False)

    def _end_transaction(self, operation: str, timeout: float | None, *, commit: bool) -> None:
        """commit_transaction() / abort_transaction(): the transaction's parked records first, then EndTxn."""
        tm = self._require_transactional(operation)
        start = time.perf_counter_ns()
        self._await_parked_for_transaction(operation, timeout)
        result = tm.begin_commit() if commit else tm.begin_abort()
        if self._lane is not None:
            self._lane.enabled = False
        self._txn_wait(result, timeout, "commit" if commit else "abort", start)

    def _await_parked_for_transaction(self, operation: str, timeout: float | None) -> None:
        """Records sent in the transaction that still wait for their topic's metadata belong to it.

        send() does not block on metadata, so such a record is not in a batch yet; the
        transaction may end only once it is (or once it failed at ``max.block.ms``), as
        Java's blocking send() guarantees. Until then the state is unchanged, so a
        KafkaTimeoutError here can be retried by calling the same method again.
        """
        router = self._router
        if not router.has_parked():
            return
        self._wakeup()
        wait = self._max_block_ms / 1000.0 if timeout is None else timeout
        if not router.await_unparked(wait):
            raise KafkaTimeoutError(
                f"{operation}(): {router.parked_count} record(s) of this transaction still wait for their "
                f"topic's metadata after {wait:g} s; call {operation}() again to keep waiting"
            )

    @contextmanager
    def transaction(self, timeout: float | None = None) -> Iterator[Producer]:
        """``with self.transaction():`` begins, commits on success and aborts on an exception.

        The exception is re-raised after the abort; a failed commit raises its error.
        """
        self.begin_transaction()
        try:
            yield self
        except BaseException:
            if self.can_abort_transaction():
                try:
                    self.abort_transaction(timeout)
                except KafkaError:
                    log.warning("aborting the transaction after an error failed", exc_info=True)
            raise
        self.commit_transaction(timeout)

    def can_abort_transaction(self) -> bool:
        """Whether the transaction can be aborted now: it is open, or failed with an abortable error, and the
        producer is not fenced. ``transaction()`` checks it before aborting after an exception."""
        tm = self._txn
        return tm is not None and tm.fatal_error is None and tm.state in (
            TransactionState.IN_TRANSACTION,
            TransactionState.ABORTABLE_ERROR,
            TransactionState.ABORTING_TRANSACTION,
        )

    def _on_transaction_state_change(self, source: TransactionState, target: TransactionState) -> None:
        if target is not TransactionState.IN_TRANSACTION and self._lane is not None:
            self._lane.enabled = False

    # ------------------------------------------------------------------ bulk calls
    # Checked on the caller's thread, then handed to the same routing step as send()
    # (RecordRouter.route_many) a range of rows at a time, without a Python object per record; the
    # column readers and the bulk future are in kproducer.bulk. Interceptors, a custom partitioner
    # and serializers must see each record, so then the rows go through send() one by one.
    def send_batch(
        self, topic: str,
        values: Sequence[bytes | bytearray | memoryview | None],
        keys: Sequence[bytes | bytearray | memoryview | None] | None = None,
        *,
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Iterable[tuple[str, bytes | None]] | None = None,
        callback: Callback | None = None,
        on_delivery: OnDelivery | None = None,
    ) -> BulkFuture:
        """Queue many records of one topic at once, without a Python object per record (see :mod:`kproducer.bulk`).

        ``values``: a list or tuple of ``bytes``, ``bytearray``, ``memoryview`` or
        ``None`` (serializers are applied when configured; without them other types
        are refused). ``keys``: ``None``, or a sequence of the same types and the
        same length as ``values``. ``partition``, ``timestamp``: as for :meth:`send`,
        applied to every record. ``headers``: one list of ``(str, bytes | str | None)``
        pairs (or a dict) put on every record.
        ``callback(metadata, exception)`` or ``on_delivery(err, msg)``: as for
        :meth:`send`, called once per record on the I/O thread.

        Returns one BulkFuture resolving to the records' RecordMetadata, in order. The
        rows take the same routing step as :meth:`send`.
        """
        from kproducer.bulk import payload_bytes
        tracing = self._tracing
        if tracing is not None and tracing.active():
            # One span for the call (kproducer.tracing); its context goes into the rows' headers when asked.
            rows = len(values) if isinstance(values, Sequence) else 0
            return tracing.send_bulk(
                topic if type(topic) is str else None, rows, payload_bytes(values) + payload_bytes(keys), headers,
                lambda traced: self._send_batch(topic, values, keys, partition, timestamp, traced, callback, on_delivery),
            )
        return self._send_batch(topic, values, keys, partition, timestamp, headers, callback, on_delivery)

    def _send_batch(
        self, topic: str,
        values: Sequence[bytes | bytearray | memoryview | None],
        keys: Sequence[bytes | bytearray | memoryview | None] | None,
        partition: int | None,
        timestamp: int | None,
        headers: Iterable[tuple[str, bytes | None]] | None,
        callback: Callback | None,
        on_delivery: OnDelivery | None,
    ) -> BulkFuture:
        """send_batch() once its span, if any, is current."""
        from kproducer.bulk import BulkFuture, encoded_headers, fail_bulk
        self._check_usable()
        if type(topic) is not str:
            raise TypeError(f"topic must be a str, got {type(topic).__name__}")
        if isinstance(values, (str, bytes, bytearray, memoryview)) or not isinstance(values, Sequence):
            raise TypeError(f"values must be a sequence (list or tuple) of bytes, got {type(values).__name__}")
        if keys is not None:
            if isinstance(keys, (str, bytes, bytearray, memoryview)) or not isinstance(keys, Sequence):
                raise TypeError(f"keys must be a sequence of bytes (or None), got {type(keys).__name__}")
            if len(keys) != len(values):
                raise ValueError(
                    f"keys has {len(keys)} entries but values has {len(values)}; they must be the same length"
                )
        headers, partition, timestamp = self._check_common(headers, partition, timestamp)
        n = len(values)
        cb = None
        if callback is not None or on_delivery is not None:
            cb = resolve_bulk_callback(callback, on_delivery, topic, keys, values, headers)
        if self._needs_per_record():
            rows = list(zip(keys or [None] * n, values, strict=True))
            return self._send_each(topic, rows, partition, timestamp, headers, cb)
        fut = BulkFuture(topic, n)
        if not isinstance(values, (list, tuple)):
            values = list(values)
        if keys is not None and not isinstance(keys, (list, tuple)):
            keys = list(keys)
        try:
            encoded = encoded_headers(headers)
            wake = self._router.route_many(topic, n, values, keys, False, partition, timestamp, encoded, cb, fut, fut)
        except ProducerClosedError:
            raise
        except KafkaError as e:
            with attributed_to(self._callback_errors):
                return fail_bulk(fut, e, cb)
        if wake:
            self._wakeup()
        return fut

    def send_arrow(
        self, table_or_batch: Any,
        topic: str | None = None,
        *,
        value_column: str = "value",
        key_column: str | None = "key",
        topic_column: str = "topic",
        partition: int | None = None,
        timestamp: int | None = None,
        headers: Iterable[tuple[str, bytes | None]] | None = None,
        callback: Callback | None = None,
        on_delivery: OnDelivery | None = None,
        value_format: str | AvroFormat = "bytes",
        key_format: str | AvroFormat = "bytes",
    ) -> BulkFuture:
        """Queue the rows of a pyarrow Table or RecordBatch, encoded straight from the column buffers.

        ``value_column`` (and ``key_column`` when the table has it; ``None``: no keys)
        must be ``binary``, ``string``, ``large_binary`` or ``large_string`` columns;
        a null is a ``None`` value or key. ``topic``: every row's topic, or ``None`` to
        read each row's topic from the string column ``topic_column``.
        ``partition``, ``timestamp``, ``headers``: as for :meth:`send_batch`.
        ``callback(metadata, exception)`` or ``on_delivery(err, msg)``: as for
        :meth:`send`, called once per row on the I/O thread.
        ``value_format``/``key_format``: ``"bytes"`` (the column's bytes as they are), or a
        :class:`kproducer.avro.AvroFormat`: the column (a struct is a record) is written as
        Schema Registry framed Avro; a row that cannot be written fails on its own with an
        :class:`~kproducer.avro.AvroRecordError` naming the row, the field and the rule.

        Returns one BulkFuture resolving to the rows' RecordMetadata, in row order.
        """
        from kproducer.bulk import arrow_bytes
        tracing = self._tracing
        if tracing is not None and tracing.active():
            # One span for the call (kproducer.tracing); its context goes into the rows' headers when asked.
            return tracing.send_bulk(
                topic, int(getattr(table_or_batch, "num_rows", 0)),
                arrow_bytes(table_or_batch, value_column) + arrow_bytes(table_or_batch, key_column), headers,
                lambda traced: self._send_arrow_call(
                    table_or_batch, topic, value_column, key_column, topic_column, partition, timestamp, traced,
                    callback, on_delivery, value_format, key_format,
                ),
            )
        return self._send_arrow_call(
            table_or_batch, topic, value_column, key_column, topic_column, partition, timestamp, headers,
            callback, on_delivery, value_format, key_format,
        )

    def _send_arrow_call(
        self, table_or_batch: Any,
        topic: str | None,
        value_column: str,
        key_column: str | None,
        topic_column: str,
        partition: int | None,
        timestamp: int | None,
        headers: Iterable[tuple[str, bytes | None]] | None,
        callback: Callback | None,
        on_delivery: OnDelivery | None,
        value_format: str | AvroFormat,
        key_format: str | AvroFormat,
    ) -> BulkFuture:
        """send_arrow() once its span, if any, is current."""
        from kproducer.bulk import arrow_column_or_none, check_formats
        self._check_usable()

        formats = check_formats(value_format, key_format)
        headers, partition, timestamp = self._check_common(headers, partition, timestamp)
        data = table_or_batch
        cb = None
        if callback is not None or on_delivery is not None:
            cb = resolve_bulk_callback(
                callback, on_delivery, topic or "", arrow_column_or_none(data, key_column),
                arrow_column_or_none(data, value_column), headers,
            )
        return self._send_arrow(
            data, topic, value_column, key_column, topic_column, partition, timestamp, headers, cb, formats
        )

    def _send_arrow(
        self, data: Any,
        topic: str | None,
        value_column: str,
        key_column: str | None,
        topic_column: str,
        partition: int | None,
        timestamp: int | None,
        headers: Any,
        on_delivery: Callback | None,
        formats: tuple[AvroFormat | None, AvroFormat | None] | None = None,
        row_numbers: Sequence[int] | None = None,
    ) -> BulkFuture:
        """send_arrow() with its per-row callback resolved (``row_numbers``: the caller's, for a topic's subset)."""
        import pyarrow as pa

        from kproducer.bulk import BulkFuture, OffsetSink, encoded_headers, fail_bulk
        from kproducer.record.arrow_column import arrow_column as _arrow_column

        if formats is not None and topic is not None:
            return self._send_arrow_encoded(
                data, topic, value_column, key_column, topic_column, partition, timestamp, headers,
                on_delivery, formats, row_numbers,
            )

        if isinstance(data, pa.RecordBatch):
            batches = [data]
            schema = data.schema
        elif isinstance(data, pa.Table):
            batches = data.to_batches()
            schema = data.schema
        else:
            raise TypeError(f"send_arrow takes a pyarrow Table or RecordBatch, got {type(data).__name__}")
        names = schema.names
        if value_column not in names:
            raise ValueError(f"value column {value_column!r} not in the Arrow schema (columns: {', '.join(names)})")
        has_keys = key_column is not None and key_column in names
        n = data.num_rows
        if topic is None:
            if topic_column not in names:
                raise ValueError(
                    f"send_arrow needs topic=... or a {topic_column!r} string column (columns: {', '.join(names)})"
                )
            return self._send_arrow_by_topic(
                data, value_column, key_column if has_keys else None, topic_column, partition, timestamp,
                headers, on_delivery, formats,
            )
        if type(topic) is not str:
            raise TypeError(f"topic must be a str, got {type(topic).__name__}")
        for batch in batches:
            _arrow_column(batch.column(value_column), value_column)
            if has_keys:
                _arrow_column(batch.column(key_column), key_column)  # type: ignore[arg-type]
        if self._needs_per_record():
            vals = data.column(value_column).to_pylist()
            ks = data.column(key_column).to_pylist() if has_keys else [None] * n
            return self._send_each(topic, list(zip(ks, vals, strict=True)), partition, timestamp, headers, on_delivery)
        fut = BulkFuture(topic, n)
        wake = False
        row = 0
        route_many = self._router.route_many
        try:
            encoded = encoded_headers(headers)
            for batch in batches:
                m = batch.num_rows
                values = _arrow_column(batch.column(value_column), value_column)
                keys = _arrow_column(batch.column(key_column), key_column) if has_keys else None  # type: ignore[arg-type]
                sink = fut if not row else OffsetSink(fut, row)
                # Rows of a chunk are numbered from 0: per-row delivery reports look them up from the call's row.
                at_offset = getattr(on_delivery, "at_offset", None)
                chunk_cb = on_delivery if at_offset is None or not row else at_offset(row)
                wake |= route_many(topic, m, values, keys, True, partition, timestamp, encoded, chunk_cb, sink, fut)
                row += m
        except ProducerClosedError:
            raise
        except KafkaError as e:
            with attributed_to(self._callback_errors):
                return fail_bulk(fut, e, on_delivery)
        finally:
            if wake:
                self._wakeup()
        return fut

    def _send_arrow_by_topic(
        self, data: Any,
        value_column: str,
        key_column: str | None,
        topic_column: str,
        partition: int | None,
        timestamp: int | None,
        headers: Any,
        on_delivery: Callback | None,
        formats: tuple[AvroFormat | None, AvroFormat | None] | None = None,
    ) -> BulkFuture:
        """One bulk call per distinct topic (rows keep their order within a topic); one future over all rows."""
        import pyarrow as pa
        import pyarrow.compute as pc

        from kproducer.bulk import BulkFuture

        table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
        topics_col = table.column(topic_column)
        if not (pa.types.is_string(topics_col.type) or pa.types.is_large_string(topics_col.type)):
            raise TypeError(f"topic column {topic_column!r} must be a string column, got {topics_col.type}")
        if topics_col.null_count:
            raise ValueError(f"topic column {topic_column!r} has {topics_col.null_count} null rows; every row needs a topic")
        outer = BulkFuture("<several>", table.num_rows)
        for t in pc.unique(topics_col).to_pylist():
            rows = pc.indices_nonzero(pc.equal(topics_col, t))
            row_list = rows.to_pylist()
            sub = table.take(rows)
            for_columns = getattr(on_delivery, "for_columns", None)  # per-row reports follow the rows to `sub`
            inner = self._send_arrow(
                sub, t, value_column, key_column, topic_column, partition, timestamp, headers,
                on_delivery if for_columns is None else for_columns(
                    t, sub.column(key_column) if key_column is not None else None, sub.column(value_column)
                ),
                formats,
                row_list,
            )
            outer.appended(len(rows))
            inner.add_done_callback(partial(outer.forward_from, row_list, t))
        return outer

    def _send_arrow_encoded(
        self, data: Any,
        topic: str,
        value_column: str,
        key_column: str | None,
        topic_column: str,
        partition: int | None,
        timestamp: int | None,
        headers: Any,
        on_delivery: Callback | None,
        formats: tuple[AvroFormat | None, AvroFormat | None],
        row_numbers: Sequence[int] | None = None,
    ) -> BulkFuture:
        """send_arrow() of one topic's rows whose value/key columns are written as Avro first.

        The registry is asked (once per format and Arrow type) before any row is routed:
        a registry that is down or refuses the schema raises here. Rows that cannot be
        written fail on their own; the others go as one bulk call.
        """
        import pyarrow as pa

        from kproducer.avro.table import encode_table
        from kproducer.bulk import BulkFuture

        if not isinstance(data, (pa.Table, pa.RecordBatch)):
            raise TypeError(f"send_arrow takes a pyarrow Table or RecordBatch, got {type(data).__name__}")
        names = data.schema.names
        if value_column not in names:
            raise ValueError(f"value column {value_column!r} not in the Arrow schema (columns: {', '.join(names)})")
        keys = key_column if key_column is not None and key_column in names else None
        if formats[1] is not None and keys is None:
            raise ValueError(f"key_format is Avro but the table has no key column {key_column!r}")
        encoded = encode_table(data, topic, value_column, keys, formats[0], formats[1], row_numbers)
        table = encoded.table
        for_columns = getattr(on_delivery, "for_columns", None)  # per-row reports show the encoded bytes
        cb = on_delivery if for_columns is None else for_columns(
            topic, table.column(keys) if keys is not None else None, table.column(value_column)
        )
        inner = self._send_arrow(table, topic, value_column, keys, topic_column, partition, timestamp, headers, cb)
        if encoded.rows is None:
            return inner
        outer = BulkFuture(topic, data.num_rows)
        outer.appended(len(encoded.rows))
        inner.add_done_callback(partial(outer.forward_from, encoded.rows, topic))
        outer.fail_rows(encoded.errors, topic)
        if on_delivery is not None:
            for _row, err in encoded.errors:
                try:
                    on_delivery(None, err)
                except Exception:
                    log.exception("delivery callback raised")
        return outer

    def _needs_per_record(self) -> bool:
        """Interceptors, custom partitioners and serializers see each record: bulk calls then go through send()."""
        return (
            self._interceptors is not None
            or self._partitioner is not None
            or not (self._key_passthrough and self._value_passthrough)
        )

    def _send_each(
        self, topic: str,
        rows: list[tuple[Any, Any]],
        partition: int | None,
        timestamp: int | None,
        headers: Any,
        on_delivery: Callback | None,
    ) -> BulkFuture:
        from kproducer.bulk import BulkFuture
        fut = BulkFuture(topic, len(rows))
        hdrs = list(headers) if headers else None
        for_row = getattr(on_delivery, "for_row", None)  # per-row delivery reports (kproducer.delivery)
        for row, (key, value) in enumerate(rows):
            cb = on_delivery if for_row is None else for_row(row)
            rf = self.send(topic, value, key, partition=partition, timestamp=timestamp, headers=hdrs, callback=cb)
            fut.follow(row, rf)
        return fut

    def _check_common(
        self, headers: Any, partition: Any, timestamp: Any
    ) -> tuple[Any, int | None, int | None]:
        """The bulk calls' per-call arguments, checked as send() checks them."""
        if headers is not None:
            headers = check_headers(headers)
        if partition is not None:
            check_partition(partition)
        if timestamp is not None:
            check_timestamp(timestamp, MAX_TIMESTAMP, self._timestamp_seconds_warning())
        return headers, partition, timestamp

    # ------------------------------------------------------------------ flush, purge, close
    # close() flushes within its timeout, then fails what is left, saying at WARNING what it still
    # waits for. At interpreter exit a producer still holding records flushes them briefly and says
    # so (its I/O thread is a daemon, as Java's network thread is); in a forked child every
    # producer of the parent refuses use instead of hanging (the hooks at the end of this module).
    def flush(self, timeout: float | None = None) -> int:
        """Send everything buffered now and wait until it completes; returns how many records have not completed.

        A record completes when it is delivered *or* fails, so the result is ``0``
        whenever the wait finished, including when records failed; it is non-zero
        only when ``timeout`` (seconds) ran out first. This is confluent-kafka's
        convention (the length of the queue); Java's ``flush()`` returns nothing.
        A failed record's exception is on its future and its delivery callback, and
        it is logged at WARNING; :meth:`take_failed_count` gives the number of
        records that failed since its previous call::

            self.flush()
            if self.take_failed_count():
                ...  # some records were not delivered

        Calling it from a delivery callback would wait on the thread that runs
        callbacks, so that raises instead of deadlocking.
        """
        if self._forked:
            self._raise_unusable()
        if threading.current_thread() is self._io_thread:
            raise IllegalStateError(
                "flush() called from a delivery callback would deadlock: it waits for the records the I/O thread "
                "completes, and callbacks run on that thread"
            )
        self._accumulator.begin_flush()
        self._wakeup()
        try:
            # Records waiting for metadata first reach a batch (or fail at max.block.ms).
            deadline = None if timeout is None else time.monotonic() + timeout
            if not self._router.await_unparked(timeout):
                return self._router.pending_count()
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            self._accumulator.await_flush_completion(remaining)
        finally:
            self._accumulator.end_flush()
        return self._router.pending_count()

    def purge(self) -> None:
        """Fail every record not yet sent with RecordPurgedError: those waiting for metadata and in batches not drained.

        Records already in a produce request (in flight) are not recalled: they end
        with their real outcome. Each purged record's future and callback get the
        error, as librdkafka's ``rd_kafka_purge()`` reports ``_PURGE_QUEUE``.
        """
        if self._closed or self._forked:
            self._raise_unusable()
        error = RecordPurgedError("purged from the producer's queue before it was sent")
        self._router.fail_all(error)
        with attributed_to(self._callback_errors):  # the purged batches' callbacks run on this thread
            self._accumulator.abort_undrained_batches(error)
        self._wakeup()

    def take_failed_count(self) -> int:
        """The number of records that failed since the previous call (or since the producer started).

        Every failure counts once: records whose future or callback received an
        exception, whether at ``send()`` (an illegal topic name, a record too large)
        or later (no metadata within ``max.block.ms``, retries exhausted,
        ``delivery.timeout.ms``, a forced close).
        """
        return self._failure_log.take_failed_count()

    def add_client_error_listener(self, listener: ClientErrorListener) -> None:
        """Call ``listener(event)`` for client-wide errors, not tied to one record (librdkafka's ``error_cb``).

        ``event`` is a :class:`kproducer.network.client_error_event.ClientErrorEvent`: a broker
        became unreachable (``TRANSPORT``), its name does not resolve (``RESOLVE``), it refused the
        client's TLS or SASL (``AUTHENTICATION``), or no broker is connected or connecting any more
        (``ALL_BROKERS_DOWN``). A broker is reported when it goes down, not again for each failed
        reconnect, the same moments as the WARNING lines on the ``kproducer.network.client``
        logger; ALL_BROKERS_DOWN once, until a connection is ready again. The listener runs on the
        I/O thread: it must be quick and must not block (hand the event to your own thread); an
        exception it raises is logged and ignored. Pass ``client_error_listener=`` to the
        constructor to hear of the very first connection attempt. A producer built on a test's
        scripted client has no connections to report on: the listener is never called.
        """
        if not callable(listener):
            raise TypeError(f"a client error listener must be callable, got {type(listener).__name__}")
        from kproducer.network.client import NetworkClient

        if isinstance(self._client, NetworkClient):
            self._client.add_client_error_listener(listener)

    def remove_client_error_listener(self, listener: ClientErrorListener) -> None:
        """Stop calling ``listener`` (added by :meth:`add_client_error_listener`)."""
        from kproducer.network.client import NetworkClient

        if isinstance(self._client, NetworkClient):
            self._client.remove_client_error_listener(listener)

    def close(self, timeout: float | None = None) -> None:
        """Flush within ``timeout`` seconds (None: wait as long as it takes), then fail what is left.

        Called from a delivery callback it cannot wait for the I/O thread it runs
        on: ``close(0)`` closes forcefully without waiting, as Java's ``close()``
        does there; any other timeout raises IllegalStateError instead of hanging.
        """
        if threading.current_thread() is self._io_thread and timeout != 0:
            raise IllegalStateError(
                "close() called from a delivery callback would deadlock: it waits for the I/O thread the callback "
                "runs on; call close(0) there to close without waiting (pending records fail), or close on another thread"
            )
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
            if self._lane is not None:
                self._lane.enabled = False  # later sends take the Python path, which raises
        live_producers.discard(self)
        if self._forked:
            return
        if threading.current_thread() is self._io_thread:
            log.warning("close() called from a delivery callback: closing without waiting for pending records")
            self._sender.force_close()
            return
        if self._breaker_manager is not None:
            # Closing drains everything: muted partitions get their records tried too.
            self._breaker_manager.close()
        if self._router.parked:
            # Records still waiting for metadata get it (or fail at max.block.ms) before the drain.
            start = time.monotonic()
            self._router.await_unparked(timeout)
            if timeout is not None:
                timeout = max(0.0, timeout - (time.monotonic() - start))
        self._sender.initiate_close()
        if not self._io_thread_started:
            # No I/O thread (a test drives the Sender): its closing work runs here. close(0) waits for
            # nothing, as with the thread (and Java's close(Duration.ZERO)): what is left fails now.
            if timeout is not None and timeout <= 0:
                self._sender.force_close()
            self._sender.run()
        self._join_io_thread(timeout)
        if self._io_thread.is_alive():
            log.warning("producer %s did not drain within %.1fs: failing the remaining records", self.client_id, timeout or 0)
            self._sender.force_close()
            self._io_thread.join(5.0)
        self._pool.close()
        for obj in (self._key_serializer, self._value_serializer, self._partitioner, *(self._interceptors or ())):
            close = getattr(obj, "close", None)
            if callable(close):
                try:
                    close()
                except Exception:
                    log.exception("error closing %r", obj)
        if self._breaker is not None:
            self._breaker.close()
        self._callback_errors.closed()
        for reporter in self._reporters:
            try:
                reporter.close()
            except Exception:
                log.exception("error closing metrics reporter %r", reporter)

    def _join_io_thread(self, timeout: float | None) -> None:
        """Wait for the I/O thread to drain; past a few seconds, say at WARNING what it is waiting for."""
        start = time.monotonic()
        deadline = None if timeout is None else start + timeout
        report_at = start + _CLOSE_REPORT_AFTER_S
        while self._io_thread.is_alive():
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return
            wait = report_at - now if deadline is None else min(report_at, deadline) - now
            self._io_thread.join(max(wait, 0.0))
            now = time.monotonic()
            if self._io_thread.is_alive() and now >= report_at:
                log.warning("close() has waited %.0f s: %s", now - start, self._describe_pending(timeout))
                report_at = now + _CLOSE_REPORT_EVERY_S

    def _describe_pending(self, timeout: float | None) -> str:
        """What is still undelivered and until when close() waits for it, for the close() WARNING."""
        batches = [b for b in self._accumulator.incomplete_batches() if not b.result.completed]
        records = sum(b.record_count for b in batches)
        tps = sorted({str(b.topic_partition) for b in batches})
        shown = ", ".join(tps[:5]) + (f" and {len(tps) - 5} more" if len(tps) > 5 else "")
        oldest_s = (self._clock() - min(b.created_ms for b in batches)) / 1000.0 if batches else 0.0
        bound = (
            f"close(timeout={timeout:g}) fails them after that"
            if timeout is not None
            else f"they fail after delivery.timeout.ms={self.config.delivery_timeout_ms} ms; "
            "pass close(timeout=seconds) to bound the wait"
        )
        return (
            f"{records} {'record' if records == 1 else 'records'} in {len(batches)} "
            f"{'batch' if len(batches) == 1 else 'batches'} to {shown or 'no partition'} are undelivered "
            f"(oldest {oldest_s:.1f} s); {bound}; {self._metadata.describe_reachability()}"
        )

    # ------------------------------------------------------------------ the process-wide hooks' work
    def _after_fork(self) -> None:
        """In a forked child: the Sender thread does not exist here, so any use must fail loudly, never hang."""
        self._forked = True
        if self._lane is not None:
            self._lane.enabled = False

    def _flush_at_exit(self) -> None:
        """At interpreter exit, flush briefly what this producer still holds, and say so at WARNING.

        The I/O thread is a daemon thread, so records left in a producer that was not
        flushed or closed would vanish with the interpreter (as with the Java client,
        whose network thread is a daemon too). Losing them silently is the worst outcome;
        flushing without a bound could hang exit for ``delivery.timeout.ms`` when the
        cluster is down. So: one WARNING naming the count and the fix, a flush bounded by
        ``EXIT_FLUSH_TIMEOUT_S`` (enough for lingering records to a reachable cluster),
        and a second WARNING with what was lost if that was not enough.
        """
        if self._closed or self._forked or self._pid != os.getpid():
            return
        pending = self._router.pending_count()
        if not pending:
            return
        warn_data_loss(
            log,
            f"producer {self.client_id}: the interpreter is exiting with {pending} undelivered records; "
            f"flushing them for up to {EXIT_FLUSH_TIMEOUT_S:g} s. Call flush() or close() before exiting, "
            "or use the producer as a context manager ('with Producer(...) as producer:')",
        )
        failed_before = self._failure_log.failed_total
        left = self.flush(EXIT_FLUSH_TIMEOUT_S)
        failed = self._failure_log.failed_total - failed_before
        if left:
            warn_data_loss(log, f"producer {self.client_id}: {left} records were not delivered before exit and are lost")
        elif failed:
            warn_data_loss(log, f"producer {self.client_id}: flushed at exit, but {failed} of the records failed")
        else:
            log.warning("producer %s: flushed at exit; all %d records were delivered", self.client_id, pending)

    def _emit_held_failures(self) -> None:
        """Failure summaries still held back by the rate limit: at exit, the last chance to say them."""
        self._failure_log.emit_all(self._clock())

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

    @property
    def closed(self) -> bool:
        """``close()`` was called (sends raise ProducerClosedError from then on)."""
        return self._closed

    def set_memory_freed_listener(self, listener: Callable[[], None] | None) -> None:
        """Call ``listener()`` whenever memory of ``buffer.memory`` returns (on the I/O thread) and on close; None: stop.

        The asyncio facade uses it to wake its sends that wait for memory, without a blocked thread.
        """
        self._pool.set_free_listener(listener)

    # The asyncio facade's wait for memory: a coroutine waits where a thread would block in the pool.
    def add_memory_waiter(self, delta: int) -> None:
        """Count (``+1``) or uncount (``-1``) a sender that waits for ``buffer.memory`` outside the pool.

        While any does, ready() sends batches without lingering, as for a blocked thread
        (Java's ``RecordAccumulator`` asks ``BufferPool.queued()``); the Sender is woken to see it.
        """
        self._pool.add_external_waiter(delta)
        if delta > 0:
            self._wakeup()

    def memory_available_now(self, size: int) -> bool:
        """Whether ``size`` bytes of ``buffer.memory`` could be had without waiting (and the pool is open)."""
        return not self._pool.closed and self._pool.can_allocate_now(size)

    @property
    def accepts_sends(self) -> bool:
        """Neither this producer nor its buffer pool is closed."""
        return not (self._closed or self._pool.closed)

    @property
    def max_block_ms(self) -> int:
        """``max.block.ms``: how long a send may wait for metadata or memory."""
        return self._max_block_ms

    def fail_buffer_exhausted(self, topic: str, partition: int | None, callback: Any) -> RecordFuture:
        """A record that waited ``max.block.ms`` for memory elsewhere: failed through its future and callback.

        The same BufferExhaustedError a blocked ``send()`` gets (Java's ``FutureFailure``).
        """
        error = BufferExhaustedError(
            f"Failed to allocate memory within the configured max blocking time {self._max_block_ms} ms "
            f"(buffer.memory={self._buffer_memory} is full)"
        )
        return self._router.fail_now(topic, partition, error, callback)

    def metrics(self) -> dict[str, float]:
        """Current metric values, by Java metric name (``record-send-rate``, ``batch-size-avg``...)."""
        return self._metrics.snapshot()

    @property
    def metric_reporters(self) -> tuple[Any, ...]:
        """The reporters ``metric.reporters`` created, in order (``PrometheusReporter.http_port``: the port it serves)."""
        return tuple(self._reporters)

    # ------------------------------------------------------------------ process-wide hooks
    @classmethod
    def _after_fork_in_child(cls) -> None:
        """In a forked child, every producer inherited from the parent stops being usable (``_after_fork``)."""
        for p in list(live_producers):
            p._after_fork()

    @classmethod
    def _at_exit(cls) -> None:
        """Every live producer flushes briefly what it still holds (see ``_flush_at_exit``)."""
        for p in list(live_producers):
            try:
                p._flush_at_exit()
            except Exception:  # never turn an exit into a traceback
                log.debug("exit-time flush of %s failed", p.client_id, exc_info=True)
        for p in list(live_producers):
            p._emit_held_failures()

    def close_keeping_transaction_open(self, timeout: float | None = 30.0) -> None:
        """Close a flushed transactional producer without ending its open transaction.

        ``close()`` aborts an open transaction, as Java's does. In a two-phase commit the
        transaction is someone else's to end: a coordinator commits or aborts it later under
        the same ``transactional.id`` (KIP-939's "prepared" transactions, or the exactly-once
        Spark sink, whose driver commits what its tasks wrote). Here the I/O thread stops as
        a forced close stops it, which ends no transaction; records not yet delivered fail
        with the close, so flush first.
        """
        self._sender.force_close()
        self.close(timeout=timeout)

    @property
    def circuit_break_manager(self) -> CircuitBreakManager | None:
        """The partition circuit breaker's mute state (KIP-693); None when no breaker is configured."""
        return self._breaker_manager


# ---------------------------------------------------------------------- process-wide hooks
os.register_at_fork(after_in_child=Producer._after_fork_in_child)
atexit.register(Producer._at_exit)


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
