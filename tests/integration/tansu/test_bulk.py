"""send_batch / send_arrow: bulk records through the accumulator, verified by reading them back.

Each test checks what the broker holds (offsets, keys, values, headers,
partitions) with confluent-kafka's consumer, and that the BulkFuture's per-row
metadata points at exactly those records.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any

import pyarrow as pa
import pytest

from kproducer.accumulator.batch import ProducerBatch
from kproducer.bulk import BulkFuture
from kproducer.errors import RecordTooLargeError
from kproducer.partitioner import partition_for_key
from kproducer.producer import Producer
from kproducer.record.builder import MemoryRecordsBuilder
from kproducer.structs import RecordMetadata, TopicPartition
from tests.support.readback import create_topic, read_topic


def _check_against_broker(bootstrap: str, topic: str, md: list[RecordMetadata], keys: list[Any], values: list[Any], headers: list[tuple[str, bytes | None]] | None = None) -> dict[int, list[int]]:
    """Every row's metadata names the record the broker holds; returns rows per partition in offset order."""
    records = read_topic(bootstrap, topic, len(values))
    assert len(records) == len(values)
    at = {(r.partition, r.offset): r for r in records}
    per_partition: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for row, m in enumerate(md):
        assert m is not None and m.topic == topic
        r = at[(m.partition, m.offset)]
        assert (r.key, r.value) == (keys[row], values[row]), f"row {row}"
        assert r.headers == (headers or [])
        per_partition[m.partition].append((m.offset, row))
    # Per-partition order: offsets grow with the row number.
    out = {}
    for p, pairs in per_partition.items():
        pairs.sort()
        rows = [row for _, row in pairs]
        assert rows == sorted(rows), f"partition {p} reordered rows"
        out[p] = rows
    return out


def test_send_batch_keyless_sticky_batches(tansu: Any, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 4)
    values = [f"value-{i:05d}-".encode() * 8 for i in range(4000)]  # ~100 B each: many 16 KB batches
    delivered: list[tuple[RecordMetadata | None, BaseException | None]] = []
    with Producer(bootstrap_servers=tansu.bootstrap, linger_ms=5, batch_max_size=16384) as p:  # no KIP-782 growth
        fut = p.send_batch(topic_name, values, callback=lambda md, exc: delivered.append((md, exc)))
        assert isinstance(fut, BulkFuture)
        md = fut.result(30)
        assert fut.done() and fut.exception() is None
        batch_size_avg = p.metrics()["batch-size-avg"]
        # The per-range view agrees with the per-record one, without an object per record.
        ranges, missing, error = fut.ranges(0)
        assert missing == 0 and error is None and sum(r.record_count for r in ranges) == len(values)
        assert len(ranges) < len(values) // 50
        for r in ranges:
            assert r.errors is None
            for j, row in enumerate(r.rows):
                assert (md[row].partition, md[row].offset) == (r.topic_partition.partition, r.first_offset + j)
    rows = _check_against_broker(tansu.bootstrap, topic_name, md, [None] * len(values), values)
    assert len(delivered) == len(values) and all(exc is None for _, exc in delivered)
    # Sticky per batch: partitions change only every ~batch.size bytes, so runs of consecutive rows are long.
    switches = sum(1 for a, b in zip(md, md[1:], strict=False) if a.partition != b.partition)
    assert 1 <= switches <= len(values) * 110 // 16384 + 2, f"{switches} partition switches"
    assert len(rows) > 1
    assert 8000 < batch_size_avg <= 16384 + 200, f"batch-size-avg {batch_size_avg}"


def test_send_batch_keyed_headers_and_callback_order(tansu: Any, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 5)
    n = 1500
    keys = [f"user-{i % 23}".encode() if i % 10 else None for i in range(n)]
    values = [f"v{i}".encode() for i in range(n)]
    headers = [("source", b"bulk"), ("empty", None)]
    seen: dict[int, list[int]] = defaultdict(list)
    with Producer(bootstrap_servers=tansu.bootstrap) as p:
        fut = p.send_batch(
            topic_name, values, keys, headers=headers,
            callback=lambda md, exc: seen[md.partition].append(md.offset) if md is not None else None,
        )
        md = fut.result(30)
    _check_against_broker(tansu.bootstrap, topic_name, md, keys, values, headers)
    for row, m in enumerate(md):
        if keys[row] is not None:
            assert m.partition == partition_for_key(keys[row], 5), f"row {row}"
    for p_, offsets in seen.items():
        assert offsets == sorted(offsets), f"callbacks out of order on partition {p_}"
    assert sum(len(v) for v in seen.values()) == n


def test_send_batch_explicit_partition_and_mixed_with_send(tansu: Any, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 3)
    with Producer(bootstrap_servers=tansu.bootstrap) as p:
        first = p.send(topic_name, b"single-0", partition=2)
        fut = p.send_batch(topic_name, [b"a", bytearray(b"b"), memoryview(b"c"), None], partition=2)
        last = p.send(topic_name, b"single-1", partition=2)
        md = fut.result(30)
        assert first.result(30).offset == 0 and last.result(30).offset == 5
    assert [(m.partition, m.offset) for m in md] == [(2, 1), (2, 2), (2, 3), (2, 4)]
    records = read_topic(tansu.bootstrap, topic_name, 6)
    assert [r.value for r in records] == [b"single-0", b"a", b"b", b"c", None, b"single-1"]


def test_send_arrow_chunks_nulls_large_types_and_topic_column(tansu: Any, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 4)
    other = topic_name + "-b"
    create_topic(tansu.bootstrap, other, 2)
    n = 2000
    values = [f"payload-{i}".encode() * 5 for i in range(n)]
    keys = [f"k{i % 17}" if i % 7 else None for i in range(n)]
    part1 = pa.record_batch({"value": pa.array(values[:700], pa.large_binary()), "key": pa.array(keys[:700], pa.string())})
    part2 = pa.record_batch({"value": pa.array(values[700:], pa.large_binary()), "key": pa.array(keys[700:], pa.string())})
    table = pa.Table.from_batches([part1, part2]).slice(0, n)
    with Producer(bootstrap_servers=tansu.bootstrap) as p:
        md = p.send_arrow(table, topic_name).result(30)
        # The topic taken from a column, keyless (no key column), two topics interleaved.
        routed = pa.table({"value": pa.array([b"x%d" % i for i in range(10)]), "topic": [topic_name + "-b" if i % 2 else topic_name + "-c" for i in range(10)]})
        create_topic(tansu.bootstrap, topic_name + "-c", 1)
        md2 = p.send_arrow(routed, key_column=None).result(30)
    keys_b = [k.encode() if k is not None else None for k in keys]
    _check_against_broker(tansu.bootstrap, topic_name, md, keys_b, values)
    for row, m in enumerate(md):
        if keys_b[row] is not None:
            assert m.partition == partition_for_key(keys_b[row], 4)
    assert [m.topic for m in md2] == [topic_name + "-b" if i % 2 else topic_name + "-c" for i in range(10)]
    got = read_topic(tansu.bootstrap, topic_name + "-c", 5)
    assert [r.value for r in got] == [b"x0", b"x2", b"x4", b"x6", b"x8"]
    assert [m.offset for m in md2 if m.topic.endswith("-c")] == [0, 1, 2, 3, 4]


def test_bulk_bad_input_and_too_large(tansu: Any, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    errors: list[BaseException | None] = []
    with Producer(bootstrap_servers=tansu.bootstrap, max_request_size=2000) as p:
        with pytest.raises(TypeError, match="values must be a sequence"):
            p.send_batch(topic_name, b"not-a-list")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="same length"):
            p.send_batch(topic_name, [b"a"], [b"k", b"l"])
        with pytest.raises(TypeError, match=r"values\[1\] must be bytes"):
            p.send_batch(topic_name, [b"a", 7])  # type: ignore[list-item]
        with pytest.raises(ValueError, match="value column 'v'"):
            p.send_arrow(pa.table({"value": [b"a"]}), topic_name, value_column="v")
        with pytest.raises(TypeError, match="must be binary, string"):
            p.send_arrow(pa.table({"value": [1, 2]}), topic_name)
        with pytest.raises(ValueError, match="timestamp must be an int in 0..9223372036854775807"):
            p.send_batch(topic_name, [b"a"], timestamp=1 << 63)
        with pytest.raises(ValueError, match="timestamp must be an int in 0..9223372036854775807"):
            p.send(topic_name, b"a", timestamp=1 << 63)  # the same check and message as send_batch
        fut = p.send_batch(topic_name, [b"ok", b"x" * 5000], callback=lambda md, exc: errors.append(exc))
        assert isinstance(fut.exception(10), RecordTooLargeError)
        with pytest.raises(RecordTooLargeError, match="max.request.size"):
            fut.result(10)
        assert len(errors) == 2 and all(isinstance(e, RecordTooLargeError) for e in errors)
        assert p.send_batch(topic_name, []).result(1) == []


def test_bulk_with_custom_partitioner_goes_record_by_record(tansu: Any, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 3)
    with Producer(bootstrap_servers=tansu.bootstrap, partitioner_class="round_robin") as p:
        md = p.send_batch(topic_name, [b"%d" % i for i in range(9)]).result(30)
    assert sorted(m.partition for m in md) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    _check_against_broker(tansu.bootstrap, topic_name, md, [None] * 9, [b"%d" % i for i in range(9)])


def test_bulk_range_survives_split() -> None:
    """MESSAGE_TOO_LARGE split: a bulk range becomes per-record thunks and the BulkFuture follows them."""
    tp = TopicPartition("t", 0)
    buf = bytearray(4096)
    batch = ProducerBatch(tp, MemoryRecordsBuilder(buf, write_limit=4096), 0, buffer=buf)
    fut = BulkFuture("t", 30)
    calls: list[int] = []
    assert batch.try_append(5, None, b"first", None, None, 0) is not None
    count = batch.try_append_many(7, [b"r%02d" % i * 10 for i in range(30)], None, None, 0, 30, None, False, fut, lambda md, exc: calls.append(md.offset), 0)
    assert count == 30 and batch.record_count == 31
    parts = batch.split(400)
    assert len(parts) > 2 and sum(b.record_count for b in parts) == 31
    assert not fut.done()
    base = 100
    for b in parts:
        b.done(base, -1, None)
        base += b.record_count
    assert fut.done()
    md = fut.result(1)
    assert [m.offset for m in md] == list(range(101, 131))
    assert calls == list(range(101, 131))
    ranges, missing, _ = fut.ranges(0)
    assert missing == 0 and [(r.first_offset, r.record_count) for r in ranges] == [(o, 1) for o in range(101, 131)]


def test_concurrent_bulk_and_send_keep_every_record(tansu: Any, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 2)
    with Producer(bootstrap_servers=tansu.bootstrap) as p:
        futs: list[Any] = []

        def bulk(tag: int) -> None:
            for j in range(5):
                futs.append(p.send_batch(topic_name, [b"%d-%d-%d" % (tag, j, i) for i in range(400)]))

        def single() -> None:
            for i in range(500):
                futs.append(p.send(topic_name, b"s-%d" % i))

        threads = [threading.Thread(target=bulk, args=(t,)) for t in range(2)] + [threading.Thread(target=single)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert p.flush(30) == 0
        for f in futs:
            f.result(1)
    records = read_topic(tansu.bootstrap, topic_name, 2 * 5 * 400 + 500)
    assert len({(r.partition, r.offset) for r in records}) == 4500
    singles = [int(r.value[2:]) for r in records if r.value.startswith(b"s-")]  # type: ignore[union-attr]
    assert sorted(singles) == list(range(500))
