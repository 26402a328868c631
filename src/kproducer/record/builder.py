"""MemoryRecordsBuilder: encodes records into one batch in place (Java's ``MemoryRecordsBuilder``).

Records are appended to the ``bytearray`` handed in (from the BufferPool) at a
tracked position; the buffer may be pre-sized, so writes are slice assignments
that grow it only when needed. For magic 2 the 61-byte batch header is written
once at :meth:`MemoryRecordsBuilder.close`, with the CRC-32C over attributes to
the end. With compression the records are written uncompressed first and
compressed at close; ``has_room_for``/``is_full`` then use an estimated
compression ratio (Java's ``CompressionRatioEstimator``), so that a batch fills
to about ``write_limit`` compressed bytes.

Magic 0 and 1 build legacy message sets (see :mod:`kproducer.record.legacy`).

The record encoding itself is :mod:`kproducer.record.default_record`, the ratio
estimate :mod:`kproducer.record.compression_ratio`. The builder is one concept,
as Java's ``MemoryRecordsBuilder`` is: appending (v2 and legacy), sizing,
producer state and closing all work on the same fields. Those the C send lane
appends through are declared by :class:`MemoryRecordsBuilderCore` (a C type, or
its Python twin), whose own C function appends a record for the lane.
"""

from __future__ import annotations

import logging
import struct
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kproducer.errors import IllegalStateError
from kproducer.record import native
from kproducer.record.arrow_column import column_rows
from kproducer.record.c_extension import c
from kproducer.record.codecs import (
    CompressionType,
    compress,
    compression_type_for_name,
    validate_compression_level,
)
from kproducer.record.compression_ratio import (
    MAX_STAGING_BYTES,
    STAGING_RATIO_FLOOR,
    CompressionRatioEstimator,
    _initial_ratio,
)
from kproducer.record.compression_worker import CompressionJob, CompressionWorker, submit_args
from kproducer.record.crc import crc32c as _crc32c
from kproducer.record.default_record import (
    _VARINT_LEN,
    COMPRESSION_RATE_ESTIMATION_FACTOR,
    NO_HEADERS,
    encode_record,
    has_room,
    record_size,
    varint_size,
)
from kproducer.record.default_record import byte_len as _byte_len
from kproducer.record.default_record import coerce_bytes as _coerce_bytes
from kproducer.record.default_record import encode_headers as _encode_headers
from kproducer.record.legacy import (
    LOG_OVERHEAD,
    encode_legacy_record,
    legacy_record_size,
    record_overhead,
)

__all__ = [
    "MemoryRecordsBuilder",
    "CompressionRatioEstimator",
    "MAX_STAGING_BYTES",
    "STAGING_RATIO_FLOOR",
    "COMPRESSION_RATE_ESTIMATION_FACTOR",
    "estimate_size_upper_bound",
    "RECORD_BATCH_OVERHEAD",
    "NO_TIMESTAMP",
    "Header",
]

logger = logging.getLogger(__name__)

Header = tuple[str, "bytes | bytearray | memoryview | None"]
BytesLike = bytes | bytearray | memoryview

NO_TIMESTAMP = -1
RECORD_BATCH_OVERHEAD = 61
MAX_RECORD_OVERHEAD = 21  # Java DefaultRecord.MAX_RECORD_OVERHEAD
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
# Timestamps are int64 milliseconds on the wire.
MAX_TIMESTAMP = (1 << 63) - 1

# v2 batch header layout (offsets into the batch).
BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21


_ZERO = NO_HEADERS  # a headers block with no headers: a count of 0
# The v2 record encoder with its room check fused in: the C one (kproducer._speedups) when built,
# else its reference, kproducer.record.default_record.append_record.
_append_record = native.append_record
_largest_record = native.largest_record
# CompressionType.NONE as a global: read through the Enum class it is a lookup through the
# metaclass that the interpreter does not specialise, and the Python append asks for it per
# record, the size estimate, the fullness check and close several times a batch.
_NO_COMPRESSION = CompressionType.NONE


def _headers_size(headers: Sequence[Header] | None) -> int:
    if not headers:
        return 1
    return _encode_headers(headers)[1]


def estimate_size_upper_bound(
    magic: int,
    compression: CompressionType | int,
    key: BytesLike | None,
    value: BytesLike | None,
    headers: Sequence[Header] | None,
) -> int:
    """Upper bound of a batch holding just this record (Java's estimateSizeInBytesUpperBound).

    The accumulator allocates ``max(batch.size, this)`` so that a record larger
    than ``batch.size`` still gets a batch of its own.
    """
    if magic >= 2 and not headers and (key is None or key.__class__ is bytes) and value.__class__ is bytes:
        # The common case (bytes value, optional bytes key, no headers) without the generic helpers.
        k = -1 if key is None else len(key)
        v = len(value)
        L = _VARINT_LEN
        size = (L[k] + k if 0 <= k < 16384 else varint_size(k) + max(k, 0)) + (
            L[v] + v if v < 16384 else varint_size(v) + v
        )
        return RECORD_BATCH_OVERHEAD + MAX_RECORD_OVERHEAD + size + 1
    k = _byte_len(_coerce_bytes("key", key))
    v = _byte_len(_coerce_bytes("value", value))
    if magic >= 2:
        size = varint_size(k) + max(k, 0) + varint_size(v) + max(v, 0) + _headers_size(headers)
        return RECORD_BATCH_OVERHEAD + MAX_RECORD_OVERHEAD + size
    if headers:
        raise ValueError(f"headers are not supported with magic {magic}; they need magic 2")
    size = LOG_OVERHEAD + legacy_record_size(magic, k, v)
    if CompressionType(compression) is not CompressionType.NONE:
        size += LOG_OVERHEAD + record_overhead(magic)
    return size


class PyMemoryRecordsBuilderCore:
    """The builder's fields the C code works on, and its per-batch steps; the Python twin of the C type.

    ``kproducer._speedups.MemoryRecordsBuilderCore`` declares the same fields and the same
    methods: its C functions append a record for the send lane (as
    :meth:`MemoryRecordsBuilder.try_append` does) and write the batch header when the Sender
    closes the batch (:meth:`write_default_batch_header`, this class's method being the
    reference). :class:`MemoryRecordsBuilder` builds on whichever runs and sets the fields itself.
    """

    __slots__ = (
        "_buf",
        "_magic",
        "_compression",
        "_write_limit",
        "_records_start",
        "_pos",
        "_num_records",
        "_base_timestamp",
        "_max_timestamp",
        "_closed",
        "_estimated_ratio",
        "_sealed",
        "_timestamp_type",
        "_base_offset",
        "_producer_id",
        "_producer_epoch",
        "_base_sequence",
        "_is_transactional",
        "_partition_leader_epoch",
        "_is_control",
        "_size",
        "_compressed_records_size",
    )
    # Set by MemoryRecordsBuilder._set_state (declared here for type checkers; slots hold them).
    _buf: bytearray
    _magic: int
    _compression: CompressionType
    _write_limit: int
    _records_start: int
    _pos: int
    _num_records: int
    _base_timestamp: int
    _max_timestamp: int
    _closed: bool
    _estimated_ratio: float
    _sealed: bool
    _timestamp_type: int
    _base_offset: int
    _producer_id: int
    _producer_epoch: int
    _base_sequence: int
    _is_transactional: bool
    _partition_leader_epoch: int
    _is_control: bool
    _size: int
    _compressed_records_size: int

    def write_default_batch_header(self, crc32c: Callable[..., int]) -> None:
        """The v2 batch header and its CRC, once the records are final (Java's ``writeDefaultBatchHeader``).

        The records, compressed or not, are the ``_compressed_records_size`` bytes from
        ``_records_start``; ``_size`` is set to where they end, last. ``crc32c`` is
        :func:`kproducer.record.crc.crc32c`, called as ``crc32c(data, 0, 0)``: value 0 and
        ``gil_release_mode=0``. A batch's CRC takes microseconds (hardware CRC-32C), while letting
        go of the GIL costs the Sender thread up to a switch interval (5 ms) to get it back from a
        busy caller thread, once per batch (docs/architecture.md, "The GIL and the Sender's system
        calls"); and the package parses keyword arguments at several times the cost of a small
        batch's checksum, so they are passed by position. A field out of its header range
        raises ``struct.error``, as ``struct.pack_into`` does.
        """
        buf = self._buf
        start = self._records_start
        end = start + self._compressed_records_size
        if start < RECORD_BATCH_OVERHEAD or end < start or end > len(buf) or end - 12 > 0x7FFFFFFF:
            raise ValueError(
                f"the batch's records (bytes {start}..{end}) do not fit its buffer of {len(buf)} bytes after the header"
            )
        attributes = int(self._compression) | (self._timestamp_type << 3)
        if self._is_transactional:
            attributes |= TRANSACTIONAL_FLAG
        if self._is_control:
            attributes |= CONTROL_FLAG
        num_records = self._num_records
        if num_records < 1:  # last_offset_delta would be -1: an empty batch has no header
            raise struct.error(f"the batch header's _num_records ({num_records}) is out of range 1..{0x7FFFFFFF}")
        # Packed apart first: a field out of range then raises with the buffer untouched.
        buf[:RECORD_BATCH_OVERHEAD] = BATCH_HEADER.pack(
            self._base_offset,
            end - 12,
            self._partition_leader_epoch,
            2,
            0,
            attributes,
            num_records - 1,
            self._base_timestamp,
            self._max_timestamp,
            self._producer_id,
            self._producer_epoch,
            self._base_sequence,
            num_records,
        )
        with memoryview(buf) as mv:
            crc = crc32c(mv[ATTRIBUTES_OFFSET:end], 0, 0)
        struct.pack_into(">I", buf, CRC_OFFSET, crc)
        self._size = end


if TYPE_CHECKING:
    MemoryRecordsBuilderCore = PyMemoryRecordsBuilderCore
else:
    MemoryRecordsBuilderCore = c.MemoryRecordsBuilderCore if c is not None else PyMemoryRecordsBuilderCore


class MemoryRecordsBuilder(MemoryRecordsBuilderCore):
    """Builds one record batch in a caller-supplied bytearray (as in Java's producer)."""

    __slots__ = (
        "_compression_level",
        "_uncompressed_records_size",
        "_largest_record_size",
        "_topic",
        "_ratio_estimator",
        "_job",
    )

    def __init__(
        self,
        buffer: bytearray,
        *,
        magic: int = 2,
        compression: CompressionType | int | str = CompressionType.NONE,
        compression_level: int | None = None,
        timestamp_type: int = 0,
        base_offset: int = 0,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        partition_leader_epoch: int = -1,
        write_limit: int,
        is_control: bool = False,
        estimated_compression_ratio: float | None = None,
        topic: str | None = None,
        ratio_estimator: CompressionRatioEstimator | None = None,
    ) -> None:
        if not isinstance(buffer, bytearray):
            raise TypeError(f"buffer must be a bytearray, got {type(buffer).__name__}")
        if magic not in (0, 1, 2):
            raise ValueError(f"magic must be 0, 1 or 2, got {magic!r}")
        if isinstance(compression, str):
            ctype = compression_type_for_name(compression)
        else:
            try:
                ctype = CompressionType(compression)
            except ValueError:
                raise ValueError(
                    f"compression must be a CompressionType (0..4) or one of none, gzip, snappy, lz4, zstd; "
                    f"got {compression!r}"
                ) from None
        if ctype is CompressionType.ZSTD and magic < 2:
            raise ValueError(f"compression zstd requires magic 2, got magic {magic}")
        validate_compression_level(ctype, compression_level)
        if timestamp_type not in (0, 1):
            raise ValueError(
                f"timestamp_type must be 0 (CreateTime) or 1 (LogAppendTime), got {timestamp_type!r}"
            )
        if magic == 0 and timestamp_type != 0:
            raise ValueError("timestamp_type must be 0 with magic 0 (v0 messages have no timestamp)")
        if isinstance(write_limit, bool) or not isinstance(write_limit, int) or write_limit <= 0:
            raise ValueError(f"write_limit must be a positive int, got {write_limit!r}")
        if magic < 2 and (
            producer_id != -1 or producer_epoch != -1 or base_sequence != -1 or is_transactional
        ):
            raise ValueError(f"idempotent/transactional producer state needs magic 2, got magic {magic}")
        if is_control and magic != 2:
            raise ValueError(f"a control batch (transaction markers) needs magic 2, got magic {magic}")
        if magic == 2:
            start = RECORD_BATCH_OVERHEAD
        elif ctype is not _NO_COMPRESSION:
            start = LOG_OVERHEAD + record_overhead(magic)
        else:
            start = 0
        if estimated_compression_ratio is None:
            if ratio_estimator is not None and topic is not None:
                estimated_compression_ratio = _initial_ratio(ratio_estimator, topic, ctype)
            else:
                estimated_compression_ratio = 1.0
        self._set_state(
            buffer, magic, ctype, compression_level, write_limit, start, topic, ratio_estimator,
            float(estimated_compression_ratio), timestamp_type, base_offset, producer_id, producer_epoch,
            base_sequence, bool(is_transactional), partition_leader_epoch, bool(is_control),
        )  # fmt: skip

    def _set_state(
        self,
        buffer: bytearray,
        magic: int,
        ctype: CompressionType,
        compression_level: int | None,
        write_limit: int,
        start: int,
        topic: str | None,
        ratio_estimator: CompressionRatioEstimator | None,
        estimated_ratio: float,
        timestamp_type: int = 0,
        base_offset: int = 0,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        is_transactional: bool = False,
        partition_leader_epoch: int = -1,
        is_control: bool = False,
    ) -> None:
        """Every slot of an empty builder (the checked constructor and for_batch share it)."""
        self._buf = buffer
        self._magic = magic
        self._compression = ctype
        self._compression_level = compression_level
        self._timestamp_type = timestamp_type
        self._base_offset = base_offset
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._is_transactional = is_transactional
        self._partition_leader_epoch = partition_leader_epoch
        self._write_limit = write_limit
        self._records_start = start
        self._pos = start
        self._num_records = 0
        self._base_timestamp = NO_TIMESTAMP
        self._max_timestamp = NO_TIMESTAMP
        self._closed = False
        self._size = 0
        self._compressed_records_size = 0
        # Sealed: the records are compressed already (close_for_record_appends); close() adds the header.
        self._sealed = False
        self._uncompressed_records_size = 0
        # The largest record's size, read once the records are final (before any compression).
        self._largest_record_size = 0
        self._topic = topic
        self._ratio_estimator = ratio_estimator
        self._estimated_ratio = estimated_ratio
        self._is_control = is_control
        # A compression running on the worker thread (start_compression), until close takes its result.
        self._job: CompressionJob | None = None
        if len(buffer) < start:
            buffer.extend(bytes(start - len(buffer)))

    @classmethod
    def for_batch(
        cls,
        buffer: bytearray,
        compression: CompressionType,
        compression_level: int | None,
        write_limit: int,
        topic: str,
        ratio_estimator: CompressionRatioEstimator | None,
    ) -> MemoryRecordsBuilder:
        """A v2 builder for the accumulator's next batch, without re-checking what its config checked.

        The same state as ``MemoryRecordsBuilder(buffer, magic=2, compression=...,
        write_limit=..., topic=..., ratio_estimator=...)``; a new batch is opened
        every ``batch.size`` bytes, so the argument checks are paid once, at config time.
        """
        self = cls.__new__(cls)
        ratio = 1.0 if ratio_estimator is None else _initial_ratio(ratio_estimator, topic, compression)
        self._set_state(
            buffer, 2, compression, compression_level, write_limit, RECORD_BATCH_OVERHEAD, topic, ratio_estimator, ratio
        )
        return self

    # ------------------------------------------------------------ appending
    def append(
        self,
        timestamp: int,
        key: BytesLike | None,
        value: BytesLike | None,
        headers: Sequence[Header] | None = None,
    ) -> None:
        """Append one record at the next offset (Java's appendWithOffset)."""
        if self._closed or self._sealed:
            raise IllegalStateError("cannot append to a closed MemoryRecordsBuilder")
        if timestamp.__class__ is not int:
            if isinstance(timestamp, bool) or not isinstance(timestamp, int):
                raise TypeError(f"timestamp must be an int (ms), got {type(timestamp).__name__}")
            timestamp = int(timestamp)
        if (timestamp < 0 and timestamp != NO_TIMESTAMP) or timestamp > MAX_TIMESTAMP:
            raise ValueError(f"timestamp must be in 0..{MAX_TIMESTAMP} (ms) or -1 (NO_TIMESTAMP), got {timestamp}")
        if self._magic != 2:
            self._append_legacy(timestamp, key, value, headers)
            return
        if key is not None and key.__class__ is not bytes:
            key = _coerce_bytes("key", key)
        if value is not None and value.__class__ is not bytes:
            value = _coerce_bytes("value", value)
        n = self._num_records
        if n == 0:
            self._base_timestamp = timestamp
            td = 0
        else:
            td = timestamp - self._base_timestamp
        if headers:
            he = _encode_headers(headers)[0]
        elif headers is None or isinstance(headers, Sequence):
            he = _ZERO
        else:
            raise TypeError(
                f"headers must be a sequence of (str, bytes | None) tuples, got {type(headers).__name__}"
            )
        rec = encode_record(n, td, key, value, he)
        pos = self._pos
        end = pos + len(rec)
        self._buf[pos:end] = rec
        self._pos = end
        self._num_records = n + 1
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp

    def try_append(
        self,
        timestamp: int,
        key: BytesLike | None,
        value: BytesLike | None,
        headers: Sequence[Header] | None = None,
    ) -> bool:
        """``has_room_for`` and ``append`` in one step: False (nothing written) when the record does not fit.

        A v2 record with bytes (or None) key and value is sized, checked and
        encoded in one call of ``append_record``: the C one when the speedups
        are built, else its reference,
        :func:`kproducer.record.default_record.append_record`. Anything else
        (other key or value types, magic 0/1) takes :meth:`has_room_for` and
        :meth:`append`, which encode with the same reference.
        """
        if (
            self._magic == 2
            and not self._closed
            and not self._sealed
            and timestamp.__class__ is int
            and NO_TIMESTAMP <= timestamp <= MAX_TIMESTAMP
            and (key is None or key.__class__ is bytes)
            and (value is None or value.__class__ is bytes)
        ):
            if headers is None:
                he = None
            else:
                he = _encode_headers(headers)[0] if headers else None
                if he is None and not isinstance(headers, Sequence):
                    raise TypeError(
                        f"headers must be a sequence of (str, bytes | None) tuples, got {type(headers).__name__}"
                    )
            n = self._num_records
            pos = _append_record(
                self._buf,
                self._pos,
                self._write_limit,
                self._records_start,
                0.0 if self._compression is _NO_COMPRESSION else self._estimated_ratio,
                n,
                timestamp - self._base_timestamp if n else 0,
                key,
                value,
                he,
            )
            if pos < 0:
                return False
            self._appended(pos, 1, timestamp)
            return True
        if not self.has_room_for(timestamp, key, value, headers):
            return False
        self.append(timestamp, key, value, headers)
        return True

    def append_many(
        self,
        timestamp: int,
        values: Sequence[BytesLike | None] | native.ArrowColumn,
        keys: Sequence[BytesLike | None] | native.ArrowColumn | None,
        indices: bytes | None,
        start: int,
        end: int,
        encoded_headers: bytes | None,
        *,
        arrow: bool = False,
    ) -> int:
        """Append records ``start..end`` (rows, or entries of the int64 ``indices``) while they fit.

        All get ``timestamp``. ``values``/``keys`` are sequences of bytes or, with
        ``arrow``, Arrow column buffers (see :mod:`kproducer.record.native`); no
        Python object is made per record. Returns how many were appended: at least
        one into an empty batch, 0 when the next one does not fit.
        """
        if self._closed or self._sealed:
            raise IllegalStateError("cannot append to a closed MemoryRecordsBuilder")
        if timestamp.__class__ is not int or not 0 <= timestamp <= MAX_TIMESTAMP:
            raise ValueError(f"timestamp must be an int in 0..{MAX_TIMESTAMP} (ms), got {timestamp!r}")
        if start >= end:
            return 0
        if self._magic != 2:
            return self._append_many_legacy(timestamp, values, keys, indices, start, end, encoded_headers, arrow)
        n = self._num_records
        fn = native.append_arrow if arrow else native.append_seq
        pos, count = fn(
            self._buf,
            self._pos,
            self._write_limit,
            self._records_start,
            0.0 if self._compression is _NO_COMPRESSION else self._estimated_ratio,
            n,
            timestamp - self._base_timestamp if n else 0,
            values,
            keys,
            indices,
            start,
            end,
            encoded_headers,
        )
        if count:
            self._appended(pos, count, timestamp)
        return int(count)

    def _appended(self, pos: int, count: int, timestamp: int) -> None:
        """Bookkeeping after the native encoder wrote ``count`` records (all at ``timestamp``) up to ``pos``."""
        if self._num_records == 0:
            self._base_timestamp = timestamp
        self._pos = pos
        self._num_records += count
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp

    def _append_many_legacy(
        self,
        timestamp: int,
        values: Any,
        keys: Any,
        indices: bytes | None,
        start: int,
        end: int,
        encoded_headers: bytes | None,
        arrow: bool,
    ) -> int:
        """Magic 0/1 (old brokers): one record at a time through ``append``."""
        if encoded_headers is not None and encoded_headers != _ZERO:
            raise ValueError(f"headers are not supported with magic {self._magic}; they need magic 2")
        rows = memoryview(indices).cast("B").cast("q") if indices is not None else None
        if arrow:
            values = column_rows(values)
            keys = column_rows(keys) if keys is not None else None
        count = 0
        for j in range(start, end):
            i = rows[j] if rows is not None else j
            key = keys[i] if keys is not None else None
            value = values[i]
            if not self.has_room_for(timestamp, key, value, None):
                break
            self.append(timestamp, key, value, None)
            count += 1
        return count

    def _append_legacy(
        self,
        timestamp: int,
        key: BytesLike | None,
        value: BytesLike | None,
        headers: Sequence[Header] | None,
    ) -> None:
        if headers:
            raise ValueError(f"headers are not supported with magic {self._magic}; they need magic 2")
        key = _coerce_bytes("key", key)
        value = _coerce_bytes("value", value)
        n = self._num_records
        compressed = self._compression is not _NO_COMPRESSION
        # Inner offsets of a compressed v1 set are relative; v0 keeps absolute offsets (as Java).
        offset = n if (compressed and self._magic > 0) else self._base_offset + n
        attributes = (self._timestamp_type << 3) if self._magic == 1 else 0
        ts = timestamp if self._magic == 1 else NO_TIMESTAMP
        rec = encode_legacy_record(offset, self._magic, attributes, ts, key, value)
        pos = self._pos
        end = pos + len(rec)
        self._buf[pos:end] = rec
        self._pos = end
        if n == 0:
            self._base_timestamp = timestamp
        self._num_records = n + 1
        if timestamp > self._max_timestamp:
            self._max_timestamp = timestamp

    # ------------------------------------------------------------ sizing
    def _batch_header_size(self) -> int:
        if self._magic == 2:
            return RECORD_BATCH_OVERHEAD
        return self._records_start

    def _estimated_bytes_written(self) -> int:
        uncompressed = self._pos - self._records_start
        if self._compression is _NO_COMPRESSION:
            return self._records_start + uncompressed
        return self._records_start + int(
            uncompressed * self._estimated_ratio * COMPRESSION_RATE_ESTIMATION_FACTOR
        )

    def has_room_for(
        self,
        timestamp: int,
        key: BytesLike | None,
        value: BytesLike | None,
        headers: Sequence[Header] | None = None,
    ) -> bool:
        """Whether this record fits under ``write_limit``; always True for an empty open batch."""
        if self._closed or self._sealed:
            return False
        n = self._num_records
        if n == 0:
            return True
        ratio = 0.0 if self._compression is _NO_COMPRESSION else self._estimated_ratio
        pos, limit, start = self._pos, self._write_limit, self._records_start
        try:
            k = len(key) if key.__class__ is bytes else _byte_len(_coerce_bytes("key", key))
            v = len(value) if value.__class__ is bytes else _byte_len(_coerce_bytes("value", value))
            if self._magic < 2:
                size = LOG_OVERHEAD + legacy_record_size(self._magic, k, v)
            else:
                hsize = 1 if headers is None else _headers_size(headers)
                size = record_size(n, timestamp - self._base_timestamp, k, v, hsize)
        except (TypeError, ValueError):
            if not has_room(pos, limit, start, ratio, n, 0):
                return False  # full already: whatever the record is, it does not fit
            raise
        return has_room(pos, limit, start, ratio, n, size)

    def is_full(self) -> bool:
        """Closed, or at least one record and the estimated size reached ``write_limit``."""
        if self._closed or self._sealed:
            return True
        if self._compression is _NO_COMPRESSION:
            return self._num_records > 0 and self._write_limit <= self._pos
        return self._num_records > 0 and self._write_limit <= self._estimated_bytes_written()

    def estimated_size_in_bytes(self) -> int:
        """Exact size once closed, the (compression-ratio) estimate before."""
        if self._closed:
            return self._size
        if self._sealed:
            return self._records_start + self._compressed_records_size
        if self._compression is _NO_COMPRESSION:
            return self._pos
        return self._estimated_bytes_written()

    def set_estimated_compression_ratio(self, ratio: float) -> None:
        """Use a per-topic estimate from the accumulator's CompressionRatioEstimator."""
        if not ratio > 0:
            raise ValueError(f"estimated compression ratio must be > 0, got {ratio!r}")
        self._estimated_ratio = float(ratio)

    @property
    def estimated_compression_ratio(self) -> float:
        return self._estimated_ratio

    @property
    def num_records(self) -> int:
        return self._num_records

    @property
    def max_timestamp(self) -> int:
        return self._max_timestamp

    @property
    def magic(self) -> int:
        return self._magic

    @property
    def compression(self) -> CompressionType:
        return self._compression

    @property
    def base_offset(self) -> int:
        return self._base_offset

    @property
    def producer_id(self) -> int:
        return self._producer_id

    @property
    def producer_epoch(self) -> int:
        return self._producer_epoch

    @property
    def base_sequence(self) -> int:
        return self._base_sequence

    @property
    def is_transactional(self) -> bool:
        return self._is_transactional

    @property
    def is_control(self) -> bool:
        """A control batch carries transaction markers (attribute bit 5), never user records."""
        return self._is_control

    @property
    def write_limit(self) -> int:
        return self._write_limit

    def grow_write_limit(self, write_limit: int) -> None:
        """Raise the limit of an open batch whose memory was just grown (KIP-782 expandable batches).

        The buffer itself grows as records are written (the C encoder by doubling); only
        the room changes here. Never lowers it: what was appended stays within the limit.
        """
        if self._closed or self._sealed:
            raise IllegalStateError("cannot grow a closed MemoryRecordsBuilder")
        if write_limit > self._write_limit:
            self._write_limit = write_limit

    @property
    def is_closed(self) -> bool:
        return self._closed

    @property
    def size_in_bytes(self) -> int:
        """Size of the finished batch (0 before close and for an empty batch)."""
        return self._size

    @property
    def uncompressed_size(self) -> int:
        """Bytes of records as encoded before compression (plus the batch header)."""
        return self._uncompressed_records() + self._batch_header_size()

    @property
    def records_size(self) -> int:
        """Bytes of the records as encoded before compression, without the batch header."""
        return self._uncompressed_records()

    @property
    def largest_record_size(self) -> int:
        """The largest v2 record's size in bytes (as encoded, before compression), once the
        records are final (compressed or closed); 0 before then and for magic 0/1."""
        return self._largest_record_size

    def _uncompressed_records(self) -> int:
        return self._uncompressed_records_size if self._sealed else self._pos - self._records_start

    @property
    def compression_rate(self) -> float:
        """Compressed / uncompressed records size after close (1.0 without compression or records)."""
        uncompressed = self._uncompressed_records()
        if not self._closed or uncompressed == 0 or self._compression is _NO_COMPRESSION:
            return 1.0
        return self._compressed_records_size / uncompressed

    # ------------------------------------------------------------ producer state
    def set_producer_state(
        self, producer_id: int, producer_epoch: int, base_sequence: int, is_transactional: bool
    ) -> None:
        """Assign the idempotence/transaction fields before close (Java's setProducerState)."""
        if self._closed:
            raise IllegalStateError("cannot set producer state on a closed batch; use rewrite_producer_state")
        if self._magic < 2 and (
            producer_id != -1 or producer_epoch != -1 or base_sequence != -1 or is_transactional
        ):
            raise ValueError(
                f"idempotent/transactional producer state needs magic 2, got magic {self._magic}"
            )
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._is_transactional = bool(is_transactional)

    def rewrite_producer_state(
        self, producer_id: int, producer_epoch: int, base_sequence: int, is_transactional: bool
    ) -> None:
        """Patch producer id/epoch/sequence and the transactional bit of a closed v2 batch and redo the CRC.

        Used when a retried batch gets a new epoch or sequence (epoch bump after
        an OutOfOrderSequence / UnknownProducerId); the records stay untouched.
        """
        if not self._closed:
            self.set_producer_state(producer_id, producer_epoch, base_sequence, is_transactional)
            return
        if self._magic < 2:
            raise ValueError(f"producer state cannot be written into a magic {self._magic} batch")
        self._producer_id = producer_id
        self._producer_epoch = producer_epoch
        self._base_sequence = base_sequence
        self._is_transactional = bool(is_transactional)
        if self._size == 0:
            return
        # The other fields are those the batch was closed with: the header is written again whole.
        self.write_default_batch_header(_crc32c)

    # ------------------------------------------------------------ closing
    def close_for_record_appends(self, capacity: int | None = None) -> None:
        """No more records: compress them now, so that a batch waiting to be drained holds its
        compressed bytes rather than its records (Java's closeForRecordAppends closes the
        compression stream). The header and CRC are still written by :meth:`close`, after the
        producer state is known. A buffer that grew past ``capacity`` (a compressed batch whose
        records outran the estimate) is cut back to ``capacity``, or to the compressed bytes when
        they do not fit in it.
        Without compression, or for v0/v1, this does nothing: close() does it all.
        """
        if self._job is not None:
            self._take_compressed()
            if self._sealed:
                self._trim(capacity, self._records_start + self._compressed_records_size)
                return
        if self._closed or self._sealed or self._magic != 2 or self._compression is _NO_COMPRESSION:
            return
        if self._num_records == 0:
            return
        buf = self._buf
        start, end = self._records_start, self._pos
        self._largest_record_size = _largest_record(buf, start, end)
        with memoryview(buf) as mv:
            compressed = compress(self._compression, mv[start:end], self._compression_level, 2)
        buf[start : start + len(compressed)] = compressed
        self._uncompressed_records_size = end - start
        self._compressed_records_size = len(compressed)
        self._sealed = True
        self._trim(capacity, start + len(compressed))

    def _trim(self, capacity: int | None, used: int) -> None:
        if capacity is not None:
            keep = max(capacity, used)
            if len(self._buf) > keep:
                del self._buf[keep:]

    @property
    def buffer_object(self) -> bytearray:
        """The bytearray this builder writes into (a staging buffer until ``move_to``)."""
        return self._buf

    def _final_bytes(self, caller: str) -> int:
        """Bytes of the buffer in use once the records are compressed or the batch closed."""
        if self._closed:
            return self._size
        if self._sealed:
            return self._records_start + self._compressed_records_size
        raise IllegalStateError(f"{caller}() needs the records compressed or the batch closed")

    def cut_back(self, capacity: int) -> None:
        """Shorten the buffer to ``capacity``, or to the bytes in use when they do not fit in it.
        Only once the records are compressed or the batch is closed (as :meth:`move_to`)."""
        self._trim(capacity, self._final_bytes("cut_back"))

    def move_to(self, final: bytearray) -> None:
        """Continue in ``final``: copy the bytes written so far (compressed records, or the whole
        closed batch) to its start, growing it if they do not fit. Only once the records are
        compressed or the batch is closed, when what is left to write is the header."""
        used = self._final_bytes("move_to")
        if final is self._buf:
            return
        with memoryview(self._buf) as mv:
            final[:used] = mv[:used]
        self._buf = final

    def start_compression(self, worker: CompressionWorker) -> bool:
        """Queue the records on the compression worker: close_for_record_appends' work, off the GIL.

        The batch must be closed for appends. False when this batch is not the worker's
        (magic 0/1, no records, already compressed, gzip or snappy, a closed worker or a
        forked child's copy): it is then compressed in Python as before. While the job
        runs, the worker owns the records' bytes; ``close_for_record_appends`` and
        ``close`` take its result (compression_worker's docstring).
        """
        if self._closed or self._sealed or self._job is not None or self._magic != 2 or self._num_records == 0:
            return False
        ctype = self._compression
        if ctype is not CompressionType.LZ4 and ctype is not CompressionType.ZSTD:
            return False
        codec, level, header = submit_args(ctype, self._compression_level)
        start, end = self._records_start, self._pos
        self._largest_record_size = _largest_record(self._buf, start, end)
        try:
            self._job = worker.submit(codec, level, header, self._buf, start, end)
        except RuntimeError:
            return False
        self._uncompressed_records_size = end - start
        return True

    def wait_for_compression(self) -> None:
        """Block until the worker has finished this batch (if it has one): call it holding no lock."""
        job = self._job
        if job is not None:
            job.wait()

    def compression_running(self) -> bool:
        """Whether the worker is still compressing this batch."""
        job = self._job
        return job is not None and not job.done()

    def compression_pending(self) -> bool:
        """Whether the worker is still compressing this batch; if so it wakes the Sender when done."""
        job = self._job
        return job is not None and not job.wake_when_done()

    def _take_compressed(self) -> None:
        """Install the worker's result (waiting for it if needed); on a codec error, fall back to Python."""
        job = self._job
        assert job is not None
        self._job = None
        try:
            out = job.result()
        except ValueError as e:
            logger.warning("the compression worker failed (%s); compressing this batch in Python", e)
            return
        if isinstance(out, int):
            self._compressed_records_size = out
        else:  # larger than the buffer: incompressible records
            start = self._records_start
            self._buf[start : start + len(out)] = out
            self._compressed_records_size = len(out)
        self._sealed = True

    def close(self, capacity: int | None = None) -> None:
        """Compress (if configured), write the batch header and CRC once; idempotent.

        As in :meth:`close_for_record_appends`, a buffer that grew past ``capacity``
        while the records were staged uncompressed is cut back once they are
        compressed: an in-flight batch then holds its pooled buffer, not records
        several times ``batch.size`` that ``buffer.memory`` does not count.
        """
        if self._closed:
            return
        if self._job is not None:
            self._take_compressed()
        self._closed = True
        if self._num_records == 0:
            self._size = 0
            return
        estimator = self._ratio_estimator
        topic = self._topic
        if self._compression is _NO_COMPRESSION or not topic:
            estimator = None
        # Judged before compression, by the estimate the batch was filled with (see the estimator).
        full = estimator is not None and self._estimated_bytes_written() * 2 >= self._write_limit
        if self._magic == 2:
            self._close_v2()
        else:
            self._close_legacy()
        if capacity is not None and len(self._buf) > max(capacity, self._size):
            del self._buf[max(capacity, self._size) :]
        if estimator is not None and topic:
            estimator.update_estimation(topic, self._compression, self.compression_rate, full)

    def _close_v2(self) -> None:
        """The records final (compressed here unless sealed already), then the header and CRC."""
        if not self._sealed:
            buf = self._buf
            start = self._records_start
            end = self._pos
            ctype = self._compression
            self._largest_record_size = _largest_record(buf, start, end)
            if ctype is not _NO_COMPRESSION:
                with memoryview(buf) as mv:
                    compressed = compress(ctype, mv[start:end], self._compression_level, 2)
                buf[start : start + len(compressed)] = compressed
                self._compressed_records_size = len(compressed)
            else:
                self._compressed_records_size = end - start
        self.write_default_batch_header(_crc32c)

    def _close_legacy(self) -> None:
        ctype = self._compression
        if ctype is _NO_COMPRESSION:
            self._size = self._pos
            self._compressed_records_size = self._pos
            return
        buf = self._buf
        start = self._records_start
        with memoryview(buf) as mv:
            compressed = compress(ctype, mv[start : self._pos], self._compression_level, self._magic)
        self._compressed_records_size = len(compressed)
        attributes = int(ctype)
        if self._magic == 1:
            attributes |= self._timestamp_type << 3
        wrapper = encode_legacy_record(
            self._base_offset + self._num_records - 1,
            self._magic,
            attributes,
            self._max_timestamp,
            None,
            compressed,
        )
        buf[0 : len(wrapper)] = wrapper
        self._size = len(wrapper)

    def buffer(self) -> memoryview:
        """The finished batch bytes (a view into the pool buffer); closes the builder first."""
        if not self._closed:
            self.close()
        return memoryview(self._buf)[: self._size]

    def __repr__(self) -> str:
        return (
            f"MemoryRecordsBuilder(magic={self._magic}, compression={self._compression.name.lower()}, "
            f"records={self._num_records}, closed={self._closed}, size={self._size or self._estimated_bytes_written()})"
        )
