"""The sink's parts that need neither a SparkSession nor a broker: contract, conversion, commit, cache."""

from __future__ import annotations

import datetime as dt
import math
import pickle
import random
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

from kproducer.accumulator.batch import BulkRange
from kproducer.accumulator.futures import ProduceRequestResult, RecordFuture
from kproducer.bulk import BulkFuture
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
from kproducer.spark.convert import (
    BulkCall,
    RecordColumns,
    arrow_to_columns,
    binary_buffers,
    binary_nbytes,
    plan_arrow_batch,
    row_to_record,
)
from kproducer.structs import RecordMetadata, TopicPartition
from tests.support.clock import FakeClock
from tests.support.latch import returns

HEADERS_T = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


# ---------------------------------------------------------------- options


def test_options_split_kafka_prefix_and_defaults() -> None:
    o = parse_options({"kafka.bootstrap.servers": "h:1", "kafka.linger.ms": "5", "topic": "t"})
    # Tracing in a sink is off unless kafka.tracing.enabled=true asks for it (a span per task).
    assert o.producer_config_dict == {"bootstrap.servers": "h:1", "linger.ms": "5", "tracing.enabled": "false"}
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
    # As in Spark's Kafka sink: the columns' bytes are written as they are.
    for key in ("key", "value"):
        with pytest.raises(ConfigError, match=rf"'kafka.{key}.serializer' is not supported"):
            parse_options({**base, f"kafka.{key}.serializer": "org.apache.kafka.common.serialization.StringSerializer"})


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


# ---------------------------------------------------------------- planning bulk calls

H_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def _flatten(plan: list[Any]) -> list[tuple[Any, ...]]:
    """The records a plan sends, in send order: (topic, key, value, partition, timestamp, headers)."""
    out: list[tuple[Any, ...]] = []
    for part in plan:
        if isinstance(part, BulkCall):
            values = part.batch.column(0).to_pylist()
            keys = part.batch.column(1).to_pylist() if part.batch.num_columns > 1 else [None] * len(values)
            for k, v in zip(keys, values, strict=True):
                out.append((part.topic, k, v, part.partition, part.timestamp, part.headers))
        else:
            topics = part.topics if part.topics is not None else [part.topic] * part.num_rows
            n = part.num_rows
            for i in range(n):
                out.append(
                    (
                        topics[i],
                        part.keys[i] if part.keys is not None else None,
                        part.values[i],
                        part.partitions[i] if part.partitions is not None else None,
                        part.timestamps[i] if part.timestamps is not None else None,
                        (part.headers[i] or None) if part.headers is not None else None,
                    )
                )
    return out


def _sticky(rng: random.Random, choices: list[Any], n: int, stay: float) -> list[Any]:
    """n values from ``choices`` that repeat the previous one with probability ``stay`` (runs)."""
    out: list[Any] = []
    for _ in range(n):
        out.append(out[-1] if out and rng.random() < stay else rng.choice(choices))
    return out


@pytest.mark.parametrize("seed", range(40))
def test_plan_sends_every_row_once_in_kafka_partition_order(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.choice([0, 1, 5, 40, 300])
    stay = rng.choice([0.0, 0.9, 0.99])
    topic_option = rng.choice([None, "forced"])
    cols: dict[str, Any] = {
        "key": pa.array(_sticky(rng, ["k1", "k2", None], n, 0.0)),
        "value": pa.array([f"v{i}".encode() for i in range(n)], type=pa.binary()),
        "topic": pa.array(_sticky(rng, ["a", "b", "c"], n, stay)),
    }
    roles: dict[str, Any] = {"key": "key", "topic": "topic"}
    if rng.random() < 0.7:
        null_share = rng.choice([0.0, 0.3, 1.0])
        cols["partition"] = pa.array(
            [None if rng.random() < null_share else p for p in _sticky(rng, [0, 1, 2], n, stay)], type=pa.int32()
        )
        roles["partition"] = "partition"
    if rng.random() < 0.5:
        ms = _sticky(rng, [1_700_000_000_000, 1_700_000_000_001, None], n, stay)
        cols["timestamp"] = pa.array(
            [None if m is None else dt.datetime.fromtimestamp(m / 1000, dt.UTC) for m in ms],
            type=pa.timestamp("us", tz="UTC"),
        )
        roles["timestamp"] = "timestamp"
    if rng.random() < 0.5:
        choices = [None, [], [{"key": "h", "value": b"1"}], [{"key": "h", "value": b"2"}, {"key": "x", "value": None}]]
        cols["headers"] = pa.array(_sticky(rng, choices, n, stay), type=H_TYPE)
        roles["headers"] = "headers"
    batch = pa.record_batch(cols)
    schema = _schema(**roles)
    plan = plan_arrow_batch(batch, schema, topic_option, min_run=8)
    got = _flatten(plan)
    want = [
        (t, k, v, p, ts, h or None)
        for t, k, v, p, ts, h in (
            row_to_record({c: batch.column(c)[i].as_py() for c in cols}, schema, topic_option) for i in range(n)
        )
    ]
    assert sorted(got, key=repr) == sorted(want, key=repr)
    # Order: two rows of one topic keep their order unless they name different partitions.
    pos = {rec[2]: i for i, rec in enumerate(got)}
    for i, a in enumerate(want):
        for b in want[i + 1 :]:
            if a[0] == b[0] and not (a[3] is not None and b[3] is not None and a[3] != b[3]):
                assert pos[a[2]] < pos[b[2]], (a, b)
    # Bulk calls carry at least min_run rows unless the batch is one run.
    bulk = [p for p in plan if isinstance(p, BulkCall)]
    assert all(c.batch.num_rows >= 8 for c in bulk) or len(plan) == 1


def test_plan_one_bulk_call_for_the_plain_shape() -> None:
    batch = pa.record_batch({"key": pa.array(["a", None, "c"]), "value": pa.array(["1", "22", None])})
    plan = plan_arrow_batch(batch, _schema(key="key"), "t")
    assert len(plan) == 1 and isinstance(plan[0], BulkCall)
    call = plan[0]
    assert (call.topic, call.partition, call.timestamp, call.headers) == ("t", None, None, None)
    # String columns are handed over as binary (a zero-copy view), nulls kept.
    assert call.batch.schema.types == [pa.binary(), pa.binary()]
    assert call.batch.column(0).to_pylist() == [b"1", b"22", None]
    assert call.batch.column(1).to_pylist() == [b"a", None, b"c"]
    assert binary_nbytes(call.batch.column(0)) == 3 and binary_nbytes(pa.array(["xy", "z"]).slice(1)) == 1


def test_plan_groups_topic_and_partition_columns_into_bulk_calls() -> None:
    n = 1000
    batch = pa.record_batch(
        {
            "value": pa.array([str(i) for i in range(n)]),
            "topic": pa.array(["a" if i % 3 else "b" for i in range(n)]),
            "partition": pa.array([i % 4 for i in range(n)], type=pa.int32()),
            "headers": pa.array([[{"key": "src", "value": b"spark"}]] * n, type=H_TYPE),
        }
    )
    plan = plan_arrow_batch(batch, _schema(topic="topic", partition="partition", headers="headers"), None)
    assert all(isinstance(p, BulkCall) for p in plan) and len(plan) == 8
    for call in plan:
        assert isinstance(call, BulkCall)
        rows = [int(v) for v in call.batch.column(0).to_pylist()]
        assert rows == sorted(rows)
        assert all(("a" if i % 3 else "b") == call.topic and i % 4 == call.partition for i in rows)
        assert call.headers == [("src", b"spark")]


def test_plan_per_row_headers_fall_back_to_send() -> None:
    batch = pa.record_batch(
        {
            "value": pa.array(["x"] * 50),
            "headers": pa.array([[{"key": "i", "value": str(i).encode()}] for i in range(50)], type=H_TYPE),
        }
    )
    plan = plan_arrow_batch(batch, _schema(headers="headers"), "t")
    assert len(plan) == 1 and isinstance(plan[0], RecordColumns)
    assert plan[0].headers == [[("i", str(i).encode())] for i in range(50)]


def test_plan_null_topic_is_an_error() -> None:
    batch = pa.record_batch({"value": pa.array(["x", "y"]), "topic": pa.array(["a", None])})
    with pytest.raises(ValueError, match="null topic"):
        plan_arrow_batch(batch, _schema(topic="topic"), None)
    assert len(plan_arrow_batch(batch, _schema(topic="topic"), "opt")) == 1


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
    assert "1 of the 2 tasks started a producer, the others reused one" in s.line()
    assert "records per topic: a=4, b=1" in s.line()
    big = WriteSummary(tasks=1, records=1_234_567, bytes=12_345_670, started=0.0, finished=1.0)
    assert "1,234,567 records, 12,345,670 bytes from 1 task in" in big.line()
    assert "the task reused a producer" in big.line()
    assert "the task started a producer" in WriteSummary(tasks=1, producers_created=1).line()
    assert "all 3 tasks reused a producer" in WriteSummary(tasks=3).line()
    assert "0 records, 0 bytes from 0 tasks" in WriteSummary().line()
    assert "no task reported" in WriteSummary().line()
    assert "each of the 3 tasks started a producer" in WriteSummary(tasks=3, producers_created=3).line()
    assert WriteSummary.from_json(s.to_json()) == s


def _done_result(topic: str, partition: int, base: int, error: BaseException | None = None) -> ProduceRequestResult:
    r = ProduceRequestResult(TopicPartition(topic, partition))
    r.set(base, -1, None if error is None else (lambda _i: error))
    r.done()
    return r


def test_tracker_folds_bulk_futures_per_range() -> None:
    """Every way a bulk call's records complete: acked ranges, acks=0, a failed batch, a split, never queued."""
    t = DeliveryTracker()
    ok = BulkFuture("a", 10)
    ok.appended(10)
    ok.range_done(BulkRange(5, 6, ok, range(0, 6), None, -1), _done_result("a", 0, 100), None)
    ok.range_done(BulkRange(0, 4, ok, range(6, 10), None, -1), _done_result("a", 1, 7), None)
    acks0 = BulkFuture("a", 3)
    acks0.appended(3)
    acks0.range_done(BulkRange(0, 3, acks0, range(3), None, -1), _done_result("a", 2, -1), None)
    boom = KafkaTimeoutError("expired", topic="a", partition=0)
    failed = BulkFuture("a", 2)
    failed.appended(2)
    failed.range_done(BulkRange(0, 2, failed, range(2), None, -1), _done_result("a", 0, -1, boom), None)
    # A split batch: the range's records moved to two new batches; their futures say where.
    split = BulkFuture("b", 2)
    split.appended(2)
    old = _done_result("b", 0, -1, KafkaTimeoutError("split"))
    moved = [RecordFuture(_done_result("b", 0, 40), 0, -1, -1, -1), RecordFuture(_done_result("b", 0, 41), 0, -1, -1, -1)]
    split.range_done(BulkRange(0, 2, split, range(2), None, -1), old, moved)
    never = BulkFuture("c", 5)
    never.fail_unappended(KafkaTimeoutError("metadata for c not available"))
    for f in (ok, acks0, failed, split, never):
        assert f.done()
        t.watch(f)
    t.settle()
    assert (t.acked, t.failed) == (6 + 4 + 3 + 2, 2 + 5)
    assert t.first_error is boom
    assert t.partitions() == {
        "a": {0: [105, 110, 6], 1: [7, 10, 4], 2: [-1, -1, 3]},
        "b": {0: [40, 41, 2]},
    }
    assert t.bulk == []


def test_tracker_settle_leaves_an_unfinished_bulk_call_uncounted() -> None:
    t = DeliveryTracker()
    pending = BulkFuture("a", 3)
    t.watch(pending)
    returns(lambda: t.settle(timeout=0.05), "settle(timeout=0.05) with a bulk call never finished")
    assert (t.acked, t.failed, t.partitions()) == (0, 0, {})


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
    """Stands in for kproducer.producer.Producer: records sends, acknowledges them on flush.

    ``send_arrow`` returns a real :class:`BulkFuture`, completed on flush the way
    the accumulator completes one (a BulkRange per batch), so the sink's
    per-range accounting is what runs.
    """

    def __init__(self, config: dict[str, str], fail: Exception | None = None) -> None:
        self.config = config
        self.closed = False
        self.sent: list[tuple[Any, ...]] = []
        self.calls = {"send": 0, "send_arrow": 0}
        self._pending: list[tuple[Any, ...]] = []
        self._offsets: dict[tuple[str, int], int] = {}
        self.fail = fail

    def send(self, topic: str, value: Any = None, key: Any = None, partition: Any = None, timestamp: Any = None,
             headers: Any = None, callback: Any = None) -> None:  # fmt: skip
        rec = (topic, key, value, partition, timestamp, headers, callback)
        self.calls["send"] += 1
        self.sent.append(rec[:-1])
        self._pending.append(rec)

    def send_arrow(self, data: Any, topic: str, *, value_column: str = "value", key_column: str | None = "key",
                   topic_column: str = "topic", partition: Any = None, timestamp: Any = None, headers: Any = None,
                   callback: Any = None, on_delivery: Any = None) -> BulkFuture:  # fmt: skip
        assert callback is None and on_delivery is None, "the sink counts bulk calls from their futures, not per-record callbacks"
        n = data.num_rows
        values = data.column(value_column).to_pylist()
        has_keys = key_column is not None and key_column in data.schema.names
        keys = data.column(key_column).to_pylist() if has_keys else [None] * n
        hdrs = list(headers) if headers else None
        self.calls["send_arrow"] += 1
        for k, v in zip(keys, values, strict=True):
            self.sent.append((topic, k, v, partition, timestamp, hdrs))
        fut = BulkFuture(topic, n)
        self._pending.append((topic, n, partition, fut))
        return fut

    def flush(self, timeout: float | None = None) -> None:
        for rec in self._pending:
            if isinstance(rec[-1], BulkFuture):
                topic, n, partition, fut = rec
                p = partition if partition is not None else 0
                off = self._offsets.get((topic, p), 0)
                self._offsets[(topic, p)] = off + n
                result = ProduceRequestResult(TopicPartition(topic, p))
                result.set(off, -1, None if self.fail is None else (lambda _i, e=self.fail: e))
                fut.appended(n)
                fut.range_done(BulkRange(0, n, fut, range(n), None, -1), result, None)
                result.done()
                continue
            topic, _k, _v, partition, *_rest, cb = rec
            p = partition if partition is not None else 0
            off = self._offsets.get((topic, p), 0)
            self._offsets[(topic, p)] = off + 1
            cb(None, self.fail) if self.fail else cb(_md(topic, p, off), None)
        self._pending.clear()

    def metrics(self) -> dict[str, float]:
        return {"record-send-total": float(len(self.sent))}

    def close(self, timeout: float | None = None) -> None:
        self.closed = True


def test_cache_reuses_per_config_and_closes_idle_on_timeout() -> None:
    clock = FakeClock()
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
    # One bulk call per Arrow batch, no per-row send().
    assert producer.calls == {"send": 0, "send_arrow": 2}
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


# ---------------------------------------------------------------- delivery guarantee options


def test_delivery_guarantee_options() -> None:
    base = {"kafka.bootstrap.servers": "h:1", "topic": "t"}
    o = parse_options(base)
    assert (o.delivery_guarantee, o.exactly_once, o.transactional_id_prefix) == ("at_least_once", False, None)
    # Spark hands option keys over lower-cased; values are matched case-insensitively.
    o = parse_options({**base, "deliveryguarantee": "EXACTLY_ONCE", "transactionalidprefix": " app-1 "})
    assert (o.delivery_guarantee, o.exactly_once, o.transactional_id_prefix) == ("exactly_once", True, "app-1")
    # A transaction must outlive a slow task: the broker's default maximum, not the producer's 60 s.
    assert o.producer_config_dict["transaction.timeout.ms"] == "900000"
    o = parse_options(
        {**base, "deliveryGuarantee": "exactly-once", "transactionalIdPrefix": "a", "kafka.transaction.timeout.ms": "120000"}
    )
    assert o.producer_config_dict["transaction.timeout.ms"] == "120000"
    assert pickle.loads(pickle.dumps(o)) == o


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"deliveryGuarantee": "at_most_once"}, r"'deliveryGuarantee' is 'at_most_once'; allowed: at_least_once, exactly_once"),
        ({"deliveryGuarantee": "exactly_once"}, r"needs the option 'transactionalIdPrefix'"),
        ({"deliveryGuarantee": "exactly_once", "transactionalIdPrefix": "  "}, r"'transactionalIdPrefix' is ''"),
        ({"deliveryGuarantee": "exactly_once", "transactionalIdPrefix": "x" * 201}, r"1 to 200 characters"),
        (
            {"deliveryGuarantee": "exactly_once", "transactionalIdPrefix": "a", "kafka.transactional.id": "t"},
            r"'kafka.transactional.id' cannot be set",
        ),
        (
            {"deliveryGuarantee": "exactly_once", "transactionalIdPrefix": "a", "kafka.enable.idempotence": "false"},
            r"'kafka.enable.idempotence' is false",
        ),
        ({"deliveryGuarantee": "exactly_once", "transactionalIdPrefix": "a", "kafka.acks": "1"}, r"'kafka.acks' is '1'"),
        ({"deliveryGuarantee": "exactly_once", "transactionalIdPrefix": "a", "transactionalIdPrefx": "b"}, r"did you mean"),
    ],
)
def test_delivery_guarantee_bad_input_names_the_option(extra: dict[str, str], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        parse_options({"kafka.bootstrap.servers": "h:1", "topic": "t", **extra})


# ---------------------------------------------------------------- the summary's road back to write_to_kafka


def test_summary_kept_on_the_driver_by_token(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from kproducer.spark import commit

    monkeypatch.setattr(commit, "summary_dir", lambda: str(tmp_path))
    token = "ab" * 16
    assert commit.take_summary(token) == []
    commit.store_summary(token, WriteSummary(records=5, tasks=1))
    lines = commit.take_summary(token)
    assert [WriteSummary.from_json(x).records for x in lines] == [5]
    # Spark may plan the fetching read twice: a second take sees the same summary.
    assert commit.take_summary(token) == lines
    for bad in ("../../etc/passwd", "AB" * 16, "ab"):
        with pytest.raises(ValueError, match="summary token"):
            commit.store_summary(bad, WriteSummary())


def test_stream_writer_commit_keeps_summary_for_the_token(
    tmp_path: Any, fake_cache: ProducerCache, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kproducer.spark import commit

    monkeypatch.setattr(commit, "summary_dir", lambda: str(tmp_path))
    token = "cd" * 16
    opts = parse_options({"kafka.bootstrap.servers": "h:1", "topic": "t", "summary.token": token})
    w = ds.KafkaArrowWriter(opts, _schema())
    w.commit([w.write(iter([pa.record_batch({"value": ["x", "y", "z"]})]))])
    reader = ds.KafkaSummarySource({"token": token}).reader(None)  # type: ignore[arg-type]
    rows = [row for part in reader.partitions() for row in reader.read(part)]
    assert [WriteSummary.from_json(r[0]).records for r in rows] == [3]


class _FakeChain:
    """Stands for df.write... and spark.read...: records the calls; ``collect`` as given."""

    def __init__(self, log: list[Any], collect: Any) -> None:
        self.log, self._collect = log, collect

    def __getattr__(self, name: str) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            self.log.append((name, args, kwargs))
            if name == "collect":
                return self._collect()
            return self

        return call


class _FakeSession:
    """A Spark Connect-like session (no JVM): registration is tracked by session id."""

    def __init__(self, collect: Any) -> None:
        import uuid

        self.session_id = uuid.uuid4().hex
        self.log: list[Any] = []
        self.read = _FakeChain(self.log, collect)
        self.conf = type("Conf", (), {"get": staticmethod(lambda key, default=None: default)})()
        self.dataSource = type("Reg", (), {"register": staticmethod(lambda src: self.log.append(("register", src)))})()


def _fake_df(session: _FakeSession) -> Any:
    return type("DF", (), {"sparkSession": session, "write": _FakeChain(session.log, lambda: None)})()


def test_write_to_kafka_never_raises_once_the_data_is_written(caplog: pytest.LogCaptureFixture) -> None:
    """A user who retries on an exception after a committed write would write everything twice."""
    from kproducer.spark import write_to_kafka

    def broken() -> Any:
        raise RuntimeError("server went away")

    session = _FakeSession(broken)
    with caplog.at_level("WARNING"):
        summary = write_to_kafka(_fake_df(session), "t", bootstrap_servers="h:1")
    assert not summary.available and "server went away" in summary.note
    assert "the write committed" in caplog.text
    assert any(entry[0] == "save" for entry in session.log), "the write itself ran"
    empty = write_to_kafka(_fake_df(_FakeSession(lambda: [])), "t", bootstrap_servers="h:1")
    assert not empty.available and "no summary" in empty.note
    assert "no summary" in empty.line()


def test_write_to_kafka_returns_the_drivers_summary_and_registers_once() -> None:
    from kproducer.spark import write_to_kafka

    stored = WriteSummary(records=7, tasks=2)
    session = _FakeSession(lambda: [(stored.to_json(),)])
    first = write_to_kafka(_fake_df(session), "t", bootstrap_servers="h:1")
    second = write_to_kafka(_fake_df(session), "t", bootstrap_servers="h:1")
    assert first.records == 7 and second.available
    # Both sources registered once for the session, not once per write.
    assert [e[1].name() for e in session.log if e[0] == "register"] == ["kproducer", "kproducer_summary"]
    # Each write has its own token, passed to the sink and to the summary read.
    saves = [e for e in session.log if e[0] == "options"]
    tokens = [e[2]["summary.token"] for e in saves]
    assert len(set(tokens)) == 2


# ---------------------------------------------------------------- exactly-once: driver side, without a broker


def test_transactional_ids_and_fencing_range(monkeypatch: pytest.MonkeyPatch) -> None:
    from kproducer import coordinator
    from kproducer.spark import exactly_once as eo

    assert eo.transactional_id("app", "b7", 3, 1) == "app-b7-3-1"
    fenced: list[str] = []
    monkeypatch.setattr(
        coordinator, "init_producer_id", lambda servers, tid, **kw: fenced.append(tid) or (1, 0)
    )
    got = eo.fence_losers({"bootstrap.servers": "h:1"}, "app", "tok", [(0, 0), (1, 2)])
    # Winner attempt k: losers are every attempt below k and the one speculative copy k + 1.
    assert got == fenced == ["app-tok-0-1", "app-tok-1-0", "app-tok-1-1", "app-tok-1-3"]


def test_commit_tries_every_transaction_and_names_the_ones_that_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    from kproducer import coordinator
    from kproducer.errors import ProducerFencedError
    from kproducer.spark import exactly_once as eo

    ended: list[tuple[str, bool]] = []

    def end(servers: str, tid: str, pid: int, epoch: int, *, commit: bool, **kw: Any) -> None:
        ended.append((tid, commit))
        if tid == "a-t-1-0":
            raise ProducerFencedError("fenced")

    monkeypatch.setattr(coordinator, "end_transaction", end)
    txns = [eo.TxnCommittable(f"a-t-{p}-0", 10 + p, 0, p, 0) for p in range(3)]
    with pytest.raises(eo.TransactionCommitError, match=r"1 of 3 .*2 committed.*task 1 attempt 0 \(a-t-1-0"):
        eo.commit_transactions({"bootstrap.servers": "h:1"}, txns)
    assert ended == [("a-t-0-0", True), ("a-t-1-0", True), ("a-t-2-0", True)]
    ended.clear()
    eo.abort_transactions({"bootstrap.servers": "h:1"}, txns)  # a fenced one is already invisible: no error
    assert ended == [(t.transactional_id, False) for t in txns]


def test_coordinator_calls_are_bounded_by_max_block_ms(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each EndTxn / InitProducerId of the driver retries for max.block.ms, as Java's commitTransaction()."""
    from kproducer import coordinator
    from kproducer.spark import exactly_once as eo

    timeouts: list[float] = []
    monkeypatch.setattr(coordinator, "end_transaction", lambda *a, timeout, **kw: timeouts.append(timeout))
    monkeypatch.setattr(
        coordinator, "init_producer_id", lambda *a, timeout, **kw: timeouts.append(timeout) or (1, 0)
    )
    txns = [eo.TxnCommittable("a-t-0-0", 10, 0, 0, 0)]
    eo.commit_transactions({"bootstrap.servers": "h:1"}, txns)
    eo.commit_transactions({"bootstrap.servers": "h:1", "max.block.ms": "8000"}, txns)
    eo.abort_transactions({"bootstrap.servers": "h:1", "max.block.ms": "8000"}, txns)
    eo.fence_losers({"bootstrap.servers": "h:1", "max.block.ms": "8000"}, "a", "t", [(0, 0)])
    assert timeouts == [60.0, 8.0, 8.0, 8.0]


def test_transaction_log_records_prepared_and_committed_batches(tmp_path: Any) -> None:
    from kproducer.spark.exactly_once import TransactionLog, TxnCommittable

    log = TransactionLog(f"file://{tmp_path}")
    t = [TxnCommittable("a-b3-0-0", 5, 1, 0, 0)]
    assert log.pending() == {} and not log.is_committed(3)
    log.prepare(3, t)
    assert log.pending() == {3: t}
    log.mark_committed(3)
    assert log.pending() == {} and log.is_committed(3)
    assert TransactionLog(str(tmp_path)).is_committed(3)
    with pytest.raises(ConfigError, match="checkpointLocation 's3://b/c'"):
        TransactionLog("s3://b/c")


def _eos_writer(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[Any]]:
    from kproducer.spark import datasource as dsm

    calls: list[Any] = []
    monkeypatch.setattr(dsm, "commit_transactions", lambda cfg, txns: calls.append(("commit", list(txns))))
    monkeypatch.setattr(dsm, "abort_transactions", lambda cfg, txns: calls.append(("abort", list(txns))))
    monkeypatch.setattr(dsm, "fence_losers", lambda cfg, prefix, scope, winners: calls.append(("fence", scope, list(winners))))
    opts = parse_options(
        {
            "kafka.bootstrap.servers": "h:1",
            "topic": "t",
            "deliveryGuarantee": "exactly_once",
            "transactionalIdPrefix": "app",
            "checkpointLocation": str(tmp_path),
        }
    )
    return dsm.KafkaStreamArrowWriter(opts, _schema()), calls


def _msg(p: int, txn: Any) -> TaskCommit:
    return TaskCommit(p, 0, 1, 1, {"t": {p: [0, 0, 1]}}, {}, 0, 0, True, 0.0, 0.0, txn=txn)


def test_stream_commit_is_idempotent_across_replays(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from kproducer.spark.exactly_once import TxnCommittable

    w, calls = _eos_writer(tmp_path, monkeypatch)
    first = [TxnCommittable(f"app-b4-{p}-0", p, 0, p, 0) for p in range(2)]
    w.commit([_msg(0, first[0]), _msg(1, first[1])], 4)
    assert calls == [("commit", first), ("fence", "b4", [(0, 0), (1, 0)])]
    calls.clear()
    # Spark replays micro-batch 4 after a restart: the rows are in Kafka once already.
    again = [TxnCommittable(f"app-b4-{p}-0", 10 + p, 1, p, 0) for p in range(2)]
    w.commit([_msg(0, again[0]), _msg(1, again[1])], 4)
    assert calls == [("abort", again), ("fence", "b4", [(0, 0), (1, 0)])]


def test_stream_restart_finishes_a_half_done_commit(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from kproducer.spark.exactly_once import TransactionLog, TxnCommittable

    w, calls = _eos_writer(tmp_path, monkeypatch)
    recorded = [TxnCommittable("app-b9-0-0", 3, 0, 0, 0)]
    TransactionLog(str(tmp_path)).prepare(9, recorded)  # the driver died after this
    w.recover()
    assert calls == [("commit", recorded)]
    assert TransactionLog(str(tmp_path)).is_committed(9)
    calls.clear()
    w.recover()
    assert calls == []


def test_exactly_once_stream_needs_a_checkpoint_location(monkeypatch: pytest.MonkeyPatch) -> None:
    opts = parse_options(
        {"kafka.bootstrap.servers": "h:1", "topic": "t", "deliveryGuarantee": "exactly_once", "transactionalIdPrefix": "a"}
    )
    with pytest.raises(ConfigError, match="needs the option 'checkpointLocation'"):
        ds.KafkaStreamArrowWriter(opts, _schema()).recover()
