"""A confluent-kafka configuration in kproducer's terms: librdkafka's names translated, the meaningless refused."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from kproducer.compat.confluent_kafka.errors import KafkaError, KafkaException
from kproducer.compat.librdkafka_errors import CODES
from kproducer.config.keys import CONFIG_KEYS

__all__ = ["CONFIG_NAMES", "REFUSED", "Settings"]

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
_METADATA = (
    "kproducer refreshes metadata as the Java producer does: at once for a topic it lacks or a partition "
    "without a leader (backed off by retry.backoff.ms), else every metadata.max.age.ms, forgetting topics "
    "unused for metadata.max.idle.ms"
)
_KERBEROS = "kproducer does not speak Kerberos (GSSAPI): use PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or OAUTHBEARER"
_SSL_CONTEXT = (
    "TLS runs on Python's ssl module, not on librdkafka's OpenSSL build: configure an ssl.SSLContext and pass "
    "it as ssl.context"
)
#: librdkafka settings with no meaning on kproducer: refused by name, with the reason and what to do instead.
REFUSED: dict[str, str] = {
    "batch.num.messages": "kproducer bounds a batch by bytes (batch.size), as the Java producer does, not by a "
    "message count",
    "sticky.partitioning.linger.ms": "keyless records stay on one partition until batch.size bytes went there "
    "(KIP-794's sticky partitioner), not for a time",
    "statistics.interval.ms": "there are no librdkafka JSON statistics: read Producer.metrics() (the Java "
    "producer's metric names) or set metric.reporters",
    "stats_cb": "there are no librdkafka JSON statistics: read Producer.metrics() or set metric.reporters",
    "throttle_cb": "broker throttling shows in the metrics (produce-throttle-time-avg/max)",
    "debug": _LOGGING + " (logging.getLogger('kproducer').setLevel(logging.DEBUG))",
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
    "reconnect.backoff.jitter.ms": "kproducer's reconnect backoff is exponential with jitter (KIP-144), from "
    "reconnect.backoff.ms up to reconnect.backoff.max.ms: set those",
    "topic.metadata.refresh.fast.interval.ms": _METADATA,
    "topic.metadata.refresh.sparse": _METADATA,
    "topic.metadata.propagation.max.ms": "a record for a topic missing from the metadata waits for it up to "
    "max.block.ms (message.timeout.ms unless set), as in the Java producer",
    "queue.buffering.backpressure.threshold": "batches are sent when full or after linger.ms, as in the Java "
    "producer; requests in flight are bounded by max.in.flight.requests.per.connection",
    "message.copy.max.bytes": "kproducer copies every key and value into its batch buffer, as the Java producer does",
    "receive.message.max.bytes": "responses are bounded by kproducer's own requests",
    "client.rack": "only consumers use a rack (KIP-392 fetching from the closest replica); a producer writes to "
    "each partition's leader",
    "log_cb": _LOGGING,
    "sasl.kerberos.service.name": _KERBEROS,
    "sasl.kerberos.principal": _KERBEROS,
    "sasl.kerberos.kinit.cmd": _KERBEROS,
    "sasl.kerberos.keytab": _KERBEROS,
    "sasl.kerberos.min.time.before.relogin": _KERBEROS,
    "enable.sasl.oauthbearer.unsecure.jwt": "kproducer builds no unsecured JWTs: give tokens through oauth_cb, or "
    "the OIDC client-credentials settings (sasl.oauthbearer.token.endpoint.url...)",
    "sasl.oauthbearer.config": "kproducer builds no unsecured JWTs: give tokens through oauth_cb, or the OIDC "
    "client-credentials settings (sasl.oauthbearer.token.endpoint.url...)",
    "sasl.oauthbearer.extensions": "return the SASL extensions from oauth_cb: (token, expiry, principal, extensions)",
    "ssl.crl.location": _SSL_CONTEXT + " (with its revocation lists loaded and VERIFY_CRL_CHECK_LEAF set)",
    "ssl.ca.certificate.stores": _SSL_CONTEXT,
    "ssl.curves.list": _SSL_CONTEXT,
    "ssl.sigalgs.list": _SSL_CONTEXT,
    "ssl.providers": _SSL_CONTEXT,
    "ssl.engine.location": _SSL_CONTEXT,
    "ssl.engine.id": _SSL_CONTEXT,
    "ssl.certificate.verify_cb": _SSL_CONTEXT,
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
_BUFFER_MEMORY_DEFAULT = int(next(k.default for k in CONFIG_KEYS if k.name == "buffer.memory"))
_DEFAULT_MAX_MESSAGES = 100000  # queue.buffering.max.messages
_DEFAULT_MAX_KBYTES = 1048576  # queue.buffering.max.kbytes

_COMPRESSION_LEVELS = {"gzip": "compression.gzip.level", "lz4": "compression.lz4.level", "zstd": "compression.zstd.level"}


class Settings:
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
        self.error_cb: Callable[[KafkaError], Any] | None = flat.pop("error_cb", None)
        if self.error_cb is not None and not callable(self.error_cb):
            raise _config_error(f"error_cb must be callable (it is called with a KafkaError), got {self.error_cb!r}")
        self.logger = _as_logger(flat.pop("logger", None))
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
        # librdkafka spells "no host name check" 'none'; Java (and kproducer) spell it ''.
        if str(flat.get("ssl.endpoint.identification.algorithm", "")).lower() == "none":
            flat["ssl.endpoint.identification.algorithm"] = ""
        # librdkafka's OAUTHBEARER switch: 'oidc' when the token endpoint settings are given, else
        # 'default' (oauth_cb). kproducer chooses the same way from the settings themselves.
        method = flat.pop("sasl.oauthbearer.method", None)
        if method is not None and str(method).lower() not in ("default", "oidc"):
            raise _config_error(f"sasl.oauthbearer.method must be default or oidc, got {method!r}")
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
        # produce() never blocks: the queue limits above raise BufferError first. kproducer's pool holds
        # whole batch buffers (batch.size each, one per partition being filled), not only the key and
        # value bytes counted against queue.buffering.max.kbytes, so it never gets less than the Java
        # producer's default: a small kbytes limit must not leave too little memory for one batch.
        engine.setdefault("buffer.memory", max(self.max_bytes, _BUFFER_MEMORY_DEFAULT))
        self.engine = engine


def _as_logger(value: Any) -> logging.Logger | logging.LoggerAdapter[Any] | None:
    if value is None:
        return None
    if not isinstance(value, logging.Logger | logging.LoggerAdapter):
        raise _config_error(f"logger must be a logging.Logger or logging.LoggerAdapter, got {type(value).__name__}")
    underlying = value.logger if isinstance(value, logging.LoggerAdapter) else value
    if underlying.name.startswith("kproducer."):
        raise _config_error(
            f"logger must not be one of kproducer's own loggers ({underlying.name}): kproducer's records "
            "would go round in circles; give the application's logger"
        )
    return value


def _as_bool(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    raise _config_error(f"{name} must be true or false, got {value!r}")


def _config_error(message: str) -> KafkaException:
    return KafkaException(KafkaError(CODES["_INVALID_ARG"], message))
