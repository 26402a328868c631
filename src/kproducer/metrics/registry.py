"""Sensors and the registry of one producer's metrics (Java's ``Sensor``, ``MetricName``, ``Metrics``).

A :class:`Sensor` is recorded once per event (per batch, per request, never per
record) and feeds every stat added to it under one lock. :class:`Metrics` holds the
sensors, the gauges read on demand and the providers that build their metrics when
read (the per-topic ones), and answers snapshots by the Java names.

Times are integer milliseconds from the clock passed to :class:`Metrics`; tests pass
a fake one.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from kproducer.common import monotonic_ms
from kproducer.metrics.stats import MetricConfig, Stat

__all__ = ["PRODUCER_GROUP", "MetricName", "Metrics", "MetricsProvider", "Sensor"]

# The logger of the module before it became a package: logging configs name it.
logger = logging.getLogger("kproducer.metrics")

#: The default group of a metric name: this registry belongs to a producer.
PRODUCER_GROUP = "producer-metrics"

#: Java's Sensor.RecordingLevel, most important first.
_LEVELS = {"INFO": 0, "DEBUG": 1, "TRACE": 2}

K = TypeVar("K")
V = TypeVar("V")


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
        self._metrics.register_metric(_Metric(name, description, stat, None, self))
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
        """``record(v)`` for each value, taking the lock once (the Sender's per-batch figures).

        Kept beside ``record`` rather than making ``record`` call ``record_each((value,))``:
        the one-value path is the per-event one, and building a tuple and looping over it
        for every event would add to every sensor's cost.
        """
        if not self._enabled or not values:
            return
        if now_ms is None:
            now_ms = self._clock()
        config = self._config
        with self._lock:
            for stat in self._stats:
                stat.record_many(config, values, now_ms)

    @property
    def clock_ms(self) -> Callable[[], int]:
        """The clock this sensor records by (its registry's)."""
        return self._clock

    def measure(self, stat: Stat, now_ms: int) -> float:
        """The value of one of this sensor's stats at ``now_ms`` (under the lock that ``record`` takes)."""
        with self._lock:
            return stat.measure(self._config, now_ms)

    def remove_stat(self, stat: Stat) -> None:
        """Stop recording into ``stat`` (its metric was removed)."""
        with self._lock:
            self._stats = tuple(s for s in self._stats if s is not stat)


class MetricsProvider(Protocol):
    """A family of metrics that builds its names and values when read."""

    def metric_values(self, now_ms: int) -> dict[str, float]: ...

    def metric_descriptions(self) -> dict[str, str]: ...

    def metric_names(self) -> list[MetricName]: ...


def create_once(found: dict[K, V], key: K, lock: threading.Lock, create: Callable[[], V]) -> V:
    """``found[key]``, created under ``lock`` if missing (the slow path of a lock-free lookup)."""
    with lock:
        value = found.get(key)
        if value is None:
            value = found[key] = create()
        return value


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
        self.clock_ms: Callable[[], int] = clock_ms if clock_ms is not None else monotonic_ms
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

        def create() -> Sensor:
            enabled = _LEVELS[recording_level.upper()] <= _LEVELS[self.recording_level]
            return Sensor(name, self, config or self.config, self.clock_ms, enabled)

        return create_once(self._sensors, name, self._lock, create)

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
        self.register_metric(_Metric(_metric_name(metric_name, group, tags), description, None, fn, None))

    def register_metric(self, metric: _Metric) -> None:
        with self._lock:
            if metric.name.key in self._metrics:
                raise ValueError(f"a metric named {metric.name.key!r} already exists")
            self._metrics[metric.name.key] = metric

    def remove_metric(self, key: str) -> bool:
        """Forget one metric (gauges of a closed component); True if it existed."""
        with self._lock:
            metric = self._metrics.pop(key, None)
        if metric is not None and metric.sensor is not None and metric.stat is not None:
            metric.sensor.remove_stat(metric.stat)
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
        return metric.sensor.measure(metric.stat, now_ms)

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
