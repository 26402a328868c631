"""KIP-782 expandable batches: growing a hot partition's open batch, and the in-flight growth budget per leader.

A batch is sendable at ``batch.size``; until the Sender drains it, records keep
going into it, and when it runs out of room :func:`grow` raises its limit,
charged to ``buffer.memory`` first and never waiting (the rule is in
``docs/architecture.md``, its measurements in ``benchmarks/RESULTS.md``, "Expandable batches"). With a
circuit breaker, the drain also bounds the bytes past ``batch.size`` that the
batches in flight to one leader hold between them (:func:`in_flight_growth_by_node`);
:func:`release_growth` gives a batch's share back when it completes or comes
back for a retry. The budget is guarded by the incomplete-batches lock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kproducer.record.builder import COMPRESSION_RATE_ESTIMATION_FACTOR
from kproducer.record.codecs import CompressionType
from kproducer.record.compression_ratio import MAX_GROWN_STAGING_BYTES

if TYPE_CHECKING:
    from kproducer.accumulator.accumulator import RecordAccumulator
    from kproducer.accumulator.batch import ProducerBatch

__all__ = ["grow", "in_flight_growth_by_node", "release_growth", "release_growth_locked"]


def grow(acc: RecordAccumulator, batch: ProducerBatch, needed: int, *, rows_in_hand: bool = False) -> bool:
    """Let an open batch that ran out of room take more records (KIP-782 expandable batches).

    The limit doubles (at least by ``needed`` bytes), up to ``batch.size`` freely and past
    it up to ``batch.max.size`` (bounded by ``max.request.size``; ``batch.size`` again for a
    topic whose broker refused a batch as too large). Each step is charged to
    ``buffer.memory`` first and never waits: past ``batch.size`` it must leave room for four
    ``batch.size`` batches still free and nobody queued for memory, so many partitions' open
    batches keep Java's footprint and a caller never blocks because a batch grew. A
    partition the circuit breaker muted on its own does not grow past ``batch.size``. The
    batch is the last of its deque, not yet drained (its partition is hot), and the deque
    lock is held. False: it stays as it is, and the caller closes it.

    ``rows_in_hand``: a bulk call (``send_batch``, ``send_arrow``) still holding rows for
    this partition. Then the four free buffers are not kept: refusing would only make the
    same call open a new ``batch.size`` batch for those rows at once, taking the same memory
    as more, smaller batches (each with its own per-batch cost for the Sender and the
    broker). Nobody queued for memory is still required, so growth never jumps a waiter.
    """
    builder = batch.builder
    if batch.buffer is None or batch.is_split_batch or builder.magic != 2:
        return False
    limit = builder.write_limit
    tp = batch.topic_partition
    routing = acc._routing
    muted = routing is not None and tp in routing.partitions_to_vacate()
    if tp.topic in acc._growth_capped or muted:
        # A topic whose broker refused a grown batch, or a partition the circuit breaker muted:
        # its batches wait for a leader that is not answering, so they stay at batch.size.
        bound = acc.batch_size
    else:
        bound = acc.batch_max_size
    if acc.compression is not CompressionType.NONE:
        # A muted partition's compressed batch stages no more records than it was charged.
        return not muted and _grow_staging(acc, batch, bound, needed, rows_in_hand)
    if limit >= bound:
        return False
    target = max(limit * 2, limit + needed)
    if target > bound:
        if limit + needed > bound:
            return False
        target = bound
    keep_free = acc._growth_keep_free if target > acc.batch_size and not rows_in_hand else 0
    if not acc.free.try_grow(target - limit, keep_free):
        return False
    batch.grown += target - limit
    builder.grow_write_limit(target)
    return True


def _grow_staging(acc: RecordAccumulator, batch: ProducerBatch, bound: int, needed: int, rows_in_hand: bool) -> bool:
    """Let a compressed batch stage more uncompressed records, every byte charged to ``buffer.memory`` first.

    A compressed batch's size is its records' size times the estimated ratio, and its
    records are staged uncompressed until it closes. A new batch stages at most the
    bytes it was charged (``STAGING_RATIO_FLOOR``); past that, each step doubles what it
    may stage (at least by ``needed``), up to MAX_GROWN_STAGING_BYTES of records, and
    the estimate it fills against moves towards the topic's observed ratio, its limit
    growing with it within ``bound`` (``batch.max.size``). For records that compress
    well this, not ``batch.size``, is what ends a hot batch: 1 KB records compressing
    50:1 would otherwise close at 16 KB of records and 300 bytes on the wire, where
    Java's 16 KB batch (which compresses as it appends) carries 800 KB of them, and each
    batch costs the Sender, the request and the broker a fixed amount.

    The charge makes the batch's ``capacity`` cover both what it stages and its limit,
    under the same rules as :func:`grow`: never waiting, and for a single record
    keeping four ``batch.size`` buffers free, so that across many partitions the
    staged records stay within ``buffer.memory`` and a caller never blocks because a
    batch grew.
    """
    builder = batch.builder
    factor = COMPRESSION_RATE_ESTIMATION_FACTOR
    limit = builder.write_limit
    ratio = builder.estimated_compression_ratio
    staged = limit / (ratio * factor)  # the records this batch may hold now
    if staged >= MAX_GROWN_STAGING_BYTES:
        return False
    target = min(max(2 * staged, staged + needed), float(MAX_GROWN_STAGING_BYTES))
    observed = acc._ratio_estimator.estimation(batch.topic_partition.topic, acc.compression)
    new_ratio = max(observed, ratio * staged / target)
    new_limit = min(bound, max(limit, int(target * new_ratio * factor)))
    target = min(target, new_limit / (new_ratio * factor))
    if target <= staged * 1.01:
        return False
    held = max(int(target), new_limit)
    charge = held - batch.capacity
    keep_free = acc._growth_keep_free if held > acc.batch_size and not rows_in_hand else 0
    if charge > 0 and not acc.free.try_grow(charge, keep_free):
        return False
    batch.grown += max(charge, 0)
    builder.set_estimated_compression_ratio(new_ratio)
    if new_limit > limit:
        builder.grow_write_limit(new_limit)
    return True


def release_growth(acc: RecordAccumulator, batch: ProducerBatch) -> None:
    """The batch is no longer in flight: its bytes past batch.size leave its leader's budget."""
    if batch.growth_node >= 0:
        with acc._incomplete.lock:
            release_growth_locked(acc, batch)


def release_growth_locked(acc: RecordAccumulator, batch: ProducerBatch) -> None:
    node = batch.growth_node
    if node < 0:
        return
    batch.growth_node = -1
    left = acc._in_flight_growth.get(node, 0) - (batch.capacity - acc.batch_size)
    if left > 0:
        acc._in_flight_growth[node] = left
    else:
        acc._in_flight_growth.pop(node, None)


def in_flight_growth_by_node(acc: RecordAccumulator) -> dict[int, int]:
    """Bytes past ``batch.size`` held by the batches in flight, per leader node (with a circuit breaker).

    KIP-782 lets a waiting batch grow to ``batch.max.size``; a batch that is sent
    keeps its partition, so a leader that then stops answering keeps what its
    in-flight window carried until the requests complete, whatever the breaker
    decides. With a breaker, the drain sends a grown batch to a leader only while
    that leader's in-flight growth stays within an eighth of ``buffer.memory`` (or
    when it has none in flight, so that progress is never blocked); a grown batch
    that waits stays in its queue, where a mute can still move it. A muted
    leader therefore holds at most its in-flight window at ``batch.size`` per
    batch plus that eighth, instead of
    ``max.in.flight.requests.per.connection`` x partitions x ``batch.max.size``.
    """
    with acc._incomplete.lock:
        return dict(acc._in_flight_growth)
