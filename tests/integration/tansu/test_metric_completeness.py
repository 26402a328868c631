"""Every metric the producer registers is true: a finite value, or undefined until its event and then absent.

A workload over every send path (send(), which the C lane serves in the native pass,
send_batch(), send_arrow(), a transaction) runs against Tansu with both built-in
reporters attached. Before it, the metrics with no event yet must be exactly ones that
``UNDEFINED_UNTIL_EVENT`` documents, and neither reporter may show them (no NaN in
Prometheus, no non-finite value in OpenTelemetry); after it, every metric whose event
happened has a finite value, record-size-avg/max included.
"""

from __future__ import annotations

import math
from typing import Any

import pyarrow as pa

from kproducer import Producer
from kproducer.embedded_broker import EmbeddedBroker
from kproducer.metrics import UNDEFINED_UNTIL_EVENT
from kproducer.metrics.reporters import OpenTelemetryReporter, PrometheusReporter
from tests.support.readback import create_topic

# Long sample windows: a slow CI machine must not see an average expire mid-test.
_WINDOWS = {"metrics.sample.window.ms": 600_000, "metrics.num.samples": 2}


def _base(key: str) -> str:
    return key.partition("[")[0]


def _prometheus_samples(registry: Any, client_id: str) -> dict[str, float]:
    return {
        s.name: s.value
        for family in registry.collect()
        for s in family.samples
        if s.labels.get("client_id") == client_id
    }


def _otel_points(reader: Any) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data is not None else ():
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out[m.name] = [dp.value for dp in m.data.data_points]
    return out


def _check_reporters(p: Producer, registry: Any, reader: Any, client_id: str) -> None:
    """No non-finite value in either reporter, and none of the metrics still undefined."""
    # The reporters first, then the snapshot: the I/O thread may define a metric meanwhile (its
    # first metadata request), never undefine one within the test's windows.
    prom = _prometheus_samples(registry, client_id)
    otel = _otel_points(reader)
    snapshot = p.metrics()
    assert all(math.isfinite(v) for v in prom.values()), {k: v for k, v in prom.items() if not math.isfinite(v)}
    assert all(math.isfinite(v) for vs in otel.values() for v in vs)
    undefined = {_base(k) for k, v in snapshot.items() if math.isnan(v)}
    for name in undefined:
        flat = name.replace("-", "_")
        assert not any(k.endswith(flat) for k in prom), f"{name} is undefined but Prometheus shows it"
        assert not any(k.endswith(flat) and vs for k, vs in otel.items()), f"{name} is undefined but OpenTelemetry shows it"


def _run(tansu: EmbeddedBroker, topic: str, client_id: str, extra: dict[str, Any], workload: Any) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    reporters = [PrometheusReporter(registry=registry), OpenTelemetryReporter(meter_provider=provider)]
    config = {"bootstrap.servers": tansu.bootstrap, "client.id": client_id, "linger.ms": 5, **_WINDOWS, **extra}
    try:
        with Producer(config, metric_reporters=reporters) as p:
            before = p.metrics()
            undocumented = sorted(k for k, v in before.items() if not math.isfinite(v) and _base(k) not in UNDEFINED_UNTIL_EVENT)
            assert not undocumented, f"metrics without a value and not documented as undefined until an event: {undocumented}"
            assert not any(math.isinf(v) for v in before.values())
            _check_reporters(p, registry, reader, client_id)

            workload(p)
            assert p.flush(30) == 0
            after = p.metrics()
            still = sorted(_base(k) for k, v in after.items() if not math.isfinite(v))
            # Only the events this workload cannot cause: a circuit breaker muting a partition.
            assert set(still) <= {"circuit-breaker-time-to-mute-avg", "circuit-breaker-time-to-mute-max"}, still
            assert after["record-size-avg"] > 100 and after["record-size-max"] >= after["record-size-avg"]
            _check_reporters(p, registry, reader, client_id)
            prom = _prometheus_samples(registry, client_id)
            assert prom["kafka_producer_record_size_avg"] == after["record-size-avg"]
    finally:
        provider.shutdown()


def test_every_metric_is_finite_or_documented_undefined_until_its_event(tansu: EmbeddedBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 3)
    value = b"v" * 100

    def workload(p: Producer) -> None:
        for i in range(500):
            p.send(topic_name, value, b"key-%d" % (i % 10))
        p.send_batch(topic_name, [value] * 300)
        p.send_arrow(pa.table({"value": [value] * 300}), topic_name)

    extra = {"producer.circuit.breaker.class": "failure_rate", "compression.type": "lz4"}
    _run(tansu, topic_name, "complete-1", extra, workload)


def test_transactional_producer_metrics_are_all_true(tansu: EmbeddedBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)

    def workload(p: Producer) -> None:
        p.init_transactions()
        with p.transaction():
            for _ in range(200):
                p.send(topic_name, b"w" * 120)
        p.begin_transaction()
        p.send(topic_name, b"x" * 120).exception(10)
        p.abort_transaction()

    _run(tansu, topic_name, "complete-2", {"transactional.id": f"complete-{topic_name}"}, workload)
