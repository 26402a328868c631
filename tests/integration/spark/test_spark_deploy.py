"""The sink on the other ways people run Spark: local-cluster, and Spark Connect (in-process and a server).

Each runs ``tests/support/spark_job.py`` in a process of its own (a process
holds one SparkContext, and the suite's shared ``local[2]`` session is one),
and what it wrote is read back with confluent-kafka: every row exactly once.

The Spark Connect server is started from the pyspark wheel itself
(``bin/spark-submit --class ...SparkConnectServer``) with a temporary
directory of its own, so nothing can pass between client and server through
a shared temporary file: ``write_to_kafka`` must get its summary through the
server.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kproducer.embedded_broker import EmbeddedBroker
from tests.support.paths import REPO_ROOT
from tests.support.readback import create_topic, read_topic
from tests.support.txn_reader import read_topic_transactional

ROOT = REPO_ROOT
JOB_TIMEOUT_S = 600


def _spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_job(args: list[str], tmp_path: Path) -> list[dict[str, Any]]:
    """Run the job script; its RESULT lines, or a failure that shows the job's output."""
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_HOME=_spark_home())
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.spark_job", "--workdir", str(tmp_path), *args],
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT_S,
        cwd=str(ROOT),
        env=env,
    )
    results = [json.loads(line[7:]) for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0, f"spark job failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    assert "replaced a previously registered data source" not in proc.stderr, "a source was registered twice"
    return results


def check_exactly_once(bootstrap: str, topic: str, n: int, partitions: int) -> None:
    records = read_topic(bootstrap, topic, n, partitions=partitions, timeout=120)
    keys = sorted(int(r.key or b"-1") for r in records)
    assert keys == list(range(n)), f"{topic}: {len(records)} records for {n} rows"
    assert all(r.value == b"row-" + (r.key or b"") for r in records)


def check_committed_once(bootstrap: str, topic: str, n: int) -> None:
    """An exactly-once write: visibility decided from the control markers (the test broker does not filter).

    Every row committed once, in transactions (a COMMIT marker per partition
    written), none aborted or left open.
    """
    view = read_topic_transactional(bootstrap, topic, timeout=60)
    keys = sorted(int(r.key or b"-1") for r in view.committed)
    assert keys == list(range(n)), f"{topic}: {len(view.committed)} committed records for {n} rows"
    assert all(r.transactional for r in view.committed), f"{topic}: records written outside a transaction"
    assert all(r.value == b"row-" + (r.key or b"") for r in view.committed)
    assert not view.aborted and not view.open, f"{topic}: {len(view.aborted)} aborted, {len(view.open)} open"
    assert any(m.commit for m in view.markers), f"{topic}: no COMMIT marker"


def _topics(bootstrap: str, prefix: str, names: list[str], partitions: int) -> None:
    for name in names:
        create_topic(bootstrap, f"{prefix}-{name}", partitions)


@pytest.fixture(scope="module")
def connect_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    """A Spark Connect server started from the wheel, in its own process and temporary directory."""
    port = _free_port()
    work = tmp_path_factory.mktemp("connect-server")
    server_tmp = work / "tmp"
    server_tmp.mkdir()
    log_path = work / "server.log"
    home = _spark_home()
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, SPARK_HOME=home, TMPDIR=str(server_tmp))
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                os.path.join(home, "bin", "spark-submit"),
                "--class",
                "org.apache.spark.sql.connect.service.SparkConnectServer",
                "--master",
                "local[2]",
                "--conf",
                f"spark.connect.grpc.binding.port={port}",
                "--conf",
                "spark.connect.grpc.binding.address=127.0.0.1",
                "--conf",
                "spark.driver.host=127.0.0.1",
                "--conf",
                "spark.driver.bindAddress=127.0.0.1",
                "--conf",
                "spark.ui.enabled=false",
                "--conf",
                f"spark.local.dir={server_tmp}",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=str(work),
            env=env,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 240
        while True:
            text = log_path.read_text(errors="replace")
            if "Spark Connect server started" in text:
                break
            if proc.poll() is not None:
                raise AssertionError(f"the Spark Connect server exited ({proc.returncode}):\n{text[-4000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"the Spark Connect server did not start within 240 s:\n{text[-4000:]}")
            time.sleep(0.5)
        yield f"sc://127.0.0.1:{port}", log_path
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


@pytest.mark.timeout(900)
def test_connect_server_format_write_to_kafka_and_stream(
    connect_server: tuple[str, Path], tansu: EmbeddedBroker, tmp_path: Path
) -> None:
    url, server_log = connect_server
    prefix, n = "connect-srv", 20_000
    names = ["format", "w2k", "stream"]
    _topics(tansu.bootstrap, prefix, names + [f"{name}-eos" for name in names], 3)
    scenarios = ["format", "write_to_kafka", "stream"]
    results = run_job(
        ["--remote", url, "--bootstrap", tansu.bootstrap, "--prefix", prefix, "--rows", str(n),
         "--scenarios", ",".join(scenarios + [f"eos-{s}" for s in scenarios])],
        tmp_path,
    )  # fmt: skip
    by = {r["scenario"]: r for r in results}
    assert set(by) == set(scenarios) | {f"eos-{s}" for s in scenarios}, results
    for key in ("write_to_kafka", "eos-write_to_kafka"):
        w2k = by[key]
        # The summary came back from the server although client and server share no temporary directory.
        assert w2k["available"] and w2k["records"] == n and w2k["tasks"] == 4, w2k
    for name in names:
        check_exactly_once(tansu.bootstrap, f"{prefix}-{name}", n, 3)
        # deliveryGuarantee=exactly_once through Spark Connect: the server's driver ran the commit.
        check_committed_once(tansu.bootstrap, f"{prefix}-{name}-eos", n)
    # The sources were registered with the server's session once (register() was called twice).
    assert "replaced a previously registered data source" not in server_log.read_text(errors="replace")


@pytest.mark.timeout(900)
def test_connect_remote_local_write_to_kafka(tansu: EmbeddedBroker, tmp_path: Path) -> None:
    """``remote("local[2]")``: PySpark starts a Connect server inside the client's own JVM."""
    prefix, n = "connect-local", 10_000
    _topics(tansu.bootstrap, prefix, ["w2k"], 2)
    results = run_job(
        [
            "--remote",
            "local[2]",
            "--bootstrap",
            tansu.bootstrap,
            "--prefix",
            prefix,
            "--rows",
            str(n),
            "--scenarios",
            "write_to_kafka",
        ],
        tmp_path,
    )
    assert len(results) == 1 and results[0]["available"] and results[0]["records"] == n, results
    check_exactly_once(tansu.bootstrap, f"{prefix}-w2k", n, 2)


@pytest.mark.timeout(900)
def test_local_cluster_batch_and_stream(tansu: EmbeddedBroker, tmp_path: Path) -> None:
    """``local-cluster[2,1,1024]``: two executor JVMs, each with its own Python workers; both guarantees."""
    prefix, n = "local-cluster", 20_000
    _topics(tansu.bootstrap, prefix, ["w2k", "stream", "w2k-eos", "stream-eos"], 3)
    results = run_job(
        [
            "--master",
            "local-cluster[2,1,1024]",
            "--bootstrap",
            tansu.bootstrap,
            "--prefix",
            prefix,
            "--rows",
            str(n),
            "--scenarios",
            "write_to_kafka,stream,eos-write_to_kafka,eos-stream",
        ],
        tmp_path,
    )
    by = {r["scenario"]: r for r in results}
    for key in ("write_to_kafka", "eos-write_to_kafka"):
        assert by[key]["available"] and by[key]["records"] == n, results
    check_exactly_once(tansu.bootstrap, f"{prefix}-w2k", n, 3)
    check_exactly_once(tansu.bootstrap, f"{prefix}-stream", n, 3)
    # Exactly-once with the tasks in two executor JVMs and the commit on the driver.
    check_committed_once(tansu.bootstrap, f"{prefix}-w2k-eos", n)
    check_committed_once(tansu.bootstrap, f"{prefix}-stream-eos", n)
