"""The Arrow writer's bulk path with a real Producer on Tansu (no SparkSession: the writer is called as a task).

What goes through ``send_arrow`` and what through ``send()`` is decided per
run of rows (see ``kproducer.spark.convert``); these tests check the records
that reach the broker, read back with confluent-kafka, and the task's commit.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa
import pytest

from kproducer.embedded_broker import EmbeddedBroker, start_embedded_broker
from kproducer.errors import KafkaError
from kproducer.partitioner import partition_for_key
from kproducer.producer import Producer
from kproducer.spark import datasource as ds
from kproducer.spark.cache import ProducerCache
from kproducer.spark.commit import TaskCommit
from kproducer.spark.contract import parse_options, validate_schema
from tests.support.latch import returns
from tests.support.readback import create_topic, read_topic

H_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
T0 = 1_700_000_000_000


class CountingProducer(Producer):
    """A real Producer that counts which API the sink called."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        super().__init__(dict(config))
        self.calls = {"send": 0, "send_arrow": 0}
        self.bulk_rows = 0

    def send(self, *args: Any, **kwargs: Any) -> Any:
        self.calls["send"] += 1
        return super().send(*args, **kwargs)

    def send_arrow(self, table_or_batch: Any, *args: Any, **kwargs: Any) -> Any:
        self.calls["send_arrow"] += 1
        self.bulk_rows += table_or_batch.num_rows
        return super().send_arrow(table_or_batch, *args, **kwargs)


@pytest.fixture
def cache(monkeypatch: pytest.MonkeyPatch) -> Iterator[ProducerCache]:
    c = ProducerCache(factory=CountingProducer, reaper_interval_s=None, close_timeout_s=10)
    monkeypatch.setattr(ds, "_cache_provider", lambda: c)
    try:
        yield c
    finally:
        c.close_all()


def _writer(options: dict[str, str], schema: Any) -> ds.KafkaArrowWriter:
    from pyspark.sql.types import StructType

    opts = parse_options(options)
    assert isinstance(schema, StructType)
    return ds.KafkaArrowWriter(opts, validate_schema(schema, opts.topic))


def _spark_schema(batch: pa.RecordBatch) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(batch.schema)


def _mixed_rows(start: int, n: int) -> pa.RecordBatch:
    """Rows i = start..start+n with every column of the contract, in stretches that bulk calls can take and not."""
    idx = range(start, start + n)
    topic = ["arrow-b" if i % 5 == 0 else "arrow-a" for i in idx]
    key = [None if i % 7 == 0 else f"k{i % 50}" for i in idx]
    value = [None if i % 97 == 0 else f"v{i}".encode() for i in idx]
    # Blocks of 100 rows: even blocks name a partition, odd blocks leave it to the partitioner.
    partition = [(i // 100) % 4 if (i // 100) % 2 == 0 else None for i in idx]
    # Runs of 64 rows share a timestamp; every fourth run has none (the producer's clock).
    stamp = [None if (i // 64) % 4 == 3 else dt.datetime.fromtimestamp((T0 + i // 64) / 1000, dt.UTC) for i in idx]
    # Runs of 32 rows share headers, except rows 1000..1099, whose headers differ row by row.
    headers = [
        [{"key": "i", "value": str(i).encode()}] if 1000 <= i < 1100 else [{"key": "run", "value": str(i // 32).encode()}]
        for i in idx
    ]
    return pa.record_batch(
        {
            "key": pa.array(key, type=pa.string()),
            "value": pa.array(value, type=pa.binary()),
            "topic": pa.array(topic),
            "partition": pa.array(partition, type=pa.int32()),
            "timestamp": pa.array(stamp, type=pa.timestamp("us", tz="UTC")),
            "headers": pa.array(headers, type=H_TYPE),
        }
    )


def _expected(i: int) -> dict[str, Any]:
    b = _mixed_rows(i, 1).to_pylist()[0]
    ts = b["timestamp"]
    return {
        "topic": b["topic"],
        "key": b["key"].encode() if b["key"] is not None else None,
        "value": b["value"],
        "partition": b["partition"],
        "timestamp": None if ts is None else T0 + i // 64,
        "headers": [(h["key"], h["value"]) for h in b["headers"]],
    }


def test_every_column_of_the_contract_through_bulk_calls(tansu: EmbeddedBroker, cache: ProducerCache) -> None:
    parts = 4
    for t in ("arrow-a", "arrow-b"):
        create_topic(tansu.bootstrap, t, parts)
    n = 3000
    batches = [_mixed_rows(0, 1600), _mixed_rows(1600, n - 1600)]
    w = _writer({"kafka.bootstrap.servers": tansu.bootstrap, "kafka.linger.ms": "5"}, _spark_schema(batches[0]))
    before = int(time.time() * 1000)
    msg = w.write(iter(batches))
    after = int(time.time() * 1000)
    assert isinstance(msg, TaskCommit)
    producer = next(iter(cache._entries.values())).producer
    # Most rows went through bulk calls; the rows with per-row headers (and the short
    # stretches where runs of partition, timestamp and headers overlap) through send().
    assert producer.bulk_rows >= n // 2 and producer.calls["send"] >= 100, producer.calls
    assert producer.bulk_rows + producer.calls["send"] == n, (producer.bulk_rows, producer.calls)
    assert msg.records == n
    assert msg.bytes == sum(len(r["value"] or b"") + len(r["key"] or b"") for r in (_expected(i) for i in range(n)))

    got = {t: read_topic(tansu.bootstrap, t, cnt, partitions=parts) for t, cnt in (("arrow-a", 2400), ("arrow-b", 600))}
    assert [len(v) for v in got.values()] == [2400, 600]
    seen: dict[int, Any] = {}
    for t, recs in got.items():
        for r in recs:
            if r.value is None:  # a tombstone: counted below
                continue
            i = int(r.value[1:])
            assert i not in seen, f"row {i} read twice"
            seen[i] = r
            want = _expected(i)
            assert (r.topic, r.key, r.value, r.headers) == (t, want["key"], want["value"], want["headers"])
            if want["partition"] is not None:
                assert r.partition == want["partition"], i
            elif want["key"] is not None:
                assert r.partition == partition_for_key(want["key"], parts), i
            if want["timestamp"] is not None:
                assert r.timestamp == want["timestamp"], i
            else:
                assert before <= r.timestamp <= after, i
    tombstones = [i for i in range(n) if _expected(i)["value"] is None]
    assert sorted(seen) == sorted(set(range(n)) - set(tombstones))
    nulls = sum(1 for recs in got.values() for r in recs if r.value is None)
    assert nulls == len(tombstones)
    # Within each Kafka partition the records are in row order (as send() per row would leave them).
    for t, recs in got.items():
        for p in range(parts):
            rows = [int(r.value[1:]) for r in recs if r.partition == p and r.value is not None]
            assert rows == sorted(rows), (t, p)
    # The commit's offset ranges are what the broker holds.
    for t, recs in got.items():
        for p, (first, last, count) in msg.partitions[t].items():
            offsets = [r.offset for r in recs if r.partition == p]
            assert (min(offsets), max(offsets), len(offsets)) == (first, last, count), (t, p)


def test_plain_shape_is_one_bulk_call_per_batch(tansu: EmbeddedBroker, cache: ProducerCache, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 3)
    batches = [
        pa.record_batch({"key": pa.array([f"k{i}" for i in range(s, s + 5000)]), "value": pa.array(["x" * 100] * 5000)})
        for s in (0, 5000)
    ]
    w = _writer({"kafka.bootstrap.servers": tansu.bootstrap, "topic": topic_name}, _spark_schema(batches[0]))
    msg = w.write(iter(batches))
    producer = next(iter(cache._entries.values())).producer
    assert producer.calls == {"send": 0, "send_arrow": 2}
    assert msg.records == 10_000 and msg.bytes == 10_000 * 100 + sum(len(f"k{i}") for i in range(10_000))
    recs = read_topic(tansu.bootstrap, topic_name, 10_000, partitions=3)
    assert len(recs) == 10_000
    assert all(r.partition == partition_for_key(r.key or b"", 3) for r in recs)
    assert sum(c for _f, _l, c in msg.partitions[topic_name].values()) == 10_000
    for p, (first, last, count) in msg.partitions[topic_name].items():
        offsets = [r.offset for r in recs if r.partition == p]
        assert (min(offsets), max(offsets), len(offsets)) == (first, last, count)


def test_bulk_delivery_failure_fails_the_task_with_the_kafka_error(cache: ProducerCache) -> None:
    """Batches queued by send_arrow that expire (broker gone) fail the task with the producer's error."""
    broker = start_embedded_broker()
    try:
        topic = "arrow-expire"
        create_topic(broker.bootstrap, topic, 2)
        batch = pa.record_batch({"value": pa.array(["v"] * 2000)})
        opts = {
            "kafka.bootstrap.servers": broker.bootstrap,
            "topic": topic,
            "kafka.linger.ms": "0",
            "kafka.request.timeout.ms": "500",
            "kafka.delivery.timeout.ms": "1500",
            "kafka.max.block.ms": "1000",
            "kafka.retry.backoff.ms": "50",
            "kafka.reconnect.backoff.ms": "50",
        }
        w = _writer(opts, _spark_schema(batch))
        # A first task succeeds: the cached producer knows the topic's metadata.
        assert w.write(iter([batch])).records == 2000
        broker.stop()
        with pytest.raises(KafkaError) as ei:
            returns(lambda: w.write(iter([batch, batch])), "a write to a stopped broker")
    finally:
        broker.stop()
    notes = getattr(ei.value, "__notes__", [])
    assert any("4000 of 4000 records failed" in n for n in notes), (ei.value, notes)
    assert all(e.in_use == 0 for e in cache._entries.values())
