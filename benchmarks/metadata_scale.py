"""Metadata at scale (issue 5, KIP-526): requests and bytes per client while discovering many topics.

A Tansu broker holds ``--topics`` one-partition topics, created up front in chunks.
It advertises the port of a counting TCP proxy run here, so every connection a
client makes goes through the proxy, which parses Kafka request headers and counts
requests and response bytes per API (api key 3 = Metadata). Each client runs in
its own child process and writes to ``--write`` of the topics: it discovers new ones
steadily over ``--discover-s`` (in 100 ms ticks, each tick's new topics sent by a
pool of caller threads), and sends one record per second to every topic it knows,
for ``--steady-s`` more seconds, with ``metadata.max.age.ms=--max-age-ms``.

Reported per client: Metadata requests, Metadata response bytes, p50/p99 time
from the first send() to a new topic until its record is acknowledged, records
delivered and failed; for kproducer also the largest routine (no urgent topic)
request and the target size it had to stay within.

    .venv/bin/python benchmarks/metadata_scale.py                      # 10,000 / 2,000 / 15 s + 15 s
    .venv/bin/python benchmarks/metadata_scale.py --topics 2000 --write 400 --discover-s 5 --steady-s 5
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import struct
import subprocess
import sys
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

CLIENTS = ["kproducer", "confluent-kafka", "kafka-python"]
METADATA = 3
TICK_S = 0.1
CALLER_THREADS = 16


# ---------------------------------------------------------------- counting proxy
class CountingProxy:
    """Loopback TCP proxy that counts Kafka requests and response bytes per API key."""

    def __init__(self, listen_port: int, target_port: int) -> None:
        self.listen_port = listen_port
        self.target_port = target_port
        self.requests: Counter[int] = Counter()
        self.response_bytes: Counter[int] = Counter()
        self._lock = threading.Lock()
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="counting-proxy", daemon=True)

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("counting proxy did not start")

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.response_bytes.clear()

    def snapshot(self) -> tuple[dict[int, int], dict[int, int]]:
        with self._lock:
            return dict(self.requests), dict(self.response_bytes)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        server = self._loop.run_until_complete(
            asyncio.start_server(self._handle, "127.0.0.1", self.listen_port)
        )
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            server.close()

    async def _handle(self, creader: asyncio.StreamReader, cwriter: asyncio.StreamWriter) -> None:
        try:
            breader, bwriter = await asyncio.open_connection("127.0.0.1", self.target_port)
        except OSError:
            cwriter.close()
            return
        pending: dict[int, int] = {}  # correlation id -> api key, for this connection

        async def upstream() -> None:
            buf = bytearray()
            while data := await creader.read(65536):
                bwriter.write(data)
                buf += data
                while len(buf) >= 12:
                    (size,) = struct.unpack_from(">i", buf, 0)
                    if len(buf) < 4 + size:
                        break
                    api_key, _version, cid = struct.unpack_from(">hhi", buf, 4)
                    pending[cid] = api_key
                    with self._lock:
                        self.requests[api_key] += 1
                    del buf[: 4 + size]
                await bwriter.drain()
            bwriter.close()

        async def downstream() -> None:
            buf = bytearray()
            while data := await breader.read(65536):
                cwriter.write(data)
                buf += data
                while len(buf) >= 8:
                    size, cid = struct.unpack_from(">ii", buf, 0)
                    if len(buf) < 4 + size:
                        break
                    api_key = pending.pop(cid, -1)
                    with self._lock:
                        self.response_bytes[api_key] += 4 + size
                    del buf[: 4 + size]
                await cwriter.drain()
            cwriter.close()

        try:
            await asyncio.gather(upstream(), downstream())
        except (ConnectionError, OSError):
            pass
        finally:
            cwriter.close()
            bwriter.close()


# ---------------------------------------------------------------- child side
def _pct(samples: list[float], q: float) -> float:
    if not samples:
        return float("nan")
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * (len(s) - 1)))]


def _child(
    client: str, bootstrap: str, names: list[str], discover_s: float, steady_s: float, max_age_ms: int
) -> dict[str, Any]:
    perf = time.perf_counter
    first_lat: dict[str, float] = {}
    delivered = [0]
    failed: list[str] = []
    lock = threading.Lock()
    routine_sizes: list[tuple[int, int]] = []  # (topics, target) of requests with no urgent topic
    extra: dict[str, Any] = {}

    def done(topic: str, start: float | None, exc: object) -> None:
        with lock:
            if exc is not None:
                failed.append(f"{topic}: {exc}")
                return
            delivered[0] += 1
            if start is not None:
                first_lat[topic] = (perf() - start) * 1000

    if client == "kproducer":
        from kproducer.producer import Producer

        p = Producer(
            {"bootstrap.servers": bootstrap, "metadata.max.age.ms": max_age_ms, "linger.ms": 5, "acks": "1"}
        )
        md = p._metadata
        inner = md.topics_for_request

        def counted(now: int) -> list[str] | None:
            topics = inner(now)
            sel = md.last_selection
            if topics is not None and sel is not None and sel.urgent == 0 and topics:
                routine_sizes.append((len(topics), sel.target))
            return topics

        md.topics_for_request = counted  # type: ignore[method-assign]

        def send(topic: str, start: float | None) -> None:
            p.send(topic, value=b"v" * 100, on_delivery=lambda m, e: done(topic, start, e))

        def finish() -> None:
            p.flush(60)
            snap = p.metrics()
            extra["metadata-request-total (client)"] = snap.get("metadata-request-total")
            extra["metadata-response-bytes-total (client)"] = snap.get("metadata-response-bytes-total")
            p.close(30)

    elif client == "confluent-kafka":
        import confluent_kafka

        cp = confluent_kafka.Producer(
            {"bootstrap.servers": bootstrap, "metadata.max.age.ms": max_age_ms, "linger.ms": 5, "acks": "1"}
        )
        stop = threading.Event()

        def poller() -> None:
            while not stop.is_set():
                cp.poll(0.05)

        pt = threading.Thread(target=poller, daemon=True)
        pt.start()

        def send(topic: str, start: float | None) -> None:
            while True:
                try:
                    cp.produce(topic, b"v" * 100, on_delivery=lambda e, m: done(topic, start, e))
                    return
                except BufferError:
                    time.sleep(0.001)

        def finish() -> None:
            cp.flush(60)
            stop.set()
            pt.join()

    elif client == "kafka-python":
        import kafka

        kp = kafka.KafkaProducer(
            bootstrap_servers=bootstrap,
            metadata_max_age_ms=max_age_ms,
            linger_ms=5,
            acks=1,
            max_block_ms=60000,
        )

        def send(topic: str, start: float | None) -> None:
            fut = kp.send(topic, b"v" * 100)
            fut.add_callback(lambda _m: done(topic, start, None))
            fut.add_errback(lambda e: done(topic, start, e))

        def finish() -> None:
            kp.flush(60)
            kp.close(30)

    else:
        raise SystemExit(f"unknown client {client!r}; known: {', '.join(CLIENTS)}")

    pool = ThreadPoolExecutor(CALLER_THREADS)
    known: list[str] = []
    t0 = perf()
    ticks_per_s = round(1 / TICK_S)
    tick = 0
    next_new = 0
    total_s = discover_s + steady_s
    while True:
        now = perf() - t0
        if now >= total_s:
            break
        # New topics due by now (a steady rate over discover_s), sent concurrently by the caller pool.
        due = len(names) if discover_s <= 0 else min(len(names), int(len(names) * min(1.0, now / discover_s)))
        new = names[next_new:due]
        next_new = due
        # Known topics: each gets one record per second, spread over the ticks.
        slot = tick % ticks_per_s
        for i in range(slot, len(known), ticks_per_s):
            send(known[i], None)
        futs = [pool.submit(send, t, perf()) for t in new]
        for f in futs:
            f.result()
        known.extend(new)
        tick += 1
        sleep = t0 + tick * TICK_S - perf()
        if sleep > 0:
            time.sleep(sleep)
    pool.shutdown()
    finish()
    lat = [first_lat[t] for t in names if t in first_lat]
    return {
        "client": client,
        "new_topics": len(names),
        "acked_first_sends": len(lat),
        "delivered": delivered[0],
        "failed": len(failed),
        "failed_sample": failed[:3],
        "first_ack_p50_ms": _pct(lat, 0.5),
        "first_ack_p99_ms": _pct(lat, 0.99),
        "routine_max_topics": max((n for n, _ in routine_sizes), default=0),
        "routine_over_target": sum(1 for n, t in routine_sizes if n > t),
        "routine_requests": len(routine_sizes),
        "routine_target_max": max((t for _, t in routine_sizes), default=0),
        **extra,
    }


# ---------------------------------------------------------------- parent side
def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topics", type=int, default=10_000, help="one-partition topics created up front")
    ap.add_argument("--write", type=int, default=2_000, help="topics the producer writes to")
    ap.add_argument("--discover-s", type=float, default=15.0)
    ap.add_argument("--steady-s", type=float, default=15.0)
    ap.add_argument("--max-age-ms", type=int, default=10_000)
    ap.add_argument("--chunk", type=int, default=1_000, help="topics per CreateTopics request")
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    args = ap.parse_args()
    names = [f"scale-{i:05d}" for i in range(args.write)]
    if args.child:
        res = _child(args.child, args.bootstrap, names, args.discover_s, args.steady_s, args.max_age_ms)
        print(json.dumps(res))
        return
    if args.write > args.topics:
        raise SystemExit(f"--write ({args.write}) must not exceed --topics ({args.topics})")

    from kproducer.admin import create_topics
    from kproducer.spark.embedded_broker import start_embedded_broker

    proxy_port = _free_port()
    broker = start_embedded_broker(advertised_port=proxy_port)
    proxy = CountingProxy(proxy_port, broker.port)
    proxy.start()
    bootstrap = f"127.0.0.1:{proxy_port}"
    rows: list[dict[str, Any]] = []
    try:
        all_names = names + [f"scale-{i:05d}" for i in range(args.write, args.topics)]
        t = time.monotonic()
        for i in range(0, len(all_names), args.chunk):
            create_topics(bootstrap, dict.fromkeys(all_names[i : i + args.chunk], 1), timeout=300)
        create_s = time.monotonic() - t
        print(f"created {args.topics} topics in {create_s:.1f}s ({args.chunk} per request)", flush=True)
        for client in args.clients.split(","):
            proxy.reset()
            cmd = [
                sys.executable, __file__, "--child", client, "--bootstrap", bootstrap,
                "--topics", str(args.topics), "--write", str(args.write),
                "--discover-s", str(args.discover_s), "--steady-s", str(args.steady_s),
                "--max-age-ms", str(args.max_age_ms),
            ]  # fmt: skip
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={**os.environ})
            if out.returncode != 0:
                raise SystemExit(f"{client} failed:\n{out.stderr[-3000:]}")
            res = json.loads(out.stdout.strip().splitlines()[-1])
            reqs, resp = proxy.snapshot()
            res["metadata_requests"] = reqs.get(METADATA, 0)
            res["metadata_bytes"] = resp.get(METADATA, 0)
            res["produce_requests"] = reqs.get(0, 0)
            rows.append(res)
            print(json.dumps(res), flush=True)
    finally:
        proxy.stop()
        broker.stop()

    base = next((r for r in rows if r["client"] == "confluent-kafka"), None)
    print()
    print(
        f"{args.topics} topics, {args.write} written, discovery {args.discover_s:g} s + steady {args.steady_s:g} s, "
        f"metadata.max.age.ms={args.max_age_ms}"
    )
    print()
    print(
        "| client | Metadata requests | vs confluent | Metadata bytes | vs confluent | first send→ack p50 | p99 | delivered | failed | largest routine request (target) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        rq = (
            f"{r['metadata_requests'] / base['metadata_requests']:.0%}"
            if base and base["metadata_requests"]
            else "-"
        )
        rb = f"{r['metadata_bytes'] / base['metadata_bytes']:.0%}" if base and base["metadata_bytes"] else "-"
        routine = (
            f"{r['routine_max_topics']} ({r['routine_target_max']}), {r['routine_over_target']} over"
            if r["client"] == "kproducer"
            else "-"
        )
        print(
            f"| {r['client']} | {r['metadata_requests']} | {rq} | {r['metadata_bytes'] / 1000:.0f} KB | {rb} | "
            f"{r['first_ack_p50_ms']:.1f} ms | {r['first_ack_p99_ms']:.1f} ms | {r['delivered']} | {r['failed']} | {routine} |"
        )


if __name__ == "__main__":
    main()
