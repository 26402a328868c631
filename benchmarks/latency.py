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
    .venv/bin/python benchmarks/latency.py --gc default,freeze,off   # where the tail comes from

Where the tail comes from: ``--gc`` runs each client with the cyclic garbage collector as it
is (``default``), with every object alive before the clock moved out of its scans
(``freeze``: ``gc.freeze()``), or off (``off``); ``--switch-interval`` sets
``sys.setswitchinterval`` in both processes. Each row also says how many full (generation 2)
collections ran, the longest, and how many of the records at or past the p99.9 were in
flight while a collection ran.

The delivery times are kept in two ``array('d')`` (``--store arrays``, the default): plain
doubles, which the collector neither counts nor walks. ``--store tuples`` keeps a tuple per
record in a list instead, as this script did before: 200,000 tuples made while the clock runs
set off collections of their own, and every full collection walks the growing list, so that
setting measures the harness's heap as much as either client (both pay for it, not equally:
whichever keeps more objects alive at a collection has it promoted sooner).

``--callback-objects N`` makes each record's callback, on both clients, hold N objects of a GC
type (empty lists) until it runs: what any per-record object a client or application keeps while
the record is in flight does to the collector's schedule.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import time
from array import array
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


class _Deliveries:
    """The delivery times of the timed records: (send time, latency) in seconds, as ``--store`` says."""

    def __init__(self, store: str) -> None:
        self.tuples: list[tuple[float, float]] | None = [] if store == "tuples" else None
        self.sent = array("d")
        self.latency = array("d")

    def recorder(self) -> Any:
        """The append the callbacks call with (send time, latency)."""
        if self.tuples is not None:
            tuples = self.tuples

            def keep_tuple(t0: float, lat: float) -> None:
                tuples.append((t0, lat))

            return keep_tuple
        sent, latency = self.sent.append, self.latency.append

        def keep(t0: float, lat: float) -> None:
            sent(t0)
            latency(lat)

        return keep

    def pairs(self) -> list[tuple[float, float]]:
        return self.tuples if self.tuples is not None else list(zip(self.sent, self.latency, strict=True))


def _held_objects(count: int) -> Any:
    """What each record's callback holds besides its send time: ``count`` empty lists (None for 0).

    Objects of a GC type alive while their record is in flight, as a client or an application
    may keep per record (``--callback-objects``): they count towards the collector's next young
    collection for as long as they live.
    """
    if count == 0:
        return lambda: None
    if count == 1:
        return list
    return lambda: [[] for _ in range(count - 1)]


def _prepare_gc(args: argparse.Namespace) -> None:
    """The collector setting under test, applied once everything the run needs exists."""
    gc.collect()
    if args.gc == "freeze":
        gc.freeze()
    elif args.gc == "off":
        gc.disable()


def _run_kproducer(args: argparse.Namespace, bootstrap: str, topic: str) -> list[tuple[float, float]]:
    from kproducer import Producer

    p = Producer({"bootstrap.servers": bootstrap, "acks": args.acks})
    payload = os.urandom(args.size)
    p.send(topic, payload).result()  # metadata and connection before the clock
    latencies = _Deliveries(args.store)
    keep = latencies.recorder()
    held = _held_objects(args.callback_objects)
    perf = time.perf_counter
    _prepare_gc(args)
    interval = 1.0 / args.rate
    start = perf()
    for i in range(args.records):
        _pace(args.shape, start + i * interval)
        t0 = perf()
        extra = held()

        def done(_md: Any, exc: BaseException | None, t0: float = t0, _held: Any = extra) -> None:
            if exc is None:
                keep(t0, perf() - t0)

        p.send(topic, payload, callback=done)
    p.flush()
    p.close()
    return latencies.pairs()


def _run_confluent(args: argparse.Namespace, bootstrap: str, topic: str) -> list[tuple[float, float]]:
    from confluent_kafka import Producer as CProducer

    acks = "-1" if args.acks == "all" else args.acks
    cp = CProducer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5})
    payload = os.urandom(args.size)
    cp.produce(topic, payload)
    cp.flush()
    latencies = _Deliveries(args.store)
    keep = latencies.recorder()
    held = _held_objects(args.callback_objects)
    perf = time.perf_counter
    _prepare_gc(args)
    interval = 1.0 / args.rate
    start = perf()
    for i in range(args.records):
        _pace(args.shape, start + i * interval)
        t0 = perf()
        extra = held()

        def done(err: Any, _msg: Any, t0: float = t0, _held: Any = extra) -> None:
            if err is None:
                keep(t0, perf() - t0)

        while True:
            try:
                cp.produce(topic, payload, on_delivery=done)
                break
            except BufferError:
                cp.poll(0.001)
        cp.poll(0)
    cp.flush()
    return latencies.pairs()


class _Collections:
    """The garbage collector's pauses, from ``gc.callbacks``: (start, end, generation)."""

    def __init__(self) -> None:
        self.pauses: list[tuple[float, float, int]] = []
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
        else:
            self.pauses.append((self._start, time.perf_counter(), info["generation"]))


def _percentile(sorted_ms: list[float], q: float) -> float:
    return sorted_ms[min(len(sorted_ms) - 1, int(q * (len(sorted_ms) - 1)))]


def _child(args: argparse.Namespace) -> None:
    from kproducer.admin import create_topics
    from kproducer.embedded_broker import start_embedded_broker

    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval / 1000)
    collections = _Collections()
    broker = start_embedded_broker()
    try:
        topic = f"latency-{args.child}-{time.time_ns()}"
        create_topics(broker.bootstrap, {topic: args.partitions})
        run = _run_kproducer if args.child == "kproducer" else _run_confluent
        gc.callbacks.append(collections)
        timed = run(args, broker.bootstrap, topic)
        gc.callbacks.remove(collections)
    finally:
        broker.stop()
    latencies = sorted(lat * 1000 for _, lat in timed)
    p999 = _percentile(latencies, 0.999)
    first_send = min((t0 for t0, _ in timed), default=0.0)  # not the collection that set the run up
    full = [(a, b) for a, b, generation in collections.pauses if generation == 2 and a >= first_send]
    tail = [(t0, t0 + lat) for t0, lat in timed if lat * 1000 >= p999]
    tail_in_full = sum(1 for a, b in tail if any(s < b and e > a for s, e in full))
    print(json.dumps({
        "client": args.child, "delivered": len(latencies), "p50": _percentile(latencies, 0.5),
        "p99": _percentile(latencies, 0.99), "p999": p999, "max": latencies[-1],
        "full_collections": len(full), "longest_full_ms": max(((e - s) * 1000 for s, e in full), default=0.0),
        "tail": len(tail), "tail_in_full": tail_in_full,
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
    ap.add_argument("--gc", default="default", help="comma-separated: default, freeze, off (see above)")
    ap.add_argument("--store", default="arrays", choices=["arrays", "tuples"],
                    help="where the delivery times are kept while the clock runs (see above)")
    ap.add_argument("--callback-objects", type=int, default=0,
                    help="objects of a GC type each record's callback holds, on both clients (see above)")
    ap.add_argument("--switch-interval", type=float, help="sys.setswitchinterval in ms, in both clients")
    ap.add_argument("--child", choices=CLIENTS, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(args)
        return 0
    print(f"{args.records:,} x {args.size} B at {args.rate:,.0f} records/s, acks={args.acks}, {args.partitions} "
          f"partitions; each client in its own process with its own Tansu; a callback per record. "
          f"kproducer at its defaults; confluent-kafka at its defaults with linger.ms=5 (kproducer's default), "
          f"poll(0) after every produce(). Delivery times kept in {args.store}; "
          f"{args.callback_objects} extra objects held per callback. Switch interval: "
          f"{args.switch_interval if args.switch_interval is not None else sys.getswitchinterval() * 1000} ms.")  # fmt: skip
    print()
    print("| caller between sends | gc | client | delivered | p50 ms | p99 ms | p99.9 ms | max ms "
          "| full collections (longest ms) | p99.9 tail in flight during one |")  # fmt: skip
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for shape in [s for s in args.shape.split(",") if s]:
        for mode in [m for m in args.gc.split(",") if m]:
            for rep in range(args.repeat):
                clients = CLIENTS if rep % 2 == 0 else CLIENTS[::-1]
                for client in clients:
                    cmd = [sys.executable, __file__, "--child", client, "--records", str(args.records), "--rate",
                           str(args.rate), "--size", str(args.size), "--partitions", str(args.partitions), "--acks",
                           args.acks, "--shape", shape, "--gc", mode, "--store", args.store, "--callback-objects", str(args.callback_objects)]  # fmt: skip
                    if args.switch_interval is not None:
                        cmd += ["--switch-interval", str(args.switch_interval)]
                    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
                    if proc.returncode != 0:
                        err = proc.stderr.strip().splitlines()[-1:]
                        print(f"| {shape} | {mode} | {client} | error: {err} | | | | | | |")
                        continue
                    r = json.loads(proc.stdout.strip().splitlines()[-1])
                    print(f"| {shape} | {mode} | {client} | {r['delivered']:,} | {r['p50']:.1f} | {r['p99']:.1f} | "
                          f"{r['p999']:.1f} | {r['max']:.1f} | {r['full_collections']} ({r['longest_full_ms']:.1f}) | "
                          f"{r['tail_in_full']} of {r['tail']} |", flush=True)  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
