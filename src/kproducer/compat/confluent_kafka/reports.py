"""Delivery reports: queued by kproducer's I/O thread, served on the application's thread by ``poll()``/``flush()``."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable
from typing import Any

from kproducer.compat.confluent_kafka.errors import KafkaError
from kproducer.compat.confluent_kafka.message import (
    _PARTITION_UA,
    OFFSET_INVALID,
    TIMESTAMP_CREATE_TIME,
    TIMESTAMP_NOT_AVAILABLE,
    Message,
)
from kproducer.structs import RecordMetadata

__all__ = ["Delivery", "Reports"]


class Delivery:
    """One produced record until its report is served: the Java-shaped callback kproducer calls, on its I/O thread."""

    __slots__ = (
        "reports", "on_delivery", "topic", "key", "value", "headers", "size", "produced_at", "metadata", "error",
        "latency", "dropped",
    )  # fmt: skip

    def __init__(
        self,
        reports: Reports,
        on_delivery: Callable[..., Any] | None,
        topic: str,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes | None]] | None,
        size: int,
    ) -> None:
        self.reports = reports
        self.on_delivery = on_delivery
        self.topic = topic
        self.key = key
        self.value = value
        self.headers = headers
        self.size = size
        self.produced_at = time.monotonic()
        self.metadata: RecordMetadata | None = None
        self.error: BaseException | None = None
        self.latency = 0.0
        self.dropped = False  # produce() raised for it: nothing to report

    def __call__(self, metadata: RecordMetadata | None, exception: BaseException | None) -> None:
        self.metadata = metadata
        self.error = exception
        self.latency = time.monotonic() - self.produced_at
        self.reports.put(self)

    def message(self) -> Message:
        md = self.metadata
        error = None if self.error is None else KafkaError.from_exception(self.error)
        if md is not None:
            partition = md.partition
            offset = md.offset if md.offset >= 0 else OFFSET_INVALID
            timestamp = (TIMESTAMP_CREATE_TIME, md.timestamp) if md.timestamp >= 0 else (TIMESTAMP_NOT_AVAILABLE, 0)
        else:
            failed_partition = getattr(self.error, "partition", None)
            partition = failed_partition if failed_partition is not None else _PARTITION_UA
            offset = None  # confluent-kafka's report of a failed record has no offset
            timestamp = (TIMESTAMP_NOT_AVAILABLE, 0)
        # confluent-kafka's delivery reports carry no headers (msg.headers() is None there): the same here.
        return Message(self.topic, partition, offset, self.key, self.value, None, error, timestamp, self.latency)


class Reports:
    """Reports queued by the I/O thread, served on the application's thread; counts what is outstanding.

    A record with no delivery callback to serve has no report: it is outstanding
    until its future completes (librdkafka, with nothing to report, also forgets a
    message once delivered), and costs no call on the I/O thread.
    """

    def __init__(self) -> None:
        self._queue: collections.deque[Delivery] = collections.deque()
        # Client-wide errors for error_cb, served before the delivery reports; not counted by len().
        self._errors: collections.deque[KafkaError] = collections.deque()
        self._cond = threading.Condition()
        self._waiters = 0
        self.outstanding = 0
        self.outstanding_bytes = 0
        # Records without a report: (future, size), in produce order (produce() may run on several threads).
        self._silent: collections.deque[tuple[Any, int]] = collections.deque()
        self._silent_bytes = 0
        self._silent_lock = threading.Lock()

    def track_silent(self, future: Any, size: int) -> None:
        with self._silent_lock:
            self._silent.append((future, size))
            self._silent_bytes += size

    def release_completed(self) -> None:
        """Drop the completed records without a report from the front (records complete about in order)."""
        with self._silent_lock:
            silent = self._silent
            while silent and silent[0][0].done():
                self._silent_bytes -= silent.popleft()[1]

    def _prune_silent(self) -> None:
        """Drop the completed records without a report (a scan, done when a count is needed)."""
        with self._silent_lock:
            silent = self._silent
            if not silent:
                return
            pending = [(f, n) for f, n in silent if not f.done()]
            if len(pending) != len(silent):
                self._silent = collections.deque(pending)
                self._silent_bytes = sum(n for _, n in pending)

    def count(self) -> int:
        """Records produced and not yet reported (or, without a report, not yet completed)."""
        self._prune_silent()
        return self.outstanding + len(self._silent)

    def room_for(self, size: int, max_messages: int, max_bytes: int) -> bool:
        """Whether one more record of ``size`` bytes stays within the queue limits."""
        if (
            self.outstanding + len(self._silent) < max_messages
            and self.outstanding_bytes + self._silent_bytes + size <= max_bytes
        ):
            return True
        self._prune_silent()
        return (
            self.outstanding + len(self._silent) < max_messages
            and self.outstanding_bytes + self._silent_bytes + size <= max_bytes
        )

    def queued_bytes(self) -> int:
        return self.outstanding_bytes + self._silent_bytes

    def wake(self) -> None:
        """Wake a take() waiting for reports (its stop event was set)."""
        with self._cond:
            self._cond.notify_all()

    def add(self, size: int) -> None:
        with self._cond:
            self.outstanding += 1
            self.outstanding_bytes += size

    def forget(self, delivery: Delivery) -> None:
        """A record produce() raised for: it will not be reported."""
        with self._cond:
            if not delivery.dropped:
                delivery.dropped = True
                self.outstanding -= 1
                self.outstanding_bytes -= delivery.size

    def put(self, delivery: Delivery) -> None:
        with self._cond:
            self._queue.append(delivery)
            if self._waiters:
                self._cond.notify_all()

    def put_error(self, error: KafkaError) -> None:
        """A client-wide error for error_cb (queued by the I/O thread): it ends a waiting take() too."""
        with self._cond:
            self._errors.append(error)
            if self._waiters:
                self._cond.notify_all()

    def has_errors(self) -> bool:
        return bool(self._errors)

    def take_error(self) -> KafkaError | None:
        """The oldest client-wide error not served yet, or None."""
        with self._cond:
            return self._errors.popleft() if self._errors else None

    def take(self, timeout: float | None, stop: threading.Event | None = None) -> Delivery | None:
        """The next report, counted as served; None when none came within ``timeout`` s (None: no limit),
        ``stop`` was set, or a client-wide error is waiting (see :meth:`take_error`)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._cond:
            while True:
                if self._errors:
                    return None
                while self._queue:
                    delivery = self._queue.popleft()
                    if delivery.dropped:
                        continue
                    self.outstanding -= 1
                    self.outstanding_bytes -= delivery.size
                    return delivery
                if stop is not None and stop.is_set():
                    return None
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return None
                self._waiters += 1
                try:
                    self._cond.wait(remaining)
                finally:
                    self._waiters -= 1
