"""The producer's own metrics under their Java names (Java's ``producer-metrics`` group).

What the Java client's ``SenderMetricsRegistry`` and ``KafkaProducer`` define: the
sensors the Sender, the accumulator and the metadata code record into
(:class:`ProducerSensors`, created by :func:`register_producer_metrics`), the gauges
read from the BufferPool and the NetworkClient, ``buffer-node-bytes`` per leader, and
the transactional timers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from kproducer.metrics.registry import PRODUCER_GROUP, MetricName, Metrics, Sensor
from kproducer.metrics.stats import Avg, CumulativeCount, CumulativeSum, Max, Rate, WindowedCount, WindowedSum
from kproducer.metrics.topic_metrics import TopicMetricsRegistry, TopicSensors

__all__ = [
    "NODE_BUFFER_BYTES_METRIC",
    "UNDEFINED_UNTIL_EVENT",
    "PRODUCER_GAUGES",
    "TRANSACTION_TIMERS",
    "NodeBufferMetrics",
    "ProducerSensors",
    "register_producer_metrics",
    "register_transaction_metrics",
]


#: Gauges the producer registers once the objects they read exist (name -> description).
PRODUCER_GAUGES: dict[str, str] = {
    "requests-in-flight": "Produce requests sent and not yet answered, over all brokers.",
    "buffer-available-bytes": "Bytes of buffer.memory not held by batches (free list plus unallocated).",
    "buffer-total-bytes": "The buffer.memory the BufferPool manages.",
    "metadata-urgent-topics": "Topics whose metadata is needed now (KIP-526's urgent set).",
    "metadata-age-max": "Seconds since the least recently refreshed topic's metadata was fetched.",
    "waiting-threads": "Caller threads blocked waiting for buffer memory.",
}


class _BuilderSizes(Protocol):
    @property
    def records_size(self) -> int: ...

    @property
    def largest_record_size(self) -> int: ...


#: The metrics that have no value until their event happens, by name, with that event: an
#: average or a maximum of nothing is undefined (Java reports NaN). ``metrics()`` gives NaN
#: for them, and the reporters leave them out, until the event; they are undefined again once no
#: such event happened during ``metrics.num.samples`` windows of ``metrics.sample.window.ms``.
#: Every other metric always has a finite value. docs/operability.md lists the same table.
UNDEFINED_UNTIL_EVENT: dict[str, str] = {
    "request-latency-avg": "a produce response",
    "request-latency-max": "a produce response",
    "produce-throttle-time-avg": "a produce response",
    "produce-throttle-time-max": "a produce response",
    "records-per-request-avg": "a produce request",
    "batch-size-avg": "a batch sent",
    "batch-size-max": "a batch sent",
    "compression-rate-avg": "a batch sent",
    "record-queue-time-avg": "a batch sent",
    "record-queue-time-max": "a batch sent",
    "record-size-avg": "a batch sent",
    "record-size-max": "a batch sent",
    "metadata-topics-per-request-avg": "a metadata request",
    "compression-rate": "a batch of the topic sent (producer-topic-metrics)",
    "circuit-breaker-time-to-mute-avg": "a partition muted after requests its leader never answered",
    "circuit-breaker-time-to-mute-max": "a partition muted after requests its leader never answered",
}


class _DrainedBatch(Protocol):
    """What :meth:`ProducerSensors.record_drained` reads of a ProducerBatch."""

    @property
    def builder(self) -> _BuilderSizes: ...

    @property
    def topic_partition(self) -> tuple[str, int]: ...

    @property
    def record_count(self) -> int: ...

    def estimated_size_in_bytes(self) -> int: ...

    def compression_rate(self) -> float: ...

    def queue_time_ms(self) -> int: ...


class _PoolLike(Protocol):
    @property
    def total_memory(self) -> int: ...

    def available_memory(self) -> int: ...

    def queued(self) -> int: ...


class _ClientLike(Protocol):
    def in_flight_request_count(self, node_id: int | None = None) -> int: ...


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
        return {
            f"{NODE_BUFFER_BYTES_METRIC}[node-id={n}]": float(b)
            for n, b in sorted(self._bytes_by_node().items())
        }

    def metric_descriptions(self) -> dict[str, str]:
        return {
            f"{NODE_BUFFER_BYTES_METRIC}[node-id={n}]": f"Bytes of buffer.memory held by batches led by node {n}."
            for n in sorted(self._bytes_by_node())
        }

    def metric_names(self) -> list[MetricName]:
        return [
            MetricName(NODE_BUFFER_BYTES_METRIC, PRODUCER_GROUP, (("node-id", str(n)),))
            for n in sorted(self._bytes_by_node())
        ]


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
    #: record(bytes) per batch sent: the mean size of its records as encoded (see record_drained).
    record_size: Sensor
    #: record(bytes) per batch sent: its largest record as encoded (see record_drained).
    record_size_max: Sensor
    #: record(number of topics asked for) per metadata request.
    metadata_request: Sensor
    #: record(bytes) per metadata response.
    metadata_response_bytes: Sensor
    #: Per-topic metrics, built when read.
    topics: TopicMetricsRegistry

    # -------------------------------------------------------------- recording helpers (Sender thread)

    def record_drained(self, batches: Sequence[_DrainedBatch], now_ms: int | None = None) -> None:
        """One produce request built from ``batches``: request, record, batch and per-topic figures.

        Per batch, as Java's ``SenderMetrics.updateProduceRequestMetrics`` records them for each
        request: ``record-queue-time`` (creation to drain), ``batch-size`` and
        ``compression-rate``, one sample each, in the same pass as the request's other figures.

        ``record-size-avg``/``-max`` get one value per batch, as Java's Sender records
        ``record-size`` once per batch drained: the average the mean size of the batch's
        records, the maximum its largest record (Java's ``ProducerBatch.maxRecordSize``), each
        as encoded in the v2 format (length, attributes, deltas, key, value, headers; before
        compression). Recording it here, from the batch, counts the records of every path
        alike (send(), the C send lane, send_batch(), send_arrow()), none of which pays a
        per-record metric call.
        """
        # The send rates and totals are sums, so one record per topic per request gives the
        # same figures as one per batch, for a fraction of the cost; the compression average
        # takes the request's batches of the topic as that many events.
        records = 0
        per_topic: dict[str, list[float]] = {}
        sizes: list[float] = []
        largest: list[float] = []
        queue_times: list[float] = []
        batch_sizes: list[float] = []
        rates: list[float] = []
        for batch in batches:
            count = batch.record_count
            records += count
            if count > 0:
                builder = batch.builder
                mean = builder.records_size / count
                sizes.append(mean)
                # 0: not read (magic 0/1, whose records are not v2 records): the mean stands in.
                largest.append(builder.largest_record_size or mean)
            batch_bytes = batch.estimated_size_in_bytes()
            rate = batch.compression_rate()
            queue_times.append(float(batch.queue_time_ms()))
            batch_sizes.append(float(batch_bytes))
            rates.append(rate)
            acc = per_topic.get(batch.topic_partition[0])
            if acc is None:
                per_topic[batch.topic_partition[0]] = [count, batch_bytes, rate, 1]
            else:
                acc[0] += count
                acc[1] += batch_bytes
                acc[2] += rate
                acc[3] += 1
        if now_ms is None:
            now_ms = self.request.clock_ms()
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
        self.record_size.record_each(sizes, now_ms)
        self.record_size_max.record_each(largest, now_ms)
        self.record_queue_time.record_each(queue_times, now_ms)
        self.batch_size.record_each(batch_sizes, now_ms)
        self.compression_rate.record_each(rates, now_ms)

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
    record_size.add(
        "record-size-avg", Avg(), "The average record size in bytes (each batch sent counts its mean record size)."
    )
    record_size_max = s("record-size-max")
    record_size_max.add("record-size-max", Max(), "The largest record size in bytes, as encoded before compression.")

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
        record_size_max=record_size_max,
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
