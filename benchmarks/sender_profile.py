"""Profile the Sender (I/O) thread and the caller thread of a plaintext send() run, for several
git revisions side by side in one run, with py-spy.

Each revision is exported with ``git archive`` into a temporary directory and its C speedups are
built there; ``WORKTREE`` is this checkout as it is. One Tansu serves every run; the revisions take
turns (A B C, B C A, C A B, ...) so that a change in the machine's load falls on all of them alike. Each
run is a child process sampled by ``py-spy record --threads --format raw`` (idle samples left out,
so a count is CPU time on that thread, not waiting in ``select``). The payload is built before the
clock; the clock covers the send() loop and ``flush()``.

    .venv/bin/python benchmarks/sender_profile.py --revs 2b5fe31,e33fd1d,WORKTREE --records 1000000

Prints records/s and, per thread, samples per million records (lower is cheaper), then the Sender
thread's functions by self samples, one column per revision.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CHILD = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
from kproducer.producer import Producer
from kproducer.record import native
bootstrap, topic, records, size = sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
payload = os.urandom(size)
p = Producer({"bootstrap.servers": bootstrap, "acks": "1"})
p.send(topic, payload).result(30)
send = p.send
t0 = time.perf_counter()
for _ in range(records):
    send(topic, payload)
p.flush()
elapsed = time.perf_counter() - t0
p.close()
import kproducer
with open(sys.argv[6], "w") as fh:
    json.dump({"elapsed": elapsed, "native": native.AVAILABLE, "file": kproducer.__file__}, fh)
"""


def _export(rev: str, into: Path) -> Path:
    """The revision's source tree with its C speedups built; returns the directory to import from."""
    if rev == "WORKTREE":
        return ROOT / "src"
    target = into / rev
    target.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--inplace"],
        cwd=target,
        check=True,
        capture_output=True,
    )
    return target / "src"


def _thread_of(frames: list[str]) -> str:
    """Which thread a raw py-spy stack belongs to: the Sender's run loop, or the caller."""
    if frames[0].startswith("<module>"):
        return "caller"
    if any("(threading.py" in f for f in frames[:2]) and any("sender.py" in f for f in frames):
        return "sender"
    return "other"


def _parse_raw(path: Path) -> tuple[Counter[str], Counter[str]]:
    """Per-thread sample counts, and the Sender thread's self samples per function."""
    threads: Counter[str] = Counter()
    sender_self: Counter[str] = Counter()
    for line in path.read_text().splitlines():
        stack, _, count_s = line.rpartition(" ")
        if not stack or not count_s.isdigit():
            continue
        count = int(count_s)
        parts = stack.split(";")
        frames = [p for p in parts if not p.startswith(("process ", "thread "))]
        if not frames:
            continue
        kind = _thread_of(frames)
        threads[kind] += count
        if kind == "sender":
            leaf = frames[-1]
            # "poll (kproducer/network/selector.py:210)" -> "poll (selector.py)": lines move between revisions
            name, _, where = leaf.partition(" (")
            file = where.split(":")[0].rsplit("/", 1)[-1]
            sender_self[f"{name} ({file})"] += count
    return threads, sender_self


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--revs", default="WORKTREE", help="comma-separated git revisions; WORKTREE = this checkout")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--bootstrap")
    args = ap.parse_args()
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
    revs = [r.strip() for r in args.revs.split(",") if r.strip()]

    from tests.support.readback import create_topic
    from tests.support.tansu import tansu_unless

    with tempfile.TemporaryDirectory(prefix="kproducer-revs-") as tmp, tansu_unless(args.bootstrap) as (
        bootstrap,
        _broker,
    ):
        sources = {rev: _export(rev, Path(tmp)) for rev in revs}
        rates: dict[str, list[float]] = {r: [] for r in revs}
        threads: dict[str, Counter[str]] = {r: Counter() for r in revs}
        sender: dict[str, Counter[str]] = {r: Counter() for r in revs}
        loads: list[str] = []
        for attempt in range(args.repeat):
            # Each round starts with the next revision, so that none always runs first.
            for rev in revs[attempt % len(revs) :] + revs[: attempt % len(revs)]:
                topic = f"prof-{rev[:12]}-{attempt}-{int(time.time() * 1000)}"
                create_topic(bootstrap, topic, args.partitions)
                raw = Path(tmp) / f"{rev}-{attempt}.txt"
                loads.append(Path("/proc/loadavg").read_text().split()[0])
                report = Path(tmp) / f"{rev}-{attempt}.json"
                out = subprocess.run(
                    [
                        py_spy, "record", "--threads", "--format", "raw", "--rate", str(args.rate),
                        "--output", str(raw), "--",
                        sys.executable, "-c", CHILD, str(sources[rev]), bootstrap, topic,
                        str(args.records), str(args.size), str(report),
                    ],
                    capture_output=True,
                    text=True,
                )
                if out.returncode != 0 or not report.exists():
                    raise SystemExit(f"{rev}: the run failed ({out.returncode}):\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}")
                result = json.loads(report.read_text())
                if not result["native"]:
                    raise SystemExit(f"{rev}: the C speedups did not load; the comparison would be unfair")
                if not Path(result["file"]).resolve().is_relative_to(Path(sources[rev]).resolve()):
                    raise SystemExit(f"{rev}: imported {result['file']}, not the revision's tree")
                rates[rev].append(args.records / result["elapsed"])
                t, s = _parse_raw(raw)
                threads[rev].update(t)
                sender[rev].update(s)
                print(f"{rev}: {rates[rev][-1]:,.0f} records/s (load {loads[-1]})", flush=True)
        print(
            f"\n{args.records:,} x {args.size} B, acks=1, {args.partitions} partitions, plaintext, one Tansu; "
            f"py-spy {args.rate} Hz; {args.repeat} runs per revision; load average at each start: {', '.join(loads)}"
        )
        million = args.records * args.repeat / 1e6
        print("| revision | records/s (median) | Sender samples / 1M records | caller samples / 1M records |")
        print("|---|---:|---:|---:|")
        for rev in revs:
            print(
                f"| {rev} | {statistics.median(rates[rev]):,.0f} | {threads[rev]['sender'] / million:,.0f} | "
                f"{threads[rev]['caller'] / million:,.0f} |"
            )
        names: Counter[str] = Counter()
        for rev in revs:
            total = sum(sender[rev].values()) or 1
            for name, count in sender[rev].items():
                names[name] += count / total
        print("\nSender thread, self samples per function per 1M records (and % of that revision's Sender samples)")
        print("| function | " + " | ".join(revs) + " |")
        print("|---|" + "---:|" * len(revs))
        for name, _share in names.most_common(args.top):
            cells = []
            for rev in revs:
                total = sum(sender[rev].values()) or 1
                cells.append(f"{sender[rev][name] / million:,.1f} ({100 * sender[rev][name] / total:.1f}%)")
            print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
