"""Metadata at scale (KIP-526): requests and bytes per client while discovering many topics.

A Tansu broker holds ``--topics`` one-partition topics, created up front in chunks.
It advertises the port of a counting TCP proxy run here, so every connection a
client makes goes through the proxy, which parses Kafka request headers and counts
requests and response bytes per API (api key 3 = Metadata). Each client runs in
its own child process and writes to ``--write`` of the topics: it discovers new ones
steadily over ``--discover-s`` and sends one record per second to every topic it
knows, for ``--steady-s`` more seconds, with ``metadata.max.age.ms=--max-age-ms``.

Discovery (``--pattern``): by default (``single``) one caller thread sends the
topics due in each 100 ms tick back to back (2,000 over 15 s: ~13 a tick), then
its once-a-second records to the topics it knows, as a single-threaded
application fanning records out to new topics would: a client whose send() waits
for metadata makes one request per new topic, one that holds the record instead
shares one request among all of a tick's new topics. ``pool`` sends each new
topic of a tick from a thread of a pool of callers (the loop never waits for
them; a topic joins the once-a-second sends after its first send() returned).
``paced`` sends each new topic alone at its due time (one every 7.5 ms by
default), from the pool; then every client makes about one Metadata request per
topic, since nothing arrives together to be coalesced.

Tansu quirk, corrected by the proxy: Tansu answers a Metadata v1+ request with an
empty topic list (the "brokers only" request every client sends at start) with
every topic of the cluster; Kafka answers it with none. librdkafka caches that
answer, so on raw Tansu confluent-kafka discovers nothing for its first
metadata.max.age.ms (10,000 topics cost it one 630 KB answer and then no request
until its cache expires), which is not the workload the issue describes. The
proxy therefore rewrites the answer to such a request as Kafka would send it (the
same brokers, no topics), and counts the bytes it forwards; ``--raw-tansu`` turns
this off. Requests naming topics, and the null list that means "all topics"
(kafka-python), are forwarded untouched.

Reported per client: Metadata requests, Metadata response bytes, p50/p99 time
from the first send() to a new topic until its record is acknowledged, p99 of the
time that first send() blocked its caller (metadata), records delivered and
failed, the longest any send() call held its caller; for kproducer also the largest routine (no urgent topic) request and the
target size it had to stay within. ``--debug-log DIR`` writes each client's
metadata debug log and per-topic latencies there.

    .venv/bin/python benchmarks/metadata_scale.py                      # 10,000 / 2,000 / 15 s + 15 s
    .venv/bin/python benchmarks/metadata_scale.py --topics 2000 --write 400 --discover-s 5 --steady-s 5
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from tests.support.counting_proxy import METADATA, CountingProxy  # noqa: E402

CLIENTS = ["kproducer", "confluent-kafka", "kafka-python"]
TICK_S = 0.1
CALLER_THREADS = 16


# ---------------------------------------------------------------- child side
def _pct(samples: list[float], q: float) -> float:
    if not samples:
        return float("nan")
    s = sorted(samples)
    return s[min(len(s) - 1, int(q * (len(s) - 1)))]


def _child(
    client: str,
    bootstrap: str,
    names: list[str],
    discover_s: float,
    steady_s: float,
    max_age_ms: int,
    debug_dir: str | None = None,
    pattern: str = "ticks",
) -> dict[str, Any]:
    perf = time.perf_counter
    first_lat: dict[str, float] = {}
    first_at: dict[str, float] = {}  # ms since the start of the run when the first send() began
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
                first_at[topic] = (start - t0) * 1000

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
            p.send(topic, value=b"v" * 100, callback=lambda m, e: done(topic, start, e))

        def finish() -> None:
            p.flush(60)
            snap = p.metrics()
            extra["metadata-request-total (client)"] = snap.get("metadata-request-total")
            extra["metadata-response-bytes-total (client)"] = snap.get("metadata-response-bytes-total")
            p.close(30)

    elif client == "confluent-kafka":
        import logging

        import confluent_kafka

        conf: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "metadata.max.age.ms": max_age_ms,
            "linger.ms": 5,
            "acks": "1",
        }
        if logging.getLogger("confluent").handlers:
            conf.update({"debug": "metadata", "logger": logging.getLogger("confluent")})
        cp = confluent_kafka.Producer(conf)
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

    returned: list[str] = []  # topics whose first send() has returned (list.append is atomic)

    def first_send(topic: str, start: float) -> None:
        try:
            send(topic, start)
        except Exception as exc:  # counted as failed, like a delivery error
            with lock:
                failed.append(f"{topic}: send() raised {exc!r}")
            return
        held = (perf() - start) * 1000  # how long send() held its caller
        blocked[topic] = held
        longest[0] = max(longest[0], held)
        returned.append(topic)

    longest = [0.0]  # the longest any send() call held its caller, in ms

    def timed_send(topic: str) -> None:
        begin = perf()
        send(topic, None)
        longest[0] = max(longest[0], (perf() - begin) * 1000)

    blocked: dict[str, float] = {}
    # The pool's futures are not kept: 2,000 of them (each with a Condition, an RLock and
    # bound methods) would add ~25,000 objects to every full GC pass of the measured process.
    pool = ThreadPoolExecutor(CALLER_THREADS)
    known: list[str] = []
    taken = 0
    # single and pool: the topics due in each 100 ms tick are sent together, back to back by this
    # one thread (single) or each by a thread of the pool (pool); paced: each one alone, when due.
    tick_s = TICK_S if pattern != "paced" else max(0.001, min(TICK_S, discover_s / max(1, len(names))))
    ticks_per_s = round(1 / tick_s)
    t0 = perf()
    tick = 0
    next_new = 0
    total_s = discover_s + steady_s
    while True:
        now = perf() - t0
        if now >= total_s:
            break
        # New topics due by now (a steady rate over discover_s), sent by the caller pool. The loop
        # does not wait for them: a send() blocked on metadata holds only its caller thread.
        due = len(names) if discover_s <= 0 else min(len(names), int(len(names) * min(1.0, now / discover_s)))
        new = names[next_new:due]
        next_new = due
        # Known topics (first send returned): one record per second each, spread over the ticks.
        n = len(returned)
        known.extend(returned[taken:n])
        taken = n
        slot = tick % ticks_per_s
        for i in range(slot, len(known), ticks_per_s):
            timed_send(known[i])
        for t in new:
            if pattern == "single":
                first_send(t, perf())
            else:
                pool.submit(first_send, t, perf())
        tick += 1
        sleep = t0 + tick * tick_s - perf()
        if sleep > 0:
            time.sleep(sleep)
    pool.shutdown(wait=True)
    finish()
    lat = [first_lat[t] for t in names if t in first_lat]
    if debug_dir:
        with open(Path(debug_dir) / f"{client}.latency.json", "w") as fh:
            json.dump([(t, first_at.get(t), first_lat.get(t), blocked.get(t)) for t in names], fh)
    return {
        "client": client,
        "new_topics": len(names),
        "acked_first_sends": len(lat),
        "delivered": delivered[0],
        "failed": len(failed),
        "failed_sample": failed[:3],
        "first_ack_p50_ms": _pct(lat, 0.5),
        "first_ack_p99_ms": _pct(lat, 0.99),
        "first_send_blocked_p50_ms": _pct(list(blocked.values()), 0.5),
        "first_send_blocked_p99_ms": _pct(list(blocked.values()), 0.99),
        "longest_send_ms": longest[0],
        "routine_max_topics": max((n for n, _ in routine_sizes), default=0),
        "routine_over_target": sum(1 for n, t in routine_sizes if n > t),
        "routine_requests": len(routine_sizes),
        "routine_target_max": max((t for _, t in routine_sizes), default=0),
        **extra,
    }


def _setup_debug_log(client: str, directory: str) -> None:
    """Log the metadata requests (kproducer's debug line; librdkafka's ``debug=metadata``) to a file."""
    import logging

    Path(directory).mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(Path(directory) / f"{client}.log", mode="w")
    handler.setFormatter(logging.Formatter("%(relativeCreated)9.1f %(threadName)s %(name)s %(message)s"))
    for name in ("kproducer.metadata", "kproducer.network.client", "confluent", "kafka.cluster", "kafka.client_async"):
        lg = logging.getLogger(name)
        lg.setLevel(logging.DEBUG)
        lg.addHandler(handler)


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
    ap.add_argument(
        "--pattern",
        choices=["single", "pool", "paced"],
        default="single",
        help="discovery: the new topics of each 100 ms tick sent back to back by one caller thread (default), "
        "or each by a thread of a pool, or each alone when due (pool threads)",
    )
    ap.add_argument("--chunk", type=int, default=1_000, help="topics per CreateTopics request")
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument(
        "--raw-tansu",
        action="store_true",
        help="forward Tansu's answer to a brokers-only Metadata request as is (every topic of the cluster)",
    )
    ap.add_argument("--debug-log", help="directory for per-client debug logs (metadata requests)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--bootstrap", help=argparse.SUPPRESS)
    args = ap.parse_args()
    names = [f"scale-{i:05d}" for i in range(args.write)]
    if args.child:
        if args.debug_log:
            _setup_debug_log(args.child, args.debug_log)
        res = _child(
            args.child,
            args.bootstrap,
            names,
            args.discover_s,
            args.steady_s,
            args.max_age_ms,
            args.debug_log,
            args.pattern,
        )
        print(json.dumps(res))
        return
    if args.write > args.topics:
        raise SystemExit(f"--write ({args.write}) must not exceed --topics ({args.topics})")

    from kproducer.admin import create_topics
    from kproducer.embedded_broker import start_embedded_broker

    proxy_port = _free_port()
    broker = start_embedded_broker(advertised_port=proxy_port)
    proxy = CountingProxy(proxy_port, broker.port, brokers_only_fix=not args.raw_tansu)
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
                "--max-age-ms", str(args.max_age_ms), "--pattern", args.pattern,
            ]  # fmt: skip
            if args.debug_log:
                cmd += ["--debug-log", args.debug_log]
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={**os.environ})
            if out.returncode != 0:
                raise SystemExit(f"{client} failed:\n{out.stderr[-3000:]}")
            res = json.loads(out.stdout.strip().splitlines()[-1])
            reqs, resp = proxy.snapshot()
            res["metadata_requests"] = reqs.get(METADATA, 0)
            res["metadata_bytes"] = resp.get(METADATA, 0)
            res["produce_requests"] = reqs.get(0, 0)
            res["brokers_only_rewrites"] = proxy.brokers_only_rewrites
            rows.append(res)
            print(json.dumps(res), flush=True)
    finally:
        proxy.stop()
        broker.stop()

    base = next((r for r in rows if r["client"] == "confluent-kafka"), None)
    print()
    print(
        f"{args.topics} topics, {args.write} written, discovery {args.discover_s:g} s ({args.pattern}) + steady "
        f"{args.steady_s:g} s, metadata.max.age.ms={args.max_age_ms}, "
        + (
            "Tansu's brokers-only answer as is (every topic)"
            if args.raw_tansu
            else "brokers-only answers without topics"
        )
    )
    print()
    print(
        "| client | Metadata requests | vs confluent | Metadata bytes | vs confluent | first send→ack p50 | p99 "
        "| first send() blocked p99 | longest send() | delivered | failed | largest routine request (target) |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
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
            f"{r['first_ack_p50_ms']:.1f} ms | {r['first_ack_p99_ms']:.1f} ms | {r['first_send_blocked_p99_ms']:.1f} ms | "
            f"{r['longest_send_ms']:.1f} ms | "
            f"{r['delivered']} | {r['failed']} | {routine} |"
        )


if __name__ == "__main__":
    main()
