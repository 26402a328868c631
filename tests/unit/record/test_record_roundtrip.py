"""Property test: random records through MemoryRecordsBuilder and back through read_batches."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kproducer.record.builder import MemoryRecordsBuilder
from kproducer.record.codecs import CompressionType
from kproducer.record.reader import read_batches

_bytes_or_none = st.one_of(st.none(), st.binary(max_size=300))
_timestamp = st.one_of(st.just(-1), st.integers(min_value=0, max_value=2**50))
_headers = st.lists(st.tuples(st.text(max_size=10), _bytes_or_none), max_size=3)


@st.composite
def _batches(
    draw: st.DrawFn,
) -> tuple[int, CompressionType, int, list[tuple[int, bytes | None, bytes | None, list]]]:
    magic = draw(st.sampled_from([0, 1, 2]))
    codecs = (
        list(CompressionType) if magic == 2 else [c for c in CompressionType if c is not CompressionType.ZSTD]
    )
    codec = draw(st.sampled_from(codecs))
    base_offset = draw(st.integers(min_value=0, max_value=2**40))
    recs = draw(
        st.lists(
            st.tuples(_timestamp, _bytes_or_none, _bytes_or_none, _headers if magic == 2 else st.just([])),
            min_size=1,
            max_size=30,
        )
    )
    return magic, codec, base_offset, recs


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_batches())
def test_builder_reader_round_trip(batch: tuple[int, CompressionType, int, list]) -> None:
    magic, codec, base_offset, recs = batch
    if magic == 0:
        recs = [(-1, k, v, h) for _, k, v, h in recs]
    b = MemoryRecordsBuilder(
        bytearray(64), magic=magic, compression=codec, base_offset=base_offset, write_limit=1
    )
    for ts, key, value, headers in recs:
        b.append(ts, key, value, headers)
    b.close()
    batches = list(read_batches(b.buffer()))
    for rb in batches:
        rb.validate()
        assert rb.magic == magic
    got = [r for rb in batches for r in rb.records()]
    assert len(got) == len(recs)
    for i, (rec, (ts, key, value, headers)) in enumerate(zip(got, recs, strict=True)):
        assert rec.offset == base_offset + i
        assert (rec.timestamp, rec.key, rec.value, rec.headers) == (ts, key, value, list(headers))
    assert b.max_timestamp == max(ts for ts, *_ in recs)
