"""The adapters' keywords as kproducer's configuration (read back from the Producer's ProducerConfig),
and the small shapes they add (metrics groups, serializer calls and close)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from kproducer.compat.aiokafka import AIOKafkaProducer
from kproducer.compat.kafka import KafkaProducer
from kproducer.compat.kafka import errors as kafka_errors
from kproducer.compat.kafka.serializer import Serializer
from kproducer.config import ProducerConfig

UNREACHABLE = "127.0.0.1:1"  # nothing listens: the producers below never connect


def _aiokafka_config(**kw: Any) -> ProducerConfig:
    async def run() -> ProducerConfig:
        p = AIOKafkaProducer(bootstrap_servers=UNREACHABLE, **kw)
        await p.start()
        try:
            return p.producer.producer.config
        finally:
            await p.producer.close(0)

    return asyncio.run(run())


def test_aiokafka_keywords_and_defaults() -> None:
    cfg = _aiokafka_config(
        client_id="orders", max_batch_size=4096, linger_ms=7, request_timeout_ms=5000, compression_type="gzip",
        max_request_size=2000, retry_backoff_ms=50, metadata_max_age_ms=1000, connections_max_idle_ms=None,
    )
    assert (cfg.client_id, cfg.batch_size, cfg.linger_ms, cfg.compression_type) == ("orders", 4096, 7, "gzip")
    assert (cfg.request_timeout_ms, cfg.max_block_ms, cfg.max_request_size) == (5000, 5000, 2000)
    assert (cfg.retry_backoff_ms, cfg.metadata_max_age_ms, cfg.connections_max_idle_ms) == (50, 1000, -1)
    # Neither acks nor enable_idempotence: idempotent, acks=all.
    assert (cfg.enable_idempotence, cfg.acks) == (True, -1)


@pytest.mark.parametrize(
    ("kw", "idempotent", "acks", "in_flight"),
    [
        ({"acks": 1}, False, 1, 1),
        ({"acks": 0}, False, 0, 1),
        ({"acks": "all"}, True, -1, 5),
        ({"enable_idempotence": False}, False, 1, 1),
        ({"enable_idempotence": False, "acks": "all"}, False, -1, 1),
        ({"enable_idempotence": True}, True, -1, 5),
    ],
)
def test_aiokafka_acks_and_idempotence(kw: dict[str, Any], idempotent: bool, acks: int, in_flight: int) -> None:
    cfg = _aiokafka_config(**kw)
    assert (cfg.enable_idempotence, cfg.acks, cfg.max_in_flight_requests_per_connection) == (idempotent, acks, in_flight)


def test_aiokafka_refuses_acks_that_contradict_idempotence() -> None:
    with pytest.raises(ValueError, match="acks=1 not supported if enable_idempotence=True"):
        AIOKafkaProducer(bootstrap_servers=UNREACHABLE, enable_idempotence=True, acks=1)


def test_kafka_python_names_and_values() -> None:
    p = KafkaProducer(
        bootstrap_servers=["127.0.0.1"], client_id="orders", acks="all", retries=float("inf"), batch_size=4096,
        linger_ms=7, compression_type=None, send_buffer_bytes=None, receive_buffer_bytes=65536,
        max_block_ms=100, delivery_timeout_ms=30000, request_timeout_ms=20000, ssl_check_hostname=False,
        metadata_max_age_ms=1000, allow_auto_create_topics=False, reconnect_backoff_max_ms=500,
    )
    cfg = p.producer.config
    p.close(0)
    assert cfg.bootstrap_servers == ("127.0.0.1:9092",)  # kafka-python's default port
    assert (cfg.client_id, cfg.acks, cfg.retries, cfg.batch_size, cfg.linger_ms) == ("orders", -1, 2147483647, 4096, 7)
    assert (cfg.compression_type, cfg.send_buffer_bytes, cfg.receive_buffer_bytes) == ("none", -1, 65536)
    assert (cfg.max_block_ms, cfg.delivery_timeout_ms, cfg.request_timeout_ms) == (100, 30000, 20000)
    assert cfg.ssl_endpoint_identification_algorithm == ""
    assert (cfg.metadata_max_age_ms, cfg.allow_auto_create_topics, cfg.reconnect_backoff_max_ms) == (1000, False, 500)


def test_kafka_python_configuration_conflicts_are_kafka_configuration_errors() -> None:
    with pytest.raises(kafka_errors.KafkaConfigurationError, match="enable.idempotence is true, but acks is 1"):
        KafkaProducer(bootstrap_servers=UNREACHABLE, enable_idempotence=True, acks=1)
    with pytest.raises(kafka_errors.KafkaConfigurationError, match="transactional_id without enable_idempotence"):
        KafkaProducer(bootstrap_servers=UNREACHABLE, enable_idempotence=False, transactional_id="t")


def test_kafka_python_ssl_context_drops_the_other_ssl_settings_visibly(caplog: pytest.LogCaptureFixture) -> None:
    import ssl

    context = ssl.create_default_context()
    with caplog.at_level(logging.WARNING, logger="kproducer.compat.kafka"):
        p = KafkaProducer(
            bootstrap_servers=UNREACHABLE, security_protocol="SSL", ssl_context=context, ssl_cafile="/nowhere.pem",
            ssl_check_hostname=False, max_block_ms=100,
        )
    cfg = p.producer.config
    p.close(0)
    assert cfg.ssl_context is context and cfg.ssl_truststore_location is None
    assert "ssl_cafile, ssl_check_hostname are not used" in caplog.text


class Tracking(Serializer):
    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.closed = False

    def serialize(self, topic: str, headers: list[tuple[str, bytes]], data: Any) -> bytes | None:
        self.calls.append((topic, data))
        return b"<" + str(data).encode() + b">"

    def close(self) -> None:
        self.closed = True


def test_kafka_python_serializer_objects_see_every_value_and_are_closed() -> None:
    ser = Tracking()
    p = KafkaProducer(bootstrap_servers=UNREACHABLE, value_serializer=ser, max_block_ms=100)
    p.send("orders", None, key=b"k")
    p.send("orders", 5, key=b"k")
    assert ser.calls == [("orders", None), ("orders", 5)]
    assert not ser.closed
    p.close(0)
    assert ser.closed
    with pytest.raises(kafka_errors.IllegalStateError, match="already closed"):
        p.send("orders", 1, key=b"k")
    with pytest.raises(ValueError, match="Need at least one: key or value"):
        KafkaProducer(bootstrap_servers=UNREACHABLE).send("orders")


def test_kafka_python_metrics_shape() -> None:
    p = KafkaProducer(bootstrap_servers=UNREACHABLE, max_block_ms=100)
    metrics = p.metrics()
    p.close(0)
    assert "record-send-rate" in metrics["producer-metrics"]
    assert all(isinstance(v, float) for group in metrics.values() for v in group.values())
