"""How long an asyncio client holds its event loop under a heavy send load: a loop-lag probe.

A 1 ms ticker coroutine runs beside ``--tasks`` tasks that each ``await send()``
``--per-task`` records and then await their delivery futures (the shape of the
100k-sends test). Each gap between two ticks is how long the loop could not run
the ticker: the client's own work on the loop, the benchmark's, CPython's cyclic
GC (its pauses are timed separately through ``gc.callbacks``) and the machine
taking the CPU away (the same ticker alone first gives that floor). Printed per
client: records/s, the ticker's worst gap, its 99th percentile, how many gaps
exceeded 20 ms, and the longest and total full-collection (generation 2) pause.

    .venv/bin/python benchmarks/aio_loop_lag.py --clients kproducer-async,aiokafka
    .venv/bin/python benchmarks/aio_loop_lag.py --buffer-memory 262144   # the buffer full all along

``--gc-freeze`` calls ``gc.freeze()`` before the run (objects alive at start-up
are then never scanned again), as long-running services often do. Each client
runs in its own process, one after the other, against one Tansu started here.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


async def _ticker(gaps: list[float], stop: asyncio.Event) -> None:
    last = time.perf_counter()
    while not stop.is_set():
        await asyncio.sleep(0.001)
        now = time.perf_counter()
        gaps.append(now - last)
        last = now


async def _run(client: str, bootstrap: str, topic: str, args: argparse.Namespace) -> dict[str, Any]:
    idle: list[float] = []
    stop = asyncio.Event()
    t = asyncio.ensure_future(_ticker(idle, stop))
    await asyncio.sleep(0.5)
    stop.set()
    await t
    if client == "kproducer-async":
        from kproducer.aio import AsyncProducer

        p: Any = AsyncProducer({"bootstrap.servers": bootstrap, "acks": args.acks, "buffer.memory": args.buffer_memory})
        await p.start()
        send = p.send
        close = p.close
    else:
        from aiokafka import AIOKafkaProducer

        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=int(args.acks) if args.acks != "all" else "all", linger_ms=5)
        await p.start()
        send = p.send
        close = p.stop
    payload = os.urandom(args.size)

    async def task(n: int) -> int:
        futs = [await send(topic, payload, b"k%d" % n) for _ in range(args.per_task)]
        for f in futs:
            await f
        return len(futs)

    pauses: list[float] = []
    started = [0.0]

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            pauses.append(time.perf_counter() - started[0])

    if args.gc_freeze:
        gc.freeze()
    gc.callbacks.append(on_gc)
    gaps: list[float] = []
    stop = asyncio.Event()
    t = asyncio.ensure_future(_ticker(gaps, stop))
    start = time.perf_counter()
    sent = sum(await asyncio.gather(*(task(n) for n in range(args.tasks))))
    elapsed = time.perf_counter() - start
    stop.set()
    await t
    gc.callbacks.remove(on_gc)
    await close()
    gaps.sort()
    return {
        "client": client,
        "records_per_s": sent / elapsed,
        "worst_gap_ms": gaps[-1] * 1000 if gaps else 0.0,
        "p99_gap_ms": gaps[int(0.99 * (len(gaps) - 1))] * 1000 if gaps else 0.0,
        "gaps_over_20ms": sum(g > 0.020 for g in gaps),
        "ticks": len(gaps),
        "idle_worst_gap_ms": max(idle) * 1000 if idle else 0.0,
        "gc2_count": len(pauses),
        "gc2_max_ms": max(pauses) * 1000 if pauses else 0.0,
        "gc2_total_ms": sum(pauses) * 1000,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clients", default="kproducer-async,aiokafka")
    ap.add_argument("--tasks", type=int, default=50)
    ap.add_argument("--per-task", type=int, default=2000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--acks", default="1", choices=["0", "1", "all"])
    ap.add_argument("--buffer-memory", type=int, default=32 * 1024 * 1024, help="kproducer's buffer.memory")
    ap.add_argument("--gc-freeze", action="store_true")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help="use this broker instead of starting Tansu")
    args = ap.parse_args()
    if args.child:
        client, bootstrap, topic = args.child.split("|")
        print(json.dumps(asyncio.run(_run(client, bootstrap, topic, args))))
        return 0
    from tests.support.readback import create_topic
    from tests.support.tansu import tansu_unless

    load = os.getloadavg()[0]
    with tansu_unless(args.bootstrap) as (bootstrap, _broker):
        rows = []
        for client in args.clients.split(","):
            topic = f"lag-{client}-{int(time.time() * 1000)}"
            create_topic(bootstrap, topic, 8)
            # Every option but --clients (given as "--clients X" or "--clients=X") goes to the child.
            argv = sys.argv[1:]
            child = [a for i, a in enumerate(argv) if not a.startswith("--clients") and (i == 0 or argv[i - 1] != "--clients")]
            out = subprocess.run(
                [sys.executable, __file__, *child, "--child", f"{client}|{bootstrap}|{topic}"],
                capture_output=True, text=True, check=True, timeout=600,
            )
            rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    print(
        f"{args.tasks} tasks x {args.per_task} sends of {args.size} B, acks={args.acks}, "
        f"kproducer buffer.memory={args.buffer_memory}, gc.freeze={args.gc_freeze}; "
        f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after"
    )
    print("| client | records/s | worst gap ms | p99 gap ms | gaps > 20 ms | ticks | idle worst ms | full GCs | longest full GC ms | all full GCs ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['client']} | {r['records_per_s']:,.0f} | {r['worst_gap_ms']:.1f} | {r['p99_gap_ms']:.1f} | "
            f"{r['gaps_over_20ms']} | {r['ticks']} | {r['idle_worst_gap_ms']:.1f} | {r['gc2_count']} | "
            f"{r['gc2_max_ms']:.1f} | {r['gc2_total_ms']:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
