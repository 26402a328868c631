"""kafka-python's producer API on kproducer: change ``from kafka import KafkaProducer`` to
``from kproducer.compat.kafka import KafkaProducer``.

:class:`KafkaProducer` takes kafka-python's configuration names and has its
methods, on one :class:`~kproducer.producer.Producer` (this module translates
names, shapes and exceptions only). What stays as in kafka-python:

- ``send()`` returns a :class:`FutureRecordMetadata`: ``get(timeout)``,
  ``add_callback`` / ``add_errback`` / ``add_both``, ``succeeded()``,
  ``failed()``, ``is_done``, ``value``, ``exception``; callbacks get
  kafka-python's :class:`RecordMetadata` or exception, on the producer's I/O
  thread (kafka-python's sender thread), or at once when the record is already
  complete.
- A record larger than ``max_request_size``, a buffer still full after
  ``max_block_ms`` (``KafkaTimeoutError``), a serializer's exception, a send
  after ``close()`` (``IllegalStateError``) and a record with neither key nor
  value (``ValueError``) raise from ``send()``.
- Serializers: a callable ``f(obj)`` or a ``Serializer`` with
  ``serialize(topic, headers, data)`` (or the older ``serialize(topic, data)``),
  called for every key and value, ``None`` included.
- Keys go to ``murmur2(key) % partitions``, as with kafka-python's
  DefaultPartitioner and the Java client; a custom ``partitioner`` is called as
  kafka-python calls it.
- Exceptions are kafka-python's names (:mod:`kproducer.compat.kafka.errors`).

What differs is listed in docs/migrating.md ("From kafka-python").
"""

from __future__ import annotations

import functools
import inspect
import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from kproducer.compat._common import PeerPartitioner, bootstrap_with_port, refuse
from kproducer.compat.kafka import errors
from kproducer.compat.kafka import partitioner as _partitioner
from kproducer.compat.kafka.structs import OffsetAndMetadata, RecordMetadata
from kproducer.errors import BufferExhaustedError, RecordTooLargeError
from kproducer.errors import KafkaError as _KproducerError
from kproducer.errors import KafkaTimeoutError as KproducerTimeoutError
from kproducer.producer import Producer
from kproducer.structs import PartitionInfo, TopicPartition

if TYPE_CHECKING:
    from kproducer.accumulator.futures import RecordFuture

__all__ = ["FutureRecordMetadata", "KafkaProducer", "OffsetAndMetadata", "RecordMetadata", "TopicPartition", "errors"]

log = logging.getLogger(__name__)

_CLIENT = "kafka-python"
_translate = errors.translate
_COMPRESSION = {None: "none", "gzip": "gzip", "snappy": "snappy", "lz4": "lz4", "zstd": "zstd"}
_INT_MAX = 2147483647


class FutureRecordMetadata:
    """kafka-python's future of one record, over kproducer's RecordFuture.

    Callbacks added before completion run on the producer's I/O thread, in the
    order added; added after, they run at once on the caller's thread. A
    callback that raises is logged (``kproducer.compat.kafka``) and the others
    still run, as in kafka-python.
    """

    __slots__ = ("_rf", "_header_size", "_lock", "_value", "_exception", "_settled")

    def __init__(self, rf: RecordFuture, header_size: int) -> None:
        self._rf = rf
        self._header_size = header_size
        self._lock = threading.Lock()
        self._value: RecordMetadata | None = None
        self._exception: BaseException | None = None
        self._settled = False

    def _settle(self) -> None:
        """Read the outcome once (the record is complete): kafka-python's metadata or exception."""
        with self._lock:
            if self._settled:
                return
            error = self._rf.exception(0)
            if error is not None:
                self._exception = _translate(error)
            else:
                md = self._rf.result(0)
                self._value = RecordMetadata(
                    md.topic, md.partition, TopicPartition(md.topic, md.partition), md.offset, md.timestamp, None,
                    md.serialized_key_size, md.serialized_value_size, self._header_size,
                )
            self._settled = True

    @property
    def is_done(self) -> bool:
        return self._rf.done()

    @property
    def value(self) -> RecordMetadata | None:
        """The RecordMetadata once delivered, else None."""
        if not self._rf.done():
            return None
        self._settle()
        return self._value

    @property
    def exception(self) -> BaseException | None:
        """The record's exception once it failed, else None."""
        if not self._rf.done():
            return None
        self._settle()
        return self._exception

    def succeeded(self) -> bool:
        return self.is_done and self.exception is None

    def failed(self) -> bool:
        return self.is_done and self.exception is not None

    def retriable(self) -> bool:
        return self.is_done and isinstance(self.exception, errors.RetriableError)

    def get(self, timeout: float | None = None) -> RecordMetadata:
        """Wait up to ``timeout`` s (None: as long as it takes); the metadata, or raise the record's exception."""
        try:
            self._rf.exception(timeout)
        except _KproducerError as e:
            if isinstance(e, KproducerTimeoutError) and not self._rf.done():
                raise errors.KafkaTimeoutError(f"Timeout after waiting for {timeout} secs.") from None
            # Not a timeout: get() of a pending record from a callback on the I/O thread, which would
            # wait for itself, raises IllegalStateError naming the deadlock (kproducer.callback_errors).
            raise _translate(e) from None
        self._settle()
        if self._exception is not None:
            raise self._exception
        assert self._value is not None
        return self._value

    def add_callback(self, f: Callable[..., Any], *args: Any, **kwargs: Any) -> FutureRecordMetadata:
        """``f(*args, metadata, **kwargs)`` when the record is delivered."""
        return self._add(functools.partial(f, *args, **kwargs) if args or kwargs else f, success=True)

    def add_errback(self, f: Callable[..., Any], *args: Any, **kwargs: Any) -> FutureRecordMetadata:
        """``f(*args, exception, **kwargs)`` when the record failed."""
        return self._add(functools.partial(f, *args, **kwargs) if args or kwargs else f, success=False)

    def add_both(self, f: Callable[..., Any], *args: Any, **kwargs: Any) -> FutureRecordMetadata:
        self.add_callback(f, *args, **kwargs)
        return self.add_errback(f, *args, **kwargs)

    def _add(self, f: Callable[[Any], Any], *, success: bool) -> FutureRecordMetadata:
        def fire(_rf: Any) -> None:
            self._settle()
            outcome = self._value if success else self._exception
            if (self._exception is None) is not success:
                return
            try:
                f(outcome)
            except Exception:
                log.exception("Error processing %s", "callback" if success else "errback")

        self._rf.add_done_callback(fire)
        return self

    def __repr__(self) -> str:
        state = "pending" if not self.is_done else ("failed" if self.failed() else "succeeded")
        return f"<FutureRecordMetadata {state}>"


class _ClusterView:
    """The three questions kafka-python's partitioners ask its ClusterMetadata, answered from kproducer's."""

    __slots__ = ("_topic", "_partitions")

    def __init__(self, topic: str, partitions: list[PartitionInfo]) -> None:
        self._topic = topic
        self._partitions = partitions

    def topics(self) -> set[str]:
        return {self._topic}

    def partitions_for_topic(self, topic: str) -> set[int] | None:
        return {p.partition for p in self._partitions} if topic == self._topic else None

    def available_partitions_for_topic(self, topic: str) -> set[int] | None:
        return {p.partition for p in self._partitions if p.leader >= 0} if topic == self._topic else None


# kafka-python's configuration names with no counterpart here, with why, refused when set to anything
# but kafka-python's default.
_REFUSED: dict[str, tuple[Any, str]] = {
    "ssl_crlfile": (None, "kproducer does not check certificate revocation lists"),
    "sasl_kerberos_name": (None, "kproducer does not speak Kerberos (GSSAPI)"),
    "sasl_kerberos_service_name": ("kafka", "kproducer does not speak Kerberos (GSSAPI)"),
    "sasl_kerberos_domain_name": (None, "kproducer does not speak Kerberos (GSSAPI)"),
    "sasl_oauth_token_provider": (
        None,
        "kafka-python's provider returns a bare token without its expiry; use kproducer.Producer with "
        "sasl.oauthbearer.token.provider returning (token, expiry)",
    ),
    "proxy_url": (None, "kproducer connects to brokers directly"),
    "socks5_proxy": (None, "kproducer connects to brokers directly"),
    "kafka_client": (None, "the network client is kproducer's own"),
    "selector": (None, "the I/O loop is kproducer's own"),
    "socket_options": (None, "kproducer sets TCP_NODELAY itself and takes no other socket options"),
    "metric_reporters": ((), "kafka-python's reporter classes do not fit kproducer's metric.reporters"),
    "metrics_enabled": (True, "kproducer always records its metrics"),
    "receive_message_max_bytes": (100_000_000, "kproducer bounds responses by its own requests"),
    "bootstrap_timeout_ms": (None, "kproducer does not block the constructor on bootstrap"),
}
# kafka-python's name -> kproducer's, where only the name differs.
_RENAMED = {
    "bootstrap_servers": "bootstrap.servers",
    "client_id": "client.id",
    "enable_idempotence": "enable.idempotence",
    "transactional_id": "transactional.id",
    "transaction_timeout_ms": "transaction.timeout.ms",
    "delivery_timeout_ms": "delivery.timeout.ms",
    "batch_size": "batch.size",
    "linger_ms": "linger.ms",
    "connections_max_idle_ms": "connections.max.idle.ms",
    "max_block_ms": "max.block.ms",
    "max_request_size": "max.request.size",
    "allow_auto_create_topics": "allow.auto.create.topics",
    "metadata_max_age_ms": "metadata.max.age.ms",
    "client_dns_lookup": "client.dns.lookup",
    "retry_backoff_ms": "retry.backoff.ms",
    "request_timeout_ms": "request.timeout.ms",
    "reconnect_backoff_ms": "reconnect.backoff.ms",
    "reconnect_backoff_max_ms": "reconnect.backoff.max.ms",
    "max_in_flight_requests_per_connection": "max.in.flight.requests.per.connection",
    "security_protocol": "security.protocol",
    "ssl_cafile": "ssl.truststore.location",
    "ssl_certfile": "ssl.keystore.location",
    "ssl_keyfile": "ssl.key.location",
    "ssl_password": "ssl.key.password",
    "ssl_ciphers": "ssl.cipher.suites",
    "sasl_plain_username": "sasl.username",
    "sasl_plain_password": "sasl.password",
    "metrics_num_samples": "metrics.num.samples",
    "metrics_sample_window_ms": "metrics.sample.window.ms",
}
# Taken and used here, not passed on.
_ADAPTER_KEYS = frozenset(
    {"key_serializer", "value_serializer", "partitioner", "acks", "compression_type", "retries", "api_version",
     "send_buffer_bytes", "receive_buffer_bytes", "ssl_check_hostname", "sasl_mechanism", "ssl_context"}
)


def _config(configs: dict[str, Any]) -> dict[str, Any]:
    """kafka-python's configuration as kproducer's, refusing by name what has no meaning here."""
    unknown = sorted(set(configs) - set(_RENAMED) - set(_REFUSED) - _ADAPTER_KEYS)
    if unknown:
        raise errors.KafkaConfigurationError(f"Unrecognized configs: {unknown}")
    for name, (default, reason) in _REFUSED.items():
        if name in configs and configs[name] != default and not (name == "metric_reporters" and not configs[name]):
            raise refuse(errors.KafkaConfigurationError, _CLIENT, name, reason)
    out: dict[str, Any] = {dotted: configs[name] for name, dotted in _RENAMED.items() if name in configs}
    out["bootstrap.servers"] = bootstrap_with_port(configs.get("bootstrap_servers", "localhost"))
    if "acks" in configs:
        acks = configs["acks"]
        out["acks"] = "all" if acks in ("all", -1) else acks
    if "compression_type" in configs:
        ct = configs["compression_type"]
        if ct not in _COMPRESSION:
            raise ValueError(f"Not supported codec: {ct}")
        out["compression.type"] = _COMPRESSION[ct]
    if "retries" in configs:
        retries = configs["retries"]
        out["retries"] = _INT_MAX if retries == float("inf") else int(retries)
    for name in ("send_buffer_bytes", "receive_buffer_bytes"):
        if configs.get(name) is not None:
            out[name.replace("_", ".")] = configs[name]  # None: the OS default, kproducer's -1
        elif name in configs:
            out[name.replace("_", ".")] = -1
    if "ssl_check_hostname" in configs:
        out["ssl.endpoint.identification.algorithm"] = "https" if configs["ssl_check_hostname"] else ""
    if configs.get("sasl_mechanism") is not None:
        out["sasl.mechanism"] = configs["sasl_mechanism"]
    if configs.get("connections_max_idle_ms", 0) is None:
        out["connections.max.idle.ms"] = -1
    if configs.get("ssl_context") is not None:
        # kafka-python ignores its other ssl_* settings when given a context: said here, not silently.
        ignored = sorted(name for name in configs if name.startswith("ssl_") and name != "ssl_context")
        if ignored:
            log.warning("kafka-python ssl_context is given, so %s are not used (as in kafka-python)", ", ".join(ignored))
        for name in ignored:
            out.pop(_RENAMED.get(name, ""), None)
        out.pop("ssl.endpoint.identification.algorithm", None)
        out["ssl.context"] = configs["ssl_context"]
    if out.get("transactional.id") and configs.get("enable_idempotence") is False:
        raise errors.KafkaConfigurationError("Cannot set transactional_id without enable_idempotence.")
    return out


class KafkaProducer:
    """kafka-python's ``KafkaProducer(**configs)`` on kproducer (see the module's documentation).

    Configuration names are kafka-python's and so are its defaults where they
    differ from Java's only by name; ``api_version`` is accepted and not used
    (versions are negotiated with the broker). Refused by name when set: see
    ``_REFUSED`` in this module and docs/migrating.md.
    """

    def __init__(self, **configs: Any) -> None:
        api_version = configs.get("api_version")
        if api_version not in (None, "auto"):
            log.info("kafka-python api_version=%r is not used: kproducer negotiates versions with the broker", api_version)
        config = _config(configs)
        # Serializer objects are closed with the producer, as kafka-python does.
        self._serializer_objects: list[Any] = [
            s for s in (configs.get("key_serializer"), configs.get("value_serializer"))
            if callable(getattr(s, "close", None)) and callable(getattr(s, "serialize", None))
        ]
        self._key_serializer = _serializer(configs.get("key_serializer"))
        self._value_serializer = _serializer(configs.get("value_serializer"))
        partitioner = configs.get("partitioner")
        self._partitioner: Any = None
        if partitioner is not None and not _is_kafka_builtin(partitioner):
            if callable(getattr(partitioner, "partition", None)):
                self._partitioner = partitioner  # called here, with kafka-python's arguments
            elif callable(partitioner):
                config["partitioner.class"] = PeerPartitioner(partitioner)
            else:
                raise TypeError(f"partitioner {partitioner!r} has no partition() method and is not callable")
        try:
            self._producer = Producer(config)
        except _KproducerError as e:
            raise _translate(e)
        self._closed = False

    # ------------------------------------------------------------------ send
    def send(
        self,
        topic: str,
        value: Any = None,
        key: Any = None,
        headers: list[tuple[str, bytes]] | None = None,
        partition: int | None = None,
        timestamp_ms: int | None = None,
    ) -> FutureRecordMetadata:
        """Queue one record; returns its FutureRecordMetadata."""
        if self._closed:
            raise errors.IllegalStateError("KafkaProducer already closed!")
        if value is None and key is None:
            raise ValueError("Need at least one: key or value")
        if headers is None:
            headers = []
        key_bytes = self._key_serializer(topic, headers, key) if self._key_serializer else key
        value_bytes = self._value_serializer(topic, headers, value) if self._value_serializer else value
        p = self._producer
        try:
            if partition is None and self._partitioner is not None:
                view = _ClusterView(topic, p.partitions_for(topic))
                partition = self._partitioner.partition(topic, key, key_bytes, value, value_bytes, view)
            rf = p.send(topic, value_bytes, key_bytes, partition=partition, timestamp=timestamp_ms, headers=headers or None)
        except _KproducerError as e:
            raise _translate(e)
        if rf.done():
            error = rf.exception(0)
            if isinstance(error, (RecordTooLargeError, BufferExhaustedError)):
                # Too large, or buffer.memory still full after max_block_ms: kafka-python raises these
                # (MessageSizeTooLargeError, KafkaTimeoutError) from send() itself.
                raise _translate(error)
        header_size = sum(len(k.encode("utf-8")) + len(v or b"") for k, v in headers) if headers else -1
        return FutureRecordMetadata(rf, header_size)

    def flush(self, timeout: float | None = None) -> None:
        """Send everything buffered and wait for it; KafkaTimeoutError if ``timeout`` s ran out first."""
        start = time.monotonic()
        try:
            left = self._producer.flush(timeout)
        except _KproducerError as e:
            raise _translate(e)
        # Records sent by other threads (or callbacks) while it waited are counted in ``left`` too;
        # as in kafka-python, only a wait that ran out of time is an error.
        if left and timeout is not None and time.monotonic() - start >= timeout:
            raise errors.KafkaTimeoutError(f"Timeout after waiting for {timeout} secs: {left} records left")

    def close(self, timeout: float | None = None, null_logger: bool = False) -> None:
        """Flush within ``timeout`` s (None: as long as it takes), fail what is left, and stop."""
        if self._closed:
            return
        self._closed = True
        try:
            self._producer.close(timeout)
        except _KproducerError as e:
            raise _translate(e)
        finally:
            for serializer in self._serializer_objects:
                serializer.close()

    def __enter__(self) -> KafkaProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def partitions_for(self, topic: str) -> set[int]:
        """The topic's partition ids, waiting for its metadata up to ``max_block_ms``."""
        try:
            return {p.partition for p in self._producer.partitions_for(topic)}
        except _KproducerError as e:
            raise _translate(e)

    def metrics(self, raw: bool = False) -> dict[str, dict[str, float]]:
        """kafka-python's shape: ``{group: {name: value}}`` with the Java metric names.

        Groups: ``producer-metrics``, ``producer-topic-metrics.<topic>`` and
        ``producer-node-metrics.node-<id>``, as kafka-python names them.
        """
        out: dict[str, dict[str, float]] = {}
        for key, value in self._producer.metrics().items():
            name, _, tags = key.partition("[")
            group = "producer-metrics"
            for tag in tags.rstrip("]").split(",") if tags else ():
                tag_name, _, tag_value = tag.partition("=")
                if tag_name == "topic":
                    group = f"producer-topic-metrics.{tag_value}"
                elif tag_name == "node-id":
                    group = f"producer-node-metrics.node-{tag_value}"
            out.setdefault(group, {})[name] = value
        return out

    # ------------------------------------------------------------------ transactions
    def init_transactions(self) -> None:
        """Register ``transactional_id`` with its coordinator (fences older producers); waits up to ``max_block_ms``."""
        self._call(self._producer.init_transactions)

    def begin_transaction(self) -> None:
        self._call(self._producer.begin_transaction)

    def send_offsets_to_transaction(self, offsets: Mapping[Any, Any] | Iterable[Any], group_metadata: Any) -> None:
        """Commit a consumer group's offsets (``{TopicPartition: OffsetAndMetadata}``) with the open transaction."""
        self._call(self._producer.send_offsets_to_transaction, offsets, group_metadata)

    def commit_transaction(self) -> None:
        self._call(self._producer.commit_transaction)

    def abort_transaction(self) -> None:
        self._call(self._producer.abort_transaction)

    def _call(self, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except _KproducerError as e:
            raise _translate(e)

    # ------------------------------------------------------------------ kproducer's extras
    @property
    def producer(self) -> Producer:
        """The kproducer Producer underneath (kproducer's own API)."""
        return self._producer

    def __repr__(self) -> str:
        return f"<kproducer.compat.kafka.KafkaProducer on {self._producer!r}>"


def _serializer(spec: Any) -> Callable[[str, list[tuple[str, bytes]], Any], Any] | None:
    """kafka-python's serializer call: ``serialize(topic, headers, data)``, ``serialize(topic, data)`` or ``f(data)``."""
    if spec is None:
        return None
    serialize = getattr(spec, "serialize", None)
    if callable(serialize):
        try:
            params = len(inspect.signature(serialize).parameters)
        except (TypeError, ValueError):
            params = 3
        if params >= 3:
            return lambda topic, headers, data: serialize(topic, headers, data)
        return lambda topic, headers, data: serialize(topic, data)
    if callable(spec):
        return lambda topic, headers, data: spec(data)
    raise TypeError(f"serializer {spec!r} is neither callable nor has a serialize() method")


def _is_kafka_builtin(partitioner: Any) -> bool:
    """kafka-python's DefaultPartitioner (murmur2 of the key) or StickyPartitioner (this module's or
    kafka-python's own, not a subclass): kproducer's built-in does the same for keys, and a sticky
    choice for keyless records."""
    cls = partitioner if isinstance(partitioner, type) else type(partitioner)
    if cls in (_partitioner.DefaultPartitioner, _partitioner.StickyPartitioner):
        return True
    return cls.__name__ in ("DefaultPartitioner", "StickyPartitioner") and cls.__module__.startswith("kafka.")
