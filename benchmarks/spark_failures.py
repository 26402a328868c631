"""Duplicates under failure, both delivery guarantees: what a read_committed consumer sees after each fault.

Runs the exactly-once suite's jobs (``tests/support/spark_eos_job.py``, each in a
process of its own, against one Tansu started here) once per guarantee and reads
each topic back raw, deciding visibility from the COMMIT/ABORT markers
(``tests/support/txn_reader.py``): records of committed transactions and records
written outside any transaction are visible, aborted and still-open ones are not.
Printed per fault and guarantee: rows visible, duplicates among them, a gap (a row
missing), aborted and open records.

Faults: ``retry`` (attempt 0 of a task fails after sending, Spark retries it;
``local[2,2]``), ``speculate`` (a standalone master and two workers, speculation on,
attempt 0 stalls after sending and a copy wins), ``stream-kill`` (the streaming
driver SIGKILLed three times at random points, restarted from the checkpoint),
``stream-crash`` (the streaming driver killed after its tasks wrote, before the
commit, then restarted), ``batch-rerun`` (a batch driver killed before its commit,
then the same job run again).

    .venv/bin/python benchmarks/spark_failures.py                    # every fault, both guarantees (~10 min)
    .venv/bin/python benchmarks/spark_failures.py --faults retry,speculate
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.integration.spark import test_spark_exactly_once as eos  # noqa: E402
from tests.support.readback import create_topic  # noqa: E402
from tests.support.txn_reader import read_topic_transactional  # noqa: E402

from kproducer.embedded_broker import start_embedded_broker  # noqa: E402

FAULTS = ["retry", "speculate", "stream-kill", "stream-crash", "batch-rerun"]
GUARANTEES = ["exactly_once", "at_least_once"]


def _micro_batches_done(checkpoint: Path, guarantee: str) -> int:
    """Micro-batches the query finished: the sink's commit marks (exactly-once) or Spark's commit log."""
    if guarantee == "exactly_once":
        return eos._committed_batches(checkpoint)
    d = checkpoint / "commits"
    return len([p for p in d.iterdir() if p.name.isdigit()]) if d.is_dir() else 0


def run_fault(fault: str, guarantee: str, bootstrap: str, work: Path) -> tuple[int, dict[str, object]]:
    """Run one fault under one guarantee; (rows written, what a read_committed consumer sees)."""
    topic = f"{fault}-{guarantee.replace('_', '-')}"
    create_topic(bootstrap, topic, 3)
    common = ["--bootstrap", bootstrap, "--topic", topic, "--guarantee", guarantee, "--prefix", topic]
    if fault == "retry":
        rows = 40_000
        eos.run_job(["retry", *common, "--rows", str(rows)])
    elif fault == "speculate":
        rows = 40_000
        markers = work / f"markers-{topic}"
        markers.mkdir()
        with eos.standalone_cluster(work) as master:
            eos.run_job(["speculate", *common, "--master", master, "--rows", str(rows), "--markers", str(markers),
                     "--hold", "180"])  # fmt: skip
    elif fault == "stream-kill":
        per_batch = 2_000
        checkpoint = work / f"ckpt-{topic}"
        base = ["stream", *common, "--rows", str(per_batch), "--checkpoint", str(checkpoint)]
        rng = random.Random(16)
        for _ in range(3):
            before = _micro_batches_done(checkpoint, guarantee)
            proc = eos.start_job(base, work / f"{topic}.log")
            try:
                deadline = time.monotonic() + 300
                while _micro_batches_done(checkpoint, guarantee) < before + 1 and time.monotonic() < deadline:
                    if proc.poll() is not None:
                        raise SystemExit(f"{topic}: the streaming job exited early (see {work / f'{topic}.log'})")
                    time.sleep(0.1)
                time.sleep(rng.uniform(0.0, 1.5))
            finally:
                eos.kill_job(proc)
        eos.run_job([*base, "--batches", str(_micro_batches_done(checkpoint, guarantee) + 2)])
        rows = 0  # decided by what the query produced: values 0..M-1
    elif fault == "stream-crash":
        checkpoint, marker = work / f"ckpt-{topic}", work / f"marker-{topic}"
        base = ["stream", *common, "--rows", "2000", "--checkpoint", str(checkpoint)]
        eos.kill_at_marker([*base, "--crash-point", "before_commit", "--crash-batch", "1", "--marker", str(marker)],
                       marker, work / f"{topic}.log")  # fmt: skip
        eos.run_job([*base, "--batches", "4"])
        rows = 0
    else:  # batch-rerun
        rows = 8_000
        base = ["batch", *common, "--rows", str(rows)]
        marker = work / f"marker-{topic}"
        eos.kill_at_marker([*base, "--fault", "die", "--marker", str(marker)], marker, work / f"{topic}.log")
        eos.run_job(base)
    view = read_topic_transactional(bootstrap, topic, timeout=60)
    visible = Counter(r.value for r in view.committed)
    distinct = len(visible)
    if rows == 0:  # streaming: the rows are the values 0..M-1 the committed micro-batches carried
        rows = distinct
        values = sorted(int(v or b"-1") for v in visible)
        gap = values != list(range(len(values)))
    else:
        expected = {f"row-{i}".encode() for i in range(rows)}
        gap = not expected <= set(visible)
    return rows, {
        "visible": sum(visible.values()),
        "duplicates": sum(c - 1 for c in visible.values() if c > 1),
        "gap": gap,
        "aborted": len(view.aborted),
        "open": len(view.open),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--faults", default=",".join(FAULTS), help=f"comma-separated, of {FAULTS}")
    ap.add_argument("--guarantees", default=",".join(GUARANTEES))
    args = ap.parse_args()
    faults = [f for f in args.faults.split(",") if f]
    unknown = [f for f in faults if f not in FAULTS]
    if unknown:
        raise SystemExit(f"unknown fault(s) {unknown}; choose from {FAULTS}")
    lines = [
        "| fault | guarantee | rows | visible to read_committed | duplicates | gap | aborted | open |",
        "|---|---|---:|---:|---:|---|---:|---:|",
    ]
    with start_embedded_broker() as broker, tempfile.TemporaryDirectory() as tmp:
        for fault in faults:
            for guarantee in args.guarantees.split(","):
                print(f"running {fault} ({guarantee}) ...", file=sys.stderr, flush=True)
                work = Path(tmp) / f"{fault}-{guarantee}"
                work.mkdir()
                rows, seen = run_fault(fault, guarantee, broker.bootstrap, work)
                lines.append(
                    f"| {fault} | {guarantee} | {rows:,} | {seen['visible']:,} | {seen['duplicates']:,} | "
                    f"{'yes' if seen['gap'] else 'no'} | {seen['aborted']:,} | {seen['open']:,} |"
                )
                print(lines[-1], flush=True)
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
