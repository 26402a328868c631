"""The producer's keys: one declarative row per key, the one place each key is defined.

This module is over the ~600-line guideline on purpose: it is data, not logic. Each
``ConfigKey`` row holds a key's Java name, type, default, valid values, importance, aliases and
doc, and everything else is derived from these rows: the validation and coercion in
:mod:`kproducer.config.parsing`, the snake_case aliases, the error messages, the typed attributes
of :class:`~kproducer.config.ProducerConfig` and ``docs/configuration.md``
(``python -m kproducer.config --markdown``). Splitting the table would give a key two places to
be looked for and the reference two sources to be generated from.
"""

from __future__ import annotations

from kproducer.config.config_def import INT32_MAX, NO_DEFAULT, ConfigKey, Importance, OneOf, Range, Type

#: Keys under this prefix other than the producer's own two (CONFIG_KEYS) are accepted and handed
#: to the circuit breaker implementation as given (KIP-693); the default breaker's are in
#: CIRCUIT_BREAKER_KEYS.
CIRCUIT_BREAKER_PREFIX = "producer.circuit.breaker."

#: security.protocol values, with Java's names.
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
#: The SASL mechanisms kproducer speaks.
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


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
        "brackets ([::1]:9092). A listener prefix (SSL://host:port) must name the "
        "security.protocol in use: the protocol is never taken from the address.",
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
        "ssl.context",
        Type.CLASS,
        None,
        _L,
        "A ready Python ssl.SSLContext (or a 'module:Name' path to one), used as it is for SSL and "
        "SASL_SSL instead of a context built from the other ssl.* keys, which must then be left unset. "
        "It is what aiokafka and kafka-python programs pass as ssl_context.",
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
        -1,
        _M,
        "The socket send buffer (SO_SNDBUF); -1 keeps the OS default, which Linux grows with the "
        "connection (tcp_wmem). Java's default is 131072; kproducer, like librdkafka and "
        "kafka-python, leaves it to the OS: a request larger than the buffer is written in several "
        "rounds, and the Sender thread waits up to one GIL switch interval for each "
        "(measured in benchmarks/RESULTS.md).",
        Range(min=-1),
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
        "not full. A few milliseconds buy much larger batches (the Kafka 4.0 default is 5). "
        "While the producer's I/O thread is kept busy by requests of many small batches "
        "(keyed records over many partitions, sent as fast as the application can), batches "
        "wait longer, up to 250 ms, and fill up to four times batch.size (within "
        "batch.max.size); full batches, flush(), close() and a thread waiting for "
        "buffer.memory never wait for that (docs/operability.md).",
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
        "arrive, to batch.size (and beyond, see batch.max.size), each step charged to "
        "buffer.memory and never waiting. 0 (the default): batch.size, the Java client's "
        "allocation, except, without compression, for a partition whose last batch went out "
        "with less than a quarter of batch.size: its next batch starts at four times that "
        "batch's size, at least 4 KiB, so that many partitions sending a few records a batch do "
        "not fill buffer.memory with empty buffers. A value at or above batch.size gives every "
        "batch batch.size.",
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
        "A custom partitioner (an object, class, or 'module:Name' path), 'round_robin', or one of "
        "librdkafka's policies by name: 'consistent_random' (confluent-kafka's default, CRC32 of the key), "
        "'consistent', 'murmur2_random', 'murmur2', 'fnv1a', 'fnv1a_random', 'random' "
        "(see docs/migrating.md). None uses the built-in one: murmur2 of the key, or sticky adaptive "
        "partitioning for keyless records.",
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
    # ------------------------------------------------------------------ tracing (OpenTelemetry)
    ConfigKey(
        "tracing.enabled",
        Type.BOOLEAN,
        True,
        _L,
        "OpenTelemetry tracing of sends, bulk calls and transactions, following the messaging "
        "semantic conventions for Kafka: a PRODUCER span per record, parented on the caller's "
        "current context, ended when the record is acknowledged or fails, and the W3C trace "
        "context injected into the record's headers. It only takes effect once the application "
        "has set a tracer provider (opentelemetry.trace.set_tracer_provider) and "
        "opentelemetry-api is installed (kproducer[opentelemetry]); false turns it off for this "
        "producer whatever the application configured. See docs/operability.md.",
    ),
    ConfigKey(
        "tracing.bulk.headers",
        Type.BOOLEAN,
        False,
        _L,
        "With tracing on: also put the trace context of a send_batch() or send_arrow() call's "
        "span into every row's headers (one traceparent per row, the call's). Off by default "
        "because it adds some 70 bytes to each record of calls that are usually about volume.",
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
