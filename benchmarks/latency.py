"""Delivery latency at a paced rate: kproducer against confluent-kafka, with two shapes of caller.

Each client runs in its own process against its own Tansu, started here, so that neither
shares a broker or a CPU's caches with the other's run. The caller sends ``--records``
records of ``--size`` bytes to ``--partitions`` partitions at ``--rate`` records/s, each
with a callback that takes the time from just before ``send()``/``produce()`` to the
delivery report, and prints the median, p99, p99.9 and maximum.

Between sends the caller either sleeps until the next send is due (``--shape sleep``: an
I/O-bound service) or stays busy in Python until then (``--shape busy``: a CPU-bound
application, which holds the GIL whenever the producer's own threads want it).
confluent-kafka serves its delivery reports from ``poll()``, so its caller calls
``poll(0)`` after every ``produce()`` in both shapes (as its documentation asks); kproducer
runs callbacks on its I/O thread, as the Java client does.

    .venv/bin/python benchmarks/latency.py                          # both shapes, both clients
    .venv/bin/python benchmarks/latency.py --shape busy --records 100000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

CLIENTS = ("kproducer", "confluent-kafka")


def _busy_until(deadline: float) -> None:
    """Python work (no sleeping, no C call that lets go of the GIL) until ``deadline``."""
    perf = time.perf_counter
    x = 0
    while perf() < deadline:
        for i in range(50):
            x += i * i


def _pace(shape: str, due: float) -> None:
    if shape == "busy":
        _busy_until(due)
    else:
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)


def _run_kproducer(args: argparse.Namespace, bootstrap: str, topic: str) -> list[float]:
    from kproducer import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": args.acks})
    payload = os.urandom(args.size)
    p.send(topic, payload).result()  # metadata and connection before the clock
    latencies: list[float] = []
    perf = time.perf_counter
    interval = 1.0 / args.rate
    start = perf()
    for i in range(args.records):
        _pace(args.shape, start + i * interval)
        t0 = perf()

        def done(_md: Any, exc: BaseException | None, t0: float = t0) -> None:
            if exc is None:
                latencies.append(perf() - t0)

        p.send(topic, payload, callback=done)
    p.flush()
    p.close()
    return latencies


def _run_confluent(args: argparse.Namespace, bootstrap: str, topic: str) -> list[float]:
    from confluent_kafka import Producer as CProducer

    acks = "-1" if args.acks == "all" else args.acks
    cp = CProducer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5})
    payload = os.urandom(args.size)
    cp.produce(topic, payload)
    cp.flush()
    latencies: list[float] = []
    perf = time.perf_counter
    interval = 1.0 / args.rate
    start = perf()
    for i in range(args.records):
        _pace(args.shape, start + i * interval)
        t0 = perf()

        def done(err: Any, _msg: Any, t0: float = t0) -> None:
            if err is None:
                latencies.append(perf() - t0)

        while True:
            try:
                cp.produce(topic, payload, on_delivery=done)
                break
            except BufferError:
                cp.poll(0.001)
        cp.poll(0)
    cp.flush()
    return latencies


def _percentile(sorted_ms: list[float], q: float) -> float:
    return sorted_ms[min(len(sorted_ms) - 1, int(q * (len(sorted_ms) - 1)))]


def _child(args: argparse.Namespace) -> None:
    from kproducer.admin import create_topics
    from kproducer.embedded_broker import start_embedded_broker

    broker = start_embedded_broker()
    try:
        topic = f"latency-{args.child}-{time.time_ns()}"
        create_topics(broker.bootstrap, {topic: args.partitions})
        run = _run_kproducer if args.child == "kproducer" else _run_confluent
        latencies = sorted(x * 1000 for x in run(args, broker.bootstrap, topic))
    finally:
        broker.stop()
    print(json.dumps({
        "client": args.child, "delivered": len(latencies), "p50": _percentile(latencies, 0.5),
        "p99": _percentile(latencies, 0.99), "p999": _percentile(latencies, 0.999), "max": latencies[-1],
    }))  # fmt: skip


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rate", type=float, default=50_000, help="records per second, paced")
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--acks", default="all", choices=["0", "1", "all"])
    ap.add_argument("--shape", default="sleep,busy", help="comma-separated: sleep, busy")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--child", choices=CLIENTS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args)
        return 0
    print(f"{args.records:,} x {args.size} B at {args.rate:,.0f} records/s, acks={args.acks}, {args.partitions} "
          f"partitions; each client in its own process with its own Tansu; a callback per record. "
          f"kproducer at its defaults; confluent-kafka at its defaults with linger.ms=5 (kproducer's default), "
          f"poll(0) after every produce().")  # fmt: skip
    print()
    print("| caller between sends | client | delivered | p50 ms | p99 ms | p99.9 ms | max ms |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for shape in [s for s in args.shape.split(",") if s]:
        for rep in range(args.repeat):
            clients = CLIENTS if rep % 2 == 0 else CLIENTS[::-1]
            for client in clients:
                cmd = [sys.executable, __file__, "--child", client, "--records", str(args.records), "--rate",
                       str(args.rate), "--size", str(args.size), "--partitions", str(args.partitions), "--acks",
                       args.acks, "--shape", shape]  # fmt: skip
                proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
                if proc.returncode != 0:
                    print(f"| {shape} | {client} | error: {proc.stderr.strip().splitlines()[-1:]} | | | | |")
                    continue
                r = json.loads(proc.stdout.strip().splitlines()[-1])
                print(f"| {shape} | {client} | {r['delivered']:,} | {r['p50']:.1f} | {r['p99']:.1f} | "
                      f"{r['p999']:.1f} | {r['max']:.1f} |", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
