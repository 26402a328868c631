"""Shared fixtures: real brokers started by the tests themselves, always torn down."""

from __future__ import annotations

import itertools
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from kproducer.embedded_broker import EmbeddedBroker, start_embedded_broker

_names = itertools.count()


@pytest.fixture(scope="session")
def tansu() -> Iterator[EmbeddedBroker]:
    """One Tansu broker for the session, on a free loopback port."""
    broker = start_embedded_broker(cluster_id="kproducer-test")
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def topic_name(request: pytest.FixtureRequest) -> str:
    """A topic name unique within the session (the broker is shared)."""
    base = "".join(ch if ch.isalnum() else "-" for ch in request.node.name)[:80]
    return f"t-{base}-{next(_names)}"


from tests.support.mock_cluster import MockCluster, start_mock_cluster  # noqa: E402


@pytest.fixture
def mock_cluster() -> Iterator[MockCluster]:
    """librdkafka's mock cluster (3 brokers on loopback) in a child process; always stopped.

    Function scope on purpose, unlike ``tansu``: the tests inject faults (leaders
    moved, brokers down, RTTs, queued request errors) that would leak into the
    next test, and librdkafka has no call to clear every fault. A cluster starts
    in about 0.1 s, so a fresh one per test costs little.
    """
    cluster = start_mock_cluster(brokers=3)
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="session")
def certificates(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """This run's test certificates (CA, server, client, expired...; see tests/support/tls.py)."""
    from tests.support.tls import make_certificates

    return make_certificates(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """One local[2] session for every Spark test; workers run this interpreter (it has kproducer)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from kproducer.spark import register

    session = (
        SparkSession.builder.master("local[2]")
        .appName("kproducer-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
    register(session)
    yield session
    session.stop()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run the modules in the order of their file names, as when tests/ was one flat directory.

    Directory order would run integration/spark/ (whose session-scoped Spark keeps a JVM until the
    end) before integration/tansu/ and every unit test; by file name the Spark modules come late,
    as they always have. The sort is stable: a module's tests keep their order.
    """
    items.sort(key=lambda item: item.path.name)
