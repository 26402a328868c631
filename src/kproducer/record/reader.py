"""Reading record batches back: magic 0, 1 and 2 (Kafka's documentation, "Message Format").

The producer itself never needs this on its hot path; it exists to check what
the builder wrote (tests, the split of an oversized batch, debugging tools) and
to read what other clients wrote. The magic byte sits at offset 16 in every
format, so each batch is dispatched on its own.
"""

from __future__ import annotations

import logging
import struct
import zlib
from abc import ABC, abstractmethod
from collections.abc import Iterator
from typing import NamedTuple

from kproducer.errors import CorruptRecordError
from kproducer.record.codecs import CompressionType, decompress
from kproducer.record.crc import crc32c as _crc32c
from kproducer.record.legacy import CODEC_MASK, LOG_OVERHEAD, TIMESTAMP_TYPE_MASK

__all__ = ["Record", "RecordBatch", "DefaultRecordBatch", "LegacyRecordBatch", "read_batches"]

logger = logging.getLogger(__name__)

_V2_HEADER = struct.Struct(">qiibIhiqqqhii")
_V2_HEADER_SIZE = 61
_LEGACY_HEAD = struct.Struct(">qiIbb")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class Record(NamedTuple):
    """One decoded record with its absolute offset."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


def _read_varint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    """Decode one zigzag varint/varlong; returns (value, next position)."""
    shift = 0
    result = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            break
        shift += 7
        if shift > 63:
            raise ValueError("varint is too long")
    return (result >> 1) ^ -(result & 1), pos


class RecordBatch(ABC):
    """Common header fields of a batch (v2) or top-level message (v0/v1)."""

    magic: int
    crc: int
    attributes: int
    partition_leader_epoch: int = -1
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    is_transactional: bool = False
    is_control: bool = False

    @property
    def compression(self) -> CompressionType:
        return CompressionType(self.attributes & CODEC_MASK)

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & TIMESTAMP_TYPE_MASK else 0

    @property
    @abstractmethod
    def base_offset(self) -> int:
        """Offset of the first record."""

    @property
    @abstractmethod
    def record_count(self) -> int:
        """Number of records (inner messages for a legacy wrapper)."""

    @property
    @abstractmethod
    def last_offset_delta(self) -> int:
        """Offset of the last record minus base_offset."""

    @property
    @abstractmethod
    def base_timestamp(self) -> int:
        """Timestamp of the first record (the message timestamp for v0/v1)."""

    @property
    @abstractmethod
    def max_timestamp(self) -> int:
        """Largest record timestamp (the wrapper timestamp for v0/v1)."""

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @abstractmethod
    def validate(self) -> None:
        """Check the checksum; raise CorruptRecordError naming the offset."""

    @abstractmethod
    def records(self) -> Iterator[Record]:
        """Decoded records with absolute offsets."""


class DefaultRecordBatch(RecordBatch):
    """A magic-2 record batch (61-byte header, CRC-32C from attributes to the end)."""

    _base_offset: int
    _last_offset_delta: int
    _base_timestamp: int
    _max_timestamp: int
    _record_count: int

    def __init__(self, data: memoryview) -> None:
        self._data = data
        (
            self._base_offset,
            self.batch_length,
            self.partition_leader_epoch,
            self.magic,
            self.crc,
            self.attributes,
            self._last_offset_delta,
            self._base_timestamp,
            self._max_timestamp,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            self._record_count,
        ) = _V2_HEADER.unpack_from(data, 0)
        self.is_transactional = bool(self.attributes & 0x10)
        self.is_control = bool(self.attributes & 0x20)

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def record_count(self) -> int:
        return self._record_count

    @property
    def last_offset_delta(self) -> int:
        return self._last_offset_delta

    @property
    def base_timestamp(self) -> int:
        return self._base_timestamp

    @property
    def max_timestamp(self) -> int:
        return self._max_timestamp

    @property
    def size_in_bytes(self) -> int:
        return len(self._data)

    def validate(self) -> None:
        """Check the CRC-32C; a mismatch means the bytes were damaged after close()."""
        computed = _crc32c(self._data[21:])
        if computed != self.crc:
            raise CorruptRecordError(
                f"record batch at offset {self._base_offset} is corrupt: "
                f"stored CRC-32C {self.crc:#010x}, computed {computed:#010x}"
            )

    def records(self) -> Iterator[Record]:
        body: bytes | memoryview = self._data[_V2_HEADER_SIZE:]
        if self.compression is not CompressionType.NONE:
            try:
                body = decompress(self.compression, body, 2)
            except (ValueError, OSError) as exc:
                raise CorruptRecordError(
                    f"record batch at offset {self._base_offset} failed to decompress: {exc}"
                ) from exc
        log_append = self.timestamp_type == 1
        pos = 0
        try:
            for _ in range(self.record_count):
                length, pos = _read_varint(body, pos)
                end = pos + length
                if end > len(body):
                    raise ValueError("record runs past the end of the batch")
                pos += 1  # attributes, unused
                ts_delta, pos = _read_varint(body, pos)
                offset_delta, pos = _read_varint(body, pos)
                klen, pos = _read_varint(body, pos)
                key = None
                if klen >= 0:
                    key = bytes(body[pos : pos + klen])
                    pos += klen
                vlen, pos = _read_varint(body, pos)
                value = None
                if vlen >= 0:
                    value = bytes(body[pos : pos + vlen])
                    pos += vlen
                hcount, pos = _read_varint(body, pos)
                headers: list[tuple[str, bytes | None]] = []
                for _h in range(hcount):
                    hklen, pos = _read_varint(body, pos)
                    hkey = bytes(body[pos : pos + hklen]).decode("utf-8")
                    pos += hklen
                    hvlen, pos = _read_varint(body, pos)
                    hval = None
                    if hvlen >= 0:
                        hval = bytes(body[pos : pos + hvlen])
                        pos += hvlen
                    headers.append((hkey, hval))
                if pos != end:
                    raise ValueError(f"record length {length} does not match its fields")
                ts = self.max_timestamp if log_append else self.base_timestamp + ts_delta
                yield Record(self._base_offset + offset_delta, ts, key, value, headers)
        except (ValueError, UnicodeDecodeError, IndexError) as exc:
            raise CorruptRecordError(
                f"record batch at offset {self._base_offset} has a malformed record: {exc}"
            ) from exc

    def __repr__(self) -> str:
        return (
            f"DefaultRecordBatch(base_offset={self._base_offset}, records={self.record_count}, "
            f"compression={self.compression.name.lower()}, producer_id={self.producer_id}, "
            f"base_sequence={self.base_sequence})"
        )


class LegacyRecordBatch(RecordBatch):
    """One top-level magic-0/1 message: a plain record or a compressed wrapper of inner messages."""

    producer_id = -1
    producer_epoch = -1
    base_sequence = -1
    offset: int
    timestamp: int

    def __init__(self, data: memoryview) -> None:
        self._data = data
        self.offset, self.size, self.crc, self.magic, self.attributes = _LEGACY_HEAD.unpack_from(data, 0)
        pos = 18
        self.timestamp = -1
        if self.magic == 1:
            (self.timestamp,) = _I64.unpack_from(data, pos)
            pos += 8
        self._key_pos = pos
        self._inner: list[Record] | None = None

    @property
    def size_in_bytes(self) -> int:
        return len(self._data)

    @property
    def base_timestamp(self) -> int:
        return self.timestamp

    @property
    def max_timestamp(self) -> int:
        return self.timestamp

    @property
    def last_offset(self) -> int:
        return self.offset

    @property
    def base_offset(self) -> int:
        if self.compression is CompressionType.NONE:
            return self.offset
        inner = self._records_list()
        return inner[0].offset if inner else self.offset

    @property
    def last_offset_delta(self) -> int:
        return self.offset - self.base_offset

    @property
    def record_count(self) -> int:
        if self.compression is CompressionType.NONE:
            return 1
        return len(self._records_list())

    def validate(self) -> None:
        """Check the CRC-32 over magic to the end of the message."""
        computed = zlib.crc32(self._data[16:])
        if computed != self.crc:
            raise CorruptRecordError(
                f"message at offset {self.offset} is corrupt: stored CRC-32 {self.crc:#010x}, computed {computed:#010x}"
            )

    def key_value(self) -> tuple[bytes | None, bytes | None]:
        data = self._data
        pos = self._key_pos
        (klen,) = _I32.unpack_from(data, pos)
        pos += 4
        key = None
        if klen >= 0:
            key = bytes(data[pos : pos + klen])
            pos += klen
        (vlen,) = _I32.unpack_from(data, pos)
        pos += 4
        value = None
        if vlen >= 0:
            value = bytes(data[pos : pos + vlen])
            pos += vlen
        if pos != len(data):
            raise CorruptRecordError(
                f"message at offset {self.offset} has a size that does not match its fields"
            )
        return key, value

    def _records_list(self) -> list[Record]:
        if self._inner is None:
            self._inner = list(self._decode())
        return self._inner

    def _decode(self) -> Iterator[Record]:
        try:
            key, value = self.key_value()
        except struct.error as exc:
            raise CorruptRecordError(f"message at offset {self.offset} is truncated: {exc}") from exc
        ctype = self.compression
        if ctype is CompressionType.NONE:
            yield Record(self.offset, self.timestamp, key, value, [])
            return
        if value is None:
            raise CorruptRecordError(f"compressed wrapper message at offset {self.offset} has a null value")
        try:
            inner_data = decompress(ctype, value, self.magic)
        except (ValueError, OSError) as exc:
            raise CorruptRecordError(
                f"wrapper message at offset {self.offset} failed to decompress: {exc}"
            ) from exc
        inner = [b for b in read_batches(inner_data) if isinstance(b, LegacyRecordBatch)]
        if not inner:
            return
        log_append = self.timestamp_type == 1
        # v1 inner offsets are relative (0..n-1); the wrapper carries the absolute last offset.
        relative = self.magic > 0
        shift = self.offset - inner[-1].offset if relative else 0
        for msg in inner:
            if msg.compression is not CompressionType.NONE:
                raise CorruptRecordError(
                    f"wrapper message at offset {self.offset} holds a nested compressed message"
                )
            msg.validate()
            ikey, ivalue = msg.key_value()
            ts = self.timestamp if log_append else msg.timestamp
            yield Record(msg.offset + shift, ts, ikey, ivalue, [])

    def records(self) -> Iterator[Record]:
        return iter(self._records_list())

    def __repr__(self) -> str:
        return f"LegacyRecordBatch(magic={self.magic}, offset={self.offset}, compression={self.compression.name.lower()})"


def read_batches(data: bytes | bytearray | memoryview) -> Iterator[RecordBatch]:
    """Split a buffer of concatenated batches/messages; a truncated trailing one is skipped, as consumers do."""
    mv = memoryview(data).cast("B")
    pos = 0
    end = len(mv)
    while pos + LOG_OVERHEAD + 5 <= end:
        (length,) = _I32.unpack_from(mv, pos + 8)
        magic = mv[pos + 16]
        total = LOG_OVERHEAD + length
        if length < 0:
            raise CorruptRecordError(f"batch at byte {pos} has a negative length {length}")
        if pos + total > end:
            logger.debug(
                "skipping a truncated trailing batch at byte %d (%d of %d bytes)", pos, end - pos, total
            )
            return
        chunk = mv[pos : pos + total]
        if magic == 2:
            if total < _V2_HEADER_SIZE:
                raise CorruptRecordError(f"v2 batch at byte {pos} is shorter than its 61-byte header")
            yield DefaultRecordBatch(chunk)
        elif magic in (0, 1):
            if length < (14 if magic == 0 else 22):
                raise CorruptRecordError(f"message at byte {pos} is shorter than its header")
            yield LegacyRecordBatch(chunk)
        else:
            raise CorruptRecordError(f"batch at byte {pos} has unknown magic {magic}")
        pos += total
