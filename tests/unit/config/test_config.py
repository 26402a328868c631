"""ProducerConfig: coercion from Java properties, validation messages, cross-field rules, generated docs."""

from __future__ import annotations

import logging
import pickle
import subprocess
import sys
import typing
from typing import Any

import pytest

from kproducer import config as config_module
from kproducer.config import (
    CONFIG_KEYS,
    Password,
    ProducerConfig,
    Type,
    parse_bootstrap_servers,
    render_markdown,
)
from kproducer.errors import ConfigError
from tests.support.paths import REPO_ROOT

BOOT = {"bootstrap.servers": "localhost:9092"}
ROOT = REPO_ROOT


def make(**kwargs: Any) -> ProducerConfig:
    return ProducerConfig(BOOT, **kwargs)


# ---------------------------------------------------------------- defaults and attributes


def test_java_defaults() -> None:
    cfg = make()
    assert cfg.bootstrap_servers == ("localhost:9092",)
    assert cfg.client_id == ""
    assert cfg.acks == -1
    assert cfg.enable_idempotence is True
    assert cfg.linger_ms == 5
    assert cfg.batch_size == 16384
    assert cfg.buffer_memory == 33554432
    assert cfg.max_block_ms == 60000
    assert cfg.max_request_size == 1048576
    assert cfg.request_timeout_ms == 30000
    assert cfg.delivery_timeout_ms == 120000
    assert cfg.retries == 2147483647
    assert cfg.retry_backoff_ms == 100
    assert cfg.retry_backoff_max_ms == 1000
    assert cfg.max_in_flight_requests_per_connection == 5
    assert cfg.metadata_max_age_ms == 300000
    assert cfg.metadata_max_idle_ms == 300000
    assert cfg.compression_type == "none"
    assert (cfg.compression_gzip_level, cfg.compression_lz4_level, cfg.compression_zstd_level) == (-1, 9, 3)
    assert cfg.partitioner_class is None
    assert cfg.partitioner_ignore_keys is False
    assert cfg.partitioner_adaptive_partitioning_enable is True
    assert cfg.partitioner_availability_timeout_ms == 0
    assert cfg.key_serializer is None and cfg.value_serializer is None
    assert cfg.interceptor_classes == ()
    assert cfg.transactional_id is None
    assert cfg.transaction_timeout_ms == 60000
    assert (cfg.reconnect_backoff_ms, cfg.reconnect_backoff_max_ms) == (50, 1000)
    assert (cfg.socket_connection_setup_timeout_ms, cfg.socket_connection_setup_timeout_max_ms) == (
        10000,
        30000,
    )
    assert cfg.connections_max_idle_ms == 540000
    assert cfg.client_dns_lookup == "use_all_dns_ips"
    assert (cfg.send_buffer_bytes, cfg.receive_buffer_bytes) == (-1, 32768)
    assert cfg.allow_auto_create_topics is True
    assert cfg.security_protocol == "PLAINTEXT"
    assert cfg.sasl_mechanism == "PLAIN"
    assert cfg.sasl_username is None and cfg.sasl_password is None
    assert (cfg.metrics_sample_window_ms, cfg.metrics_num_samples) == (30000, 2)
    assert cfg.metrics_recording_level == "INFO"
    assert cfg.producer_circuit_breaker_class is None
    assert cfg.producer_circuit_breaker_keyed_reroute is True


def test_annotations_match_the_table() -> None:
    """The typed attribute list on ProducerConfig is a view of CONFIG_KEYS: same names, nothing extra."""
    hints = typing.get_type_hints(ProducerConfig)
    declared = {k for k in hints if not k.startswith("_") and k != "originals"}
    assert declared == {k.attr for k in CONFIG_KEYS}
    cfg = make()
    for key in CONFIG_KEYS:
        assert getattr(cfg, key.attr) == cfg.get(key.name)


def test_every_value_is_a_plain_instance_attribute() -> None:
    cfg = make(linger_ms=7)
    assert vars(cfg)["linger_ms"] == 7  # precomputed: no property or __getattr__ on the hot path


def test_java_properties_strings_are_coerced() -> None:
    cfg = ProducerConfig(
        {
            "bootstrap.servers": " a:1 , b:2 ",
            "linger.ms": "10",
            "enable.idempotence": "FALSE",
            "acks": "1",
            "batch.size": " 1000 ",
            "interceptor.classes": "",
            "compression.type": "ZSTD",
            "security.protocol": "plaintext",
        }
    )
    assert cfg.bootstrap_servers == ("a:1", "b:2")
    assert cfg.linger_ms == 10
    assert cfg.enable_idempotence is False
    assert cfg.acks == 1
    assert cfg.batch_size == 1000
    assert cfg.interceptor_classes == ()
    assert cfg.compression_type == "zstd"
    assert cfg.security_protocol == "PLAINTEXT"


@pytest.mark.parametrize(
    ("given", "expected"), [("all", -1), ("-1", -1), ("0", 0), ("1", 1), (0, 0), (-1, -1)]
)
def test_acks_values(given: Any, expected: int) -> None:
    cfg = make(acks=given, enable_idempotence=False)
    assert cfg.acks == expected


def test_snake_case_and_java_names_are_interchangeable() -> None:
    a = ProducerConfig({"bootstrap_servers": "h:1", "linger_ms": 3})
    b = ProducerConfig(**{"bootstrap.servers": "h:1", "linger.ms": 3})
    c = ProducerConfig(bootstrap_servers=["h:1"], linger_ms="3")
    assert a.linger_ms == b.linger_ms == c.linger_ms == 3
    assert a == b == c
    assert hash(a) == hash(c)


def test_a_key_in_both_config_and_kwargs_is_an_error_naming_both() -> None:
    # Neither silently wins: which one was meant is the caller's to say.
    with pytest.raises(ConfigError) as info:
        ProducerConfig({"bootstrap.servers": "h:1", "linger.ms": 5}, linger_ms=50)
    assert str(info.value).startswith(
        "linger.ms given twice, as 'linger.ms' and 'linger_ms' (in the config dict and in the keyword "
        "arguments); keep one"
    )
    with pytest.raises(ConfigError, match=r"linger\.ms given twice, as 'linger\.ms' and 'linger\.ms' \(in the"):
        ProducerConfig({"bootstrap.servers": "h:1", "linger.ms": 5}, **{"linger.ms": 5})
    with pytest.raises(ConfigError, match=r"'ssl\.ca\.location' and 'ssl_truststore_location' \(in the config"):
        ProducerConfig({"bootstrap.servers": "h:1", "ssl.ca.location": "a"}, ssl_truststore_location="a")


@pytest.mark.parametrize("second", [2, 1])  # a different value, and the same one
def test_same_key_twice_in_one_dict_is_an_error(second: int) -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig({"bootstrap.servers": "h:1", "linger.ms": 1, "linger_ms": second})
    assert str(info.value).startswith(
        "linger.ms given twice, as 'linger.ms' and 'linger_ms' in the config dict; keep one"
    )


def test_a_circuit_breaker_option_twice_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"producer\.circuit\.breaker\.x\.y given twice"):
        ProducerConfig(
            {"bootstrap.servers": "h:1", "producer.circuit.breaker.x.y": 1}, producer_circuit_breaker_x_y=2
        )


# ---------------------------------------------------------------- security keys and protocols


@pytest.mark.parametrize(
    ("servers", "protocol", "message"),
    [
        (
            "SSL://broker:9093",
            None,
            "bootstrap.servers entry 'SSL://broker:9093' names SSL, but security.protocol is PLAINTEXT (the "
            "default): set security.protocol=SSL",
        ),
        (
            "a:1,sasl_ssl://broker:9093",
            "SSL",
            "bootstrap.servers entry 'sasl_ssl://broker:9093' names SASL_SSL, but security.protocol is SSL: "
            "set security.protocol=SASL_SSL",
        ),
        (
            "PLAINTEXT://broker:9092",
            "SSL",
            "bootstrap.servers entry 'PLAINTEXT://broker:9092' names PLAINTEXT, but security.protocol is SSL",
        ),
        (
            "kafka://broker:9092",
            None,
            "bootstrap.servers entry 'kafka://broker:9092' starts with 'kafka://', which is not a Kafka "
            "security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL)",
        ),
    ],
)
def test_a_scheme_that_disagrees_with_security_protocol_is_an_error(
    servers: str, protocol: str | None, message: str
) -> None:
    extra = {"security.protocol": protocol} if protocol else {}
    with pytest.raises(ConfigError) as info:
        ProducerConfig({"bootstrap.servers": servers, **extra})
    assert str(info.value).startswith(message)


@pytest.mark.parametrize(
    ("servers", "protocol"),
    [("PLAINTEXT://broker:9092", None), ("ssl://broker:9093", "SSL"), ("SSL://b:1,c:2", "ssl")],
)
def test_a_scheme_that_matches_security_protocol_is_accepted(servers: str, protocol: str | None) -> None:
    extra = {"security.protocol": protocol} if protocol else {}
    cfg = ProducerConfig({"bootstrap.servers": servers, **extra})
    assert cfg.bootstrap_servers == tuple(s.strip() for s in servers.split(","))


def _config_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "kproducer.config" and r.levelname == "WARNING"]


def test_unused_ssl_and_sasl_keys_give_one_warning_listing_them(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("WARNING", logger="kproducer.config")
    ProducerConfig(
        {
            **BOOT,
            "ssl.ca.location": "/etc/ca.pem",
            "ssl.endpoint.identification.algorithm": "",
            "sasl.username": "u",
            "sasl.password": "secret",
        }
    )
    assert _config_warnings(caplog) == [
        "sasl.password, sasl.username, ssl.endpoint.identification.algorithm, ssl.truststore.location "
        "supplied but not used: security.protocol is PLAINTEXT (ssl.* keys apply to SSL and SASL_SSL, "
        "sasl.* keys to SASL_PLAINTEXT and SASL_SSL)"
    ]
    assert "secret" not in caplog.text


def test_ssl_keys_with_sasl_plaintext_are_named_and_used_ones_are_not(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("WARNING", logger="kproducer.config")
    ProducerConfig(
        {
            **BOOT,
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "u",
            "sasl.password": "p",
            "ssl.truststore.location": "/etc/ca.pem",
        }
    )
    assert _config_warnings(caplog) == [
        "ssl.truststore.location supplied but not used: security.protocol is SASL_PLAINTEXT (ssl.* keys "
        "apply to SSL and SASL_SSL, sasl.* keys to SASL_PLAINTEXT and SASL_SSL)"
    ]
    caplog.clear()
    ProducerConfig({**BOOT, "security.protocol": "SSL", "ssl.truststore.location": "/etc/ca.pem"})
    assert _config_warnings(caplog) == []


def test_originals_explicitly_set_get_and_as_dict() -> None:
    cfg = ProducerConfig({"bootstrap.servers": "h:1"}, linger_ms="7")
    assert cfg.originals == {"bootstrap.servers": "h:1", "linger.ms": "7"}
    assert cfg.explicitly_set("linger.ms") and cfg.explicitly_set("linger_ms")
    assert not cfg.explicitly_set("batch.size")
    assert cfg.get("linger.ms") == 7 and cfg.get("linger_ms") == 7
    d = cfg.as_dict()
    assert d["linger.ms"] == 7 and d["acks"] == -1
    assert set(d) == {k.name for k in CONFIG_KEYS}
    with pytest.raises(ConfigError, match="did you mean 'linger.ms'"):
        cfg.get("linger.mss")
    with pytest.raises(ConfigError, match="unknown config"):
        cfg.explicitly_set("nope.nope.nope.nope")


def test_config_is_immutable_and_with_overrides_revalidates() -> None:
    cfg = make()
    with pytest.raises(AttributeError, match="immutable"):
        cfg.linger_ms = 3
    other = cfg.with_overrides(client_id="producer-1", **{"linger.ms": 0})
    assert (other.client_id, other.linger_ms, cfg.linger_ms) == ("producer-1", 0, 5)
    with pytest.raises(ConfigError):
        cfg.with_overrides(linger_ms=-1)


def test_unknown_attribute_suggests_the_key() -> None:
    with pytest.raises(AttributeError, match="did you mean 'linger_ms'"):
        _ = make().linger_mss


def test_pickle_roundtrip() -> None:
    cfg = make(linger_ms=11, sasl_password="s3cret")
    back = pickle.loads(pickle.dumps(cfg))
    assert back == cfg and back.linger_ms == 11
    assert isinstance(back.sasl_password, Password) and back.sasl_password.value == "s3cret"


# ---------------------------------------------------------------- errors


def test_unknown_key_suggests_close_matches() -> None:
    with pytest.raises(ConfigError) as info:
        make(linger_msx=1)
    assert "unknown config 'linger_msx'; did you mean 'linger.ms'?" in str(info.value)
    # The closest first (batch.max.size is close too).
    with pytest.raises(ConfigError, match=r"unknown config 'bacth\.size'; did you mean (one of )?'batch\.size'"):
        ProducerConfig({**BOOT, "bacth.size": 1})
    with pytest.raises(ConfigError, match=r"^unknown config 'zzzzzz' \("):
        ProducerConfig({**BOOT, "zzzzzz": 1})


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("linger.ms", -5, "linger.ms must be an integer >= 0, got -5"),
        ("linger.ms", "-5", "linger.ms must be an integer >= 0, got -5"),
        ("linger.ms", "soon", "linger.ms must be an integer >= 0, got 'soon'"),
        ("linger.ms", True, "linger.ms must be an integer >= 0, got True"),
        ("linger.ms", 1.5, "linger.ms must be an integer >= 0, got 1.5"),
        ("batch.size", 2**31, "batch.size must be an integer >= 0 that fits a int, got 2147483648"),
        ("max.in.flight.requests.per.connection", 0, "must be an integer >= 1, got 0"),
        ("metadata.max.idle.ms", 4999, "metadata.max.idle.ms must be an integer >= 5000, got 4999"),
        ("compression.lz4.level", 18, "compression.lz4.level must be an integer between 1 and 17, got 18"),
        (
            "compression.gzip.level",
            0,
            "compression.gzip.level must be an integer -1 or between 1 and 9, got 0",
        ),
        ("compression.zstd.level", -131073, "between -131072 and 22, got -131073"),
        ("send.buffer.bytes", -2, "send.buffer.bytes must be an integer >= -1, got -2"),
        ("acks", "2", "acks must be one of all, -1, 0, 1, got '2'"),
        ("compression.type", "brotli", "compression.type must be one of none, gzip, snappy, lz4, zstd"),
        ("enable.idempotence", "yes", "enable.idempotence must be a boolean (true or false), got 'yes'"),
        ("enable.idempotence", 1, "enable.idempotence must be a boolean (true or false), got 1"),
        (
                "security.protocol",
                "TLS",
                "security.protocol must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL, got 'TLS'",
            ),
        ("client.dns.lookup", "default", "client.dns.lookup must be one of use_all_dns_ips"),
        ("metrics.recording.level", "TRACEX", "metrics.recording.level must be one of INFO, DEBUG"),
        ("retries", -1, "retries must be an integer between 0 and 2147483647, got -1"),
        ("client.id", 5, "client.id must be a string, got 5"),
        ("linger.ms", None, "linger.ms must be an integer >= 0, got None"),
        (
            "partitioner.class",
            "  ",
            "partitioner.class must not be an empty string",
        ),
        ("interceptor.classes", "a.b:C,a.b:C", "interceptor.classes must not list an entry twice"),
    ],
)
def test_bad_values_name_key_value_and_what_is_allowed(key: str, value: Any, message: str) -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig({**BOOT, key: value})
    assert message in str(info.value)


def test_password_never_appears_in_errors_or_reprs(caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig({**BOOT, "sasl.password": 12345})
    assert "12345" not in str(info.value) and "[hidden]" in str(info.value)
    cfg = make(security_protocol="SASL_PLAINTEXT", sasl_username="u", sasl_password="hunter2")
    assert isinstance(cfg.sasl_password, Password)
    assert cfg.sasl_password.value == "hunter2"
    for text in (repr(cfg), str(cfg.as_dict()), repr(cfg.sasl_password), str(cfg.sasl_password)):
        assert "hunter2" not in text
    assert "[hidden]" in repr(cfg)


def test_sasl_plaintext_needs_credentials() -> None:
    with pytest.raises(ConfigError, match="SASL_PLAINTEXT with sasl.mechanism PLAIN needs sasl.username and sasl.password"):
        make(security_protocol="SASL_PLAINTEXT")
    with pytest.raises(ConfigError, match="needs sasl.password"):
        make(security_protocol="sasl_plaintext", sasl_username="u")


def test_bootstrap_servers_is_required() -> None:
    with pytest.raises(ConfigError, match="missing required config 'bootstrap.servers'"):
        ProducerConfig(linger_ms=5)
    with pytest.raises(ConfigError, match="at least one"):
        ProducerConfig(bootstrap_servers="")
    with pytest.raises(ConfigError, match="empty entries"):
        ProducerConfig(bootstrap_servers="a:1,,b:2")


def test_bad_bootstrap_entry_is_named() -> None:
    with pytest.raises(ConfigError, match="bootstrap.servers entry 'broker2' is not host:port"):
        ProducerConfig(bootstrap_servers="broker1:9092,broker2")


def test_transactional_id_turns_idempotence_on_and_refuses_contradictions() -> None:
    cfg = make(transactional_id="tx-1")
    assert cfg.transactional_id == "tx-1" and cfg.enable_idempotence is True
    assert make(transactional_id=None).transactional_id is None
    with pytest.raises(ConfigError, match="transactional.id is set but enable.idempotence is false"):
        make(transactional_id="tx-1", enable_idempotence=False)
    with pytest.raises(ConfigError, match=r"transactional.id is set, but acks is 1 \(it must be all\)"):
        make(transactional_id="tx-1", acks="1")
    with pytest.raises(ConfigError, match="max.in.flight.requests.per.connection is 6"):
        make(transactional_id="tx-1", max_in_flight_requests_per_connection=6)
    with pytest.raises(ConfigError, match="transactional.id must not be empty"):
        make(transactional_id="")


# ---------------------------------------------------------------- cross-field rules


@pytest.mark.parametrize(
    ("setting", "phrase"),
    [
        ({"acks": "1"}, "acks is 1 (it must be all)"),
        ({"acks": 0}, "acks is 0"),
        ({"retries": 0}, "retries is 0"),
        ({"max.in.flight.requests.per.connection": 6}, "max.in.flight.requests.per.connection is 6"),
    ],
)
def test_explicit_idempotence_conflicts_raise(setting: dict[str, Any], phrase: str) -> None:
    with pytest.raises(ConfigError) as info:
        ProducerConfig({**BOOT, "enable.idempotence": "true", **setting})
    assert "enable.idempotence is true" in str(info.value) and phrase in str(info.value)


@pytest.mark.parametrize(
    "setting",
    [{"acks": "1"}, {"acks": "0"}, {"retries": 0}, {"max.in.flight.requests.per.connection": 10}],
)
def test_default_idempotence_is_turned_off_by_conflicts(
    setting: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.INFO, logger="kproducer.config"):
        cfg = ProducerConfig({**BOOT, **setting})
    assert cfg.enable_idempotence is False
    assert not cfg.explicitly_set("enable.idempotence")
    assert any("idempotence disabled" in r.getMessage() and r.levelno == logging.INFO for r in caplog.records)


def test_idempotence_stays_on_with_compatible_settings() -> None:
    cfg = make(enable_idempotence=True, acks="all", retries=3, max_in_flight_requests_per_connection=5)
    assert cfg.enable_idempotence is True
    assert make(enable_idempotence=False, acks=1, max_in_flight_requests_per_connection=50).acks == 1


def test_delivery_timeout_explicitly_too_small_raises() -> None:
    with pytest.raises(ConfigError) as info:
        make(delivery_timeout_ms=1000, linger_ms=100, request_timeout_ms=30000)
    assert (
        "delivery.timeout.ms must be >= linger.ms + request.timeout.ms (100 + 30000 = 30100), got 1000"
        in str(info.value)
    )


def test_delivery_timeout_default_is_raised_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="kproducer.config"):
        cfg = make(linger_ms=1000, request_timeout_ms=200000)
    assert cfg.delivery_timeout_ms == 201000
    assert any(
        r.levelno == logging.WARNING and "delivery.timeout.ms" in r.getMessage() for r in caplog.records
    )
    assert make(linger_ms=0, request_timeout_ms=120000).delivery_timeout_ms == 120000


def test_reconnect_backoff_only_base_set_means_constant_backoff() -> None:
    assert make(reconnect_backoff_ms=200).reconnect_backoff_max_ms == 200
    cfg = make(reconnect_backoff_ms=200, reconnect_backoff_max_ms=5000)
    assert (cfg.reconnect_backoff_ms, cfg.reconnect_backoff_max_ms) == (200, 5000)


def test_metadata_evict_ms_is_an_alias_for_max_idle() -> None:
    cfg = ProducerConfig({**BOOT, "metadata.evict.ms": "60000"})
    assert cfg.metadata_max_idle_ms == 60000
    assert cfg.explicitly_set("metadata.max.idle.ms") and cfg.explicitly_set("metadata.evict.ms")
    assert cfg.get("metadata.evict.ms") == 60000
    assert make(metadata_evict_ms=7000).metadata_max_idle_ms == 7000
    with pytest.raises(ConfigError, match="metadata.max.idle.ms must be an integer >= 5000, got 10"):
        ProducerConfig({**BOOT, "metadata.evict.ms": 10})
    with pytest.raises(ConfigError, match="given twice"):
        ProducerConfig({**BOOT, "metadata.evict.ms": 6000, "metadata.max.idle.ms": 7000})


# ---------------------------------------------------------------- circuit breaker passthrough and classes


class FakeBreaker:
    """Importable target for the class-path tests."""


def test_circuit_breaker_keys_pass_through_prefixed() -> None:
    cfg = ProducerConfig(
        {
            **BOOT,
            "producer.circuit.breaker.class": f"{__name__}:FakeBreaker",
            "producer.circuit.breaker.trigger.message.count": "100",
            "producer.circuit.breaker.keyed.reroute": "false",
        },
        producer_circuit_breaker_mute_retry_interval=5000,
    )
    assert cfg.producer_circuit_breaker_class == f"{__name__}:FakeBreaker"
    assert cfg.producer_circuit_breaker_keyed_reroute is False
    pre = cfg.prefixed("producer.circuit.breaker.")
    assert pre == {
        "producer.circuit.breaker.class": f"{__name__}:FakeBreaker",
        "producer.circuit.breaker.keyed.reroute": False,
        "producer.circuit.breaker.trigger.message.count": "100",  # unvalidated, as given
        "producer.circuit.breaker.mute.retry.interval": 5000,
    }
    stripped = cfg.prefixed("producer.circuit.breaker.", strip=True)
    assert stripped["trigger.message.count"] == "100" and stripped["class"] == f"{__name__}:FakeBreaker"
    assert cfg.get("producer.circuit.breaker.trigger.message.count") == "100"
    assert cfg.explicitly_set("producer.circuit.breaker.trigger.message.count")
    assert cfg.originals["producer.circuit.breaker.trigger.message.count"] == "100"
    assert cfg.prefixed("linger.") == {"linger.ms": 5}


def test_class_keys_accept_objects_and_keep_names_for_their_resolvers() -> None:
    # Strings are kept as given: each key's resolver knows its short names ("json",
    # "round_robin", Java class names) and dotted paths, and names the key on failure.
    cfg = make(partitioner_class=FakeBreaker, key_serializer="json", value_serializer=f"{__name__}.FakeBreaker")
    assert cfg.partitioner_class is FakeBreaker
    assert cfg.key_serializer == "json" and cfg.value_serializer == f"{__name__}.FakeBreaker"
    instance = FakeBreaker()
    cfg = make(interceptor_classes=[instance, f"{__name__}:FakeBreaker"])
    assert cfg.interceptor_classes == (instance, f"{__name__}:FakeBreaker")


# ---------------------------------------------------------------- bootstrap parsing


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("localhost:9092", [("localhost", 9092)]),
        ("a:1, b.example.com:2", [("a", 1), ("b.example.com", 2)]),
        (["10.0.0.1:9092"], [("10.0.0.1", 9092)]),
        ("[::1]:9092", [("::1", 9092)]),
        ("[fe80::1%eth0]:9093", [("fe80::1%eth0", 9093)]),
        ("PLAINTEXT://broker:9092", [("broker", 9092)]),
    ],
)
def test_parse_bootstrap_servers(value: Any, expected: list[tuple[str, int]]) -> None:
    assert parse_bootstrap_servers(value) == expected


@pytest.mark.parametrize(
    "entry", ["broker", "broker:", ":9092", "::1:9092", "host:0", "host:70000", "host:x", "[::1]"]
)
def test_parse_bootstrap_servers_rejects(entry: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_bootstrap_servers(f"ok:1,{entry}")
    assert repr(entry) in str(info.value)


# ---------------------------------------------------------------- generated reference


def test_table_is_well_formed() -> None:
    names = [k.name for k in CONFIG_KEYS]
    assert len(names) == len(set(names))
    for key in CONFIG_KEYS:
        assert key.doc.endswith("."), key.name
        assert key.attr == key.name.replace(".", "_")
        if key.type in (Type.INT, Type.LONG) and key.default is not None:
            assert config_module._coerce(key, key.default) == key.default, key.name


def test_committed_configuration_md_is_current() -> None:
    committed = (ROOT / "docs" / "configuration.md").read_text()
    assert committed == render_markdown(), (
        "run: python -m kproducer.config --markdown > docs/configuration.md"
    )
    for key in CONFIG_KEYS:
        assert f"`{key.name}`" in committed


def test_cli_prints_markdown() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kproducer.config", "--markdown"], capture_output=True, text=True, check=True
    )
    assert out.stdout == render_markdown()
    assert "| `linger.ms` | `linger_ms` | long | `5` | >= 0 | medium |" in out.stdout


def test_dotted_passthrough_names_keep_their_underscores() -> None:
    cfg = ProducerConfig({**BOOT, "producer.circuit.breaker.my_option": 1})
    assert cfg.prefixed("producer.circuit.breaker.", strip=True)["my_option"] == 1
    assert cfg.get("producer.circuit.breaker.my_option") == 1
