"""Compression codecs for record batches (Kafka's documentation, "Message Format": attributes bits 0-2).

The byte layouts follow what the Java client writes, so that every broker and
consumer reads them:

* gzip: a plain gzip member (Java's ``GZIPOutputStream``).
* snappy: the *xerial* framing (``\\x82SNAPPY\\x00``, version 1, compatible 1,
  then ``[int32 length][raw snappy block]`` per 32 KiB of input). Reading also
  accepts plain raw snappy, which some clients write.
* lz4: the LZ4 frame format with 64 KiB independent blocks (Java's
  ``KafkaLZ4BlockOutputStream``). Magic-0 batches carry the historical wrong
  header checksum, computed over the frame magic too (KIP-57); magic 1 and 2
  carry the correct one. Reading a magic-0 frame accepts either.
* zstd: a standard zstd frame; only allowed with magic 2.

Compression levels follow KIP-390. cramjam does the work and releases the GIL.
"""

from __future__ import annotations

import functools
import logging
import struct
from collections.abc import Callable
from enum import IntEnum

import cramjam

__all__ = [
    "CompressionType",
    "compression_type_for_name",
    "compress",
    "decompress",
    "validate_compression_level",
    "xxh32",
]

logger = logging.getLogger(__name__)


class CompressionType(IntEnum):
    """Codec id stored in the low three attribute bits (as in Java's producer)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


_NAMES: dict[str, CompressionType] = {
    "none": CompressionType.NONE,
    "gzip": CompressionType.GZIP,
    "snappy": CompressionType.SNAPPY,
    "lz4": CompressionType.LZ4,
    "zstd": CompressionType.ZSTD,
}

# KIP-390 level ranges (inclusive) and the defaults the Java client uses.
_LEVEL_RANGES: dict[CompressionType, tuple[int, int]] = {
    CompressionType.GZIP: (1, 9),
    CompressionType.LZ4: (1, 17),
    CompressionType.ZSTD: (-131072, 22),
}
_DEFAULT_LEVELS: dict[CompressionType, int] = {
    CompressionType.GZIP: 6,
    CompressionType.LZ4: 9,
    CompressionType.ZSTD: 3,
}


def compression_type_for_name(name: str) -> CompressionType:
    """Map a ``compression.type`` config value to its codec (case-insensitive)."""
    if not isinstance(name, str):
        raise TypeError(f"compression type name must be a str, got {type(name).__name__}")
    try:
        return _NAMES[name.strip().lower()]
    except KeyError:
        raise ValueError(f"unknown compression type {name!r}; allowed: {', '.join(_NAMES)}") from None


def _as_type(ctype: CompressionType | int) -> CompressionType:
    try:
        return CompressionType(ctype)
    except ValueError:
        raise ValueError(
            f"unknown compression type id {ctype!r}; allowed: 0 (none), 1 (gzip), 2 (snappy), 3 (lz4), 4 (zstd)"
        ) from None


def validate_compression_level(ctype: CompressionType | int, level: int | None) -> int | None:
    """Check a KIP-390 ``compression.level`` against the codec's range; returns it unchanged."""
    if level is None:
        return None
    ct = _as_type(ctype)
    if isinstance(level, bool) or not isinstance(level, int):
        raise TypeError(f"compression_level must be an int or None, got {type(level).__name__}")
    rng = _LEVEL_RANGES.get(ct)
    if rng is None:
        raise ValueError(
            f"compression_level {level} is not supported for {ct.name.lower()}; "
            "only gzip (1..9), lz4 (1..17) and zstd (-131072..22) take a level"
        )
    lo, hi = rng
    if not lo <= level <= hi:
        raise ValueError(
            f"compression_level {level} is out of range for {ct.name.lower()}: allowed {lo}..{hi}"
        )
    return level


def _check_magic(ct: CompressionType, magic: int) -> None:
    if magic not in (0, 1, 2):
        raise ValueError(f"magic must be 0, 1 or 2, got {magic!r}")
    if ct is CompressionType.ZSTD and magic < 2:
        raise ValueError(f"zstd compression requires magic 2 (message format v2), got magic {magic}")


# ---------------------------------------------------------------- xxHash32
_P1 = 2654435761
_P2 = 2246822519
_P3 = 3266489917
_P4 = 668265263
_P5 = 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32, needed only for the 2-3 byte LZ4 frame descriptor checksum."""
    n = len(data)
    i = 0
    if n >= 16:
        v1 = (seed + _P1 + _P2) & _M32
        v2 = (seed + _P2) & _M32
        v3 = seed & _M32
        v4 = (seed - _P1) & _M32
        while i + 16 <= n:
            a, b, c, d = struct.unpack_from("<4I", data, i)
            v1 = (_rotl((v1 + a * _P2) & _M32, 13) * _P1) & _M32
            v2 = (_rotl((v2 + b * _P2) & _M32, 13) * _P1) & _M32
            v3 = (_rotl((v3 + c * _P2) & _M32, 13) * _P1) & _M32
            v4 = (_rotl((v4 + d * _P2) & _M32, 13) * _P1) & _M32
            i += 16
        h = (_rotl(v1, 1) + _rotl(v2, 7) + _rotl(v3, 12) + _rotl(v4, 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        (k,) = struct.unpack_from("<I", data, i)
        h = (_rotl((h + k * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


# ---------------------------------------------------------------- snappy (xerial)
_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024


def _snappy_compress(data: bytes | bytearray | memoryview) -> bytes:
    mv = memoryview(data).cast("B")
    parts = [_XERIAL_HEADER]
    pack = struct.Struct(">i").pack
    for off in range(0, len(mv), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(mv[off : off + _XERIAL_BLOCK]))
        parts.append(pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_decompress(data: bytes | bytearray | memoryview) -> bytes:
    mv = memoryview(data).cast("B")
    if bytes(mv[:8]) == _XERIAL_HEADER[:8]:
        if len(mv) < 16:
            raise ValueError("truncated xerial snappy header")
        out = []
        pos = 16
        end = len(mv)
        while pos < end:
            if pos + 4 > end:
                raise ValueError("truncated xerial snappy block length")
            (blen,) = struct.unpack_from(">i", mv, pos)
            pos += 4
            if blen < 0 or pos + blen > end:
                raise ValueError(f"xerial snappy block length {blen} runs past the end of the data")
            out.append(bytes(cramjam.snappy.decompress_raw(mv[pos : pos + blen])))
            pos += blen
        return b"".join(out)
    return bytes(cramjam.snappy.decompress_raw(mv))


# ---------------------------------------------------------------- lz4 frame
_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_FLG = 0x60  # version 01, independent blocks, no checksums, no content size
_LZ4_BD = 0x40  # 64 KiB max block size
_LZ4_BLOCK = 64 * 1024
_LZ4_BLOCK_SIZES = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}


_LZ4_DEFAULT_LEVEL = _DEFAULT_LEVELS[CompressionType.LZ4]


def _lz4_frame_header(magic: int) -> bytes:
    """Frame magic, descriptor and header checksum; the same for every batch, so computed once."""
    descriptor = bytes((_LZ4_FLG, _LZ4_BD))
    # KIP-57: Kafka's magic-0 writer hashed the frame magic together with the descriptor.
    hashed = _LZ4_MAGIC + descriptor if magic == 0 else descriptor
    return _LZ4_MAGIC + descriptor + bytes(((xxh32(hashed) >> 8) & 0xFF,))


_LZ4_FRAME_HEADER = _lz4_frame_header(2)
_LZ4_FRAME_HEADER_V0 = _lz4_frame_header(0)


def _lz4_hc() -> Callable[..., bytes]:
    import lz4.block

    compress: Callable[..., bytes] = lz4.block.compress
    return compress


@functools.cache
def _lz4_frame_fast() -> Callable[..., bytes]:
    import lz4.frame

    return functools.partial(
        lz4.frame.compress,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        store_size=False,
    )


def _lz4_compress(data: bytes | bytearray | memoryview, level: int | None, magic: int) -> bytes:
    # As Java's Lz4BlockOutputStream: the default level uses the fast compressor, any other
    # level LZ4 HC at that level (cramjam's block API ignores levels, so HC comes from lz4).
    high = level is not None and level != _LZ4_DEFAULT_LEVEL
    if not high and magic != 0:
        # The same bytes as _lz4_frame_blocks (64 KiB independent blocks, no checksums;
        # a test compares them), in one C call that lets go of the GIL once per batch rather
        # than once per 64 KiB block, each release being a chance to wait for the GIL.
        return _lz4_frame_fast()(data)
    return _lz4_frame_blocks(data, level if high else None, magic)


def _lz4_frame_blocks(data: bytes | bytearray | memoryview, level: int | None, magic: int) -> bytes:
    """The frame block by block: magic 0's KIP-57 header checksum, and LZ4 HC at ``level``."""
    parts = [_LZ4_FRAME_HEADER_V0 if magic == 0 else _LZ4_FRAME_HEADER]
    mv = memoryview(data).cast("B")
    pack = struct.Struct("<I").pack
    hc_compress = _lz4_hc() if level is not None else None
    for off in range(0, len(mv), _LZ4_BLOCK):
        chunk = mv[off : off + _LZ4_BLOCK]
        if hc_compress is not None:
            block = hc_compress(chunk, mode="high_compression", compression=level, store_size=False)
        else:
            block = bytes(cramjam.lz4.compress_block(chunk, store_size=False))
        if len(block) < len(chunk):
            parts.append(pack(len(block)))
            parts.append(block)
        else:
            parts.append(pack(len(chunk) | 0x80000000))
            parts.append(bytes(chunk))
    parts.append(b"\x00\x00\x00\x00")
    return b"".join(parts)


def _lz4_decompress(data: bytes | bytearray | memoryview, magic: int) -> bytes:
    mv = memoryview(data).cast("B")
    end = len(mv)
    if end < 7 or bytes(mv[:4]) != _LZ4_MAGIC:
        raise ValueError("not an LZ4 frame: bad magic")
    flg = mv[4]
    if (flg >> 6) != 1:
        raise ValueError(f"unsupported LZ4 frame version {flg >> 6}")
    has_content_size = bool(flg & 0x08)
    has_dict = bool(flg & 0x01)
    if (mv[5] >> 4) & 0x7 not in _LZ4_BLOCK_SIZES:
        raise ValueError(f"unsupported LZ4 block size id {(mv[5] >> 4) & 0x7}")
    hc_pos = 6 + (8 if has_content_size else 0) + (4 if has_dict else 0)
    if hc_pos >= end:
        raise ValueError("truncated LZ4 frame descriptor")
    hc = mv[hc_pos]
    correct = (xxh32(bytes(mv[4:hc_pos])) >> 8) & 0xFF
    if hc != correct:
        broken = (xxh32(bytes(mv[0:hc_pos])) >> 8) & 0xFF
        if magic != 0 or hc != broken:
            raise ValueError("LZ4 frame descriptor checksum mismatch")
    if hc != correct:
        # Hand the standard decoder a frame with the correct checksum (KIP-57 v0 frames).
        patched = bytearray(mv)
        patched[hc_pos] = correct
        return bytes(cramjam.lz4.decompress(patched))
    return bytes(cramjam.lz4.decompress(mv))


# ---------------------------------------------------------------- public entry points
def compress(
    ctype: CompressionType | int,
    data: bytes | bytearray | memoryview,
    level: int | None = None,
    magic: int = 2,
) -> bytes:
    """Compress one batch's records (v2) or inner message set (v0/v1) with the codec Java uses."""
    ct = _as_type(ctype)
    _check_magic(ct, magic)
    validate_compression_level(ct, level)
    if ct is CompressionType.NONE:
        return bytes(data)
    if ct is CompressionType.GZIP:
        lvl = _DEFAULT_LEVELS[ct] if level is None else level
        return bytes(cramjam.gzip.compress(data, level=lvl))
    if ct is CompressionType.SNAPPY:
        return _snappy_compress(data)
    if ct is CompressionType.LZ4:
        return _lz4_compress(data, level, magic)
    lvl = _DEFAULT_LEVELS[ct] if level is None else level
    return bytes(cramjam.zstd.compress(data, level=lvl))


def decompress(
    ctype: CompressionType | int,
    data: bytes | bytearray | memoryview,
    magic: int = 2,
) -> bytes:
    """Inverse of :func:`compress`; also reads raw snappy and magic-0 LZ4 with the KIP-57 checksum."""
    ct = _as_type(ctype)
    if magic not in (0, 1, 2):
        raise ValueError(f"magic must be 0, 1 or 2, got {magic!r}")
    if ct is CompressionType.NONE:
        return bytes(data)
    if ct is CompressionType.GZIP:
        return bytes(cramjam.gzip.decompress(data))
    if ct is CompressionType.SNAPPY:
        return _snappy_decompress(data)
    if ct is CompressionType.LZ4:
        return _lz4_decompress(data, magic)
    return bytes(cramjam.zstd.decompress(data))
