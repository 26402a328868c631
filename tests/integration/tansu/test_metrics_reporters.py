"""``metric.reporters``: Prometheus scraped over HTTP from prometheus_client's own server, and
OpenTelemetry read from the SDK's in-memory reader, after real sends to Tansu."""

from __future__ import annotations

import urllib.request
from typing import Any

import pytest

from kproducer.embedded_broker import EmbeddedBroker
from kproducer.errors import ConfigError
from kproducer.metrics.reporters import (
    OpenTelemetryReporter,
    PrometheusReporter,
    opentelemetry_name,
    prometheus_name,
)
from kproducer.producer import Producer
from kproducer.spark.contract import parse_options
from tests.support.readback import create_topic

N = 300


def _send(p: Producer, topic: str) -> None:
    for i in range(N):
        p.send(topic, b"value-%d" % i, partition=i % 2)
    assert p.flush(30) == 0


def test_names_follow_each_system_conventions() -> None:
    assert prometheus_name("producer-metrics", "record-send-rate") == ("kafka_producer_record_send_rate", False)
    assert prometheus_name("producer-metrics", "record-send-total") == ("kafka_producer_record_send", True)
    assert prometheus_name("producer-topic-metrics", "byte-total") == ("kafka_producer_topic_byte", True)
    assert opentelemetry_name("producer-metrics", "request-latency-avg") == (
        "kafka.producer.request_latency_avg",
        False,
    )
    assert opentelemetry_name("producer-topic-metrics", "record-error-total") == (
        "kafka.producer.topic.record_error_total",
        True,
    )


def test_prometheus_exposition_scraped_over_http(tansu: EmbeddedBroker, topic_name: str) -> None:
    from prometheus_client import CollectorRegistry
    from prometheus_client.parser import text_string_to_metric_families

    create_topic(tansu.bootstrap, topic_name, 2)
    registry = CollectorRegistry()
    reporter = PrometheusReporter(registry=registry, port=0)
    with Producer(bootstrap_servers=tansu.bootstrap, client_id="prom-1", metric_reporters=[reporter]) as p:
        _send(p, topic_name)
        snapshot = p.metrics()
        assert reporter.http_port
        with urllib.request.urlopen(f"http://127.0.0.1:{reporter.http_port}/metrics", timeout=10) as resp:
            assert resp.status == 200
            text = resp.read().decode()
    families = {f.name: f for f in text_string_to_metric_families(text)}
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value for f in families.values() for s in f.samples}

    assert families["kafka_producer_record_send"].type == "counter"
    assert samples[("kafka_producer_record_send_total", (("client_id", "prom-1"),))] == N
    assert families["kafka_producer_record_send_rate"].type == "gauge"
    topic_labels = (("client_id", "prom-1"), ("topic", topic_name))
    assert samples[("kafka_producer_topic_record_send_total", topic_labels)] == N
    assert samples[("kafka_producer_topic_record_error_total", topic_labels)] == 0
    assert "records sent" in families["kafka_producer_record_send"].documentation
    # Every value producer.metrics() has is exposed, under its converted name and labels.
    exposed = 0
    for key in snapshot:
        name, _, tags = key.partition("[")
        group = "producer-topic-metrics" if tags.startswith("topic=") else "producer-metrics"
        family, counter = prometheus_name(group, name)
        labels = [("client_id", "prom-1")] + ([("topic", tags[6:-1])] if tags else [])
        sample = family + ("_total" if counter else "")
        assert (sample, tuple(sorted(labels))) in samples, key
        exposed += 1
    assert exposed == len(snapshot) > 40


def test_prometheus_by_name_in_config_uses_the_global_registry(tansu: EmbeddedBroker, topic_name: str) -> None:
    from prometheus_client import REGISTRY

    create_topic(tansu.bootstrap, topic_name, 2)
    with (
        Producer({"bootstrap.servers": tansu.bootstrap, "client.id": "prom-a", "metric.reporters": "prometheus"}) as a,
        Producer({"bootstrap.servers": tansu.bootstrap, "client.id": "prom-b", "metric.reporters": "prometheus"}) as b,
    ):
        _send(a, topic_name)
        _send(b, topic_name)
        _send(b, topic_name)
        assert REGISTRY.get_sample_value("kafka_producer_record_send_total", {"client_id": "prom-a"}) == N
        assert REGISTRY.get_sample_value("kafka_producer_record_send_total", {"client_id": "prom-b"}) == 2 * N
    # Closed producers leave the registry.
    assert REGISTRY.get_sample_value("kafka_producer_record_send_total", {"client_id": "prom-a"}) is None


def test_opentelemetry_values_in_the_in_memory_reader(tansu: EmbeddedBroker, topic_name: str) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    create_topic(tansu.bootstrap, topic_name, 2)
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    reporter = OpenTelemetryReporter(meter_provider=provider)
    with Producer(bootstrap_servers=tansu.bootstrap, client_id="otel-1", metric_reporters=[reporter]) as p:
        _send(p, topic_name)
        data = reader.get_metrics_data()
    points: dict[str, list[Any]] = {}
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            assert sm.scope.name == "kproducer"
            for m in sm.metrics:
                points[m.name] = list(m.data.data_points)
    sent = points["kafka.producer.record_send_total"]
    assert [(dict(dp.attributes), dp.value) for dp in sent] == [({"client-id": "otel-1"}, N)]
    per_topic = points["kafka.producer.topic.record_send_total"]
    assert [(dict(dp.attributes), dp.value) for dp in per_topic] == [({"client-id": "otel-1", "topic": topic_name}, N)]
    assert points["kafka.producer.record_error_total"][0].value == 0
    assert "kafka.producer.request_latency_avg" in points
    provider.shutdown()


def test_unknown_reporter_is_a_config_error_naming_the_choices() -> None:
    with pytest.raises(ConfigError) as info:
        Producer(bootstrap_servers="127.0.0.1:1", metric_reporters=["statsd"])
    assert "metric.reporters" in str(info.value) and "prometheus, opentelemetry" in str(info.value)


class _ConfiguredReporter:
    """A user's reporter, named in metric.reporters by its dotted path."""

    def __init__(self) -> None:
        self.configs: dict[str, Any] = {}

    def configure(self, configs: dict[str, Any]) -> None:
        self.configs = configs

    def init(self, metrics: Any, client_id: str) -> None:
        pass

    def close(self) -> None:
        pass


def test_reporter_named_by_dotted_path_is_loaded_and_configured_and_a_missing_one_is_named() -> None:
    from kproducer.metrics.reporters import resolve_reporters

    (reporter,) = resolve_reporters([f"{__name__}:_ConfiguredReporter"], {"client.id": "c"})
    assert isinstance(reporter, _ConfiguredReporter) and reporter.configs == {"client.id": "c"}
    with pytest.raises(ConfigError) as info:
        resolve_reporters([f"{__name__}:NoSuchReporter"], {})
    message = str(info.value)
    assert message.startswith(f"metric.reporters: cannot load '{__name__}:NoSuchReporter' (")
    assert "NoSuchReporter" in message.split("(", 1)[1] and "'module:Name' path" in message


def test_spark_sink_turns_reporters_on_through_kafka_options() -> None:
    opts = parse_options(
        {
            "kafka.bootstrap.servers": "127.0.0.1:9092",
            "kafka.metric.reporters": "prometheus,opentelemetry",
            "kafka.metrics.prometheus.port": "9464",
            "topic": "t",
        }
    )
    from kproducer.config import ProducerConfig

    cfg = ProducerConfig(opts.producer_config_dict)  # what the executor's cached producer is built from
    assert cfg.metric_reporters == ("prometheus", "opentelemetry")
    assert cfg.metrics_prometheus_port == 9464


def test_prometheus_port_in_use_warns_and_keeps_the_producer(caplog: pytest.LogCaptureFixture) -> None:
    import logging
    import socket

    from prometheus_client import CollectorRegistry

    caplog.set_level(logging.WARNING, logger="kproducer")
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        registry = CollectorRegistry()
        reporter = PrometheusReporter(registry=registry, port=port)
        with Producer(bootstrap_servers="127.0.0.1:1", client_id="busy-port", metric_reporters=[reporter]):
            assert reporter.http_port is None
            assert registry.get_sample_value("kafka_producer_record_send_total", {"client_id": "busy-port"}) == 0
    finally:
        taken.close()
    lines = [r.getMessage() for r in caplog.records if "metrics.prometheus.port" in r.getMessage()]
    assert len(lines) == 1 and f"cannot listen on 127.0.0.1:{port}" in lines[0] and "busy-port" in lines[0]




def test_prometheus_port_zero_says_which_port_the_os_chose(caplog: pytest.LogCaptureFixture) -> None:
    import logging

    from prometheus_client import CollectorRegistry

    caplog.set_level(logging.INFO, logger="kproducer")
    registry = CollectorRegistry()
    reporter = PrometheusReporter(registry=registry)
    config = {"bootstrap.servers": "127.0.0.1:1", "client.id": "port-zero", "metrics.prometheus.port": 0}
    with Producer(config, metric_reporters=[reporter]) as p:
        assert p.metric_reporters == (reporter,)
        port = reporter.http_port
        assert port is not None and port > 0
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as resp:
            assert 'client_id="port-zero"' in resp.read().decode()
    lines = [r.getMessage() for r in caplog.records if "metrics.prometheus.port=0" in r.getMessage()]
    assert lines == [f"metrics.prometheus.port=0: producer port-zero's metrics are served at http://127.0.0.1:{port}/metrics"]
