"""Interop with kafka-python's record classes, in both directions, for v0, v1 and v2.

kafka-python runs with its own codec packages (python-snappy, lz4, zstandard and
xxhash, all in the ``test`` extra), so nothing it computes comes from
kproducer: its batch parsing, xerial snappy framing, KIP-57 LZ4 header checksum
and CRC checks are an independent check of ours. The fixture fails with a clear
message when one of those packages is missing, rather than skipping.
"""

from __future__ import annotations

import struct

import kafka.codec
import pytest
import xxhash
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kproducer.record.builder import MemoryRecordsBuilder
from kproducer.record.codecs import CompressionType
from kproducer.record.reader import read_batches

BASE_TS = 1_600_000_000_000


@pytest.fixture
def kafka_python_codecs() -> None:
    """kafka-python's own codecs must be importable; say which is missing, never skip."""
    missing = [
        name
        for name, present in (
            ("python-snappy", kafka.codec.has_snappy()),
            ("lz4", kafka.codec.has_lz4()),
            ("zstandard", kafka.codec.has_zstd()),
            ("xxhash", kafka.codec.xxhash is not None),
        )
        if not present
    ]
    if missing:
        pytest.fail(f"kafka-python's codec packages are missing: {', '.join(missing)}; install the test extra")


def _sample(i: int, magic: int) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]], int]:
    key = None if i % 4 == 0 else f"k{i}".encode()
    value = None if i == 5 else bytes([i % 251]) * (i * 7 % 300)
    headers: list[tuple[str, bytes | None]] = []
    if magic == 2 and i % 3 == 0:
        headers = [("h1", b"v" * i), ("h2", None)]
    return key, value, headers, BASE_TS + i * 11


CASES = [(2, c) for c in CompressionType] + [
    (m, c) for m in (0, 1) for c in CompressionType if c is not CompressionType.ZSTD
]


@pytest.mark.parametrize(
    ("magic", "codec"), CASES, ids=lambda x: str(x) if isinstance(x, int) else x.name.lower()
)
def test_kafka_python_decodes_our_batches(
    kafka_python_codecs: None, magic: int, codec: CompressionType
) -> None:
    n = 30
    base_offset = 500
    b = MemoryRecordsBuilder(
        bytearray(64), magic=magic, compression=codec, write_limit=1 << 20, base_offset=base_offset
    )
    for i in range(n):
        key, value, headers, ts = _sample(i, magic)
        b.append(ts, key, value, headers)
    b.close()
    records = MemoryRecords(bytes(b.buffer()))
    got = []
    while records.has_next():
        batch = records.next_batch()
        assert batch.validate_crc()
        got.extend(batch)
    assert len(got) == n
    for i, rec in enumerate(got):
        key, value, headers, ts = _sample(i, magic)
        assert rec.offset == base_offset + i
        assert rec.key == key
        assert rec.value == value
        if magic == 2:
            assert list(rec.headers) == headers
        if magic > 0:
            assert rec.timestamp == ts
        else:
            assert rec.timestamp is None or rec.timestamp == -1


@pytest.mark.parametrize(
    ("magic", "codec"), CASES, ids=lambda x: str(x) if isinstance(x, int) else x.name.lower()
)
def test_we_decode_kafka_python_batches(
    kafka_python_codecs: None, magic: int, codec: CompressionType
) -> None:
    n = 25
    kb: DefaultRecordBatchBuilder | LegacyRecordBatchBuilder
    if magic == 2:
        kb = DefaultRecordBatchBuilder(2, int(codec), False, 42, 3, 17, 1 << 20)
    else:
        kb = LegacyRecordBatchBuilder(magic, int(codec), 1 << 20)
    for i in range(n):
        key, value, headers, ts = _sample(i, magic)
        kb.append(i, timestamp=ts if magic > 0 else None, key=key, value=value, headers=headers)
    data = bytes(kb.build())
    batches = list(read_batches(data))
    for batch in batches:
        batch.validate()
        assert batch.magic == magic
        assert batch.compression is codec
    if magic == 2:
        assert len(batches) == 1
        assert (batches[0].producer_id, batches[0].producer_epoch, batches[0].base_sequence) == (42, 3, 17)
        assert batches[0].record_count == n
        assert batches[0].last_offset_delta == n - 1
    got = [r for batch in batches for r in batch.records()]
    if magic == 1 and codec is not CompressionType.NONE:
        # kafka-python leaves the wrapper offset at 0 (the broker assigns it); the
        # relative inner offsets then resolve to -(n-1)..0. With the wrapper at the
        # last offset, as a broker writes it, they resolve to 0..n-1.
        assert [r.offset for r in got] == [i - (n - 1) for i in range(n)]
        patched = bytearray(data)
        struct.pack_into(">q", patched, 0, n - 1)
        (wrapper,) = list(read_batches(patched))
        wrapper.validate()
        assert wrapper.base_offset == 0
        got = list(wrapper.records())
    assert [r.offset for r in got] == list(range(n))
    for i, rec in enumerate(got):
        key, value, headers, ts = _sample(i, magic)
        assert (rec.key, rec.value, rec.headers) == (key, value, headers)
        assert rec.timestamp == (ts if magic > 0 else -1)


def test_kafka_python_reads_v0_lz4_with_kip57_checksum(kafka_python_codecs: None) -> None:
    """Our magic-0 LZ4 frame carries the old broken header checksum, which kafka-python's old-kafka path expects."""
    b = MemoryRecordsBuilder(bytearray(), magic=0, compression=CompressionType.LZ4, write_limit=1 << 20)
    b.append(-1, b"k", b"v" * 500)
    b.close()
    data = bytes(b.buffer())
    # log overhead (12) + crc, magic, attributes (6) + null key length (4) + value length (4)
    frame = data[26:]
    assert frame[:4] == b"\x04\x22\x4d\x18"
    # The header checksums computed by the xxhash package, not by kproducer's own xxh32.
    broken = (xxhash.xxh32(frame[0:6]).intdigest() >> 8) & 0xFF
    assert frame[6] == broken
    assert frame[6] != (xxhash.xxh32(frame[4:6]).intdigest() >> 8) & 0xFF
    batch = MemoryRecords(data).next_batch()
    assert [r.value for r in batch] == [b"v" * 500]
