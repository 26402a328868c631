"""Codec byte layouts (xerial snappy, LZ4 frame and KIP-57), names and KIP-390 levels."""

from __future__ import annotations

import random
import struct

import cramjam
import pytest

from kproducer.record.codecs import (
    CompressionType,
    compress,
    compression_type_for_name,
    decompress,
    xxh32,
)

DATA = b"".join(b"record-%06d|" % i for i in range(20000))  # ~280 KB, several blocks of every codec


def test_xxh32_reference_vectors() -> None:
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"abc") == 0x32D153FF
    assert xxh32(b"Nobody inspects the spammish repetition") == 0xE2293B2F


@pytest.mark.parametrize("ctype", list(CompressionType))
def test_round_trip(ctype: CompressionType) -> None:
    out = compress(ctype, memoryview(DATA))
    assert decompress(ctype, out) == DATA
    if ctype is not CompressionType.NONE:
        assert len(out) < len(DATA) // 2


def test_names() -> None:
    assert compression_type_for_name("LZ4") is CompressionType.LZ4
    assert compression_type_for_name(" zstd ") is CompressionType.ZSTD
    with pytest.raises(ValueError, match="allowed: none, gzip, snappy, lz4, zstd"):
        compression_type_for_name("brotli")
    with pytest.raises(TypeError):
        compression_type_for_name(3)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("ctype", "good", "bad"),
    [
        (CompressionType.GZIP, [1, 9], [0, 10]),
        (CompressionType.LZ4, [1, 17], [0, 18]),
        (CompressionType.ZSTD, [-131072, 22], [-131073, 23]),
    ],
)
def test_levels(ctype: CompressionType, good: list[int], bad: list[int]) -> None:
    for level in good:
        assert decompress(ctype, compress(ctype, DATA, level)) == DATA
    for level in bad:
        with pytest.raises(ValueError, match=f"compression_level {level} .*allowed"):
            compress(ctype, DATA, level)
    with pytest.raises(ValueError, match="snappy"):
        compress(CompressionType.SNAPPY, DATA, 3)


def test_lz4_level_matters_as_in_java() -> None:
    """The default level (9) is the fast compressor; other levels are LZ4 HC, which packs tighter."""
    rng = random.Random(7)
    words = [b"alpha", b"beta", b"gamma", b"delta", b"kafka", b"batch", b"epsilon"]
    text = b" ".join(rng.choice(words) + str(rng.randint(0, 99999)).encode() for _ in range(40000))
    sizes = {lvl: len(compress(CompressionType.LZ4, text, lvl)) for lvl in (1, 9, 12, 17)}
    assert sizes[17] < sizes[9] and sizes[12] < sizes[9], sizes
    assert sizes[17] <= sizes[12] <= sizes[1], sizes
    assert len(compress(CompressionType.LZ4, text)) == sizes[9]
    for lvl in sizes:
        assert decompress(CompressionType.LZ4, compress(CompressionType.LZ4, text, lvl)) == text
        assert decompress(CompressionType.LZ4, compress(CompressionType.LZ4, text, lvl, magic=0), magic=0) == text


def test_snappy_is_xerial_framed_and_raw_is_accepted() -> None:
    out = compress(CompressionType.SNAPPY, DATA)
    assert out[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
    pos, blocks, total = 16, 0, 0
    while pos < len(out):
        (n,) = struct.unpack_from(">i", out, pos)
        chunk = bytes(cramjam.snappy.decompress_raw(out[pos + 4 : pos + 4 + n]))
        assert len(chunk) <= 32 * 1024
        total += len(chunk)
        pos += 4 + n
        blocks += 1
    assert total == len(DATA) and blocks == -(-len(DATA) // (32 * 1024))
    raw = bytes(cramjam.snappy.compress_raw(DATA))
    assert decompress(CompressionType.SNAPPY, raw) == DATA


def test_lz4_frame_checksums_v0_vs_v1_v2() -> None:
    for magic in (1, 2):
        frame = compress(CompressionType.LZ4, DATA, magic=magic)
        assert frame[6] == (xxh32(frame[4:6]) >> 8) & 0xFF
        assert bytes(cramjam.lz4.decompress(frame)) == DATA  # an independent frame decoder
    old = compress(CompressionType.LZ4, DATA, magic=0)
    assert old[6] == (xxh32(old[0:6]) >> 8) & 0xFF
    assert decompress(CompressionType.LZ4, old, magic=0) == DATA
    with pytest.raises(ValueError, match="checksum"):
        decompress(CompressionType.LZ4, old, magic=1)
    # A v0 reader also accepts a correct checksum, and any standard frame.
    assert decompress(CompressionType.LZ4, bytes(cramjam.lz4.compress(DATA)), magic=0) == DATA


def test_zstd_below_v2_rejected() -> None:
    with pytest.raises(ValueError, match="magic 2"):
        compress(CompressionType.ZSTD, DATA, magic=1)


@pytest.mark.parametrize("size", [0, 1, 100, 65535, 65536, 65537, 300_000])
def test_lz4_one_call_frame_is_byte_identical_to_the_block_loop(size: int) -> None:
    """The default-level path (lz4.frame, one GIL release per batch) writes the frame the
    block-by-block writer does, for bytes and for the memoryview a seal passes."""
    from kproducer.record.codecs import _lz4_compress, _lz4_frame_blocks

    rng = random.Random(size)
    data = rng.randbytes(size // 2) + bytes(size - size // 2)
    expected = _lz4_frame_blocks(data, None, 2)
    assert _lz4_compress(data, None, 2) == expected
    assert _lz4_compress(memoryview(bytearray(data))[0:size], None, 1) == expected
    assert _lz4_compress(data, None, 0) == _lz4_frame_blocks(data, None, 0)  # magic 0 keeps its header
