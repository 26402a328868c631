"""The sink on the other ways people run Spark: local-cluster, and Spark Connect (in-process and a server).

Each runs ``tests/support/spark_job.py`` in a process of its own (a process
holds one SparkContext, and the suite's shared ``local[2]`` session is one),
and what it wrote is read back with confluent-kafka: every row exactly once.

The Spark Connect server is started from the pyspark wheel itself
(``bin/spark-submit --class ...SparkConnectServer``) with a temporary
directory of its own, so nothing can pass between client and server through
a shared temporary file: ``write_to_kafka`` must get its summary through the
server.

Each deployment also writes Avro values (``value.format=avro``) through the
test Schema Registry, started on loopback in this process: the sink's options
carry its URL to the driver that plans the write (the Spark Connect server's
Python workers) and to the executors. The records are decoded with
confluent-kafka's ``AvroDeserializer`` against that registry and compared row
for row with what the job wrote, each framed with the id the registry gave.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from kproducer.embedded_broker import EmbeddedBroker
from tests.support.paths import REPO_ROOT
from tests.support.readback import create_topic, read_topic
from tests.support.schema_registry import SchemaRegistry
from tests.support.spark_job import avro_value
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


def check_avro(
    bootstrap: str, registry: SchemaRegistry, topic: str, n: int, partitions: int, *, eos: bool, stream: bool
) -> None:
    """Every row once (committed once, for an exactly-once write), its value the Avro record the job wrote.

    The subject ``{topic}-value`` has one version and every value is framed
    with its id. A batch write registers it once, on the driver that planned
    the write; a stream registers the same schema again for each micro-batch
    (PySpark's workers call ``streamWriter()`` anew to write each micro-batch and
    to commit it), which the registry answers with the same id.
    """
    records: list[Any]
    if eos:
        view = read_topic_transactional(bootstrap, topic, timeout=60)
        records = view.committed
        assert all(r.transactional for r in records), f"{topic}: records written outside a transaction"
        assert not view.aborted and not view.open, f"{topic}: {len(view.aborted)} aborted, {len(view.open)} open"
        assert any(m.commit for m in view.markers), f"{topic}: no COMMIT marker"
    else:
        records = read_topic(bootstrap, topic, n, partitions=partitions, timeout=120)
    client = SchemaRegistryClient({"url": registry.url})
    subject = f"{topic}-value"
    latest = client.get_latest_version(subject)
    assert latest.version == 1 and latest.schema_id is not None, f"{subject}: version {latest.version}"
    registrations = sum(1 for m, p in registry.requests if m == "POST" and p == f"/subjects/{subject}/versions")
    assert registrations >= 1, f"{subject}: never registered"
    if not stream:
        assert registrations == 1, f"{subject}: registered {registrations} times by one batch write"
    fields = [f["name"] for f in json.loads(str(latest.schema.schema_str))["fields"]]
    assert fields == list(avro_value(0)), fields
    framing = b"\x00" + latest.schema_id.to_bytes(4, "big")
    assert all((r.value or b"")[:5] == framing for r in records), f"{topic}: a value not framed with schema id {latest.schema_id}"
    deserialize = AvroDeserializer(client)
    ctx = SerializationContext(topic, MessageField.VALUE)
    keys = sorted(int(r.key or b"-1") for r in records)
    assert keys == list(range(n)), f"{topic}: {len(records)} records for {n} rows"
    for r in records:
        assert deserialize(r.value, ctx) == avro_value(int(r.key or b"-1")), f"{topic}: row {r.key!r}"


def check_refused(result: dict[str, Any]) -> None:
    """An ``avro-refused`` write failed on the driver, with the registry's reason naming the added field.

    That nothing of it was written (no row, no second schema version) is checked
    by :func:`check_avro` on its topic.
    """
    error = result["error"]
    assert error is not None, f"{result['topic']}: a schema the registry refuses was written"
    assert re.search(r"refused by the schema registry's compatibility rule.*'email'", error, re.S), error


@pytest.fixture
def registry() -> Iterator[SchemaRegistry]:
    with SchemaRegistry() as reg:
        yield reg


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
    connect_server: tuple[str, Path], tansu: EmbeddedBroker, registry: SchemaRegistry, tmp_path: Path
) -> None:
    url, server_log = connect_server
    prefix, n = "connect-srv", 20_000
    names = ["format", "w2k", "stream"]
    avro_names = ["avro-w2k", "avro-stream"]
    _topics(tansu.bootstrap, prefix, [f"{name}{eos}" for name in names + avro_names for eos in ("", "-eos")], 3)
    scenarios = ["format", "write_to_kafka", "stream", "avro-write_to_kafka", "avro-refused", "avro-stream"]
    results = run_job(
        ["--remote", url, "--bootstrap", tansu.bootstrap, "--prefix", prefix, "--rows", str(n),
         "--registry", registry.url, "--scenarios", ",".join(scenarios + [f"eos-{s}" for s in scenarios])],
        tmp_path,
    )  # fmt: skip
    by = {r["scenario"]: r for r in results}
    assert set(by) == set(scenarios) | {f"eos-{s}" for s in scenarios}, results
    for key in ("write_to_kafka", "eos-write_to_kafka", "avro-write_to_kafka", "eos-avro-write_to_kafka"):
        w2k = by[key]
        # The summary came back from the server although client and server share no temporary directory.
        assert w2k["available"] and w2k["records"] == n and w2k["tasks"] == 4, w2k
    for name in names:
        check_exactly_once(tansu.bootstrap, f"{prefix}-{name}", n, 3)
        # deliveryGuarantee=exactly_once through Spark Connect: the server's driver ran the commit.
        check_committed_once(tansu.bootstrap, f"{prefix}-{name}-eos", n)
    # Avro: the schema checked and registered by the server's driver, which also refused the wider one.
    for key in ("avro-refused", "eos-avro-refused"):
        check_refused(by[key])
    for name in avro_names:
        stream = name == "avro-stream"
        check_avro(tansu.bootstrap, registry, f"{prefix}-{name}", n, 3, eos=False, stream=stream)
        check_avro(tansu.bootstrap, registry, f"{prefix}-{name}-eos", n, 3, eos=True, stream=stream)
    # The sources were registered with the server's session once (register() was called twice).
    assert "replaced a previously registered data source" not in server_log.read_text(errors="replace")


@pytest.mark.timeout(900)
def test_connect_remote_local_write_to_kafka(tansu: EmbeddedBroker, registry: SchemaRegistry, tmp_path: Path) -> None:
    """``remote("local[2]")``: PySpark starts a Connect server inside the client's own JVM."""
    prefix, n = "connect-local", 10_000
    _topics(tansu.bootstrap, prefix, ["w2k", "avro-w2k"], 2)
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
            "--registry",
            registry.url,
            "--scenarios",
            "write_to_kafka,avro-write_to_kafka,avro-refused",
        ],
        tmp_path,
    )
    assert [r["scenario"] for r in results] == ["write_to_kafka", "avro-write_to_kafka", "avro-refused"], results
    assert all(r["available"] and r["records"] == n for r in results[:2]), results
    check_refused(results[2])
    check_exactly_once(tansu.bootstrap, f"{prefix}-w2k", n, 2)
    check_avro(tansu.bootstrap, registry, f"{prefix}-avro-w2k", n, 2, eos=False, stream=False)


@pytest.mark.timeout(900)
def test_local_cluster_batch_and_stream(tansu: EmbeddedBroker, registry: SchemaRegistry, tmp_path: Path) -> None:
    """``local-cluster[2,1,1024]``: two executor JVMs, each with its own Python workers; both guarantees."""
    prefix, n = "local-cluster", 20_000
    names = ["w2k", "stream", "avro-w2k", "avro-stream"]
    _topics(tansu.bootstrap, prefix, names + [f"{name}-eos" for name in names], 3)
    scenarios = ["write_to_kafka", "stream", "avro-write_to_kafka", "avro-refused", "avro-stream"]
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
            "--registry",
            registry.url,
            "--scenarios",
            ",".join(scenarios + [f"eos-{s}" for s in scenarios]),
        ],
        tmp_path,
    )
    by = {r["scenario"]: r for r in results}
    assert set(by) == set(scenarios) | {f"eos-{s}" for s in scenarios}, results
    for key in ("write_to_kafka", "eos-write_to_kafka", "avro-write_to_kafka", "eos-avro-write_to_kafka"):
        assert by[key]["available"] and by[key]["records"] == n, results
    check_exactly_once(tansu.bootstrap, f"{prefix}-w2k", n, 3)
    check_exactly_once(tansu.bootstrap, f"{prefix}-stream", n, 3)
    # Exactly-once with the tasks in two executor JVMs and the commit on the driver.
    check_committed_once(tansu.bootstrap, f"{prefix}-w2k-eos", n)
    check_committed_once(tansu.bootstrap, f"{prefix}-stream-eos", n)
    # Avro: the schema checked and registered by the driver, the rows encoded in the executors' Python workers.
    for key in ("avro-refused", "eos-avro-refused"):
        check_refused(by[key])
    for name in ("avro-w2k", "avro-stream"):
        stream = name == "avro-stream"
        check_avro(tansu.bootstrap, registry, f"{prefix}-{name}", n, 3, eos=False, stream=stream)
        check_avro(tansu.bootstrap, registry, f"{prefix}-{name}-eos", n, 3, eos=True, stream=stream)
