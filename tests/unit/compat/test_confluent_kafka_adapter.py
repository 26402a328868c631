"""kproducer.compat.confluent_kafka without a broker: configuration translation and refusals, errors, messages."""

from __future__ import annotations

import pytest

import kproducer.compat.confluent_kafka as ck
from kproducer.compat.confluent_kafka import (
    CONFIG_NAMES,
    REFUSED,
    KafkaError,
    KafkaException,
    Message,
)
from kproducer.compat.confluent_kafka.message import _TopicPartition
from kproducer.compat.confluent_kafka.settings import _FIXED
from kproducer.compat.confluent_kafka.settings import Settings as _Settings
from kproducer.errors import (
    IllegalStateError,
    KafkaTimeoutError,
    NotEnoughReplicasError,
    RecordPurgedError,
    TopicAuthorizationFailedError,
)


def test_codes_are_librdkafkas() -> None:
    import confluent_kafka

    for name in ("_MSG_TIMED_OUT", "_PURGE_QUEUE", "_PURGE_INFLIGHT", "_QUEUE_FULL", "_STATE", "_INVALID_ARG",
                 "_KEY_SERIALIZATION", "_VALUE_SERIALIZATION", "UNKNOWN_TOPIC_OR_PART", "MSG_SIZE_TOO_LARGE",
                 "NOT_ENOUGH_REPLICAS", "TOPIC_AUTHORIZATION_FAILED", "PRODUCER_FENCED"):  # fmt: skip
        assert getattr(KafkaError, name) == getattr(confluent_kafka.KafkaError, name), name


@pytest.mark.parametrize(
    ("exc", "code", "name", "retriable", "fatal"),
    [
        (KafkaTimeoutError("t"), -192, "_MSG_TIMED_OUT", True, False),
        (RecordPurgedError(), -152, "_PURGE_QUEUE", False, False),
        (IllegalStateError("s"), -172, "_STATE", False, False),
        (NotEnoughReplicasError(), 19, "NOT_ENOUGH_REPLICAS", True, False),
        (TopicAuthorizationFailedError(), 29, "TOPIC_AUTHORIZATION_FAILED", False, True),
    ],
)
def test_kproducer_errors_seen_as_confluent_kafka_errors(
    exc: Exception, code: int, name: str, retriable: bool, fatal: bool
) -> None:
    err = KafkaError.from_exception(exc)
    assert (err.code(), err.name(), err.retriable(), err.fatal()) == (code, name, retriable, fatal)
    assert err == code and err.exception is exc and str(err) == err.str()
    raised = KafkaException(err)
    assert raised.args[0] is err


def test_settings_translate_librdkafka_names_and_keep_its_defaults() -> None:
    s = _Settings(
        {
            "metadata.broker.list": "h:1",
            "queue.buffering.max.ms": "20",
            "request.required.acks": -1,
            "queue.buffering.max.messages": 10,
            "queue.buffering.max.kbytes": 64,
            "delivery.report.only.error": "true",
            "default.topic.config": {"message.timeout.ms": 120000, "partitioner": "fnv1a"},
            "compression.codec": "zstd",
            "compression.level": 7,
        },
        serializing=False,
    )
    assert s.engine == {
        "bootstrap.servers": "h:1",
        "linger.ms": "20",
        "acks": -1,
        "delivery.timeout.ms": 120000,
        "partitioner.class": "fnv1a",
        "compression.type": "zstd",
        "compression.zstd.level": 7,
        "buffer.memory": 33554432,  # never below the Java default: whole batch buffers come from it
        "max.block.ms": 120000,
    }
    assert (s.max_messages, s.max_bytes, s.only_errors) == (10, 64 * 1024, True)


def test_defaults_partitioner_and_message_timeout() -> None:
    s = _Settings({"bootstrap.servers": "h:1"}, serializing=False)
    assert s.engine["partitioner.class"] == "consistent_random"
    assert s.engine["delivery.timeout.ms"] == 300000 and s.engine["max.block.ms"] == 300000
    short = _Settings({"bootstrap.servers": "h:1", "message.timeout.ms": 5000}, serializing=False)
    assert short.engine["request.timeout.ms"] == 5000 - 5  # librdkafka caps the request timeout


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_every_refused_setting_says_why(name: str) -> None:
    with pytest.raises(KafkaException) as e:
        _Settings({"bootstrap.servers": "h:1", name: False if name in _FIXED else "x"}, serializing=False)
    err = e.value.args[0]
    assert err.code() == KafkaError._INVALID_ARG
    assert f"{name} is not supported by kproducer: {REFUSED[name]}" in err.str()


def test_serializers_are_the_serializing_producers() -> None:
    s = _Settings({"bootstrap.servers": "h:1", "value.serializer": print}, serializing=True)
    assert s.value_serializer is print and "value.serializer" not in s.engine


def test_translations_target_kproducer_keys() -> None:
    from kproducer.config.keys import CONFIG_KEYS

    names = {k.name for k in CONFIG_KEYS}
    assert set(CONFIG_NAMES.values()) <= names
    assert not set(REFUSED) & names - {"key.serializer", "value.serializer"}


def test_message_accessors() -> None:
    m = Message("t", 1, 5, b"k", b"value", None, None, (ck.TIMESTAMP_CREATE_TIME, 123), 0.5)
    assert (m.topic(), m.partition(), m.offset(), m.key(), m.value(), m.headers(), m.error()) == (
        "t", 1, 5, b"k", b"value", None, None,
    )
    assert m.timestamp() == (1, 123) and m.latency() == 0.5 and len(m) == 5 and m.leader_epoch() is None


def test_topic_partition_is_confluent_kafkas_when_installed() -> None:
    import confluent_kafka

    assert ck.TopicPartition is confluent_kafka.TopicPartition
    own = _TopicPartition("t", 2, 10)
    assert (own.topic, own.partition, own.offset) == ("t", 2, 10) and own == _TopicPartition("t", 2)


def test_settings_that_ask_for_what_kproducer_does_are_accepted() -> None:
    s = _Settings(
        {"bootstrap.servers": "h:1", "socket.keepalive.enable": True, "socket.nagle.disable": "true",
         "api.version.request": True},
        serializing=False,
    )  # fmt: skip
    assert not {"socket.keepalive.enable", "socket.nagle.disable", "api.version.request"} & set(s.engine)


def test_librdkafka_spellings_of_kproducer_settings() -> None:
    from kproducer.config.producer_config import ProducerConfig

    # librdkafka's 'none' is Java's '' (no host name check); its OAUTHBEARER method is implied by the other keys.
    s = _Settings(
        {"bootstrap.servers": "h:1", "ssl.endpoint.identification.algorithm": "none", "sasl.oauthbearer.method": "oidc"},
        serializing=False,
    )
    assert ProducerConfig(s.engine).ssl_endpoint_identification_algorithm == ""
    assert "sasl.oauthbearer.method" not in s.engine
    with pytest.raises(KafkaException, match="sasl.oauthbearer.method must be default or oidc, got 'kerberos'"):
        _Settings({"bootstrap.servers": "h:1", "sasl.oauthbearer.method": "kerberos"}, serializing=False)


def test_docs_list_every_refused_setting() -> None:
    # docs/migrating.md's refusal table names each setting the adapter refuses (a `prefix.*` covers a family).
    import re

    from tests.support.paths import REPO_ROOT

    page = (REPO_ROOT / "docs" / "migrating.md").read_text()
    table = page[page.index("| setting | why, and what to do instead |"): page.index("- **Defaults that are kproducer's")]
    listed = set(re.findall(r"`([^`=]+)(?:=[^`]*)?`", table))
    families = tuple(name[:-1] for name in listed if name.endswith(".*"))
    missing = [name for name in REFUSED if name not in listed and not name.startswith(families)]
    assert not missing, f"refused by the adapter but not in docs/migrating.md: {missing}"


def test_error_cb_and_logger_are_accepted_and_checked() -> None:
    import logging

    settings = _Settings({"bootstrap.servers": "h:1", "error_cb": print, "logger": logging.getLogger("app")}, False)
    assert settings.error_cb is print and settings.logger is logging.getLogger("app")
    assert "error_cb" not in settings.engine and "logger" not in settings.engine
    adapter = logging.LoggerAdapter(logging.getLogger("app"), {"k": "v"})
    assert _Settings({"bootstrap.servers": "h:1", "logger": adapter}, False).logger is adapter
    with pytest.raises(KafkaException, match="error_cb must be callable"):
        _Settings({"bootstrap.servers": "h:1", "error_cb": "print"}, serializing=False)
    with pytest.raises(KafkaException, match="logger must be a logging.Logger or logging.LoggerAdapter, got str"):
        _Settings({"bootstrap.servers": "h:1", "logger": "app"}, serializing=False)
    with pytest.raises(KafkaException, match="logger must not be one of kproducer's own loggers"):
        _Settings({"bootstrap.servers": "h:1", "logger": logging.getLogger("kproducer.producer")}, serializing=False)


def test_client_error_events_become_librdkafka_errors() -> None:
    from kproducer.compat.confluent_kafka.client_errors import client_error
    from kproducer.errors import SaslAuthenticationFailedError, SslAuthenticationError
    from kproducer.network.client_error_event import ClientErrorEvent, ClientErrorKind

    def code(kind: ClientErrorKind, cause: BaseException | None = None) -> int:
        err = client_error(ClientErrorEvent(kind, 1, "h:1", "broker 1 (h:1): why", cause))
        assert not err.fatal() and err.str() == "broker 1 (h:1): why" and err.exception is cause
        return err.code()

    assert code(ClientErrorKind.TRANSPORT) == KafkaError._TRANSPORT
    assert code(ClientErrorKind.RESOLVE) == KafkaError._RESOLVE
    assert code(ClientErrorKind.ALL_BROKERS_DOWN) == KafkaError._ALL_BROKERS_DOWN
    assert code(ClientErrorKind.AUTHENTICATION, SaslAuthenticationFailedError("no")) == KafkaError._AUTHENTICATION
    assert code(ClientErrorKind.AUTHENTICATION, SslAuthenticationError("no")) == KafkaError._SSL


def test_a_client_error_ends_a_wait_for_delivery_reports() -> None:
    import threading

    from kproducer.compat.confluent_kafka.reports import Reports

    reports = Reports()
    reports.add(1)  # one record outstanding: take() would wait for its report
    results: list[object] = []
    taker = threading.Thread(target=lambda: results.append(reports.take(None)))
    taker.start()
    error = KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down")
    reports.put_error(error)
    taker.join(60)
    assert not taker.is_alive() and results == [None]
    assert reports.has_errors() and reports.take_error() is error and reports.take_error() is None
    assert reports.count() == 1  # a client error is no record: len() does not count it
