"""kproducer.tracing without a broker: when it is on, what it costs nothing, the Spark task span, the docs."""

from __future__ import annotations

import re
import subprocess
import sys
from typing import Any

import pyarrow as pa
import pytest

from kproducer.metrics import UNDEFINED_UNTIL_EVENT
from kproducer.tracing import GATE_KEY, ProducerTracing, TracedHeaders, _key_text
from tests.support.paths import REPO_ROOT as ROOT
from tests.support.tracing import global_tracer_provider, installed_tracer_provider


def test_off_by_config_or_without_the_api_and_no_span_until_a_provider_is_set() -> None:
    assert ProducerTracing.create(False, "c") is None
    tracing = ProducerTracing.create(True, "c")
    assert tracing is not None
    assert not tracing.active() and not tracing.should_trace(None)
    with installed_tracer_provider():
        assert tracing.active() and tracing.should_trace(None) and tracing.should_trace([("a", b"1")])
        # Headers the tracing injected itself: the send they reach is not traced a second time.
        assert not tracing.should_trace(TracedHeaders([("traceparent", b"x")]))
    assert not tracing.active()


def test_without_opentelemetry_installed_a_producer_has_no_tracing() -> None:
    code = (
        "import sys\n"
        "class Refuse:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'opentelemetry': raise ImportError(name)\n"
        "sys.meta_path.insert(0, Refuse())\n"
        "from kproducer.tracing import ProducerTracing\n"
        "assert ProducerTracing.create(True, 'c') is None\n"
        "from kproducer import Producer\n"
        "p = Producer({'bootstrap.servers': '127.0.0.1:1', 'max.block.ms': 100})\n"
        "assert p._tracing is None\n"
        "p.close(0)\n"
        "print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(ROOT / "src")}
    )
    assert out.stdout.strip() == "ok", out.stderr


def test_the_gate_is_the_apis_provider_variable() -> None:
    from opentelemetry import trace

    tracing = ProducerTracing.create(True, "c")
    assert tracing is not None and tracing.gate is vars(trace) and GATE_KEY in tracing.gate


@pytest.mark.parametrize(
    ("key", "text"),
    [("k", "k"), (b"k\xc3\xa9", "k\u00e9"), (b"\xff", None), (7, "7"), (2.5, None), (bytearray(b"x"), "x")],
)
def test_key_attribute_only_when_the_key_has_a_string_form(key: Any, text: str | None) -> None:
    assert _key_text(key) == text


def test_spark_task_span_only_when_the_sink_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    from kproducer.spark import datasource as ds
    from kproducer.spark.cache import ProducerCache
    from kproducer.spark.contract import parse_options
    from tests.unit.spark.test_spark_units import FakeProducer, _schema

    cache = ProducerCache(factory=lambda c: FakeProducer(dict(c)), reaper_interval_s=None)
    monkeypatch.setattr(ds, "_cache_provider", lambda: cache)
    batch = pa.record_batch({"value": pa.array(["1", "22", "333"])})
    with installed_tracer_provider() as exporter:
        default = parse_options({"kafka.bootstrap.servers": "h:1", "topic": "t"})
        ds.KafkaArrowWriter(default, _schema()).write(iter([batch]))
        assert exporter.get_finished_spans() == ()
        asked = parse_options({"kafka.bootstrap.servers": "h:1", "topic": "t", "kafka.tracing.enabled": "true"})
        msg = ds.KafkaArrowWriter(asked, _schema()).write(iter([batch]))
        (span,) = exporter.get_finished_spans()
    attrs = dict(span.attributes)
    assert span.name == "kproducer sink task"
    assert attrs["messaging.destination.name"] == "t"
    assert (attrs["kproducer.spark.records"], attrs["kproducer.spark.bytes"]) == (msg.records, msg.bytes) == (3, 6)
    assert attrs["kproducer.spark.partition_id"] == -1  # no TaskContext outside Spark


def test_operability_doc_lists_exactly_the_metrics_undefined_until_their_event() -> None:
    text = (ROOT / "docs" / "operability.md").read_text()
    section = text.split("### Metrics that have no value yet", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    documented: dict[str, str] = {}
    for row in rows:
        names, event = row.strip("|").split("|")[:2]
        for name in re.findall(r"`([a-z-]+)`", names):
            if name != "producer-topic-metrics":
                documented[name] = event.strip()
    assert documented == UNDEFINED_UNTIL_EVENT


def test_tracing_does_not_load_opentelemetry_at_import() -> None:
    out = subprocess.run(
        [sys.executable, "-c", "import sys, kproducer.tracing, kproducer; print('opentelemetry' in sys.modules)"],
        capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(ROOT / "src")},
    )
    assert out.stdout.strip() == "False", out.stderr




def test_a_provider_named_by_the_environment_turns_tracing_on() -> None:
    code = (
        "from kproducer.tracing import ProducerTracing\n"
        "t = ProducerTracing.create(True, 'c')\n"
        "print(t.active())\n"
    )
    env = {"PYTHONPATH": str(ROOT / "src"), "OTEL_PYTHON_TRACER_PROVIDER": "sdk_tracer_provider"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.stdout.strip() == "True", out.stderr


def test_an_async_send_cancelled_while_it_waits_for_memory_ends_its_span() -> None:
    import asyncio

    from opentelemetry import trace
    from opentelemetry.sdk.trace import SpanProcessor
    from opentelemetry.trace import StatusCode

    from kproducer.aio import AsyncProducer
    from kproducer.errors import ProducerClosedError

    class Started(SpanProcessor):
        def __init__(self) -> None:
            self.ids: list[int] = []

        def on_start(self, span: Any, parent_context: Any = None) -> None:
            self.ids.append(span.context.span_id)

    # No broker: the records wait for metadata, charged to buffer.memory, until it is full.
    config = {"bootstrap.servers": "127.0.0.1:1", "buffer.memory": 32768, "batch.size": 16384, "max.block.ms": 60_000}

    async def main() -> int:
        async with AsyncProducer(config) as p:
            sends = [asyncio.ensure_future(p.send("t", b"x" * 6000)) for _ in range(12)]
            for _ in range(50):
                await asyncio.sleep(0)
            waiting = [s for s in sends if not s.done()]
            for s in waiting:
                s.cancel()
            await asyncio.gather(*sends, return_exceptions=True)
            await p.close(0)
            outcomes = await asyncio.gather(*(s.result() for s in sends if not s.cancelled()), return_exceptions=True)
            assert len(outcomes) == 12 - len(waiting) and all(isinstance(o, ProducerClosedError) for o in outcomes)
        return len(waiting)

    with installed_tracer_provider() as exporter:
        started = Started()
        trace.get_tracer_provider().add_span_processor(started)  # type: ignore[attr-defined]
        waiting = asyncio.run(main())
        spans = exporter.get_finished_spans()
    assert waiting > 0, "no send waited for memory: the test proves nothing"
    assert sorted(started.ids) == sorted(s.context.span_id for s in spans) and len(spans) == 12
    assert all(s.status.status_code is StatusCode.ERROR for s in spans)
    cancelled = [s for s in spans if dict(s.attributes)["error.type"] == "asyncio.exceptions.CancelledError"]
    assert len(cancelled) == waiting


@pytest.mark.parametrize("inert", ["NoOpTracerProvider", "OTEL_SDK_DISABLED"])
def test_a_provider_that_makes_no_spans_counts_as_none(inert: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import NoOpTracerProvider

    if inert == "OTEL_SDK_DISABLED":
        monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
        provider: Any = TracerProvider()
    else:
        provider = NoOpTracerProvider()
    tracing = ProducerTracing.create(True, "c")
    assert tracing is not None
    told: list[str] = []
    tracing.when_inert(lambda: told.append("before"))
    with global_tracer_provider(provider):
        assert not tracing.should_trace(None) and not tracing.active()
        assert told == ["before"]
        tracing.when_inert(lambda: told.append("after"))  # known already: told at once
        assert told == ["before", "after"]
    # A provider that makes spans, set afterwards (only tests can set a second one), is traced.
    monkeypatch.delenv("OTEL_SDK_DISABLED", raising=False)
    with installed_tracer_provider():
        assert tracing.should_trace(None) and tracing.active()
