"""ProducerConfig: the validated configuration object and the Java producer's cross-key rules.

Parsed values are stored as plain instance attributes, so reading ``cfg.linger_ms`` on the hot
path costs one attribute lookup.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, NoReturn

from kproducer.config.config_def import INT32_MAX, Password, Type
from kproducer.config.keys import CIRCUIT_BREAKER_PREFIX, CONFIG_KEYS
from kproducer.config.parsing import (
    _LOOKUP,
    _coerce,
    _declared_spelling,
    _dotted,
    _unknown,
    check_bootstrap_schemes,
    parse_bootstrap_servers,
)
from kproducer.errors import ConfigError

# The package's name, which the log lines of the cross-key rules have always carried.
logger = logging.getLogger("kproducer.config")

#: Java allows at most this many in-flight requests per connection with idempotence.
MAX_IN_FLIGHT_FOR_IDEMPOTENCE = 5


class ProducerConfig:
    """The validated producer configuration; every key is an attribute named in snake_case.

    ``config`` holds Java names (``{"linger.ms": "5"}``), ``kwargs`` snake_case names
    (``linger_ms=5``); either spelling is accepted in both. A key given twice (two spellings in
    one place, or in both) is a ConfigError naming both: no spelling silently wins.
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
    ssl_context: Any
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
    tracing_enabled: bool
    tracing_bulk_headers: bool
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
        # Each key's first spelling and where it came from: a second one, in any spelling and either
        # place, is an error (which one was meant?) rather than one silently winning.
        seen: dict[str, tuple[str, str]] = {}
        for source, where in ((config or {}, "the config dict"), (kwargs, "the keyword arguments")):
            for raw_name, value in source.items():
                if not isinstance(raw_name, str):
                    raise ConfigError(f"config names must be strings, got {raw_name!r}")
                key = _LOOKUP.get(raw_name)
                if key is None:
                    dotted = _dotted(raw_name)
                    if dotted.startswith(CIRCUIT_BREAKER_PREFIX) and len(dotted) > len(
                        CIRCUIT_BREAKER_PREFIX
                    ):
                        if dotted in seen:
                            _given_twice(dotted, seen[dotted], (raw_name, where), two_names=False)
                        seen[dotted] = (raw_name, where)
                        passthrough[dotted] = value
                        continue
                    _unknown(raw_name)
                if key.type is Type.PASSWORD and isinstance(value, str):
                    value = Password(value)  # keep secrets out of originals' reprs too
                if key.name in seen:
                    first = seen[key.name]
                    two_names = _declared_spelling(first[0], key) != _declared_spelling(raw_name, key)
                    _given_twice(key.name, first, (raw_name, where), two_names)
                seen[key.name] = (raw_name, where)
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
        check_bootstrap_schemes(
            values["bootstrap.servers"], values["security.protocol"], "security.protocol" in originals
        )

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
    protocol = values["security.protocol"]
    if protocol.startswith("SASL_"):
        # Imported here: the SASL module loads urllib.request (for OAUTHBEARER's token endpoint),
        # http.client, email and ssl, which a producer without SASL never uses.
        from kproducer.config.sasl import resolve_sasl_settings

        # Raises ConfigError naming the missing or conflicting setting.
        resolve_sasl_settings(values, mechanism_explicit="sasl.mechanism" in originals)
    unused = unused_security_keys(protocol, originals)
    if unused:
        # One line for all of them, as the Java client's "These configurations ... were supplied but
        # are not used yet" (AbstractConfig.logUnused).
        logger.warning(
            "%s supplied but not used: security.protocol is %s (ssl.* keys apply to SSL and SASL_SSL, "
            "sasl.* keys to SASL_PLAINTEXT and SASL_SSL)",
            ", ".join(unused),
            protocol,
        )
    enabled = values["ssl.enabled.protocols"]
    if enabled is not None:
        bad = [p for p in enabled if p not in ("TLSv1.2", "TLSv1.3")]
        if bad or not enabled:
            raise ConfigError(
                f"ssl.enabled.protocols must list TLSv1.2 and/or TLSv1.3, got {', '.join(enabled) or 'nothing'}"
            )


def _given_twice(name: str, first: tuple[str, str], second: tuple[str, str], two_names: bool) -> NoReturn:
    """The error for a key given twice: both spellings, where each came from, and what to do."""
    (a, a_where), (b, b_where) = first, second
    raise ConfigError(
        f"{name} given twice, as {a!r} and {b!r}"
        + (f" in {a_where}" if a_where == b_where else f" (in {a_where} and in {b_where})")
        + (" (the same setting under two names)" if two_names else "")
        + "; keep one"
    )


def unused_security_keys(protocol: str, originals: Mapping[str, Any]) -> list[str]:
    """The ssl.* and sasl.* keys given (not None) that ``protocol`` will not use, sorted."""
    tls = protocol.endswith("SSL")
    sasl = protocol.startswith("SASL_")
    return sorted(
        k
        for k, v in originals.items()
        if v is not None
        and (
            (not tls and (k.startswith("ssl.") or k.startswith("enable.ssl.")))
            or (not sasl and k.startswith("sasl."))
        )
    )


def _hashable(v: Any) -> bool:
    try:
        hash(v)
    except TypeError:
        return False
    return True
