"""MemoryRecordsBuilder behaviour: sizing, bad input, producer state, CRC checks (Java's MemoryRecordsBuilder)."""

from __future__ import annotations

import random
import struct

import pytest

from kproducer.errors import CorruptRecordError, IllegalStateError
from kproducer.record.builder import (
    RECORD_BATCH_OVERHEAD,
    STAGING_RATIO_FLOOR,
    CompressionRatioEstimator,
    MemoryRecordsBuilder,
    estimate_size_upper_bound,
)
from kproducer.record.codecs import CompressionType, compression_type_for_name
from kproducer.record.reader import DefaultRecordBatch, read_batches

TS = 1_700_000_000_000


def _one(data: memoryview | bytes | bytearray) -> DefaultRecordBatch:
    (batch,) = list(read_batches(data))
    assert isinstance(batch, DefaultRecordBatch)
    return batch


def test_presized_buffer_holds_exactly_the_batch() -> None:
    buf = bytearray(b"\xee" * 16384)
    b = MemoryRecordsBuilder(buf, write_limit=16384, base_offset=10)
    b.append(TS, b"k", b"v" * 100)
    b.append(TS + 5, None, None, [("a", b"1")])
    b.close()
    assert len(buf) == 16384  # no growth needed, no truncation of the pool buffer
    view = b.buffer()
    assert len(view) == b.size_in_bytes < 200
    batch = _one(view)
    batch.validate()
    assert batch.base_offset == 10 and batch.record_count == 2 and batch.last_offset_delta == 1
    assert batch.base_timestamp == TS and batch.max_timestamp == TS + 5 == b.max_timestamp
    recs = list(batch.records())
    assert recs[1].offset == 11 and recs[1].key is None and recs[1].headers == [("a", b"1")]


def test_buffer_grows_past_its_initial_size() -> None:
    buf = bytearray(10)
    b = MemoryRecordsBuilder(buf, write_limit=100)
    b.append(TS, b"k", b"x" * 5000)
    b.close()
    assert len(buf) >= b.size_in_bytes > 5000
    assert list(_one(b.buffer()).records())[0].value == b"x" * 5000


def test_oversized_first_record_gets_its_own_batch() -> None:
    b = MemoryRecordsBuilder(bytearray(), write_limit=1024)
    big = b"z" * 4096
    assert b.has_room_for(TS, None, big)
    b.append(TS, None, big)
    assert b.is_full()
    assert not b.has_room_for(TS, None, b"a")
    b.close()
    assert b.size_in_bytes > 4096
    assert estimate_size_upper_bound(2, CompressionType.NONE, None, big, None) >= b.size_in_bytes


def test_has_room_for_turns_false_at_the_write_limit() -> None:
    limit = 1000
    b = MemoryRecordsBuilder(bytearray(limit), write_limit=limit)
    value = b"v" * 90
    appended = 0
    while b.has_room_for(TS, b"key", value):
        b.append(TS, b"key", value)
        appended += 1
        assert appended < 100
    assert appended == (limit - RECORD_BATCH_OVERHEAD) // 100  # 100-byte encoded records
    assert b.estimated_size_in_bytes() <= limit
    b.close()
    assert b.size_in_bytes <= limit
    assert b.estimated_size_in_bytes() == b.size_in_bytes


def test_compressed_batch_fills_towards_write_limit_with_ratio_estimate() -> None:
    limit = 16384
    est = CompressionRatioEstimator()
    value = b"abcdefgh" * 16
    sizes = []
    for _ in range(30):
        b = MemoryRecordsBuilder(
            bytearray(limit), compression="gzip", write_limit=limit, topic="t", ratio_estimator=est
        )
        while b.has_room_for(TS, b"k", value):
            b.append(TS, b"k", value)
        b.close()
        sizes.append(b.size_in_bytes)
        assert b.compression_rate < 0.5
    # The first batch used ratio 1.0; the estimate drifts down so later batches hold more records.
    assert est.estimation("t", CompressionType.GZIP) < 1.0
    assert sizes[-1] > sizes[0]
    assert all(s <= limit for s in sizes)


def test_ratio_estimator_steps() -> None:
    est = CompressionRatioEstimator()
    assert est.estimation("t", 1) == 1.0
    assert est.update_estimation("t", 1, 0.5) == pytest.approx(0.75)  # half the gap
    assert est.update_estimation("t", 1, 0.6) == pytest.approx(0.675)
    assert est.update_estimation("t", 1, 0.666) == pytest.approx(0.670)  # at least Java's 0.005
    assert est.update_estimation("t", 1, 0.1, full=False) == pytest.approx(0.385)  # any batch may improve it
    assert est.update_estimation("t", 1, 2.0) == pytest.approx(2.0)  # worse: at once, as in Java
    assert est.update_estimation("t", 1, 2.01) == pytest.approx(2.05)
    assert est.update_estimation("t", 1, 3.0, full=False) == pytest.approx(2.05)  # a small batch may not
    assert est.estimation("t", 2) == 1.0


def test_estimate_converges_in_a_few_batches_and_small_batches_do_not_reset_it() -> None:
    """1 KB records repeated: the estimate reaches the observed ratio in a few batches (Java's
    0.005 steps need ~190), and a 1-record batch drained early leaves it alone. A builder on its
    own stages no more than its write limit however good the estimate: only the accumulator's
    charged growth lets a batch stage more (tests/unit/accumulator/test_expandable_batches.py)."""
    limit = 16384
    est = CompressionRatioEstimator()
    value = random.Random(1).randbytes(1024)  # incompressible alone, repeated in a batch

    def batch(records: int | None) -> MemoryRecordsBuilder:
        b = MemoryRecordsBuilder(bytearray(limit), compression="lz4", write_limit=limit, topic="t", ratio_estimator=est)
        while (records is None or b.num_records < records) and b.has_room_for(TS, None, value):
            b.append(TS, None, value)
        b.close()
        return b

    counts = [batch(None).num_records for _ in range(12)]
    settled = est.estimation("t", CompressionType.LZ4)
    assert settled < 0.1 and max(counts) == counts[0] <= limit // 1024
    lone = batch(1)
    assert lone.compression_rate > 0.5 and est.estimation("t", CompressionType.LZ4) == settled


def test_staging_floor_bounds_the_records_an_open_batch_holds() -> None:
    """However good the estimate, a new batch stages at most its write limit of records (what
    buffer.memory charged it); it stages more only through the accumulator's charged growth."""
    est = CompressionRatioEstimator()
    for _ in range(40):
        est.update_estimation("t", CompressionType.ZSTD, 0.001)
    assert est.estimation("t", CompressionType.ZSTD) < 0.01
    value = b"z" * 1000
    for limit in (16384, 65536, 1 << 20):
        b = MemoryRecordsBuilder.for_batch(bytearray(limit), CompressionType.ZSTD, None, limit, "t", est)
        assert b.estimated_compression_ratio == pytest.approx(STAGING_RATIO_FLOOR)
        while b.has_room_for(TS, None, value):
            b.append(TS, None, value)
        assert b.uncompressed_size <= limit
        assert b.uncompressed_size > limit * 0.9


def test_flipped_byte_in_crc_region_is_caught() -> None:
    b = MemoryRecordsBuilder(bytearray(), compression=CompressionType.LZ4, write_limit=4096, base_offset=77)
    for i in range(5):
        b.append(TS + i, b"k", b"value")
    b.close()
    for pos in (21, 30, 60, 61, b.size_in_bytes - 1):
        data = bytearray(b.buffer())
        data[pos] ^= 0x40
        batch = _one(data)
        with pytest.raises(CorruptRecordError, match="offset 77"):
            batch.validate()
    # Outside the CRC region (partition leader epoch) the broker may rewrite freely.
    data = bytearray(b.buffer())
    struct.pack_into(">i", data, 12, 9)
    _one(data).validate()


def test_legacy_flipped_byte_is_caught() -> None:
    b = MemoryRecordsBuilder(bytearray(), magic=1, write_limit=4096, base_offset=3)
    b.append(TS, b"k", b"value")
    b.close()
    data = bytearray(b.buffer())
    data[-1] ^= 1
    (batch,) = list(read_batches(data))
    with pytest.raises(CorruptRecordError, match="offset 3"):
        batch.validate()


def test_rewrite_producer_state_keeps_crc_valid() -> None:
    b = MemoryRecordsBuilder(
        bytearray(), write_limit=4096, producer_id=5, producer_epoch=0, base_sequence=0, compression="snappy"
    )
    for i in range(3):
        b.append(TS, None, b"v%d" % i)
    b.close()
    before = _one(b.buffer())
    before.validate()
    b.rewrite_producer_state(5, 1, 42, True)
    after = _one(b.buffer())
    after.validate()
    assert (after.producer_id, after.producer_epoch, after.base_sequence) == (5, 1, 42)
    assert after.is_transactional and after.compression is CompressionType.SNAPPY
    assert after.crc != before.crc
    assert [r.value for r in after.records()] == [b"v0", b"v1", b"v2"]
    b.rewrite_producer_state(5, 1, 42, False)
    again = _one(b.buffer())
    again.validate()
    assert not again.is_transactional


def test_set_producer_state_before_close() -> None:
    b = MemoryRecordsBuilder(bytearray(), write_limit=4096)
    b.append(TS, None, b"v")
    b.set_producer_state(9, 2, 100, False)
    b.close()
    batch = _one(b.buffer())
    assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (9, 2, 100)
    with pytest.raises(IllegalStateError):
        b.set_producer_state(1, 1, 1, False)


def test_close_is_idempotent_and_append_after_close_fails() -> None:
    b = MemoryRecordsBuilder(bytearray(), compression="zstd", write_limit=4096)
    b.append(TS, b"k", b"v")
    b.close()
    first = bytes(b.buffer())
    b.close()
    assert bytes(b.buffer()) == first
    assert b.is_closed and b.is_full()
    with pytest.raises(IllegalStateError):
        b.append(TS, b"k", b"v")


def test_empty_batch_closes_to_nothing() -> None:
    b = MemoryRecordsBuilder(bytearray(100), write_limit=4096)
    b.close()
    assert b.size_in_bytes == 0 and len(b.buffer()) == 0


def test_bytes_like_inputs() -> None:
    b = MemoryRecordsBuilder(bytearray(), write_limit=4096)
    b.append(TS, bytearray(b"ka"), memoryview(b"va"), [("h", bytearray(b"x")), ("m", memoryview(b"y"))])
    b.append(TS, memoryview(struct.pack(">2i", 1, 2)).cast("i"), None)
    b.close()
    recs = list(_one(b.buffer()).records())
    assert (recs[0].key, recs[0].value, recs[0].headers) == (b"ka", b"va", [("h", b"x"), ("m", b"y")])
    assert recs[1].key == struct.pack(">2i", 1, 2)


@pytest.mark.parametrize(
    ("args", "exc", "match"),
    [
        ((TS, "str-key", b"v"), TypeError, "key"),
        ((TS, b"k", 12), TypeError, "value"),
        ((TS, b"k", b"v", [(1, b"x")]), TypeError, "header 0 key"),
        ((TS, b"k", b"v", [("h", "text")]), TypeError, "header 'h' value"),
        ((TS, b"k", b"v", [("h",)]), TypeError, "header 0"),
        ((TS, b"k", b"v", "abc"), TypeError, "headers"),
        ((-5, b"k", b"v"), ValueError, "timestamp"),
        (("now", b"k", b"v"), TypeError, "timestamp"),
        ((1 << 63, b"k", b"v"), ValueError, r"timestamp must be in 0\.\.9223372036854775807"),
    ],
)
def test_bad_input(args: tuple[object, ...], exc: type[Exception], match: str) -> None:
    b = MemoryRecordsBuilder(bytearray(), write_limit=4096)
    with pytest.raises(exc, match=match):
        b.append(*args)  # type: ignore[arg-type]
    assert b.num_records == 0


@pytest.mark.parametrize("magic", [1, 2])
def test_timestamp_past_int64_is_refused_before_anything_is_written(magic: int) -> None:
    b = MemoryRecordsBuilder(bytearray(), magic=magic, write_limit=4096)
    for call in (b.append, b.try_append):
        with pytest.raises(ValueError, match="timestamp must be in 0..9223372036854775807"):
            call(1 << 63, b"k", b"v")
    assert b.try_append((1 << 63) - 1, b"k", b"v")
    b.close()
    assert [r.timestamp for batch in read_batches(b.buffer()) for r in batch.records()] == [(1 << 63) - 1]


def test_no_timestamp_is_allowed() -> None:
    b = MemoryRecordsBuilder(bytearray(), write_limit=4096)
    b.append(-1, None, b"v")
    b.close()
    assert list(_one(b.buffer()).records())[0].timestamp == -1


def test_bad_construction() -> None:
    with pytest.raises(ValueError, match="allowed: none, gzip, snappy, lz4, zstd"):
        MemoryRecordsBuilder(bytearray(), compression="brotli", write_limit=10)
    with pytest.raises(ValueError, match="compression_level 10 .* gzip: allowed 1..9"):
        MemoryRecordsBuilder(bytearray(), compression="gzip", compression_level=10, write_limit=10)
    with pytest.raises(ValueError, match="zstd"):
        MemoryRecordsBuilder(bytearray(), magic=1, compression="zstd", write_limit=10)
    with pytest.raises(ValueError, match="magic"):
        MemoryRecordsBuilder(bytearray(), magic=3, write_limit=10)
    with pytest.raises(ValueError, match="write_limit"):
        MemoryRecordsBuilder(bytearray(), write_limit=0)
    with pytest.raises(TypeError, match="buffer"):
        MemoryRecordsBuilder(b"", write_limit=10)  # type: ignore[arg-type]


def test_headers_rejected_below_v2() -> None:
    for magic in (0, 1):
        b = MemoryRecordsBuilder(bytearray(), magic=magic, write_limit=4096)
        with pytest.raises(ValueError, match="headers"):
            b.append(TS, b"k", b"v", [("h", b"x")])
        with pytest.raises(ValueError, match="headers"):
            estimate_size_upper_bound(magic, CompressionType.NONE, b"k", b"v", [("h", b"x")])


def test_legacy_v1_compressed_wrapper_layout() -> None:
    b = MemoryRecordsBuilder(bytearray(), magic=1, compression="gzip", write_limit=4096, base_offset=100)
    for i in range(4):
        b.append(TS + 10 - i, b"k", b"v")
    b.close()
    (wrapper,) = list(read_batches(b.buffer()))
    wrapper.validate()
    assert wrapper.magic == 1 and wrapper.compression is CompressionType.GZIP
    assert wrapper.last_offset == 103 and wrapper.base_offset == 100
    assert wrapper.max_timestamp == TS + 10  # max inner timestamp, not the last one
    assert [r.offset for r in wrapper.records()] == [100, 101, 102, 103]
    assert [r.timestamp for r in wrapper.records()] == [TS + 10, TS + 9, TS + 8, TS + 7]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_close_for_record_appends_compresses_early_and_close_adds_the_header(codec: str) -> None:
    """A sealed batch holds its compressed bytes (no more appends); close() then writes header and CRC."""
    capacity = 4096
    buf = bytearray(capacity)
    b = MemoryRecordsBuilder(buf, compression=codec, write_limit=capacity, estimated_compression_ratio=0.05)
    records = [(1000 + i, b"k%d" % i, b"the same value, again and again " * 4) for i in range(400)]
    for ts, k, v in records:
        if not b.try_append(ts, k, v):
            break
    n = b.num_records
    assert n > 100 and len(buf) > capacity  # the ratio estimate let the records outgrow the buffer
    uncompressed = b.uncompressed_size
    b.close_for_record_appends(capacity)
    # Cut back to the pool buffer's size, or to the compressed bytes when they need more.
    assert len(buf) == max(capacity, b.estimated_size_in_bytes()) < uncompressed
    assert b.is_full() and not b.has_room_for(1, None, b"x")
    with pytest.raises(IllegalStateError):
        b.append(1, None, b"x")
    assert b.uncompressed_size == uncompressed
    b.set_producer_state(7, 1, 42, False)  # still allowed: the header is not written yet
    b.close()
    assert 0 < b.compression_rate < 0.5
    (batch,) = list(read_batches(b.buffer()))
    batch.validate()
    assert (batch.producer_id, batch.base_sequence) == (7, 42)
    assert [(r.timestamp, r.key, r.value) for r in batch.records()] == records[:n]


@pytest.mark.parametrize("codec", ["gzip", "lz4", "zstd"])
def test_close_without_a_seal_also_gives_back_the_staging_growth(codec: str) -> None:
    """A batch drained straight from the open deque (never sealed) is cut back at close() too.

    Otherwise an in-flight batch keeps records staged uncompressed, several times
    batch.size, that buffer.memory never counted (peak RSS at 1 MB batches).
    """
    capacity = 4096
    buf = bytearray(capacity)
    b = MemoryRecordsBuilder(buf, compression=codec, write_limit=capacity, estimated_compression_ratio=0.05)
    records = [(1000 + i, None, b"the same value, again and again " * 4) for i in range(300)]
    for ts, k, v in records:
        if not b.try_append(ts, k, v):
            break
    n = b.num_records
    assert len(buf) > 2 * capacity
    b.close(capacity)
    assert len(buf) == max(capacity, b.estimated_size_in_bytes())
    (batch,) = list(read_batches(b.buffer()))
    batch.validate()
    assert [(r.timestamp, r.value) for r in batch.records()] == [(t, v) for t, _, v in records[:n]]


@pytest.mark.parametrize("codec", ["none", "gzip", "lz4", "zstd"])
def test_for_batch_builds_the_same_state_as_the_checked_constructor(codec: str) -> None:
    ctype = compression_type_for_name(codec)
    estimator = CompressionRatioEstimator()
    estimator.update_estimation("t", ctype, 0.4)
    a = MemoryRecordsBuilder(bytearray(100), compression=ctype, write_limit=100, topic="t", ratio_estimator=estimator)
    b = MemoryRecordsBuilder.for_batch(bytearray(100), ctype, None, 100, "t", estimator)
    from kproducer.record.builder import PyMemoryRecordsBuilderCore

    for slot in PyMemoryRecordsBuilderCore.__slots__ + MemoryRecordsBuilder.__slots__:
        if slot != "_buf":
            assert getattr(a, slot) == getattr(b, slot), slot


def test_control_batch_sets_attribute_bit_5() -> None:
    """A transaction marker batch: control and transactional bits, read back by ours and kafka-python's reader."""
    from kafka.record.memory_records import MemoryRecords

    b = MemoryRecordsBuilder(
        bytearray(),
        write_limit=4096,
        is_control=True,
        is_transactional=True,
        producer_id=7,
        producer_epoch=1,
        base_sequence=-1,
    )
    assert b.is_control
    # An END_TXN COMMIT marker: key = (version 0, type 1), value = (version 0, coordinator epoch 3).
    b.append(TS, struct.pack(">hh", 0, 1), struct.pack(">hi", 0, 3))
    b.close()
    batch = _one(b.buffer())
    assert batch.is_control and batch.is_transactional
    assert batch.attributes & 0x30 == 0x30
    theirs = MemoryRecords(bytes(b.buffer())).next_batch()
    assert theirs.is_control_batch and theirs.is_transactional and theirs.validate_crc()
    plain = MemoryRecordsBuilder(bytearray(), write_limit=4096)
    plain.append(TS, None, b"v")
    plain.close()
    assert not _one(plain.buffer()).is_control
    with pytest.raises(ValueError, match="control batch .* needs magic 2"):
        MemoryRecordsBuilder(bytearray(), magic=1, write_limit=4096, is_control=True)


def test_the_precomputed_varint_table_is_the_varint_encoding() -> None:
    from kproducer.record import default_record as dr

    assert len(dr._VARINT) == len(dr._VARINT_LEN) == dr._TABLE_SIZE
    for i in range(dr._TABLE_SIZE):
        assert dr._VARINT[i] == dr.encode_unsigned_varint(dr.zigzag(i)), i
        assert dr._VARINT_LEN[i] == len(dr._VARINT[i]), i
