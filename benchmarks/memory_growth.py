"""Peak memory of a producer sending keyed records, and how much of it the C allocator holds free.

Each run is a fresh process (peak RSS never goes down in a process) with its own embedded Tansu:
it sends ``--records`` records of ``--size`` bytes with ``--keys`` distinct keys over
``--partitions`` partitions, flushes, and reports the peak RSS growth after the first send (what
``benchmarks/compare.py`` prints as "RSS growth"), together with glibc's own figures sampled every
5 ms while it ran (``mallinfo2``): the bytes in use and the bytes freed but kept in the
allocator's arenas at the sample of the highest RSS. Free bytes kept are fragmentation: memory the
process holds that neither ``buffer.memory`` nor any Python object accounts for.

    .venv/bin/python benchmarks/memory_growth.py --compression lz4 --repeat 3
    .venv/bin/python benchmarks/memory_growth.py --compression zstd --partitions 1000 --size 1024
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

MIB = 1024 * 1024


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena",
            "ordblks",
            "smblks",
            "hblks",
            "hblkhd",
            "usmblks",
            "fsmblks",
            "uordblks",
            "fordblks",
            "keepcost",
        )
    ]


def _mallinfo() -> tuple[float, float] | None:
    """(bytes in use, bytes free in the arenas) in MiB, or None without glibc's mallinfo2."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        fn = libc.mallinfo2
    except (OSError, AttributeError):
        return None
    fn.restype = _MallInfo2
    info = fn()
    return (info.uordblks + info.hblkhd) / MIB, info.fordblks / MIB


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / MIB


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def child(args: argparse.Namespace) -> None:
    from tests.support.readback import create_topic

    from kproducer.embedded_broker import start_embedded_broker
    from kproducer.producer import Producer

    with start_embedded_broker() as broker:
        create_topic(broker.bootstrap, "memory", args.partitions)
        producer = Producer(
            {"bootstrap.servers": broker.bootstrap, "acks": 1, "compression.type": args.compression}
        )
        payload = os.urandom(args.size)
        keys = [b"key-%d" % i for i in range(args.keys)]
        producer.send("memory", payload, key=keys[0]).get(60)
        samples: list[tuple[float, tuple[float, float] | None]] = []
        done = threading.Event()

        def sample() -> None:
            while not done.is_set():
                samples.append((_rss_mib(), _mallinfo()))
                time.sleep(0.005)

        before = _peak_rss_mib()
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        send, nkeys = producer.send, len(keys)
        t0 = time.perf_counter()
        for i in range(args.records):
            send("memory", payload, key=keys[i % nkeys])
        producer.flush()
        elapsed = time.perf_counter() - t0
        done.set()
        sampler.join()
        growth = _peak_rss_mib() - before
        failed = int(producer.metrics().get("record-error-total", 0.0))
        producer.close()
    rss, info = max(samples, key=lambda s: s[0])
    print(json.dumps({
        "growth": growth, "rss": rss, "in_use": info[0] if info else None, "free": info[1] if info else None,
        "records_per_s": args.records / elapsed, "failed": failed,
    }))  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--keys", type=int, default=20_000)
    ap.add_argument("--partitions", type=int, default=1000)
    ap.add_argument("--compression", default="lz4")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args)
        return
    print(
        f"{args.records:,} x {args.size} B, {args.keys:,} keys over {args.partitions:,} partitions, "
        f"compression.type={args.compression}; kproducer at its defaults otherwise (buffer.memory 32 MiB), "
        "acks=1, one Tansu per run"
    )
    print(
        "| run | peak RSS growth MiB | at the peak: RSS MiB | allocator in use MiB | allocator free MiB | records/s | failed |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    argv = [
        f"--records={args.records}", f"--size={args.size}", f"--keys={args.keys}",
        f"--partitions={args.partitions}", f"--compression={args.compression}",
    ]  # fmt: skip
    for run in range(1, args.repeat + 1):
        out = (
            subprocess.run(
                [sys.executable, __file__, "--child", *argv], check=True, capture_output=True, text=True
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        r = json.loads(out)
        in_use = "n/a" if r["in_use"] is None else f"{r['in_use']:.1f}"
        free = "n/a" if r["free"] is None else f"{r['free']:.1f}"
        print(
            f"| {run} | {r['growth']:.1f} | {r['rss']:.1f} | {in_use} | {free} | "
            f"{r['records_per_s']:,.0f} | {r['failed']} |"
        )


if __name__ == "__main__":
    main()
