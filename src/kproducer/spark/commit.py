"""What each task reports back (its commit message) and the driver's aggregate of them.

A task counts acknowledgements in the delivery callback (on the producer's
I/O thread) and returns, after its flush, a :class:`TaskCommit`: records,
bytes, per-partition offset ranges and the producer-metric deltas of the task.
The driver's ``commit()`` folds them into a :class:`WriteSummary`, logs one
line and hands the summary on:

- with the ``summary.token`` option (set by ``write_to_kafka``), into the
  driver's own temporary directory under that token, where the
  ``kproducer_summary`` read source picks it up. Its ``partitions()`` runs on
  the driver too, so the summary travels back to the caller as a query result:
  that works on a Spark Connect server that shares no filesystem with the
  client, and on any cluster manager;
- with the ``summary.path`` option, appended to that file as a JSON line (a
  path on the driver's filesystem, for streaming queries and local use).

``commit()`` runs in a separate Python worker, which is why the summary needs
one of these roads at all.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import tempfile
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from pyspark.sql.datasource import WriterCommitMessage

from kproducer.spark.exactly_once import TxnCommittable

logger = logging.getLogger(__name__)

__all__ = [
    "DeliveryTracker",
    "TaskCommit",
    "WriteSummary",
    "aggregate",
    "append_summary",
    "metrics_delta",
    "read_summaries",
    "store_summary",
    "take_summary",
]

# Offsets of one partition: [first, last, count].
OffsetRange = list[int]


class DeliveryTracker:
    """One task's delivery outcomes: acknowledged counts, offset ranges and the first error.

    Records sent with ``send()`` report here through the delivery callback
    (``tracker`` itself), on the producer's single I/O thread. Bulk calls
    (``send_arrow``) are not called back per record: their futures are kept
    with :meth:`watch` and folded in by :meth:`settle`, one batch range at a
    time, after the task's ``flush()``. The task reads the counts only after
    ``flush()`` returned, which orders both, so no lock is needed.
    """

    __slots__ = ("acked", "bulk", "failed", "first_error", "ranges")

    def __init__(self) -> None:
        self.acked = 0
        self.failed = 0
        self.first_error: BaseException | None = None
        self.ranges: dict[tuple[str, int], OffsetRange] = {}
        self.bulk: list[Any] = []

    def __call__(self, metadata: Any, exception: BaseException | None) -> None:
        if exception is not None:
            self._fail(1, exception)
            return
        self._ack(metadata.topic, metadata.partition, metadata.offset, metadata.offset, 1)

    def _fail(self, count: int, exception: BaseException) -> None:
        self.failed += count
        if self.first_error is None:
            self.first_error = exception

    def _ack(self, topic: str, partition: int, first: int, last: int, count: int) -> None:
        self.acked += count
        tp = (topic, partition)
        r = self.ranges.get(tp)
        if r is None:
            self.ranges[tp] = [first, last, count]
        else:
            if first < r[0]:
                r[0] = first
            if last > r[1]:
                r[1] = last
            r[2] += count

    def watch(self, future: Any) -> None:
        """Keep a bulk call's future (``kproducer.bulk.BulkFuture``) for :meth:`settle`."""
        self.bulk.append(future)

    def settle(self, timeout: float = 5.0) -> None:
        """Fold in the watched bulk futures; one not done within ``timeout`` s stays uncounted.

        Call it after ``flush()``: then every future is done, or the flush
        timed out and the task reports the records as unacknowledged.
        """
        deadline = time.monotonic() + timeout
        for fut in self.bulk:
            if fut.done() or _await(fut, max(0.0, deadline - time.monotonic())):
                self._fold(fut)
        self.bulk = []

    def _fold(self, fut: Any) -> None:
        """A done BulkFuture's outcome, one range per (batch, call) rather than one object per record."""
        ranges = getattr(fut, "ranges", None)
        if ranges is None:
            # Not the bulk module's future: per record through the public API.
            for md, err in zip(fut.metadata(0), fut.exceptions(0), strict=True):
                self(md, err)
            return
        delivered, missing, missing_error = ranges(0)
        for r in delivered:
            topic, partition = r.topic_partition
            if r.errors is None:
                if r.first_offset < 0:  # acks=0: no offsets, as send() reports them (-1)
                    self._ack(topic, partition, -1, -1, r.record_count)
                else:
                    self._ack(topic, partition, r.first_offset, r.first_offset + r.record_count - 1, r.record_count)
                continue
            for j, err in enumerate(r.errors):
                if err is not None:
                    self._fail(1, err)
                else:
                    off = r.first_offset + j if r.first_offset >= 0 else -1
                    self._ack(topic, partition, off, off, 1)
        if missing > 0:
            # Records the call never queued (it failed part-way, e.g. the topic's metadata timed out).
            err = missing_error or fut.exception(0)
            if err is not None:
                self._fail(missing, err)

    def partitions(self) -> dict[str, dict[int, OffsetRange]]:
        out: dict[str, dict[int, OffsetRange]] = {}
        for (topic, partition), r in self.ranges.items():
            out.setdefault(topic, {})[partition] = list(r)
        return out


def _await(fut: Any, timeout: float) -> bool:
    """Wait for a BulkFuture through its public done-callback; False after ``timeout`` s."""
    ev = threading.Event()
    fut.add_done_callback(lambda _f: ev.set())
    return ev.wait(timeout)


def metrics_delta(before: Mapping[str, float], after: Mapping[str, float]) -> dict[str, float]:
    """Counters (``*-total``) as the task's difference; averages and gauges as their value at the end.

    Per-topic metrics (``name[topic=...]``) are folded away to keep the message small; their
    byte totals give ``batch-estimate-total`` (bytes / average batch size) when the producer
    has no batch counter of its own. NaN (no samples yet) is dropped.
    """
    out: dict[str, float] = {}
    topic_bytes = 0.0
    for name, value in after.items():
        if not isinstance(value, int | float) or math.isnan(value):
            continue
        if name.partition("[")[0].endswith("-total"):
            delta = float(value) - float(before.get(name, 0.0) or 0.0)
            if "[" in name:
                if name.startswith("byte-total["):
                    topic_bytes += delta
                continue
            out[name] = delta
        elif "[" not in name:
            out[name] = float(value)
    avg = out.get("batch-size-avg", 0.0)
    if "batch-total" not in out and topic_bytes > 0 and avg > 0:
        out["batch-estimate-total"] = round(topic_bytes / avg)
    return out


@dataclass
class TaskCommit(WriterCommitMessage):
    """One task's report: picklable, small (one entry per partition written)."""

    partition_id: int
    attempt: int
    records: int
    bytes: int
    partitions: dict[str, dict[int, OffsetRange]]
    metrics: dict[str, float]
    producer_serial: int
    producer_pid: int
    producer_created: bool
    started: float
    finished: float
    # Exactly-once: the attempt's open transaction, for the driver to commit.
    txn: TxnCommittable | None = None


@dataclass
class WriteSummary:
    """The aggregate of a write (or of one micro-batch, with ``batch_id``)."""

    tasks: int = 0
    records: int = 0
    bytes: int = 0
    partitions: dict[str, dict[int, OffsetRange]] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    producers_created: int = 0
    started: float = 0.0
    finished: float = 0.0
    batch_id: int | None = None
    aborted: bool = False
    missing_tasks: int = 0
    # False when the write succeeded but its summary could not be fetched from the driver;
    # then the counts above are not known (zero) and ``note`` says why.
    available: bool = True
    note: str = ""

    @property
    def elapsed(self) -> float:
        return max(0.0, self.finished - self.started)

    @property
    def records_per_second(self) -> float:
        return self.records / self.elapsed if self.elapsed > 0 else 0.0

    def topic_counts(self) -> dict[str, int]:
        return {t: sum(r[2] for r in parts.values()) for t, parts in self.partitions.items()}

    def line(self) -> str:
        """The one summary line the driver logs."""
        if not self.available:
            return f"kproducer sink committed; no summary: {self.note}"
        topics = ", ".join(f"{t}={n:,}" for t, n in sorted(self.topic_counts().items()))
        where = f"batch {self.batch_id}: " if self.batch_id is not None else ""
        state = "aborted" if self.aborted else "committed"
        # Executors keep a producer per configuration between tasks (kproducer.spark.cache), so
        # the line says how many tasks had to start one rather than a bare "producers created".
        return (
            f"kproducer sink {state} {where}{self.records:,} records, {self.bytes:,} bytes from "
            f"{self.tasks:,} task{'' if self.tasks == 1 else 's'} "
            f"in {self.elapsed:.2f}s ({self.records_per_second:,.0f} records/s); "
            f"{self._producers_phrase()}; records per topic: {topics or '-'}"
        )

    def _producers_phrase(self) -> str:
        created, tasks = self.producers_created, self.tasks
        if tasks == 0:
            return "no task reported"
        if tasks == 1:
            return "the task started a producer" if created else "the task reused a producer"
        if created == 0:
            return f"all {tasks:,} tasks reused a producer"
        if created >= tasks:
            return f"each of the {tasks:,} tasks started a producer"
        return f"{created:,} of the {tasks:,} tasks started a producer, the others reused one"

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> WriteSummary:
        raw = json.loads(text)
        raw["partitions"] = {
            t: {int(p): r for p, r in parts.items()} for t, parts in raw["partitions"].items()
        }
        return cls(**raw)


# Averages are weighted by the records each task sent, so a tiny task does not skew them.
def aggregate(
    messages: Iterable[WriterCommitMessage | None], batch_id: int | None = None, aborted: bool = False
) -> WriteSummary:
    """Fold the tasks' commit messages (None for a failed task) into one summary."""
    s = WriteSummary(batch_id=batch_id, aborted=aborted)
    weights: dict[str, float] = {}
    starts: list[float] = []
    ends: list[float] = []
    for m in messages:
        if not isinstance(m, TaskCommit):
            s.missing_tasks += 1
            continue
        s.tasks += 1
        s.records += m.records
        s.bytes += m.bytes
        s.producers_created += int(m.producer_created)
        starts.append(m.started)
        ends.append(m.finished)
        for topic, parts in m.partitions.items():
            dest = s.partitions.setdefault(topic, {})
            for p, (first, last, count) in parts.items():
                r = dest.get(p)
                dest[p] = (
                    [first, last, count] if r is None else [min(r[0], first), max(r[1], last), r[2] + count]
                )
        w = float(max(m.records, 1))
        for name, value in m.metrics.items():
            if name.endswith("-total"):
                s.metrics[name] = s.metrics.get(name, 0.0) + value
            elif name.endswith("-max"):
                s.metrics[name] = max(s.metrics.get(name, value), value)
            else:
                s.metrics[name] = s.metrics.get(name, 0.0) + value * w
                weights[name] = weights.get(name, 0.0) + w
    for name, w in weights.items():
        s.metrics[name] = s.metrics[name] / w
    s.started = min(starts, default=0.0)
    s.finished = max(ends, default=0.0)
    return s


def append_summary(path: str, summary: WriteSummary) -> None:
    """Append one JSON line; a single write() of a short line, so concurrent appends stay whole."""
    parent = os.path.dirname(path)
    if parent:
        os.makedirs(parent, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(summary.to_json() + "\n")


def read_summaries(path: str) -> list[WriteSummary]:
    """Every summary a sink appended to ``path`` (one per write or micro-batch), oldest first."""
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8") as fh:
        return [WriteSummary.from_json(line) for line in fh if line.strip()]


# Summaries handed from the driver's commit() to the summary read source, by token.
_TOKEN = re.compile(r"^[0-9a-f]{16,64}$")
# A summary nobody fetched (the caller went away) is removed after this long.
SUMMARY_MAX_AGE_S = 3600.0
TAKEN_MAX_AGE_S = 60.0


def summary_dir() -> str:
    """The driver-local directory of fetched-once summaries (both workers run on the driver)."""
    return os.path.join(tempfile.gettempdir(), f"kproducer-summaries-{os.getuid()}")


def _token_path(token: str) -> str:
    if not _TOKEN.match(token):
        raise ValueError(f"summary token {token!r} is not 16-64 lower-case hex digits")
    return os.path.join(summary_dir(), f"{token}.jsonl")


def store_summary(token: str, summary: WriteSummary) -> None:
    """Append the summary under ``token`` (driver side), and drop old ones.

    One not yet fetched is kept for an hour; one already fetched for a minute
    (Spark may plan the fetching read more than once).
    """
    append_summary(_token_path(token), summary)
    now = time.time()
    try:
        with os.scandir(summary_dir()) as entries:
            for e in entries:
                limit = TAKEN_MAX_AGE_S if e.name.endswith(".taken") else SUMMARY_MAX_AGE_S
                try:
                    if now - e.stat().st_mtime > limit:
                        os.unlink(e.path)
                except OSError:
                    pass
    except OSError:
        pass


def take_summary(token: str) -> list[str]:
    """The JSON lines stored under ``token`` (driver side); marks them fetched."""
    path = _token_path(token)
    taken = path + ".taken"
    try:
        os.replace(path, taken)
    except FileNotFoundError:
        pass
    try:
        with open(taken, encoding="utf-8") as fh:
            return [line.strip() for line in fh if line.strip()]
    except FileNotFoundError:
        return []
