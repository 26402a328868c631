"""Producer configuration: every key is declared once, in :data:`CONFIG_KEYS`.

Names, types, defaults and ranges follow the Java producer's ``ProducerConfig``
(Kafka 4.x), so a ``producer.properties`` file works unchanged: values may arrive
as strings ("5", "true", "all", comma lists) and are coerced here. Validation,
the snake_case aliases (``linger_ms`` for ``linger.ms``), the error messages and
``docs/configuration.md`` (``python -m kproducer.config --markdown``) are all
derived from that one table, so they cannot drift apart.

Parsed values are stored as plain instance attributes, so reading
``cfg.linger_ms`` on the hot path costs one attribute lookup.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NoReturn

from kproducer.common.loader import load_object
from kproducer.errors import ConfigError

__all__ = [
    "CONFIG_KEYS",
    "CIRCUIT_BREAKER_KEYS",
    "CIRCUIT_BREAKER_PREFIX",
    "ConfigKey",
    "Importance",
    "OneOf",
    "Password",
    "ProducerConfig",
    "Range",
    "Type",
    "coerce",
    "parse_bootstrap_servers",
    "render_markdown",
    "resolve_object",
]

logger = logging.getLogger(__name__)

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

#: Keys under this prefix other than the producer's own two (CONFIG_KEYS) are accepted and handed
#: to the circuit breaker implementation as given (KIP-693); the default breaker's are in
#: CIRCUIT_BREAKER_KEYS.
CIRCUIT_BREAKER_PREFIX = "producer.circuit.breaker."

#: security.protocol values, with Java's names.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: The SASL mechanisms kproducer speaks.
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")

#: Java allows at most this many in-flight requests per connection with idempotence.
MAX_IN_FLIGHT_FOR_IDEMPOTENCE = 5


class Type(StrEnum):
    """The Java ConfigDef types; they decide how a value (often a string) is coerced."""

    INT = "int"
    LONG = "long"
    DOUBLE = "double"
    BOOLEAN = "boolean"
    STRING = "string"
    LIST = "list"
    CLASS = "class"
    PASSWORD = "password"


class Importance(StrEnum):
    """How likely a user needs to touch the key; orders the generated reference."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class Password:
    """A secret config value: its repr and str never reveal it, so logs and errors stay clean."""

    __slots__ = ("_value",)

    HIDDEN = "[hidden]"

    def __init__(self, value: str) -> None:
        self._value = value

    @property
    def value(self) -> str:
        """The secret itself, for the code that must send it (SASL)."""
        return self._value

    def __repr__(self) -> str:
        return self.HIDDEN

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and other._value == self._value

    def __hash__(self) -> int:
        return hash((Password, self._value))

    def __reduce__(self) -> tuple[object, ...]:
        return (Password, (self._value,))


@dataclass(frozen=True, slots=True)
class Range:
    """Numeric bounds (inclusive); ``extra`` lists single values allowed outside them (gzip's -1)."""

    min: float | None = None
    max: float | None = None
    extra: tuple[float, ...] = ()

    def ok(self, value: float) -> bool:
        if value in self.extra:
            return True
        return (self.min is None or value >= self.min) and (self.max is None or value <= self.max)

    def describe(self) -> str:
        if self.min is not None and self.max is not None:
            core = f"between {_num(self.min)} and {_num(self.max)}"
        elif self.min is not None:
            core = f">= {_num(self.min)}"
        elif self.max is not None:
            core = f"<= {_num(self.max)}"
        else:
            core = ""
        if self.extra:
            alts = " or ".join(_num(v) for v in self.extra)
            return f"{alts} or {core}" if core else alts
        return core


@dataclass(frozen=True, slots=True)
class OneOf:
    """An enumeration of allowed strings; ``case_insensitive`` values are normalised to the listed spelling."""

    values: tuple[str, ...]
    case_insensitive: bool = False

    def normalise(self, value: str) -> str | None:
        if value in self.values:
            return value
        if self.case_insensitive:
            for allowed in self.values:
                if allowed.lower() == value.lower():
                    return allowed
        return None

    def describe(self) -> str:
        return "one of " + ", ".join(self.values)


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


class _NoDefault:
    """Marks a key the user must set (bootstrap.servers)."""

    def __repr__(self) -> str:
        return "NO_DEFAULT"


NO_DEFAULT: Any = _NoDefault()


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One row of the table: everything the producer knows about a key."""

    name: str
    type: Type
    default: Any
    importance: Importance
    doc: str
    validator: Range | OneOf | None = None
    aliases: tuple[str, ...] = ()
    #: For LIST keys: the type of each element (STRING or CLASS).
    element: Type = Type.STRING
    #: Maps the validated value to what the attribute holds (acks "all" -> -1).
    transform: Callable[[Any], Any] | None = None
    #: Extra sentence for the reference (what None or -1 means).
    note: str = ""

    @property
    def attr(self) -> str:
        """The snake_case attribute and keyword name."""
        return self.name.replace(".", "_")

    @property
    def required(self) -> bool:
        return self.default is NO_DEFAULT


def _acks_value(value: str) -> int:
    return -1 if value == "all" else int(value)


_S, _M, _L = Importance.HIGH, Importance.MEDIUM, Importance.LOW
_NONNEG = Range(min=0)

CONFIG_KEYS: tuple[ConfigKey, ...] = (
    # ------------------------------------------------------------------ connection
    ConfigKey(
        "bootstrap.servers",
        Type.LIST,
        NO_DEFAULT,
        _S,
        "host:port pairs used only to reach the cluster the first time; the producer then "
        "learns every broker from metadata, so a few entries are enough. IPv6 hosts go in "
        "brackets ([::1]:9092).",
    ),
    ConfigKey(
        "client.id",
        Type.STRING,
        "",
        _M,
        "A name sent with every request so that broker logs and quotas can tell clients apart. "
        "Left empty, the producer names itself producer-N.",
    ),
    ConfigKey(
        "client.dns.lookup",
        Type.STRING,
        "use_all_dns_ips",
        _M,
        "How host names are resolved: use_all_dns_ips tries every address a name resolves to; "
        "resolve_canonical_bootstrap_servers_only expands bootstrap names through their "
        "canonical names first (useful behind Kerberos or DNS aliases).",
        OneOf(("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only")),
    ),
    ConfigKey(
        "security.protocol",
        Type.STRING,
        "PLAINTEXT",
        _M,
        "The protocol spoken to brokers: PLAINTEXT, SSL (TLS), SASL_PLAINTEXT (SASL over TCP) or "
        "SASL_SSL (SASL over TLS). See docs/security.md.",
        OneOf(SECURITY_PROTOCOLS, case_insensitive=True),
    ),
    # ------------------------------------------------------------------ SASL
    ConfigKey(
        "sasl.mechanism",
        Type.STRING,
        "PLAIN",
        _M,
        "The SASL mechanism used with SASL_PLAINTEXT and SASL_SSL: PLAIN, SCRAM-SHA-256, "
        "SCRAM-SHA-512 or OAUTHBEARER. Left unset with an OAuthBearerLoginModule in "
        "sasl.jaas.config, OAUTHBEARER is used. (Java's default, GSSAPI, is Kerberos, which "
        "kproducer does not speak, so kafka-python's default PLAIN is kept instead).",
        OneOf(SASL_MECHANISMS, case_insensitive=True),
    ),
    ConfigKey(
        "sasl.jaas.config",
        Type.PASSWORD,
        None,
        _M,
        "Java's JAAS line, e.g. org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="..."; accepted so that Java and Spark settings work as they '
        "are. PlainLoginModule, ScramLoginModule and OAuthBearerLoginModule are understood; "
        "username/password (and clientId/clientSecret/scope for OAUTHBEARER) are taken from it. "
        "Never shown in logs or errors.",
    ),
    ConfigKey(
        "sasl.username",
        Type.STRING,
        None,
        _M,
        "The user name for PLAIN and SCRAM (librdkafka's name; Java puts it in sasl.jaas.config).",
    ),
    ConfigKey(
        "sasl.password",
        Type.PASSWORD,
        None,
        _M,
        "The password for PLAIN and SCRAM. Never shown in logs or errors.",
    ),
    ConfigKey(
        "sasl.oauthbearer.token.provider",
        Type.CLASS,
        None,
        _M,
        "For OAUTHBEARER: a callable (or an object with a token() method, or a 'module:Name' "
        "path) returning the token and its expiry, as (token, expiry_seconds_since_epoch), a dict "
        "with token/expires_at (or access_token/expires_in), or an object with those attributes. "
        "It is called on the producer's I/O thread for each new connection and again before the "
        "cached token expires. confluent-kafka's oauth_cb is accepted under its name.",
        aliases=("oauth_cb",),
    ),
    ConfigKey(
        "sasl.oauthbearer.token.endpoint.url",
        Type.STRING,
        None,
        _M,
        "For OAUTHBEARER without a token provider: the OAuth 2 token endpoint of the OIDC "
        "client-credentials flow (RFC 6749 section 4.4).",
    ),
    ConfigKey(
        "sasl.oauthbearer.client.id",
        Type.STRING,
        None,
        _M,
        "The client id for the client-credentials flow.",
        aliases=("sasl.oauthbearer.client.credentials.client.id",),
    ),
    ConfigKey(
        "sasl.oauthbearer.client.secret",
        Type.PASSWORD,
        None,
        _M,
        "The client secret for the client-credentials flow. Never shown in logs or errors.",
        aliases=("sasl.oauthbearer.client.credentials.client.secret",),
    ),
    ConfigKey(
        "sasl.oauthbearer.scope",
        Type.STRING,
        None,
        _L,
        "The scope asked for in the client-credentials flow (none: the endpoint's default).",
    ),
    ConfigKey(
        "sasl.login.refresh.buffer.seconds",
        Type.INT,
        300,
        _L,
        "A token is fetched again this long before it expires (Java's name and default; at most "
        "a fifth of the token's lifetime is cut, so short-lived tokens stay usable).",
        Range(min=0, max=3600),
    ),
    # ------------------------------------------------------------------ TLS
    ConfigKey(
        "ssl.protocol",
        Type.STRING,
        "TLSv1.3",
        _L,
        "Java's SSLContext protocol; accepted so that Java settings work. As in Java, the versions "
        "actually offered are those of ssl.enabled.protocols.",
        OneOf(("TLSv1.3", "TLSv1.2", "TLS"), case_insensitive=True),
    ),
    ConfigKey(
        "ssl.enabled.protocols",
        Type.LIST,
        None,
        _M,
        "The TLS versions the client may use (TLSv1.2, TLSv1.3); the lowest and highest listed "
        "bound the handshake. None: TLSv1.2 and TLSv1.3, as Java's default.",
        note="Older versions are refused: Python's ssl module and current OpenSSL disable them.",
    ),
    ConfigKey(
        "ssl.cipher.suites",
        Type.LIST,
        None,
        _L,
        "The TLS 1.2 cipher suites allowed, in OpenSSL names (ECDHE-RSA-AES128-GCM-SHA256) or as "
        "an OpenSSL cipher string; None keeps Python's secure defaults. TLS 1.3 suites are "
        "always OpenSSL's defaults.",
    ),
    ConfigKey(
        "ssl.endpoint.identification.algorithm",
        Type.STRING,
        "https",
        _M,
        "https checks that the broker's certificate names the host connected to (its DNS name "
        "or IP address); an empty string turns that check off (the certificate chain is still "
        "verified).",
        OneOf(("https", ""), case_insensitive=True),
    ),
    ConfigKey(
        "enable.ssl.certificate.verification",
        Type.BOOLEAN,
        True,
        _L,
        "librdkafka's switch: false accepts any broker certificate (no chain or host name "
        "check). For tests only; it makes TLS open to a man in the middle.",
    ),
    ConfigKey(
        "ssl.truststore.location",
        Type.STRING,
        None,
        _S,
        "A file with the CA certificates that sign the brokers' certificates: PEM, or PKCS12 "
        "with ssl.truststore.type=PKCS12. A JKS file must be converted first (the error says "
        "how). None (and no ssl.truststore.certificates): the system's default CAs.",
        aliases=("ssl.ca.location",),
    ),
    ConfigKey(
        "ssl.truststore.type",
        Type.STRING,
        "PEM",
        _L,
        "The format of ssl.truststore.location: PEM or PKCS12 (JKS is refused with the "
        "keytool command that converts it). Java's default is JKS; kproducer's is PEM.",
        OneOf(("PEM", "PKCS12", "JKS"), case_insensitive=True),
    ),
    ConfigKey(
        "ssl.truststore.password",
        Type.PASSWORD,
        None,
        _L,
        "The password of a PKCS12 truststore (often none). Never shown in logs or errors.",
    ),
    ConfigKey(
        "ssl.truststore.certificates",
        Type.PASSWORD,
        None,
        _L,
        "CA certificates given inline as PEM text, instead of a truststore file (handy in "
        "Spark, where files must be shipped to executors).",
        aliases=("ssl.ca.pem",),
    ),
    ConfigKey(
        "ssl.keystore.location",
        Type.STRING,
        None,
        _M,
        "The client's certificate for mutual TLS: a PEM file with the certificate chain (and "
        "the key, unless ssl.key.location is set), or a PKCS12 file with "
        "ssl.keystore.type=PKCS12.",
        aliases=("ssl.certificate.location",),
    ),
    ConfigKey(
        "ssl.key.location",
        Type.STRING,
        None,
        _M,
        "librdkafka's separate private key file (PEM) for the certificate in "
        "ssl.keystore.location / ssl.certificate.location.",
    ),
    ConfigKey(
        "ssl.keystore.type",
        Type.STRING,
        "PEM",
        _L,
        "The format of ssl.keystore.location: PEM or PKCS12 (JKS is refused with the keytool "
        "command that converts it).",
        OneOf(("PEM", "PKCS12", "JKS"), case_insensitive=True),
    ),
    ConfigKey(
        "ssl.keystore.password",
        Type.PASSWORD,
        None,
        _M,
        "The password of a PKCS12 keystore. Never shown in logs or errors.",
    ),
    ConfigKey(
        "ssl.key.password",
        Type.PASSWORD,
        None,
        _M,
        "The password of an encrypted private key (PEM). Never shown in logs or errors.",
    ),
    ConfigKey(
        "ssl.keystore.certificate.chain",
        Type.STRING,
        None,
        _L,
        "The client certificate chain given inline as PEM text (with ssl.keystore.key).",
        aliases=("ssl.certificate.pem",),
    ),
    ConfigKey(
        "ssl.keystore.key",
        Type.PASSWORD,
        None,
        _L,
        "The client's private key given inline as PEM text (with ssl.keystore.certificate.chain); "
        "encrypted keys use ssl.key.password. Never shown in logs or errors.",
        aliases=("ssl.key.pem",),
    ),
    ConfigKey(
        "reconnect.backoff.ms",
        Type.LONG,
        50,
        _L,
        "The first wait before reconnecting to a broker after a failed connection; doubles per "
        "consecutive failure up to reconnect.backoff.max.ms, so a dead broker is not hammered.",
        _NONNEG,
    ),
    ConfigKey(
        "reconnect.backoff.max.ms",
        Type.LONG,
        1000,
        _L,
        "The ceiling of the exponential reconnect backoff. When only reconnect.backoff.ms is "
        "set, this follows it (constant backoff), as in Java.",
        _NONNEG,
    ),
    ConfigKey(
        "socket.connection.setup.timeout.ms",
        Type.LONG,
        10000,
        _M,
        "How long a connection attempt may take before it is abandoned; grows exponentially "
        "per consecutive failure up to socket.connection.setup.timeout.max.ms.",
    ),
    ConfigKey(
        "socket.connection.setup.timeout.max.ms",
        Type.LONG,
        30000,
        _M,
        "The ceiling of the growing connection setup timeout.",
    ),
    ConfigKey(
        "connections.max.idle.ms",
        Type.LONG,
        540000,
        _M,
        "Idle connections are closed after this long; a bit under the broker's 10 minutes, so "
        "the client closes first and never writes into a connection the broker dropped.",
    ),
    ConfigKey(
        "send.buffer.bytes",
        Type.INT,
        131072,
        _M,
        "The socket send buffer (SO_SNDBUF).",
        Range(min=-1),
        note="-1 keeps the OS default.",
    ),
    ConfigKey(
        "receive.buffer.bytes",
        Type.INT,
        32768,
        _M,
        "The socket receive buffer (SO_RCVBUF).",
        Range(min=-1),
        note="-1 keeps the OS default.",
    ),
    # ------------------------------------------------------------------ delivery
    ConfigKey(
        "acks",
        Type.STRING,
        "all",
        _L,
        "How many replicas must have the batch before the broker answers: all (-1) waits for "
        "the full in-sync set and is needed for idempotence; 1 waits for the leader only; 0 "
        "does not wait for any answer, so errors go unseen. The attribute holds -1, 0 or 1.",
        OneOf(("all", "-1", "0", "1")),
        transform=_acks_value,
    ),
    ConfigKey(
        "enable.idempotence",
        Type.BOOLEAN,
        True,
        _L,
        "Give every batch a producer id and sequence number so that retries can neither "
        "duplicate nor reorder records. Needs acks=all, retries > 0 and at most 5 in-flight "
        "requests; if it is only the default and those conflict, it is switched off instead.",
    ),
    ConfigKey(
        "retries",
        Type.INT,
        INT32_MAX,
        _S,
        "How many times a batch failing with a retriable error is resent. In practice "
        "delivery.timeout.ms bounds retrying; set that instead of this.",
        Range(0, INT32_MAX),
    ),
    ConfigKey(
        "retry.backoff.ms",
        Type.LONG,
        100,
        _L,
        "The first wait before resending a failed batch or refetching metadata; grows "
        "exponentially (with jitter) up to retry.backoff.max.ms.",
        _NONNEG,
    ),
    ConfigKey(
        "retry.backoff.max.ms",
        Type.LONG,
        1000,
        _L,
        "The ceiling of the exponential retry backoff. If it is below retry.backoff.ms the "
        "backoff is constant at retry.backoff.ms.",
        _NONNEG,
    ),
    ConfigKey(
        "delivery.timeout.ms",
        Type.INT,
        120000,
        _M,
        "The upper bound on the time from send() returning to the record's callback, "
        "retries included. Must be at least linger.ms + request.timeout.ms.",
        _NONNEG,
    ),
    ConfigKey(
        "request.timeout.ms",
        Type.INT,
        30000,
        _M,
        "How long to wait for a broker's answer to one request before failing it (and "
        "retrying, if time remains).",
        _NONNEG,
    ),
    ConfigKey(
        "max.in.flight.requests.per.connection",
        Type.INT,
        5,
        _L,
        "How many requests may await an answer on one connection. Above 1 without "
        "idempotence, a retry can reorder records.",
        Range(min=1),
    ),
    # ------------------------------------------------------------------ batching and memory
    ConfigKey(
        "linger.ms",
        Type.LONG,
        5,
        _M,
        "How long a partition's batch may wait for more records before it is sent even if "
        "not full. A few milliseconds buy much larger batches (the Kafka 4.0 default is 5).",
        _NONNEG,
    ),
    ConfigKey(
        "batch.size",
        Type.INT,
        16384,
        _M,
        "The size in bytes of a partition's batch buffer; a batch is sent once full. 0 "
        "disables batching. A record larger than this gets a batch of its own.",
        _NONNEG,
    ),
    ConfigKey(
        "batch.max.size",
        Type.INT,
        262144,
        _M,
        "The most bytes a partition's batch may grow to (KIP-782). A batch is sendable once it "
        "holds batch.size bytes; while it still waits for the Sender (a hot partition: the "
        "in-flight window is full or linger.ms is not over) records keep going into it, and its "
        "buffer grows past batch.size, doubling, up to this bound, each step charged to "
        "buffer.memory. Growth never blocks: it stops while a caller waits for memory or less "
        "than four times batch.size of buffer.memory is free, and the batch then closes as before. Also bounded by "
        "max.request.size. A value at or below batch.size turns growth off. With a circuit breaker, a "
        "partition it muted does not grow past batch.size, and the batches in flight to one leader hold at "
        "most an eighth of buffer.memory past batch.size between them (a grown batch beyond that waits in "
        "its queue): a leader that stops answering keeps what it was sent.",
        _NONNEG,
    ),
    ConfigKey(
        "batch.initial.size",
        Type.INT,
        0,
        _L,
        "The bytes a new batch's buffer starts with (KIP-782); it grows by doubling, as records "
        "arrive, to batch.size (and beyond, see batch.max.size). 0 (the default) starts every "
        "batch at batch.size, the Java client's allocation, so a cold partition's batch takes "
        "batch.size from buffer.memory.",
        _NONNEG,
    ),
    ConfigKey(
        "buffer.memory",
        Type.LONG,
        33554432,
        _S,
        "The total bytes the producer may hold in unsent batches. When it is used up, "
        "send() blocks for up to max.block.ms, then fails.",
        _NONNEG,
    ),
    ConfigKey(
        "max.block.ms",
        Type.LONG,
        60000,
        _M,
        "How long send() and partitions_for() may block on metadata or buffer space before "
        "raising a timeout.",
        _NONNEG,
    ),
    ConfigKey(
        "max.request.size",
        Type.INT,
        1048576,
        _M,
        "The largest produce request in bytes; also caps a single record's size. Keep it "
        "consistent with the broker's message.max.bytes.",
        _NONNEG,
    ),
    ConfigKey(
        "compression.type",
        Type.STRING,
        "none",
        _S,
        "The codec applied to whole batches; larger batches compress better.",
        OneOf(("none", "gzip", "snappy", "lz4", "zstd"), case_insensitive=True),
    ),
    ConfigKey(
        "compression.gzip.level",
        Type.INT,
        -1,
        _M,
        "The gzip level when compression.type is gzip.",
        Range(1, 9, extra=(-1,)),
        note="-1 means the codec's default.",
    ),
    ConfigKey(
        "compression.lz4.level",
        Type.INT,
        9,
        _M,
        "The lz4 level when compression.type is lz4: the default 9 uses the fast compressor, as Java "
        "does; any other level uses LZ4 HC at that level (smaller output, slower).",
        Range(1, 17),
    ),
    ConfigKey(
        "compression.zstd.level",
        Type.INT,
        3,
        _M,
        "The zstd level when compression.type is zstd; negative levels trade ratio for speed.",
        Range(-131072, 22),
    ),
    # ------------------------------------------------------------------ partitioning
    ConfigKey(
        "partitioner.class",
        Type.CLASS,
        None,
        _M,
        "A custom partitioner (an object, class, or 'module:Name' path). None uses the "
        "built-in one: murmur2 of the key, or sticky adaptive partitioning for keyless records.",
    ),
    ConfigKey(
        "partitioner.ignore.keys",
        Type.BOOLEAN,
        False,
        _M,
        "When true the built-in partitioner ignores keys and spreads every record as if it "
        "had none, trading key affinity for balance.",
    ),
    ConfigKey(
        "partitioner.adaptive.partitioning.enable",
        Type.BOOLEAN,
        True,
        _L,
        "When true the built-in partitioner sends keyless records to faster brokers more "
        "often, judged by each broker's queue of pending batches (KIP-794).",
    ),
    ConfigKey(
        "partitioner.availability.timeout.ms",
        Type.LONG,
        0,
        _L,
        "When above 0 and adaptive partitioning is on, a partition whose leader has accepted "
        "nothing for this long is skipped for keyless records.",
        _NONNEG,
        note="0 disables the check.",
    ),
    # ------------------------------------------------------------------ serialization and plugins
    ConfigKey(
        "key.serializer",
        Type.CLASS,
        None,
        _S,
        "Turns keys into bytes (an object, class, or 'module:Name' path).",
        note="None: bytes pass through and str is UTF-8 encoded.",
    ),
    ConfigKey(
        "value.serializer",
        Type.CLASS,
        None,
        _S,
        "Turns values into bytes (an object, class, or 'module:Name' path).",
        note="None: bytes pass through and str is UTF-8 encoded.",
    ),
    ConfigKey(
        "interceptor.classes",
        Type.LIST,
        (),
        _L,
        "Interceptors that see every record before it is sent and every acknowledgement, in list order.",
        element=Type.CLASS,
    ),
    # ------------------------------------------------------------------ metadata
    ConfigKey(
        "metadata.max.age.ms",
        Type.LONG,
        300000,
        _L,
        "Metadata is refreshed at least this often, even without errors, so that new "
        "brokers and partitions are found.",
        _NONNEG,
    ),
    ConfigKey(
        "metadata.max.idle.ms",
        Type.LONG,
        300000,
        _L,
        "A topic nothing was sent to for this long is dropped from the metadata working "
        "set; the next send to it fetches its metadata again. metadata.evict.ms (KIP-526) is "
        "accepted as another name for it.",
        Range(min=5000),
        aliases=("metadata.evict.ms",),
    ),
    ConfigKey(
        "allow.auto.create.topics",
        Type.BOOLEAN,
        True,
        _L,
        "Whether metadata requests may ask the broker to create a missing topic (it does so "
        "only if its auto.create.topics.enable is on).",
    ),
    # ------------------------------------------------------------------ transactions
    ConfigKey(
        "transactional.id",
        Type.STRING,
        None,
        _L,
        "The id that makes this producer transactional: init_transactions() registers it with its "
        "transaction coordinator, fences any earlier producer with the same id and finishes that "
        "producer's open transaction. Needs idempotence (it is turned on; an explicit "
        "enable.idempotence=false is an error).",
    ),
    ConfigKey(
        "transaction.timeout.ms",
        Type.INT,
        60000,
        _L,
        "The longest a transaction may stay open before the coordinator aborts it; above the "
        "broker's transaction.max.timeout.ms, init_transactions() fails with "
        "INVALID_TRANSACTION_TIMEOUT.",
    ),
    # ------------------------------------------------------------------ metrics
    ConfigKey(
        "metrics.sample.window.ms",
        Type.LONG,
        30000,
        _L,
        "The length of one sample window of the windowed metrics (rates, averages, maxima).",
        _NONNEG,
    ),
    ConfigKey(
        "metrics.num.samples",
        Type.INT,
        2,
        _L,
        "How many sample windows the windowed metrics keep.",
        Range(min=1),
    ),
    ConfigKey(
        "metrics.recording.level",
        Type.STRING,
        "INFO",
        _L,
        "The most detailed level of sensors that record; DEBUG adds the costlier ones.",
        OneOf(("INFO", "DEBUG"), case_insensitive=True),
    ),
    ConfigKey(
        "metric.reporters",
        Type.LIST,
        (),
        _L,
        "Where the producer's metrics are reported, besides metrics(): 'prometheus' (a "
        "prometheus_client collector), 'opentelemetry' (instruments on the global "
        "MeterProvider's meter), or a 'module:Name' path to a class with configure(configs), "
        "init(metrics, client_id) and close().",
        element=Type.CLASS,
    ),
    ConfigKey(
        "metrics.prometheus.port",
        Type.INT,
        None,
        _L,
        "With the prometheus reporter: also serve prometheus_client's registry over HTTP on this "
        "port (started once per process; 0 picks a free port).",
        Range(min=0, max=65535),
        note="None: no server; the application serves the registry itself.",
    ),
    ConfigKey(
        "metrics.prometheus.addr",
        Type.STRING,
        "127.0.0.1",
        _L,
        "The address the metrics.prometheus.port server listens on; 0.0.0.0 for every interface.",
    ),
    # ------------------------------------------------------------------ circuit breaker (KIP-693)
    ConfigKey(
        "producer.circuit.breaker.class",
        Type.CLASS,
        None,
        _L,
        "A partition circuit breaker that can mute partitions failing too often (an object, "
        "class, or 'module:Name' path). Every other producer.circuit.breaker.* key is passed "
        "to it unvalidated.",
        note="None: no breaker.",
    ),
    ConfigKey(
        "producer.circuit.breaker.keyed.reroute",
        Type.BOOLEAN,
        True,
        _L,
        "Whether records with a key may go to another partition while their partition is "
        "muted; true favours availability over per-key ordering.",
    ),
)

#: The default circuit breaker's keys (producer.circuit.breaker.class=failure_rate, KIP-693's
#: FailureRateCircuitBreaker). Declared here like every key, so the reference, the defaults and
#: the error messages come from one place, but not in CONFIG_KEYS: ProducerConfig hands every
#: producer.circuit.breaker.* key other than its own two to the configured breaker as given (a
#: breaker class of the user's reads its own keys its own way), and the default breaker checks
#: these with :func:`coerce` when the producer builds it.
CIRCUIT_BREAKER_KEYS: tuple[ConfigKey, ...] = (
    ConfigKey(
        "producer.circuit.breaker.trigger.message.count",
        Type.INT,
        100,
        _L,
        "The breaker acts on a partition only once its window holds at least this many records "
        "(a batch counts as many records as it holds).",
        Range(min=1),
    ),
    ConfigKey(
        "producer.circuit.breaker.trigger.failure.perc",
        Type.INT,
        50,
        _L,
        "The percentage of failed records in the window at or above which the partition is muted.",
        Range(min=1, max=100),
    ),
    ConfigKey(
        "producer.circuit.breaker.window.ms",
        Type.INT,
        10000,
        _L,
        "The sliding window the records are counted over, in ten buckets: a record counts for "
        "this long, to within a bucket.",
        Range(min=1),
    ),
    ConfigKey(
        "producer.circuit.breaker.mute.retry.interval",
        Type.INT,
        5000,
        _L,
        "Milliseconds a muted partition waits before it is half-open: it takes records again "
        "until one probe batch is drained, whose success unmutes it and whose failure mutes it "
        "for another interval.",
        Range(min=0),
    ),
    ConfigKey(
        "producer.circuit.breaker.enable.mute.inflight.full",
        Type.BOOLEAN,
        False,
        _L,
        "With max.in.flight.requests.per.connection=1, also mute a leader's partitions while its "
        "one in-flight request is outstanding (lifted when it is answered).",
    ),
)

_KEYS: dict[str, ConfigKey] = {k.name: k for k in CONFIG_KEYS}
# Every spelling a user may pass, mapped to the declared key.
_LOOKUP: dict[str, ConfigKey] = {}
for _key in CONFIG_KEYS:
    for _spelling in (_key.name, *_key.aliases):
        _LOOKUP[_spelling] = _key
        _LOOKUP[_spelling.replace(".", "_")] = _key
del _key, _spelling

_SUGGESTIONS: tuple[str, ...] = tuple(sorted(_LOOKUP))


# ---------------------------------------------------------------------------- errors


def _fail(key: ConfigKey, expected: str, value: Any) -> NoReturn:
    if key.type is Type.PASSWORD and value is not None:
        text = Password.HIDDEN
    elif isinstance(value, str):
        text = repr(value)
    else:
        text = str(value)
    raise ConfigError(f"{key.name} must be {expected}, got {text}")


def _dotted(name: str) -> str:
    """A snake_case spelling turned back into a dotted name; dotted names are kept as given."""
    return name if "." in name else name.replace("_", ".")


def _declared_spelling(raw_name: str, key: ConfigKey) -> str:
    """Which declared spelling (the Java name or an alias) ``raw_name`` is, in dotted form."""
    for spelling in key.aliases:
        if raw_name in (spelling, spelling.replace(".", "_")):
            return spelling
    return key.name


def _unknown(name: str) -> NoReturn:
    dotted = name.replace("_", ".")
    import difflib  # only on this error path: it is slow to import

    close = difflib.get_close_matches(dotted, _SUGGESTIONS, n=3, cutoff=0.6)
    close += [c for c in difflib.get_close_matches(name, _SUGGESTIONS, n=3, cutoff=0.6) if c not in close]
    names: list[str] = []
    for c in close:
        java = _LOOKUP[c].name if c not in _LOOKUP[c].aliases else c
        if java not in names:
            names.append(java)
    names = names[:3]
    if not names:
        raise ConfigError(f"unknown config {name!r}")
    if len(names) == 1:
        raise ConfigError(f"unknown config {name!r}; did you mean {names[0]!r}?")
    raise ConfigError(f"unknown config {name!r}; did you mean one of {', '.join(repr(n) for n in names)}?")


def _expected(key: ConfigKey) -> str:
    kind = {
        Type.INT: "an integer",
        Type.LONG: "an integer",
        Type.DOUBLE: "a number",
        Type.BOOLEAN: "a boolean (true or false)",
        Type.STRING: "a string",
        Type.LIST: "a list (or a comma-separated string)",
        Type.CLASS: "an object, a class or a 'module:Name' path",
        Type.PASSWORD: "a string",
    }[key.type]
    if isinstance(key.validator, OneOf):
        return key.validator.describe()
    if isinstance(key.validator, Range):
        return f"{kind} {key.validator.describe()}"
    return kind


# ---------------------------------------------------------------------------- coercion


def resolve_object(path: str) -> Any:
    """Import ``'pkg.mod:Name'`` or ``'pkg.mod.Name'``; class-typed keys accept such paths as Java accepts class names."""
    return load_object(path)


def _coerce_int(key: ConfigKey, value: Any) -> int:
    if isinstance(value, bool):
        _fail(key, _expected(key), value)
    if isinstance(value, int):
        result = value
    elif isinstance(value, float) and value.is_integer():
        result = int(value)
    elif isinstance(value, str):
        try:
            result = int(value.strip())
        except ValueError:
            _fail(key, _expected(key), value)
    else:
        _fail(key, _expected(key), value)
    lo, hi = (INT32_MIN, INT32_MAX) if key.type is Type.INT else (INT64_MIN, INT64_MAX)
    if not lo <= result <= hi:
        _fail(key, f"{_expected(key)} that fits a {key.type.value}", result)
    return result


def _coerce_double(key: ConfigKey, value: Any) -> float:
    if isinstance(value, bool):
        _fail(key, _expected(key), value)
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value.strip())
        except ValueError:
            pass
    _fail(key, _expected(key), value)


def _coerce_bool(key: ConfigKey, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text == "true":
            return True
        if text == "false":
            return False
    _fail(key, _expected(key), value)


def _coerce_class(key: ConfigKey, value: Any) -> Any:
    """Strings stay strings: each key's resolver knows its short names ("json", "round_robin",
    Java class names) as well as dotted paths, and raises a ConfigError naming the key."""
    if isinstance(value, str):
        path = value.strip()
        if not path:
            raise ConfigError(f"{key.name} must not be an empty string")
        return path
    return value


def _coerce_list(key: ConfigKey, value: Any) -> tuple[Any, ...]:
    if isinstance(value, str):
        text = value.strip()
        items: list[Any] = [] if not text else [p.strip() for p in text.split(",")]
    elif isinstance(value, list | tuple):
        items = [v.strip() if isinstance(v, str) else v for v in value]
    else:
        _fail(key, _expected(key), value)
    for item in items:
        if item == "" or item is None:
            raise ConfigError(f"{key.name} must not contain empty entries, got {value!r}")
        if key.element is Type.STRING and not isinstance(item, str):
            _fail(key, "a list of strings", value)
    strings = [i for i in items if isinstance(i, str)]
    dupes = sorted({s for s in strings if strings.count(s) > 1})
    if dupes:
        raise ConfigError(f"{key.name} must not list an entry twice, got duplicate {', '.join(dupes)}")
    if key.element is Type.CLASS:
        items = [_coerce_class(key, i) for i in items]
    return tuple(items)


def coerce(key: ConfigKey, value: Any) -> Any:
    """One value of a declared key as ProducerConfig parses it, for the keys read by other owners
    (CIRCUIT_BREAKER_KEYS); ConfigError names the key and what is allowed."""
    return _coerce(key, value)


def _coerce(key: ConfigKey, value: Any) -> Any:
    """Turn one user value into the key's Python value, or raise ConfigError saying what is allowed."""
    if value is None:
        if key.default is None:
            return None
        _fail(key, _expected(key), None)
    t = key.type
    result: Any
    if t is Type.INT or t is Type.LONG:
        result = _coerce_int(key, value)
    elif t is Type.DOUBLE:
        result = _coerce_double(key, value)
    elif t is Type.BOOLEAN:
        result = _coerce_bool(key, value)
    elif t is Type.STRING:
        if isinstance(value, int) and not isinstance(value, bool) and isinstance(key.validator, OneOf):
            value = str(value)  # acks=1 given as a number
        if not isinstance(value, str):
            _fail(key, _expected(key), value)
        result = value.strip()
    elif t is Type.PASSWORD:
        if isinstance(value, Password):
            result = value
        elif isinstance(value, str):
            result = Password(value)
        else:
            _fail(key, _expected(key), value)
    elif t is Type.LIST:
        result = _coerce_list(key, value)
    else:
        result = _coerce_class(key, value)

    validator = key.validator
    if isinstance(validator, Range):
        if not validator.ok(result):
            _fail(key, _expected(key), result)
    elif isinstance(validator, OneOf):
        normalised = validator.normalise(result)
        if normalised is None:
            _fail(key, _expected(key), result)
        result = normalised
    if key.transform is not None:
        result = key.transform(result)
    return result


_HOST_PORT = re.compile(
    r"^(?:[A-Za-z][A-Za-z0-9+.\-_]*://)?(?:\[(?P<v6>[0-9A-Fa-f:.%A-Za-z]+)\]|(?P<host>[^:\[\]/\s]+)):(?P<port>\d+)$"
)


def parse_bootstrap_servers(value: str | Iterable[str]) -> list[tuple[str, int]]:
    """Parse ``host:port`` entries (``[v6]:port``, an optional ``scheme://``) as Java's ClientUtils does.

    Shared with the network layer, so that the config and the connection code agree on what an
    address is. Raises ConfigError naming the first entry that does not parse.
    """
    entries = (
        [p.strip() for p in value.split(",")] if isinstance(value, str) else [str(v).strip() for v in value]
    )
    result: list[tuple[str, int]] = []
    for entry in entries:
        m = _HOST_PORT.match(entry)
        port = int(m.group("port")) if m else -1
        if m is None or not 0 < port <= 65535:
            raise ConfigError(
                f"bootstrap.servers entry {entry!r} is not host:port (IPv6 as [addr]:port, port 1-65535)"
            )
        result.append((m.group("v6") or m.group("host"), port))
    if not result:
        raise ConfigError("bootstrap.servers must list at least one host:port")
    return result


# ---------------------------------------------------------------------------- the config object


class ProducerConfig:
    """The validated producer configuration; every key is an attribute named in snake_case.

    ``config`` holds Java names (``{"linger.ms": "5"}``), ``kwargs`` snake_case names
    (``linger_ms=5``); either spelling is accepted in both, and kwargs win over config.
    """

    # Typed view of the table for callers and mypy; tests check it matches CONFIG_KEYS exactly.
    bootstrap_servers: tuple[str, ...]
    client_id: str
    client_dns_lookup: str
    security_protocol: str
    sasl_mechanism: str
    sasl_jaas_config: Password | None
    sasl_username: str | None
    sasl_password: Password | None
    sasl_oauthbearer_token_provider: Any
    sasl_oauthbearer_token_endpoint_url: str | None
    sasl_oauthbearer_client_id: str | None
    sasl_oauthbearer_client_secret: Password | None
    sasl_oauthbearer_scope: str | None
    sasl_login_refresh_buffer_seconds: int
    ssl_protocol: str
    ssl_enabled_protocols: tuple[str, ...] | None
    ssl_cipher_suites: tuple[str, ...] | None
    ssl_endpoint_identification_algorithm: str
    enable_ssl_certificate_verification: bool
    ssl_truststore_location: str | None
    ssl_truststore_type: str
    ssl_truststore_password: Password | None
    ssl_truststore_certificates: Password | None
    ssl_keystore_location: str | None
    ssl_key_location: str | None
    ssl_keystore_type: str
    ssl_keystore_password: Password | None
    ssl_key_password: Password | None
    ssl_keystore_certificate_chain: str | None
    ssl_keystore_key: Password | None
    reconnect_backoff_ms: int
    reconnect_backoff_max_ms: int
    socket_connection_setup_timeout_ms: int
    socket_connection_setup_timeout_max_ms: int
    connections_max_idle_ms: int
    send_buffer_bytes: int
    receive_buffer_bytes: int
    acks: int
    enable_idempotence: bool
    retries: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    delivery_timeout_ms: int
    request_timeout_ms: int
    max_in_flight_requests_per_connection: int
    linger_ms: int
    batch_size: int
    batch_max_size: int
    batch_initial_size: int
    buffer_memory: int
    max_block_ms: int
    max_request_size: int
    compression_type: str
    compression_gzip_level: int
    compression_lz4_level: int
    compression_zstd_level: int
    partitioner_class: Any
    partitioner_ignore_keys: bool
    partitioner_adaptive_partitioning_enable: bool
    partitioner_availability_timeout_ms: int
    key_serializer: Any
    value_serializer: Any
    interceptor_classes: tuple[Any, ...]
    metadata_max_age_ms: int
    metadata_max_idle_ms: int
    allow_auto_create_topics: bool
    transactional_id: str | None
    transaction_timeout_ms: int
    metrics_sample_window_ms: int
    metrics_num_samples: int
    metrics_recording_level: str
    metric_reporters: tuple[Any, ...]
    metrics_prometheus_port: int | None
    metrics_prometheus_addr: str
    producer_circuit_breaker_class: Any
    producer_circuit_breaker_keyed_reroute: bool

    originals: dict[str, Any]
    _values: dict[str, Any]
    _passthrough: dict[str, Any]
    _frozen: bool

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        object.__setattr__(self, "_frozen", False)
        originals: dict[str, Any] = {}
        passthrough: dict[str, Any] = {}
        for source in (config or {}, kwargs):
            seen_here: dict[str, str] = {}
            for raw_name, value in source.items():
                if not isinstance(raw_name, str):
                    raise ConfigError(f"config names must be strings, got {raw_name!r}")
                key = _LOOKUP.get(raw_name)
                if key is None:
                    dotted = _dotted(raw_name)
                    if dotted.startswith(CIRCUIT_BREAKER_PREFIX) and len(dotted) > len(
                        CIRCUIT_BREAKER_PREFIX
                    ):
                        passthrough[dotted] = value
                        continue
                    _unknown(raw_name)
                if key.type is Type.PASSWORD and isinstance(value, str):
                    value = Password(value)  # keep secrets out of originals' reprs too
                spelling = _declared_spelling(raw_name, key)
                if key.name in seen_here and seen_here[key.name] != spelling:
                    # ssl.ca.location and ssl.truststore.location both given: which one was meant?
                    raise ConfigError(
                        f"{key.name} given twice, as {seen_here[key.name]!r} and {spelling!r} "
                        f"(the same setting under two names); keep one"
                    )
                if key.name in seen_here and originals[key.name] != value:
                    raise ConfigError(
                        f"{key.name} given twice with different values (as {seen_here[key.name]!r} "
                        f"and {raw_name!r})"
                    )
                seen_here[key.name] = spelling
                originals[key.name] = value

        values: dict[str, Any] = {}
        for key in CONFIG_KEYS:
            if key.name in originals:
                values[key.name] = _coerce(key, originals[key.name])
            elif key.required:
                raise ConfigError(f"missing required config {key.name!r} ({key.attr}=...)")
            else:
                default = key.default
                values[key.name] = key.transform(default) if key.transform else default

        self._post_validate(values, originals)
        object.__setattr__(self, "originals", dict(originals, **passthrough))
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "_passthrough", passthrough)
        for key in CONFIG_KEYS:
            object.__setattr__(self, key.attr, values[key.name])
        object.__setattr__(self, "_frozen", True)

    # ------------------------------------------------------------------ cross-field rules

    @staticmethod
    def _post_validate(values: dict[str, Any], originals: Mapping[str, Any]) -> None:
        """The Java producer's cross-key rules (ProducerConfig.postProcessParsedConfig, KafkaProducer)."""
        parse_bootstrap_servers(values["bootstrap.servers"])

        transactional_id = values["transactional.id"]
        if transactional_id is not None:
            if transactional_id == "":
                raise ConfigError("transactional.id must not be empty: leave it unset for a non-transactional producer")
            if "enable.idempotence" in originals and not values["enable.idempotence"]:
                raise ConfigError(
                    "transactional.id is set but enable.idempotence is false: a transactional producer "
                    "is idempotent; remove enable.idempotence=false or transactional.id"
                )
            values["enable.idempotence"] = True
            conflicts_txn = []
            if values["acks"] != -1:
                conflicts_txn.append(f"acks is {values['acks']} (it must be all)")
            if values["retries"] == 0:
                conflicts_txn.append("retries is 0 (it must be > 0)")
            if values["max.in.flight.requests.per.connection"] > MAX_IN_FLIGHT_FOR_IDEMPOTENCE:
                conflicts_txn.append(
                    f"max.in.flight.requests.per.connection is {values['max.in.flight.requests.per.connection']} "
                    f"(it must be at most {MAX_IN_FLIGHT_FOR_IDEMPOTENCE})"
                )
            if conflicts_txn:
                raise ConfigError(
                    f"transactional.id is set, but {'; '.join(conflicts_txn)}: a transactional producer "
                    "needs idempotent delivery"
                )

        if values["enable.idempotence"]:
            explicit = "enable.idempotence" in originals
            conflicts: list[str] = []
            if values["retries"] == 0:
                conflicts.append("retries is 0 (it must be > 0)")
            if values["acks"] != -1:
                conflicts.append(f"acks is {values['acks']} (it must be all)")
            in_flight = values["max.in.flight.requests.per.connection"]
            if in_flight > MAX_IN_FLIGHT_FOR_IDEMPOTENCE:
                conflicts.append(
                    f"max.in.flight.requests.per.connection is {in_flight} "
                    f"(it must be at most {MAX_IN_FLIGHT_FOR_IDEMPOTENCE})"
                )
            if conflicts:
                if explicit:
                    raise ConfigError(
                        "enable.idempotence is true, but "
                        + "; ".join(conflicts)
                        + ": the idempotent producer cannot guarantee no duplicates and ordering otherwise"
                    )
                logger.info("idempotence disabled because %s", "; ".join(conflicts))
                values["enable.idempotence"] = False

        linger, request_timeout = values["linger.ms"], values["request.timeout.ms"]
        floor = min(linger + request_timeout, INT32_MAX)
        if values["delivery.timeout.ms"] < floor:
            if "delivery.timeout.ms" in originals:
                raise ConfigError(
                    f"delivery.timeout.ms must be >= linger.ms + request.timeout.ms "
                    f"({linger} + {request_timeout} = {floor}), got {values['delivery.timeout.ms']}"
                )
            logger.warning(
                "delivery.timeout.ms raised to %d (linger.ms + request.timeout.ms), since its default "
                "%d is below that",
                floor,
                values["delivery.timeout.ms"],
            )
            values["delivery.timeout.ms"] = floor

        if "reconnect.backoff.ms" in originals and "reconnect.backoff.max.ms" not in originals:
            # Java: setting only the base backoff means a constant backoff.
            values["reconnect.backoff.max.ms"] = values["reconnect.backoff.ms"]
        if values["retry.backoff.ms"] > values["retry.backoff.max.ms"]:
            logger.warning(
                "retry.backoff.ms (%d) is above retry.backoff.max.ms (%d): a constant backoff of %d ms applies",
                values["retry.backoff.ms"],
                values["retry.backoff.max.ms"],
                values["retry.backoff.ms"],
            )
        if values["socket.connection.setup.timeout.ms"] > values["socket.connection.setup.timeout.max.ms"]:
            logger.warning(
                "socket.connection.setup.timeout.ms is above socket.connection.setup.timeout.max.ms; "
                "the max applies"
            )

        _validate_security(values, originals)

    # ------------------------------------------------------------------ access

    def get(self, java_name: str) -> Any:
        """The value of a key by its Java name (or alias, or snake_case name)."""
        key = _LOOKUP.get(java_name)
        if key is not None:
            return self._values[key.name]
        dotted = _dotted(java_name)
        if dotted in self._passthrough:
            return self._passthrough[dotted]
        if dotted.startswith(CIRCUIT_BREAKER_PREFIX):
            return None
        _unknown(java_name)

    def explicitly_set(self, java_name: str) -> bool:
        """Whether the user gave this key (the cross-field rules differ for defaults, as in Java)."""
        key = _LOOKUP.get(java_name)
        if key is None:
            dotted = _dotted(java_name)
            if dotted.startswith(CIRCUIT_BREAKER_PREFIX):
                return dotted in self._passthrough
            _unknown(java_name)
        return key.name in self.originals

    def prefixed(self, prefix: str, *, strip: bool = False) -> dict[str, Any]:
        """All keys starting with ``prefix``: declared ones parsed, the rest (circuit breaker options) as given.

        ``strip=True`` removes the prefix from the returned names, like Java's originalsWithPrefix.
        """
        out: dict[str, Any] = {}
        for name, value in self._values.items():
            if name.startswith(prefix):
                out[name] = value
        for name, value in self._passthrough.items():
            if name.startswith(prefix):
                out[name] = value
        if strip:
            return {name[len(prefix) :]: value for name, value in out.items()}
        return out

    def as_dict(self) -> dict[str, Any]:
        """Every key by Java name with its effective value (passwords stay wrapped)."""
        return {**self._values, **self._passthrough}

    def with_overrides(self, config: Mapping[str, Any] | None = None, **kwargs: Any) -> ProducerConfig:
        """A new config from this one's originals plus overrides, validated again."""
        merged: dict[str, Any] = dict(self.originals)
        for source in (config or {}, kwargs):
            for name, value in source.items():
                key = _LOOKUP.get(name)
                merged[key.name if key else _dotted(name)] = value
        return ProducerConfig(merged)

    def __getattr__(self, name: str) -> Any:
        # Only reached for names that are not keys: say which key was probably meant.
        if name.startswith("__"):
            raise AttributeError(name)
        import difflib

        close = difflib.get_close_matches(name, [k.attr for k in CONFIG_KEYS], n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise AttributeError(f"ProducerConfig has no attribute {name!r}{hint}")

    def __setattr__(self, name: str, value: Any) -> None:
        if self._frozen:
            raise AttributeError("ProducerConfig is immutable; use with_overrides()")
        object.__setattr__(self, name, value)

    def _identity(self) -> tuple[tuple[str, Any], ...]:
        def freeze(v: Any) -> Any:
            return tuple(freeze(x) for x in v) if isinstance(v, list | tuple) else v

        return tuple(sorted((k, freeze(v)) for k, v in self.as_dict().items() if _hashable(freeze(v))))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ProducerConfig) and self.as_dict() == other.as_dict()

    def __hash__(self) -> int:
        return hash(self._identity())

    def __repr__(self) -> str:
        shown = ", ".join(f"{k!r}: {v!r}" for k, v in sorted(self.originals.items()))
        return f"ProducerConfig({{{shown}}})"

    def __reduce__(self) -> tuple[object, ...]:
        return (ProducerConfig, (self.originals,))


def _validate_security(values: dict[str, Any], originals: Mapping[str, Any]) -> None:
    """The SASL and TLS rules that span keys; the SSLContext itself is built (and its files read)
    by the network layer, once per producer."""
    from kproducer.network.sasl import resolve_sasl_settings

    protocol = values["security.protocol"]
    if protocol.startswith("SASL_"):
        # Raises ConfigError naming the missing or conflicting setting.
        resolve_sasl_settings(values, mechanism_explicit="sasl.mechanism" in originals)
    else:
        stray = sorted(k for k in originals if k.startswith("sasl.") and originals[k] is not None)
        if stray:
            logger.warning("%s ignored: security.protocol is %s", ", ".join(stray), protocol)
    if not protocol.endswith("SSL"):
        stray = sorted(
            k for k in originals if (k.startswith("ssl.") or k.startswith("enable.ssl")) and originals[k] is not None
        )
        if stray:
            logger.warning("%s ignored: security.protocol is %s (no TLS)", ", ".join(stray), protocol)
    enabled = values["ssl.enabled.protocols"]
    if enabled is not None:
        bad = [p for p in enabled if p not in ("TLSv1.2", "TLSv1.3")]
        if bad or not enabled:
            raise ConfigError(
                f"ssl.enabled.protocols must list TLSv1.2 and/or TLSv1.3, got {', '.join(enabled) or 'nothing'}"
            )


def _hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True


# ---------------------------------------------------------------------------- reference


def _show_default(key: ConfigKey) -> str:
    if key.required:
        return "(required)"
    d = key.default
    if d is None:
        return "None"
    if isinstance(d, bool):
        return "true" if d else "false"
    if isinstance(d, tuple):
        return "[]"
    if isinstance(d, str):
        return f'"{d}"'
    return str(d)


def _show_valid(key: ConfigKey) -> str:
    if isinstance(key.validator, OneOf):
        return ", ".join(key.validator.values)
    if isinstance(key.validator, Range):
        return key.validator.describe()
    if key.name == "bootstrap.servers":
        return "host:port, ..."
    return ""


_IMPORTANCE_ORDER = {Importance.HIGH: 0, Importance.MEDIUM: 1, Importance.LOW: 2}


def _reference_order(key: ConfigKey) -> tuple[bool, int, str]:
    return (not key.required, _IMPORTANCE_ORDER[key.importance], key.name)


def render_markdown() -> str:
    """The configuration reference, generated from CONFIG_KEYS (docs/configuration.md)."""
    lines = [
        "# kproducer configuration",
        "",
        "<!-- Generated by `python -m kproducer.config --markdown`; do not edit by hand. -->",
        "",
        "Keys use the Java producer's names and defaults, so a `producer.properties` file works as is:",
        'string values are coerced (`"5"` to 5, `"true"` to true, comma-separated lists). Each key can',
        "also be given as a snake_case keyword (`ProducerConfig(bootstrap_servers=..., linger_ms=10)`) and",
        "is read back as an attribute of that name (`cfg.linger_ms`). Unknown keys are rejected with",
        "suggestions. Any other `producer.circuit.breaker.*` key is accepted and passed to the circuit",
        "breaker unvalidated.",
        "",
        *_markdown_table(sorted(CONFIG_KEYS, key=_reference_order)),
        "",
        "## The default circuit breaker's keys",
        "",
        "Read by the default breaker (`producer.circuit.breaker.class` = `failure_rate`, KIP-693's",
        "FailureRateCircuitBreaker) when the producer creates it; a bad value, or a",
        "`producer.circuit.breaker.*` key it does not know, then fails with an error naming the key. The",
        "producer itself passes them to whichever breaker is configured as they were given. They are not",
        "attributes of the config; the snake_case spelling is accepted as a keyword.",
        "",
        *_markdown_table(CIRCUIT_BREAKER_KEYS),
        "",
    ]
    return "\n".join(lines)


def _markdown_table(keys: Iterable[ConfigKey]) -> list[str]:
    lines = [
        "| Key | Python name | Type | Default | Valid values | Importance | Description |",
        "|---|---|---|---|---|---|---|",
    ]
    for key in keys:
        doc = key.doc + (f" {key.note}" if key.note else "")
        if key.aliases:
            doc += " Also accepted as: " + ", ".join(f"`{a}`" for a in key.aliases) + "."
        cells = [
            f"`{key.name}`",
            f"`{key.attr}`",
            key.type.value if key.type is not Type.LIST else f"list of {key.element.value}",
            f"`{_show_default(key)}`",
            _show_valid(key),
            key.importance.value,
            doc.replace("|", "\\|"),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def main(argv: list[str] | None = None) -> int:
    """``python -m kproducer.config --markdown`` writes the reference to stdout."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m kproducer.config", description=__doc__)
    parser.add_argument("--markdown", action="store_true", help="print docs/configuration.md")
    args = parser.parse_args(argv)
    if not args.markdown:
        parser.print_help(sys.stderr)
        return 2
    sys.stdout.write(render_markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
