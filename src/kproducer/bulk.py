"""Bulk produce: ``Producer.send_batch`` (sequences of bytes) and ``Producer.send_arrow`` (pyarrow data).

Records go through the same routing step as ``send()``
(:class:`kproducer.router.RecordRouter`: metadata, size check, partition choice
with the circuit breaker, append), BufferPool and Sender: batches of ``batch.size``, ready/drain, per-partition order, the
sticky partitioner for keyless records (one partition per batch) and murmur2
for keyed ones. What differs is that the records are encoded straight from the
caller's buffers (a list of bytes, or an Arrow column's offsets and data
buffers, read as :mod:`kproducer.record.arrow_column` describes) by
:mod:`kproducer.record.native`, and a batch holds one
:class:`~kproducer.accumulator.batch.BulkRange` per call instead of a future per
record. Each call returns one :class:`BulkFuture` resolving to per-record
metadata, in the caller's row order.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from kproducer.accumulator.batch import BulkRange, DeliveryCallback
from kproducer.accumulator.futures import NO_OFFSET, NO_TIMESTAMP, ProduceRequestResult, RecordFuture
from kproducer.callback_errors import callback_raised
from kproducer.errors import KafkaTimeoutError
from kproducer.record.default_record import encode_headers
from kproducer.structs import RecordMetadata, TopicPartition, metadata_type

if TYPE_CHECKING:
    from kproducer.avro.serializer import AvroFormat

__all__ = ["BulkFuture", "DeliveredRange"]

log = logging.getLogger(__name__)


class DeliveredRange(NamedTuple):
    """``record_count`` records of a bulk call that went out together, in one batch of one partition.

    ``first_offset`` is the first record's offset; the others follow one by one
    (-1 when offsets are unknown: acks=0, or every record failed). ``errors`` is
    None when all of them were acknowledged, else each record's exception (None
    for those acknowledged). ``rows`` are the caller's row numbers.
    """

    topic_partition: TopicPartition
    first_offset: int
    record_count: int
    rows: range | Sequence[int]
    errors: list[BaseException | None] | None


class BulkFuture:
    """The outcome of one bulk call: a list of RecordMetadata in row order once every record completed.

    ``result()`` raises the first record's exception when any record failed;
    ``exceptions()`` gives each record's (None on success). Done-callbacks run on
    the thread that completes the last record (the Sender's).
    """

    def __init__(self, topic: str, n: int) -> None:
        self.topic = topic
        self.count = n
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._pending = n
        self._segments: list[tuple[BulkRange, ProduceRequestResult, list[RecordFuture] | None]] = []
        self._appended_count = 0
        self._parked_count = 0
        self._missing_error: BaseException | None = None
        self._callbacks: list[Callable[[BulkFuture], Any]] = []
        if n == 0:
            self._done.set()

    # ------------------------------------------------------------ the producer's side: the BulkSink the accumulator,
    # router and Producer report appends and outcomes to (applications use the future API below)
    def range_done(self, rng: BulkRange, result: ProduceRequestResult, futures: list[RecordFuture] | None) -> None:
        """A batch holding ``rng`` completed; with ``futures`` (split) wait for those instead."""
        if futures is not None:
            remaining = [len(futures)]

            def one(_f: RecordFuture) -> None:
                with self._lock:
                    remaining[0] -= 1
                    last = remaining[0] == 0
                if last:
                    self._finish(rng, result, futures)

            for f in futures:
                f.add_done_callback(one)
            return
        self._finish(rng, result, None)

    def _finish(self, rng: BulkRange, result: ProduceRequestResult, futures: list[RecordFuture] | None) -> None:
        with self._lock:
            self._segments.append((rng, result, futures))
            callbacks = self._settle_locked(rng.count)
        self._fire(callbacks)

    def appended(self, count: int) -> None:
        with self._lock:
            self._appended_count += count

    def fail_unappended(self, error: BaseException) -> int:
        """Fail the records that never reached a batch (the call failed part-way); returns how many.

        Rows parked for their topic's metadata are not among them: they complete on their own.
        """
        with self._lock:
            missing = self.count - self._appended_count - self._parked_count
            self._missing_error = error
            callbacks = self._settle_locked(missing)
        self._fire(callbacks)
        return missing

    def park(self, count: int) -> None:
        """``count`` rows wait for their topic's metadata in the producer."""
        with self._lock:
            self._parked_count += count

    def unpark(self, count: int) -> None:
        with self._lock:
            self._parked_count -= count

    def fail_parked(self, parked: int, missing: int, error: BaseException) -> None:
        """Rows of a parked chunk failed: ``missing`` of its ``parked`` rows never reached a batch."""
        with self._lock:
            self._parked_count -= parked
            self._missing_error = error
            callbacks = self._settle_locked(missing)
        self._fire(callbacks)

    def _settle_locked(self, count: int) -> list[Callable[[BulkFuture], Any]] | None:
        """``count`` more records have their outcome; the done-callbacks to run if that was the last."""
        self._pending -= count
        if self._pending != 0:
            return None
        callbacks, self._callbacks = self._callbacks, []
        return callbacks

    def _fire(self, callbacks: list[Callable[[BulkFuture], Any]] | None) -> None:
        if callbacks is None:
            return
        self._done.set()
        for cb in callbacks:
            try:
                cb(self)
            except Exception:
                log.exception("error in a bulk future done-callback for topic %s", self.topic)

    def follow(self, row: int, future: RecordFuture) -> None:
        """Row ``row`` was sent on its own (``send()``): complete it with ``future``."""
        self.appended(1)
        rng = BulkRange(0, 1, self, range(row, row + 1), None, NO_TIMESTAMP)

        def done(f: RecordFuture) -> None:
            self._finish(rng, f.batch_result, [f])

        future.add_done_callback(done)

    def forward_from(self, rows: list[int], topic: str, inner: BulkFuture) -> None:
        """``inner`` (a call for some of this call's rows, ``rows`` in order) completed: take its outcomes."""
        metadata, errors = inner._outcomes()
        for j, row in enumerate(rows):
            md, err = metadata[j], errors[j]
            result = ProduceRequestResult(md.topic_partition if md is not None else TopicPartition(topic, -1))
            if md is not None:
                result.set(md.offset, md.timestamp, None)
            else:

                def error_of(_index: int, err: BaseException | None = err) -> BaseException | None:
                    return err

                result.set(NO_OFFSET, NO_TIMESTAMP, error_of)
            timestamp = md.timestamp if md is not None else NO_TIMESTAMP
            self._finish(BulkRange(0, 1, self, range(row, row + 1), None, timestamp), result, None)

    def fail_rows(self, failures: Sequence[tuple[int, BaseException]], topic: str) -> None:
        """Rows that were refused before routing (e.g. not encodable): each fails with its own exception."""
        self.appended(len(failures))
        for row, err in failures:

            def error_of(_index: int, err: BaseException = err) -> BaseException:
                return err

            result = ProduceRequestResult(TopicPartition(topic, -1))
            result.set(NO_OFFSET, NO_TIMESTAMP, error_of)
            self._finish(BulkRange(0, 1, self, range(row, row + 1), None, NO_TIMESTAMP), result, None)

    # ------------------------------------------------------------ the future API
    def done(self) -> bool:
        return self._done.is_set()

    def add_done_callback(self, fn: Callable[[BulkFuture], Any]) -> None:
        """Call ``fn(self)`` once every record completed (at once if they have)."""
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(fn)
                return
        fn(self)

    def _wait(self, timeout: float | None) -> None:
        if not self._done.wait(timeout):
            raise KafkaTimeoutError(f"Timeout after waiting for {(timeout or 0) * 1000:.0f} ms for {self.count} records.")

    def _outcomes(self) -> tuple[list[RecordMetadata | None], list[BaseException | None]]:
        n = self.count
        metadata: list[RecordMetadata | None] = [None] * n
        errors: list[BaseException | None] = [None] * n
        for rng, result, futures in self._segments:
            tp = result.topic_partition
            base = result.base_offset
            ts = result.log_append_time if result.log_append_time != NO_TIMESTAMP else rng.timestamp
            md_type = metadata_type(result.log_append_time)
            for j, row in enumerate(rng.rows):
                if futures is not None:
                    err = futures[j].record_error()
                    if err is None:
                        metadata[row] = futures[j].value()
                    errors[row] = err
                    continue
                err = result.error_at(rng.first + j)
                errors[row] = err
                if err is None:
                    offset = NO_OFFSET if base == NO_OFFSET else base + rng.first + j
                    metadata[row] = md_type(tp.topic, tp.partition, offset, ts, -1, -1)
        missing = self._missing_error
        if missing is not None:
            for row in range(n):
                if metadata[row] is None and errors[row] is None:
                    errors[row] = missing
        return metadata, errors

    def ranges(self, timeout: float | None = None) -> tuple[list[DeliveredRange], int, BaseException | None]:
        """The outcome one batch range at a time, without an object per record.

        Returns ``(ranges, missing, error)``: the ranges in completion order, how many
        records never reached a batch (the call failed part-way), and why. A range of
        a batch that was split (MESSAGE_TOO_LARGE) is given one record at a time.
        """
        self._wait(timeout)
        out: list[DeliveredRange] = []
        counted = 0
        for rng, result, futures in self._segments:
            counted += rng.count
            if futures is not None:
                for j, f in enumerate(futures):
                    err = f.record_error()
                    md = None if err is not None else f.value()
                    tp = TopicPartition(md.topic, md.partition) if md is not None else result.topic_partition
                    out.append(
                        DeliveredRange(
                            tp, md.offset if md is not None else NO_OFFSET, 1, rng.rows[j : j + 1],
                            None if err is None else [err],
                        )
                    )
                continue
            base = result.base_offset
            first = NO_OFFSET if base == NO_OFFSET else base + rng.first
            errors: list[BaseException | None] | None = None
            if not result.succeeded:
                errors = [result.error_at(rng.first + j) for j in range(rng.count)]
                if all(e is None for e in errors):
                    errors = None
            out.append(DeliveredRange(result.topic_partition, first, rng.count, rng.rows, errors))
        missing = self.count - counted
        return out, missing, (self._missing_error if missing else None)

    def result(self, timeout: float | None = None) -> list[RecordMetadata]:
        """Per-record metadata in row order; raises the first record's exception if any failed."""
        self._wait(timeout)
        metadata, errors = self._outcomes()
        for err in errors:
            if err is not None:
                raise err
        return metadata  # type: ignore[return-value]

    get = result

    def exceptions(self, timeout: float | None = None) -> list[BaseException | None]:
        """Each record's exception (None on success), in row order."""
        self._wait(timeout)
        return self._outcomes()[1]

    def metadata(self, timeout: float | None = None) -> list[RecordMetadata | None]:
        """Each record's metadata (None for a failed record), in row order."""
        self._wait(timeout)
        return self._outcomes()[0]

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The first record exception, or None when every record was acknowledged."""
        return next((e for e in self.exceptions(timeout) if e is not None), None)

    def __repr__(self) -> str:
        return f"BulkFuture({self.topic!r}, records={self.count}, {'done' if self.done() else 'pending'})"


# ---------------------------------------------------------------- helpers of the bulk entry points
def fail_bulk(fut: BulkFuture, error: BaseException, on_delivery: DeliveryCallback | None) -> BulkFuture:
    """The call failed part-way: its rows that reached no batch fail, through the future and the callback."""
    missing = fut.fail_unappended(error)
    if on_delivery is not None:
        for _ in range(missing):
            try:
                on_delivery(None, error)
            except Exception as e:
                callback_raised(e, fut.topic)
    return fut


def encoded_headers(headers: Any) -> bytes | None:
    """A bulk call's headers (checked by kproducer.validation.check_headers), encoded once for every record."""
    if not headers:
        return None
    return encode_headers(headers)[0]


class OffsetSink:
    """Maps a chunk's row numbers to the call's (Arrow tables arrive in record-batch chunks)."""

    __slots__ = ("fut", "offset")

    def __init__(self, fut: BulkFuture, offset: int) -> None:
        self.fut = fut
        self.offset = offset

    def appended(self, count: int) -> None:
        self.fut.appended(count)

    def range_done(self, rng: BulkRange, result: ProduceRequestResult, futures: list[RecordFuture] | None) -> None:
        rows = rng.rows
        off = self.offset
        if isinstance(rows, range):
            shifted_rows: range | list[int] = range(rows.start + off, rows.stop + off)
        else:
            shifted_rows = [r + off for r in rows]
        shifted = BulkRange(rng.first, rng.count, self.fut, shifted_rows, rng.callback, rng.timestamp)  # type: ignore[arg-type]
        self.fut.range_done(shifted, result, futures)


# ---------------------------------------------------------------------- the bulk calls' argument helpers
def check_formats(value_format: Any, key_format: Any) -> tuple[AvroFormat | None, AvroFormat | None] | None:
    """The formats of send_arrow's value and key columns: None when both are plain bytes."""
    from kproducer.avro.serializer import AvroFormat

    out: list[AvroFormat | None] = []
    for side, fmt in (("value", value_format), ("key", key_format)):
        if isinstance(fmt, AvroFormat):
            out.append(fmt.for_side(side == "key"))
        elif fmt == "bytes":
            out.append(None)
        else:
            raise ValueError(
                f"{side}_format must be 'bytes' or a kproducer.avro.AvroFormat (which holds the registry "
                f"settings and the schema ids it registered), got {fmt!r}"
            )
    return None if out == [None, None] else (out[0], out[1])


def payload_bytes(column: Any) -> int:
    """The bytes of a send_batch() column (its span's size); 0 for what the call will refuse."""
    if not isinstance(column, Sequence) or isinstance(column, str | bytes | bytearray | memoryview):
        return 0
    return sum(len(v) for v in column if isinstance(v, bytes | bytearray | memoryview))


def arrow_bytes(data: Any, name: str | None) -> int:
    """The bytes of a send_arrow() binary or string column (its span's size); 0 for what the call will refuse."""
    column = arrow_column_or_none(data, name) if hasattr(data, "schema") else None
    if column is None:
        return 0
    import pyarrow as pa
    import pyarrow.compute as pc

    try:
        total = pc.sum(pc.binary_length(column)).as_py()
    except (TypeError, ValueError, pa.ArrowException):  # not a binary column (an Avro struct): no size
        return 0
    return int(total or 0)


def arrow_column_or_none(data: Any, name: str | None) -> Any:
    """A pyarrow Table/RecordBatch column by name (None when absent): rows for on_delivery's reports."""
    if name is None or name not in data.schema.names:
        return None
    return data.column(name)
