"""A metrics registry stand-in that keeps every value recorded, for checking what a component records."""

from __future__ import annotations


class RecordingSensor:
    def __init__(self) -> None:
        self.values: list[float] = []

    def record(self, value: float = 1.0, now_ms: int | None = None) -> None:
        self.values.append(value)

    def record_each(self, values: list[float], now_ms: int | None = None) -> None:
        self.values.extend(values)


class RecordingMetrics:
    """Answers ``sensor(name)`` as the producer's Metrics does; ``sensors[name].values`` is the record."""

    def __init__(self) -> None:
        self.sensors: dict[str, RecordingSensor] = {}

    def sensor(self, name: str) -> RecordingSensor:
        return self.sensors.setdefault(name, RecordingSensor())
