"""Wire protocol: zero-copy Produce framing checked against kio's own codec, headers, response parsing."""

from __future__ import annotations

import datetime
import io
import struct
from typing import Any

import pytest
from kio.serial import entity_reader, entity_writer

from kproducer.network import protocol
from kproducer.network.protocol import (
    ApiKey,
    ProtocolError,
    build_produce_request,
    decode_response_header,
    encode_request_header,
    parse_produce_response,
)
from kproducer.structs import TopicPartition
from tests.support.mock_client import batches_of


def _joined(parts: list[protocol.Buffer]) -> bytes:
    return b"".join(bytes(p) for p in parts)


BATCHES = {
    TopicPartition("a", 0): memoryview(b"x" * 100),
    TopicPartition("a", 3): b"y" * 7,
    TopicPartition("bb", 1): memoryview(bytearray(b"z" * 33)),
}


@pytest.mark.parametrize("version", range(3, 12))
def test_produce_request_matches_kio_decoding(version: int) -> None:
    req = build_produce_request(version, -1, 1500, "txn" if version % 2 else None, BATCHES)
    blob = _joined(req.buffers)
    assert len(blob) == req.size
    cls = protocol.request_class(ApiKey.PRODUCE, version)
    decoded, size = entity_reader(cls)(blob, 0)
    assert size == len(blob)
    assert decoded.acks == -1 and decoded.timeout == datetime.timedelta(milliseconds=1500)
    assert decoded.transactional_id == ("txn" if version % 2 else None)
    got = {(t.name, p.index): bytes(p.records) for t in decoded.topic_data for p in t.partition_data}
    assert got == {(tp.topic, tp.partition): bytes(v) for tp, v in BATCHES.items()}


# The compact length of a partition's records is the length + 1 as an unsigned varint; these
# lengths put it on each side of the 1-, 2-, 3- and 4-byte boundaries.
_VARINT_EDGES = [0, 126, 127, 128, 16382, 16383, 16384, 2097150, 2097151, 2097152]


@pytest.mark.parametrize("version", [9, 11])
def test_flexible_produce_request_frames_every_length_of_compact_records(version: int) -> None:
    batches = {TopicPartition("t", p): memoryview(bytearray([p % 251]) * n) for p, n in enumerate(_VARINT_EDGES)}
    req = build_produce_request(version, 1, 100, None, batches)
    # Read back by kio's generated reader, which also checks the framed size.
    assert batches_of(req) == {tp: bytes(v) for tp, v in batches.items()}


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_small_batches_are_copied_into_the_framing_and_large_ones_passed_through(version: int) -> None:
    small = memoryview(bytearray(b"s" * (protocol.COPY_BATCH_BELOW - 1)))
    large = memoryview(bytearray(b"L" * protocol.COPY_BATCH_BELOW))
    tiny = b"t" * 5
    batches = {TopicPartition("a", 0): small, TopicPartition("a", 1): large, TopicPartition("b", 0): tiny}
    req = build_produce_request(version, 1, 100, None, batches)
    # headers + the small batch, the large batch's own view, then the rest of the framing with the tiny one
    assert [b is large for b in req.buffers] == [False, True, False]
    assert not any(b is small or b is tiny for b in req.buffers)
    assert batches_of(req) == {tp: bytes(v) for tp, v in batches.items()}


def test_produce_request_does_not_copy_batches() -> None:
    big = memoryview(bytearray(16384))
    req = build_produce_request(9, 1, 100, None, {TopicPartition("t", 0): big})
    assert any(b is big for b in req.buffers), "the batch memoryview must be passed through, not copied"


@pytest.mark.parametrize("version", [0, 1, 2])
def test_legacy_produce_request_layout(version: int) -> None:
    req = build_produce_request(version, 1, 30000, None, {TopicPartition("t", 2): b"MSGSET"})
    blob = _joined(req.buffers)
    expected = (
        struct.pack(">hii", 1, 30000, 1)
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">iii", 1, 2, 6)
        + b"MSGSET"
    )
    assert blob == expected


def test_unsupported_produce_version_rejected() -> None:
    with pytest.raises(ValueError, match="v12"):
        build_produce_request(12, 1, 1, None, {})


@pytest.mark.parametrize("version", range(3, 12))
def test_parse_produce_response_matches_kio_encoding(version: int) -> None:
    mod = __import__(f"kio.schema.produce.v{version}.response", fromlist=["x"])
    kw_part: dict[str, object] = {"index": 4, "error_code": protocol_error(6), "base_offset": 42}
    if version >= 2:
        kw_part["log_append_time"] = datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC)
    if version >= 5:
        kw_part["log_start_offset"] = 7
    if version >= 8:
        kw_part["record_errors"] = (
            mod.BatchIndexAndErrorMessage(batch_index=2, batch_index_error_message="bad"),
        )
        kw_part["error_message"] = "not leader"
    part = mod.PartitionProduceResponse(**kw_part)
    parts, throttle = parse_produce_response(version, _produce_response_body(mod, part, throttle_ms=12))
    assert throttle == 12
    r = parts[TopicPartition("tp", 4)]
    assert (r.error_code, r.base_offset) == (6, 42)
    assert r.log_start_offset == (7 if version >= 5 else -1)
    if version >= 8:
        assert r.error_message == "not leader"
        assert r.record_errors == (protocol.RecordError(2, "bad"),)
    assert [type(k) for k in parts] == [TopicPartition] and type(r) is protocol.PartitionProduceResponse


@pytest.mark.parametrize("version", range(9, 12))
def test_parse_produce_response_reads_the_usual_error_free_tail(version: int) -> None:
    """A partition with no record errors, no message and no tagged fields: the parser's short path."""
    mod = __import__(f"kio.schema.produce.v{version}.response", fromlist=["x"])
    part = mod.PartitionProduceResponse(
        index=1,
        error_code=protocol_error(0),
        base_offset=7,
        log_append_time=datetime.datetime(2024, 1, 1, tzinfo=datetime.UTC),
        log_start_offset=3,
        record_errors=(),
        error_message=None,
    )
    parts, _throttle = parse_produce_response(version, _produce_response_body(mod, part, throttle_ms=0))
    ((key, r),) = parts.items()
    assert type(key) is TopicPartition and key == TopicPartition("tp", 1)
    assert r == protocol.PartitionProduceResponse(0, None, 7, 1704067200000, 3, ())
    assert type(r) is protocol.PartitionProduceResponse


def _produce_response_body(mod: Any, part: Any, *, throttle_ms: int) -> bytes:
    """kio's encoding of a Produce response of topic "tp" holding ``part`` (``mod``: its version's schema)."""
    body = mod.ProduceResponse(
        responses=(mod.TopicProduceResponse(name="tp", partition_responses=(part,)),),
        throttle_time=datetime.timedelta(milliseconds=throttle_ms),
    )
    buf = io.BytesIO()
    entity_writer(type(body))(buf, body)
    return buf.getvalue()


def protocol_error(code: int) -> object:
    from kio.schema.errors import ErrorCode

    return ErrorCode(code)


def test_parse_legacy_produce_response_v0_v2() -> None:
    body0 = struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">iihq", 1, 0, 0, 99)
    parts, throttle = parse_produce_response(0, body0)
    assert parts[TopicPartition("t", 0)].base_offset == 99 and throttle == 0
    body2 = body0 + struct.pack(">i", 5)
    body2 = (
        struct.pack(">i", 1)
        + struct.pack(">h", 1)
        + b"t"
        + struct.pack(">iihqq", 1, 0, 0, 99, 1234)
        + struct.pack(">i", 5)
    )
    parts, throttle = parse_produce_response(2, body2)
    assert parts[TopicPartition("t", 0)].log_append_time == 1234 and throttle == 5


def test_truncated_produce_response_is_a_protocol_error() -> None:
    body = struct.pack(">i", 1) + struct.pack(">h", 1) + b"t" + struct.pack(">ii", 1, 0)
    with pytest.raises(ProtocolError, match="truncated"):
        parse_produce_response(0, body)


def test_headers() -> None:
    h1 = encode_request_header(1, 3, 12, 77, "cid")
    assert h1 == struct.pack(">hhih", 3, 12, 77, 3) + b"cid"
    assert encode_request_header(2, 3, 12, 77, "cid") == h1 + b"\x00"
    assert encode_request_header(0, 3, 12, 77, "cid") == struct.pack(">hhi", 3, 12, 77)
    assert encode_request_header(1, 3, 12, 77, None).endswith(b"\xff\xff")
    # response header v1 with one tagged field (tag 5, 2 bytes) before the body
    mv = memoryview(struct.pack(">i", 9) + b"\x01\x05\x02ab" + b"BODY")
    assert decode_response_header(1, mv) == (9, 9)
    assert decode_response_header(0, mv) == (9, 4)
    assert protocol.response_header_version(ApiKey.API_VERSIONS, 3) == 0
    assert protocol.request_header_version(ApiKey.API_VERSIONS, 3) == 2
    assert protocol.response_header_version(ApiKey.METADATA, 9) == 1
    assert protocol.response_header_version(ApiKey.METADATA, 8) == 0


def test_negotiate_picks_highest_common_version() -> None:
    broker = {0: (0, 8), 3: (0, 20), 18: (0, 2), 22: (6, 9)}
    got = protocol.negotiate(broker)
    assert got[0] == 8 and got[3] == 12 and got[18] == 2
    assert 22 not in got  # no overlap: 6..9 vs 0..5


def test_importing_kproducer_leaves_hypothesis_unloaded_and_importable() -> None:
    """kio's optional hypothesis hooks stay out of a producer process (import time, GC passes)."""
    import subprocess
    import sys

    code = (
        "import sys, gc\n"
        "import kproducer.producer\n"
        "assert 'hypothesis' not in sys.modules, 'kio pulled in hypothesis'\n"
        "gc.collect()\n"
        "print(len(gc.get_objects()))\n"
        "import kio.static.primitive\n"
        "import hypothesis.strategies\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout) < 35_000  # about 26,600 measured; hypothesis alone adds 20,000
