"""confluent-kafka's producer API on kproducer: change ``from confluent_kafka import ...`` to this module.

``Producer(conf)`` and ``SerializingProducer(conf)`` behave as confluent-kafka's
do, on one :class:`kproducer.Producer` each:

- ``produce(topic, value=None, key=None, partition=-1, on_delivery=None,
  callback=None, timestamp=0, headers=None)`` queues a record and never blocks:
  past ``queue.buffering.max.messages`` records or ``queue.buffering.max.kbytes``
  not yet reported it raises ``BufferError``, as librdkafka does.
- Delivery reports run on the caller's thread, inside ``poll(timeout)`` and
  ``flush(timeout)`` (and the transactional calls that flush), as confluent-kafka
  serves them: kproducer's I/O thread only queues them. An exception raised by a
  delivery callback propagates out of ``poll()``/``flush()``; the reports after
  it stay queued for the next call, none is lost or served twice.
- ``flush()`` returns the number of records still outstanding; ``len(producer)``
  counts records whose report has not been served yet.
- ``msg.key()``/``msg.value()`` are the bytes sent, ``msg.headers()`` the
  ``(key, bytes)`` list, ``err.code()`` librdkafka's codes (``KafkaError._MSG_TIMED_OUT``...).
- Keys are partitioned with librdkafka's default, ``consistent_random`` (CRC32),
  unless ``partitioner`` says otherwise, so keys land where confluent-kafka put them.
- librdkafka's configuration names are translated to kproducer's (``CONFIG_NAMES``);
  the ones that have no meaning on kproducer are refused by name, with the reason
  and what to do instead (``REFUSED``). Java names are accepted as well.

What differs, and why, is listed in ``docs/migrating.md``.
"""

from __future__ import annotations

import builtins
import collections
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kproducer.compat.librdkafka_errors import CODES, NAMES
from kproducer.errors import KafkaError as _EngineError
from kproducer.errors import RecordTooLargeError
from kproducer.errors import SerializationError as _EngineSerializationError
from kproducer.producer import Producer as _EngineProducer
from kproducer.serialization import resolve_serializer
from kproducer.structs import RecordMetadata
from kproducer.validation import check_headers

__all__ = [
    "CONFIG_NAMES",
    "OFFSET_INVALID",
    "REFUSED",
    "TIMESTAMP_CREATE_TIME",
    "TIMESTAMP_LOG_APPEND_TIME",
    "TIMESTAMP_NOT_AVAILABLE",
    "BrokerMetadata",
    "ClusterMetadata",
    "KafkaError",
    "KafkaException",
    "KeySerializationError",
    "Message",
    "PartitionMetadata",
    "Producer",
    "SerializationError",
    "SerializingProducer",
    "TopicMetadata",
    "TopicPartition",  # noqa: F822 - provided by the module __getattr__ below
    "ValueSerializationError",
]

TIMESTAMP_NOT_AVAILABLE = 0
TIMESTAMP_CREATE_TIME = 1
TIMESTAMP_LOG_APPEND_TIME = 2
OFFSET_INVALID = -1001  # librdkafka's RD_KAFKA_OFFSET_INVALID: no offset (acks=0, or the record failed)
_PARTITION_UA = -1  # librdkafka's RD_KAFKA_PARTITION_UA: let the partitioner choose


# ----------------------------------------------------------------------------- errors


class KafkaError:
    """confluent-kafka's ``KafkaError``: ``code()``, ``name()``, ``str()``, ``fatal()``, ``retriable()``,
    ``txn_requires_abort()``; librdkafka's codes as class attributes (``KafkaError._MSG_TIMED_OUT``)."""

    __slots__ = ("_code", "_reason", "_fatal", "_retriable", "_txn_requires_abort", "exception")

    def __init__(
        self,
        error: int,
        reason: str | None = None,
        fatal: bool = False,
        retriable: bool = False,
        txn_requires_abort: bool = False,
    ) -> None:
        self._code = int(error)
        self._reason = reason
        self._fatal = fatal
        self._retriable = retriable
        self._txn_requires_abort = txn_requires_abort
        #: The kproducer exception this error stands for (None when built by the application).
        self.exception: BaseException | None = None

    @classmethod
    def from_exception(cls, exc: BaseException) -> KafkaError:
        """The confluent-kafka view of a kproducer exception (librdkafka's code for the same condition)."""
        if isinstance(exc, _EngineError):
            err = cls(exc.code(), exc.str(), bool(exc.fatal()), bool(exc.retriable()), exc.txn_requires_abort())
        else:
            err = cls(CODES["_FAIL"], f"{type(exc).__name__}: {exc}")
        err.exception = exc
        return err

    def code(self) -> int:
        return self._code

    def name(self) -> str:
        return NAMES.get(self._code, f"ERR_{self._code}")

    def str(self) -> builtins.str:  # noqa: A003 - confluent-kafka's KafkaError.str()
        return self._reason if self._reason is not None else self.name()

    def fatal(self) -> bool:
        return self._fatal

    def retriable(self) -> bool:
        return self._retriable

    def txn_requires_abort(self) -> bool:
        return self._txn_requires_abort

    def __eq__(self, other: object) -> bool:
        if isinstance(other, KafkaError):
            return self._code == other._code
        if isinstance(other, int):
            return self._code == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._code)

    def __str__(self) -> builtins.str:
        return self.str()

    def __repr__(self) -> builtins.str:
        return f"KafkaError{{code={self.name()},val={self._code},str={self.str()!r}}}"


for _name, _code in CODES.items():
    setattr(KafkaError, _name, _code)


class KafkaException(Exception):
    """confluent-kafka's ``KafkaException``: ``e.args[0]`` is the :class:`KafkaError`."""

    def __init__(self, kafka_error: Any = None, *args: Any, **kwargs: Any) -> None:
        if kafka_error is None and "kafka_error" in kwargs:
            kafka_error = kwargs.pop("kafka_error")
        super().__init__(kafka_error, *args)


class SerializationError(KafkaException):
    """A serializer failed in ``SerializingProducer.produce()`` (confluent-kafka's ``serialization.SerializationError``)."""


class KeySerializationError(SerializationError):
    """The key serializer failed."""


class ValueSerializationError(SerializationError):
    """The value serializer failed."""


def _raise_as_confluent(exc: _EngineError) -> KafkaException:
    raised = KafkaException(KafkaError.from_exception(exc))
    raised.__cause__ = exc
    return raised


# ----------------------------------------------------------------------------- structs


class _TopicPartition:
    """confluent-kafka's ``TopicPartition(topic, partition=-1, offset=-1001, metadata=None, leader_epoch=None)``.

    Used when confluent-kafka is not installed; see :func:`__getattr__`.
    """

    __slots__ = ("topic", "partition", "offset", "metadata", "leader_epoch", "error")

    def __init__(
        self,
        topic: str,
        partition: int = -1,
        offset: int = OFFSET_INVALID,
        metadata: str | None = None,
        leader_epoch: int | None = None,
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.metadata = metadata
        self.leader_epoch = leader_epoch
        self.error: KafkaError | None = None

    def _key(self) -> tuple[str, int]:
        return (self.topic, self.partition)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, _TopicPartition):
            return NotImplemented
        return self._key() == other._key()

    def __lt__(self, other: _TopicPartition) -> bool:
        return self._key() < other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        return (
            f"TopicPartition{{topic={self.topic},partition={self.partition},offset={self.offset},"
            f"leader_epoch={self.leader_epoch},error={self.error}}}"
        )


def __getattr__(name: str) -> Any:
    """``TopicPartition`` is confluent-kafka's own class when confluent-kafka is installed.

    A program that switched this import usually still consumes with confluent-kafka's
    ``Consumer`` (kproducer has none), whose ``committed()``, ``assign()``... accept
    only confluent-kafka's TopicPartition; kproducer's ``send_offsets_to_transaction``
    reads either. Resolved on first use, so importing this module loads no librdkafka.
    """
    if name == "TopicPartition":
        try:
            from confluent_kafka import TopicPartition as ConfluentTopicPartition
        except ImportError:
            cls: Any = _TopicPartition
        else:
            cls = ConfluentTopicPartition
        globals()["TopicPartition"] = cls
        return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class Message:
    """confluent-kafka's ``Message``, as a delivery report carries it."""

    __slots__ = ("_topic", "_partition", "_offset", "_key", "_value", "_headers", "_error", "_timestamp", "_latency")

    def __init__(
        self,
        topic: str | None = None,
        partition: int | None = None,
        offset: int | None = None,
        key: bytes | None = None,
        value: bytes | None = None,
        headers: list[tuple[str, bytes | None]] | None = None,
        error: KafkaError | None = None,
        timestamp: tuple[int, int] = (TIMESTAMP_NOT_AVAILABLE, 0),
        latency: float | None = None,
    ) -> None:
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._key = key
        self._value = value
        self._headers = headers
        self._error = error
        self._timestamp = timestamp
        self._latency = latency

    def topic(self) -> str | None:
        return self._topic

    def partition(self) -> int | None:
        return self._partition

    def offset(self) -> int | None:
        return self._offset

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return None if self._headers is None else list(self._headers)

    def error(self) -> KafkaError | None:
        return self._error

    def timestamp(self) -> tuple[int, int]:
        return self._timestamp

    def latency(self) -> float | None:
        """Seconds from produce() to the broker's answer."""
        return self._latency

    def leader_epoch(self) -> int | None:
        return None

    def set_key(self, key: bytes | None) -> None:
        self._key = key

    def set_value(self, value: bytes | None) -> None:
        self._value = value

    def set_headers(self, headers: list[tuple[str, bytes | None]] | None) -> None:
        self._headers = headers

    def __len__(self) -> int:
        return 0 if self._value is None else len(self._value)

    def __repr__(self) -> str:
        return f"Message({self._topic}-{self._partition}@{self._offset}{', ' + repr(self._error) if self._error else ''})"


class BrokerMetadata:
    """A broker in :class:`ClusterMetadata`: ``id``, ``host``, ``port``."""

    def __init__(self, broker_id: int, host: str, port: int) -> None:
        self.id = broker_id
        self.host = host
        self.port = port

    def __str__(self) -> str:
        return f"{self.host}:{self.port}/{self.id}"


class PartitionMetadata:
    """A partition in :class:`TopicMetadata`: ``id``, ``leader``, ``replicas``, ``isrs``, ``error``."""

    def __init__(self, partition: int, leader: int, replicas: list[int], isrs: list[int]) -> None:
        self.id = partition
        self.leader = leader
        self.replicas = replicas
        self.isrs = isrs
        self.error: KafkaError | None = None

    def __str__(self) -> str:
        return str(self.id)


class TopicMetadata:
    """A topic in :class:`ClusterMetadata`: ``topic``, ``partitions`` (by id), ``error``."""

    def __init__(self, topic: str, partitions: dict[int, PartitionMetadata], error: KafkaError | None) -> None:
        self.topic = topic
        self.partitions = partitions
        self.error = error

    def __str__(self) -> str:
        return self.topic


class ClusterMetadata:
    """What ``list_topics()`` returns: ``cluster_id``, ``controller_id``, ``brokers``, ``topics``."""

    def __init__(self) -> None:
        self.cluster_id: str | None = None
        self.controller_id = -1
        self.brokers: dict[int, BrokerMetadata] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.orig_broker_id = -1
        self.orig_broker_name: str | None = None


# ----------------------------------------------------------------------------- configuration

#: librdkafka's names (and synonyms) that kproducer spells differently.
CONFIG_NAMES: dict[str, str] = {
    "metadata.broker.list": "bootstrap.servers",
    "queue.buffering.max.ms": "linger.ms",
    "message.timeout.ms": "delivery.timeout.ms",
    "request.required.acks": "acks",
    "message.send.max.retries": "retries",
    "max.in.flight": "max.in.flight.requests.per.connection",
    "compression.codec": "compression.type",
    "message.max.bytes": "max.request.size",
    "sasl.mechanisms": "sasl.mechanism",
    "topic.metadata.refresh.interval.ms": "metadata.max.age.ms",
    "socket.send.buffer.bytes": "send.buffer.bytes",
    "socket.receive.buffer.bytes": "receive.buffer.bytes",
    "partitioner": "partitioner.class",
    "transaction.timeout.ms": "transaction.timeout.ms",
}

_LOGGING = "kproducer logs through Python's logging under the 'kproducer' logger: configure that instead"
#: librdkafka settings with no meaning on kproducer: refused by name, with the reason and what to do instead.
REFUSED: dict[str, str] = {
    "batch.num.messages": "kproducer bounds a batch by bytes (batch.size), as the Java producer does, not by a "
    "message count",
    "sticky.partitioning.linger.ms": "keyless records stay on one partition until batch.size bytes went there "
    "(KIP-794's sticky partitioner), not for a time",
    "statistics.interval.ms": "there are no librdkafka JSON statistics: read Producer.metrics() (the Java "
    "producer's metric names) or set metric.reporters",
    "stats_cb": "there are no librdkafka JSON statistics: read Producer.metrics() or set metric.reporters",
    "error_cb": "there are no client-wide error events: connection problems are logged on the 'kproducer' logger, "
    "and each record's failure reaches its delivery report",
    "throttle_cb": "broker throttling shows in the metrics (produce-throttle-time-avg/max)",
    "debug": _LOGGING + " (logging.getLogger('kproducer').setLevel(logging.DEBUG))",
    "logger": _LOGGING,
    "log_level": _LOGGING,
    "log.queue": _LOGGING,
    "log.thread.name": _LOGGING,
    "log.connection.close": _LOGGING,
    "api.version.request": "kproducer always asks brokers for their versions (ApiVersions): only true is possible",
    "api.version.fallback.ms": "kproducer always asks brokers for their versions (ApiVersions)",
    "broker.version.fallback": "kproducer always asks brokers for their versions (ApiVersions)",
    "socket.timeout.ms": "kproducer bounds each request by request.timeout.ms and each record by "
    "delivery.timeout.ms (message.timeout.ms)",
    "socket.keepalive.enable": "kproducer always sets SO_KEEPALIVE, as the Java producer does: only true is possible",
    "socket.nagle.disable": "kproducer always sets TCP_NODELAY, as the Java producer does: only true is possible",
    "broker.address.family": "use client.dns.lookup; kproducer connects to the addresses the resolver returns",
    "enable.gapless.guarantee": "kproducer's idempotent producer (its default) handles sequence gaps as the Java "
    "producer does (KIP-360), with no librdkafka-style gapless mode",
    "queuing.strategy": "records are always sent in produce order per partition",
    "produce.offset.report": "every delivery report carries its record's own offset",
    "dr_msg_cb": "use on_delivery (in the configuration or per produce() call)",
    "opaque": "not used by the delivery callbacks kproducer serves",
    "background_event_cb": "there is no background event queue: delivery reports are served by poll()/flush()",
    "plugin.library.paths": "librdkafka plugins do not load into kproducer: use interceptor.classes",
    "interceptors": "librdkafka interceptors do not load into kproducer: use interceptor.classes",
    "enable.random.seed": "kproducer seeds Python's random generator as Python does",
    "key.serializer": "Producer takes str or bytes: use SerializingProducer for serializer objects",
    "value.serializer": "Producer takes str or bytes: use SerializingProducer for serializer objects",
}

#: Settings whose only possible value is what kproducer always does: accepted with that value.
_FIXED: dict[str, bool] = {"api.version.request": True, "socket.keepalive.enable": True, "socket.nagle.disable": True}

# librdkafka's defaults where they differ from kproducer's and decide what a program observes.
_LIBRDKAFKA_DEFAULTS: dict[str, Any] = {
    "partitioner.class": "consistent_random",  # librdkafka's default partitioner
    "delivery.timeout.ms": 300000,  # message.timeout.ms
}
_DEFAULT_MAX_MESSAGES = 100000  # queue.buffering.max.messages
_DEFAULT_MAX_KBYTES = 1048576  # queue.buffering.max.kbytes

_COMPRESSION_LEVELS = {"gzip": "compression.gzip.level", "lz4": "compression.lz4.level", "zstd": "compression.zstd.level"}


class _Settings:
    """A confluent-kafka configuration split into kproducer's configuration and what the adapter itself uses."""

    def __init__(self, conf: Mapping[str, Any], serializing: bool) -> None:
        flat: dict[str, Any] = {}
        topic_conf = conf.get("default.topic.config")
        if topic_conf is not None:
            if not isinstance(topic_conf, Mapping):
                raise TypeError(f"default.topic.config must be a dict, got {type(topic_conf).__name__}")
            flat.update(topic_conf)  # librdkafka: top-level topic properties win over default.topic.config
        flat.update((k, v) for k, v in conf.items() if k != "default.topic.config")

        self.on_delivery: Callable[..., Any] | None = flat.pop("on_delivery", None) or flat.pop("dr_cb", None)
        flat.pop("dr_cb", None)
        self.only_errors = _as_bool(flat.pop("delivery.report.only.error", False), "delivery.report.only.error")
        self.max_messages = int(flat.pop("queue.buffering.max.messages", _DEFAULT_MAX_MESSAGES))
        self.max_bytes = int(flat.pop("queue.buffering.max.kbytes", _DEFAULT_MAX_KBYTES)) * 1024
        if self.max_messages < 1 or self.max_bytes < 1024:
            raise _config_error(
                "queue.buffering.max.messages must be >= 1 and queue.buffering.max.kbytes >= 1, got "
                f"{self.max_messages} and {self.max_bytes // 1024}"
            )
        self.key_serializer: Any = None
        self.value_serializer: Any = None
        if serializing:
            self.key_serializer = flat.pop("key.serializer", None)
            self.value_serializer = flat.pop("value.serializer", None)
        level = flat.pop("compression.level", None)

        for name, fixed in _FIXED.items():
            if name in flat and _as_bool(flat[name], name) == fixed:
                del flat[name]  # asks for what kproducer does anyway
        engine: dict[str, Any] = {}
        refused = [name for name in flat if name in REFUSED]
        if refused:
            raise _config_error(
                "; ".join(f"{name} is not supported by kproducer: {REFUSED[name]}" for name in refused)
            )
        for name, value in flat.items():
            target = CONFIG_NAMES.get(name, name)
            if target in engine and engine[target] != value:
                raise _config_error(f"{name} and another setting both set {target} (to {engine[target]!r} and {value!r})")
            engine[target] = value
        if level is not None and int(level) != -1:
            codec = str(engine.get("compression.type", "none")).lower()
            if codec not in _COMPRESSION_LEVELS:
                raise _config_error(f"compression.level applies to gzip, lz4 and zstd, not compression.type={codec}")
            engine.setdefault(_COMPRESSION_LEVELS[codec], int(level))
        for name, value in _LIBRDKAFKA_DEFAULTS.items():
            engine.setdefault(name, value)
        # librdkafka's message.timeout.ms bounds a record's whole life, the wait for its topic's
        # metadata included, and caps each produce request's timeout; kproducer's
        # delivery.timeout.ms starts once the record is in a batch (Java's), with max.block.ms for
        # the metadata, and must cover linger.ms + request.timeout.ms.
        try:
            message_timeout = int(engine["delivery.timeout.ms"])
            linger = int(engine.get("linger.ms", 5))
        except (TypeError, ValueError):
            pass  # not a number: kproducer's configuration says so, naming the setting
        else:
            engine.setdefault("max.block.ms", message_timeout)
            if "request.timeout.ms" not in engine and message_timeout < linger + 30000:
                engine["request.timeout.ms"] = max(1, message_timeout - linger)
        # produce() never blocks: the queue limits above raise BufferError first.
        engine.setdefault("buffer.memory", self.max_bytes)
        self.engine = engine


def _as_bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise _config_error(f"{name} must be true or false, got {value!r}")


def _config_error(message: str) -> KafkaException:
    return KafkaException(KafkaError(CODES["_INVALID_ARG"], message))


# ----------------------------------------------------------------------------- delivery reports


class _Delivery:
    """One produced record until its report is served: the Java-shaped callback kproducer calls, on its I/O thread."""

    __slots__ = (
        "reports", "on_delivery", "topic", "key", "value", "headers", "size", "produced_at", "metadata", "error",
        "latency", "dropped",
    )  # fmt: skip

    def __init__(
        self,
        reports: _Reports,
        on_delivery: Callable[..., Any] | None,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]] | None,
        size: int,
    ) -> None:
        self.reports = reports
        self.on_delivery = on_delivery
        self.topic = topic
        self.key = key
        self.value = value
        self.headers = headers
        self.size = size
        self.produced_at = time.monotonic()
        self.metadata: RecordMetadata | None = None
        self.error: BaseException | None = None
        self.latency = 0.0
        self.dropped = False  # produce() raised for it: nothing to report

    def __call__(self, metadata: RecordMetadata | None, exception: BaseException | None) -> None:
        self.metadata = metadata
        self.error = exception
        self.latency = time.monotonic() - self.produced_at
        self.reports.put(self)

    def message(self) -> Message:
        md = self.metadata
        error = None if self.error is None else KafkaError.from_exception(self.error)
        if md is not None:
            partition = md.partition
            offset = md.offset if md.offset >= 0 else OFFSET_INVALID
            timestamp = (TIMESTAMP_CREATE_TIME, md.timestamp) if md.timestamp >= 0 else (TIMESTAMP_NOT_AVAILABLE, 0)
        else:
            failed_partition = getattr(self.error, "partition", None)
            partition = failed_partition if failed_partition is not None else _PARTITION_UA
            offset = None  # confluent-kafka's report of a failed record has no offset
            timestamp = (TIMESTAMP_NOT_AVAILABLE, 0)
        # confluent-kafka's delivery reports carry no headers (msg.headers() is None there): the same here.
        return Message(self.topic, partition, offset, self.key, self.value, None, error, timestamp, self.latency)


class _Reports:
    """Reports queued by the I/O thread, served on the application's thread; counts what is outstanding.

    A record with no delivery callback to serve has no report: it is outstanding
    until its future completes (librdkafka, with nothing to report, also forgets a
    message once delivered), and costs no call on the I/O thread.
    """

    def __init__(self) -> None:
        self._queue: collections.deque[_Delivery] = collections.deque()
        self._cond = threading.Condition()
        self._waiters = 0
        self.outstanding = 0
        self.outstanding_bytes = 0
        # Records without a report: (future, size), in produce order (produce() may run on several threads).
        self._silent: collections.deque[tuple[Any, int]] = collections.deque()
        self._silent_bytes = 0
        self._silent_lock = threading.Lock()

    def track_silent(self, future: Any, size: int) -> None:
        with self._silent_lock:
            self._silent.append((future, size))
            self._silent_bytes += size

    def release_completed(self) -> None:
        """Drop the completed records without a report from the front (records complete about in order)."""
        with self._silent_lock:
            silent = self._silent
            while silent and silent[0][0].done():
                self._silent_bytes -= silent.popleft()[1]

    def _prune_silent(self) -> None:
        """Drop the completed records without a report (a scan, done when a count is needed)."""
        with self._silent_lock:
            silent = self._silent
            if not silent:
                return
            pending = [(f, n) for f, n in silent if not f.done()]
            if len(pending) != len(silent):
                self._silent = collections.deque(pending)
                self._silent_bytes = sum(n for _, n in pending)

    def count(self) -> int:
        """Records produced and not yet reported (or, without a report, not yet completed)."""
        self._prune_silent()
        return self.outstanding + len(self._silent)

    def room_for(self, size: int, max_messages: int, max_bytes: int) -> bool:
        """Whether one more record of ``size`` bytes stays within the queue limits."""
        if (
            self.outstanding + len(self._silent) < max_messages
            and self.outstanding_bytes + self._silent_bytes + size <= max_bytes
        ):
            return True
        self._prune_silent()
        return (
            self.outstanding + len(self._silent) < max_messages
            and self.outstanding_bytes + self._silent_bytes + size <= max_bytes
        )

    def queued_bytes(self) -> int:
        return self.outstanding_bytes + self._silent_bytes

    def wake(self) -> None:
        """Wake a take() waiting for reports (its stop event was set)."""
        with self._cond:
            self._cond.notify_all()

    def add(self, size: int) -> None:
        with self._cond:
            self.outstanding += 1
            self.outstanding_bytes += size

    def forget(self, delivery: _Delivery) -> None:
        """A record produce() raised for: it will not be reported."""
        with self._cond:
            if not delivery.dropped:
                delivery.dropped = True
                self.outstanding -= 1
                self.outstanding_bytes -= delivery.size

    def put(self, delivery: _Delivery) -> None:
        with self._cond:
            self._queue.append(delivery)
            if self._waiters:
                self._cond.notify_all()

    def take(self, timeout: float | None, stop: threading.Event | None = None) -> _Delivery | None:
        """The next report, counted as served; None when none came within ``timeout`` s (None: no limit)
        or ``stop`` was set."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                while self._queue:
                    delivery = self._queue.popleft()
                    if delivery.dropped:
                        continue
                    self.outstanding -= 1
                    self.outstanding_bytes -= delivery.size
                    return delivery
                if stop is not None and stop.is_set():
                    return None
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._waiters += 1
                try:
                    self._cond.wait(remaining)
                finally:
                    self._waiters -= 1


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


# ----------------------------------------------------------------------------- the producers


class Producer:
    """confluent-kafka's ``Producer(conf)`` on a :class:`kproducer.Producer`."""

    _serializing = False

    def __init__(self, conf: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        merged = dict(conf or {})
        merged.update(kwargs)
        settings = _Settings(merged, self._serializing)
        self._settings = settings
        self._reports = _Reports()
        try:
            self._producer = _EngineProducer(settings.engine)
        except _EngineError as e:
            raise _raise_as_confluent(e) from e

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
            delivery = _Delivery(reports, on_delivery, topic, key, value, headers, size)
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
        """Serve the queued delivery reports (waiting up to ``timeout`` s for the first); returns how many."""
        served = 0
        self._reports.release_completed()
        first = self._reports.take(_timeout(timeout))
        while first is not None:
            served += 1
            self._serve(first)
            first = self._reports.take(0)
        return served

    def _serve(self, delivery: _Delivery) -> None:
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
        if not reports.count():
            return 0
        # kproducer's flush() (linger cut short, wait for completion) runs beside the serving loop below;
        # when it returns, every report of what it waited for is queued.
        flushed = threading.Event()
        threading.Thread(
            target=self._engine_flush, args=(wait, flushed), name="kproducer-compat-flush", daemon=True
        ).start()
        deadline = None if wait is None else time.monotonic() + wait
        while True:
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
        """Abort an open transaction, flush (serving reports) within ``timeout`` s, then stop the I/O thread."""
        state = self._producer.transaction_state
        if state is not None and state.name in ("IN_TRANSACTION", "ABORTABLE_ERROR"):
            self.abort_transaction(timeout)
        left = self.flush(timeout)
        self._producer.close(0 if left else timeout)
        self.poll(0)
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
