"""A record that expires (delivery.timeout.ms) ends its span with the error: librdkafka's mock cluster, a silent leader."""

from __future__ import annotations

from opentelemetry.trace import StatusCode

from kproducer import Producer
from kproducer.errors import KafkaTimeoutError
from tests.support.mock_cluster import MockCluster
from tests.support.tracing import installed_tracer_provider


def test_delivery_timeout_ends_the_span_with_error_status(mock_cluster: MockCluster, topic_name: str) -> None:
    mock_cluster.create_topic(topic_name, 1)
    leader = mock_cluster.broker_ids[0]
    mock_cluster.partition_set_leader(topic_name, 0, leader)
    config = {
        "bootstrap.servers": mock_cluster.bootstrap,
        "linger.ms": 0,
        "retries": 0,
        "request.timeout.ms": 300,
        "delivery.timeout.ms": 600,
    }
    with installed_tracer_provider() as exporter, Producer(config) as p:
        p.partitions_for(topic_name)
        mock_cluster.broker_set_rtt(leader, 5000)  # the leader answers nothing within delivery.timeout.ms
        error = p.send(topic_name, b"late", b"k").exception(30)
        assert isinstance(error, KafkaTimeoutError), error
        mock_cluster.broker_set_rtt(leader, 0)
        (span,) = [s for s in exporter.get_finished_spans() if s.name == f"send {topic_name}"]
    attrs = dict(span.attributes)
    assert span.status.status_code is StatusCode.ERROR
    assert attrs["error.type"] == f"{type(error).__module__}.{type(error).__qualname__}"
    assert "messaging.kafka.offset" not in attrs
    assert attrs["messaging.kafka.message.key"] == "k"
    assert [e.name for e in span.events] == ["exception"]
