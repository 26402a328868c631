"""The per-topic metrics (Java's ``producer-topic-metrics`` group, tag ``topic``), kept compact.

``record-send-rate/total``, ``byte-rate/total``, ``compression-rate``,
``record-retry-rate/total`` and ``record-error-rate/total`` for each topic produced
to, as the Java Sender keeps them: five small sample rings per topic, named and read
only when the metrics are read.
"""

from __future__ import annotations

import math
import threading

from kproducer.metrics.registry import MetricName, Metrics, create_once
from kproducer.metrics.stats import MetricConfig, rate_window_ms

__all__ = ["PRODUCER_TOPIC_GROUP", "TopicMetricsRegistry", "TopicSensors"]

PRODUCER_TOPIC_GROUP = "producer-topic-metrics"


class _TopicStat:
    """One per-topic stat: a sampled window ring and a total, in one object and one list.

    Every topic produced to gets five of these, so they skip the general
    :class:`Sensor` (a sensor, a lock, and stat, sample, name and registry objects
    for each metric: about 55 objects per topic). A producer writing to thousands
    of topics would otherwise hold hundreds of thousands of objects that every full
    cyclic-GC pass walks, and those passes stall the Sender and the callers (the
    measurement is in benchmarks/RESULTS.md, "Per-topic metrics"). The semantics are those of
    :class:`_SampledStat` (``num_samples + 1`` samples; a sample idle for the whole
    span is purged) and of :class:`Rate`'s elapsed-time rule; a test checks them
    against those classes.

    The ring is a flat list, ``[start_ms, value, events, last_event_ms]`` per
    sample. One lock per producer guards all of them (the registry's), not one per topic.
    """

    __slots__ = ("_ring", "_current", "total", "_owner")

    def __init__(self, owner: TopicMetricsRegistry) -> None:
        self._ring: list[float] = []
        self._current = 0
        self.total = 0.0
        self._owner = owner

    def record(self, value: float = 1.0, now_ms: int | None = None, events: int = 1) -> None:
        """Sensor-style recording: takes the registry's lock."""
        owner = self._owner
        if now_ms is None:
            now_ms = owner.clock_ms()
        with owner.lock:
            self.add(owner.config, value, now_ms, events)

    def add(self, config: MetricConfig, value: float, now_ms: int, events: int = 1) -> None:
        """Fold ``events`` events adding up to ``value``; the caller holds the registry's lock."""
        self.total += value
        ring = self._ring
        i = self._current * 4
        if not ring:
            ring.extend((now_ms, 0.0, 0, now_ms))
        elif now_ms - ring[i] >= config.sample_window_ms or ring[i + 2] >= config.event_window:
            self._current = (self._current + 1) % (config.num_samples + 1)
            i = self._current * 4
            if i >= len(ring):
                ring.extend((now_ms, 0.0, 0, now_ms))
            else:
                ring[i : i + 4] = (now_ms, 0.0, 0, now_ms)
        ring[i + 1] += value
        ring[i + 2] += events
        ring[i + 3] = now_ms

    def _purge(self, config: MetricConfig, now_ms: int) -> None:
        expire_age = config.num_samples * config.sample_window_ms
        ring = self._ring
        for i in range(0, len(ring), 4):
            if now_ms - ring[i + 3] >= expire_age:
                ring[i : i + 4] = (now_ms, 0.0, 0, now_ms)

    def windowed_sum(self, config: MetricConfig, now_ms: int) -> float:
        self._purge(config, now_ms)
        return float(sum(self._ring[1::4]))

    def avg(self, config: MetricConfig, now_ms: int) -> float:
        self._purge(config, now_ms)
        events = sum(self._ring[2::4])
        return sum(self._ring[1::4]) / events if events else math.nan

    def rate(self, config: MetricConfig, now_ms: int) -> float:
        """Per second, with :class:`Rate`'s rule for a young ring (:func:`rate_window_ms`)."""
        value = self.windowed_sum(config, now_ms)
        elapsed = now_ms - min(self._ring[0::4]) if self._ring else 0
        return value / (rate_window_ms(elapsed, config) / 1000.0)


class TopicSensors:
    """Per-topic metrics (group producer-topic-metrics, tag topic=...), as the Java Sender keeps."""

    __slots__ = ("record_send", "byte_send", "compression_rate", "record_retry", "record_error")

    def __init__(self, owner: TopicMetricsRegistry) -> None:
        self.record_send = _TopicStat(owner)
        self.byte_send = _TopicStat(owner)
        self.compression_rate = _TopicStat(owner)
        self.record_retry = _TopicStat(owner)
        self.record_error = _TopicStat(owner)


#: (metric, TopicSensors attribute, reading, description with {topic}) for each per-topic metric.
_TOPIC_METRICS: tuple[tuple[str, str, str, str], ...] = (
    ("record-send-rate", "record_send", "rate", "The number of records sent to {topic} per second."),
    ("record-send-total", "record_send", "total", "The total number of records sent to {topic}."),
    ("byte-rate", "byte_send", "rate", "The number of bytes sent to {topic} per second."),
    ("byte-total", "byte_send", "total", "The total number of bytes sent to {topic}."),
    ("compression-rate", "compression_rate", "avg", "The average compression ratio of {topic}'s batches."),
    ("record-retry-rate", "record_retry", "rate", "Record sends to {topic} retried per second."),
    ("record-retry-total", "record_retry", "total", "The total number of record sends to {topic} retried."),
    ("record-error-rate", "record_error", "rate", "Record sends to {topic} that failed, per second."),
    (
        "record-error-total",
        "record_error",
        "total",
        "The total number of record sends to {topic} that failed.",
    ),
)


class TopicMetricsRegistry:
    """The per-topic metrics of one producer, read into :class:`Metrics` snapshots on demand.

    Names and values are built only when read (``metrics()`` is rare; topics are
    produced to constantly), so a topic costs a dozen objects, not a sensor tree.
    """

    def __init__(self, metrics: Metrics) -> None:
        self.config = metrics.config
        self.clock_ms = metrics.clock_ms
        self.lock = threading.Lock()
        self._topics: dict[str, TopicSensors] = {}
        metrics.add_provider(self)

    def topic(self, topic: str) -> TopicSensors:
        found = self._topics.get(topic)
        if found is not None:
            return found
        return create_once(self._topics, topic, self.lock, lambda: TopicSensors(self))

    def remove(self, topic: str) -> bool:
        with self.lock:
            return self._topics.pop(topic, None) is not None

    def metric_values(self, now_ms: int) -> dict[str, float]:
        config = self.config
        out: dict[str, float] = {}
        with self.lock:
            for topic, sensors in self._topics.items():
                for name, attr, reading, _ in _TOPIC_METRICS:
                    stat: _TopicStat = getattr(sensors, attr)
                    if reading == "total":
                        value = stat.total
                    elif reading == "rate":
                        value = stat.rate(config, now_ms)
                    else:
                        value = stat.avg(config, now_ms)
                    out[f"{name}[topic={topic}]"] = value
        return out

    def metric_descriptions(self) -> dict[str, str]:
        with self.lock:
            topics = list(self._topics)
        return {f"{n}[topic={t}]": d.format(topic=t) for t in topics for n, _, _, d in _TOPIC_METRICS}

    def metric_families(self) -> dict[tuple[str, str], str]:
        return {(PRODUCER_TOPIC_GROUP, n): d.format(topic="the topic") for n, _, _, d in _TOPIC_METRICS}

    def metric_names(self) -> list[MetricName]:
        with self.lock:
            topics = list(self._topics)
        return [
            MetricName(n, PRODUCER_TOPIC_GROUP, (("topic", t),)) for t in topics for n, *_ in _TOPIC_METRICS
        ]
