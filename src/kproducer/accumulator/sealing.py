"""Compressing full batches before the drain (``ProducerBatch.seal``), on the Sender thread or by a caller.

With compression on, a batch closed for appends joins a queue, so that batches
waiting to be drained hold compressed bytes rather than records:

* with the native compression worker (lz4 and zstd, :mod:`kproducer.record.compression_worker`)
  the batch's records go to the worker at once, and each Sender loop installs the
  finished results, in order, without waiting for an unfinished one;
* otherwise the Sender compresses the queue itself each loop.

When the uncompressed backlog passes a limit (the Sender or the worker is not
keeping up), the caller that closed the batch seals the backlog itself, waiting for
the worker's results or compressing: backpressure, as Java's callers compress their
own records. Uncompressed producers never queue here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kproducer.record.codecs import CompressionType

if TYPE_CHECKING:
    from kproducer.accumulator.accumulator import RecordAccumulator
    from kproducer.accumulator.batch import ProducerBatch

__all__ = ["close_for_appends", "seal_full_batches", "seal_if_behind"]

# How far past the backlog limit a caller lets the compression worker fall behind before it waits.
_WORKER_BACKLOG_FACTOR = 4


def close_for_appends(acc: RecordAccumulator, batch: ProducerBatch) -> None:
    """No more records into ``batch``; queue it for compression (compressed producers only).

    Called with the batch's deque lock held, so it only queues: the compression itself
    runs after the lock is released (:func:`seal_if_behind`) or on the Sender thread. A
    codec lets go of the GIL while it works; compressing under the deque lock made the
    Sender's ready() wait for that lock, and then for the GIL, up to a switch interval
    (docs/architecture.md, "The GIL and the Sender's system calls").
    """
    was_writable = batch.is_writable
    batch.close_for_record_appends()
    if not was_writable or acc.compression is CompressionType.NONE:
        return  # (append's second try meets the same full batch again)
    worker = acc.compression_worker
    if worker is not None:
        batch.start_compression(worker)  # queued on the native worker, no GIL wait (False: Python later)
    with acc._seal_lock:
        acc._to_seal.append(batch)
        acc._unsealed_bytes += batch.builder.uncompressed_size


def seal_if_behind(acc: RecordAccumulator) -> None:
    """After an append, outside any deque lock: seal the backlog when the Sender is not keeping up.

    Backpressure, as Java's callers compress their own records: past the backlog limit
    the appending caller compresses the queued full batches itself, or waits for the
    worker's results.
    """
    if acc._unsealed_bytes <= acc._seal_backlog_bytes:  # an unlocked read: at worst one append late
        return
    if acc.compression_worker is None:
        seal_full_batches(acc, wait=True)
        return
    # With the worker, the backlog is mostly batches it has finished and the Sender has not taken
    # yet: take those. Waiting for an unfinished one lets go of the GIL, and getting it back from
    # the Sender cost callers 1.5 ms a time (zstd, 100 B records: 57 waits, 88 ms of a 0.53 s run);
    # so a caller waits only when the worker itself is far behind.
    seal_full_batches(acc, wait=False)
    if acc._unsealed_bytes > _WORKER_BACKLOG_FACTOR * acc._seal_backlog_bytes:
        seal_full_batches(acc, wait=True)


def seal_full_batches(acc: RecordAccumulator, *, wait: bool = True) -> None:
    """Seal the full batches closed for appends, oldest first (see ProducerBatch.seal).

    ``wait=False`` (the Sender's loop): stop at the first batch still on the compression
    worker, rather than wait for it; the worker takes the queue in the same order.
    """
    if not acc._to_seal:  # every Sender loop: no lock when there is nothing (always, uncompressed)
        return
    while True:
        with acc._seal_lock:
            if not acc._to_seal:
                return
            batch = acc._to_seal[0]
            if not wait and batch.compression_running():
                return
            acc._to_seal.popleft()
            acc._unsealed_bytes -= batch.builder.uncompressed_size
        if not batch.is_done:
            batch.seal()
