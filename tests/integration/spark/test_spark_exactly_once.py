"""Exactly-once from Spark into Kafka under failures, decided from the control markers.

Neither test broker filters aborted records for read_committed consumers, so
visibility is decided from the raw batches and their COMMIT/ABORT markers
(``tests/support/txn_reader.py``, kafka-python's record classes). Each job runs
in a process of its own (``tests/support/spark_eos_job.py``): the failure
tests need ``local[2,2]``, a standalone cluster, or SIGKILL the driver.
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
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from kproducer.embedded_broker import EmbeddedBroker
from tests.support.paths import REPO_ROOT
from tests.support.readback import create_topic
from tests.support.txn_reader import TopicView, read_topic_transactional

ROOT = REPO_ROOT


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


def kill_at_marker(args: list[str], marker: Path, log: Path) -> None:
    """Start the job, wait until it writes ``marker`` (it then waits to be killed), SIGKILL it."""
    proc = start_job(args, log)
    try:
        deadline = time.monotonic() + 300
        while not marker.exists():
            assert proc.poll() is None, log.read_text(errors="replace")[-4000:]
            assert time.monotonic() < deadline, f"the job did not reach {marker.name} within 300 s"
            time.sleep(0.1)
    finally:
        kill_job(proc)


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


@pytest.mark.timeout(900)
def test_retried_task_each_row_once_with_avro_values(tansu: EmbeddedBroker) -> None:
    """The retried-task scenario with value.format=avro: committed rows once each, decodable from the registry."""
    from confluent_kafka.schema_registry import SchemaRegistryClient
    from confluent_kafka.schema_registry.avro import AvroDeserializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    from tests.support.schema_registry import SchemaRegistry

    topic, n = "eos-retry-avro", 40_000
    create_topic(tansu.bootstrap, topic, 3)
    with SchemaRegistry() as registry:
        results = run_job(
            ["retry", "--bootstrap", tansu.bootstrap, "--topic", topic, "--rows", str(n), "--guarantee",
             "exactly_once", "--prefix", "retry-avro", "--registry", registry.url]
        )
        assert results and results[0]["records"] == n, results
        view = read_topic_transactional(tansu.bootstrap, topic, timeout=60)
        deser = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
        ctx = SerializationContext(topic, MessageField.VALUE)
        committed = Counter(deser(r.value, ctx)["label"] for r in view.committed)
    dupes = sum(c - 1 for c in committed.values() if c > 1)
    assert set(committed) == {f"row-{i}" for i in range(n)}
    assert dupes == 0, f"{dupes} rows visible twice to read_committed consumers"
    assert view.aborted, "the failed attempt's records should be in Kafka, aborted"
    assert not view.open, f"{len(view.open)} records in transactions left open"


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
    # The job stops the query once its last wanted micro-batch is committed; Spark may already
    # have started the next one, whose tasks' transactions stay open (invisible to read_committed
    # consumers) until the query's next start fences their ids. Any other open record is a leak.
    in_flight = sorted(int(r.value or b"-1") for r in view.open)
    assert all(v >= len(values) for v in in_flight) and len(in_flight) <= per_batch, (
        f"{len(in_flight)} records in transactions left open, not all of the batch after the last committed one: "
        f"{in_flight[:10]}"
    )
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
    kill_at_marker([*base, "--crash-point", point, "--crash-batch", "1", "--marker", str(marker)], marker, log)
    run_job([*base, "--batches", "4"])
    rows, aborted = _check_stream(tansu.bootstrap, topic, per_batch)
    assert rows >= 4 * per_batch
    print(f"driver killed {point}: {rows} rows committed once each, {aborted} aborted records")


def _spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


def _wait_for_log(proc: subprocess.Popen[bytes], log: Path, text: str, what: str, timeout: float = 240) -> None:
    deadline = time.monotonic() + timeout
    while text not in log.read_text(errors="replace"):
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited ({proc.returncode}):\n{log.read_text(errors='replace')[-4000:]}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} not ready within {timeout:.0f} s:\n{log.read_text(errors='replace')[-4000:]}")
        time.sleep(0.3)


@contextmanager
def standalone_cluster(work: Path) -> Iterator[str]:
    """A standalone master and two one-core workers, started from the pyspark wheel's ``bin/spark-class``.

    The workers are given different host names (``127.0.0.1`` and ``localhost``,
    both loopback): Spark never starts a speculative copy on a host where an
    attempt of the task runs, and every executor of ``local[N]`` or
    ``local-cluster`` is on one host, so speculation needs two.
    """
    from tests.support.tansu import free_port

    home = _spark_home()
    env = dict(_env(), SPARK_HOME=home, SPARK_LOCAL_IP="127.0.0.1")
    port = free_port()
    spark_class = os.path.join(home, "bin", "spark-class")
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str, argv: list[str], ready: str) -> None:
        log = work / f"{name}.log"
        with open(log, "wb") as fh:
            proc = subprocess.Popen(
                [spark_class, *argv], stdout=fh, stderr=subprocess.STDOUT, cwd=str(work), env=env,
                start_new_session=True,
            )
        procs.append(proc)
        _wait_for_log(proc, log, ready, f"the standalone {name}")

    try:
        master = f"spark://127.0.0.1:{port}"
        start("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
                         "--webui-port", "0"], "I have been elected leader")
        for i, host in enumerate(("127.0.0.1", "localhost")):
            wdir = work / f"worker-{i}"
            wdir.mkdir()
            start(f"worker-{i}", ["org.apache.spark.deploy.worker.Worker", "--host", host, "--cores", "1",
                                  "--memory", "1g", "--webui-port", "0", "--work-dir", str(wdir), master],
                  "Successfully registered with master")
        yield master
    finally:
        for proc in reversed(procs):
            kill_job(proc)


@pytest.mark.timeout(1200)
def test_speculative_copy_each_row_once(tansu: EmbeddedBroker, tmp_path: Path) -> None:
    """spark.speculation on a standalone cluster: attempt 0 of partition 0 stalls after sending, a copy wins.

    Both attempts write into transactions of their own; the driver commits the
    copy's and fences attempt 0's id, whose records end aborted.
    """
    topic, n = "eos-speculate", 40_000
    create_topic(tansu.bootstrap, topic, 3)
    markers = tmp_path / "markers"
    markers.mkdir()
    with standalone_cluster(tmp_path) as master:
        results = run_job(
            ["speculate", "--master", master, "--bootstrap", tansu.bootstrap, "--topic", topic, "--rows", str(n),
             "--prefix", "speculate", "--markers", str(markers), "--hold", "180"]
        )  # fmt: skip
    assert results and results[0]["records"] == n, results
    attempts = sorted(p.name for p in markers.iterdir())
    assert "p0-a0" in attempts, f"attempt 0 of partition 0 never reached its stall: {attempts}"
    assert "p0-a1" in attempts, f"Spark started no speculative copy of partition 0: {attempts}"
    view = read_topic_transactional(tansu.bootstrap, topic, timeout=60)
    committed, aborted = counts(view)
    dupes = sum(c - 1 for c in committed.values() if c > 1)
    print(f"speculation: committed {sum(committed.values())} for {n} rows, duplicates {dupes}, aborted {aborted}, "
          f"open {len(view.open)}")  # fmt: skip
    assert set(committed) == {f"row-{i}".encode() for i in range(n)}
    assert dupes == 0, f"{dupes} rows visible twice to read_committed consumers"
    assert aborted > 0, "the stalled attempt's records should be in Kafka, aborted"
    assert not view.open, f"{len(view.open)} records in transactions left open"


@pytest.mark.timeout(1200)
def test_expired_and_abandoned_transactions_never_visible(tansu: EmbeddedBroker, tmp_path: Path) -> None:
    """A batch whose transactions expired before the commit fails loudly; a dead driver's stay invisible.

    Tansu 0.6.0 keeps ``transaction.timeout.ms`` but never expires a
    transaction, so the expiry is done as the coordinator does it: InitProducerId
    on each task's id aborts its transaction and bumps the epoch, just before the
    driver's commit. The abandoned run's transactions stay open on Tansu (a
    Kafka coordinator aborts them at their timeout); either way they must never
    be committed, and the next run of the same application writes each row once.
    """
    topic, n = "eos-expire", 8_000
    create_topic(tansu.bootstrap, topic, 3)
    base = ["batch", "--bootstrap", tansu.bootstrap, "--topic", topic, "--rows", str(n), "--prefix", "expire-app"]
    # 1. expired before the commit: the write fails, naming the lost transactions.
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.spark_eos_job", *base, "--fault", "expire"],
        capture_output=True, text=True, timeout=600, cwd=str(ROOT), env=_env(),
    )
    failed = [line for line in proc.stdout.splitlines() if line.startswith("FAILED ")]
    assert proc.returncode == 3 and failed, f"the write did not fail ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-4000:]}"
    assert "TransactionCommitError" in failed[0] and "could not commit 4 of 4" in failed[0], failed[0][:2000]
    expired = read_topic_transactional(tansu.bootstrap, topic, timeout=60)
    assert not expired.committed and not expired.open and len(expired.aborted) == n, (
        len(expired.committed), len(expired.aborted), len(expired.open))  # fmt: skip
    # 2. the driver dies between the tasks and the commit.
    marker, log = tmp_path / "marker", tmp_path / "die.log"
    kill_at_marker([*base, "--fault", "die", "--marker", str(marker)], marker, log)
    # 3. the next run of the same application.
    run_job(base)
    view = read_topic_transactional(tansu.bootstrap, topic, timeout=60)
    committed, aborted = counts(view)
    dupes = sum(c - 1 for c in committed.values() if c > 1)
    print(f"expired + abandoned + rerun: committed {sum(committed.values())} for {n} rows, duplicates {dupes}, "
          f"aborted {aborted}, open {len(view.open)}")  # fmt: skip
    assert set(committed) == {f"row-{i}".encode() for i in range(n)} and dupes == 0
    assert aborted == n, "the expired run's records"
    assert len(view.open) == n, "the abandoned run's records: written, never committed"
    assert {r.producer_id for r in view.open}.isdisjoint(r.producer_id for r in view.committed)
