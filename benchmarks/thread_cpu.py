"""Where a warm producer's CPU goes, thread by thread: the caller, the Sender, the compression worker.

Runs a ``send()`` or ``send_arrow()`` loop against one Tansu on a warm producer and
prints each thread's user and system CPU time over the loop and its flush (from
``/proc/self/task/*/stat``), the process's minor page faults, and, with
``--python-codecs`` (no compression worker: the Python codecs on the Sender and the
callers, as gzip and snappy always are), how long each thread's codec calls took in
wall time against CPU time: the gap is the wait for the GIL after the codec let go
of it (benchmarks/RESULTS.md, "Compression off the GIL").

    .venv/bin/python benchmarks/thread_cpu.py --mode arrow --size 1024 --records 2000000 --config compression.type=lz4,acks=all
    .venv/bin/python benchmarks/thread_cpu.py --mode arrow --size 1024 --records 2000000 --config compression.type=lz4,acks=all --python-codecs
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

_TICK_MS = 1000 / os.sysconf("SC_CLK_TCK")


def _thread_times() -> dict[str, tuple[int, int]]:
    """Native thread id -> (user ticks, system ticks)."""
    out = {}
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        out[tid] = (int(fields[11]), int(fields[12]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--mode", choices=["send", "arrow"], default="arrow")
    ap.add_argument("--config", default="compression.type=lz4,acks=all", help="producer config, k=v,k=v")
    ap.add_argument("--python-codecs", action="store_true", help="no compression worker: the Python codecs")
    args = ap.parse_args()
    config = dict(kv.split("=", 1) for kv in args.config.split(",") if kv)

    import pyarrow as pa
    from tests.support.readback import create_topic
    from tests.support.tansu import tansu_unless

    from kproducer.producer import Producer
    from kproducer.record import builder as builder_module

    codec_calls: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0])
    real_compress = builder_module.compress

    def timed_compress(*a: Any, **kw: Any) -> bytes:
        wall, cpu = time.perf_counter(), time.thread_time()
        out = real_compress(*a, **kw)
        entry = codec_calls[threading.current_thread().name.split(" |")[0]]
        entry[0] += 1
        entry[1] += time.perf_counter() - wall
        entry[2] += time.thread_time() - cpu
        return out

    builder_module.compress = timed_compress  # type: ignore[assignment]
    payload = os.urandom(args.size)
    table = pa.table({"value": pa.array([payload] * 10_000, type=pa.binary())})
    with tansu_unless(None) as (bootstrap, _broker):
        topic = f"thread-cpu-{int(time.time() * 1000)}"
        create_topic(bootstrap, topic, args.partitions)
        p = Producer({"bootstrap.servers": bootstrap, **config})
        if args.python_codecs:
            p._accumulator.stop_compression_worker()
            p._accumulator.compression_worker = None
        p.send(topic, payload).result(30)
        codec_calls.clear()
        names = {str(t.native_id): t.name.split(" |")[0] for t in threading.enumerate()}
        before, faults = _thread_times(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter()
        if args.mode == "arrow":
            for start in range(0, args.records, 10_000):
                p.send_arrow(table.slice(0, min(10_000, args.records - start)), topic)
        else:
            send = p.send
            for _ in range(args.records):
                send(topic, payload)
        p.flush()
        elapsed = time.perf_counter() - t0
        after, faults = _thread_times(), resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults
        p.close()
    worker = "python codecs" if args.python_codecs else "compression worker"
    print(f"{args.records:,} x {args.size} B, {args.mode}, config {config}, {worker}: "
          f"{args.records / elapsed:,.0f} records/s, {faults:,} minor page faults")  # fmt: skip
    print("| thread | user ms | system ms |")
    print("|---|---:|---:|")
    rows = []
    for tid, (user, system) in after.items():
        u0, s0 = before.get(tid, (0, 0))
        rows.append((names.get(tid, "native (compression worker or other)"), (user - u0) * _TICK_MS, (system - s0) * _TICK_MS))
    for name, user, system in sorted(rows, key=lambda r: -(r[1] + r[2]))[:4]:
        print(f"| {name} | {user:,.0f} | {system:,.0f} |")
    if codec_calls:
        print("\n| thread | codec calls | wall µs per call | CPU µs per call |")
        print("|---|---:|---:|---:|")
        for name, (calls, wall, cpu) in codec_calls.items():
            print(f"| {name} | {calls:,.0f} | {wall * 1e6 / calls:,.0f} | {cpu * 1e6 / calls:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
