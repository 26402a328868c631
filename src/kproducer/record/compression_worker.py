"""Full batches compressed on a native thread that never needs the GIL (lz4 and zstd).

Without it, a full batch is compressed by the Sender thread, or by the caller that
closed it when the Sender falls behind (``RecordAccumulator.seal_full_batches``), with
:func:`kproducer.record.codecs.compress`. That codec call lets go of the GIL, and
with another thread busy in ``send()`` the caller of the codec then waits for the
GIL far longer than the codec ran, several times the codec's CPU time per batch
(benchmarks/RESULTS.md, "Compression off the GIL").
librdkafka compresses on its own threads; this does the same with
``kproducer.record._compression_worker`` (C, built by setup.py): the thread that
closes a batch queues its buffer (no GIL release), the worker compresses it into the
same buffer with the system's liblz4 or libzstd, and the Sender installs the result
when it drains the batch. A Sender that finds the job unfinished asks the worker for
a byte on its selector's wakeup socket and drains other partitions meanwhile.

The bytes are the codecs module's: the same LZ4 frame (header, 64 KiB independent
blocks, end mark) and a standard zstd frame; tests compare them. gzip, snappy,
magic 0/1, a missing library, ``KPRODUCER_PURE_PYTHON=1`` or a forked child keep
the Python path, which stays the reference.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Protocol

from kproducer.record.c_extension import load
from kproducer.record.codecs import _DEFAULT_LEVELS, _LZ4_FRAME_HEADER, CompressionType

__all__ = ["LZ4_LIBRARY", "ZSTD_LIBRARY", "CompressionJob", "CompressionWorker", "start_worker", "submit_args"]

log = logging.getLogger(__name__)

# The sonames of the reference libraries (Debian's liblz4-1 and libzstd1, present wherever apt is).
LZ4_LIBRARY = "liblz4.so.1"
ZSTD_LIBRARY = "libzstd.so.1"


class CompressionJob(Protocol):
    """One batch's compression (``kproducer.record._compression_worker.CompressionJob``)."""

    def done(self) -> bool: ...

    def wake_when_done(self) -> bool: ...

    def wait(self) -> None: ...

    def result(self) -> int | bytes: ...


class CompressionWorker(Protocol):
    """The native worker thread (``kproducer.record._compression_worker.CompressionWorker``)."""

    def submit(
        self, codec: int, level: int, lz4_header: bytes, buffer: bytearray, start: int, end: int
    ) -> CompressionJob: ...

    def supports(self, codec: int) -> bool: ...

    def set_wakeup_fd(self, fd: int) -> None: ...

    def close(self) -> None: ...


_c: Any = load("kproducer.record._compression_worker")


def start_worker(compression: CompressionType, wakeup_fd: int) -> CompressionWorker | None:
    """A worker thread for ``compression`` that wakes ``wakeup_fd``, or None (the Python path then)."""
    if _c is None or compression not in (CompressionType.LZ4, CompressionType.ZSTD):
        return None
    try:
        worker: CompressionWorker = _c.CompressionWorker(
            LZ4_LIBRARY if compression is CompressionType.LZ4 else None,
            ZSTD_LIBRARY if compression is CompressionType.ZSTD else None,
        )
    except OSError as e:
        log.info("no compression worker for %s (%s); batches are compressed in Python", compression.name.lower(), e)
        return None
    if not worker.supports(int(compression)):  # pragma: no cover - the constructor refuses a library without it
        worker.close()
        return None
    worker.set_wakeup_fd(wakeup_fd)
    return worker


@functools.cache  # called for every batch handed to the worker; the answer depends on the config only
def submit_args(compression: CompressionType, level: int | None) -> tuple[int, int, bytes]:
    """The worker's (codec, level, lz4 header) for ``compression.type`` and its KIP-390 level.

    lz4: level 0 is the fast compressor, as Java's default level (9) and the codecs
    module; any other level is LZ4 HC at that level. zstd: the level, 3 by default.
    """
    if compression is CompressionType.LZ4:
        high = level is not None and level != _DEFAULT_LEVELS[CompressionType.LZ4]
        return int(compression), (level if high and level is not None else 0), _LZ4_FRAME_HEADER
    return int(compression), (_DEFAULT_LEVELS[CompressionType.ZSTD] if level is None else level), b""
