"""The stats a sensor feeds, with Java's sampling semantics (``org.apache.kafka.common.metrics.stats``).

Sampled stats (:class:`Avg`, :class:`Max`, :class:`Min`, :class:`WindowedSum`,
:class:`WindowedCount`) keep ``num_samples`` windows of ``sample_window_ms`` each and
forget older ones, so they describe the recent past. :class:`Rate` divides a sampled
stat by the elapsed time exactly as Java does (assuming ``num_samples - 1`` full
windows while the producer is young), so dashboards read the same numbers as for a
Java producer. Cumulative stats (:class:`CumulativeSum`, :class:`CumulativeCount`,
:class:`Value`) never forget.

Times are integer milliseconds passed in by the caller; nothing here reads a clock.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Protocol

__all__ = [
    "Avg",
    "CumulativeCount",
    "CumulativeSum",
    "Max",
    "MetricConfig",
    "Min",
    "Rate",
    "Stat",
    "Value",
    "WindowedCount",
    "WindowedSum",
    "rate_window_ms",
]


@dataclass(frozen=True, slots=True)
class MetricConfig:
    """The sampling shape shared by a sensor's stats (Java's MetricConfig)."""

    sample_window_ms: int = 30000
    num_samples: int = 2
    #: Java's event window: a sample is also complete after this many events.
    event_window: int = 2**63 - 1


class Stat(Protocol):
    """What a sensor feeds: ``record`` is called under the sensor's lock, ``measure`` too."""

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None: ...

    def record_many(self, config: MetricConfig, values: Sequence[float], now_ms: int) -> None:
        """``record`` of each value in turn, at one time (a sensor's ``record_each``)."""
        ...

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

    def record_many(self, config: MetricConfig, values: Sequence[float], now_ms: int) -> None:
        """``record`` of each value; folded at once when they all fall in the current sample.

        The Sender records three figures of every batch it drains: folding a request's batches
        in one step gives the same sample (same sum, extremum and event count) for a fraction of
        the calls. When the values would cross the sample's event window they go one by one.
        """
        samples = self._samples
        n = len(values)
        if samples and n:
            sample = samples[self._current]
            if (
                now_ms - sample.start_ms < config.sample_window_ms
                and sample.event_count + n <= config.event_window
            ):
                self._fold(sample, values)
                sample.event_count += n
                sample.last_event_ms = now_ms
                return
        for value in values:
            self.record(config, value, now_ms)

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

    def _fold(self, sample: _Sample, values: Sequence[float]) -> None:
        """Fold several values into the current sample (``_update`` of each, overridden where one step does it)."""
        update = self._update
        for value in values:
            update(sample, value)

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

    def _fold(self, sample: _Sample, values: Sequence[float]) -> None:
        sample.value += sum(values)

    def _combine(self, samples: list[_Sample]) -> float:
        count = sum(s.event_count for s in samples)
        if count == 0:
            return math.nan
        return sum(s.value for s in samples) / count


class _Extremum(_SampledStat):
    """The largest (or smallest) value over the live windows; NaN with none."""

    __slots__ = ()
    _largest: ClassVar[bool]

    def _combine(self, samples: list[_Sample]) -> float:
        live = [s.value for s in samples if s.event_count > 0]
        if not live:
            return math.nan
        return max(live) if self._largest else min(live)


class Max(_Extremum):
    """Largest value in the live windows; NaN with none."""

    __slots__ = ()
    initial = -math.inf
    _largest = True

    def _update(self, sample: _Sample, value: float) -> None:
        if value > sample.value:
            sample.value = value

    def _fold(self, sample: _Sample, values: Sequence[float]) -> None:
        best = max(values)
        if best != best:  # a NaN first makes max() NaN; one at a time skips it
            super()._fold(sample, values)
        else:
            self._update(sample, best)


class Min(_Extremum):
    """Smallest value in the live windows; NaN with none."""

    __slots__ = ()
    initial = math.inf
    _largest = False

    def _update(self, sample: _Sample, value: float) -> None:
        if value < sample.value:
            sample.value = value

    def _fold(self, sample: _Sample, values: Sequence[float]) -> None:
        best = min(values)
        if best != best:  # as in Max
            super()._fold(sample, values)
        else:
            self._update(sample, best)


class WindowedSum(_SampledStat):
    """Sum of the values recorded in the live windows."""

    __slots__ = ()

    def _update(self, sample: _Sample, value: float) -> None:
        sample.value += value

    def _fold(self, sample: _Sample, values: Sequence[float]) -> None:
        sample.value += sum(values)

    def _combine(self, samples: list[_Sample]) -> float:
        return float(sum(s.value for s in samples))


class WindowedCount(WindowedSum):
    """Number of recordings in the live windows (the value is ignored)."""

    __slots__ = ()

    def _update(self, sample: _Sample, value: float) -> None:
        sample.value += 1.0

    def _fold(self, sample: _Sample, values: Sequence[float]) -> None:
        sample.value += len(values)


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

    def record_many(self, config: MetricConfig, values: Sequence[float], now_ms: int) -> None:
        self._stat.record_many(config, values, now_ms)

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        value = self._stat.measure(config, now_ms)
        return value / (self.window_size_ms(config, now_ms) / self._unit_ms)

    def window_size_ms(self, config: MetricConfig, now_ms: int) -> float:
        self._stat.purge_obsolete(config, now_ms)
        # May exceed the span: an overlapping older sample is kept whole, and so is its time.
        return rate_window_ms(now_ms - self._stat.oldest(now_ms).start_ms, config)


def rate_window_ms(elapsed_ms: float, config: MetricConfig) -> float:
    """The time a rate divides by (Java's ``Rate.windowSize``), from the age of its oldest sample.

    Never less than ``num_samples - 1`` full windows, so a burst just after start-up
    does not read as a huge rate; never less than 1 ms.
    """
    full_windows = elapsed_ms // config.sample_window_ms if config.sample_window_ms > 0 else 0
    min_full_windows = config.num_samples - 1
    if full_windows < min_full_windows:
        elapsed_ms += (min_full_windows - full_windows) * config.sample_window_ms
    return max(elapsed_ms, 1)


# ---------------------------------------------------------------------------- cumulative stats


class CumulativeSum:
    """Sum of every value ever recorded (the ``*-total`` metrics)."""

    __slots__ = ("_total",)

    def __init__(self) -> None:
        self._total = 0.0

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        self._total += value

    def record_many(self, config: MetricConfig, values: Sequence[float], now_ms: int) -> None:
        self._total += sum(values)

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        return self._total


class CumulativeCount(CumulativeSum):
    """Number of recordings ever made."""

    __slots__ = ()

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        self._total += 1.0

    def record_many(self, config: MetricConfig, values: Sequence[float], now_ms: int) -> None:
        self._total += len(values)


class Value:
    """The last value recorded; NaN before any."""

    __slots__ = ("_value",)

    def __init__(self) -> None:
        self._value = math.nan

    def record(self, config: MetricConfig, value: float, now_ms: int) -> None:
        self._value = value

    def record_many(self, config: MetricConfig, values: Sequence[float], now_ms: int) -> None:
        if values:
            self._value = values[-1]

    def measure(self, config: MetricConfig, now_ms: int) -> float:
        return self._value
