"""Do the dependencies' hot calls let go of the GIL? CRC-32C (crc32c) and compression (cramjam, lz4).

A spinner thread counts steps, giving up the GIL after each (``time.sleep(0)``), while the main
thread makes one call on a large buffer. With a huge switch interval no thread is forced off the
GIL, so the spinner advances during the call only if the call released the GIL. A call known to
hold it (``bytes.count``) is the control. This is a measurement, not a test: how far the spinner
gets depends on how long each call runs and on how busy the machine is, so it lives here and
prints its figures (the steps, and the call's wall time) rather than asserting them.

Read it as: the control's steps stay near 0; a call that releases the GIL lets the spinner take
many steps (about one per few microseconds of the call). The Sender relies on the codecs
releasing the GIL (docs/internals.md, "The GIL and the Sender's system calls"), and the batch
CRC is called with ``gil_release_mode=0`` so that it keeps it: its row with that mode should
look like the control.

    .venv/bin/python benchmarks/gil_release.py              # 32 MiB, 3 repeats
    .venv/bin/python benchmarks/gil_release.py --mib 8 --repeat 5
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from collections.abc import Callable


def _steps_during(work: Callable[[], object]) -> tuple[int, float]:
    """(spinner steps taken while ``work`` ran, the call's wall seconds)."""
    counter = [0]
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            counter[0] += 1
            time.sleep(0)

    t = threading.Thread(target=spin)
    t.start()
    time.sleep(0.01)  # the spinner is running
    before = counter[0]
    t0 = time.perf_counter()
    work()
    wall = time.perf_counter() - t0
    steps = counter[0] - before
    stop.set()
    t.join()
    return steps, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=int, default=32, help="buffer size in MiB (each call takes milliseconds at 32)")
    ap.add_argument("--repeat", type=int, default=3, help="measurements per call")
    args = ap.parse_args()

    import cramjam
    import crc32c
    import lz4.frame

    data = os.urandom(1 << 20) * args.mib  # built before any clock starts
    calls: dict[str, Callable[[], object]] = {
        "control: bytes.count (holds the GIL)": lambda: data.count(b"\x01"),
        # A hardware CRC-32C does 32 MiB in a few ms: repeated so the window is long enough.
        "crc32c.crc32c x8 (default mode)": lambda: [crc32c.crc32c(data) for _ in range(8)],
        "crc32c.crc32c x8 (gil_release_mode=0)": lambda: [crc32c.crc32c(data, gil_release_mode=0) for _ in range(8)],
        "cramjam.zstd.compress level 1": lambda: cramjam.zstd.compress(data, level=1),
        "cramjam.lz4.compress_block": lambda: cramjam.lz4.compress_block(data),
        "lz4.frame.compress": lambda: lz4.frame.compress(data),
        "cramjam.gzip.compress level 1": lambda: cramjam.gzip.compress(data, level=1),
    }
    print(f"python {sys.version.split()[0]}, buffer {args.mib} MiB, {args.repeat} repeats, switch interval 30 s during calls")
    print(f"crc32c {getattr(crc32c, '__version__', '?')}, cramjam {getattr(cramjam, '__version__', '?')}, lz4 {lz4.VERSION}")
    print()
    print("| call | spinner steps per call (min–max) | wall ms per call (min–max) | releases the GIL? |")
    print("|---|---:|---:|---|")
    old = sys.getswitchinterval()
    sys.setswitchinterval(30.0)
    try:
        for name, call in calls.items():
            runs = [_steps_during(call) for _ in range(args.repeat)]
            steps = sorted(s for s, _w in runs)
            walls = sorted(w * 1000 for _s, w in runs)
            verdict = "yes" if steps[0] > 2 else ("no" if steps[-1] <= 2 else "unclear")
            print(f"| {name} | {steps[0]:,}–{steps[-1]:,} | {walls[0]:.1f}–{walls[-1]:.1f} | {verdict} |")
    finally:
        sys.setswitchinterval(old)


if __name__ == "__main__":
    main()
