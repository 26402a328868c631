"""The sink's parts that need neither a SparkSession nor a broker: contract, conversion, commit, cache."""

from __future__ import annotations

import datetime as dt
import math
import pickle
import threading
import time
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kproducer.errors import ConfigError, KafkaError, KafkaTimeoutError
from kproducer.spark import datasource as ds
from kproducer.spark.cache import ProducerCache
from kproducer.spark.commit import DeliveryTracker, TaskCommit, WriteSummary, aggregate, metrics_delta
from kproducer.spark.contract import (
    DEFAULT_CACHE_TIMEOUT_MS,
    SinkSchema,
    SinkSchemaError,
    parse_duration_ms,
    parse_options,
    validate_schema,
)
from kproducer.spark.convert import arrow_to_columns, binary_buffers, row_to_record
from kproducer.structs import RecordMetadata

HEADERS_T = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


# ---------------------------------------------------------------- options


def test_options_split_kafka_prefix_and_defaults() -> None:
    o = parse_options({"kafka.bootstrap.servers": "h:1", "kafka.linger.ms": "5", "topic": "t"})
    assert o.producer_config_dict == {"bootstrap.servers": "h:1", "linger.ms": "5"}
    assert o.topic == "t"
    assert o.writer == "arrow"
    assert o.cache_timeout_ms == DEFAULT_CACHE_TIMEOUT_MS
    assert o.flush_timeout_s is None
    o2 = parse_options(
        {"kafka.bootstrap.servers": "h:1", "writer": "ROW", "spark.kafka.producer.cache.timeout": "90s"}
    )
    assert (o2.writer, o2.cache_timeout_ms, o2.topic) == ("row", 90_000, None)
    assert pickle.loads(pickle.dumps(o2)) == o2


def test_options_missing_bootstrap_names_the_option() -> None:
    with pytest.raises(ConfigError, match="kafka.bootstrap.servers"):
        parse_options({"topic": "t"})


def test_options_unknown_sink_option_suggests() -> None:
    with pytest.raises(ConfigError, match=r"'topc'.*did you mean 'topic'") as ei:
        parse_options({"kafka.bootstrap.servers": "h:1", "topc": "t"})
    assert "kafka." in str(ei.value)


def test_options_bad_values() -> None:
    base = {"kafka.bootstrap.servers": "h:1"}
    with pytest.raises(ConfigError, match="writer"):
        parse_options({**base, "writer": "pandas"})
    with pytest.raises(ConfigError, match="cache.timeout"):
        parse_options({**base, "producer.cache.timeout": "soon"})
    with pytest.raises(ConfigError, match="flush.timeout.ms"):
        parse_options({**base, "flush.timeout.ms": "-1"})
    with pytest.raises(ConfigError, match="topic"):
        parse_options({**base, "topic": "  "})


@pytest.mark.parametrize(
    ("text", "ms"), [("10m", 600_000), ("600s", 600_000), ("250ms", 250), ("1500", 1500), ("2h", 7_200_000)]
)
def test_duration(text: str, ms: int) -> None:
    assert parse_duration_ms(text, "x") == ms


# ---------------------------------------------------------------- schema


def test_schema_full_contract() -> None:
    schema = StructType(
        [
            StructField("Key", StringType()),
            StructField("value", BinaryType()),
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("headers", HEADERS_T),
            StructField("timestamp", TimestampType()),
            StructField("extra", LongType()),
        ]
    )
    s = validate_schema(schema, None)
    assert s == SinkSchema(
        value="value",
        value_is_string=False,
        key="Key",
        key_is_string=True,
        topic="topic",
        partition="partition",
        headers="headers",
        timestamp="timestamp",
        ignored=("extra",),
    )


@pytest.mark.parametrize(
    ("fields", "topic", "match"),
    [
        ([StructField("key", StringType())], "t", "needs a 'value' column"),
        ([StructField("value", LongType())], "t", r"'value' has type bigint; allowed: string or binary"),
        ([StructField("value", StringType()), StructField("key", IntegerType())], "t", "'key' has type int"),
        ([StructField("value", StringType())], None, "no topic"),
        (
            [StructField("value", StringType()), StructField("topic", IntegerType())],
            None,
            "'topic' has type int",
        ),
        (
            [StructField("value", StringType()), StructField("partition", LongType())],
            "t",
            "'partition' has type bigint; allowed: int",
        ),
        (
            [StructField("value", StringType()), StructField("headers", ArrayType(StringType()))],
            "t",
            r"array<struct<key:string,value:binary>>",
        ),
        (
            [StructField("value", StringType()), StructField("timestamp", LongType())],
            "t",
            "'timestamp' has type bigint; allowed: timestamp",
        ),
    ],
)
def test_schema_errors_name_the_column(fields: list[StructField], topic: str | None, match: str) -> None:
    with pytest.raises(SinkSchemaError, match=match):
        validate_schema(StructType(fields), topic)


# ---------------------------------------------------------------- conversion


def _schema(**roles: Any) -> SinkSchema:
    return SinkSchema(value="value", value_is_string=True, **roles)


def test_binary_buffers_sliced_and_nulls() -> None:
    arr = pa.array(["zero", "one", None, "", "three", "four"]).slice(1, 4)
    b = binary_buffers(arr)
    assert b.to_list() == [b"one", None, b"", b"three"]
    assert b.nbytes == len(b"one" + b"three")
    assert b.data == b"onethree"
    large = binary_buffers(pa.array([b"\x00\x01", None, b"xyz"], type=pa.large_binary()))
    assert large.to_list() == [b"\x00\x01", None, b"xyz"]
    assert binary_buffers(pa.array([], type=pa.string())).to_list() == []
    with pytest.raises(TypeError):
        binary_buffers(pa.array([1, 2]))


def test_arrow_to_columns_all_roles() -> None:
    t0 = dt.datetime(2013, 1, 1, 10, 0, 0, 123456, tzinfo=dt.UTC)
    batch = pa.record_batch(
        {
            "key": pa.array(["k1", None, "k3"]),
            "value": pa.array([b"v1", b"v2", None], type=pa.binary()),
            "topic": pa.array(["a", "b", "a"]),
            "partition": pa.array([0, None, 2], type=pa.int32()),
            "timestamp": pa.array(
                [t0, None, dt.datetime(1969, 12, 31, 23, 59, 59, 999500, tzinfo=dt.UTC)]
            ).cast(pa.timestamp("us", tz="UTC")),
            "headers": pa.array(
                [[{"key": "h", "value": b"1"}], None, []],
                type=pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])),
            ),
        }
    )
    roles = _schema(key="key", topic="topic", partition="partition", timestamp="timestamp", headers="headers")
    c = arrow_to_columns(batch, roles, None)
    assert c.num_rows == 3
    assert c.keys == [b"k1", None, b"k3"]
    assert c.values == [b"v1", b"v2", None]
    assert (c.topic, c.topics) == (None, ["a", "b", "a"])
    assert c.partitions == [0, None, 2]
    assert c.timestamps == [1357034400123, None, -1]
    assert c.headers == [[("h", b"1")], None, []]
    assert c.nbytes == 4 + 4
    # The topic option wins over the column.
    c2 = arrow_to_columns(batch, roles, "forced")
    assert (c2.topic, c2.topics) == ("forced", None)


def test_row_to_record_matches_arrow_path() -> None:
    from pyspark.sql import Row

    roles = _schema(key="key", topic="topic", partition="partition", timestamp="timestamp", headers="headers")
    ts = dt.datetime(2013, 1, 1, 10, 0, 0, 123456, tzinfo=dt.UTC)
    row = Row(key="k", value=b"v", topic="a", partition=3, timestamp=ts, headers=[Row(key="h", value=b"1")])
    assert row_to_record(row, roles, None) == ("a", b"k", b"v", 3, 1357034400123, [("h", b"1")])
    assert row_to_record(row, roles, "forced")[0] == "forced"
    naive_local = ts.astimezone().replace(tzinfo=None)
    assert row_to_record(row.asDict() | {"timestamp": naive_local}, roles, None)[4] == 1357034400123
    with pytest.raises(ValueError, match="null topic"):
        row_to_record({"value": "x", "topic": None}, _schema(topic="topic"), None)


# ---------------------------------------------------------------- commit messages


def _md(topic: str, partition: int, offset: int) -> RecordMetadata:
    return RecordMetadata(topic, partition, offset, 0)


def test_tracker_and_aggregate() -> None:
    t1 = DeliveryTracker()
    for off in (5, 3, 4):
        t1(_md("a", 0, off), None)
    t1(_md("b", 1, 10), None)
    t2 = DeliveryTracker()
    t2(_md("a", 0, 9), None)
    t2(None, KafkaTimeoutError("x"))
    assert (t2.acked, t2.failed) == (1, 1)
    assert isinstance(t2.first_error, KafkaTimeoutError)

    def commit(t: DeliveryTracker, pid: int, records: int, metrics: dict[str, float]) -> TaskCommit:
        return TaskCommit(
            pid, 0, records, records * 10, t.partitions(), metrics, 1, 99, pid == 0, 100.0 + pid, 102.0
        )

    m1 = commit(t1, 0, 4, {"record-send-total": 4.0, "batch-size-avg": 100.0, "request-latency-max": 5.0})
    m2 = commit(t2, 1, 1, {"record-send-total": 1.0, "batch-size-avg": 600.0, "request-latency-max": 9.0})
    s = aggregate([m1, pickle.loads(pickle.dumps(m2)), None], batch_id=7)
    assert (s.tasks, s.records, s.bytes, s.missing_tasks, s.batch_id) == (2, 5, 50, 1, 7)
    assert s.partitions == {"a": {0: [3, 9, 4]}, "b": {1: [10, 10, 1]}}
    assert s.topic_counts() == {"a": 4, "b": 1}
    assert s.metrics["record-send-total"] == 5.0
    assert s.metrics["batch-size-avg"] == pytest.approx((4 * 100 + 1 * 600) / 5)
    assert s.metrics["request-latency-max"] == 9.0
    assert (s.started, s.finished, s.producers_created) == (100.0, 102.0, 1)
    assert "batch 7" in s.line() and "5 records" in s.line()
    assert WriteSummary.from_json(s.to_json()) == s


def test_metrics_delta() -> None:
    d = metrics_delta({"record-send-total": 10.0, "x-avg": 1.0}, {"record-send-total": 25.0, "x-avg": 3.0})
    assert d == {"record-send-total": 15.0, "x-avg": 3.0}
    d2 = metrics_delta(
        {"byte-total[topic=a]": 1000.0},
        {
            "byte-total[topic=a]": 9000.0,
            "byte-total[topic=b]": 2000.0,
            "batch-size-avg": 1000.0,
            "r-avg": math.nan,
        },
    )
    assert d2 == {"batch-size-avg": 1000.0, "batch-estimate-total": 10.0}


# ---------------------------------------------------------------- producer cache


class FakeProducer:
    """Stands in for kproducer.producer.Producer: records sends, acknowledges them on flush."""

    def __init__(self, config: dict[str, str], fail: Exception | None = None) -> None:
        self.config = config
        self.closed = False
        self.sent: list[tuple[Any, ...]] = []
        self._pending: list[tuple[Any, ...]] = []
        self._offsets: dict[tuple[str, int], int] = {}
        self.fail = fail

    def send(self, topic: str, value: Any = None, key: Any = None, partition: Any = None, timestamp: Any = None,
             headers: Any = None, on_delivery: Any = None) -> None:  # fmt: skip
        rec = (topic, key, value, partition, timestamp, headers, on_delivery)
        self.sent.append(rec[:-1])
        self._pending.append(rec)

    def flush(self, timeout: float | None = None) -> None:
        for topic, _k, _v, partition, *_rest, cb in self._pending:
            p = partition if partition is not None else 0
            off = self._offsets.get((topic, p), 0)
            self._offsets[(topic, p)] = off + 1
            cb(None, self.fail) if self.fail else cb(_md(topic, p, off), None)
        self._pending.clear()

    def metrics(self) -> dict[str, float]:
        return {"record-send-total": float(len(self.sent))}

    def close(self, timeout: float | None = None) -> None:
        self.closed = True


class Clock:
    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        return self.now


def test_cache_reuses_per_config_and_closes_idle_on_timeout() -> None:
    clock = Clock()
    made: list[FakeProducer] = []

    def factory(cfg: Any) -> FakeProducer:
        made.append(FakeProducer(dict(cfg)))
        return made[-1]

    cache = ProducerCache(factory=factory, clock_ms=clock, reaper_interval_s=None)
    cfg = {"bootstrap.servers": "h:1", "linger.ms": "5"}
    with cache.producer(cfg, 1000) as e1:
        pass
    clock.now = 999
    with cache.producer(dict(reversed(cfg.items())), 1000) as e2:
        assert e2.producer is e1.producer and e2.uses == 2
        # In use: never closed, however long it is held.
        clock.now = 10_000
        assert cache.expire() == []
    with cache.producer({**cfg, "acks": "1"}, 1000):
        pass
    assert len(made) == 2 and len(cache) == 2
    clock.now = 10_999
    assert cache.expire() == []
    clock.now = 11_000
    expired = cache.expire()
    assert {e.serial for e in expired} == {1, 2}
    assert all(p.closed for p in made) and len(cache) == 0
    with cache.producer(cfg, 1000) as e3:
        assert e3.serial == 3 and e3.uses == 1 and not e3.producer.closed


def test_cache_reaper_closes_without_further_use() -> None:
    made: list[FakeProducer] = []
    cache = ProducerCache(
        factory=lambda c: made.append(FakeProducer(dict(c))) or made[-1], reaper_interval_s=0.05
    )
    with cache.producer({"bootstrap.servers": "h:1"}, 100):
        pass
    deadline = time.monotonic() + 5
    while not made[0].closed and time.monotonic() < deadline:
        time.sleep(0.02)
    assert made[0].closed, "the reaper thread did not close the idle producer within 5s"
    assert len(cache) == 0


# ---------------------------------------------------------------- writers with a fake producer


@pytest.fixture
def fake_cache(monkeypatch: pytest.MonkeyPatch) -> ProducerCache:
    cache = ProducerCache(factory=lambda c: FakeProducer(dict(c)), reaper_interval_s=None)
    monkeypatch.setattr(ds, "_cache_provider", lambda: cache)
    return cache


def _writer_parts(topic: str | None = "t") -> tuple[Any, SinkSchema]:
    opts = parse_options({"kafka.bootstrap.servers": "h:1", **({"topic": topic} if topic else {})})
    return opts, _schema(key="key")


def test_arrow_writer_task_sends_flushes_and_reports(fake_cache: ProducerCache) -> None:
    opts, roles = _writer_parts()
    w = ds.KafkaArrowWriter(opts, roles)
    w2 = pickle.loads(pickle.dumps(w))
    batches = [
        pa.record_batch({"key": pa.array(["a", "b"]), "value": pa.array(["1", "22"])}),
        pa.record_batch({"key": pa.array([None], type=pa.string()), "value": pa.array(["333"])}),
    ]
    msg = w2.write(iter(batches))
    assert isinstance(msg, TaskCommit)
    assert (msg.records, msg.bytes, msg.producer_created) == (3, 2 + 6, True)
    assert msg.partitions == {"t": {0: [0, 2, 3]}}
    assert msg.metrics["record-send-total"] == 3.0
    producer = next(iter(fake_cache._entries.values())).producer
    assert producer.sent == [
        ("t", b"a", b"1", None, None, None),
        ("t", b"b", b"22", None, None, None),
        ("t", None, b"333", None, None, None),
    ]
    # A second task in the same worker reuses the producer.
    msg2 = w2.write(iter(batches[:1]))
    assert (msg2.producer_created, msg2.producer_serial, msg2.records) == (False, msg.producer_serial, 2)


def test_row_writer_task_matches(fake_cache: ProducerCache) -> None:
    from pyspark.sql import Row

    opts, roles = _writer_parts()
    msg = ds.KafkaRowWriter(opts, roles).write(iter([Row(key="a", value="1"), Row(key=None, value="333")]))
    assert (msg.records, msg.bytes) == (2, 5)
    producer = next(iter(fake_cache._entries.values())).producer
    assert producer.sent == [("t", b"a", b"1", None, None, None), ("t", None, b"333", None, None, None)]


def test_delivery_failure_fails_the_task_with_the_kafka_error(monkeypatch: pytest.MonkeyPatch) -> None:
    boom = KafkaTimeoutError("Expiring 1 record(s) for t-0", topic="t", partition=0)
    cache = ProducerCache(factory=lambda c: FakeProducer(dict(c), fail=boom), reaper_interval_s=None)
    monkeypatch.setattr(ds, "_cache_provider", lambda: cache)
    opts, roles = _writer_parts()
    with pytest.raises(KafkaError) as ei:
        ds.KafkaArrowWriter(opts, roles).write(iter([pa.record_batch({"key": ["a"], "value": ["1"]})]))
    assert ei.value is boom
    assert any("1 of 1 records failed" in n for n in getattr(ei.value, "__notes__", []))
    # The producer was released: it can expire.
    assert all(e.in_use == 0 for e in cache._entries.values())


def test_stream_writer_commit_writes_summary(tmp_path: Any, fake_cache: ProducerCache) -> None:
    from kproducer.spark.commit import read_summaries

    path = str(tmp_path / "s.jsonl")
    opts = parse_options({"kafka.bootstrap.servers": "h:1", "topic": "t", "summary.path": path})
    w = ds.KafkaStreamArrowWriter(opts, _schema())
    msgs = [w.write(iter([pa.record_batch({"value": ["x", "y"]})])) for _ in range(2)]
    w.commit(msgs, 4)
    w.abort([msgs[0], None], 5)
    got = read_summaries(path)
    assert [(s.batch_id, s.records, s.aborted, s.missing_tasks) for s in got] == [
        (4, 4, False, 0),
        (5, 2, True, 1),
    ]


def test_cache_is_thread_safe_under_concurrent_tasks() -> None:
    cache = ProducerCache(factory=lambda c: FakeProducer(dict(c)), reaper_interval_s=None)
    seen: list[int] = []

    def task() -> None:
        for _ in range(200):
            with cache.producer({"bootstrap.servers": "h:1"}, 60_000) as e:
                seen.append(id(e.producer))

    threads = [threading.Thread(target=task) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(seen) == 800 and len(set(seen)) == 1
