"""``metric.reporters``: hand ``producer.metrics()`` to the monitoring stack.

Java's producer calls each class in ``metric.reporters`` (``MetricsReporter``)
with every metric; JMX is the built-in one. Here the two reporters in the box are
pull-based, so nothing runs on the send path or the I/O thread: values are read
from the producer's registry when the monitoring system asks.

* ``prometheus`` (:class:`PrometheusReporter`, needs ``prometheus_client``):
  a collector in prometheus_client's registry. Kafka's names become Prometheus
  names the way the JMX exporter's rules usually write them: ``producer-metrics``
  ``record-send-rate`` is ``kafka_producer_record_send_rate``, the
  ``producer-topic-metrics`` group is ``kafka_producer_topic_*`` with a ``topic``
  label, every series has a ``client_id`` label, and ``*-total`` metrics are
  counters (``kafka_producer_record_send_total``). ``metrics.prometheus.port``
  also starts prometheus_client's HTTP server in this process (once).
* ``opentelemetry`` (:class:`OpenTelemetryReporter`, needs ``opentelemetry-api``):
  asynchronous instruments on the meter of the global MeterProvider that the
  application configured with the SDK, named like the OpenTelemetry Java
  instrumentation of kafka-clients names them (``kafka.producer.record_send_rate``,
  attributes ``client-id`` and ``topic``); ``*-total`` metrics are observable
  counters, the rest observable gauges.

Several producers in one process share one collector (or one set of instruments)
per registry (or meter): Prometheus and OpenTelemetry both reject a second family
of the same name, so each series carries its client id instead.
"""

from __future__ import annotations

import logging
import math
import threading
import time
import weakref
from collections.abc import Iterable, Iterator
from typing import Any, Protocol, runtime_checkable

from kproducer.common import load_object
from kproducer.errors import ConfigError
from kproducer.metrics.registry import PRODUCER_GROUP, MetricName, Metrics
from kproducer.metrics.topic_metrics import PRODUCER_TOPIC_GROUP

# The module's logger before it moved into the metrics package: logging configs name it.
logger = logging.getLogger(__name__)

__all__ = [
    "MetricsReporter",
    "OpenTelemetryReporter",
    "PrometheusReporter",
    "prometheus_name",
    "opentelemetry_name",
    "resolve_reporters",
]


@runtime_checkable
class MetricsReporter(Protocol):
    """What ``metric.reporters`` entries implement (Java's MetricsReporter, pull-style).

    ``configure`` receives the producer's whole configuration (Java names), ``init``
    the producer's metric registry and client id; ``close`` runs when the producer closes.
    """

    def configure(self, configs: dict[str, Any]) -> None: ...

    def init(self, metrics: Metrics, client_id: str) -> None: ...

    def close(self) -> None: ...


# ---------------------------------------------------------------------------- naming
def _group_prefix(group: str) -> list[str]:
    if group == PRODUCER_GROUP:
        return ["kafka", "producer"]
    if group == PRODUCER_TOPIC_GROUP:
        return ["kafka", "producer", "topic"]
    rest = group.removesuffix("-metrics").removeprefix("producer-")
    return ["kafka", "producer", rest.replace("-", "_")]


def _is_total(name: str) -> bool:
    return name.endswith("-total")


def prometheus_name(group: str, name: str) -> tuple[str, bool]:
    """(family name, is_counter): ``record-send-total`` -> ``kafka_producer_record_send`` counter.

    prometheus_client appends ``_total`` to a counter family's sample, so the
    exposition shows ``kafka_producer_record_send_total``.
    """
    counter = _is_total(name)
    base = name.removesuffix("-total") if counter else name
    full = "_".join([*_group_prefix(group), base.replace("-", "_").replace(".", "_")])
    return full, counter


def opentelemetry_name(group: str, name: str) -> tuple[str, bool]:
    """(instrument name, is_counter): ``record-send-rate`` -> ``kafka.producer.record_send_rate`` gauge."""
    return ".".join([*_group_prefix(group), name.replace("-", "_")]), _is_total(name)


def _description(text: str) -> str:
    return text or "kproducer metric"


class _Sources:
    """The producers a shared collector reads, each (client id, registry); dropped when closed or collected."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sources: dict[int, tuple[str, weakref.ref[Metrics]]] = {}
        # client id -> (monotonic time read, readings): OpenTelemetry calls one callback per
        # instrument in one collection, and one read of the registry serves all of them.
        self._cache: dict[int, tuple[float, list[tuple[MetricName, float]]]] = {}

    def add(self, metrics: Metrics, client_id: str) -> int:
        token = id(metrics)
        with self._lock:
            self._sources[token] = (client_id, weakref.ref(metrics))
        return token

    def remove(self, token: int) -> None:
        with self._lock:
            self._sources.pop(token, None)
            self._cache.pop(token, None)

    def __bool__(self) -> bool:
        return bool(self._sources)

    def families(self) -> dict[tuple[str, str], str]:
        with self._lock:
            refs = [ref for _, ref in self._sources.values()]
        out: dict[tuple[str, str], str] = {}
        for ref in refs:
            metrics = ref()
            if metrics is not None:
                out.update(metrics.families())
        return out

    def readings(self, max_age_s: float = 0.0) -> Iterator[tuple[str, MetricName, float]]:
        with self._lock:
            sources = list(self._sources.items())
        now = time.monotonic()
        for token, (client_id, ref) in sources:
            metrics = ref()
            if metrics is None:
                self.remove(token)
                continue
            cached = self._cache.get(token)
            if cached is not None and now - cached[0] <= max_age_s:
                values = cached[1]
            else:
                values = metrics.readings()
                self._cache[token] = (now, values)
            for name, value in values:
                # A metric undefined until its event (an average with no sample yet, see
                # docs/operability.md) is left out rather than reported as NaN: Prometheus would
                # show NaN and the OpenTelemetry SDK warns about non-finite values at every collection.
                if math.isfinite(value):
                    yield client_id, name, value


# ---------------------------------------------------------------------------- Prometheus
class _PrometheusCollector:
    """One per prometheus_client registry: every registered producer's metrics, as families."""

    def __init__(self) -> None:
        self.sources = _Sources()

    def describe(self) -> list[Any]:
        # Families come and go with topics; an empty describe() keeps the registry from
        # calling collect() at registration to check for duplicate names.
        return []

    def collect(self) -> Iterable[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        families: dict[str, Any] = {}
        docs = self.sources.families()
        for client_id, name, value in self.sources.readings():
            family_name, counter = prometheus_name(name.group, name.name)
            family = families.get(family_name)
            labels = ["client_id", *(k for k, _ in name.tags)]
            if family is None:
                cls = CounterMetricFamily if counter else GaugeMetricFamily
                family = families[family_name] = cls(
                    family_name, _description(docs.get((name.group, name.name), "")), labels=labels
                )
            family.add_metric([client_id, *(v for _, v in name.tags)], value)
        return list(families.values())


_prometheus_lock = threading.Lock()
# By registry (meter provider) object, weakly: keyed by id(), a registry collected and a new one
# given the same address would find the old collector, registered only in the old registry.
_prometheus_collectors: weakref.WeakKeyDictionary[Any, _PrometheusCollector] = weakref.WeakKeyDictionary()
_prometheus_servers: dict[tuple[str, int, int], Any] = {}


class PrometheusReporter:
    """Exposes the producer's metrics through prometheus_client (``metric.reporters=prometheus``).

    ``registry`` defaults to prometheus_client's global REGISTRY, which
    ``start_http_server`` and most frameworks' ``/metrics`` endpoints serve.
    """

    def __init__(self, registry: Any = None, port: int | None = None, addr: str = "127.0.0.1") -> None:
        try:
            import prometheus_client
        except ImportError as e:
            raise ConfigError(
                "metric.reporters: the prometheus reporter needs prometheus_client "
                "(pip install 'kproducer[prometheus]')"
            ) from e
        self._registry = registry if registry is not None else prometheus_client.REGISTRY
        self._port = port
        self._addr = addr
        self._collector: _PrometheusCollector | None = None
        self._token: int | None = None
        #: The port the HTTP server listens on (the real one when 0 was asked for); None without one.
        self.http_port: int | None = None

    def configure(self, configs: dict[str, Any]) -> None:
        port = configs.get("metrics.prometheus.port")
        if port is not None and self._port is None:
            self._port = int(port)
        addr = configs.get("metrics.prometheus.addr")
        if addr:
            self._addr = str(addr)

    def init(self, metrics: Metrics, client_id: str) -> None:
        with _prometheus_lock:
            collector = _prometheus_collectors.get(self._registry)
            if collector is None:
                collector = _prometheus_collectors[self._registry] = _PrometheusCollector()
                self._registry.register(collector)
            self._collector = collector
            self._token = collector.sources.add(metrics, client_id)
            if self._port is not None:
                # One server per address and port (port 0: per registry, each on a port of its own).
                key = (self._addr, self._port, 0 if self._port else id(self._registry))
                server = _prometheus_servers.get(key)
                if server is None:
                    from prometheus_client import start_http_server

                    try:
                        started = start_http_server(self._port, addr=self._addr, registry=self._registry)
                    except OSError as e:
                        # Several processes on one host (Spark's Python workers) share the setting: the
                        # first serves its producers, the others keep reporting into their registry.
                        logger.warning(
                            "metrics.prometheus.port: cannot listen on %s:%d (%s); producer %s's metrics are "
                            "in this process's prometheus_client registry but not served over HTTP",
                            self._addr,
                            self._port,
                            e.strerror or e,
                            client_id,
                        )
                        return
                    server = _prometheus_servers[key] = started[0] if isinstance(started, tuple) else started
                    if not self._port:
                        # The OS chose the port: say which, or nobody could scrape it.
                        logger.info(
                            "metrics.prometheus.port=0: producer %s's metrics are served at http://%s:%d/metrics",
                            client_id, self._addr, int(server.server_port),
                        )
                self.http_port = int(server.server_port)

    def close(self) -> None:
        if self._collector is not None and self._token is not None:
            self._collector.sources.remove(self._token)
            self._token = None


# ---------------------------------------------------------------------------- OpenTelemetry
class _OpenTelemetryInstruments:
    """One per meter: an asynchronous instrument per metric family, reading every registered producer."""

    def __init__(self, meter: Any) -> None:
        self.meter = meter
        self.sources = _Sources()
        self._instruments: dict[str, Any] = {}
        self._lock = threading.Lock()

    def declare(self, families: dict[tuple[str, str], str]) -> None:
        with self._lock:
            for (group, name), description in families.items():
                inst_name, counter = opentelemetry_name(group, name)
                if inst_name in self._instruments:
                    continue
                create = self.meter.create_observable_counter if counter else self.meter.create_observable_gauge
                self._instruments[inst_name] = create(
                    inst_name, callbacks=[self._callback_for(group, name)], description=_description(description)
                )

    def _callback_for(self, group: str, name: str) -> Any:
        from opentelemetry.metrics import Observation

        def callback(_options: Any) -> list[Any]:
            out = []
            # One registry read per producer serves every instrument of this collection.
            for client_id, mname, value in self.sources.readings(max_age_s=1.0):
                if mname.group == group and mname.name == name:
                    attrs = {"client-id": client_id, **dict(mname.tags)}
                    out.append(Observation(value, attrs))
            return out

        return callback


_otel_lock = threading.Lock()
_otel_instruments: weakref.WeakKeyDictionary[Any, _OpenTelemetryInstruments] = weakref.WeakKeyDictionary()


class OpenTelemetryReporter:
    """Reports the producer's metrics as OpenTelemetry asynchronous instruments (``metric.reporters=opentelemetry``).

    ``meter_provider`` defaults to the global one (``opentelemetry.metrics.set_meter_provider``),
    so the application's SDK setup (readers, exporters) decides where values go.
    """

    def __init__(self, meter_provider: Any = None) -> None:
        try:
            from opentelemetry import metrics as otel_metrics
        except ImportError as e:
            raise ConfigError(
                "metric.reporters: the opentelemetry reporter needs opentelemetry-api "
                "(pip install 'kproducer[opentelemetry]')"
            ) from e
        self._provider = meter_provider if meter_provider is not None else otel_metrics.get_meter_provider()
        self._instruments: _OpenTelemetryInstruments | None = None
        self._token: int | None = None

    def configure(self, configs: dict[str, Any]) -> None:
        pass

    def init(self, metrics: Metrics, client_id: str) -> None:
        from kproducer import __version__

        with _otel_lock:
            instruments = _otel_instruments.get(self._provider)
            if instruments is None:
                meter = self._provider.get_meter("kproducer", __version__)
                instruments = _otel_instruments[self._provider] = _OpenTelemetryInstruments(meter)
        instruments.declare(metrics.families())
        self._instruments = instruments
        self._token = instruments.sources.add(metrics, client_id)

    def close(self) -> None:
        if self._instruments is not None and self._token is not None:
            self._instruments.sources.remove(self._token)
            self._token = None


# ---------------------------------------------------------------------------- resolution
_BUILT_IN: dict[str, type] = {"prometheus": PrometheusReporter, "opentelemetry": OpenTelemetryReporter}


def resolve_reporters(specs: Iterable[Any], configs: dict[str, Any]) -> list[MetricsReporter]:
    """``metric.reporters`` entries: ``prometheus``, ``opentelemetry``, a 'module:Name' path, a class or an instance."""
    out: list[MetricsReporter] = []
    for spec in specs:
        obj = spec
        if isinstance(spec, str):
            obj = _BUILT_IN.get(spec.lower())
            if obj is None:
                try:
                    obj = load_object(spec)
                except (ImportError, AttributeError, ValueError) as e:
                    raise ConfigError(
                        f"metric.reporters: cannot load {spec!r} ({e}); use prometheus, opentelemetry, "
                        "or a 'module:Name' path to a class with configure(), init() and close()"
                    ) from e
        if isinstance(obj, type):
            obj = obj()
        if not all(callable(getattr(obj, m, None)) for m in ("configure", "init", "close")):
            raise ConfigError(
                f"metric.reporters entry {spec!r} must provide configure(configs), init(metrics, client_id) and close()"
            )
        obj.configure(configs)
        out.append(obj)
    return out
