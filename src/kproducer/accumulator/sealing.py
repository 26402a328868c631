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

__all__ = ["close_for_appends", "seal_full_batches"]


def close_for_appends(acc: RecordAccumulator, batch: ProducerBatch) -> None:
    """No more records into ``batch``; queue it for compression (compressed producers only)."""
    was_writable = batch.is_writable
    batch.close_for_record_appends()
    if not was_writable or acc.compression is CompressionType.NONE:
        return  # (append's second try meets the same full batch again)
    with acc._seal_lock:
        acc._to_seal.append(batch)
        acc._unsealed_bytes += batch.builder.uncompressed_size
        behind = acc._unsealed_bytes > acc._seal_backlog_bytes
    if behind:
        # The Sender is not keeping up: this caller compresses the backlog (backpressure, as
        # Java's callers compress their own records).
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
