"""What an operator sees in the logs: unreachable brokers, failed records, close() waits, exit warnings.

The FailureLog policy is tested with a fake clock; the producer-level behaviour
against librdkafka's mock cluster (brokers taken down and back up) and Tansu, and
the exit-time warning in a child interpreter, where interpreter exit really happens.
"""

from __future__ import annotations

import io
import logging
import os
import socket
import subprocess
import sys
import textwrap

import pytest

import kproducer
from kproducer import producer as producer_module
from kproducer.embedded_broker import EmbeddedBroker
from kproducer.errors import KafkaTimeoutError, NotEnoughReplicasError
from kproducer.failure_log import FailureLog, describe_error, logging_configured, warn_data_loss
from kproducer.producer import Producer
from tests.support.latch import wait_until
from tests.support.mock_cluster import MockCluster
from tests.support.paths import REPO_ROOT
from tests.support.readback import read_topic

ROOT = str(REPO_ROOT)


def _lines(caplog: pytest.LogCaptureFixture, contains: str, level: int = logging.WARNING) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == level and contains in r.getMessage()]


def _dead_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


# ---------------------------------------------------------------------------- FailureLog policy
class _Capture:
    def __init__(self) -> None:
        self.logger = logging.Logger("failure-log-test")  # outside the hierarchy: nothing else sees it
        self.stream = io.StringIO()
        self.logger.addHandler(logging.StreamHandler(self.stream))

    def lines(self) -> list[str]:
        return [line for line in self.stream.getvalue().splitlines() if line]


def test_failure_log_first_line_at_once_then_one_summary_per_interval() -> None:
    cap = _Capture()
    flog = FailureLog(cap.logger, interval_ms=5000)
    err = NotEnoughReplicasError(topic="orders", partition=3)
    flog.failed("orders", 3, 12, err, 5, now_ms=1000)
    assert cap.lines() == ["12 records to orders-3 failed: NOT_ENOUGH_REPLICAS after 5 retries"]
    for i in range(100):  # a flood inside the interval: held back, counted
        flog.failed("orders", 3, 4, err, 5, now_ms=1001 + i)
    flog.maybe_emit(5999)
    assert len(cap.lines()) == 1
    flog.maybe_emit(6000)
    assert cap.lines()[1] == "400 records to orders-3 failed: NOT_ENOUGH_REPLICAS after 5 retries"
    flog.maybe_emit(20_000)  # nothing pending: nothing logged
    assert len(cap.lines()) == 2
    assert flog.take_failed_count() == 412
    assert flog.take_failed_count() == 0


def test_failure_log_partitions_and_kinds_are_limited_separately() -> None:
    cap = _Capture()
    flog = FailureLog(cap.logger, interval_ms=5000)
    nrep = NotEnoughReplicasError()
    timeout = KafkaTimeoutError("Expiring 3 record(s) for t-1: 120000 ms has passed")
    flog.failed("t", 0, 1, nrep, 2, now_ms=0)
    flog.failed("t", 1, 3, timeout, 0, now_ms=1)
    flog.retried("t", 0, 7, nrep, 1, now_ms=2)
    flog.failed("t", 0, 5, timeout, 4, now_ms=3)  # held: t-0 logged a failure line at 0
    flog.retried("t", 1, 3, nrep, 1, now_ms=3)
    flog.retried("t", 1, 3, nrep, 2, now_ms=4)  # held: counted, attempts 2..3 by the end
    flog.retried("t", 1, 3, nrep, 3, now_ms=4)
    assert cap.lines() == [
        "1 record to t-0 failed: NOT_ENOUGH_REPLICAS after 2 retries",
        "3 records to t-1 failed: TIMEOUT (Expiring 3 record(s) for t-1: 120000 ms has passed) after 0 retries",
        "7 record sends to t-0 retried after NOT_ENOUGH_REPLICAS (attempt 1)",
        "3 record sends to t-1 retried after NOT_ENOUGH_REPLICAS (attempt 1)",
    ]
    flog.retried("t", 0, 7, nrep, 2, now_ms=4)  # the same 7 records again: held back, counted twice in all
    flog.retried("t", 0, 2, timeout, 2, now_ms=4)
    flog.emit_all(5)
    assert cap.lines()[4:] == [
        "5 records to t-0 failed: TIMEOUT (Expiring 3 record(s) for t-1: 120000 ms has passed) after 4 retries",
        "6 record sends to t-1 retried after NOT_ENOUGH_REPLICAS (attempts 2-3)",
        "9 record sends to t-0 retried after NOT_ENOUGH_REPLICAS (7, attempt 2); "
        "TIMEOUT (Expiring 3 record(s) for t-1: 120000 ms has passed) (2, attempt 2)",
    ]


def test_describe_error_names_broker_and_client_errors() -> None:
    assert describe_error(NotEnoughReplicasError()) == "NOT_ENOUGH_REPLICAS"
    assert describe_error(ValueError("bad")) == "ValueError (bad)"


def test_lost_records_reach_stderr_only_when_logging_is_unconfigured(capsys: pytest.CaptureFixture[str]) -> None:
    bare = logging.Logger("bare")
    bare.addHandler(logging.NullHandler())
    assert not logging_configured(bare)
    warn_data_loss(bare, "5 records to t-0 failed: X")
    assert capsys.readouterr().err == "kproducer WARNING: 5 records to t-0 failed: X\n"
    cap = _Capture()
    assert logging_configured(cap.logger)
    warn_data_loss(cap.logger, "again")
    assert capsys.readouterr().err == "" and cap.lines() == ["again"]
    quiet = logging.Logger("quiet", level=logging.ERROR)  # silenced on purpose: stays silent
    warn_data_loss(quiet, "quiet")
    assert capsys.readouterr().err == ""


def test_kproducer_logger_has_a_null_handler() -> None:
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("kproducer").handlers)
    assert kproducer.__version__


# ---------------------------------------------------------------------------- producer, real brokers
def test_dead_bootstrap_warns_at_once_and_after_max_block(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="kproducer")
    port = _dead_port()
    with Producer(bootstrap_servers=f"127.0.0.1:{port}", max_block_ms=600, reconnect_backoff_max_ms=50) as p:
        fut = p.send("t", b"x")
        assert isinstance(fut.exception(10), KafkaTimeoutError)
        assert p.flush() == 0
        assert p.take_failed_count() == 1
    unreachable = _lines(caplog, "is unreachable")
    # Many attempts (50 ms backoff over 600 ms), one line.
    assert unreachable == [
        f"bootstrap server 127.0.0.1:{port} is unreachable: connect to 127.0.0.1:{port} failed: ECONNREFUSED; "
        "retrying with backoff up to 50 ms (reconnect.backoff.max.ms)"
    ]
    assert len(_lines(caplog, "no broker could be reached within 600 ms (max.block.ms)")) == 1
    failed = _lines(caplog, "1 record to t failed: TIMEOUT")
    assert len(failed) == 1 and "max.block.ms" in failed[0]


def test_broker_outage_logs_each_transition_once_and_summarises_failures(
    mock_cluster: MockCluster, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="kproducer")
    mock_cluster.create_topic("outage", 1)
    with Producer(
        {
            "bootstrap.servers": mock_cluster.bootstrap,
            "linger.ms": 0,
            "delivery.timeout.ms": 1500,
            "request.timeout.ms": 1000,
            "reconnect.backoff.ms": 20,
            "reconnect.backoff.max.ms": 50,
            "retry.backoff.ms": 20,
            "retry.backoff.max.ms": 50,
        }
    ) as p:
        p.send("outage", b"warm", partition=0).result(10)
        leader = p._metadata.cluster.leader_for(kproducer.TopicPartition("outage", 0))
        assert leader is not None
        mock_cluster.broker_set_down(leader.id)
        futs = [p.send("outage", b"x%d" % i, partition=0) for i in range(1000)]
        assert p.flush() == 0
        assert all(f.exception(0) is not None for f in futs)
        assert p.take_failed_count() == 1000
        assert p.take_failed_count() == 0
        # The records can all expire before any reconnect attempt to the down leader has failed
        # (a loaded machine, a connection setup still pending): bring the broker back only once
        # the outage has been seen, or there is nothing to log as "reachable again".
        wait_until(
            lambda: any("is unreachable" in line for line in _lines(caplog, f"broker {leader.id} (")),
            f"an 'is unreachable' WARNING for broker {leader.id}",
        )
        mock_cluster.broker_set_up(leader.id)
        p.send("outage", b"after", partition=0).result(20)
    down = _lines(caplog, f"broker {leader.id} (")
    unreachable = [line for line in down if "is unreachable" in line]
    back = [line for line in down if "is reachable again" in line]
    assert len(unreachable) == 1, down
    assert len(back) == 1, down
    failed = _lines(caplog, "records to outage-0 failed")
    assert failed, [r.getMessage() for r in caplog.records]
    # The 1,000 failures are summarised in a few lines (rate-limited), and they add up.
    assert len(failed) <= 3, failed
    assert sum(int(line.split()[0]) for line in failed) == 1000


def test_close_says_what_it_waits_for(
    mock_cluster: MockCluster, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.WARNING, logger="kproducer")
    monkeypatch.setattr(producer_module, "_CLOSE_REPORT_AFTER_S", 0.2)
    mock_cluster.create_topic("stuck", 1)
    p = Producer(bootstrap_servers=mock_cluster.bootstrap, linger_ms=0, reconnect_backoff_max_ms=50)
    p.send("stuck", b"warm", partition=0).result(10)
    leader = p._metadata.cluster.leader_for(kproducer.TopicPartition("stuck", 0))
    assert leader is not None
    mock_cluster.broker_set_down(leader.id)
    futs = [p.send("stuck", b"x", partition=0) for _ in range(50)]
    p.close(timeout=1.5)
    assert all(f.done() for f in futs)
    waits = _lines(caplog, "close() has waited")
    assert len(waits) == 1, waits
    assert "50 records in" in waits[0] and "stuck-0" in waits[0]
    assert "close(timeout=1.5) fails them after that" in waits[0]


_EXIT_SCRIPT = """
import logging, sys
{logging_setup}
from kproducer import Producer
p = Producer(bootstrap_servers=sys.argv[1], linger_ms=60_000, batch_size=1_000_000)
for i in range(2000):
    p.send(sys.argv[2], b"v%d" % i)
p.partitions_for(sys.argv[2])
# no flush(), no close(): the interpreter exits with every record still buffered
"""


def _run_exit_script(tansu: EmbeddedBroker, topic: str, logging_setup: str) -> subprocess.CompletedProcess[str]:
    script = textwrap.dedent(_EXIT_SCRIPT).format(logging_setup=logging_setup)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run(
        [sys.executable, "-c", script, tansu.bootstrap, topic], capture_output=True, text=True, timeout=120, env=env
    )


def test_exit_without_flush_warns_and_delivers(tansu: EmbeddedBroker, topic_name: str) -> None:
    res = _run_exit_script(tansu, topic_name, "logging.basicConfig(format='%(levelname)s %(name)s: %(message)s')")
    assert res.returncode == 0, res.stderr
    warnings = [line for line in res.stderr.splitlines() if line.startswith("WARNING")]
    assert warnings[0].startswith("WARNING kproducer.producer: producer producer-1: the interpreter is exiting with 2000 "
                                  "undelivered records; flushing them for up to 5 s. Call flush() or close()"), res.stderr
    assert "all 2000 records were delivered" in warnings[1], res.stderr
    assert len(read_topic(tansu.bootstrap, topic_name, 2000)) == 2000


def test_exit_warning_reaches_stderr_without_logging_configured(tansu: EmbeddedBroker, topic_name: str) -> None:
    res = _run_exit_script(tansu, topic_name, "")
    assert res.returncode == 0, res.stderr
    lines = res.stderr.splitlines()
    assert len(lines) == 1, res.stderr  # only the data-loss warning, once; the "delivered" line is logging-only
    assert lines[0].startswith("kproducer WARNING: producer producer-1: the interpreter is exiting with 2000 undelivered")
