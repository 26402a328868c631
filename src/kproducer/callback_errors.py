"""Exceptions raised by delivery callbacks, and the thread that runs those callbacks.

A delivery callback runs on the producer's I/O thread. An exception it raises
cannot travel back to the code that called ``send()``, and it must not stop the
records that follow, so the producer counts it (the ``callback-error-total``
metric), logs it at ERROR with its traceback and carries on, as the Java
producer's ``ProducerBatch.completeFutureAndFireCallbacks`` does. The
``kproducer`` logger has a NullHandler, so an application that configured no
logging would see nothing: then the first such exception of each producer is
also written to stderr with its traceback, and the count of all of them when the
producer closes, as lost records are (:func:`kproducer.failure_log.warn_data_loss`).
confluent-kafka raises them from ``poll()``/``flush()`` instead; its adapter,
:mod:`kproducer.compat.confluent_kafka`, runs callbacks on the caller's thread and does so.

The I/O thread also must never wait for itself: ``RecordFuture.result()``,
``flush()`` and ``close()`` called from a callback would wait for the very
thread they run on. :func:`on_callback_thread` tells them so they raise
:class:`~kproducer.errors.IllegalStateError` instead of hanging.
"""

from __future__ import annotations

import logging
import sys
import threading
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from kproducer.failure_log import logging_configured
from kproducer.metrics.registry import PRODUCER_GROUP, MetricName

__all__ = [
    "CALLBACK_ERROR_METRIC",
    "CallbackErrors",
    "attributed_to",
    "callback_raised",
    "on_callback_thread",
    "run_as_callback_thread",
]

CALLBACK_ERROR_METRIC = "callback-error-total"

log = logging.getLogger("kproducer.callbacks")

# The CallbackErrors of the producer whose I/O thread this is (unset on other threads).
_thread = threading.local()


class CallbackErrors:
    """One producer's count of callback exceptions, its log lines, and its stderr notice."""

    def __init__(self, client_id: str, logger: logging.Logger = log) -> None:
        self.client_id = client_id
        self._log = logger
        self._lock = threading.Lock()
        self._count = 0
        self._noticed = False

    @property
    def count(self) -> int:
        """Callback exceptions since the producer started."""
        return self._count

    def raised(self, exc: BaseException, where: str) -> None:
        """A callback for a record of ``where`` (a topic-partition) raised ``exc``: count, log, maybe notice."""
        with self._lock:
            self._count += 1
            first = not self._noticed
            self._noticed = True
        self._log.error(
            "delivery callback raised for a record of %s (producer %s): %s: %s",
            where, self.client_id, type(exc).__name__, exc, exc_info=exc,
        )  # fmt: skip
        if first and not logging_configured(self._log):
            _stderr(
                f"kproducer ERROR: producer {self.client_id}: a delivery callback for {where} raised; the record "
                "itself is unaffected and later callbacks still run. Further callback exceptions are counted "
                f"(metric {CALLBACK_ERROR_METRIC}) and logged on the 'kproducer.callbacks' logger; configure "
                "logging to see each one.\n" + "".join(traceback.format_exception(exc))
            )

    def closed(self) -> None:
        """At close: when logging is not configured and callbacks raised, say how many, once."""
        if self._count and not logging_configured(self._log):
            _stderr(
                f"kproducer ERROR: producer {self.client_id}: {self._count} delivery callback "
                f"{'exception' if self._count == 1 else 'exceptions'} in total (metric {CALLBACK_ERROR_METRIC})\n"
            )

    # A metrics provider (kproducer.metrics.MetricsProvider): read when the metrics are read.
    def metric_values(self, now_ms: int) -> dict[str, float]:
        return {CALLBACK_ERROR_METRIC: float(self._count)}

    def metric_descriptions(self) -> dict[str, str]:
        return {CALLBACK_ERROR_METRIC: "The total number of exceptions raised by delivery callbacks."}

    def metric_names(self) -> list[MetricName]:
        return [MetricName(CALLBACK_ERROR_METRIC, PRODUCER_GROUP)]


def _stderr(text: str) -> None:
    try:
        sys.stderr.write(text)
        sys.stderr.flush()
    except (OSError, ValueError):  # stderr closed at interpreter exit
        pass


# Callbacks that run on a thread no producer registered nor claimed with attributed_to() are
# reported here (none of kproducer's own calls leaves one so).
_unattributed = CallbackErrors("(caller thread)")


def callback_raised(exc: BaseException, where: object) -> None:
    """Report ``exc``, raised by a delivery callback, to the producer whose thread runs it: its I/O
    thread, or the application's thread inside a producer call that completes records there."""
    errors: CallbackErrors = getattr(_thread, "errors", None) or getattr(_thread, "caller", None) or _unattributed
    errors.raised(exc, str(where))


@contextmanager
def attributed_to(errors: CallbackErrors) -> Iterator[None]:
    """Callbacks run on this (the application's) thread meanwhile are ``errors``' producer's.

    A record that fails inside ``send()`` (a serializer's error, a record too large...), a purge and
    a failed bulk call complete records on the caller's thread; the exceptions their callbacks raise
    count in that producer's metric like those raised on its I/O thread. Unlike the I/O thread's
    mark, this does not make waits from the callback refuse: the caller's thread is not the one
    that completes the other records.
    """
    previous = getattr(_thread, "caller", None)
    _thread.caller = errors
    try:
        yield
    finally:
        _thread.caller = previous


def on_callback_thread() -> bool:
    """Whether the current thread runs a producer's delivery callbacks (its I/O thread)."""
    return getattr(_thread, "errors", None) is not None


def run_as_callback_thread(run: Callable[[], None], errors: CallbackErrors) -> Callable[[], None]:
    """``run`` (a producer's I/O loop), marking its thread as the one that runs that producer's callbacks."""

    def target() -> None:
        _thread.errors = errors
        try:
            run()
        finally:
            _thread.errors = None

    return target
