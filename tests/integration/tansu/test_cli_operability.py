"""The CLI explains itself: --version, help everywhere, one-line mistakes, failure reasons, exit codes."""

from __future__ import annotations

import argparse
import io
import json
import socket
import subprocess
import sys
from typing import Any

import pytest

import kproducer
from kproducer import cli, perf
from kproducer.embedded_broker import EmbeddedBroker
from kproducer.errors import NotEnoughReplicasError
from tests.support.cli import run_cli
from tests.support.clock import FakeClock
from tests.support.readback import create_topic


def _dead_bootstrap() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"127.0.0.1:{port}"


def _one_line_error(r: subprocess.CompletedProcess[str], code: int, *expected: str) -> None:
    assert r.returncode == code, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    for text in expected:
        assert text in lines[0], lines[0]


def test_version() -> None:
    r = run_cli("--version")
    assert r.returncode == 0
    assert r.stdout.startswith(f"kproducer {kproducer.__version__} (Python ")


def test_every_subcommand_and_option_has_help() -> None:
    parser, _ = cli.build_parser()
    subparsers = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(subparsers.choices) == set(cli.SUBCOMMANDS)
    for action in parser._actions:
        assert action.help, action
    for name, sub in subparsers.choices.items():
        assert sub.description, name
        for action in sub._actions:
            assert action.help and action.help != argparse.SUPPRESS, (name, action.option_strings)
        r = run_cli(name, "--help")
        assert r.returncode == 0 and "usage: kproducer " + name in r.stdout
    listed = run_cli("--help").stdout
    for name in cli.SUBCOMMANDS:
        assert name in listed


def test_produce_mistakes_are_one_line(tmp_path: Any) -> None:
    missing = str(tmp_path / "nope.txt")
    _one_line_error(
        run_cli("produce", "--bootstrap-servers", "127.0.0.1:1", "--topic", "t", "--file", missing),
        2,
        f"kproducer produce: {missing}: No such file or directory",
    )
    _one_line_error(
        run_cli("produce", "--bootstrap-servers", "127.0.0.1:1", "--topic", "t", "--header", "novalue", stdin=""),
        2,
        "--header entries must be KEY=VALUE, got 'novalue'",
    )
    _one_line_error(
        run_cli(
            "produce", "--bootstrap-servers", "127.0.0.1:1", "--topic", "t", "--producer-property", "linger.ms=soon",
            stdin="",
        ),
        2,
        "linger.ms",
    )
    _one_line_error(
        run_cli("produce", "--bootstrap-servers", "127.0.0.1:1", "--topic", "t", "--producer-property", "lingr.ms=5",
             stdin=""),
        2,
        "linger.ms",  # the close-match suggestion
    )
    _one_line_error(run_cli("perf-test", "--topic", "t", "--num-records", "0", "--bootstrap-servers", "x:1"), 2, "positive")


def test_produce_warns_as_soon_as_the_bootstrap_servers_cannot_be_reached() -> None:
    """The WARNING arrives while send() still waits for metadata (max.block.ms is a minute here)."""
    proc = subprocess.Popen(
        [
            sys.executable, "-m", "kproducer.cli", "produce", "--bootstrap-servers", _dead_bootstrap(), "--topic", "t",
            "--producer-property", "max.block.ms=60000",
        ],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdin is not None and proc.stderr is not None
        proc.stdin.write("one line\n")
        proc.stdin.flush()
        first = proc.stderr.readline()
        assert first.startswith("WARNING: bootstrap server 127.0.0.1:") and "is unreachable" in first, first
        assert proc.poll() is None  # still waiting: the warning did not wait for the timeout
    finally:
        proc.kill()
        proc.wait(30)


def test_perf_test_against_a_dead_endpoint_prints_the_reasons() -> None:
    r = run_cli(
        "perf-test", "--topic", "t", "--num-records", "2", "--bootstrap-servers", _dead_bootstrap(),
        "--producer-props", "max.block.ms=300",
    )
    assert r.returncode == 1, r.stderr
    out = r.stdout.splitlines()
    assert out[0].startswith("2 records sent, 0 delivered, 2 failed, ")
    assert "no latency (no record was delivered)" in out[0]
    assert out[1] == "Failures:"
    assert out[2].startswith("  2 records: Topic 't' not present in metadata after 300 ms (max.block.ms)")
    assert "ECONNREFUSED" in out[2]
    assert "WARNING: bootstrap server" in r.stderr  # the log says it too, as it happens


def test_perf_test_json_and_delivered_run(tansu: EmbeddedBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    r = run_cli("perf-test", "--topic", topic_name, "--num-records", "500", "--bootstrap-servers", tansu.bootstrap, "--json")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout)
    assert result["records"] == result["delivered"] == 500 and result["failed"] == 0 and result["errors"] == {}
    assert result["latency_max_ms"] >= result["latency_p50_ms"] > 0
    assert "\r" not in r.stderr  # not a terminal: no bar redrawn


class _FakeProducer:
    """Delivers even records at once and fails odd ones after a long (fake-clock) wait."""

    clock = FakeClock()  # the perf test's perf_counter, in ms (set by the test)

    def __init__(self, props: Any) -> None:
        self._pending: list[Any] = []

    def __enter__(self) -> _FakeProducer:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def send(self, topic: str, value: bytes, callback: Any = None) -> None:
        i = len(self._pending)
        self._pending.append(callback)
        if i % 2 == 0:
            callback(object(), None)

    def flush(self) -> int:
        _FakeProducer.clock.advance(120_000)  # delivery.timeout.ms passes for the failing half
        for i, cb in enumerate(self._pending):
            if i % 2:
                cb(None, NotEnoughReplicasError(topic="t", partition=i % 3))
        return 0


def test_perf_latencies_count_delivered_records_only(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = FakeClock()
    monkeypatch.setattr(_FakeProducer, "clock", clock)
    monkeypatch.setattr(perf.time, "perf_counter", lambda: clock.advance(1) / 1000)  # 1 ms a reading
    import kproducer.producer as producer_module

    monkeypatch.setattr(producer_module, "Producer", _FakeProducer)
    result = perf.run_perf_test("t", 100, 10, {}, progress=False)
    assert result.failed == 50 and result.delivered == 50
    # Delivered records took a few fake milliseconds; the failed ones' 120 s is not in the figures.
    assert result.latency_max_ms < 120_000
    assert result.errors == {
        "NOT_ENOUGH_REPLICAS [t-1] (error 19)": 17,
        "NOT_ENOUGH_REPLICAS [t-0] (error 19)": 17,
        "NOT_ENOUGH_REPLICAS [t-2] (error 19)": 16,
    }
    text = result.summary()
    assert "100 records sent, 50 delivered, 50 failed" in text
    assert "\nFailures:\n  17 records: NOT_ENOUGH_REPLICAS [t-1] (error 19)" in text


def test_perf_progress_is_plain_lines_without_a_terminal(
    tansu: EmbeddedBroker, topic_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    monkeypatch.setattr(perf, "PLAIN_PROGRESS_EVERY_S", 0.05)
    out = io.StringIO()
    result = perf.run_perf_test(topic_name, 400, 10, {"bootstrap.servers": tansu.bootstrap}, throughput=1000, out=out)
    assert result.failed == 0
    text = out.getvalue()
    assert "\r" not in text and "#" not in text
    lines = text.splitlines()
    assert lines, "no progress line in a run several progress periods long"
    assert all(" of 400 records completed (" in line for line in lines), lines


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_perf_progress_is_a_bar_on_a_terminal(
    tansu: EmbeddedBroker, topic_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    out = _Tty()
    perf.run_perf_test(topic_name, 1000, 10, {"bootstrap.servers": tansu.bootstrap}, throughput=1000, out=out)
    assert "\r[" in out.getvalue() and "rec/s" in out.getvalue()


def test_metadata_names_a_missing_topic_and_exits_1(tansu: EmbeddedBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    r = run_cli("metadata", "--bootstrap-servers", tansu.bootstrap, "--topic", topic_name, "--topic", "no-such-topic")
    assert r.returncode == 1, r.stderr
    row = next(line for line in r.stdout.splitlines() if line.strip().startswith("no-such-topic"))
    assert row.split()[-1] == "(3)" and "UNKNOWN_TOPIC_OR_PARTITION" in row
    assert r.stderr.strip() == "kproducer metadata: topic 'no-such-topic' not found: UNKNOWN_TOPIC_OR_PARTITION (3)"
    ok = run_cli("metadata", "--bootstrap-servers", tansu.bootstrap, "--topic", topic_name)
    assert ok.returncode == 0 and ok.stderr == ""


def test_metadata_dead_endpoint_is_one_line() -> None:
    r = run_cli("metadata", "--bootstrap-servers", _dead_bootstrap(), "--timeout", "0.5")
    assert r.returncode == 1
    assert "Traceback" not in r.stderr
    assert r.stderr.strip().splitlines()[-1].startswith("kproducer metadata: metadata not received within 500 ms")
