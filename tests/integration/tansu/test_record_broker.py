"""v2 batches built by MemoryRecordsBuilder, produced raw to Tansu, read back by confluent-kafka."""

from __future__ import annotations

import pytest

from kproducer.record.builder import MemoryRecordsBuilder
from kproducer.record.codecs import CompressionType
from tests.support.raw_produce import produce_batch
from tests.support.readback import create_topic, read_topic
from tests.support.tansu import TansuBroker

BASE_TS = 1_700_000_000_000


def _expected(i: int) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]:
    key = None if i % 5 == 0 else f"key-{i}".encode()
    value = None if i == 7 else (f"value-{i}-".encode() * (i % 13 + 1))
    headers: list[tuple[str, bytes | None]] = [("n", str(i).encode()), ("codec", b"x")] if i % 3 == 0 else []
    return key, value, headers, BASE_TS + i * 3


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.name.lower())
def test_v2_batch_reads_back_intact(tansu: TansuBroker, topic_name: str, codec: CompressionType) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    n = 40
    builder = MemoryRecordsBuilder(bytearray(1024), compression=codec, write_limit=1 << 20)
    for i in range(n):
        key, value, headers, ts = _expected(i)
        builder.append(ts, key, value, headers)
    builder.close()
    produce_batch(tansu.bootstrap, topic_name, 0, builder.buffer())
    got = read_topic(tansu.bootstrap, topic_name, n, partitions=1)
    assert len(got) == n
    for i, rec in enumerate(got):
        key, value, headers, ts = _expected(i)
        assert rec.offset == i
        assert rec.key == key
        assert rec.value == value
        assert [(k, v) for k, v in rec.headers] == headers
        assert rec.timestamp == ts
