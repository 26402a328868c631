"""The OpenTelemetry SDK with an in-memory span exporter as the global tracer provider, for one test.

The API lets a process set its global tracer provider once; a test that sets one would
leave every later test tracing (and the C send lane handing every call to Python). So
``installed_tracer_provider()`` puts the provider in place and, on exit, returns the API's
globals to "no provider set", as OpenTelemetry's own test utilities
(``opentelemetry.test.globals_test.reset_trace_globals``) do.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["global_tracer_provider", "installed_tracer_provider", "span_of_traceparent", "traceparent_of"]


def _reset_trace_globals() -> None:
    from opentelemetry import trace
    from opentelemetry.util._once import Once

    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None


@contextmanager
def installed_tracer_provider() -> Iterator[Any]:
    """Yield the InMemorySpanExporter of an SDK TracerProvider set as the global provider."""
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    assert trace._TRACER_PROVIDER is None, "a tracer provider was left set by an earlier test"
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        provider.shutdown()
        _reset_trace_globals()


@contextmanager
def global_tracer_provider(provider: Any) -> Iterator[Any]:
    """``provider`` as the global tracer provider for the block, then none again."""
    from opentelemetry import trace

    assert trace._TRACER_PROVIDER is None, "a tracer provider was left set by an earlier test"
    trace.set_tracer_provider(provider)
    try:
        yield provider
    finally:
        _reset_trace_globals()


def traceparent_of(span: Any) -> str:
    """The W3C traceparent header value naming ``span`` (version 00, sampled)."""
    ctx = span.get_span_context()
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def span_of_traceparent(spans: list[Any], value: bytes | None) -> Any:
    """The span whose context a record's traceparent header names (AssertionError if none)."""
    assert value is not None, "the record has no traceparent header"
    found = [s for s in spans if traceparent_of(s) == value.decode()]
    assert len(found) == 1, f"traceparent {value!r} names {len(found)} of the {len(spans)} finished spans"
    return found[0]
