"""Sensors and windowed stats with the Java client's metric names and semantics.

Mirrors ``org.apache.kafka.common.metrics``: a :class:`Sensor` is recorded once per
event (per batch, per request, never per record) and feeds every stat added to it;
sampled stats keep ``num_samples`` windows of ``sample_window_ms`` each and forget
older ones, so rates and averages describe the recent past. :class:`Rate` divides
by the elapsed time exactly as Java does (assuming ``num_samples - 1`` full windows
while the producer is young), so dashboards read the same numbers as for a Java
producer.

Times are integer milliseconds from the clock passed to :class:`Metrics`; tests pass
a fake one.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = [
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
    "ProducerSensors",
    "Rate",
    "Sensor",
    "Stat",
    "TopicMetricsRegistry",
    "TopicSensors",
    "Value",
    "WindowedCount",
    "WindowedSum",
    "register_producer_metrics",
]

logger = logging.getLogger(__name__)

PRODUCER_GROUP = "producer-metrics"
PRODUCER_TOPIC_GROUP = "producer-topic-metrics"

#: Java's Sensor.RecordingLevel, most important first.
_LEVELS = {"INFO": 0, "DEBUG": 1, "TRACE": 2}


def _monotonic_ms() -> int:
    return time.monotonic_ns() // 1_000_000


@dataclass(frozen=True, slots=True)
class MetricConfig:
    """The sampling shape shared by a sensor's stats (Java's MetricConfig)."""

    sample_window_ms: int = 30000
    num_samples: int = 2
    #: Java's event window: a sample is also complete after this many events.
    event_window: int = 2**63 - 1


@dataclass(frozen=True, slots=True)
class MetricName:
    """A metric's identity: its Java name, group and tags; ``key`` is how snapshots name it."""

    name: str
    group: str = PRODUCER_GROUP
    tags: tuple[tuple[str, str], ...] = ()
    key: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        if self.tags:
            inner = ",".join(f"{k}={v}" for k, v in self.tags)
            object.__setattr__(self, "key", f"{self.name}[{inner}]")
        else:
            object.__setattr__(self, "key", self.name)


class Stat(Protocol):
    """What a sensor feeds: ``record`` is called under the sensor's lock, ``measure`` too."""

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None: ...

    def measure(self, config: MetricConfig, now_ms: int) -> float: ...


# ---------------------------------------------------------------------------- sampled stats


class _Sample:
    __slots__ = ("initial", "value", "event_count", "start_ms", "last_event_ms")

    def __init__(self, initial: float, now_ms: int) -> None:
        self.initial = initial
        self.value = initial
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms

    def reset(self, now_ms: int) -> None:
        self.value = self.initial
        self.event_count = 0
        self.start_ms = now_ms
        self.last_event_ms = now_ms

    def is_complete(self, now_ms: int, config: MetricConfig) -> bool:
        return now_ms - self.start_ms >= config.sample_window_ms or self.event_count >= config.event_window


class _SampledStat(ABC):
    """A ring of samples; ``_update`` folds a value into the current one (Java's SampledStat).

    As in Kafka 3.8+ (apache/kafka#15889) the ring holds ``num_samples + 1`` samples and a
    sample is only purged once its last event is older than the whole span, so a window that
    started before the span but overlaps it still counts; that removes the rate spikes of
    the older scheme.
    """

    __slots__ = ("_samples", "_current")

    initial: float = 0.0

    def __init__(self) -> None:
        self._samples: list[_Sample] = []
        self._current = 0

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        samples = self._samples
        if not samples:
            samples.append(_Sample(self.initial, now_ms))
        sample = samples[self._current]
        # _Sample.is_complete, inlined: this runs for every stat of every sensor record.
        if now_ms - sample.start_ms >= config.sample_window_ms or sample.event_count >= config.event_window:
            sample = self._advance(config, now_ms)
        self._update(sample, value)
        sample.event_count += 1
        sample.last_event_ms = now_ms

    def _advance(self, config: MetricConfig, now_ms: int) -> _Sample:
        self._current = (self._current + 1) % (config.num_samples + 1)
        if self._current >= len(self._samples):
            sample = _Sample(self.initial, now_ms)
            self._samples.append(sample)
            return sample
        sample = self._samples[self._current]
        sample.reset(now_ms)
        return sample

    @abstractmethod
    def _update(self, sample: _Sample, value: float) -> None:
        """Fold one value into the current sample."""

    @abstractmethod
    def _combine(self, samples: list[_Sample]) -> float:
        """The stat's value over the live samples."""

    def purge_obsolete(self, config: MetricConfig, now_ms: int) -> None:
        """Reset samples with no event in the whole span, so idle periods read as no data."""
        expire_age = config.num_samples * config.sample_window_ms
        for sample in self._samples:
            if now_ms - sample.last_event_ms >= expire_age:
                sample.reset(now_ms)

    def oldest(self, now_ms: int) -> _Sample:
        if not self._samples:
            self._samples.append(_Sample(self.initial, now_ms))
        return min(self._samples, key=lambda s: s.start_ms)

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        self.purge_obsolete(config, now_ms)
        return self._combine(self._samples)


class Avg(_SampledStat):
    """Mean of the values recorded in the live windows; NaN with none."""

    __slots__ = ()

    def _update(self, sample: _Sample, value: float) -> None:
        sample.value += value

    def _combine(self, samples: list[_Sample]) -> float:
        count = sum(s.event_count for s in samples)
        if count == 0:
            return math.nan
        return sum(s.value for s in samples) / count


class Max(_SampledStat):
    """Largest value in the live windows; NaN with none."""

    __slots__ = ()
    initial = -math.inf

    def _update(self, sample: _Sample, value: float) -> None:
        if value > sample.value:
            sample.value = value

    def _combine(self, samples: list[_Sample]) -> float:
        live = [s.value for s in samples if s.event_count > 0]
        return max(live) if live else math.nan


class Min(_SampledStat):
    """Smallest value in the live windows; NaN with none."""

    __slots__ = ()
    initial = math.inf

    def _update(self, sample: _Sample, value: float) -> None:
        if value < sample.value:
            sample.value = value

    def _combine(self, samples: list[_Sample]) -> float:
        live = [s.value for s in samples if s.event_count > 0]
        return min(live) if live else math.nan


class WindowedSum(_SampledStat):
    """Sum of the values recorded in the live windows."""

    __slots__ = ()

    def _update(self, sample: _Sample, value: float) -> None:
        sample.value += value

    def _combine(self, samples: list[_Sample]) -> float:
        return float(sum(s.value for s in samples))


class WindowedCount(WindowedSum):
    """Number of recordings in the live windows (the value is ignored)."""

    __slots__ = ()

    def _update(self, sample: _Sample, value: float) -> None:
        sample.value += 1.0


class Rate:
    """Per-second (or per ``unit_ms``) rate of a windowed stat, with Java's elapsed-time rule.

    The elapsed time is measured from the oldest live window, but never taken as less than
    ``num_samples - 1`` full windows: otherwise a burst in the first second after start-up
    would read as a huge rate.
    """

    __slots__ = ("_stat", "_unit_ms")

    def __init__(self, stat: _SampledStat | None = None, *, unit_ms: float = 1000.0) -> None:
        self._stat = stat if stat is not None else WindowedSum()
        self._unit_ms = unit_ms

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        self._stat.record(config, value, now_ms)

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        value = self._stat.measure(config, now_ms)
        return value / (self.window_size_ms(config, now_ms) / self._unit_ms)

    def window_size_ms(self, config: MetricConfig, now_ms: int) -> int:
        self._stat.purge_obsolete(config, now_ms)
        # May exceed the span: an overlapping older sample is kept whole, and so is its time.
        elapsed = now_ms - self._stat.oldest(now_ms).start_ms
        full_windows = elapsed // config.sample_window_ms if config.sample_window_ms > 0 else 0
        min_full_windows = config.num_samples - 1
        if full_windows < min_full_windows:
            elapsed += (min_full_windows - full_windows) * config.sample_window_ms
        return max(elapsed, 1)


# ---------------------------------------------------------------------------- cumulative stats


class CumulativeSum:
    """Sum of every value ever recorded (the ``*-total`` metrics)."""

    __slots__ = ("_total",)

    def __init__(self) -> None:
        self._total = 0.0

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        self._total += value

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        return self._total


class CumulativeCount(CumulativeSum):
    """Number of recordings ever made."""

    __slots__ = ()

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        self._total += 1.0


class Value:
    """The last value recorded; NaN before any."""

    __slots__ = ("_value",)

    def __init__(self) -> None:
        self._value = math.nan

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        self._value = value

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        return self._value


# ---------------------------------------------------------------------------- sensors and registry


@dataclass(slots=True)
class _Metric:
    name: MetricName
    description: str
    stat: Stat | None
    gauge: Callable[[], float] | None
    sensor: Sensor | None


class Sensor:
    """Records one kind of event into all its stats under one lock (Java's Sensor)."""

    __slots__ = ("name", "_metrics", "_config", "_clock", "_lock", "_stats", "_enabled")

    def __init__(
        self,
        name: str,
        metrics: Metrics,
        config: MetricConfig,
        clock_ms: Callable[[], int],
        enabled: bool,
    ) -> None:
        self.name = name
        self._metrics = metrics
        self._config = config
        self._clock = clock_ms
        self._lock = threading.Lock()
        self._stats: tuple[Stat, ...] = ()
        self._enabled = enabled

    @property
    def enabled(self) -> bool:
        """False when the sensor's recording level is above metrics.recording.level."""
        return self._enabled

    def add(
        self,
        metric_name: str | MetricName,
        stat: Stat,
        description: str = "",
        *,
        tags: Mapping[str, str] | None = None,
        group: str = PRODUCER_GROUP,
    ) -> Sensor:
        """Register ``stat`` under a metric name; it sees every later ``record``."""
        name = _metric_name(metric_name, group, tags)
        self._metrics._register(_Metric(name, description, stat, None, self))
        with self._lock:
            self._stats = (*self._stats, stat)
        return self

    def record(self, value: float = 1.0, now_ms: int | None = None) -> None:
        """Feed one event to every stat; called per batch or per request, so kept short."""
        if not self._enabled:
            return
        if now_ms is None:
            now_ms = self._clock()
        config = self._config
        with self._lock:
            for stat in self._stats:
                stat.record(config, value, now_ms)

    def record_each(self, values: Sequence[float], now_ms: int | None = None) -> None:
        """``record(v)`` for each value, taking the lock once (the Sender's per-batch figures)."""
        if not self._enabled or not values:
            return
        if now_ms is None:
            now_ms = self._clock()
        config = self._config
        with self._lock:
            for stat in self._stats:
                rec = stat.record
                for value in values:
                    rec(config, value, now_ms)

    def _measure(self, stat: Stat, now_ms: int) -> float:
        with self._lock:
            return stat.measure(self._config, now_ms)


class MetricsProvider(Protocol):
    """A family of metrics that builds its names and values when read."""

    def metric_values(self, now_ms: int) -> dict[str, float]: ...

    def metric_descriptions(self) -> dict[str, str]: ...

    def metric_names(self) -> list[MetricName]: ...


def _metric_name(name: str | MetricName, group: str, tags: Mapping[str, str] | None) -> MetricName:
    if isinstance(name, MetricName):
        return name
    return MetricName(name, group, tuple(sorted(tags.items())) if tags else ())


class Metrics:
    """The registry of sensors and metrics of one producer; reads come from :meth:`snapshot`."""

    def __init__(
        self,
        clock_ms: Callable[[], int] | None = None,
        sample_window_ms: int = 30000,
        num_samples: int = 2,
        recording_level: str = "INFO",
    ) -> None:
        if num_samples < 1:
            raise ValueError(f"num_samples must be >= 1, got {num_samples}")
        if sample_window_ms < 0:
            raise ValueError(f"sample_window_ms must be >= 0, got {sample_window_ms}")
        level = recording_level.upper()
        if level not in _LEVELS:
            raise ValueError(f"recording_level must be one of {', '.join(_LEVELS)}, got {recording_level!r}")
        self.clock_ms: Callable[[], int] = clock_ms if clock_ms is not None else _monotonic_ms
        self.config = MetricConfig(sample_window_ms=sample_window_ms, num_samples=num_samples)
        self.recording_level = level
        self._lock = threading.Lock()
        self._sensors: dict[str, Sensor] = {}
        self._metrics: dict[str, _Metric] = {}
        self._providers: list[MetricsProvider] = []

    def add_provider(self, provider: MetricsProvider) -> None:
        """Metrics built only when read (per-topic metrics): snapshots, ``value`` and names include them."""
        with self._lock:
            self._providers.append(provider)

    def sensor(self, name: str, recording_level: str = "INFO", config: MetricConfig | None = None) -> Sensor:
        """Get or create the sensor ``name``; safe to call from any thread."""
        found = self._sensors.get(name)
        if found is not None:
            return found
        with self._lock:
            found = self._sensors.get(name)
            if found is None:
                enabled = _LEVELS[recording_level.upper()] <= _LEVELS[self.recording_level]
                found = Sensor(name, self, config or self.config, self.clock_ms, enabled)
                self._sensors[name] = found
            return found

    def get_sensor(self, name: str) -> Sensor | None:
        return self._sensors.get(name)

    def add_gauge(
        self,
        metric_name: str | MetricName,
        fn: Callable[[], float],
        description: str = "",
        *,
        tags: Mapping[str, str] | None = None,
        group: str = PRODUCER_GROUP,
    ) -> None:
        """A metric read on demand from ``fn`` (buffer-available-bytes, requests-in-flight...)."""
        self._register(_Metric(_metric_name(metric_name, group, tags), description, None, fn, None))

    def _register(self, metric: _Metric) -> None:
        with self._lock:
            if metric.name.key in self._metrics:
                raise ValueError(f"a metric named {metric.name.key!r} already exists")
            self._metrics[metric.name.key] = metric

    def remove_metric(self, key: str) -> bool:
        """Forget one metric (gauges of a closed component); True if it existed."""
        with self._lock:
            metric = self._metrics.pop(key, None)
        if metric is not None and metric.sensor is not None and metric.stat is not None:
            sensor = metric.sensor
            with sensor._lock:
                sensor._stats = tuple(s for s in sensor._stats if s is not metric.stat)
        return metric is not None

    def remove_sensor(self, name: str) -> bool:
        """Forget a sensor and every metric it feeds (per-topic sensors of an evicted topic)."""
        with self._lock:
            sensor = self._sensors.pop(name, None)
            if sensor is None:
                return False
            for key in [k for k, m in self._metrics.items() if m.sensor is sensor]:
                del self._metrics[key]
        return True

    def _read(self, metric: _Metric, now_ms: int) -> float:
        if metric.gauge is not None:
            try:
                return float(metric.gauge())
            except Exception:
                logger.exception("gauge %s failed", metric.name.key)
                return math.nan
        if metric.sensor is None or metric.stat is None:
            return math.nan
        return metric.sensor._measure(metric.stat, now_ms)

    def value(self, key: str, now_ms: int | None = None) -> float:
        """One metric's current value by snapshot key; KeyError if unknown."""
        now = self.clock_ms() if now_ms is None else now_ms
        metric = self._metrics.get(key)
        if metric is not None:
            return self._read(metric, now)
        for provider in self._providers:
            values = provider.metric_values(now)
            if key in values:
                return values[key]
        raise KeyError(key)

    def snapshot(self, now_ms: int | None = None) -> dict[str, float]:
        """Every metric's current value, keyed by Java name (``name[topic=x]`` when tagged)."""
        now = self.clock_ms() if now_ms is None else now_ms
        with self._lock:
            metrics = list(self._metrics.values())
            providers = list(self._providers)
        out = {m.name.key: self._read(m, now) for m in metrics}
        for provider in providers:
            out.update(provider.metric_values(now))
        return out

    def describe(self) -> dict[str, str]:
        """Each metric's description, by snapshot key."""
        with self._lock:
            out = {k: m.description for k, m in self._metrics.items()}
            providers = list(self._providers)
        for provider in providers:
            out.update(provider.metric_descriptions())
        return out

    def metric_names(self) -> list[MetricName]:
        with self._lock:
            names = [m.name for m in self._metrics.values()]
            providers = list(self._providers)
        for provider in providers:
            names.extend(provider.metric_names())
        return names

    def readings(self, now_ms: int | None = None) -> list[tuple[MetricName, float]]:
        """Every metric's name (group and tags included) with its current value, for reporters."""
        values = self.snapshot(now_ms)
        return [(n, values[n.key]) for n in self.metric_names() if n.key in values]

    def families(self) -> dict[tuple[str, str], str]:
        """Every metric family, ``(group, name)`` -> description, including per-topic ones with no topic yet.

        Reporters that must declare instruments up front (OpenTelemetry) read this.
        """
        with self._lock:
            out = {(m.name.group, m.name.name): m.description for m in self._metrics.values()}
            providers = list(self._providers)
        for provider in providers:
            families = getattr(provider, "metric_families", None)
            if families is not None:
                out.update(families())
            else:
                descriptions = provider.metric_descriptions()
                for n in provider.metric_names():
                    out.setdefault((n.group, n.name), descriptions.get(n.key, ""))
        return out


# ---------------------------------------------------------------------------- the producer's metrics

#: Gauges the producer registers once the objects they read exist (name -> description).
PRODUCER_GAUGES: dict[str, str] = {
    "requests-in-flight": "Produce requests sent and not yet answered, over all brokers.",
    "buffer-available-bytes": "Bytes of buffer.memory not held by batches (free list plus unallocated).",
    "buffer-total-bytes": "The buffer.memory the BufferPool manages.",
    "metadata-urgent-topics": "Topics whose metadata is needed now (KIP-526's urgent set).",
    "metadata-age-max": "Seconds since the least recently refreshed topic's metadata was fetched.",
    "waiting-threads": "Caller threads blocked waiting for buffer memory.",
}


class _DrainedBatch(Protocol):
    """What :meth:`ProducerSensors.record_drained` reads of a ProducerBatch."""

    @property
    def topic_partition(self) -> tuple[str, int]: ...

    @property
    def record_count(self) -> int: ...

    def estimated_size_in_bytes(self) -> int: ...

    def compression_rate(self) -> float: ...


class _PoolLike(Protocol):
    @property
    def total_memory(self) -> int: ...

    def available_memory(self) -> int: ...

    def queued(self) -> int: ...


class _ClientLike(Protocol):
    def in_flight_request_count(self, node_id: int | None = None) -> int: ...


class _TopicStat:
    """One per-topic stat: a sampled window ring and a total, in one object and one list.

    Every topic produced to gets five of these, so they skip the general
    :class:`Sensor` (a sensor, a lock, and stat, sample, name and registry objects
    for each metric: about 55 objects per topic). A producer writing to thousands
    of topics would otherwise hold hundreds of thousands of objects that every full
    cyclic-GC pass walks, and those passes stall the Sender and the callers (50–90
    ms at 2,000 topics, measured with benchmarks/metadata_scale.py). The semantics are those of
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
        """Per second, with :meth:`Rate.window_size_ms`'s rule for a young ring."""
        value = self.windowed_sum(config, now_ms)
        elapsed = now_ms - min(self._ring[0::4]) if self._ring else 0
        full_windows = elapsed // config.sample_window_ms if config.sample_window_ms > 0 else 0
        if full_windows < config.num_samples - 1:
            elapsed += (config.num_samples - 1 - full_windows) * config.sample_window_ms
        return value / (max(elapsed, 1) / 1000.0)


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
        with self.lock:
            found = self._topics.get(topic)
            if found is None:
                found = self._topics[topic] = TopicSensors(self)
            return found

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


NODE_BUFFER_BYTES_METRIC = "buffer-node-bytes"


class NodeBufferMetrics:
    """``buffer-node-bytes[node-id=N]``: the buffer.memory held by batches whose leader is node N.

    Queued and in flight alike, read when the metrics are read (``bytes_by_node``
    returns node id -> bytes; -1 is "leader unknown"). One slow leader holding most
    of the pool is what stalls every caller's send(); this shows it as it happens.
    """

    def __init__(self, bytes_by_node: Callable[[], Mapping[int, int]]) -> None:
        self._bytes_by_node = bytes_by_node

    def metric_values(self, now_ms: int) -> dict[str, float]:
        return {f"{NODE_BUFFER_BYTES_METRIC}[node-id={n}]": float(b) for n, b in sorted(self._bytes_by_node().items())}

    def metric_descriptions(self) -> dict[str, str]:
        return {
            f"{NODE_BUFFER_BYTES_METRIC}[node-id={n}]": f"Bytes of buffer.memory held by batches led by node {n}."
            for n in sorted(self._bytes_by_node())
        }

    def metric_names(self) -> list[MetricName]:
        return [MetricName(NODE_BUFFER_BYTES_METRIC, PRODUCER_GROUP, (("node-id", str(n)),)) for n in sorted(self._bytes_by_node())]


@dataclass(slots=True)
class ProducerSensors:
    """The producer's sensors; the Sender, accumulator and metadata code record into them."""

    metrics: Metrics
    #: record(count of records in a batch) when a batch is sent.
    record_send: Sensor
    #: record(count of records) when a batch fails for good.
    record_error: Sensor
    #: record(count of records) when a batch is retried.
    record_retry: Sensor
    #: record(ms from send to response) per produce request.
    request_latency: Sensor
    #: record() per produce request sent.
    request: Sensor
    #: record(bytes) per batch sent.
    batch_size: Sensor
    #: record(records) per produce request.
    records_per_request: Sensor
    #: record(compressed / uncompressed) per batch sent.
    compression_rate: Sensor
    #: record() when an allocation times out.
    buffer_exhausted: Sensor
    #: record(ns waited) per blocking allocation.
    bufferpool_wait_time: Sensor
    #: record(ms from batch creation to drain) per batch.
    record_queue_time: Sensor
    #: record(throttle_time_ms) per produce response.
    produce_throttle_time: Sensor
    #: record(bytes) per record appended (key, value and headers).
    record_size: Sensor
    #: record(number of topics asked for) per metadata request.
    metadata_request: Sensor
    #: record(bytes) per metadata response.
    metadata_response_bytes: Sensor
    #: Per-topic metrics, built when read.
    topics: TopicMetricsRegistry

    # -------------------------------------------------------------- recording helpers (Sender thread)

    def record_drained(self, batches: Sequence[_DrainedBatch], now_ms: int | None = None) -> None:
        """One produce request built from ``batches``: request, record and per-topic counts.

        Queue time, batch size and compression are recorded by the accumulator at drain.
        """
        # The send rates and totals are sums, so one record per topic per request gives the
        # same figures as one per batch, for a fraction of the cost; the compression average
        # takes the request's batches of the topic as that many events.
        records = 0
        per_topic: dict[str, list[float]] = {}
        for batch in batches:
            count = batch.record_count
            records += count
            acc = per_topic.get(batch.topic_partition[0])
            if acc is None:
                per_topic[batch.topic_partition[0]] = [
                    count,
                    batch.estimated_size_in_bytes(),
                    batch.compression_rate(),
                    1,
                ]
            else:
                acc[0] += count
                acc[1] += batch.estimated_size_in_bytes()
                acc[2] += batch.compression_rate()
                acc[3] += 1
        if now_ms is None:
            now_ms = self.request._clock()
        self.record_send.record(records, now_ms)
        registry = self.topics
        topic_of = registry.topic
        config = registry.config
        sensors = [(topic_of(name), acc) for name, acc in per_topic.items()]
        with registry.lock:
            for topic, (n_records, size, ratios, n_batches) in sensors:
                topic.record_send.add(config, n_records, now_ms)
                topic.byte_send.add(config, size, now_ms)
                topic.compression_rate.add(config, ratios, now_ms, int(n_batches))
        self.request.record(1.0, now_ms)
        self.records_per_request.record(records, now_ms)

    def record_request_latency(self, latency_ms: float, node_id: int | None = None) -> None:
        """Send-to-response time of one produce request (``node_id`` kept for per-node metrics)."""
        self.request_latency.record(latency_ms)

    def record_throttle(self, throttle_ms: float) -> None:
        self.produce_throttle_time.record(throttle_ms)

    def record_retries(self, topic: str, count: int) -> None:
        self.record_retry.record(count)
        self.topic(topic).record_retry.record(count)

    def record_errors(self, topic: str, count: int) -> None:
        self.record_error.record(count)
        self.topic(topic).record_error.record(count)

    def bind_gauges(self, pool: _PoolLike, client: _ClientLike) -> None:
        """Register the gauges that read the BufferPool and the NetworkClient."""
        self.add_gauge("buffer-available-bytes", lambda: float(pool.available_memory()))
        self.add_gauge("buffer-total-bytes", lambda: float(pool.total_memory))
        self.add_gauge("waiting-threads", lambda: float(pool.queued()))
        self.add_gauge("requests-in-flight", lambda: float(client.in_flight_request_count()))

    def add_gauge(self, name: str, fn: Callable[[], float]) -> None:
        """Register one of :data:`PRODUCER_GAUGES` once the object it reads exists."""
        if name not in PRODUCER_GAUGES:
            raise ValueError(f"unknown producer gauge {name!r}; known: {', '.join(sorted(PRODUCER_GAUGES))}")
        self.metrics.add_gauge(name, fn, PRODUCER_GAUGES[name])

    def topic(self, topic: str) -> TopicSensors:
        """Get or create the per-topic metrics (``record-send-rate[topic=...]`` and friends)."""
        return self.topics.topic(topic)

    def remove_topic(self, topic: str) -> None:
        """Drop a topic's metrics (its metadata was evicted)."""
        self.topics.remove(topic)


def _meter(
    sensor: Sensor,
    base: str,
    what: str,
    *,
    tags: Mapping[str, str] | None = None,
    group: str = PRODUCER_GROUP,
    count: bool = False,
) -> None:
    """Java's Meter: ``base-rate`` per second and ``base-total`` since start."""
    sensor.add(
        f"{base}-rate",
        Rate(WindowedCount() if count else WindowedSum()),
        f"The number of {what} per second.",
        tags=tags,
        group=group,
    )
    sensor.add(
        f"{base}-total",
        CumulativeCount() if count else CumulativeSum(),
        f"The total number of {what}.",
        tags=tags,
        group=group,
    )


def register_producer_metrics(metrics: Metrics) -> ProducerSensors:
    """Create the producer-metrics sensors under their Java names (Java's ``producer-metrics`` group)."""
    s = metrics.sensor

    record_send = s("records-send")
    _meter(record_send, "record-send", "records sent")
    record_error = s("errors")
    _meter(record_error, "record-error", "record sends that failed")
    record_retry = s("record-retries")
    _meter(record_retry, "record-retry", "record sends retried")

    request_latency = s("request-latency")
    request_latency.add("request-latency-avg", Avg(), "The average produce request latency in ms.")
    request_latency.add("request-latency-max", Max(), "The largest produce request latency in ms.")

    request = s("requests-sent")
    _meter(request, "request", "produce requests sent", count=True)

    batch_size = s("batch-size")
    batch_size.add("batch-size-avg", Avg(), "The average bytes per partition batch sent.")
    batch_size.add("batch-size-max", Max(), "The largest partition batch sent, in bytes.")

    records_per_request = s("records-per-request")
    records_per_request.add("records-per-request-avg", Avg(), "The average number of records per request.")

    compression_rate = s("compression-rate")
    compression_rate.add(
        "compression-rate-avg", Avg(), "The average ratio of compressed to uncompressed batch size."
    )

    buffer_exhausted = s("buffer-exhausted-records")
    _meter(
        buffer_exhausted, "buffer-exhausted", "sends that failed because buffer memory ran out", count=True
    )

    bufferpool_wait_time = s("bufferpool-wait-time")
    bufferpool_wait_time.add(
        "bufferpool-wait-ratio",
        Rate(unit_ms=1e-6),
        "The fraction of time caller threads spent waiting for buffer memory.",
    )
    bufferpool_wait_time.add(
        "bufferpool-wait-time-ns-total",
        CumulativeSum(),
        "The total nanoseconds caller threads spent waiting for buffer memory.",
    )

    record_queue_time = s("queue-time")
    record_queue_time.add("record-queue-time-avg", Avg(), "The average ms a batch waited in the accumulator.")
    record_queue_time.add("record-queue-time-max", Max(), "The longest ms a batch waited in the accumulator.")

    throttle = s("produce-throttle-time")
    throttle.add("produce-throttle-time-avg", Avg(), "The average ms brokers throttled produce requests.")
    throttle.add("produce-throttle-time-max", Max(), "The longest ms a broker throttled a produce request.")

    record_size = s("record-size")
    record_size.add("record-size-avg", Avg(), "The average record size in bytes.")
    record_size.add("record-size-max", Max(), "The largest record size in bytes.")

    metadata_request = s("metadata-requests")
    metadata_request.add("metadata-request-rate", Rate(WindowedCount()), "Metadata requests sent per second.")
    metadata_request.add(
        "metadata-request-total", CumulativeCount(), "The total number of metadata requests."
    )
    metadata_request.add(
        "metadata-topics-per-request-avg",
        Avg(),
        "The average number of topics asked for per metadata request.",
    )

    metadata_response_bytes = s("metadata-response-bytes")
    metadata_response_bytes.add(
        "metadata-response-bytes-total", CumulativeSum(), "The total bytes of metadata responses received."
    )

    return ProducerSensors(
        metrics=metrics,
        record_send=record_send,
        record_error=record_error,
        record_retry=record_retry,
        request_latency=request_latency,
        request=request,
        batch_size=batch_size,
        records_per_request=records_per_request,
        compression_rate=compression_rate,
        buffer_exhausted=buffer_exhausted,
        bufferpool_wait_time=bufferpool_wait_time,
        record_queue_time=record_queue_time,
        produce_throttle_time=throttle,
        record_size=record_size,
        metadata_request=metadata_request,
        metadata_response_bytes=metadata_response_bytes,
        topics=TopicMetricsRegistry(metrics),
    )


#: The transactional producer's timers (Java's KafkaProducer txn-*-time-ns-total), by operation.
TRANSACTION_TIMERS = {
    "init": "init_transactions()",
    "begin": "begin_transaction()",
    "send_offsets": "send_offsets_to_transaction()",
    "commit": "commit_transaction()",
    "abort": "abort_transaction()",
}


def register_transaction_metrics(metrics: Metrics) -> dict[str, Sensor]:
    """``txn-init-time-ns-total`` and its siblings: total nanoseconds callers spent in each operation."""
    out: dict[str, Sensor] = {}
    for op, call in TRANSACTION_TIMERS.items():
        name = f"txn-{op.replace('_', '-')}-time-ns-total"
        sensor = metrics.sensor(f"txn-{op}")
        sensor.add(name, CumulativeSum(), f"The total nanoseconds the caller spent in {call}.")
        out[op] = sensor
    return out
