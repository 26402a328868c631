"""OpenTelemetry tracing of the producer: a span per record sent, per bulk call, per transaction step.

The spans follow OpenTelemetry's semantic conventions for messaging systems and their
Kafka page (``messaging.system=kafka``, ``messaging.destination.name``,
``messaging.destination.partition.id``, ``messaging.kafka.message.key``,
``messaging.kafka.offset``, ``messaging.client.id``, ``messaging.message.body.size``,
``error.type``): a span of kind PRODUCER named ``send <topic>``, parented on the caller's
current context (contextvars, so each asyncio task has its own), whose context is written
into the record's headers by the globally configured propagator (W3C ``traceparent`` by
default), and which ends when the record is acknowledged (partition and offset) or fails
(error status, ``error.type``, the exception as an event). The span ends through the
record future's done-callback, the same completion every other waiter of the record uses.

Only ``opentelemetry-api`` is needed (``kproducer[opentelemetry]``); the application
brings the SDK and its exporters, as OpenTelemetry asks of libraries. Tracing takes
effect once the application has set a tracer provider and ``tracing.enabled`` is true
(the default). Until then a send pays one check: whether the API's global provider is
still unset. The C send lane makes the same check in C (the ``gate`` it is given), so
with no provider the lane keeps every call it takes. The API sets its global provider
once (``set_tracer_provider`` refuses a second), so a provider seen stays for the
process's life. A provider whose tracers make no spans (``NoOpTracerProvider``, the SDK's
with ``OTEL_SDK_DISABLED=true``) counts as none: the first send that sees it sets the
lane's gate aside (:meth:`ProducerTracing.when_inert`), and no span or header is made.

See docs/operability.md for what the spans look like and how a service uses them.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from functools import partial
from typing import TYPE_CHECKING, Any

from kproducer._version import __version__
from kproducer.errors import MemoryWouldBlock

if TYPE_CHECKING:
    from kproducer.accumulator import RecordFuture
    from kproducer.bulk import BulkFuture
    from kproducer.producer import Producer

__all__ = ["GATE_KEY", "PendingSend", "ProducerTracing", "TracedHeaders"]

log = logging.getLogger(__name__)

#: The environment variable naming a tracer provider for the API to load (opentelemetry.environment_variables).
OTEL_PYTHON_TRACER_PROVIDER = "OTEL_PYTHON_TRACER_PROVIDER"

#: The name, in ``opentelemetry.trace``'s namespace, of the global tracer provider (None until the
#: application sets one). The API's own ProxyTracer reads the same variable to learn that a
#: provider was set; reading it is the cheapest test there is, and the C send lane makes it too.
GATE_KEY = "_TRACER_PROVIDER"

# Attribute names of OpenTelemetry's semantic conventions (messaging, Kafka, errors). Written out
# rather than imported: opentelemetry-semantic-conventions is not a dependency of the API.
SYSTEM = "messaging.system"
OPERATION_NAME = "messaging.operation.name"
OPERATION_TYPE = "messaging.operation.type"
DESTINATION = "messaging.destination.name"
PARTITION = "messaging.destination.partition.id"
CLIENT_ID = "messaging.client.id"
KEY = "messaging.kafka.message.key"
TOMBSTONE = "messaging.kafka.message.tombstone"
OFFSET = "messaging.kafka.offset"
BODY_SIZE = "messaging.message.body.size"
BATCH_COUNT = "messaging.batch.message_count"
ERROR_TYPE = "error.type"
# kproducer's own, where the conventions have no name: a bulk call's partitions and bytes,
# its failed rows, and the transactional id of a transaction step.
BULK_PARTITIONS = "kproducer.partitions"
BULK_BYTES = "kproducer.batch.bytes"
BULK_FAILED = "kproducer.batch.failed_count"
TRANSACTIONAL_ID = "kproducer.transactional_id"
PRODUCER_ID = "kproducer.producer_id"
PRODUCER_EPOCH = "kproducer.producer_epoch"


class TracedHeaders(list[tuple[str, "bytes | None"]]):
    """A record's headers with the trace context already injected: the send they reach is not traced again."""

    __slots__ = ()


def _error_type(error: BaseException) -> str:
    cls = type(error)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def _key_text(key: Any) -> str | None:
    """The key as the conventions want it: its string form when it has an unambiguous one."""
    if type(key) is str:
        return key
    if isinstance(key, bytes | bytearray | memoryview):
        try:
            return bytes(key).decode("utf-8")
        except UnicodeDecodeError:
            return None
    if type(key) is int:
        return str(key)
    return None


def _body_size(value: Any) -> int | None:
    if value is None:
        return 0
    if isinstance(value, bytes | bytearray):
        return len(value)
    if isinstance(value, memoryview):
        return value.nbytes
    return None


class PendingSend:
    """A traced ``send(..., block=False)`` that raised MemoryWouldBlock: its span, started, not ended.

    Given as the exception's ``pending_send``. The caller sends the record again with
    ``headers`` (the record's headers with the span's context; a send given them makes no
    span of its own), then hands the record's future to :meth:`sent`, or the error that ended
    its attempts to :meth:`failed`: the record has one span, from its first attempt (the wait
    for memory included) to its outcome, as a send that blocked for memory has.
    """

    __slots__ = ("headers", "_tracing", "_span", "_body_size")

    def __init__(self, tracing: ProducerTracing, span: Any, headers: TracedHeaders, body_size: int | None) -> None:
        self.headers = headers
        self._tracing = tracing
        self._span = span
        self._body_size = body_size

    def sent(self, rf: RecordFuture) -> None:
        """The record was sent again: its span ends with its outcome."""
        self._tracing.track(self._span, self._body_size, rf)

    def failed(self, error: BaseException) -> None:
        """The record will not be sent (closed producer, cancelled wait...): its span ends with ``error``."""
        self._tracing.fail(self._span, error)


class ProducerTracing:
    """A producer's tracing: the tracer, the propagator, and the spans of its sends and transactions.

    Built by :meth:`create`, which returns None (no tracing, not even a check) when
    ``tracing.enabled`` is false or opentelemetry-api is not installed.
    """

    __slots__ = (
        "client_id", "bulk_headers", "gate", "_trace", "_propagate", "_status", "_tracer", "_transactional_id",
        "_check_headers", "_provider", "_inert",
    )  # fmt: skip

    def __init__(self, client_id: str, bulk_headers: bool, transactional_id: str | None) -> None:
        from opentelemetry import propagate, trace
        from opentelemetry.trace import Status, StatusCode

        from kproducer.validation import check_headers

        self._check_headers = check_headers

        self.client_id = client_id
        self.bulk_headers = bulk_headers
        self._transactional_id = transactional_id
        self._trace = trace
        self._propagate = propagate
        self._status = (Status, StatusCode)
        #: The provider ``_tracer`` came from, and its tracer: None when it makes no spans.
        self._provider: Any = None
        self._tracer: Any = None
        self._inert: list[Callable[[], None]] = []
        #: The API module's namespace: ``gate[GATE_KEY]`` is None until a provider is set.
        self.gate: dict[str, Any] = vars(trace)
        if self.gate.get(GATE_KEY) is None and OTEL_PYTHON_TRACER_PROVIDER in os.environ:
            # A provider named by the environment is only loaded by the first get_tracer_provider().
            trace.get_tracer_provider()
        if GATE_KEY not in self.gate:
            # An API that keeps its provider elsewhere: decide now, once, from the public getter.
            provider = trace.get_tracer_provider()
            self.gate = {GATE_KEY: None if isinstance(provider, trace.ProxyTracerProvider) else provider}

    @classmethod
    def create(
        cls, enabled: bool, client_id: str, *, bulk_headers: bool = False, transactional_id: str | None = None
    ) -> ProducerTracing | None:
        """Tracing per ``tracing.enabled`` (``enabled``); None when it is off or opentelemetry-api is missing."""
        if not enabled:
            return None
        try:
            return cls(client_id, bulk_headers, transactional_id)
        except ImportError:
            return None

    # ------------------------------------------------------------------ the check every send makes
    def should_trace(self, headers: Any) -> bool:
        """Whether this send gets a span: a provider that makes spans is set, and the headers were not
        injected already."""
        provider = self.gate.get(GATE_KEY)
        if provider is None or type(headers) is TracedHeaders:
            return False
        return (self._tracer if provider is self._provider else self._tracer_of(provider)) is not None

    def active(self) -> bool:
        """Whether a tracer provider that makes spans is set."""
        provider = self.gate.get(GATE_KEY)
        if provider is None:
            return False
        return (self._tracer if provider is self._provider else self._tracer_of(provider)) is not None

    def when_inert(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` once the provider set turns out to make no spans (now, if it is known already).

        A no-op provider (``NoOpTracerProvider``, or the SDK's with ``OTEL_SDK_DISABLED=true``,
        whose tracers are ``NoOpTracer``) stays set for the process's life, so whatever checks
        for a provider on every send (the C send lane's gate) can stop.
        """
        self._inert.append(callback)
        if self._provider is not None and self._tracer is None:
            callback()

    def _tracer_of(self, provider: Any) -> Any:
        """The tracer of ``provider``, the one now set (None if its tracers make no spans); kept for the next send."""
        tracer = self._trace.get_tracer("kproducer", __version__)
        inert = isinstance(tracer, self._trace.NoOpTracer)
        self._tracer = None if inert else tracer
        self._provider = provider
        if inert:
            for callback in self._inert:
                callback()
        return self._tracer

    def _get_tracer(self) -> Any:
        """The tracer, once :meth:`active` or :meth:`should_trace` said yes."""
        return self._tracer

    def _start(self, name: str, attributes: dict[str, Any]) -> Any:
        return self._get_tracer().start_span(name, kind=self._trace.SpanKind.PRODUCER, attributes=attributes)

    def _inject(self, span: Any, headers: Any) -> TracedHeaders:
        """``headers`` plus the span's context, as the global propagator writes it (replacing its own keys)."""
        carrier: dict[str, str] = {}
        self._propagate.inject(carrier, context=self._trace.set_span_in_context(span))
        out = TracedHeaders()
        if headers is not None:
            out.extend(h for h in self._check_headers(headers) if h[0] not in carrier)
        out.extend((k, v.encode()) for k, v in carrier.items())
        return out

    def _fail(self, span: Any, error: BaseException) -> None:
        status, code = self._status
        span.set_attribute(ERROR_TYPE, _error_type(error))
        span.record_exception(error)
        span.set_status(status(code.ERROR, str(error)))

    # ------------------------------------------------------------------ send()
    def send(
        self,
        producer: Producer,
        topic: str,
        value: Any,
        key: Any,
        partition: int | None,
        timestamp: int | None,
        headers: Any,
        callback: Any,
        on_delivery: Any,
        block: bool = True,
    ) -> RecordFuture:
        """``producer.send`` inside a PRODUCER span that ends with the record's outcome."""
        attributes: dict[str, Any] = {
            SYSTEM: "kafka",
            OPERATION_NAME: "send",
            OPERATION_TYPE: "send",
            DESTINATION: topic,
            CLIENT_ID: self.client_id,
        }
        if key is not None:
            text = _key_text(key)
            if text is not None:
                attributes[KEY] = text
        if value is None:
            attributes[TOMBSTONE] = True
        if partition is not None and type(partition) is int:
            attributes[PARTITION] = str(partition)
        span = self._start(f"send {topic}", attributes)
        try:
            injected = self._inject(span, headers)
            rf = producer.send(
                topic, value, key, partition=partition, timestamp=timestamp, headers=injected, callback=callback,
                on_delivery=on_delivery, block=block,
            )
        except MemoryWouldBlock as e:
            # block=False and buffer.memory is full: the caller sends the record again once memory
            # returns. The span stays the record's, its wait included: the exception hands it on,
            # with the headers that carry its context, for the next attempt (AsyncProducer does so).
            e.pending_send = PendingSend(self, span, injected, _body_size(value))
            raise
        except BaseException as e:
            # A misuse raised from send() (wrong argument, closed producer): the span says so and ends.
            self._fail(span, e)
            span.end()
            raise
        self.track(span, _body_size(value), rf)
        return rf

    def track(self, span: Any, body_size: int | None, rf: RecordFuture) -> None:
        """End ``span`` with the outcome of the record ``rf`` is the future of."""
        if span.is_recording():
            rf.add_done_callback(partial(self._record_done, span, body_size))
        # A span the sampler dropped records nothing: its context still travels in the headers
        # (saying "not sampled" downstream), and there is nothing to end it with.

    def fail(self, span: Any, error: BaseException) -> None:
        """End ``span`` with ``error``: its record was never sent."""
        self._fail(span, error)
        span.end()

    def _record_done(self, span: Any, body_size: int | None, rf: RecordFuture) -> None:
        """On the thread that completed the record: the span gets the outcome and ends."""
        try:
            error = rf.record_error()
            if error is None:
                md = rf.value()
                span.set_attribute(PARTITION, str(md.partition))
                if md.offset >= 0:
                    span.set_attribute(OFFSET, md.offset)
                size = md.serialized_value_size
                if size >= 0:
                    body_size = size
            else:
                self._fail(span, error)
            if body_size is not None:
                span.set_attribute(BODY_SIZE, body_size)
        finally:
            span.end()

    # ------------------------------------------------------------------ send_batch() / send_arrow()
    def send_bulk(
        self, topic: str | None, rows: int, nbytes: int, headers: Any, call: Callable[[Any], BulkFuture]
    ) -> BulkFuture:
        """One bulk call inside a PRODUCER span (rows, partitions touched, bytes), current while it runs.

        ``nbytes``: the keys' and values' bytes. ``call(headers)`` makes the call; the headers carry the span's context when
        ``tracing.bulk.headers`` is on. Records the call sends one by one (interceptors, a
        custom partitioner) get spans of their own, children of this one.
        """
        attributes: dict[str, Any] = {
            SYSTEM: "kafka",
            OPERATION_NAME: "send",
            OPERATION_TYPE: "send",
            CLIENT_ID: self.client_id,
            BATCH_COUNT: rows,
            BULK_BYTES: nbytes,
        }
        if topic is not None:
            attributes[DESTINATION] = topic
        span = self._start(f"send {topic}" if topic is not None else "send", attributes)
        try:
            with self._trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
                fut = call(self._inject(span, headers) if self.bulk_headers else headers)
        except BaseException as e:
            self._fail(span, e)
            span.end()
            raise
        fut.add_done_callback(partial(self._bulk_done, span))
        return fut

    def _bulk_done(self, span: Any, fut: BulkFuture) -> None:
        try:
            metadata = fut.metadata(0)
            errors = fut.exceptions(0)
            span.set_attribute(BULK_PARTITIONS, sorted({md.partition for md in metadata if md is not None}))
            failed = [e for e in errors if e is not None]
            if failed:
                span.set_attribute(BULK_FAILED, len(failed))
                self._fail(span, failed[0])
        finally:
            span.end()

    # ------------------------------------------------------------------ transactions
    @contextmanager
    def transaction_step(self, operation: str, producer_id: Callable[[], tuple[int, int]]) -> Iterator[None]:
        """A span around ``begin_transaction``/``commit_transaction``/``abort_transaction``: its outcome."""
        attributes: dict[str, Any] = {SYSTEM: "kafka", CLIENT_ID: self.client_id}
        if self._transactional_id is not None:
            attributes[TRANSACTIONAL_ID] = self._transactional_id
        span = self._get_tracer().start_span(operation, kind=self._trace.SpanKind.CLIENT, attributes=attributes)
        try:
            with self._trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
                yield
        except BaseException as e:
            self._fail(span, e)
            raise
        else:
            status, code = self._status
            span.set_status(status(code.OK))
        finally:
            pid, epoch = producer_id()
            span.set_attribute(PRODUCER_ID, pid)
            span.set_attribute(PRODUCER_EPOCH, epoch)
            span.end()

    @contextmanager
    def task(self, name: str, attributes: Mapping[str, Any]) -> Iterator[Any]:
        """A span around a unit of work that sends (a Spark task), current while it runs; yields the span."""
        span = self._get_tracer().start_span(name, kind=self._trace.SpanKind.INTERNAL, attributes=dict(attributes))
        try:
            with self._trace.use_span(span, end_on_exit=False, record_exception=False, set_status_on_exception=False):
                yield span
        except BaseException as e:
            self._fail(span, e)
            raise
        finally:
            span.end()
