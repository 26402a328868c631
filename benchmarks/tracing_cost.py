"""What OpenTelemetry tracing costs a send: no OpenTelemetry, OpenTelemetry without a provider, tracing on.

Modes, each in a fresh interpreter, one after the other against one Tansu started here:

* ``no-otel``: ``opentelemetry`` cannot be imported (an import hook refuses it), as in an
  environment without ``kproducer[opentelemetry]``: the producer has no tracing at all;
* ``no-provider``: opentelemetry-api installed, no tracer provider set (the default state of
  a service that does not trace): each send checks for a provider and finds none;
* ``disabled``: an SDK provider set, ``tracing.enabled=false``;
* ``tracing-on``: an SDK TracerProvider with a BatchSpanProcessor and an exporter that drops
  the spans (the cost of making, filling and ending the spans and of the header, not of a
  network exporter): a span per record and a ``traceparent`` header in each.

Each mode sends ``--records`` records of ``--size`` bytes (keyless, built before the clock)
with ``send()`` and then ``flush()``es; printed: the send() loop's rate, the rate including
the flush (every span ended), and per record the difference to ``no-otel`` in microseconds, and
the CPU time the calling thread spent per send() (``time.thread_time``: on a shared machine it
moves less with the other processes' load than the rates do; the spans' ends run on the
producer's I/O thread and are in the flush column only).
``--rounds`` runs the modes round-robin that many times and keeps each mode's median.

Then the check alone, paired in one process (``paired``): two producers without a tracer
provider, one with ``tracing.enabled=false`` (no check at all) and one with it on (the check
each send makes), send alternate blocks of ``--block`` records, 2 x ``--blocks`` blocks; printed:
the median caller CPU time per send of each and their difference, which is what the check
costs. Pairing the blocks in one process keeps the machine's load out of the difference.

    .venv/bin/python benchmarks/tracing_cost.py
    .venv/bin/python benchmarks/tracing_cost.py --records 200000 --rounds 5
    KPRODUCER_PURE_PYTHON=1 .venv/bin/python benchmarks/tracing_cost.py   # the pure-Python path
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

MODES = ("no-otel", "no-provider", "disabled", "tracing-on")


class _RefuseOpenTelemetry:
    """A meta path finder that makes ``import opentelemetry`` fail, as if it were not installed."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ImportError(f"No module named {name!r} (refused by benchmarks/tracing_cost.py)")
        return None


def _child(mode: str, bootstrap: str, topic: str, records: int, size: int) -> dict[str, Any]:
    if mode == "no-otel":
        sys.meta_path.insert(0, _RefuseOpenTelemetry())  # type: ignore[arg-type]
    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "linger.ms": 5}
    if mode in ("disabled", "tracing-on"):
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult

        class Dropping(SpanExporter):
            def export(self, spans: Any) -> SpanExportResult:
                return SpanExportResult.SUCCESS

        provider = TracerProvider()
        provider.add_span_processor(BatchSpanProcessor(Dropping()))
        trace.set_tracer_provider(provider)
        if mode == "disabled":
            config["tracing.enabled"] = False
    from kproducer import Producer

    value = os.urandom(size)
    p = Producer(config)
    p.partitions_for(topic)
    for _ in range(2000):  # warm-up: connections, batches, the lane's topic registration
        p.send(topic, value)
    p.flush()
    send = p.send
    cpu = time.thread_time()
    start = time.perf_counter()
    for _ in range(records):
        send(topic, value)
    sent = time.perf_counter()
    cpu = time.thread_time() - cpu
    p.flush()
    done = time.perf_counter()
    p.close()
    otel_loaded = "opentelemetry" in sys.modules
    return {
        "mode": mode,
        "send_rate": records / (sent - start),
        "total_rate": records / (done - start),
        "cpu_us": cpu / records * 1e6,
        "otel_loaded": otel_loaded,
        "lane": type(send).__name__ == "SendLane",
    }


def _paired(bootstrap: str, topic: str, blocks: int, block: int, size: int) -> dict[str, Any]:
    from kproducer import Producer

    value = os.urandom(size)
    producers = {
        label: Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "tracing.enabled": on})
        for label, on in (("off", False), ("check", True))
    }
    for p in producers.values():
        p.partitions_for(topic)
        for _ in range(2000):
            p.send(topic, value)
        p.flush()
    cpu: dict[str, list[float]] = {label: [] for label in producers}
    for i in range(2 * blocks):
        label = ("off", "check")[i % 2] if i // 2 % 2 == 0 else ("check", "off")[i % 2]  # ABBA order
        send = producers[label].send
        start = time.thread_time()
        for _ in range(block):
            send(topic, value)
        cpu[label].append((time.thread_time() - start) / block * 1e6)
        producers[label].flush()
    for p in producers.values():
        p.close()
    return {label: statistics.median(v) for label, v in cpu.items()}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=100, help="value bytes per record")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bootstrap", help="a broker to use instead of starting Tansu")
    ap.add_argument("--blocks", type=int, default=20, help="paired blocks per producer")
    ap.add_argument("--block", type=int, default=20_000, help="records per paired block")
    ap.add_argument("--child", nargs=3, metavar=("MODE", "BOOTSTRAP", "TOPIC"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        mode, bootstrap, topic = args.child
        if mode == "paired":
            print(json.dumps(_paired(bootstrap, topic, args.blocks, args.block, args.size)))
        else:
            print(json.dumps(_child(mode, bootstrap, topic, args.records, args.size)))
        return 0

    from kproducer.embedded_broker import start_embedded_broker

    broker = None if args.bootstrap else start_embedded_broker()
    bootstrap = args.bootstrap or broker.bootstrap  # type: ignore[union-attr]
    results: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    try:
        from confluent_kafka.admin import AdminClient, NewTopic

        topic = f"tracing-cost-{os.getpid()}"
        admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
        for fut in admin.create_topics([NewTopic(topic, 3, 1)]).values():
            fut.result(30)
        pure = os.environ.get("KPRODUCER_PURE_PYTHON") == "1"
        print(
            f"kproducer send(): {args.records} records of {args.size} B, keyless, linger.ms=5, acks=all (default), "
            f"{'pure Python' if pure else 'C speedups'}, {args.rounds} rounds, median per mode; broker {bootstrap}"
        )
        for _ in range(args.rounds):
            for mode in MODES:
                out = subprocess.run(
                    [sys.executable, __file__, "--records", str(args.records), "--size", str(args.size),
                     "--child", mode, bootstrap, topic],
                    check=True, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
                )
                results[mode].append(json.loads(out.stdout.strip().splitlines()[-1]))
        out = subprocess.run(
            [sys.executable, __file__, "--size", str(args.size), "--blocks", str(args.blocks), "--block",
             str(args.block), "--child", "paired", bootstrap, topic],
            check=True, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(ROOT / "src")},
        )
        paired = json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        if broker is not None:
            broker.stop()

    base = statistics.median(r["send_rate"] for r in results["no-otel"])
    base_total = statistics.median(r["total_rate"] for r in results["no-otel"])
    base_cpu = statistics.median(r["cpu_us"] for r in results["no-otel"])
    print(
        f"{'mode':<12} {'send() rate':>14} {'vs no-otel':>10} {'us/record':>10} {'with flush':>14} {'us/record':>10}"
        f" {'caller CPU':>11} {'us/record':>10}  lane  otel"
    )
    for mode in MODES:
        rs = results[mode]
        rate = statistics.median(r["send_rate"] for r in rs)
        total = statistics.median(r["total_rate"] for r in rs)
        extra = (1 / rate - 1 / base) * 1e6
        extra_total = (1 / total - 1 / base_total) * 1e6
        cpu = statistics.median(r["cpu_us"] for r in rs)
        print(
            f"{mode:<12} {rate:>12,.0f}/s {rate / base:>10.3f} {extra:>+10.2f} {total:>12,.0f}/s {extra_total:>+10.2f}"
            f" {cpu:>8.2f} us {cpu - base_cpu:>+10.2f}"
            f"  {'yes' if rs[0]['lane'] else 'no ':<4}  {'loaded' if rs[0]['otel_loaded'] else 'absent'}"
        )
    print(
        f"paired, no provider, {2 * args.blocks} blocks of {args.block}: caller CPU per send "
        f"{paired['off']:.3f} us with tracing.enabled=false, {paired['check']:.3f} us with the check "
        f"({paired['check'] - paired['off']:+.3f} us)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
