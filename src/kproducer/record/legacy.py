"""Legacy message sets, magic 0 and 1 (Kafka's documentation, "Message Format"; v1 added the timestamp, KIP-32).

One entry of a message set is ``[offset int64][size int32]`` (the log overhead)
followed by a message: ``[crc uint32][magic int8][attributes int8]``
(``[timestamp int64]`` for v1) ``[key int32-length bytes][value int32-length
bytes]``. The CRC-32 covers magic through the end of the value. Attributes hold
the codec in bits 0-2 and, for v1, the timestamp type in bit 3. A compressed set
is one *wrapper* message whose value is the compressed inner message set.
"""

from __future__ import annotations

import logging
import struct
import zlib

__all__ = [
    "LOG_OVERHEAD",
    "record_overhead",
    "legacy_record_size",
    "encode_legacy_record",
    "TIMESTAMP_TYPE_MASK",
    "CODEC_MASK",
]

logger = logging.getLogger(__name__)

LOG_OVERHEAD = 12  # offset int64 + size int32
CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08

_V0_HEAD = struct.Struct(">qiIbb")  # offset, size, crc, magic, attributes
_V1_HEAD = struct.Struct(">qiIbbq")  # ... + timestamp
_I32 = struct.Struct(">i")


def record_overhead(magic: int) -> int:
    """Bytes of a message without key and value bytes: crc, magic, attributes, [timestamp], two lengths."""
    return 14 if magic == 0 else 22


def legacy_record_size(magic: int, key_size: int, value_size: int) -> int:
    """Size of a message (without the log overhead) for key/value byte counts (-1 for null)."""
    return record_overhead(magic) + max(key_size, 0) + max(value_size, 0)


def encode_legacy_record(
    offset: int,
    magic: int,
    attributes: int,
    timestamp: int,
    key: bytes | bytearray | memoryview | None,
    value: bytes | bytearray | memoryview | None,
) -> bytes:
    """One message-set entry including its log overhead, with the CRC-32 filled in."""
    klen = -1 if key is None else len(key)
    vlen = -1 if value is None else len(value)
    size = legacy_record_size(magic, klen, vlen)
    tail = b"".join((_I32.pack(klen), key or b"", _I32.pack(vlen), value or b""))
    if magic == 0:
        head = bytearray(_V0_HEAD.pack(offset, size, 0, 0, attributes))
        crc_start = 16
    else:
        head = bytearray(_V1_HEAD.pack(offset, size, 0, 1, attributes, timestamp))
        crc_start = 16
    crc = zlib.crc32(tail, zlib.crc32(memoryview(head)[crc_start:]))
    struct.pack_into(">I", head, 12, crc)
    return bytes(head) + tail
