"""Staging buffers: where compressed batches write their records before they are compressed.

kproducer compresses a batch when it closes (``RecordAccumulator.seal_full_batches``),
so a compressed batch's records are staged uncompressed, up to hundreds of KiB, and
then take a few KiB. Giving each batch a fresh buffer that grows to that size, and
trimming it after compression, returned the memory to the allocator and took it back
one page fault per 4 KiB for the next batch: for 1 KB records and lz4, half of the
appending thread's time went to the kernel (benchmarks/RESULTS.md, "Staging buffers").
So the staging buffer of a compressed batch is kept for the next one once the
batch's compressed bytes have moved into its pool buffer
(``ProducerBatch._leave_staging``). A staging buffer under :data:`MIN_RECYCLED_BYTES` is
not kept: it stays its batch's buffer, cut back once the records are compressed.

The buffers kept idle are bounded (:data:`IDLE_BYTES`); they are not part of
``buffer.memory``, which counts the pool buffers and what batches grew by.
"""

from __future__ import annotations

import threading

__all__ = ["IDLE_BYTES", "MIN_RECYCLED_BYTES", "StagingBuffers"]

#: Most bytes of staging buffers kept between batches (eight of the largest a batch stages).
IDLE_BYTES = 8 * 1024 * 1024
#: Smaller buffers are not worth keeping: the allocator reuses those without new pages.
MIN_RECYCLED_BYTES = 64 * 1024


class StagingBuffers:
    """A bounded stack of idle staging buffers, shared by the threads that open and seal batches."""

    __slots__ = ("_lock", "_free", "_idle_bytes", "idle_limit")

    def __init__(self, idle_limit: int = IDLE_BYTES) -> None:
        self._lock = threading.Lock()
        self._free: list[bytearray] = []
        self._idle_bytes = 0
        self.idle_limit = idle_limit

    def take(self) -> bytearray | None:
        """The most recently returned buffer (its pages are likely still resident), or None."""
        if not self._free:  # an unlocked peek: at worst a batch starts without one
            return None
        with self._lock:
            if not self._free:
                return None
            buf = self._free.pop()
            self._idle_bytes -= len(buf)
            return buf

    def give(self, buf: bytearray) -> None:
        """Keep ``buf`` for a later batch, unless it is small or the idle bound is reached."""
        size = len(buf)
        if size < MIN_RECYCLED_BYTES:
            return
        with self._lock:
            if self._idle_bytes + size > self.idle_limit:
                return
            self._free.append(buf)
            self._idle_bytes += size

    @property
    def idle_bytes(self) -> int:
        return self._idle_bytes
