"""The Spark sink's span per task, on Python workers whose process has a tracer provider.

The job (tests/support/spark_tracing_job.py) runs in a process of its own with
OTEL_PYTHON_TRACER_PROVIDER=sdk_tracer_provider, which the workers inherit: every
worker has an SDK provider. Read back with confluent-kafka: with
``kafka.tracing.enabled=true`` each row carries a traceparent whose trace is its task's
(the task span is the root, its several bulk calls its children), so the rows of the
4 tasks fall into 4 traces; without the option the sink does not trace at all, provider or not.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import defaultdict

from kproducer.embedded_broker import EmbeddedBroker
from tests.support.paths import REPO_ROOT
from tests.support.readback import create_topic, read_topic

ROWS = 400


def test_a_span_per_task_only_when_the_sink_asks(tansu: EmbeddedBroker, topic_name: str) -> None:
    import pyspark

    prefix = topic_name[:60]
    for suffix in ("traced", "untraced"):
        create_topic(tansu.bootstrap, f"{prefix}-{suffix}", 2)
    env = dict(
        os.environ,
        PYSPARK_PYTHON=sys.executable,
        SPARK_HOME=os.path.dirname(pyspark.__file__),
        OTEL_PYTHON_TRACER_PROVIDER="sdk_tracer_provider",
    )
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT / "src"), str(REPO_ROOT)) if p)
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.spark_tracing_job", "--bootstrap", tansu.bootstrap, "--prefix", prefix,
         "--rows", str(ROWS)],
        capture_output=True, text=True, timeout=600, cwd=str(REPO_ROOT), env=env,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-6000:]
    traced = read_topic(tansu.bootstrap, f"{prefix}-traced", ROWS)
    traces: dict[str, set[str]] = defaultdict(set)
    for rec in traced:
        value = dict(rec.headers).get("traceparent")
        assert value is not None, f"row {rec.value!r} has no traceparent"
        _version, trace_id, span_id, _flags = value.decode().split("-")
        traces[trace_id].add(span_id)
    # One trace per task (4 partitions, 4 tasks), each holding its several bulk calls' spans:
    # without the task span each bulk call would be a trace of its own.
    assert len(traces) == 4, {t: len(s) for t, s in traces.items()}
    assert all(len(spans) > 1 for spans in traces.values()), {t: len(s) for t, s in traces.items()}
    untraced = read_topic(tansu.bootstrap, f"{prefix}-untraced", ROWS)
    assert not any("traceparent" in dict(r.headers) for r in untraced)
