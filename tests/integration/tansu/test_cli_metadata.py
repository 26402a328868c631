"""`kproducer metadata` as a subprocess against Tansu."""

from __future__ import annotations

from tests.support.cli import run_cli
from tests.support.readback import create_topic
from tests.support.tansu import TansuBroker


def test_cli_metadata_table(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 3)
    r = run_cli("metadata", "--bootstrap-servers", tansu.bootstrap, "--topic", topic_name)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert any(line.split()[:3] == ["ID", "HOST", "PORT"] for line in lines)
    assert any("127.0.0.1" in line and str(tansu.port) in line for line in lines)
    rows = [line.split() for line in lines if line.strip().startswith(topic_name)]
    assert [row[1] for row in rows] == ["0", "1", "2"]
    header = next(line for line in lines if line.strip().startswith("TOPIC"))
    col = header.index("PARTITION")
    assert all(
        line.index(line.split()[1], len(topic_name) + 2) == col
        for line in lines
        if line.strip().startswith(topic_name)
    )


def test_cli_metadata_all_topics_and_bad_bootstrap(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    r = run_cli("metadata", "--bootstrap-servers", tansu.bootstrap)
    assert r.returncode == 0, r.stderr
    assert topic_name in r.stdout
    bad = run_cli("metadata", "--bootstrap-servers", "nohostport")
    assert bad.returncode == 2 and "'nohostport'" in bad.stderr  # a usage mistake: exit code 2
