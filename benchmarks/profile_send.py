"""Profile a send() loop (and the Sender thread) against one Tansu with pyinstrument.

Prints the top entries by self time for the caller thread and the whole
process, so that the hot path before and after a change can be compared.

    .venv/bin/python benchmarks/profile_send.py --records 200000
    KPRODUCER_PURE_PYTHON=1 .venv/bin/python benchmarks/profile_send.py   # the pure-Python path
    .venv/bin/python benchmarks/profile_send.py --mode batch              # send_batch
    .venv/bin/python benchmarks/profile_send.py --threads 1,2,4           # concurrency, no profiler
    .venv/bin/python benchmarks/profile_send.py --threads 1 --size 1024 --config compression.type=lz4
    .venv/bin/python benchmarks/profile_send.py --threads 1 --mode arrow      # send_arrow, 10,000-row tables
    .venv/bin/python benchmarks/profile_send.py --cold 3 --records 1000000    # first send() to metadata, cold

``--config k=v,...`` adds producer settings (both modes). The producer is warm in both: the
topic's metadata is fetched by a first send before the clock starts.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _self_times(frame: Any, acc: Counter[str], parent: str = "?") -> None:
    """Sum pyinstrument self time per function; synthetic ``[self]`` frames count for their parent."""
    if frame.function.startswith("["):
        name = parent
    else:
        name = f"{frame.function} ({Path(frame.file_path_short or '?').name}:{frame.line_no})"
    children = frame.children
    acc[name] += frame.time - sum(c.time for c in children)
    for c in children:
        _self_times(c, acc, name)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--mode", choices=["send", "batch", "arrow"], default="send")
    ap.add_argument("--top", type=int, default=20)
    ap.add_argument("--bootstrap")
    ap.add_argument("--threads", help="comma-separated thread counts calling send(): measure without the profiler")
    ap.add_argument("--config", default="", help="extra producer config, k=v,k=v")
    ap.add_argument("--cold", type=int, metavar="RUNS",
                    help="a new producer per run, no warm-up: when the topic's metadata arrives during a send() loop")  # fmt: skip
    args = ap.parse_args()
    args.producer_config = {"acks": "1", **dict(kv.split("=", 1) for kv in args.config.split(",") if kv)}
    if args.cold:
        return _cold(args)
    if args.threads:
        return _threads(args)

    from pyinstrument import Profiler
    from tests.support.readback import create_topic
    from tests.support.tansu import tansu_unless

    from kproducer.producer import Producer
    from kproducer.record import native

    with tansu_unless(args.bootstrap) as (bootstrap, _broker):
        topic = f"profile-{int(time.time() * 1000)}"
        create_topic(bootstrap, topic, args.partitions)
        payload = os.urandom(args.size)
        p = Producer({"bootstrap.servers": bootstrap, **args.producer_config})
        p.send(topic, payload).result(30)
        profiler = Profiler(interval=0.001, async_mode="disabled")
        t0 = time.perf_counter()
        profiler.start()
        if args.mode == "send":
            send = p.send
            for _ in range(args.records):
                send(topic, payload)
        elif args.mode == "batch":
            values = [payload] * 10_000
            for start in range(0, args.records, 10_000):
                p.send_batch(topic, values[: min(10_000, args.records - start)])
        else:
            import pyarrow as pa

            table = pa.table({"value": pa.array([payload] * 10_000, type=pa.binary())})
            for start in range(0, args.records, 10_000):
                p.send_arrow(table.slice(0, min(10_000, args.records - start)), topic)
        p.flush()
        profiler.stop()
        elapsed = time.perf_counter() - t0
        p.close()
    session = profiler.last_session
    assert session is not None
    root = session.root_frame()
    acc: Counter[str] = Counter()
    if root is not None:
        _self_times(root, acc)
    total = sum(acc.values()) or 1.0
    print(
        f"mode={args.mode} native={native.AVAILABLE} records={args.records} size={args.size}: "
        f"{args.records / elapsed:,.0f} records/s ({elapsed:.2f} s, caller thread profiled)"
    )
    print(f"{'self %':>7}  {'self s':>7}  function")
    for name, secs in acc.most_common(args.top):
        print(f"{100 * secs / total:6.1f}%  {secs:7.3f}  {name}")
    return 0


def _cold(args: argparse.Namespace) -> int:
    """A send() loop on a producer that knows nothing yet: how soon the topic's metadata arrives
    (checked every 1,024 records) and how many records were sent by then (they wait for it)."""
    from tests.support.readback import create_topic
    from tests.support.tansu import tansu_unless

    from kproducer.producer import Producer

    payload = os.urandom(args.size)
    with tansu_unless(args.bootstrap) as (bootstrap, _broker):
        print(f"{args.records:,} x {args.size} B, {args.partitions} partitions, config {args.producer_config}")
        print("| run | metadata after ms | records sent by then | records/s |")
        print("|---:|---:|---:|---:|")
        for run in range(args.cold):
            topic = f"cold-{run}-{int(time.time() * 1000)}"
            create_topic(bootstrap, topic, args.partitions)
            p = Producer({"bootstrap.servers": bootstrap, **args.producer_config})
            cluster = p._metadata
            send = p.send
            seen: tuple[float, int] | None = None
            t0 = time.perf_counter()
            for i in range(args.records):
                send(topic, payload)
                if seen is None and not i & 1023 and cluster.cluster.partition_count(topic) is not None:
                    seen = (time.perf_counter() - t0, i)
            p.flush()
            elapsed = time.perf_counter() - t0
            p.close()
            at_ms, at_record = (seen[0] * 1000, seen[1]) if seen is not None else (float("nan"), -1)
            print(f"| {run} | {at_ms:.1f} | {at_record:,} | {args.records / elapsed:,.0f} |", flush=True)
    return 0


def _threads(args: argparse.Namespace) -> int:
    """records/s with N threads calling send(), and whether batch.size/linger.ms still shape the batches."""
    import threading

    from tests.support.readback import create_topic
    from tests.support.tansu import tansu_unless

    from kproducer.producer import Producer

    payload = os.urandom(args.size)
    values = [payload] * 10_000
    table: Any = None
    if args.mode == "arrow":
        import pyarrow as pa

        table = pa.table({"value": pa.array(values, type=pa.binary())})
    with tansu_unless(args.bootstrap) as (bootstrap, _broker):
        print(f"{args.records:,} x {args.size} B, {args.partitions} partitions, {args.mode}(), config {args.producer_config}")
        print("| threads | records/s | batch-size-avg | records-per-request-avg | record-queue-time-avg ms |")
        print("|---:|---:|---:|---:|---:|")
        for n_threads in (int(t) for t in args.threads.split(",")):
            topic = f"threads-{n_threads}-{int(time.time() * 1000)}"
            create_topic(bootstrap, topic, args.partitions)
            p = Producer({"bootstrap.servers": bootstrap, **args.producer_config})
            p.send(topic, payload).result(30)
            per_thread = args.records // n_threads

            def work(topic: str = topic, p: Producer = p, per_thread: int = per_thread) -> None:
                if args.mode == "send":
                    send = p.send
                    for _ in range(per_thread):
                        send(topic, payload)
                    return
                # Bulk calls of 10,000 rows; an Arrow table is built once, before the clock.
                for start in range(0, per_thread, 10_000):
                    n = min(10_000, per_thread - start)
                    if args.mode == "batch":
                        p.send_batch(topic, values[:n])
                    else:
                        p.send_arrow(table.slice(0, n), topic)

            threads = [threading.Thread(target=work) for _ in range(n_threads)]
            t0 = time.perf_counter()
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            p.flush()
            elapsed = time.perf_counter() - t0
            m = p.metrics()
            p.close()
            print(
                f"| {n_threads} | {per_thread * n_threads / elapsed:,.0f} | {m.get('batch-size-avg', 0):,.0f} | "
                f"{m.get('records-per-request-avg', 0):,.1f} | {m.get('record-queue-time-avg', 0):.1f} |",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
