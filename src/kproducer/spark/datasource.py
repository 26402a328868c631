"""The ``kproducer`` Spark data source: batch and streaming writers, Arrow by default.

Spark plans a write by calling :meth:`KafkaDataSource.writer` (or
``streamWriter``) in a Python worker on the driver: that is where the schema
and options are checked, so mistakes fail before any task runs. The writer it
returns is pickled to the executors' Python workers; it holds only the parsed
options and column names. Each task takes the worker's cached producer,
sends, flushes, and returns a :class:`~kproducer.spark.commit.TaskCommit`;
a delivery failure raises the Kafka error so that Spark fails (and retries)
the task. The driver's ``commit()`` aggregates the counts.

The Arrow writers hand each batch to ``Producer.send_arrow`` (the bulk API:
records encoded from the column buffers, no Python object per row), cut by
:func:`~kproducer.spark.convert.plan_arrow_batch` into calls that share a
topic, partition, timestamp and headers. Rows whose timestamp or headers change
from row to row (runs shorter than ``MIN_BULK_RUN``) go through ``send()`` one
by one, in row order. The row writers (``writer=row``) always use ``send()``.

Delivery is at-least-once by default: a retried task or micro-batch re-sends
its rows. With ``deliveryGuarantee=exactly_once`` each task attempt writes in a
transaction of its own that the driver's ``commit()`` commits (two-phase, see
:mod:`kproducer.spark.exactly_once`).
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator
from itertools import repeat
from typing import Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from kproducer.errors import ConfigError, KafkaTimeoutError
from kproducer.spark.avro_formats import encode_batch, pin_formats
from kproducer.spark.cache import ProducerCache, default_cache
from kproducer.spark.commit import (
    DeliveryTracker,
    TaskCommit,
    WriteSummary,
    aggregate,
    append_summary,
    metrics_delta,
    store_summary,
    take_summary,
)
from kproducer.spark.contract import (
    SinkOptions,
    SinkSchema,
    parse_options,
    validate_producer_config,
    validate_schema,
)
from kproducer.spark.convert import BulkCall, RecordColumns, binary_nbytes, plan_arrow_batch, row_to_record
from kproducer.spark.exactly_once import (
    TransactionLog,
    TxnCommittable,
    abort_transactions,
    commit_transactions,
    fence_losers,
    transactional_id,
)

logger = logging.getLogger(__name__)

__all__ = [
    "KafkaArrowWriter",
    "KafkaDataSource",
    "KafkaRowWriter",
    "KafkaStreamArrowWriter",
    "KafkaStreamRowWriter",
    "KafkaSummarySource",
    "SOURCE_NAME",
    "SUMMARY_SOURCE_NAME",
]

SOURCE_NAME = "kproducer"
SUMMARY_SOURCE_NAME = "kproducer_summary"

# Tests swap this for a cache with an injected producer factory.
_cache_provider: Callable[[], ProducerCache] = default_cache


def _task_ids() -> tuple[int, int]:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    if ctx is None:
        return -1, 0
    return ctx.partitionId(), ctx.attemptNumber()


def _send_columns(producer: Any, cols: RecordColumns, cb: DeliveryTracker) -> None:
    """The per-record send loop, with a fast path for the common shape (one topic, key and value)."""
    send = producer.send
    values = cols.values
    keys: Any = cols.keys if cols.keys is not None else repeat(None)
    if (
        cols.topic is not None
        and cols.partitions is None
        and cols.timestamps is None
        and cols.headers is None
    ):
        topic = cols.topic
        for k, v in zip(keys, values, strict=False):
            send(topic, value=v, key=k, callback=cb)
        return
    n = cols.num_rows
    topics: Any = cols.topics if cols.topics is not None else repeat(cols.topic, n)
    parts: Any = cols.partitions if cols.partitions is not None else repeat(None, n)
    stamps: Any = cols.timestamps if cols.timestamps is not None else repeat(None, n)
    heads: Any = cols.headers if cols.headers is not None else repeat(None, n)
    for t, k, v, p, ts, h in zip(topics, keys, values, parts, stamps, heads, strict=False):
        if t is None:
            raise ValueError("a row has a null topic and no 'topic' option is set")
        send(t, value=v, key=k, partition=p, timestamp=ts, headers=h, callback=cb)


# The local property Spark's micro-batch execution sets on every task of a micro-batch.
_BATCH_ID_PROPERTY = "streaming.sql.batchId"


def _micro_batch_scope() -> str:
    from pyspark import TaskContext

    ctx = TaskContext.get()
    batch = ctx.getLocalProperty(_BATCH_ID_PROPERTY) if ctx is not None else None
    if batch is None:
        raise RuntimeError(f"the exactly-once streaming sink found no {_BATCH_ID_PROPERTY} on its task")
    return f"b{int(batch)}"


def _delivery_outcome(
    options: SinkOptions, tracker: DeliveryTracker, sent: int, partition_id: int, attempt: int
) -> None:
    """Raise the task's first delivery error, or a timeout if the flush left records unacknowledged."""
    if tracker.first_error is not None:
        err = tracker.first_error
        err.add_note(
            f"kproducer sink task {partition_id} (attempt {attempt}): {tracker.failed} of {sent} records failed"
        )
        logger.error("task %d: %d of %d records failed: %s", partition_id, tracker.failed, sent, err)
        raise err
    if tracker.acked != sent:
        raise KafkaTimeoutError(
            f"kproducer sink task {partition_id}: flush returned with {sent - tracker.acked} of {sent} "
            f"records unacknowledged (flush.timeout.ms={options.flush_timeout_s})"
        )


def _send_and_flush(
    producer: Any, options: SinkOptions, send_all: Callable[[Any, DeliveryTracker], tuple[int, int]]
) -> tuple[DeliveryTracker, int, int, dict[str, float], dict[str, float]]:
    """Send the task's records and flush: (tracker, records sent, bytes, metrics before, metrics after)."""
    before = producer.metrics()
    tracker = DeliveryTracker()
    sent, nbytes = send_all(producer, tracker)
    producer.flush(timeout=options.flush_timeout_s)
    tracker.settle()
    return tracker, sent, nbytes, before, producer.metrics()


def _run_task(
    options: SinkOptions, send_all: Callable[[Any, DeliveryTracker], tuple[int, int]], scope: str | None = None
) -> TaskCommit:
    """The task's work, in a span of its own when ``kafka.tracing.enabled=true`` and the worker traces.

    The span (``kproducer sink task``) is current while the task sends, so the records' spans
    are its children; it ends with the task's record and byte counts, or its error.
    """
    from kproducer.tracing import ProducerTracing

    enabled = options.producer_config_dict.get("tracing.enabled", "false").strip().lower() == "true"
    tracing = ProducerTracing.create(enabled, options.producer_config_dict.get("client.id") or "kproducer-sink")
    if tracing is None or not tracing.active():
        return _run_task_untraced(options, send_all, scope)
    partition_id, attempt = _task_ids()
    attributes = {
        "messaging.system": "kafka",
        "kproducer.spark.partition_id": partition_id,
        "kproducer.spark.attempt": attempt,
        "kproducer.spark.delivery_guarantee": options.delivery_guarantee,
    }
    if options.topic is not None:
        attributes["messaging.destination.name"] = options.topic
    with tracing.task("kproducer sink task", attributes) as span:
        commit = _run_task_untraced(options, send_all, scope)
        span.set_attribute("kproducer.spark.records", commit.records)
        span.set_attribute("kproducer.spark.bytes", commit.bytes)
        return commit


def _run_task_untraced(
    options: SinkOptions, send_all: Callable[[Any, DeliveryTracker], tuple[int, int]], scope: str | None = None
) -> TaskCommit:
    """Hold the cached producer, send everything, flush, and turn the outcome into a commit message."""
    if options.exactly_once:
        return _run_transactional_task(options, send_all, scope)
    started = time.time()
    partition_id, attempt = _task_ids()
    cache = _cache_provider()
    with cache.producer(options.producer_config_dict, options.cache_timeout_ms) as entry:
        producer = entry.producer
        created = entry.uses == 1
        tracker, sent, nbytes, before, after = _send_and_flush(producer, options, send_all)
    _delivery_outcome(options, tracker, sent, partition_id, attempt)
    return _task_commit(partition_id, attempt, tracker, nbytes, before, after, started, entry.serial, created)


def _task_commit(
    partition_id: int,
    attempt: int,
    tracker: DeliveryTracker,
    nbytes: int,
    before: dict[str, float],
    after: dict[str, float],
    started: float,
    serial: int,
    created: bool,
    txn: TxnCommittable | None = None,
) -> TaskCommit:
    return TaskCommit(
        partition_id=partition_id,
        attempt=attempt,
        records=tracker.acked,
        bytes=nbytes,
        partitions=tracker.partitions(),
        metrics=metrics_delta(before, after),
        producer_serial=serial,
        producer_pid=os.getpid(),
        producer_created=created,
        started=started,
        finished=time.time(),
        txn=txn,
    )


# Tests swap this to build the task's transactional producer.
def _default_transactional_factory(config: dict[str, str]) -> Any:
    # The cache's factory: shipped certificate files are found the same way (SparkFiles).
    from kproducer.spark.cache import _default_factory

    return _default_factory(config)


_transactional_factory: Callable[[dict[str, str]], Any] = _default_transactional_factory


def _run_transactional_task(
    options: SinkOptions, send_all: Callable[[Any, DeliveryTracker], tuple[int, int]], scope: str | None
) -> TaskCommit:
    """Phase one of the two-phase commit: write in a transaction of the attempt's own, flush, do not commit.

    A transactional producer serves one transaction at a time and its id is
    this attempt's alone, so it is not taken from the worker's cache.
    """
    started = time.time()
    partition_id, attempt = _task_ids()
    if scope is None:
        scope = _micro_batch_scope()
    assert options.transactional_id_prefix is not None
    tid = transactional_id(options.transactional_id_prefix, scope, partition_id, attempt)
    producer = _transactional_factory({**options.producer_config_dict, "transactional.id": tid})
    committable: TxnCommittable | None = None
    try:
        producer.init_transactions()
        producer.begin_transaction()
        tracker, sent, nbytes, before, after = _send_and_flush(producer, options, send_all)
        _delivery_outcome(options, tracker, sent, partition_id, attempt)
        if tracker.acked > 0:
            # With no record sent the transaction holds no partition, and the coordinator
            # would refuse EndTxn for it: nothing to commit.
            committable = TxnCommittable(tid, producer.producer_id, producer.producer_epoch, partition_id, attempt)
    except BaseException:
        # A failed attempt ends its own transaction, so that read_committed consumers are
        # not held back until it times out; the driver fences the id as well.
        try:
            producer.abort_transaction(timeout=30.0)
        except Exception as e:
            logger.info("task %d attempt %d: aborting %s failed: %s", partition_id, attempt, tid, e)
        producer.close(timeout=30.0)
        raise
    if committable is None:
        producer.abort_transaction(timeout=30.0)
        producer.close(timeout=30.0)
    else:
        # The transaction is the driver's to commit (or abort): closing must not end it.
        producer.close_keeping_transaction_open(timeout=30.0)
    logger.info(
        "task %d attempt %d: %d records in transaction %s (producer %d, epoch %d), left for the driver to commit",
        partition_id, attempt, tracker.acked, tid, producer.producer_id, producer.producer_epoch,
    )
    return _task_commit(partition_id, attempt, tracker, nbytes, before, after, started, 0, True, committable)


class _SinkWriterBase:
    """State shared by the four writers: parsed options and column roles, both picklable."""

    def __init__(self, options: SinkOptions, schema: SinkSchema, scope: str | None = None) -> None:
        self.sink_options = options
        self.sink_schema = schema
        # Exactly-once batch writes: one token per write, in every task's transactional id
        # (streaming writers leave it None and use the micro-batch id instead).
        self.scope = scope

    def _write_arrow(self, iterator: Iterator[Any]) -> TaskCommit:
        schema, topic = self.sink_schema, self.sink_options.topic
        key_name = schema.key
        value_avro, key_avro = self.sink_options.value_avro, self.sink_options.key_avro

        def send_all(producer: Any, tracker: DeliveryTracker) -> tuple[int, int]:
            sent = nbytes = 0
            send_arrow = producer.send_arrow
            for batch in iterator:
                if value_avro is not None or key_avro is not None:
                    batch = encode_batch(batch, schema, topic, value_avro, key_avro)
                for part in plan_arrow_batch(batch, schema, topic):
                    if isinstance(part, BulkCall):
                        data = part.batch
                        tracker.watch(
                            send_arrow(
                                data,
                                part.topic,
                                value_column=schema.value,
                                key_column=key_name,
                                partition=part.partition,
                                timestamp=part.timestamp,
                                headers=part.headers,
                            )
                        )
                        sent += data.num_rows
                        nbytes += binary_nbytes(data.column(0))
                        if key_name is not None:
                            nbytes += binary_nbytes(data.column(1))
                    else:
                        _send_columns(producer, part, tracker)
                        sent += part.num_rows
                        nbytes += part.nbytes
            return sent, nbytes

        return _run_task(self.sink_options, send_all, self.scope)

    def _write_rows(self, iterator: Iterator[Any]) -> TaskCommit:
        schema, topic = self.sink_schema, self.sink_options.topic

        def send_all(producer: Any, tracker: DeliveryTracker) -> tuple[int, int]:
            sent = nbytes = 0
            send = producer.send
            for row in iterator:
                t, k, v, p, ts, h = row_to_record(row, schema, topic)
                send(t, value=v, key=k, partition=p, timestamp=ts, headers=h, callback=tracker)
                sent += 1
                nbytes += (len(k) if k else 0) + (len(v) if v else 0)
            return sent, nbytes

        return _run_task(self.sink_options, send_all, self.scope)

    def _finish(
        self, messages: list[WriterCommitMessage | None], batch_id: int | None, aborted: bool
    ) -> WriteSummary:
        if self.sink_options.exactly_once:
            self._end_transactions(messages, batch_id, aborted)
        summary = aggregate(messages, batch_id=batch_id, aborted=aborted)
        if aborted:
            if self.sink_options.exactly_once:
                logger.warning("%s (their transactions were aborted)", summary.line())
            else:
                logger.warning("%s (records already acknowledged stay in Kafka)", summary.line())
        else:
            logger.info("%s", summary.line())
        # The data is committed at this point: a summary that cannot be kept is logged, never raised.
        if self.sink_options.summary_path:
            try:
                append_summary(self.sink_options.summary_path, summary)
            except OSError as e:
                logger.warning("could not append the summary to %s: %s", self.sink_options.summary_path, e)
        if self.sink_options.summary_token:
            try:
                store_summary(self.sink_options.summary_token, summary)
            except (OSError, ValueError) as e:
                logger.warning("could not keep the summary for write_to_kafka: %s", e)
        return summary

    def _end_transactions(
        self, messages: list[WriterCommitMessage | None], batch_id: int | None, aborted: bool
    ) -> None:
        """Phase two, on the driver: commit (or abort) the winners' transactions and fence the losers."""
        opts = self.sink_options
        config = opts.producer_config_dict
        commits = [m for m in messages if isinstance(m, TaskCommit)]
        txns = [m.txn for m in commits if m.txn is not None]
        scope = self.scope if batch_id is None else f"b{batch_id}"
        assert opts.transactional_id_prefix is not None and scope is not None
        try:
            if aborted:
                abort_transactions(config, txns)
            elif batch_id is None:
                commit_transactions(config, txns)
            else:
                log = self.transaction_log()
                if log.is_committed(batch_id):
                    # Spark re-ran a micro-batch whose transactions were committed before a
                    # restart: its rows are in Kafka once already, so this run's are dropped.
                    logger.warning(
                        "micro-batch %d was committed to Kafka before the restart; aborting the %d "
                        "transactions of its re-run", batch_id, len(txns),
                    )
                    abort_transactions(config, txns)
                else:
                    log.prepare(batch_id, txns)
                    commit_transactions(config, txns)
                    log.mark_committed(batch_id)
        finally:
            fence_losers(config, opts.transactional_id_prefix, scope, [(m.partition_id, m.attempt) for m in commits])

    def transaction_log(self) -> TransactionLog:
        location = self.sink_options.checkpoint_location
        if not location:
            raise ConfigError(
                "deliveryGuarantee=exactly_once on a stream needs the option 'checkpointLocation' on the "
                "writeStream: the sink keeps its transaction log there"
            )
        return TransactionLog(location)

    def recover(self) -> None:
        """At query start: finish the commit of micro-batches recorded but not marked committed."""
        log = self.transaction_log()
        for batch_id, txns in sorted(log.pending().items()):
            logger.warning(
                "micro-batch %d: the driver stopped while committing its %d transactions; committing them now",
                batch_id, len(txns),
            )
            commit_transactions(self.sink_options.producer_config_dict, txns)
            log.mark_committed(batch_id)


class _BatchCommit(_SinkWriterBase):
    """The commit and abort of a batch write (Spark's DataSourceWriter calls them once, on the driver)."""

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        self._finish(messages, None, aborted=False)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        self._finish(messages, None, aborted=True)


class _StreamCommit(_SinkWriterBase):
    """The commit and abort of one micro-batch (DataSourceStreamWriter passes its batch id)."""

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        self._finish(messages, batchId, aborted=False)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        self._finish(messages, batchId, aborted=True)


class _ArrowWrite(_SinkWriterBase):
    """``write`` on Arrow batches (the default path)."""

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return self._write_arrow(iterator)


class _RowWrite(_SinkWriterBase):
    """``write`` on Rows (``writer=row``), kept for comparison."""

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return self._write_rows(iterator)


class KafkaArrowWriter(_ArrowWrite, _BatchCommit, DataSourceArrowWriter):
    """Batch writer on Arrow batches: the default path."""


class KafkaRowWriter(_RowWrite, _BatchCommit, DataSourceWriter):
    """Batch writer on Rows (``writer=row``), kept for comparison."""


class KafkaStreamArrowWriter(_ArrowWrite, _StreamCommit, DataSourceStreamArrowWriter):
    """Streaming writer on Arrow batches: each micro-batch's tasks flush before the commit."""


class KafkaStreamRowWriter(_RowWrite, _StreamCommit, DataSourceStreamWriter):
    """Streaming writer on Rows (``writer=row``)."""


def plan(options: Any, schema: StructType) -> tuple[SinkOptions, SinkSchema]:
    """The planning-time checks: options, columns, then the producer's own config table."""
    opts = parse_options(options)
    cols = validate_schema(schema, opts.topic, opts.value_format, opts.key_format)
    validate_producer_config(opts.producer_config_dict)
    if opts.value_format == "avro" or opts.key_format == "avro":
        # The registry is asked here, on the driver: a refused schema fails the query before any task.
        opts = pin_formats(opts, cols, schema)
    return opts, cols


class KafkaDataSource(DataSource):
    """``df.write.format("kproducer")``: a pure-Python Kafka sink (Spark refuses the name "kafka")."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        opts, cols = plan(self.options, schema)
        scope = uuid.uuid4().hex[:16] if opts.exactly_once else None
        if opts.writer == "row":
            return KafkaRowWriter(opts, cols, scope)
        return KafkaArrowWriter(opts, cols, scope)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:  # noqa: N802
        opts, cols = plan(self.options, schema)
        writer: KafkaStreamRowWriter | KafkaStreamArrowWriter
        if opts.writer == "row":
            writer = KafkaStreamRowWriter(opts, cols)
        else:
            writer = KafkaStreamArrowWriter(opts, cols)
        if opts.exactly_once:
            writer.recover()
        return writer


class _SummaryPartition(InputPartition):
    def __init__(self, lines: list[str]) -> None:
        super().__init__(lines)
        self.lines = lines


class _SummaryReader(DataSourceReader):
    """Fetches on the driver (in ``partitions()``) what the driver's commit kept under a token."""

    def __init__(self, token: str) -> None:
        self.token = token

    def partitions(self) -> list[InputPartition]:
        return [_SummaryPartition(take_summary(self.token))]

    def read(self, partition: InputPartition) -> Iterator[tuple[str]]:
        for line in getattr(partition, "lines", []):
            yield (line,)


class KafkaSummarySource(DataSource):
    """``spark.read.format("kproducer_summary").option("token", t)``: how ``write_to_kafka`` gets its summary.

    The sink's ``commit()`` and this source's ``partitions()`` both run in
    Python workers on the driver, so the summary never touches the caller's
    filesystem: it comes back as the rows of a query, which also works through
    Spark Connect.
    """

    @classmethod
    def name(cls) -> str:
        return SUMMARY_SOURCE_NAME

    def schema(self) -> str:
        return "summary string"

    def reader(self, schema: StructType) -> DataSourceReader:
        token = self.options.get("token")
        if not token:
            raise ConfigError("the kproducer_summary source needs the option 'token'")
        return _SummaryReader(str(token))
