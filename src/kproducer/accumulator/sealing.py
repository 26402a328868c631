"""Compressing full batches before the drain (``ProducerBatch.seal``), on the Sender thread or by a caller.

With compression on, a batch closed for appends joins a queue that the Sender
compresses each loop, so the queued batches hold compressed bytes. When the
uncompressed backlog passes a limit (the Sender is not keeping up), the caller
that closed the batch compresses the backlog itself: backpressure, as Java's
callers compress their own records. Uncompressed producers never queue here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kproducer.record.codecs import CompressionType

if TYPE_CHECKING:
    from kproducer.accumulator.accumulator import RecordAccumulator
    from kproducer.accumulator.batch import ProducerBatch

__all__ = ["close_for_appends", "seal_full_batches", "seal_if_behind"]


def close_for_appends(acc: RecordAccumulator, batch: ProducerBatch) -> None:
    """No more records into ``batch``; queue it for compression (compressed producers only).

    Called with the batch's deque lock held, so it only queues: the compression itself
    runs after the lock is released (:func:`seal_if_behind`) or on the Sender thread. A
    codec lets go of the GIL while it works; compressing under the deque lock made the
    Sender's ready() wait for that lock, and then for the GIL, up to a switch interval
    (docs/internals.md, "The GIL and the Sender's system calls").
    """
    was_writable = batch.is_writable
    batch.close_for_record_appends()
    if not was_writable or acc.compression is CompressionType.NONE:
        return  # (append's second try meets the same full batch again)
    with acc._seal_lock:
        acc._to_seal.append(batch)
        acc._unsealed_bytes += batch.builder.uncompressed_size


def seal_if_behind(acc: RecordAccumulator) -> None:
    """After an append, outside any deque lock: compress the backlog when the Sender is not keeping up.

    Backpressure, as Java's callers compress their own records: past the backlog limit
    the appending caller compresses the queued full batches itself.
    """
    if acc._unsealed_bytes > acc._seal_backlog_bytes:  # an unlocked read: at worst one append late
        seal_full_batches(acc)


def seal_full_batches(acc: RecordAccumulator) -> None:
    """Compress the full batches closed for appends and not yet compressed (see ProducerBatch.seal)."""
    if not acc._to_seal:  # every Sender loop: no lock when there is nothing (always, uncompressed)
        return
    while True:
        with acc._seal_lock:
            if not acc._to_seal:
                return
            batch = acc._to_seal.popleft()
            acc._unsealed_bytes -= batch.builder.uncompressed_size
        if not batch.is_done:
            batch.seal()
