"""``kproducer produce``: stdin lines into a topic, read back with confluent-kafka."""

from __future__ import annotations

import subprocess

from tests.support.cli import run_cli
from tests.support.readback import create_topic, read_topic
from tests.support.tansu import TansuBroker


def _run(args: list[str], stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    return run_cli("produce", *args, stdin=stdin, timeout=60)


def test_produce_lines_from_stdin_with_keys(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    lines = [f"k{i}:value {i}: with a colon" for i in range(50)] + ["no separator here", ""]
    proc = _run(
        [
            "--bootstrap-servers",
            tansu.bootstrap,
            "--topic",
            topic_name,
            "--key-separator",
            ":",
            "--header",
            "src=cli",
        ],
        ("\n".join(lines) + "\n").encode(),
    )
    err = proc.stderr.decode()
    assert proc.returncode == 0, err
    assert f"{len(lines)} delivered, 0 failed" in err, err
    got = read_topic(tansu.bootstrap, topic_name, len(lines))
    assert len(got) == len(lines)
    for i, r in enumerate(got[:50]):
        assert (r.key, r.value) == (f"k{i}".encode(), f"value {i}: with a colon".encode())
        assert r.headers == [("src", b"cli")]
    assert (got[50].key, got[50].value) == (None, b"no separator here")
    assert (got[51].key, got[51].value) == (None, b"")


def test_produce_reports_failures_and_exits_non_zero(tansu: TansuBroker, topic_name: str) -> None:
    proc = _run(
        [
            "--bootstrap-servers",
            tansu.bootstrap,
            "--topic",
            topic_name + "-absent",
            "--producer-property",
            "allow.auto.create.topics=false",
            "--producer-property",
            "max.block.ms=500",
        ],
        b"a\nb\n",
    )
    err = proc.stderr.decode()
    assert proc.returncode == 1, err
    assert "0 delivered, 2 failed" in err, err
    assert topic_name + "-absent" in err, err
