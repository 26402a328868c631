"""Rate-limited WARNING summaries of failed and retried records.

Every failed record already reaches its future and its callback; this is what an
operator reading the logs sees. A broker outage can fail or retry thousands of
batches a second, so the lines are summaries: at most one per topic-partition and
kind (failed, retrying) per ``interval_ms``, counting what happened since the
previous line, e.g. ``412 records to orders-3 failed: NOT_ENOUGH_REPLICAS after 5
retries``. The Java producer logs one WARN line per retried batch and one per
expired batch; librdkafka rate-limits its equivalents in the same spirit.

A pure policy object: the clock is passed in, nothing here reads the time.

Lost records are never silent: the ``kproducer`` logger carries a NullHandler (a
library stays quiet until the application configures logging), but the lines that
report lost records also go to stderr when the application configured no logging
at all, as librdkafka's errors do (:func:`warn_data_loss`).
"""

from __future__ import annotations

import logging
import sys
import threading
from dataclasses import dataclass, field

__all__ = ["FailureLog", "describe_error", "logging_configured", "warn_data_loss"]

#: One line per partition and kind at most this often by default.
DEFAULT_INTERVAL_MS = 5000


def describe_error(exc: BaseException) -> str:
    """``NOT_ENOUGH_REPLICAS`` for a broker error, the class name otherwise; the message when it adds to that."""
    name = getattr(exc, "name", None) or type(exc).__name__
    message = getattr(exc, "message", None) or str(exc)
    if not message or message == name:
        return str(name)
    return f"{name} ({message})"


def logging_configured(logger: logging.Logger) -> bool:
    """Whether a record logged on ``logger`` reaches a handler other than a NullHandler."""
    current: logging.Logger | None = logger
    while current is not None:
        if any(not isinstance(h, logging.NullHandler) for h in current.handlers):
            return True
        if not current.propagate:
            return False
        current = current.parent
    return False


def warn_data_loss(logger: logging.Logger, line: str) -> None:
    """Log ``line`` at WARNING; when the application configured no logging, print it to stderr too."""
    if not logger.isEnabledFor(logging.WARNING):
        return  # silenced on purpose (a level set on the kproducer logger)
    logger.warning("%s", line)
    if not logging_configured(logger):
        try:
            sys.stderr.write(f"kproducer WARNING: {line}\n")
            sys.stderr.flush()
        except (OSError, ValueError):  # stderr closed at interpreter exit
            pass


@dataclass(slots=True)
class _Pending:
    records: int = 0
    # error description -> [records, highest retry count or attempt seen, lowest]
    errors: dict[str, list[int]] = field(default_factory=dict)


class FailureLog:
    """Collects failed/retried record counts per partition and logs them at WARNING, rate-limited."""

    def __init__(self, logger: logging.Logger, interval_ms: int = DEFAULT_INTERVAL_MS) -> None:
        self._log = logger
        self.interval_ms = interval_ms
        self._lock = threading.Lock()
        self._pending: dict[tuple[str, str, int], _Pending] = {}
        self._last_line_ms: dict[tuple[str, str, int], int] = {}
        self._next_due_ms: int | None = None
        self._failed_total = 0
        self._failed_taken = 0

    # ------------------------------------------------------------------ recording
    def failed(self, topic: str, partition: int, records: int, exc: BaseException, retries: int, now_ms: int) -> None:
        """``records`` of ``topic``-``partition`` failed for good after ``retries`` retries."""
        with self._lock:
            self._failed_total += records
        self._add(("failed", topic, partition), records, exc, retries, now_ms)

    def retried(self, topic: str, partition: int, records: int, exc: BaseException, attempt: int, now_ms: int) -> None:
        """``records`` go back to the queue for retry number ``attempt`` after ``exc``."""
        self._add(("retrying", topic, partition), records, exc, attempt, now_ms)

    def _add(self, key: tuple[str, str, int], records: int, exc: BaseException, count: int, now_ms: int) -> None:
        lines: list[tuple[str, str]] = []
        with self._lock:
            p = self._pending.get(key)
            if p is None:
                p = self._pending[key] = _Pending()
            p.records += records
            slot = p.errors.setdefault(describe_error(exc), [0, count, count])
            slot[0] += records
            slot[1] = max(slot[1], count)
            slot[2] = min(slot[2], count)
            last = self._last_line_ms.get(key)
            if last is None or now_ms - last >= self.interval_ms:
                lines.append(self._take(key, now_ms))
            else:
                due = last + self.interval_ms
                if self._next_due_ms is None or due < self._next_due_ms:
                    self._next_due_ms = due
        for kind, line in lines:
            self._write(kind, line)

    # ------------------------------------------------------------------ emitting
    def maybe_emit(self, now_ms: int) -> None:
        """Log the summaries whose interval has passed (called from the Sender's loop; cheap when idle)."""
        due = self._next_due_ms
        if due is None or now_ms < due:
            return
        self._emit(now_ms, everything=False)

    def emit_all(self, now_ms: int) -> None:
        """Log every summary still held back (at close)."""
        if self._pending:
            self._emit(now_ms, everything=True)

    def _emit(self, now_ms: int, everything: bool) -> None:
        lines: list[tuple[str, str]] = []
        with self._lock:
            self._next_due_ms = None
            for key in list(self._pending):
                due = self._last_line_ms.get(key, now_ms) + self.interval_ms
                if everything or now_ms >= due:
                    lines.append(self._take(key, now_ms))
                elif self._next_due_ms is None or due < self._next_due_ms:
                    self._next_due_ms = due
        for kind, line in lines:
            self._write(kind, line)

    def _write(self, kind: str, line: str) -> None:
        if kind == "retrying":
            self._log.warning("%s", line)
        else:
            warn_data_loss(self._log, line)

    def _take(self, key: tuple[str, str, int], now_ms: int) -> tuple[str, str]:
        kind, topic, partition = key
        where = f"{topic}-{partition}" if partition >= 0 else topic
        p = self._pending.pop(key)
        self._last_line_ms[key] = now_ms
        errors = sorted(p.errors.items(), key=lambda kv: -kv[1][0])
        noun = "record" if p.records == 1 else "records"
        if kind == "failed":
            parts = [
                f"{desc} after {n_retries} {'retry' if n_retries == 1 else 'retries'}"
                + (f" ({n} {'record' if n == 1 else 'records'})" if len(errors) > 1 else "")
                for desc, (n, n_retries, _) in errors
            ]
            return kind, f"{p.records} {noun} to {where} failed: " + "; ".join(parts)
        # Counted like Java's record-retry-total: a record retried twice counts twice.
        parts = [
            f"{desc} ("
            + (f"{n}, " if len(errors) > 1 else "")
            + (f"attempt {high}" if low == high else f"attempts {low}-{high}")
            + ")"
            for desc, (n, high, low) in errors
        ]
        sends = "record send" if p.records == 1 else "record sends"
        return kind, f"{p.records} {sends} to {where} retried after " + "; ".join(parts)

    # ------------------------------------------------------------------ counting
    @property
    def failed_total(self) -> int:
        """Records that failed since the producer started."""
        return self._failed_total

    def take_failed_count(self) -> int:
        """Records that failed since the previous call (or since the producer started)."""
        with self._lock:
            n = self._failed_total - self._failed_taken
            self._failed_taken = self._failed_total
            return n
