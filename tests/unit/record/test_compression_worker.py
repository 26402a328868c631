"""kproducer.record._compression_worker: the native thread writes what the codecs module writes.

The C module is imported directly (also in the pure-Python pass, where the producer
itself does not use it): it is built by setup.py with every install, so its absence
is a failure, not a skip.
"""

from __future__ import annotations

import gc
import os
import socket
import struct
from collections.abc import Iterator
from typing import Any

import cramjam
import lz4.frame
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproducer.record import codecs
from kproducer.record.codecs import CompressionType
from kproducer.record.compression_worker import LZ4_LIBRARY, ZSTD_LIBRARY, submit_args

try:
    from kproducer.record import _compression_worker as native  # type: ignore[attr-defined]
except ImportError as e:  # pragma: no cover - a broken build
    raise AssertionError(f"kproducer.record._compression_worker is not built ({e}); run `make install`") from e

HEADER = 61  # a v2 batch header sits before the records, as in MemoryRecordsBuilder


@pytest.fixture
def worker() -> Iterator[Any]:
    w = native.CompressionWorker(LZ4_LIBRARY, ZSTD_LIBRARY)
    try:
        yield w
    finally:
        w.close()


def _in_batch(records: bytes, spare: int = 0) -> bytearray:
    return bytearray(b"\xab" * HEADER) + bytearray(records) + bytearray(spare)


def _compress(w: Any, ctype: CompressionType, level: int | None, records: bytes, spare: int = 0) -> bytes:
    buf = _in_batch(records, spare)
    codec, lvl, header = submit_args(ctype, level)
    out = w.submit(codec, lvl, header, buf, HEADER, HEADER + len(records)).result()
    assert bytes(buf[:HEADER]) == b"\xab" * HEADER, "the worker wrote outside the records"
    if isinstance(out, int):
        return bytes(buf[HEADER : HEADER + out])
    return out


def _lz4_blocks(frame: bytes) -> list[tuple[int, bool]]:
    """(size, stored uncompressed) of each block of an LZ4 frame after the 7-byte header."""
    blocks = []
    pos = 7
    while True:
        (word,) = struct.unpack_from("<I", frame, pos)
        pos += 4
        if word == 0:
            assert pos == len(frame), "bytes after the end mark"
            return blocks
        size = word & 0x7FFFFFFF
        blocks.append((size, bool(word & 0x80000000)))
        pos += size


records_st = st.one_of(
    st.binary(max_size=200_000),
    st.tuples(st.binary(min_size=1, max_size=2_000), st.integers(1, 300)).map(lambda t: t[0] * t[1]),
)


@settings(max_examples=40, deadline=None)
@given(records=records_st, level=st.sampled_from([None, 9, 1, 12, 17]))
def test_lz4_frames_decode_to_the_records_and_match_the_python_framing(records: bytes, level: int | None) -> None:
    w = native.CompressionWorker(LZ4_LIBRARY, None)
    try:
        frame = _compress(w, CompressionType.LZ4, level, records, spare=64)
    finally:
        w.close()
    python = codecs.compress(CompressionType.LZ4, records, level, 2)
    assert frame[:7] == python[:7] == codecs._LZ4_FRAME_HEADER
    # Independent decoders, and the same block layout (64 KiB independent blocks) as the Python path.
    assert codecs.decompress(CompressionType.LZ4, frame) == records
    assert lz4.frame.decompress(frame) == records
    assert bytes(cramjam.lz4.decompress(frame)) == records
    chunks = [len(records[i : i + 64 * 1024]) for i in range(0, len(records), 64 * 1024)]
    blocks = _lz4_blocks(frame)
    assert len(blocks) == len(_lz4_blocks(python)) == len(chunks)
    for (size, stored), chunk in zip(blocks, chunks, strict=True):
        assert size == chunk if stored else 0 < size < chunk


def test_lz4_fast_is_byte_for_byte_the_python_path(worker: Any) -> None:
    payload = os.urandom(1024) * 256 + os.urandom(5000)
    assert _compress(worker, CompressionType.LZ4, None, payload) == codecs.compress(CompressionType.LZ4, payload)


@settings(max_examples=30, deadline=None)
@given(records=records_st, level=st.sampled_from([None, 1, 3, 19, -5]))
def test_zstd_frames_decode_to_the_records(records: bytes, level: int | None) -> None:
    w = native.CompressionWorker(None, ZSTD_LIBRARY)
    try:
        frame = _compress(w, CompressionType.ZSTD, level, records, spare=64)
    finally:
        w.close()
    assert codecs.decompress(CompressionType.ZSTD, frame) == records
    assert bytes(cramjam.zstd.decompress(frame)) == records


def test_incompressible_records_that_do_not_fit_come_back_as_bytes(worker: Any) -> None:
    records = os.urandom(100_000)  # the frame is larger than the records, and the buffer ends with them
    buf = _in_batch(records)
    codec, level, header = submit_args(CompressionType.LZ4, None)
    out = worker.submit(codec, level, header, buf, HEADER, len(buf)).result()
    assert isinstance(out, bytes) and len(out) > len(records)
    assert bytes(buf[HEADER:]) == records, "the records were overwritten although the frame did not fit"
    assert all(stored for _, stored in _lz4_blocks(out))
    assert codecs.decompress(CompressionType.LZ4, out) == records


def test_the_worker_wakes_the_fd_only_for_jobs_someone_waits_for(worker: Any) -> None:
    r, wfd = socket.socketpair()
    r.setblocking(False)
    try:
        worker.set_wakeup_fd(wfd.fileno())
        codec, level, header = submit_args(CompressionType.LZ4, None)
        quiet = worker.submit(codec, level, header, _in_batch(b"x" * 300_000), HEADER, HEADER + 300_000)
        quiet.result()
        with pytest.raises(BlockingIOError):
            r.recv(16)
        watched = worker.submit(codec, level, header, _in_batch(b"y" * 300_000), HEADER, HEADER + 300_000)
        if not watched.wake_when_done():
            r.setblocking(True)
            r.settimeout(30)
            assert r.recv(16) == b"\x00"
        assert watched.done() and watched.wake_when_done()
        assert isinstance(watched.result(), int)
        with pytest.raises(RuntimeError, match="already taken"):
            watched.result()
    finally:
        worker.set_wakeup_fd(-1)
        r.close()
        wfd.close()


def test_a_buffer_is_held_until_the_result_is_taken(worker: Any) -> None:
    buf = _in_batch(b"z" * 200_000)
    codec, level, header = submit_args(CompressionType.ZSTD, None)
    job = worker.submit(codec, level, header, buf, HEADER, len(buf))
    job.wait()
    with pytest.raises(BufferError):
        del buf[HEADER:]  # the worker may still write into it: no resize while the job holds it
    n = job.result()
    del buf[HEADER + n :]  # released
    assert codecs.decompress(CompressionType.ZSTD, bytes(buf[HEADER:])) == b"z" * 200_000


def test_dropped_and_queued_jobs_are_safe_and_close_finishes_the_queue() -> None:
    w = native.CompressionWorker(LZ4_LIBRARY, ZSTD_LIBRARY)
    codec, level, header = submit_args(CompressionType.ZSTD, 19)
    originals = [os.urandom(64) * 4000 for _ in range(20)]
    bufs = [_in_batch(r) for r in originals]
    jobs = [w.submit(codec, level, header, b, HEADER, len(b)) for b in bufs]
    del jobs[::2]  # dropped while queued or running: taken off the queue, or waited for
    gc.collect()
    w.close()
    assert all(j.done() for j in jobs), "close() returned before the queued jobs were done"
    for j, b, records in zip(jobs, bufs[1::2], originals[1::2], strict=True):
        n = j.result()
        assert codecs.decompress(CompressionType.ZSTD, bytes(b[HEADER : HEADER + n])) == records
    with pytest.raises(RuntimeError, match="closed"):
        w.submit(codec, level, header, bytearray(100), 0, 100)
    w.close()  # idempotent


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((3, 0, codecs._LZ4_FRAME_HEADER, bytearray(10), 5, 20), ValueError, r"records at \[5, 20\) are outside"),
        ((3, 0, codecs._LZ4_FRAME_HEADER, bytearray(10), 6, 5), ValueError, "outside the buffer"),
        ((1, 0, b"", bytearray(10), 0, 10), ValueError, "codec 1 is not available"),
        ((3, 0, b"", bytearray(10), 0, 10), ValueError, "lz4 frame header"),
        ((3, 0, codecs._LZ4_FRAME_HEADER, b"read-only", 0, 4), BufferError, "not writable"),
    ],
)
def test_bad_submissions_name_what_is_wrong(worker: Any, args: tuple[Any, ...], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        worker.submit(*args)


def test_a_worker_without_its_libraries_refuses_to_start() -> None:
    with pytest.raises(OSError, match="could be loaded"):
        native.CompressionWorker("libkproducer-no-such-lz4.so.1", "libkproducer-no-such-zstd.so.1")
    lz4_only = native.CompressionWorker(LZ4_LIBRARY, "libkproducer-no-such-zstd.so.1")
    try:
        assert lz4_only.supports(3) and not lz4_only.supports(4)
    finally:
        lz4_only.close()
