"""metric.reporters from a Spark job: the sink's Python worker serves the producer's Prometheus metrics."""

from __future__ import annotations

import urllib.request
from typing import Any

from kproducer.embedded_broker import EmbeddedBroker
from kproducer.spark import write_to_kafka
from tests.support.readback import create_topic


def test_spark_sink_serves_prometheus_from_its_python_worker(
    spark: Any, tansu: EmbeddedBroker, topic_name: str
) -> None:
    """kafka.metric.reporters=prometheus on a real local Spark job: the worker's producer is scraped."""
    import socket

    from prometheus_client.parser import text_string_to_metric_families

    create_topic(tansu.bootstrap, topic_name, 1)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    df = spark.range(0, 1000, 1, 1).selectExpr("cast(id as string) as value")  # one task: one worker
    summary = write_to_kafka(
        df,
        topic_name,
        config={
            "bootstrap.servers": tansu.bootstrap,
            "client.id": "spark-prom",
            "metric.reporters": "prometheus",
            "metrics.prometheus.port": str(port),
        },
    )
    assert summary.records == 1000
    # The Python worker keeps its cached producer (and the HTTP server) after the task.
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as resp:
        text = resp.read().decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }
    assert samples[("kafka_producer_record_send_total", (("client_id", "spark-prom"),))] == 1000
    assert samples[("kafka_producer_topic_record_send_total", (("client_id", "spark-prom"), ("topic", topic_name)))] == 1000
