"""``kproducer perf-test``: throughput and latency, modelled on kafka-producer-perf-test.

Latency is measured per record from ``send()`` to its delivery callback, so it
includes linger, queueing and the broker round trip, as the Java tool's does.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["PerfResult", "run_perf_test", "add_arguments", "main"]


@dataclass
class PerfResult:
    records: int
    failed: int
    elapsed_s: float
    records_per_s: float
    mb_per_s: float
    latency_avg_ms: float
    latency_max_ms: float
    latency_p50_ms: float
    latency_p95_ms: float
    latency_p99_ms: float
    latency_p999_ms: float
    cpu_s: float
    cpu_us_per_record: float

    def summary(self) -> str:
        return (
            f"{self.records} records sent, {self.records_per_s:,.1f} records/sec ({self.mb_per_s:.2f} MB/sec), "
            f"{self.latency_avg_ms:.2f} ms avg latency, {self.latency_max_ms:.2f} ms max latency, "
            f"{self.latency_p50_ms:.0f} ms 50th, {self.latency_p95_ms:.0f} ms 95th, "
            f"{self.latency_p99_ms:.0f} ms 99th, {self.latency_p999_ms:.0f} ms 99.9th; "
            f"{self.failed} failed; client CPU {self.cpu_us_per_record:.2f} µs/record"
        )


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return 0.0
    idx = min(len(sorted_values) - 1, max(0, int(round(q * (len(sorted_values) - 1)))))
    return sorted_values[idx]


def _cpu_seconds() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def run_perf_test(
    topic: str,
    num_records: int,
    record_size: int,
    producer_props: dict[str, Any],
    throughput: float = -1,
    progress: bool = True,
    out: Any = sys.stderr,
) -> PerfResult:
    """Send ``num_records`` records of ``record_size`` bytes, throttled to ``throughput`` records/s if > 0."""
    from kproducer.producer import Producer

    payload = os.urandom(record_size)
    n = num_records
    # One slot per record, filled from the I/O thread: no lock needed for distinct indexes.
    latencies = [0.0] * n
    failed = [0]
    done = [0]
    perf = time.perf_counter

    with Producer(producer_props) as producer:
        send = producer.send
        cpu0 = _cpu_seconds()
        start = perf()
        stop_bar = threading.Event()
        if progress:
            bar = threading.Thread(target=_progress, args=(done, n, start, stop_bar, out), daemon=True)
            bar.start()
        for i in range(n):
            sent_at = perf()

            def on_delivery(md: Any, exc: BaseException | None, i: int = i, sent_at: float = sent_at) -> None:
                latencies[i] = (perf() - sent_at) * 1000.0
                done[0] += 1
                if exc is not None:
                    failed[0] += 1

            send(topic, payload, on_delivery=on_delivery)
            if throughput > 0:
                ahead = (i + 1) / throughput - (perf() - start)
                if ahead > 0:
                    time.sleep(ahead)
        producer.flush()
        elapsed = perf() - start
        cpu = _cpu_seconds() - cpu0
        stop_bar.set()
    lat = sorted(latencies)
    return PerfResult(
        records=n,
        failed=failed[0],
        elapsed_s=elapsed,
        records_per_s=n / elapsed if elapsed else 0.0,
        mb_per_s=n * record_size / elapsed / (1024 * 1024) if elapsed else 0.0,
        latency_avg_ms=sum(lat) / n if n else 0.0,
        latency_max_ms=lat[-1] if lat else 0.0,
        latency_p50_ms=_percentile(lat, 0.50),
        latency_p95_ms=_percentile(lat, 0.95),
        latency_p99_ms=_percentile(lat, 0.99),
        latency_p999_ms=_percentile(lat, 0.999),
        cpu_s=cpu,
        cpu_us_per_record=cpu / n * 1e6 if n else 0.0,
    )


def _progress(done: list[int], total: int, start: float, stop: threading.Event, out: Any) -> None:
    width = 30
    while not stop.wait(0.5):
        frac = min(done[0] / total, 1.0) if total else 1.0
        rate = done[0] / max(time.perf_counter() - start, 1e-9)
        filled = int(frac * width)
        out.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {frac * 100:5.1f}%  {rate:,.0f} rec/s")
        out.flush()
    out.write("\n")
    out.flush()


def _parse_props(items: Sequence[str]) -> dict[str, str]:
    props: dict[str, str] = {}
    for item in items:
        if "=" not in item:
            raise SystemExit(f"--producer-props entries must be key=value, got {item!r}")
        k, v = item.split("=", 1)
        props[k.strip()] = v.strip()
    return props


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topic", required=True)
    p.add_argument("--num-records", type=int, required=True)
    p.add_argument("--record-size", type=int, default=100)
    p.add_argument("--throughput", type=float, default=-1, help="records/s cap; -1 for no limit")
    p.add_argument("--producer-props", nargs="*", default=[], metavar="KEY=VALUE")
    p.add_argument("--bootstrap-servers", help="shortcut for --producer-props bootstrap.servers=...")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--no-progress", action="store_true")


def main(args: argparse.Namespace) -> int:
    props: dict[str, Any] = _parse_props(args.producer_props)
    if args.bootstrap_servers:
        props["bootstrap.servers"] = args.bootstrap_servers
    if args.num_records <= 0 or args.record_size <= 0:
        raise SystemExit("--num-records and --record-size must be positive")
    result = run_perf_test(
        args.topic, args.num_records, args.record_size, props, args.throughput, progress=not args.no_progress
    )
    if args.json:
        print(json.dumps(asdict(result)))
    else:
        print(result.summary())
    return 0 if result.failed == 0 else 1
