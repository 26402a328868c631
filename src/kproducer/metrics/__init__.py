"""Sensors and windowed stats with the Java client's metric names and semantics.

Mirrors ``org.apache.kafka.common.metrics`` and the producer's metric definitions:

* :mod:`~kproducer.metrics.stats`: the stats a sensor feeds (Avg, Max, Rate, ...) and
  their sampling rules;
* :mod:`~kproducer.metrics.registry`: MetricName, Sensor and the Metrics registry;
* :mod:`~kproducer.metrics.producer_metrics`: the ``producer-metrics`` group, its
  sensors and gauges, and the transactional timers;
* :mod:`~kproducer.metrics.topic_metrics`: the ``producer-topic-metrics`` group, kept
  compact for producers writing to thousands of topics;
* :mod:`~kproducer.metrics.reporters`: ``metric.reporters`` (Prometheus,
  OpenTelemetry), imported only when a producer configures one.

Every public name is importable from ``kproducer.metrics`` itself.
"""

from __future__ import annotations

from kproducer.metrics.producer_metrics import (
    NODE_BUFFER_BYTES_METRIC,
    PRODUCER_GAUGES,
    TRANSACTION_TIMERS,
    UNDEFINED_UNTIL_EVENT,
    NodeBufferMetrics,
    ProducerSensors,
    register_producer_metrics,
    register_transaction_metrics,
)
from kproducer.metrics.registry import PRODUCER_GROUP, MetricName, Metrics, MetricsProvider, Sensor
from kproducer.metrics.stats import (
    Avg,
    CumulativeCount,
    CumulativeSum,
    Max,
    MetricConfig,
    Min,
    Rate,
    Stat,
    Value,
    WindowedCount,
    WindowedSum,
)
from kproducer.metrics.topic_metrics import PRODUCER_TOPIC_GROUP, TopicMetricsRegistry, TopicSensors

__all__ = [
    "NODE_BUFFER_BYTES_METRIC",
    "PRODUCER_GROUP",
    "PRODUCER_TOPIC_GROUP",
    "PRODUCER_GAUGES",
    "Avg",
    "CumulativeCount",
    "CumulativeSum",
    "Max",
    "MetricConfig",
    "MetricName",
    "MetricsProvider",
    "Metrics",
    "Min",
    "NodeBufferMetrics",
    "ProducerSensors",
    "Rate",
    "Sensor",
    "Stat",
    "TRANSACTION_TIMERS",
    "TopicMetricsRegistry",
    "TopicSensors",
    "UNDEFINED_UNTIL_EVENT",
    "Value",
    "WindowedCount",
    "WindowedSum",
    "register_producer_metrics",
    "register_transaction_metrics",
]
