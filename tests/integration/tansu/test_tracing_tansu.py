"""OpenTelemetry tracing (kproducer.tracing) against Tansu, spans read from the SDK's in-memory exporter.

Each record's span is checked for its parent (the caller's current span), its
attributes (OpenTelemetry's messaging conventions for Kafka) and its end (the
acknowledged partition and offset, or the error); the ``traceparent`` header is read
back from the broker with confluent-kafka and must name the record's span.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

from kproducer import Producer
from kproducer.aio import AsyncProducer
from kproducer.errors import PartitionMutedError, RecordTooLargeError
from kproducer.structs import TopicPartition
from tests.support.readback import create_topic, read_topic
from tests.support.tansu import TansuBroker
from tests.support.tracing import (
    global_tracer_provider,
    installed_tracer_provider,
    span_of_traceparent,
    traceparent_of,
)


@pytest.fixture
def exporter() -> Iterator[Any]:
    with installed_tracer_provider() as exp:
        yield exp


def _config(tansu: TansuBroker, **extra: Any) -> dict[str, Any]:
    return {"bootstrap.servers": tansu.bootstrap, "linger.ms": 5, "client.id": "traced", **extra}


def _sends(exporter: Any) -> list[Any]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith("send")]


def _headers(record: Any) -> dict[str, bytes | None]:
    return dict(record.headers)


def test_sync_send_span_is_a_child_of_the_caller_and_its_traceparent_reaches_the_broker(
    tansu: TansuBroker, topic_name: str, exporter: Any
) -> None:
    create_topic(tansu.bootstrap, topic_name, 3)
    tracer = trace.get_tracer("test")
    with Producer(_config(tansu)) as p:
        with tracer.start_as_current_span("handler") as handler:
            futures = [p.send(topic_name, b"value-%d" % i, b"key-%d" % i, headers=[("app", b"1")]) for i in range(20)]
        tomb = p.send(topic_name, None, b"gone", partition=2)  # outside the handler: a root span
        metadata = [f.result(10) for f in futures]
        tomb_md = tomb.result(10)
    spans = _sends(exporter)
    assert len(spans) == 21
    records = read_topic(tansu.bootstrap, topic_name, 21)
    for rec in records:
        span = span_of_traceparent(spans, _headers(rec)["traceparent"])
        attrs = dict(span.attributes)
        assert span.name == f"send {topic_name}" and span.kind is SpanKind.PRODUCER
        assert attrs["messaging.system"] == "kafka"
        assert attrs["messaging.operation.name"] == "send" and attrs["messaging.operation.type"] == "send"
        assert attrs["messaging.destination.name"] == topic_name
        assert attrs["messaging.client.id"] == "traced"
        # Ended with the acknowledged partition and offset: exactly where the record is.
        assert attrs["messaging.destination.partition.id"] == str(rec.partition)
        assert attrs["messaging.kafka.offset"] == rec.offset
        assert span.status.status_code is StatusCode.UNSET
        if rec.value is None:
            assert span.parent is None and attrs["messaging.kafka.message.tombstone"] is True
            assert attrs["messaging.kafka.message.key"] == "gone"
            assert (rec.partition, rec.offset) == (tomb_md.partition, tomb_md.offset)
        else:
            assert _headers(rec)["app"] == b"1"  # the caller's headers are kept
            assert span.parent is not None and span.parent.span_id == handler.get_span_context().span_id
            assert span.context.trace_id == handler.get_span_context().trace_id
            assert attrs["messaging.kafka.message.key"] == rec.key.decode()  # type: ignore[union-attr]
            assert attrs["messaging.message.body.size"] == len(rec.value)
    assert sorted((m.partition, m.offset) for m in metadata) == sorted(
        (r.partition, r.offset) for r in records if r.value is not None
    )


def test_fifty_asyncio_tasks_each_get_their_own_parent(tansu: TansuBroker, topic_name: str, exporter: Any) -> None:
    create_topic(tansu.bootstrap, topic_name, 3)
    tracer = trace.get_tracer("test")

    async def main() -> dict[int, int]:
        parents: dict[int, int] = {}
        async with AsyncProducer(_config(tansu)) as p:

            async def task(i: int) -> None:
                with tracer.start_as_current_span(f"request-{i}") as span:
                    parents[i] = span.get_span_context().span_id
                    futs = []
                    for j in range(4):
                        futs.append(await p.send(topic_name, b"%d-%d" % (i, j), b"task-%d" % i))
                        await asyncio.sleep(0)  # let the other tasks interleave their sends
                    await asyncio.gather(*futs)

            await asyncio.gather(*(task(i) for i in range(50)))
        return parents

    parents = asyncio.run(main())
    spans = _sends(exporter)
    assert len(spans) == 200
    records = read_topic(tansu.bootstrap, topic_name, 200)
    for rec in records:
        span = span_of_traceparent(spans, _headers(rec)["traceparent"])
        i = int(rec.key.decode().split("-")[1])  # type: ignore[union-attr]
        assert span.parent is not None and span.parent.span_id == parents[i], (rec, span.parent)
        assert dict(span.attributes)["messaging.kafka.offset"] == rec.offset


def test_bulk_calls_get_one_span_each_and_rows_carry_its_context_when_asked(
    tansu: TansuBroker, topic_name: str, exporter: Any
) -> None:
    import pyarrow as pa

    create_topic(tansu.bootstrap, topic_name, 3)
    tracer = trace.get_tracer("test")
    values = [b"v%03d" % i for i in range(30)]
    keys = [b"k%d" % (i % 7) for i in range(30)]
    with Producer(_config(tansu, **{"tracing.bulk.headers": True})) as p, tracer.start_as_current_span("job") as job:
        batch_md = p.send_batch(topic_name, values, keys).result(10)
        table = pa.table({"key": keys, "value": values})
        arrow_md = p.send_arrow(table, topic_name).result(10)
    with Producer(_config(tansu)) as p:
        p.send_batch(topic_name, [b"plain"]).result(10)
    spans = _sends(exporter)
    assert len(spans) == 3  # one per call, none per row
    records = read_topic(tansu.bootstrap, topic_name, 61)
    plain = [r for r in records if r.value == b"plain"]
    assert len(plain) == 1 and "traceparent" not in _headers(plain[0])  # tracing.bulk.headers is off by default
    traced = [r for r in records if r.value != b"plain"]
    by_span: dict[int, list[Any]] = {}
    for rec in traced:
        by_span.setdefault(span_of_traceparent(spans, _headers(rec)["traceparent"]).context.span_id, []).append(rec)
    assert sorted(len(v) for v in by_span.values()) == [30, 30]
    for span_id, recs in by_span.items():
        span = next(s for s in spans if s.context.span_id == span_id)
        attrs = dict(span.attributes)
        assert span.parent is not None and span.parent.span_id == job.get_span_context().span_id
        assert attrs["messaging.batch.message_count"] == 30
        assert attrs["messaging.destination.name"] == topic_name
        assert list(attrs["kproducer.partitions"]) == sorted({r.partition for r in recs})
        assert attrs["kproducer.batch.bytes"] == sum(len(r.value) + len(r.key) for r in recs)
        assert span.status.status_code is StatusCode.UNSET
    assert {(m.partition, m.offset) for m in batch_md + arrow_md} == {(r.partition, r.offset) for r in traced}


def test_transaction_steps_have_spans_with_their_outcome(tansu: TansuBroker, topic_name: str, exporter: Any) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    tracer = trace.get_tracer("test")
    p = Producer(_config(tansu, **{"transactional.id": f"traced-{topic_name}"}))
    try:
        p.init_transactions()
        with tracer.start_as_current_span("batch-job") as job:
            with p.transaction():
                committed = p.send(topic_name, b"committed")
            p.begin_transaction()
            aborted = p.send(topic_name, b"aborted")
            aborted.exception(10)
            p.abort_transaction()
            with pytest.raises(Exception) as raised:
                p.commit_transaction()  # no transaction open: the step's span records the error
        committed.result(10)
    finally:
        p.close()
    steps = [s for s in exporter.get_finished_spans() if s.name.endswith("_transaction")]
    assert [s.name for s in steps] == [
        "begin_transaction", "commit_transaction", "begin_transaction", "abort_transaction", "commit_transaction"
    ]
    for s in steps:
        attrs = dict(s.attributes)
        assert s.parent is not None and s.parent.span_id == job.get_span_context().span_id
        assert attrs["kproducer.transactional_id"] == f"traced-{topic_name}"
        assert attrs["kproducer.producer_id"] == p.producer_id and attrs["kproducer.producer_epoch"] == p.producer_epoch
    assert [s.status.status_code for s in steps] == [StatusCode.OK] * 4 + [StatusCode.ERROR]
    error_type = dict(steps[-1].attributes)["error.type"]
    assert error_type.endswith(type(raised.value).__qualname__)
    # The records' spans belong to the same trace, children of the job.
    sends = _sends(exporter)
    assert len(sends) == 2 and all(s.parent.span_id == job.get_span_context().span_id for s in sends)  # type: ignore[union-attr]


def test_failed_sends_end_their_spans_with_the_error(tansu: TansuBroker, topic_name: str, exporter: Any) -> None:
    create_topic(tansu.bootstrap, topic_name, 3)
    config = _config(tansu, **{"max.request.size": 2000, "producer.circuit.breaker.class": "failure_rate"})
    with Producer(config) as p:
        p.partitions_for(topic_name)
        too_large = p.send(topic_name, b"x" * 5000)
        manager = p.circuit_break_manager
        assert manager is not None
        manager.mute(TopicPartition(topic_name, 1))
        muted = p.send(topic_name, b"y", partition=1)
        assert isinstance(too_large.exception(10), RecordTooLargeError)
        assert isinstance(muted.exception(10), PartitionMutedError)
        bulk = p.send_batch(topic_name, [b"a", b"b"], partition=1)
        assert all(isinstance(e, PartitionMutedError) for e in bulk.exceptions(10))
    (bulk_span,) = [s for s in _sends(exporter) if "messaging.batch.message_count" in dict(s.attributes)]
    assert bulk_span.status.status_code is StatusCode.ERROR
    assert dict(bulk_span.attributes)["kproducer.batch.failed_count"] == 2
    assert dict(bulk_span.attributes)["error.type"] == "kproducer.errors.PartitionMutedError"
    spans = [s for s in _sends(exporter) if s is not bulk_span]
    assert len(spans) == 2
    by_error = {dict(s.attributes)["error.type"]: s for s in spans}
    assert set(by_error) == {"kproducer.errors.RecordTooLargeError", "kproducer.errors.PartitionMutedError"}
    for s in spans:
        assert s.status.status_code is StatusCode.ERROR and s.status.description
        assert [e.name for e in s.events] == ["exception"]
        assert "messaging.kafka.offset" not in dict(s.attributes)
    assert dict(by_error["kproducer.errors.PartitionMutedError"].attributes)["messaging.destination.partition.id"] == "1"


def test_no_provider_or_tracing_disabled_means_no_span_no_header_and_the_lane_keeps_its_calls(
    tansu: TansuBroker, topic_name: str
) -> None:
    from kproducer.record import native

    create_topic(tansu.bootstrap, topic_name, 1)
    with Producer(_config(tansu)) as p:
        p.partitions_for(topic_name)
        p.send(topic_name, b"warm").result(10)  # the topic registered with the lane
        lane_before = getattr(p.send, "fast_calls", 0)
        for _ in range(50):
            p.send(topic_name, b"untraced")
        p.flush()
        if native.c is not None:
            # The C lane took the sends (a send that opens a new batch is Python's, with or without tracing).
            assert p.send.fast_calls - lane_before >= 25  # type: ignore[attr-defined]
        with installed_tracer_provider() as exporter:
            lane_before = getattr(p.send, "fast_calls", 0)
            p.send(topic_name, b"traced").result(10)
            assert getattr(p.send, "fast_calls", 0) == lane_before  # a traced send is Python's
            with Producer(_config(tansu, **{"tracing.enabled": False})) as off:
                off.send(topic_name, b"off").result(10)
            assert len(_sends(exporter)) == 1
    records = read_topic(tansu.bootstrap, topic_name, 53)
    with_header = [r.value for r in records if "traceparent" in _headers(r)]
    assert with_header == [b"traced"]


def test_traceparent_names_the_span_with_a_w3c_propagator(tansu: TansuBroker, topic_name: str, exporter: Any) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    with Producer(_config(tansu)) as p:
        # A traceparent the caller already put there (a record re-produced as consumed) is replaced.
        p.send(topic_name, b"v", headers={"traceparent": "00-" + "1" * 32 + "-" + "2" * 16 + "-01"}).result(10)
    (span,) = _sends(exporter)
    (rec,) = read_topic(tansu.bootstrap, topic_name, 1)
    assert [k for k, _ in rec.headers].count("traceparent") == 1
    assert _headers(rec)["traceparent"] == traceparent_of(span).encode()


def test_async_bulk_and_transaction_spans_are_children_of_the_task(
    tansu: TansuBroker, topic_name: str, exporter: Any
) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    tracer = trace.get_tracer("test")

    async def main() -> int:
        config = _config(tansu, **{"transactional.id": f"async-{topic_name}"})
        async with AsyncProducer(config) as p:
            await p.init_transactions()
            with tracer.start_as_current_span("consume-transform-produce") as job:
                async with p.transaction():
                    await (await p.send_batch(topic_name, [b"a", b"b", b"c"]))
                    await (await p.send(topic_name, b"d"))
            return job.get_span_context().span_id

    job_id = asyncio.run(main())
    spans = exporter.get_finished_spans()
    # The bulk call and the commit run off the loop, in a worker thread: still the task's children.
    by_name = {
        s.name: s
        for s in spans
        if s.name != "consume-transform-produce"
        and (s.name != f"send {topic_name}" or "messaging.batch.message_count" in dict(s.attributes))
    }
    assert {"begin_transaction", "commit_transaction", f"send {topic_name}"} <= set(by_name)
    for span in by_name.values():
        assert span.parent is not None and span.parent.span_id == job_id, span.name
    assert dict(by_name[f"send {topic_name}"].attributes)["messaging.batch.message_count"] == 3
    assert by_name["commit_transaction"].status.status_code is StatusCode.OK
    single = [s for s in spans if s.name == f"send {topic_name}" and "messaging.batch.message_count" not in dict(s.attributes)]
    assert len(single) == 1 and single[0].parent.span_id == job_id  # type: ignore[union-attr]


def test_an_async_send_that_waits_for_memory_has_one_span_ended_with_its_record(
    tansu: TansuBroker, topic_name: str, exporter: Any
) -> None:
    from opentelemetry.sdk.trace import SpanProcessor

    class Started(SpanProcessor):
        def __init__(self) -> None:
            self.ids: list[int] = []

        def on_start(self, span: Any, parent_context: Any = None) -> None:
            if span.name.startswith("send"):
                self.ids.append(span.context.span_id)

    started = Started()
    trace.get_tracer_provider().add_span_processor(started)  # type: ignore[attr-defined]
    create_topic(tansu.bootstrap, topic_name, 1)
    # Four batches of memory for 200 records of 4 KB sent at once: most sends wait for memory.
    config = _config(tansu, **{"batch.size": 16384, "buffer.memory": 65536})
    waits: list[int] = []

    async def main() -> None:
        async with AsyncProducer(config) as p:
            producer = p.producer
            count = producer.add_memory_waiter

            def counted(delta: int) -> None:
                waits.append(delta)  # +1: a send starts waiting for memory
                count(delta)

            producer.add_memory_waiter = counted  # type: ignore[method-assign]

            async def task(i: int) -> None:
                futs = [await p.send(topic_name, b"%d-%d:" % (i, j) + b"x" * 4000) for j in range(10)]
                await asyncio.gather(*futs)

            await asyncio.gather(*(task(i) for i in range(20)))

    asyncio.run(main())
    assert waits.count(1) > 10, "the sends did not wait for memory: the test proves nothing"
    spans = _sends(exporter)
    assert len(spans) == 200
    # Every span started was ended: none left behind by an attempt that waited for memory.
    assert sorted(started.ids) == sorted(s.context.span_id for s in spans)
    records = read_topic(tansu.bootstrap, topic_name, 200)
    for rec in records:
        span = span_of_traceparent(spans, _headers(rec)["traceparent"])
        assert dict(span.attributes)["messaging.kafka.offset"] == rec.offset
        assert span.status.status_code is StatusCode.UNSET


def test_a_provider_that_makes_no_spans_leaves_the_sends_to_the_lane(tansu: TansuBroker, topic_name: str) -> None:
    from opentelemetry.trace import NoOpTracerProvider

    from kproducer.record import native

    create_topic(tansu.bootstrap, topic_name, 1)
    with Producer(_config(tansu)) as p:
        p.partitions_for(topic_name)
        p.send(topic_name, b"warm").result(10)  # the topic registered with the lane
        with global_tracer_provider(NoOpTracerProvider()):
            p.send(topic_name, b"first")  # the lane declines it (a provider is set); Python finds it inert
            lane_before = getattr(p.send, "fast_calls", 0)
            for _ in range(50):
                p.send(topic_name, b"inert")
            p.send_batch(topic_name, [b"bulk"]).result(10)
            p.flush()
            if native.c is not None:
                # The lane took the sends again (one that opens a new batch is Python's either way).
                assert p.send.fast_calls - lane_before >= 25  # type: ignore[attr-defined]
    records = read_topic(tansu.bootstrap, topic_name, 53)
    assert [r for r in records if r.headers] == []
