"""Windowed stats with a fake clock: Java's rate rule, window expiry, gauges and thread-safety."""

from __future__ import annotations

import math
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproducer.metrics import (
    PRODUCER_GAUGES,
    Avg,
    CumulativeCount,
    CumulativeSum,
    Max,
    MetricConfig,
    Metrics,
    Min,
    Rate,
    TopicMetricsRegistry,
    Value,
    WindowedCount,
    WindowedSum,
    register_producer_metrics,
)
from tests.support.clock import FakeClock


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(1_000_000)


@pytest.fixture
def metrics(clock: FakeClock) -> Metrics:
    return Metrics(clock_ms=clock, sample_window_ms=1000, num_samples=2)


# ---------------------------------------------------------------- rate


def test_rate_assumes_n_minus_one_full_windows_when_young(metrics: Metrics, clock: FakeClock) -> None:
    s = metrics.sensor("s")
    s.add("x-rate", Rate())
    t0 = clock.now
    s.record(10)
    # 10 units after 0 ms elapsed: the window counts as (2 - 1) full windows = 1000 ms, not 1 ms.
    assert metrics.value("x-rate") == pytest.approx(10.0)
    clock.now = t0 + 500
    assert metrics.value("x-rate") == pytest.approx(10 / 1.5)


def test_rate_over_several_windows(metrics: Metrics, clock: FakeClock) -> None:
    s = metrics.sensor("s")
    s.add("x-rate", Rate())
    t0 = clock.now
    for i in range(30):  # 10 per 100 ms = 100/s steady
        clock.now = t0 + i * 100
        s.record(10)
    # The ring of 2 samples now holds t0+1000..1900 and t0+2000..2900 (10 records of 10 each);
    # the first window was reused. Elapsed time runs from the oldest live window: 1900 ms.
    clock.now = t0 + 2900
    assert metrics.value("x-rate") == pytest.approx(200 / 1.9)


def test_rate_of_a_steady_stream_converges(clock: FakeClock) -> None:
    m = Metrics(clock_ms=clock, sample_window_ms=1000, num_samples=11)
    s = m.sensor("s")
    s.add("r", Rate())
    t0 = clock.now
    for i in range(200):  # 50 per second for 20 s
        clock.now = t0 + i * 100
        s.record(5)
    assert m.value("r") == pytest.approx(50.0, rel=0.1)


def test_rate_with_windowed_count_ignores_values(metrics: Metrics) -> None:
    s = metrics.sensor("s")
    s.add("n-rate", Rate(WindowedCount()))
    s.add("sum-rate", Rate(WindowedSum()))
    for _ in range(4):
        s.record(100)
    snap = metrics.snapshot()
    assert snap["n-rate"] == pytest.approx(4.0)
    assert snap["sum-rate"] == pytest.approx(400.0)


def test_rate_window_expires_after_idle(metrics: Metrics, clock: FakeClock) -> None:
    s = metrics.sensor("s")
    s.add("x-rate", Rate())
    s.add("x-total", CumulativeSum())
    s.record(50)
    clock.now += 2000  # num_samples * window: everything recorded is obsolete
    assert metrics.value("x-rate") == 0.0
    assert metrics.value("x-total") == 50.0


def test_rate_in_nanoseconds_gives_a_ratio(metrics: Metrics, clock: FakeClock) -> None:
    s = metrics.sensor("wait")
    s.add("wait-ratio", Rate(unit_ms=1e-6))
    clock.now += 1000
    s.record(250_000_000)  # waited 250 ms of the 2 s window span
    assert metrics.value("wait-ratio") == pytest.approx(0.25)


# ---------------------------------------------------------------- avg, max, min, expiry


def test_avg_max_min(metrics: Metrics) -> None:
    s = metrics.sensor("lat")
    s.add("lat-avg", Avg()).add("lat-max", Max()).add("lat-min", Min())
    assert math.isnan(metrics.value("lat-avg"))
    assert math.isnan(metrics.value("lat-max"))
    for v in (3.0, 9.0, 6.0):
        s.record(v)
    snap = metrics.snapshot()
    assert (snap["lat-avg"], snap["lat-max"], snap["lat-min"]) == (6.0, 9.0, 3.0)


def test_negative_values_are_not_lost_by_max(metrics: Metrics) -> None:
    s = metrics.sensor("s")
    s.add("m", Max())
    s.record(-5)
    assert metrics.value("m") == -5.0


def test_avg_and_max_span_live_windows_then_forget(metrics: Metrics, clock: FakeClock) -> None:
    s = metrics.sensor("lat")
    s.add("avg", Avg()).add("max", Max())
    t0 = clock.now
    s.record(100)
    clock.now = t0 + 1000  # second window
    s.record(10)
    assert metrics.value("avg") == 55.0 and metrics.value("max") == 100.0
    clock.now = t0 + 2000  # third window reuses the first sample: the 100 is gone
    s.record(20)
    assert metrics.value("avg") == 15.0 and metrics.value("max") == 20.0
    clock.now = t0 + 5000  # idle for longer than the whole span
    assert math.isnan(metrics.value("avg")) and math.isnan(metrics.value("max"))


def test_event_window_completes_a_sample() -> None:
    config = MetricConfig(sample_window_ms=10_000, num_samples=2, event_window=2)
    stat = Max()
    for t, v in enumerate((100, 1, 2, 3, 4, 5)):  # three samples of two events (ring of num_samples + 1)
        stat.record(config, v, t)
    assert stat.measure(config, 6) == 100.0
    stat.record(config, 6, 6)  # seventh event: the ring wraps and reuses the sample holding 100
    assert stat.measure(config, 7) == 6.0


def test_overlapping_sample_is_kept_until_its_last_event_expires(metrics: Metrics, clock: FakeClock) -> None:
    """Kafka 3.8+ rule: a sample is purged by its last event, not its start (no rate spikes)."""
    s = metrics.sensor("s")
    s.add("r", Rate()).add("sum", WindowedSum())
    t0 = clock.now
    s.record(30)
    clock.now = t0 + 999
    s.record(30)  # same sample; its last event is at t0+999
    clock.now = t0 + 2500  # older than the span by start, younger by last event
    assert metrics.value("sum") == 60.0
    assert metrics.value("r") == pytest.approx(60 / 2.5)  # elapsed counts from the sample's start
    clock.now = t0 + 2999
    assert metrics.value("sum") == 0.0


def test_cumulative_count_value_and_windowed_count(metrics: Metrics, clock: FakeClock) -> None:
    s = metrics.sensor("s")
    s.add("count", CumulativeCount()).add("last", Value()).add("wcount", WindowedCount())
    assert math.isnan(metrics.value("last"))
    for v in (7, 8, 9):
        s.record(v)
    assert metrics.value("count") == 3.0 and metrics.value("last") == 9.0 and metrics.value("wcount") == 3.0
    clock.now += 10_000
    assert metrics.value("count") == 3.0 and metrics.value("wcount") == 0.0


# ---------------------------------------------------------------- registry


def test_sensor_is_get_or_create_and_names_are_unique(metrics: Metrics) -> None:
    a = metrics.sensor("a")
    assert metrics.sensor("a") is a
    a.add("a-avg", Avg(), "average of a")
    with pytest.raises(ValueError, match="already exists"):
        metrics.sensor("b").add("a-avg", Max())
    assert metrics.describe()["a-avg"] == "average of a"


def test_tags_make_the_snapshot_key(metrics: Metrics) -> None:
    metrics.sensor("t").add("record-send-total", CumulativeSum(), tags={"topic": "orders"})
    metrics.sensor("t").record(4)
    assert metrics.snapshot()["record-send-total[topic=orders]"] == 4.0


def test_gauges_are_read_on_demand_and_failures_read_nan(metrics: Metrics) -> None:
    box = {"v": 1.0}
    metrics.add_gauge("g", lambda: box["v"], "a gauge")
    assert metrics.snapshot()["g"] == 1.0
    box["v"] = 42.0
    assert metrics.snapshot()["g"] == 42.0

    def broken() -> float:
        raise RuntimeError("boom")

    metrics.add_gauge("bad", broken)
    assert math.isnan(metrics.snapshot()["bad"])
    assert metrics.remove_metric("g") and "g" not in metrics.snapshot()


def test_recording_level_disables_debug_sensors(clock: FakeClock) -> None:
    m = Metrics(clock_ms=clock, recording_level="INFO")
    dbg = m.sensor("dbg", recording_level="DEBUG")
    dbg.add("dbg-total", CumulativeSum())
    dbg.record(5)
    assert not dbg.enabled and m.value("dbg-total") == 0.0
    m2 = Metrics(clock_ms=clock, recording_level="debug")
    on = m2.sensor("dbg", recording_level="DEBUG")
    on.add("dbg-total", CumulativeSum())
    on.record(5)
    assert m2.value("dbg-total") == 5.0


def test_remove_sensor_drops_its_metrics(metrics: Metrics) -> None:
    metrics.sensor("x").add("x-total", CumulativeSum())
    assert metrics.remove_sensor("x")
    assert "x-total" not in metrics.snapshot()
    assert not metrics.remove_sensor("x")


def test_bad_metrics_settings_are_rejected() -> None:
    with pytest.raises(ValueError):
        Metrics(num_samples=0)
    with pytest.raises(ValueError):
        Metrics(recording_level="LOUD")


# ---------------------------------------------------------------- threads


def test_record_is_thread_safe(metrics: Metrics) -> None:
    s = metrics.sensor("s")
    s.add("total", CumulativeSum()).add("count", CumulativeCount()).add("w", WindowedSum())
    s.add("avg", Avg())
    threads, per_thread = 8, 5000
    start = threading.Barrier(threads)

    def work() -> None:
        start.wait()
        for _ in range(per_thread):
            s.record(2.0)

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    snap = metrics.snapshot()
    assert snap["total"] == 2.0 * threads * per_thread
    assert snap["count"] == threads * per_thread
    assert snap["w"] == 2.0 * threads * per_thread
    assert snap["avg"] == 2.0


def test_sensor_creation_is_thread_safe(metrics: Metrics) -> None:
    got: list[object] = []
    start = threading.Barrier(8)

    def work() -> None:
        start.wait()
        got.append(metrics.sensor("shared"))

    pool = [threading.Thread(target=work) for _ in range(8)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    assert len({id(s) for s in got}) == 1


# ---------------------------------------------------------------- producer metrics


JAVA_NAMES = {
    "record-send-rate", "record-send-total", "record-error-rate", "record-error-total",
    "record-retry-rate", "record-retry-total", "request-latency-avg", "request-latency-max",
    "request-rate", "records-per-request-avg", "batch-size-avg", "batch-size-max",
    "compression-rate-avg", "buffer-exhausted-rate", "buffer-exhausted-total",
    "bufferpool-wait-time-ns-total", "record-queue-time-avg", "record-queue-time-max",
    "produce-throttle-time-avg", "produce-throttle-time-max", "record-size-avg", "record-size-max",
    "metadata-request-rate", "metadata-topics-per-request-avg", "metadata-response-bytes-total",
}  # fmt: skip


def test_register_producer_metrics_uses_java_names(metrics: Metrics, clock: FakeClock) -> None:
    ps = register_producer_metrics(metrics)
    snap = metrics.snapshot()
    assert set(snap) >= JAVA_NAMES
    assert all(metrics.describe()[name] for name in snap)

    ps.record_send.record(100)  # one batch of 100 records
    ps.record_send.record(50)
    ps.request.record()
    ps.request_latency.record(12)
    ps.request_latency.record(30)
    ps.batch_size.record(16000)
    ps.metadata_request.record(3)
    ps.metadata_request.record(5)
    ps.metadata_response_bytes.record(1234)
    ps.bufferpool_wait_time.record(5_000_000)
    snap = metrics.snapshot()
    assert snap["record-send-total"] == 150.0
    # 1 s windows, 2 samples, no time elapsed: Java divides by one full window.
    assert snap["record-send-rate"] == pytest.approx(150.0)
    assert snap["request-rate"] == pytest.approx(1.0) and snap["request-total"] == 1.0
    assert (snap["request-latency-avg"], snap["request-latency-max"]) == (21.0, 30.0)
    assert snap["batch-size-max"] == 16000.0
    assert snap["metadata-topics-per-request-avg"] == 4.0
    assert snap["metadata-request-rate"] == pytest.approx(2.0)
    assert snap["metadata-response-bytes-total"] == 1234.0
    assert snap["bufferpool-wait-time-ns-total"] == 5_000_000.0
    assert snap["bufferpool-wait-ratio"] == pytest.approx(0.005)  # 5 ms of a 1 s window


def test_producer_gauges_registered_later(metrics: Metrics) -> None:
    ps = register_producer_metrics(metrics)
    assert {"requests-in-flight", "buffer-available-bytes", "buffer-total-bytes"} <= set(PRODUCER_GAUGES)
    assert {"metadata-urgent-topics", "metadata-age-max"} <= set(PRODUCER_GAUGES)
    ps.add_gauge("buffer-available-bytes", lambda: 1024.0)
    ps.add_gauge("requests-in-flight", lambda: 3)
    snap = metrics.snapshot()
    assert snap["buffer-available-bytes"] == 1024.0 and snap["requests-in-flight"] == 3.0
    assert metrics.describe()["buffer-available-bytes"] == PRODUCER_GAUGES["buffer-available-bytes"]
    with pytest.raises(ValueError, match="unknown producer gauge"):
        ps.add_gauge("buffer-avail", lambda: 0.0)


def test_per_topic_sensors(metrics: Metrics) -> None:
    ps = register_producer_metrics(metrics)
    orders = ps.topic("orders")
    assert ps.topic("orders") is orders
    orders.record_send.record(10)
    orders.byte_send.record(2048)
    ps.topic("audit").record_error.record(1)
    snap = metrics.snapshot()
    assert snap["record-send-total[topic=orders]"] == 10.0
    assert snap["byte-total[topic=orders]"] == 2048.0
    assert snap["record-error-total[topic=audit]"] == 1.0
    assert snap["record-send-total"] == 0.0  # the producer-wide sensor is separate
    ps.remove_topic("orders")
    assert not any("topic=orders" in k for k in metrics.snapshot())


class _Builder:
    def __init__(self, size: int, largest: int = 0) -> None:
        self.records_size = size - 61  # the v2 batch header
        self.largest_record_size = largest


class _Batch:
    def __init__(
        self, topic: str, partition: int, records: int, size: int, largest: int = 0, queue_ms: int = 0
    ) -> None:
        self.topic_partition = (topic, partition)
        self.record_count = records
        self._size = size
        self._queue_ms = queue_ms
        self.builder = _Builder(size, largest)

    def queue_time_ms(self) -> int:
        return self._queue_ms

    def estimated_size_in_bytes(self) -> int:
        return self._size

    def compression_rate(self) -> float:
        return 0.5 if self.topic_partition[0] == "a" else 1.0


class _Pool:
    total_memory = 1000

    def available_memory(self) -> int:
        return 600

    def queued(self) -> int:
        return 2


class _Client:
    def in_flight_request_count(self, node_id: int | None = None) -> int:
        return 4


def test_sender_helpers_record_request_and_topic_metrics(metrics: Metrics) -> None:
    ps = register_producer_metrics(metrics)
    ps.record_drained([_Batch("a", 0, 10, 500), _Batch("a", 1, 5, 200), _Batch("b", 0, 1, 50)])
    ps.record_drained([_Batch("b", 0, 4, 80)])
    ps.record_request_latency(8.0, node_id=1)
    ps.record_throttle(0.0)
    ps.record_retries("a", 3)
    ps.record_errors("b", 2)
    snap = metrics.snapshot()
    assert snap["record-send-total"] == 20.0
    assert snap["request-total"] == 2.0
    assert snap["records-per-request-avg"] == 10.0  # (16 + 4) / 2 requests
    assert snap["record-send-total[topic=a]"] == 15.0 and snap["byte-total[topic=a]"] == 700.0
    assert snap["record-send-total[topic=b]"] == 5.0 and snap["byte-total[topic=b]"] == 130.0
    assert snap["request-latency-max"] == 8.0 and snap["produce-throttle-time-max"] == 0.0
    assert snap["record-retry-total"] == 3.0 and snap["record-retry-total[topic=a]"] == 3.0
    assert snap["record-error-total"] == 2.0 and snap["record-error-total[topic=b]"] == 2.0


def test_record_drained_records_each_batch_s_queue_time_size_and_compression(metrics: Metrics) -> None:
    """One sample per batch of the request for record-queue-time, batch-size and compression-rate."""
    ps = register_producer_metrics(metrics)
    ps.record_drained([_Batch("a", 0, 10, 500, queue_ms=25), _Batch("b", 0, 1, 50, queue_ms=5)], 1_000)
    ps.record_drained([_Batch("b", 1, 2, 80, queue_ms=9)], 1_001)
    snap = metrics.snapshot(1_001)
    assert snap["record-queue-time-avg"] == 13.0 and snap["record-queue-time-max"] == 25.0
    assert snap["batch-size-avg"] == pytest.approx(630 / 3) and snap["batch-size-max"] == 500.0
    assert snap["compression-rate-avg"] == pytest.approx((0.5 + 1.0 + 1.0) / 3)  # three samples, one a batch


def test_bind_gauges_reads_pool_and_client(metrics: Metrics) -> None:
    ps = register_producer_metrics(metrics)
    ps.bind_gauges(_Pool(), _Client())
    snap = metrics.snapshot()
    assert snap["buffer-available-bytes"] == 600.0 and snap["buffer-total-bytes"] == 1000.0
    assert snap["requests-in-flight"] == 4.0 and snap["waiting-threads"] == 2.0


def test_per_topic_compression_rate_averages_batches(metrics: Metrics) -> None:
    ps = register_producer_metrics(metrics)
    ps.record_drained([_Batch("a", 0, 10, 500), _Batch("a", 1, 5, 200), _Batch("b", 0, 1, 50)])
    ps.record_drained([_Batch("a", 2, 1, 10)])
    snap = metrics.snapshot()
    assert snap["compression-rate[topic=a]"] == 0.5 and snap["compression-rate[topic=b]"] == 1.0
    assert math.isnan(ps.topic("c").compression_rate.avg(metrics.config, 0))


@settings(max_examples=200, deadline=None)
@given(
    events=st.lists(
        st.tuples(st.integers(0, 40_000), st.floats(0, 1e6, allow_nan=False)), min_size=0, max_size=40
    ),
    window=st.integers(1, 20_000),
    samples=st.integers(1, 4),
    read_gap=st.integers(0, 100_000),
)
def test_topic_stats_read_as_the_general_sensor_stats(
    events: list[tuple[int, float]], window: int, samples: int, read_gap: int
) -> None:
    """The compact per-topic stat gives the figures a Sensor with Rate/CumulativeSum/Avg gives."""
    clock = FakeClock()
    general = Metrics(clock_ms=clock, sample_window_ms=window, num_samples=samples)
    sensor = general.sensor("s")
    sensor.add("r", Rate(WindowedSum()))
    sensor.add("t", CumulativeSum())
    sensor.add("a", Avg())
    registry = TopicMetricsRegistry(
        Metrics(clock_ms=clock, sample_window_ms=window, num_samples=samples)
    )
    topic = registry.topic("x")
    t = 0
    for gap, value in events:
        t += gap
        sensor.record(value, t)
        topic.record_send.record(value, t)
    t += read_gap
    ours = registry.metric_values(t)
    theirs = general.snapshot(t)
    assert ours["record-send-total[topic=x]"] == pytest.approx(theirs["t"])
    assert ours["record-send-rate[topic=x]"] == pytest.approx(theirs["r"])
    avg = topic.record_send.avg(registry.config, t)
    assert (math.isnan(avg) and math.isnan(theirs["a"])) or avg == pytest.approx(theirs["a"])


def test_the_package_keeps_the_former_module_s_names_and_loggers() -> None:
    """metrics/ was one module: its public names and the registry's logger name stay; the
    reporters log under their own module's name."""
    import logging

    import kproducer.metrics as metrics
    from kproducer.metrics import registry, reporters

    former = {
        "PRODUCER_GROUP", "PRODUCER_TOPIC_GROUP", "PRODUCER_GAUGES", "NODE_BUFFER_BYTES_METRIC",
        "TRANSACTION_TIMERS", "Avg", "CumulativeCount", "CumulativeSum", "Max", "MetricConfig",
        "MetricName", "MetricsProvider", "Metrics", "Min", "NodeBufferMetrics", "ProducerSensors",
        "Rate", "Sensor", "Stat", "TopicMetricsRegistry", "TopicSensors", "Value", "WindowedCount",
        "WindowedSum", "register_producer_metrics", "register_transaction_metrics",
    }  # fmt: skip
    assert former <= set(metrics.__all__)
    assert all(hasattr(metrics, name) for name in metrics.__all__)
    assert registry.logger is logging.getLogger("kproducer.metrics")
    assert reporters.logger is logging.getLogger("kproducer.metrics.reporters")


def test_record_size_avg_is_each_batch_mean_and_max_its_largest_record(metrics: Metrics) -> None:
    ps = register_producer_metrics(metrics)
    assert math.isnan(metrics.snapshot()["record-size-avg"])  # undefined until a batch is sent
    # 10 records in 61 + 1000 bytes (the largest 400), 4 records in 61 + 200 bytes (the largest 80).
    ps.record_drained([_Batch("a", 0, 10, 1061, largest=400), _Batch("b", 0, 4, 261, largest=80)])
    ps.record_drained([_Batch("a", 0, 0, 61)])  # an empty batch has no records: not counted
    snap = metrics.snapshot()
    assert snap["record-size-avg"] == 75.0  # the batches' means, 100 and 50
    assert snap["record-size-max"] == 400.0
    # A batch whose builder did not read its records (magic 0/1) counts its mean as its largest.
    ps.record_drained([_Batch("c", 0, 2, 61 + 1000)])
    assert metrics.snapshot()["record-size-max"] == 500.0


_STATS = [Avg, Max, Min, WindowedSum, WindowedCount, CumulativeSum, CumulativeCount, Value, Rate]


@settings(max_examples=200, deadline=None)
@given(
    stat_type=st.sampled_from(_STATS),
    event_window=st.sampled_from([2, 3, 5, 2**63 - 1]),
    steps=st.lists(
        st.tuples(
            st.integers(min_value=0, max_value=15_000),  # ms to the next recording
            # The values recorded then; NaN too, which Max and Min skip one at a time.
            st.lists(st.one_of(st.integers(min_value=-1000, max_value=1000), st.just(math.nan)), max_size=6),
        ),
        max_size=12,
    ),
)
def test_record_many_leaves_every_stat_as_recording_the_values_one_by_one(
    stat_type: type, event_window: int, steps: list[tuple[int, list[float]]]
) -> None:
    # Integer values, so a sum folded at once is exactly the sum made one value at a time.
    config = MetricConfig(sample_window_ms=10_000, num_samples=2, event_window=event_window)
    one_by_one, folded = stat_type(), stat_type()
    now = 0
    for gap, values in steps:
        now += gap
        for v in values:
            one_by_one.record(config, float(v), now)
        folded.record_many(config, [float(v) for v in values], now)
        a, b = one_by_one.measure(config, now), folded.measure(config, now)
        assert (math.isnan(a) and math.isnan(b)) or a == b, (now, values)
