"""Bulk produce: ``Producer.send_batch`` (sequences of bytes) and ``Producer.send_arrow`` (pyarrow data).

Records go through the same RecordAccumulator, BufferPool and Sender as
``send()``: batches of ``batch.size``, ready/drain, per-partition order, the
sticky partitioner for keyless records (one partition per batch) and murmur2
for keyed ones. What differs is that the records are encoded straight from the
caller's buffers (a list of bytes, or an Arrow column's offsets and data
buffers) by :mod:`kproducer.record.native`, and a batch holds one
:class:`~kproducer.accumulator.batch.BulkRange` per call instead of a future per
record. Each call returns one :class:`BulkFuture` resolving to per-record
metadata, in the caller's row order.
"""

from __future__ import annotations

import logging
import threading
import time
from array import array
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from kproducer.accumulator.batch import BulkRange, DeliveryCallback
from kproducer.accumulator.futures import NO_OFFSET, NO_TIMESTAMP, ProduceRequestResult, RecordFuture
from kproducer.errors import KafkaError, KafkaTimeoutError, ProducerClosedError, RecordTooLargeError
from kproducer.record import native
from kproducer.record.builder import (
    MAX_RECORD_OVERHEAD,
    MAX_TIMESTAMP,
    RECORD_BATCH_OVERHEAD,
    _encode_headers,
    varint_size,
)
from kproducer.structs import RecordMetadata, TopicPartition

if TYPE_CHECKING:
    from kproducer.producer import Producer

__all__ = ["BulkFuture", "DeliveredRange", "send_arrow", "send_batch"]

log = logging.getLogger(__name__)

_UNKNOWN_PARTITION = -1


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
        self._missing_error: BaseException | None = None
        self._callbacks: list[Callable[[BulkFuture], Any]] = []
        if n == 0:
            self._done.set()

    # ------------------------------------------------------------ completion (Sender thread)
    def _range_done(self, rng: BulkRange, result: ProduceRequestResult, futures: list[RecordFuture] | None) -> None:
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

    def _appended(self, count: int) -> None:
        with self._lock:
            self._appended_count += count

    def _fail_all(self, error: BaseException) -> int:
        """Fail the records that never reached a batch (the call failed part-way); returns how many."""
        with self._lock:
            missing = self.count - self._appended_count
            self._missing_error = error
            callbacks = self._settle_locked(missing)
        self._fire(callbacks)
        return missing

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
                    metadata[row] = RecordMetadata(tp.topic, tp.partition, offset, ts, -1, -1)
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


# ---------------------------------------------------------------- shared driver
def _encoded_headers(headers: Any) -> bytes | None:
    if headers is None:
        return None
    if isinstance(headers, (str, bytes, bytearray, memoryview)) or not isinstance(headers, Sequence):
        raise TypeError(
            "headers must be one sequence of (str, bytes | None) tuples applied to every record, "
            f"got {type(headers).__name__}"
        )
    if not headers:
        return None
    if not isinstance(headers[0], tuple):
        raise TypeError(
            "headers of a bulk call are one list of (str, bytes | None) tuples applied to every record; "
            "for per-record headers use send()"
        )
    return _encode_headers(list(headers))[0]


def _fail(fut: BulkFuture, error: BaseException, on_delivery: DeliveryCallback | None) -> BulkFuture:
    missing = fut._fail_all(error)
    if on_delivery is not None:
        for _ in range(missing):
            try:
                on_delivery(None, error)
            except Exception:
                log.exception("delivery callback raised")
    return fut


def _produce(
    producer: Producer,
    topic: str,
    n: int,
    values: Any,
    keys: Any,
    arrow: bool,
    partition: int | None,
    timestamp: int | None,
    headers: Any,
    on_delivery: DeliveryCallback | None,
    fut: BulkFuture,
    row_offset: int = 0,
) -> bool:
    """Queue rows ``0..n`` of one chunk; True when the Sender should be woken. Raises KafkaError."""
    if n == 0:
        return False
    p = producer
    start_ms = p._clock()
    cluster = p._metadata.cluster
    num_partitions = cluster.partition_count(topic)
    if num_partitions is None or (partition is not None and partition >= num_partitions):
        cluster, num_partitions = p._wait_on_metadata(topic, partition, start_ms)
    else:
        p._metadata.touch(topic, start_ms)
    encoded = _encoded_headers(headers)
    sizes = native.sizes_arrow if arrow else native.sizes_seq
    _, largest_value = sizes(values, 0, n)
    _, largest_key = sizes(keys, 0, n) if keys is not None else (0, -1)
    record_bound = (
        RECORD_BATCH_OVERHEAD
        + MAX_RECORD_OVERHEAD
        + varint_size(largest_key)
        + max(largest_key, 0)
        + varint_size(largest_value)
        + max(largest_value, 0)
        + (len(encoded) if encoded is not None else 1)
    )
    if record_bound > p._max_request_size or record_bound > p._buffer_memory:
        which = "max.request.size" if record_bound > p._max_request_size else "buffer.memory"
        limit = p._max_request_size if which == "max.request.size" else p._buffer_memory
        raise RecordTooLargeError(
            f"a record of this bulk call is up to {record_bound} bytes when serialized, larger than {limit}, "
            f"the value of the {which} configuration",
            topic=topic,
        )
    if timestamp is None:
        timestamp = int(time.time() * 1000)
    elif timestamp.__class__ is not int or not 0 <= timestamp <= MAX_TIMESTAMP:
        raise ValueError(
            f"timestamp must be an int in 0..{MAX_TIMESTAMP} (milliseconds since the epoch), got {timestamp!r}"
        )
    remaining = max(0, p._max_block_ms - (p._clock() - start_ms))
    acc = p._accumulator
    wake = False
    if partition is not None:
        if partition < 0:
            raise ValueError(f"partition must be >= 0, got {partition}")
        groups: list[tuple[int, bytes | None, int]] = [(partition, None, n)]
    elif keys is not None and not p._ignore_keys:
        buckets = (native.partition_arrow if arrow else native.partition_seq)(keys, 0, n, num_partitions)
        null_keyed = buckets.pop()
        if null_keyed:
            # Rows without a key join the sticky partition, merged in row order so that the
            # partition's records keep the call's order.
            target = acc.sticky_partition(topic, cluster)
            merged = array("q", buckets[target]) + array("q", null_keyed)
            buckets[target] = array("q", sorted(merged)).tobytes()
        groups = [(part, idx, len(idx) // 8) for part, idx in enumerate(buckets) if idx]
    else:
        groups = [(_UNKNOWN_PARTITION, None, n)]
    for part, idx, count in groups:
        sink = fut if not row_offset else _OffsetSink(fut, row_offset)
        wake |= acc.append_many(
            topic, part, timestamp, values, keys, idx, 0, count, encoded, arrow, sink, on_delivery,
            record_bound, remaining, cluster,
        )
    return wake


class _OffsetSink:
    """Maps a chunk's row numbers to the call's (Arrow tables arrive in record-batch chunks)."""

    __slots__ = ("fut", "offset")

    def __init__(self, fut: BulkFuture, offset: int) -> None:
        self.fut = fut
        self.offset = offset

    def _appended(self, count: int) -> None:
        self.fut._appended(count)

    def _range_done(self, rng: BulkRange, result: ProduceRequestResult, futures: list[RecordFuture] | None) -> None:
        rows = rng.rows
        off = self.offset
        if isinstance(rows, range):
            shifted_rows: range | list[int] = range(rows.start + off, rows.stop + off)
        else:
            shifted_rows = [r + off for r in rows]
        shifted = BulkRange(rng.first, rng.count, self.fut, shifted_rows, rng.callback, rng.timestamp)  # type: ignore[arg-type]
        self.fut._range_done(shifted, result, futures)


def _check_usable(producer: Producer) -> None:
    if producer._closed or producer._forked:
        producer._raise_unusable()
    if producer._txn is not None:
        producer._check_send_in_transaction()


def _needs_per_record(producer: Producer) -> bool:
    """Interceptors and custom partitioners see each record: bulk calls then go through send()."""
    return bool(producer._interceptors) or producer._partitioner is not None


def _send_each(
    producer: Producer,
    topic: str,
    rows: list[tuple[Any, Any]],
    partition: int | None,
    timestamp: int | None,
    headers: Any,
    on_delivery: DeliveryCallback | None,
) -> BulkFuture:
    fut = BulkFuture(topic, len(rows))
    hdrs = list(headers) if headers else None
    for_row = getattr(on_delivery, "for_row", None)  # per-row delivery reports (kproducer.delivery)
    for row, (key, value) in enumerate(rows):
        cb = on_delivery if for_row is None else for_row(row)
        rf = producer.send(topic, value, key, partition=partition, timestamp=timestamp, headers=hdrs, callback=cb)
        fut._appended(1)
        rng = BulkRange(0, 1, fut, range(row, row + 1), None, NO_TIMESTAMP)

        def done(f: RecordFuture, rng: BulkRange = rng) -> None:
            fut._finish(rng, f._batch_result, [f])

        rf.add_done_callback(done)
    return fut


# ---------------------------------------------------------------- send_batch
def send_batch(
    producer: Producer,
    topic: str,
    values: Sequence[bytes | bytearray | memoryview | None],
    keys: Sequence[bytes | bytearray | memoryview | None] | None = None,
    *,
    partition: int | None = None,
    timestamp: int | None = None,
    headers: Sequence[tuple[str, bytes | None]] | None = None,
    on_delivery: DeliveryCallback | None = None,
) -> BulkFuture:
    """Queue ``values[i]`` (with ``keys[i]``) as records of ``topic``; one future for the call."""
    _check_usable(producer)
    if type(topic) is not str:
        raise TypeError(f"topic must be a str, got {type(topic).__name__}")
    if isinstance(values, (str, bytes, bytearray, memoryview)) or not isinstance(values, Sequence):
        raise TypeError(f"values must be a sequence (list or tuple) of bytes, got {type(values).__name__}")
    if keys is not None:
        if isinstance(keys, (str, bytes, bytearray, memoryview)) or not isinstance(keys, Sequence):
            raise TypeError(f"keys must be a sequence of bytes (or None), got {type(keys).__name__}")
        if len(keys) != len(values):
            raise ValueError(f"keys has {len(keys)} entries but values has {len(values)}; they must be the same length")
    n = len(values)
    if _needs_per_record(producer):
        return _send_each(producer, topic, list(zip(keys or [None] * n, values, strict=True)), partition, timestamp, headers, on_delivery)
    fut = BulkFuture(topic, n)
    if not isinstance(values, (list, tuple)):
        values = list(values)
    if keys is not None and not isinstance(keys, (list, tuple)):
        keys = list(keys)
    try:
        wake = _produce(producer, topic, n, values, keys, False, partition, timestamp, headers, on_delivery, fut)
    except ProducerClosedError:
        raise
    except KafkaError as e:
        return _fail(fut, e, on_delivery)
    if wake:
        producer._wakeup()
    return fut


# ---------------------------------------------------------------- send_arrow
_BINARY_WIDTH = {"binary": 4, "string": 4, "utf8": 4, "large_binary": 8, "large_string": 8, "large_utf8": 8}


def _arrow_column(array: Any, name: str) -> native.ArrowColumn:
    """The (offsets, data, validity, offset, length, width) of a binary/string Arrow array."""
    width = _BINARY_WIDTH.get(str(array.type))
    if width is None:
        raise TypeError(
            f"column {name!r} has Arrow type {array.type}; it must be binary, string, large_binary or large_string"
        )
    validity, offsets, data = array.buffers()[:3]
    if array.null_count == 0:
        validity = None
    return (offsets, data, validity, array.offset, len(array), width)


def send_arrow(
    producer: Producer,
    data: Any,
    topic: str | None = None,
    *,
    value_column: str = "value",
    key_column: str | None = "key",
    topic_column: str = "topic",
    partition: int | None = None,
    timestamp: int | None = None,
    headers: Sequence[tuple[str, bytes | None]] | None = None,
    on_delivery: DeliveryCallback | None = None,
) -> BulkFuture:
    """Queue the rows of a pyarrow Table or RecordBatch; values (and keys) read from the column buffers.

    ``key_column`` is used when present (None: no keys). Without ``topic``, each
    row's topic comes from the string column ``topic_column``.
    """
    _check_usable(producer)
    import pyarrow as pa

    if isinstance(data, pa.RecordBatch):
        batches = [data]
        schema = data.schema
    elif isinstance(data, pa.Table):
        batches = data.to_batches()
        schema = data.schema
    else:
        raise TypeError(f"send_arrow takes a pyarrow Table or RecordBatch, got {type(data).__name__}")
    names = schema.names
    if value_column not in names:
        raise ValueError(f"value column {value_column!r} not in the Arrow schema (columns: {', '.join(names)})")
    has_keys = key_column is not None and key_column in names
    n = data.num_rows
    if topic is None:
        if topic_column not in names:
            raise ValueError(
                f"send_arrow needs topic=... or a {topic_column!r} string column (columns: {', '.join(names)})"
            )
        return _send_arrow_by_topic(
            producer, data, value_column, key_column if has_keys else None, topic_column, partition, timestamp,
            headers, on_delivery,
        )
    if type(topic) is not str:
        raise TypeError(f"topic must be a str, got {type(topic).__name__}")
    for batch in batches:
        _arrow_column(batch.column(value_column), value_column)
        if has_keys:
            _arrow_column(batch.column(key_column), key_column)  # type: ignore[arg-type]
    if _needs_per_record(producer):
        vals = data.column(value_column).to_pylist()
        ks = data.column(key_column).to_pylist() if has_keys else [None] * n
        return _send_each(producer, topic, list(zip(ks, vals, strict=True)), partition, timestamp, headers, on_delivery)
    fut = BulkFuture(topic, n)
    wake = False
    row = 0
    try:
        for batch in batches:
            m = batch.num_rows
            values = _arrow_column(batch.column(value_column), value_column)
            keys = _arrow_column(batch.column(key_column), key_column) if has_keys else None  # type: ignore[arg-type]
            # Rows of a chunk are numbered from 0: per-row delivery reports look them up from the call's row.
            at_offset = getattr(on_delivery, "at_offset", None)
            chunk_cb = on_delivery if at_offset is None or not row else at_offset(row)
            wake |= _produce(producer, topic, m, values, keys, True, partition, timestamp, headers, chunk_cb, fut, row)
            row += m
    except ProducerClosedError:
        raise
    except KafkaError as e:
        return _fail(fut, e, on_delivery)
    finally:
        if wake:
            producer._wakeup()
    return fut


def _send_arrow_by_topic(
    producer: Producer,
    data: Any,
    value_column: str,
    key_column: str | None,
    topic_column: str,
    partition: int | None,
    timestamp: int | None,
    headers: Any,
    on_delivery: DeliveryCallback | None,
) -> BulkFuture:
    """One bulk call per distinct topic (rows keep their order within a topic); one future over all rows."""
    import pyarrow as pa
    import pyarrow.compute as pc

    table = pa.Table.from_batches([data]) if isinstance(data, pa.RecordBatch) else data
    topics_col = table.column(topic_column)
    if not (pa.types.is_string(topics_col.type) or pa.types.is_large_string(topics_col.type)):
        raise TypeError(f"topic column {topic_column!r} must be a string column, got {topics_col.type}")
    if topics_col.null_count:
        raise ValueError(f"topic column {topic_column!r} has {topics_col.null_count} null rows; every row needs a topic")
    n = table.num_rows
    outer = BulkFuture("<several>", n)
    for t in pc.unique(topics_col).to_pylist():
        rows = pc.indices_nonzero(pc.equal(topics_col, t))
        sub = table.take(rows)
        for_columns = getattr(on_delivery, "for_columns", None)  # per-row reports follow the rows to `sub`
        inner = send_arrow(
            producer, sub, t, value_column=value_column, key_column=key_column, partition=partition,
            timestamp=timestamp, headers=headers,
            on_delivery=on_delivery if for_columns is None else for_columns(
                t, sub.column(key_column) if key_column is not None else None, sub.column(value_column)
            ),
        )
        mapping = rows.to_pylist()

        def forward(f: BulkFuture, mapping: list[int] = mapping, topic: str = t) -> None:
            metadata, errors = f._outcomes()
            for j, row in enumerate(mapping):
                md, err = metadata[j], errors[j]
                result = ProduceRequestResult(md.topic_partition if md is not None else TopicPartition(topic, -1))
                if md is not None:
                    result.set(md.offset, md.timestamp, None)
                else:

                    def error_of(_index: int, err: BaseException | None = err) -> BaseException | None:
                        return err

                    result.set(NO_OFFSET, NO_TIMESTAMP, error_of)
                timestamp_ = md.timestamp if md is not None else NO_TIMESTAMP
                outer._finish(BulkRange(0, 1, outer, range(row, row + 1), None, timestamp_), result, None)

        outer._appended(len(mapping))
        inner.add_done_callback(forward)
    return outer
