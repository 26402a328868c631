"""confluent-kafka's ``Producer`` and ``SerializingProducer`` over one :class:`kproducer.Producer`."""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kproducer.compat.confluent_kafka.client_errors import LogForwarding, client_error
from kproducer.compat.confluent_kafka.errors import (
    KafkaError,
    KafkaException,
    KeySerializationError,
    ValueSerializationError,
    _raise_as_confluent,
)
from kproducer.compat.confluent_kafka.message import _PARTITION_UA
from kproducer.compat.confluent_kafka.metadata import (
    BrokerMetadata,
    ClusterMetadata,
    PartitionMetadata,
    TopicMetadata,
)
from kproducer.compat.confluent_kafka.reports import Delivery, Reports
from kproducer.compat.confluent_kafka.settings import Settings
from kproducer.compat.librdkafka_errors import CODES
from kproducer.errors import KafkaError as _EngineError
from kproducer.errors import RecordTooLargeError
from kproducer.errors import SerializationError as _EngineSerializationError
from kproducer.network.client_error_event import ClientErrorEvent
from kproducer.producer import Producer as _EngineProducer
from kproducer.serialization import resolve_serializer
from kproducer.validation import check_headers

__all__ = ["Producer", "SerializingProducer"]


def _timeout(timeout: float | None) -> float | None:
    """confluent-kafka's timeouts: None or a negative number waits forever."""
    if timeout is None or timeout < 0:
        return None
    return float(timeout)


def _bytes(data: Any, what: str) -> bytes | None:
    if data is None or type(data) is bytes:
        return data
    if isinstance(data, str):
        return data.encode("utf-8")
    if isinstance(data, bytearray | memoryview):
        return bytes(data)
    raise TypeError(f"{what} must be str, bytes or None (use SerializingProducer for objects), got {type(data).__name__}")


class Producer:
    """confluent-kafka's ``Producer(conf)`` on a :class:`kproducer.Producer`."""

    _serializing = False

    def __init__(self, conf: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        merged = dict(conf or {})
        merged.update(kwargs)
        settings = Settings(merged, self._serializing)
        self._settings = settings
        self._reports = Reports()
        self._fatal_raised = False
        # Stopped by close(), or when the producer is garbage collected unclosed (as many programs leave it).
        self._log_forwarding = (
            weakref.finalize(self, LogForwarding(settings.logger).stop) if settings.logger is not None else None
        )
        listener = self._client_error if settings.error_cb is not None else None
        try:
            self._producer = _EngineProducer(settings.engine, client_error_listener=listener)
        except _EngineError as e:
            self._stop_log_forwarding()
            raise _raise_as_confluent(e) from e
        except BaseException:
            self._stop_log_forwarding()
            raise

    def _client_error(self, event: ClientErrorEvent) -> None:
        """On the I/O thread: queue the event as librdkafka's error for the next poll()/flush()."""
        self._reports.put_error(client_error(event))

    def _stop_log_forwarding(self) -> None:
        if self._log_forwarding is not None:
            self._log_forwarding()  # a finalizer runs once

    # ------------------------------------------------------------------ produce
    def produce(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        partition: int = _PARTITION_UA,
        on_delivery: Callable[..., Any] | None = None,
        callback: Callable[..., Any] | None = None,
        timestamp: int = 0,
        headers: Mapping[str, Any] | Iterable[tuple[str, Any]] | None = None,
    ) -> None:
        """Queue one record; its report is served by a later ``poll()`` or ``flush()``."""
        if not isinstance(topic, str):
            raise TypeError(f"topic must be a str, got {type(topic).__name__}")
        key_bytes = _bytes(key, "key")
        value_bytes = _bytes(value, "value")
        checked = None if headers is None else check_headers(headers)
        self._produce(topic, key_bytes, value_bytes, partition, on_delivery, callback, timestamp, checked)

    def _produce(
        self,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        partition: int,
        on_delivery: Callable[..., Any] | None,
        callback: Callable[..., Any] | None,
        timestamp: int,
        headers: list[tuple[str, bytes | None]] | None,
    ) -> None:
        if on_delivery is not None and callback is not None and on_delivery is not callback:
            raise TypeError("pass the delivery callback as on_delivery= or callback= (its alias), not both")
        user = on_delivery if on_delivery is not None else callback
        if user is not None and not callable(user):
            raise TypeError(f"on_delivery must be callable, got {type(user).__name__}")
        if type(partition) is not int or partition < _PARTITION_UA:
            raise TypeError(f"partition must be an int >= 0, or -1 to let the partitioner choose; got {partition!r}")
        if type(timestamp) is not int or timestamp < 0:
            raise TypeError(f"timestamp must be an int >= 0 (milliseconds; 0: now), got {timestamp!r}")
        size = (0 if key is None else len(key)) + (0 if value is None else len(value))
        reports = self._reports
        settings = self._settings
        if not reports.room_for(size, settings.max_messages, settings.max_bytes):
            raise BufferError(
                f"Local: Queue full ({reports.count()} records, {reports.queued_bytes()} bytes not yet "
                f"reported; queue.buffering.max.messages={settings.max_messages}, "
                f"queue.buffering.max.kbytes={settings.max_bytes // 1024}): call poll() to serve delivery reports"
            )
        on_delivery = user or settings.on_delivery
        delivery = None
        if on_delivery is not None:
            delivery = Delivery(reports, on_delivery, topic, key, value, headers, size)
            reports.add(size)
        try:
            future = self._producer.send(
                topic,
                value,
                key,
                partition=None if partition == _PARTITION_UA else partition,
                timestamp=timestamp or None,
                headers=headers,
                callback=delivery,
            )
        except _EngineError as e:
            if delivery is not None:
                reports.forget(delivery)
            raise _raise_as_confluent(e) from e
        except BaseException:
            if delivery is not None:
                reports.forget(delivery)
            raise
        # A record too large fails inside send(): librdkafka's produce() raises for it (MSG_SIZE_TOO_LARGE).
        if future.done():
            error = future.exception(0)
            if isinstance(error, RecordTooLargeError):
                if delivery is not None:
                    reports.forget(delivery)
                raise _raise_as_confluent(error)
        if delivery is None:
            reports.track_silent(future, size)

    # ------------------------------------------------------------------ delivery reports
    def poll(self, timeout: float | None = None) -> int:
        """Serve the queued client errors (error_cb) and delivery reports, waiting up to ``timeout`` s for
        the first; returns how many were served. An exception raised by a callback propagates from here."""
        reports = self._reports
        served = 0
        reports.release_completed()
        wait = _timeout(timeout)
        while True:
            served += self._serve_errors()
            delivery = reports.take(0 if served else wait)
            if delivery is None:
                if reports.has_errors():
                    continue  # woken by a client error
                self._raise_fatal_once()
                return served
            served += 1
            self._serve(delivery)

    def _raise_fatal_once(self) -> None:
        """Raise the producer's fatal error from poll()/flush(), once, as confluent-kafka does: it raises
        KafkaException for librdkafka's _FATAL event, with the underlying error (``fatal()`` true)
        instead of calling error_cb. Later calls raise it from produce() and the transactional calls."""
        if self._fatal_raised:
            return
        fatal = self._producer.fatal_error
        if fatal is None:
            return
        self._fatal_raised = True
        raised = KafkaException(KafkaError(fatal.code(), fatal.str(), fatal=True))
        raised.args[0].exception = fatal
        raise raised from fatal

    def _serve_errors(self) -> int:
        """Call error_cb with each client-wide error queued by the I/O thread, as librdkafka's poll does."""
        served = 0
        error_cb = self._settings.error_cb
        take = self._reports.take_error
        error = take()
        while error is not None:
            served += 1
            if error_cb is not None:
                error_cb(error)
            error = take()
        return served

    def _serve(self, delivery: Delivery) -> None:
        callback = delivery.on_delivery
        if callback is None:
            return
        if delivery.error is None and self._settings.only_errors:
            return
        message = delivery.message()
        callback(message.error(), message)

    def flush(self, timeout: float | None = None) -> int:
        """Send everything now and serve every report; returns the number still outstanding (0 unless timed out)."""
        wait = _timeout(timeout)
        reports = self._reports
        self._serve_errors()
        if not reports.count():
            self._raise_fatal_once()
            return 0
        # kproducer's flush() (linger cut short, wait for completion) runs beside the serving loop below;
        # when it returns, every report of what it waited for is queued.
        flushed = threading.Event()
        threading.Thread(
            target=self._engine_flush, args=(wait, flushed), name="kproducer-compat-flush", daemon=True
        ).start()
        deadline = None if wait is None else time.monotonic() + wait
        while True:
            self._serve_errors()
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not flushed.is_set():
                delivery = reports.take(remaining, stop=flushed)
                if delivery is None and remaining == 0:
                    break
            else:
                # kproducer's flush() returned: the last reports are on their way (a record that failed
                # waiting for metadata is reported just after it leaves the queue flush() watches).
                if remaining == 0 or not reports.count():
                    break
                delivery = reports.take(0.01 if remaining is None else min(remaining, 0.01))
            if delivery is not None:
                self._serve(delivery)
        self._raise_fatal_once()
        return reports.count()

    def _engine_flush(self, timeout: float | None, flushed: threading.Event) -> None:
        try:
            self._producer.flush(timeout)
        except _EngineError:
            pass  # closed meanwhile: the records' reports say what became of them
        finally:
            flushed.set()
            self._reports.wake()

    def __len__(self) -> int:
        """Records produced whose delivery report has not been served yet (without a callback: not yet completed)."""
        return self._reports.count()

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Fail the records not yet sent (their reports say ``_PURGE_QUEUE``), served by the next poll()/flush().

        Records already sent to a broker are not recalled: they end with their real outcome.
        """
        if in_queue:
            try:
                self._producer.purge()
            except _EngineError as e:
                raise _raise_as_confluent(e) from e

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """Cluster metadata: the brokers, and ``topic`` (or every topic) with its partitions."""
        from kproducer.network.client import NetworkClient, security_options

        cfg = self._producer.config
        wait = _timeout(timeout)
        timeout_ms = int((wait if wait is not None else cfg.max_block_ms / 1000.0) * 1000)
        client = NetworkClient(
            bootstrap_servers=cfg.bootstrap_servers,
            client_id=f"{self._producer.client_id}-metadata",
            request_timeout_ms=timeout_ms,
            **security_options(cfg),
        )
        try:
            client.fetch_metadata(None if topic is None else [topic], timeout_ms)
            cluster = client.metadata.cluster
        except _EngineError as e:
            raise _raise_as_confluent(e) from e
        finally:
            client.close()
        out = ClusterMetadata()
        out.cluster_id = cluster.cluster_id
        out.controller_id = cluster.controller_id if cluster.controller_id is not None else -1
        out.brokers = {n.id: BrokerMetadata(n.id, n.host, n.port) for n in cluster.nodes.values()}
        names = sorted(cluster.topics) if topic is None else [topic]
        for name in names:
            parts = {
                p.partition: PartitionMetadata(p.partition, p.leader, list(p.replicas), list(p.isr))
                for p in cluster.partitions_for_topic(name)
            }
            code = cluster.topic_errors.get(name)
            error = KafkaError(code) if code else None
            if not parts and error is None:
                error = KafkaError(CODES["UNKNOWN_TOPIC_OR_PART"])
            out.topics[name] = TopicMetadata(name, parts, error)
        return out

    # ------------------------------------------------------------------ transactions
    def init_transactions(self, timeout: float | None = None) -> None:
        self._call(self._producer.init_transactions, _timeout(timeout))

    def begin_transaction(self) -> None:
        self._call(self._producer.begin_transaction)

    def send_offsets_to_transaction(self, positions: Any, group_metadata: Any, timeout: float | None = None) -> None:
        self._call(self._producer.send_offsets_to_transaction, positions, group_metadata, _timeout(timeout))

    def commit_transaction(self, timeout: float | None = None) -> None:
        """Flush (serving the reports, as librdkafka does), then commit."""
        wait = _timeout(timeout)
        start = time.monotonic()
        self.flush(wait)
        left = None if wait is None else max(0.0, wait - (time.monotonic() - start))
        self._call(self._producer.commit_transaction, left)

    def abort_transaction(self, timeout: float | None = None) -> None:
        """Abort: records not yet sent fail with ``_PURGE_QUEUE``; their reports are served here."""
        self._call(self._producer.abort_transaction, _timeout(timeout))
        self.poll(0)

    def _call(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except _EngineError as e:
            raise _raise_as_confluent(e) from e

    def produce_batch(
        self,
        topic: str,
        messages: list[dict[str, Any]],
        partition: int = _PARTITION_UA,
        on_delivery: Callable[..., Any] | None = None,
    ) -> int:
        """Produce each message dict (``value``, ``key``, ``partition``, ``timestamp``, ``callback``);
        returns how many were queued. A message that could not be queued gets an ``_error`` entry."""
        if not isinstance(messages, list):
            raise TypeError(f"messages must be a list of dicts, got {type(messages).__name__}")
        queued = 0
        for message in messages:
            if not isinstance(message, dict):
                raise TypeError(f"each message must be a dict, got {type(message).__name__}")
            try:
                self.produce(
                    topic,
                    message.get("value"),
                    message.get("key"),
                    message.get("partition", partition),
                    message.get("callback", on_delivery),
                    None,
                    message.get("timestamp", 0),
                )
            except BufferError:
                message["_error"] = KafkaError(CODES["_QUEUE_FULL"], "Local: Queue full")
            except KafkaException as e:
                message["_error"] = e.args[0]
            else:
                queued += 1
        return queued

    def cluster_id(self, timeout: float = -1) -> str | None:
        """The cluster's id (KIP-78), from a metadata request."""
        return self.list_topics(None, timeout).cluster_id

    def set_sasl_credentials(self, username: str, password: str) -> None:
        """Refused: kproducer reads ``sasl.username``/``sasl.password`` when the producer is created."""
        raise KafkaException(
            KafkaError(
                CODES["_NOT_IMPLEMENTED"],
                "set_sasl_credentials() is not supported by kproducer: SASL credentials are read from "
                "sasl.username/sasl.password (or sasl.jaas.config) when the producer is created; create a new "
                "Producer with the new credentials",
            )
        )

    def close(self, timeout: float | None = None) -> bool:
        """Abort an open transaction, flush (serving reports) within ``timeout`` s, then stop the I/O thread.

        An exception raised by a delivery callback propagates, as from ``flush()``, once the
        producer is closed all the same (its connections and I/O thread do not outlive a failed
        ``with`` block); the reports not served yet stay for ``poll()``.
        """
        try:
            try:
                state = self._producer.transaction_state
                if state is not None and state.name in ("IN_TRANSACTION", "ABORTABLE_ERROR"):
                    self.abort_transaction(timeout)
                left = self.flush(timeout)
            except BaseException:
                self._producer.close(timeout)
                raise
            self._producer.close(0 if left else timeout)
            self.poll(0)
        finally:
            self._stop_log_forwarding()  # the producer's last lines (closing it) were forwarded too
        return True

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __bool__(self) -> bool:
        """Always true, as confluent-kafka's (``len()`` alone would make an idle producer falsy)."""
        return True

    # ------------------------------------------------------------------ beyond confluent-kafka
    @property
    def engine(self) -> _EngineProducer:
        """The kproducer Producer underneath (its metrics(), partitions_for(), transaction_state...)."""
        return self._producer

    def __repr__(self) -> str:
        return f"<compat.confluent_kafka.{type(self).__name__} {self._producer.client_id}>"


class SerializingProducer(Producer):
    """confluent-kafka's ``SerializingProducer``: ``key.serializer``/``value.serializer`` run in ``produce()``.

    Any serializer confluent-kafka accepts works (``StringSerializer``,
    ``AvroSerializer``, ``JSONSerializer``, ``ProtobufSerializer``, a callable
    ``f(obj, SerializationContext)``); a failure raises ``KeySerializationError`` or
    ``ValueSerializationError`` from ``produce()``, as there.
    """

    _serializing = True

    def __init__(self, conf: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        super().__init__(conf, **kwargs)
        self._key_serializer = resolve_serializer(self._settings.key_serializer, is_key=True)
        self._value_serializer = resolve_serializer(self._settings.value_serializer, is_key=False)

    def produce(  # type: ignore[override]  # confluent-kafka's SerializingProducer: key before value
        self,
        topic: str,
        key: Any = None,
        value: Any = None,
        partition: int = _PARTITION_UA,
        on_delivery: Callable[..., Any] | None = None,
        timestamp: int = 0,
        headers: Mapping[str, Any] | Iterable[tuple[str, Any]] | None = None,
    ) -> None:
        if not isinstance(topic, str):
            raise TypeError(f"topic must be a str, got {type(topic).__name__}")
        checked = None if headers is None else check_headers(headers)
        try:
            key_bytes = self._key_serializer.serialize(topic, key, checked)
        except _EngineSerializationError as e:
            raise KeySerializationError(KafkaError(CODES["_KEY_SERIALIZATION"], str(e))) from e.__cause__ or e
        try:
            value_bytes = self._value_serializer.serialize(topic, value, checked)
        except _EngineSerializationError as e:
            raise ValueSerializationError(KafkaError(CODES["_VALUE_SERIALIZATION"], str(e))) from e.__cause__ or e
        self._produce(topic, key_bytes, value_bytes, partition, on_delivery, None, timestamp, checked)
