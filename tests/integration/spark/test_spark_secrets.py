"""Secrets given as sink options appear nowhere Spark records the job: plans, event log, driver output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from kproducer.embedded_broker import EmbeddedBroker
from tests.support.paths import REPO_ROOT

SECRET = "pw-spark-secret-"


@pytest.mark.slow
def test_sink_secrets_stay_out_of_the_plan_and_event_log(tansu: EmbeddedBroker, tmp_path: Path) -> None:
    events = tmp_path / "events"
    events.mkdir()
    root = REPO_ROOT
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.spark_plan_job", tansu.bootstrap, str(events), SECRET],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "WRITE-DONE" in proc.stdout, output[-3000:]
    log = "".join(p.read_text(errors="replace") for p in events.rglob("*") if p.is_file())
    assert "AppendData kproducer" in log, "the event log must hold the write's plan (or this test checks nothing)"
    assert SECRET not in log
    assert SECRET not in output
