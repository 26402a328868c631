"""Exactly-once from Spark into Kafka under failures, decided from the control markers.

Neither test broker filters aborted records for read_committed consumers, so
visibility is decided from the raw batches and their COMMIT/ABORT markers
(``tests/support/txn_reader.py``, kafka-python's record classes). Each job runs
in a process of its own (``tests/support/spark_eos_job.py``): the failure
tests need ``local[2,2]`` or SIGKILL the driver.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kproducer.spark.embedded_broker import EmbeddedBroker
from tests.support.readback import create_topic
from tests.support.txn_reader import TopicView, read_topic_transactional

ROOT = Path(__file__).resolve().parent.parent


def _env() -> dict[str, str]:
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    return env


def run_job(args: list[str], timeout: float = 600) -> list[dict[str, Any]]:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.spark_eos_job", *args],
        capture_output=True, text=True, timeout=timeout, cwd=str(ROOT), env=_env(),
    )
    assert proc.returncode == 0, f"job failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return [json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]


def start_job(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as fh:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [sys.executable, "-m", "tests.support.spark_eos_job", *args],
            stdout=fh, stderr=subprocess.STDOUT, cwd=str(ROOT), env=_env(), start_new_session=True,
        )


def kill_job(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the job's whole process group: driver JVM, Python driver and Python workers."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(60)


def counts(view: TopicView) -> tuple[Counter[bytes | None], int]:
    """Committed values with their multiplicity, and how many records were aborted."""
    return Counter(r.value for r in view.committed), len(view.aborted)


@pytest.mark.timeout(900)
@pytest.mark.parametrize("guarantee", ["exactly_once", "at_least_once"])
def test_retried_task_each_row_once_under_exactly_once(tansu: EmbeddedBroker, guarantee: str) -> None:
    """attempt 0 of partition 0 fails after sending; Spark retries it (local[2,2], maxFailures=2)."""
    topic, n = f"eos-retry-{guarantee}", 40_000
    create_topic(tansu.bootstrap, topic, 3)
    results = run_job(
        ["retry", "--bootstrap", tansu.bootstrap, "--topic", topic, "--rows", str(n), "--guarantee", guarantee,
         "--prefix", f"retry-{guarantee}"]
    )
    assert results and results[0]["records"] == n, results
    view = read_topic_transactional(tansu.bootstrap, topic, timeout=60)
    committed, aborted = counts(view)
    dupes = sum(c - 1 for c in committed.values() if c > 1)
    print(f"{guarantee}: committed {sum(committed.values())} for {n} rows, duplicates {dupes}, aborted {aborted}, open {len(view.open)}")
    assert set(committed) == {f"row-{i}".encode() for i in range(n)}
    if guarantee == "exactly_once":
        assert dupes == 0, f"{dupes} rows visible twice to read_committed consumers"
        assert aborted > 0, "the failed attempt's records should be in Kafka, aborted"
        assert not view.open, f"{len(view.open)} records in transactions left open"
    else:
        # Without transactions the failed attempt's delivered records stay: this is what tells the modes apart.
        assert dupes > 0, "at-least-once with a failed attempt after sending should show duplicates"


def _committed_batches(ckpt: Path) -> int:
    d = ckpt / "kproducer-transactions"
    if not d.is_dir():
        return 0
    return len([p for p in d.iterdir() if p.name.endswith(".committed")])


def _check_stream(bootstrap: str, topic: str, per_batch: int) -> tuple[int, int]:
    view = read_topic_transactional(bootstrap, topic, timeout=60)
    committed, aborted = counts(view)
    values = sorted(int(v or b"-1") for v in committed)
    dupes = sum(c - 1 for c in committed.values() if c > 1)
    assert dupes == 0, f"{dupes} duplicates visible to read_committed consumers"
    assert values == list(range(len(values))), "a gap: committed values are not 0..M-1"
    assert len(values) % per_batch == 0 and len(values) > 0, len(values)
    assert not view.open, f"{len(view.open)} records in transactions left open"
    return len(values), aborted


@pytest.mark.timeout(1800)
def test_stream_killed_and_restarted_each_row_once(tansu: EmbeddedBroker, tmp_path: Path) -> None:
    """SIGKILL the streaming driver at random points three times, restart from the checkpoint each time."""
    topic, per_batch = "eos-stream-kill", 2_000
    create_topic(tansu.bootstrap, topic, 3)
    ckpt = tmp_path / "ckpt"
    base = ["stream", "--bootstrap", tansu.bootstrap, "--topic", topic, "--rows", str(per_batch),
            "--checkpoint", str(ckpt), "--prefix", "stream-kill"]
    rng = random.Random(16)
    log = tmp_path / "job.log"
    for _ in range(3):
        before = _committed_batches(ckpt)
        proc = start_job(base, log)
        try:
            deadline = time.monotonic() + 300
            while _committed_batches(ckpt) < before + 1:
                assert proc.poll() is None, log.read_text(errors="replace")[-4000:]
                assert time.monotonic() < deadline, "no micro-batch committed within 300 s"
                time.sleep(0.1)
            time.sleep(rng.uniform(0.0, 1.5))
        finally:
            kill_job(proc)
    final = _committed_batches(ckpt) + 2
    run_job([*base, "--batches", str(final)])
    rows, aborted = _check_stream(tansu.bootstrap, topic, per_batch)
    print(f"stream kill -9 x3: {rows} rows committed once each, {aborted} aborted records")


@pytest.mark.timeout(1200)
@pytest.mark.parametrize("point", ["before_commit", "after_prepare"])
def test_driver_killed_between_tasks_and_commit(tansu: EmbeddedBroker, tmp_path: Path, point: str) -> None:
    topic, per_batch = f"eos-crash-{point.replace('_', '-')}", 2_000
    create_topic(tansu.bootstrap, topic, 3)
    ckpt, marker = tmp_path / "ckpt", tmp_path / "marker"
    base = ["stream", "--bootstrap", tansu.bootstrap, "--topic", topic, "--rows", str(per_batch),
            "--checkpoint", str(ckpt), "--prefix", f"crash-{point}"]
    log = tmp_path / "job.log"
    proc = start_job([*base, "--crash-point", point, "--crash-batch", "1", "--marker", str(marker)], log)
    try:
        deadline = time.monotonic() + 300
        while not marker.exists():
            assert proc.poll() is None, log.read_text(errors="replace")[-4000:]
            assert time.monotonic() < deadline, "the job did not reach the crash point within 300 s"
            time.sleep(0.1)
    finally:
        kill_job(proc)
    run_job([*base, "--batches", "4"])
    rows, aborted = _check_stream(tansu.bootstrap, topic, per_batch)
    assert rows >= 4 * per_batch
    print(f"driver killed {point}: {rows} rows committed once each, {aborted} aborted records")
