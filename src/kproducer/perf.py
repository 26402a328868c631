"""``kproducer perf-test``: throughput and latency, modelled on kafka-producer-perf-test.

Latency is measured per record from ``send()`` to its delivery callback, so it
includes linger, queueing and the broker round trip, as the Java tool's does. Only
delivered records count in the latency figures: a failed record's wait (often
``delivery.timeout.ms``) says nothing about the cluster's latency. Failures are
counted apart, with each distinct error and how many records it failed.
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
    #: Each distinct failure ("NOT_ENOUGH_REPLICAS [t-0] (error 19 ...)") -> records it failed.
    errors: dict[str, int]
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

    @property
    def delivered(self) -> int:
        return self.records - self.failed

    def summary(self) -> str:
        latency = (
            f"{self.latency_avg_ms:.2f} ms avg latency, {self.latency_max_ms:.2f} ms max latency, "
            f"{self.latency_p50_ms:.0f} ms 50th, {self.latency_p95_ms:.0f} ms 95th, "
            f"{self.latency_p99_ms:.0f} ms 99th, {self.latency_p999_ms:.0f} ms 99.9th"
            if self.delivered
            else "no latency (no record was delivered)"
        )
        text = (
            f"{self.records} records sent, {self.delivered} delivered, {self.failed} failed, "
            f"{self.records_per_s:,.1f} records/sec ({self.mb_per_s:.2f} MB/sec), {latency}; "
            f"client CPU {self.cpu_us_per_record:.2f} µs/record"
        )
        if self.errors:
            text += "\nFailures:" + "".join(
                f"\n  {n} records: {msg}" for msg, n in sorted(self.errors.items(), key=lambda kv: -kv[1])
            )
        return text


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
    progress: bool | None = None,
    out: Any = sys.stderr,
) -> PerfResult:
    """Send ``num_records`` records of ``record_size`` bytes, throttled to ``throughput`` records/s if > 0.

    ``progress``: True draws a bar (for a terminal), False prints nothing, None
    (default) draws the bar when ``out`` is a terminal and a plain line every
    few seconds otherwise (logs and CI output stay readable).
    """
    from kproducer.producer import Producer

    payload = os.urandom(record_size)
    n = num_records
    # One slot per record, filled from the I/O thread: no lock needed for distinct indexes.
    latencies = [0.0] * n
    failed = [0]
    done = [0]
    errors: dict[str, int] = {}
    perf = time.perf_counter

    with Producer(producer_props) as producer:
        send = producer.send
        cpu0 = _cpu_seconds()
        start = perf()
        stop_bar = threading.Event()
        if progress is None:
            progress_mode: str | None = "bar" if _isatty(out) else "lines"
        else:
            progress_mode = "bar" if progress else None
        bar = None
        if progress_mode is not None:
            bar = threading.Thread(
                target=_progress, args=(done, failed, n, start, stop_bar, out, progress_mode), daemon=True
            )
            bar.start()
        for i in range(n):
            sent_at = perf()

            def on_delivery(md: Any, exc: BaseException | None, i: int = i, sent_at: float = sent_at) -> None:
                done[0] += 1
                if exc is None:
                    latencies[i] = (perf() - sent_at) * 1000.0
                else:
                    latencies[i] = -1.0  # not a latency: left out of the figures
                    failed[0] += 1
                    msg = str(exc)
                    errors[msg] = errors.get(msg, 0) + 1

            send(topic, payload, callback=on_delivery)
            if throughput > 0:
                ahead = (i + 1) / throughput - (perf() - start)
                if ahead > 0:
                    time.sleep(ahead)
        producer.flush()
        elapsed = perf() - start
        cpu = _cpu_seconds() - cpu0
        stop_bar.set()
        if bar is not None:
            bar.join()
    lat = sorted(x for x in latencies if x >= 0.0)
    delivered = len(lat)
    return PerfResult(
        records=n,
        failed=failed[0],
        errors=dict(errors),
        elapsed_s=elapsed,
        records_per_s=n / elapsed if elapsed else 0.0,
        mb_per_s=n * record_size / elapsed / (1024 * 1024) if elapsed else 0.0,
        latency_avg_ms=sum(lat) / delivered if delivered else 0.0,
        latency_max_ms=lat[-1] if lat else 0.0,
        latency_p50_ms=_percentile(lat, 0.50),
        latency_p95_ms=_percentile(lat, 0.95),
        latency_p99_ms=_percentile(lat, 0.99),
        latency_p999_ms=_percentile(lat, 0.999),
        cpu_s=cpu,
        cpu_us_per_record=cpu / n * 1e6 if n else 0.0,
    )


#: Without a terminal, one progress line this often.
PLAIN_PROGRESS_EVERY_S = 5.0


def _isatty(out: Any) -> bool:
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError):
        return False


def _progress(
    done: list[int], failed: list[int], total: int, start: float, stop: threading.Event, out: Any, mode: str
) -> None:
    """A redrawn bar on a terminal; otherwise a plain line every PLAIN_PROGRESS_EVERY_S seconds."""
    width = 30
    every = 0.5 if mode == "bar" else PLAIN_PROGRESS_EVERY_S
    drew = False
    while not stop.wait(every):
        frac = min(done[0] / total, 1.0) if total else 1.0
        elapsed = max(time.perf_counter() - start, 1e-9)
        rate = done[0] / elapsed
        fails = f", {failed[0]} failed" if failed[0] else ""
        if mode == "bar":
            filled = int(frac * width)
            out.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {frac * 100:5.1f}%  {rate:,.0f} rec/s{fails}")
            drew = True
        else:
            out.write(f"{done[0]} of {total} records completed ({frac * 100:.1f}%), {rate:,.0f} rec/s{fails}, {elapsed:.0f} s\n")
        out.flush()
    if drew:
        out.write("\n")
        out.flush()


def _parse_props(items: Sequence[str]) -> dict[str, str]:
    from kproducer.console_produce import parse_key_values

    return {k: v.strip() for k, v in parse_key_values(items, "--producer-props")}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--topic", required=True, help="the topic to send to")
    p.add_argument("--num-records", type=int, required=True, metavar="N", help="how many records to send")
    p.add_argument("--record-size", type=int, default=100, metavar="BYTES", help="each value's size (default 100)")
    p.add_argument(
        "--throughput", type=float, default=-1, metavar="RECORDS_PER_S", help="records/s cap; -1 for no limit (default)"
    )
    p.add_argument(
        "--producer-props",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="producer settings by their Java names, e.g. linger.ms=5 acks=all",
    )
    p.add_argument(
        "--bootstrap-servers", metavar="HOST:PORT[,...]", help="shortcut for --producer-props bootstrap.servers=..."
    )
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument(
        "--no-progress",
        action="store_true",
        help="no progress output (by default: a bar on a terminal, a plain line every 5 s otherwise)",
    )


def main(args: argparse.Namespace) -> int:
    from kproducer.properties import UsageError, client_properties

    props: dict[str, Any] = {**client_properties(args), **_parse_props(args.producer_props)}
    if args.bootstrap_servers:
        props["bootstrap.servers"] = args.bootstrap_servers
    if args.num_records <= 0 or args.record_size <= 0:
        raise UsageError(
            f"--num-records and --record-size must be positive, got {args.num_records} and {args.record_size}"
        )
    result = run_perf_test(
        args.topic, args.num_records, args.record_size, props, args.throughput, progress=False if args.no_progress else None
    )
    if args.json:
        print(json.dumps({**asdict(result), "delivered": result.delivered}))
    else:
        print(result.summary())
    return 0 if result.failed == 0 else 1
