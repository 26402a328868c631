"""Slow-broker isolation: does one 2,000 ms broker starve the healthy partitions?

Scenario (issue 6): a fresh 3-broker librdkafka mock cluster per mode, a topic of
6 partitions spread over the brokers (partition p led by broker p % 3), keyless
100 B records produced at full speed from one thread; after ``--fault-at`` seconds
the first broker answers every request 2,000 ms late. Modes, in one run:

* ``baseline``: kproducer, no fault (the fault-free reference);
* ``breaker-off``: kproducer, no circuit breaker;
* ``breaker-on``: kproducer with the FailureRateCircuitBreaker;
* ``kip794``: kproducer with only ``partitioner.availability.timeout.ms``;
* ``confluent-kafka``: librdkafka on the same scenario.

Every mode uses ``request.timeout.ms=1000`` (so the slow broker's requests time
out and count as failures) and ``max.block.ms=1000`` (so a full buffer surfaces as
BufferExhausted instead of a minute-long block). Reported per mode: healthy-partition
throughput (records/s delivered to partitions not led by the slow broker, from the
fault on) and its ratio to the baseline, p99 delivery latency on those partitions,
minimum buffer-available-bytes, BufferExhausted errors; plus a PNG of throughput
over time (one line per mode) and the buffer-available-bytes series as JSON.

    .venv/bin/python benchmarks/slow_broker.py                 # 30 s per mode
    .venv/bin/python benchmarks/slow_broker.py --duration 20   # shorter
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.mock_cluster import MockCluster, start_mock_cluster  # noqa: E402

OUT = ROOT / "benchmarks" / "out"
PARTITIONS = 6
SLOW_RTT_MS = 2000
VALUE = b"x" * 100
MODES = ["baseline", "breaker-off", "breaker-on", "kip794", "confluent-kafka"]

COMMON = {
    "linger.ms": 5,
    "request.timeout.ms": 1000,
    "delivery.timeout.ms": 30_000,
    "max.block.ms": 1000,
}
BREAKER = {
    "producer.circuit.breaker.class": "failure_rate",
    "producer.circuit.breaker.trigger.message.count": 100,
    "producer.circuit.breaker.trigger.failure.perc": 50,
    "producer.circuit.breaker.window.ms": 2000,
    "producer.circuit.breaker.mute.retry.interval": 2000,
}
KIP794 = {"partitioner.availability.timeout.ms": 500}


class Recorder:
    """Delivery outcomes in time buckets: healthy deliveries, latencies, errors."""

    def __init__(self, start: float, healthy: set[int]) -> None:
        self.start = start
        self.healthy = healthy
        self.lock = threading.Lock()
        self.per_second: dict[int, int] = {}
        self.healthy_latencies_ms: list[float] = []  # from the fault on
        self.delivered = 0
        self.failed = 0
        self.buffer_exhausted = 0
        self.fault_at = 0.0

    def delivered_one(self, partition: int, latency_s: float, now: float) -> None:
        with self.lock:
            self.delivered += 1
            if partition in self.healthy:
                sec = int(now - self.start)
                self.per_second[sec] = self.per_second.get(sec, 0) + 1
                if now - self.start >= self.fault_at:
                    self.healthy_latencies_ms.append(latency_s * 1000.0)


def _spread(mc: MockCluster, topic: str) -> tuple[int, set[int]]:
    mc.create_topic(topic, PARTITIONS)
    ids = mc.broker_ids
    for p in range(PARTITIONS):
        mc.partition_set_leader(topic, p, ids[p % 3])
    return ids[0], {p for p in range(PARTITIONS) if p % 3 != 0}


def _run_kproducer(mode: str, mc: MockCluster, topic: str, args: argparse.Namespace) -> dict[str, Any]:
    from kproducer.errors import BufferExhaustedError
    from kproducer.producer import Producer

    slow, healthy = _spread(mc, topic)
    config: dict[str, Any] = {"bootstrap.servers": mc.bootstrap, **COMMON}
    if mode == "breaker-on":
        config.update(BREAKER)
    if mode == "kip794":
        config.update(KIP794)
    p = Producer(config)
    p.partitions_for(topic)
    start = time.monotonic()
    rec = Recorder(start, healthy)
    rec.fault_at = args.fault_at
    buffer_series: list[tuple[float, float]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            buffer_series.append((time.monotonic() - start, p.metrics()["buffer-available-bytes"]))
            stop.wait(0.25)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    faulted = False
    end = start + args.duration
    send = p.send
    while True:
        now = time.monotonic()
        if now >= end:
            break
        if not faulted and mode != "baseline" and now - start >= args.fault_at:
            mc.broker_set_rtt(slow, SLOW_RTT_MS)
            faulted = True
        for _ in range(200):
            t0 = time.monotonic()

            def cb(md: Any, exc: BaseException | None, t0: float = t0) -> None:
                t = time.monotonic()
                if exc is None:
                    rec.delivered_one(md.partition, t - t0, t)
                else:
                    with rec.lock:
                        rec.failed += 1
                        if isinstance(exc, BufferExhaustedError):
                            rec.buffer_exhausted += 1

            send(topic, VALUE, callback=cb)
    stop.set()
    sampler.join()
    p.close(5)
    return _summary(mode, rec, buffer_series, args)


def _run_confluent(mc: MockCluster, topic: str, args: argparse.Namespace) -> dict[str, Any]:
    import confluent_kafka

    slow, healthy = _spread(mc, topic)
    p = confluent_kafka.Producer(
        {
            "bootstrap.servers": mc.bootstrap,
            "linger.ms": COMMON["linger.ms"],
            "request.timeout.ms": COMMON["request.timeout.ms"],
            "delivery.timeout.ms": COMMON["delivery.timeout.ms"],
            "partitioner": "murmur2_random",
        }
    )
    p.list_topics(topic, timeout=10)
    start = time.monotonic()
    rec = Recorder(start, healthy)
    rec.fault_at = args.fault_at

    def cb(err: Any, msg: Any) -> None:
        t = time.monotonic()
        if err is None:
            rec.delivered_one(msg.partition(), msg.latency() or 0.0, t)
        else:
            with rec.lock:
                rec.failed += 1

    faulted = False
    end = start + args.duration
    while True:
        now = time.monotonic()
        if now >= end:
            break
        if not faulted and now - start >= args.fault_at:
            mc.broker_set_rtt(slow, SLOW_RTT_MS)
            faulted = True
        for _ in range(200):
            try:
                p.produce(topic, VALUE, on_delivery=cb)
            except BufferError:
                with rec.lock:
                    rec.buffer_exhausted += 1
                p.poll(0.05)
        p.poll(0)
    p.flush(5)
    return _summary("confluent-kafka", rec, [], args)


def _summary(mode: str, rec: Recorder, buffer_series: list[tuple[float, float]], args: argparse.Namespace) -> dict[str, Any]:
    fault_secs = [s for s in range(int(args.fault_at), int(args.duration))]
    healthy_rate = sum(rec.per_second.get(s, 0) for s in fault_secs) / max(len(fault_secs), 1)
    lat = sorted(rec.healthy_latencies_ms)
    p99 = lat[min(len(lat) - 1, int(0.99 * (len(lat) - 1)))] if lat else float("nan")
    return {
        "mode": mode,
        "healthy_rate": healthy_rate,
        "healthy_p99_ms": p99,
        "min_buffer_available": min((v for _, v in buffer_series), default=float("nan")),
        "buffer_series": buffer_series,
        "buffer_exhausted": rec.buffer_exhausted,
        "delivered": rec.delivered,
        "failed": rec.failed,
        "per_second": [rec.per_second.get(s, 0) for s in range(int(args.duration))],
    }


def _plot(results: list[dict[str, Any]], args: argparse.Namespace, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(10, 8), sharex=True)
    for r in results:
        ax1.plot(range(len(r["per_second"])), r["per_second"], label=r["mode"])
        if r["buffer_series"]:
            xs, ys = zip(*r["buffer_series"], strict=True)
            ax2.plot(xs, [y / 1e6 for y in ys], label=r["mode"])
    for ax in (ax1, ax2):
        ax.axvline(args.fault_at, color="grey", linestyle="--")
        ax.legend()
    ax1.set_ylabel("healthy-partition records/s")
    ax1.set_title(f"Slow broker ({SLOW_RTT_MS} ms RTT from t={args.fault_at:g}s): throughput over time")
    ax2.set_ylabel("buffer-available-bytes (MB)")
    ax2.set_xlabel("seconds")
    fig.tight_layout()
    fig.savefig(path)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--duration", type=float, default=30.0, help="seconds per mode")
    ap.add_argument("--fault-at", type=float, default=5.0, help="seconds before the broker turns slow")
    ap.add_argument("--modes", default=",".join(MODES), help=f"comma-separated subset of {MODES}")
    args = ap.parse_args()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        ap.error(f"unknown modes {unknown}; allowed: {MODES}")
    OUT.mkdir(parents=True, exist_ok=True)
    results = []
    for mode in modes:
        mc = start_mock_cluster(brokers=3)
        try:
            topic = f"slow-broker-{mode}"
            r = _run_confluent(mc, topic, args) if mode == "confluent-kafka" else _run_kproducer(mode, mc, topic, args)
        finally:
            mc.stop()
        results.append(r)
        print(f"{mode}: healthy {r['healthy_rate']:.0f} rec/s, p99 {r['healthy_p99_ms']:.0f} ms", flush=True)
    base = next((r["healthy_rate"] for r in results if r["mode"] == "baseline"), None)
    print()
    print("| mode | healthy rec/s (from the fault on) | vs baseline | healthy p99 ms | min buffer-available MB | BufferExhausted | delivered | failed |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in results:
        ratio = f"{100 * r['healthy_rate'] / base:.0f}%" if base else "n/a"
        mb = r["min_buffer_available"]
        print(
            f"| {r['mode']} | {r['healthy_rate']:,.0f} | {ratio} | {r['healthy_p99_ms']:,.0f} | "
            f"{'n/a' if mb != mb else f'{mb / 1e6:.1f}'} | {r['buffer_exhausted']:,} | {r['delivered']:,} | {r['failed']:,} |"
        )
    png = OUT / "slow_broker.png"
    _plot(results, args, png)
    (OUT / "slow_broker.json").write_text(json.dumps(results))
    print(f"\nplot: {png}\nraw series: {OUT / 'slow_broker.json'}")


if __name__ == "__main__":
    main()
