"""The Producer's end of life: ``flush``, ``close``, the flush at interpreter exit, and producers in a forked child.

``close()`` flushes within its timeout and then fails what is left, saying at
WARNING what it still waits for; at interpreter exit a producer that still
holds records flushes them briefly and says so (its I/O thread is a daemon, as
Java's network thread is); in a forked child every producer of the parent
refuses use instead of hanging. Each ``Producer`` method here is a function
taking the producer, bound in the class. Log lines keep the
``kproducer.producer`` logger.
"""

from __future__ import annotations

import atexit
import logging
import os
import threading
import time
import weakref
from typing import TYPE_CHECKING

from kproducer.errors import IllegalStateError, RecordPurgedError
from kproducer.failure_log import warn_data_loss

if TYPE_CHECKING:
    from kproducer.producer import Producer

__all__ = ["EXIT_FLUSH_TIMEOUT_S", "close", "flush", "live_producers", "purge", "take_failed_count"]

log = logging.getLogger("kproducer.producer")

#: The producers of this process that are not closed (weakly held): the exit flush and the fork guard visit them.
live_producers: weakref.WeakSet[Producer] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # The Sender thread does not exist in a forked child: any use must fail loudly, never hang.
    for p in list(live_producers):
        p._forked = True
        if p._lane is not None:
            p._lane.enabled = False


os.register_at_fork(after_in_child=_after_fork_in_child)


#: close() says what it waits for once it has waited this long, then this often.
_CLOSE_REPORT_AFTER_S = 5.0
_CLOSE_REPORT_EVERY_S = 30.0
#: At interpreter exit a producer still holding records flushes them for at most this long.
EXIT_FLUSH_TIMEOUT_S = 5.0


def _at_exit() -> None:
    """At interpreter exit, flush briefly what a producer still holds, and say so at WARNING.

    The I/O thread is a daemon thread, so records left in a producer that was not
    flushed or closed would vanish with the interpreter (as with the Java client,
    whose network thread is a daemon too). Losing them silently is the worst outcome;
    flushing without a bound could hang exit for ``delivery.timeout.ms`` when the
    cluster is down. So: one WARNING naming the count and the fix, a flush bounded by
    ``EXIT_FLUSH_TIMEOUT_S`` (enough for lingering records to a reachable cluster),
    and a second WARNING with what was lost if that was not enough.
    """
    for p in list(live_producers):
        if p._closed or p._forked or p._pid != os.getpid():
            continue
        try:
            pending = p._router.pending_count()
            if not pending:
                continue
            warn_data_loss(
                log,
                f"producer {p.client_id}: the interpreter is exiting with {pending} undelivered records; "
                f"flushing them for up to {EXIT_FLUSH_TIMEOUT_S:g} s. Call flush() or close() before exiting, "
                "or use the producer as a context manager ('with Producer(...) as producer:')",
            )
            failed_before = p._failure_log.failed_total
            left = p.flush(EXIT_FLUSH_TIMEOUT_S)
            failed = p._failure_log.failed_total - failed_before
            if left:
                warn_data_loss(log, f"producer {p.client_id}: {left} records were not delivered before exit and are lost")
            elif failed:
                warn_data_loss(log, f"producer {p.client_id}: flushed at exit, but {failed} of the records failed")
            else:
                log.warning("producer %s: flushed at exit; all %d records were delivered", p.client_id, pending)
        except Exception:  # never turn an exit into a traceback
            log.debug("exit-time flush of %s failed", p.client_id, exc_info=True)
    for p in list(live_producers):
        # Failure summaries still held back by the rate limit: the last chance to say them.
        p._failure_log.emit_all(p._clock())


atexit.register(_at_exit)


def flush(producer: Producer, timeout: float | None = None) -> int:
    """Send everything buffered now and wait until it completes; returns how many records have not completed.

    A record completes when it is delivered *or* fails, so the result is ``0``
    whenever the wait finished, including when records failed; it is non-zero
    only when ``timeout`` (seconds) ran out first. This is confluent-kafka's
    convention (the length of the queue); Java's ``flush()`` returns nothing.
    A failed record's exception is on its future and its delivery callback, and
    it is logged at WARNING; :meth:`take_failed_count` gives the number of
    records that failed since its previous call::

        producer.flush()
        if producer.take_failed_count():
            ...  # some records were not delivered

    Calling it from a delivery callback would wait on the thread that runs
    callbacks, so that raises instead of deadlocking.
    """
    if producer._forked:
        producer._raise_unusable()
    if threading.current_thread() is producer._io_thread:
        raise IllegalStateError(
            "flush() called from a delivery callback would deadlock: it waits for the records the I/O thread "
            "completes, and callbacks run on that thread"
        )
    producer._accumulator.begin_flush()
    producer._wakeup()
    try:
        # Records waiting for metadata first reach a batch (or fail at max.block.ms).
        deadline = None if timeout is None else time.monotonic() + timeout
        if not producer._router.await_unparked(timeout):
            return producer._router.pending_count()
        remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
        producer._accumulator.await_flush_completion(remaining)
    finally:
        producer._accumulator.end_flush()
    return producer._router.pending_count()


def purge(producer: Producer) -> None:
    """Fail every record not yet sent with RecordPurgedError: those waiting for metadata and in batches not drained.

    Records already in a produce request (in flight) are not recalled: they end
    with their real outcome. Each purged record's future and callback get the
    error, as librdkafka's ``rd_kafka_purge()`` reports ``_PURGE_QUEUE``.
    """
    if producer._closed or producer._forked:
        producer._raise_unusable()
    error = RecordPurgedError("purged from the producer's queue before it was sent")
    producer._router.fail_all(error)
    producer._accumulator.abort_undrained_batches(error)
    producer._wakeup()


def take_failed_count(producer: Producer) -> int:
    """The number of records that failed since the previous call (or since the producer started).

    Every failure counts once: records whose future or callback received an
    exception, whether at ``send()`` (an illegal topic name, a record too large)
    or later (no metadata within ``max.block.ms``, retries exhausted,
    ``delivery.timeout.ms``, a forced close).
    """
    return producer._failure_log.take_failed_count()


def close(producer: Producer, timeout: float | None = None) -> None:
    """Flush within ``timeout`` seconds (None: wait as long as it takes), then fail what is left.

    Called from a delivery callback it cannot wait for the I/O thread it runs
    on: ``close(0)`` closes forcefully without waiting, as Java's ``close()``
    does there; any other timeout raises IllegalStateError instead of hanging.
    """
    if threading.current_thread() is producer._io_thread and timeout != 0:
        raise IllegalStateError(
            "close() called from a delivery callback would deadlock: it waits for the I/O thread the callback "
            "runs on; call close(0) there to close without waiting (pending records fail), or close on another thread"
        )
    with producer._close_lock:
        if producer._closed:
            return
        producer._closed = True
        if producer._lane is not None:
            producer._lane.enabled = False  # later sends take the Python path, which raises
    live_producers.discard(producer)
    if producer._forked:
        return
    if threading.current_thread() is producer._io_thread:
        log.warning("close() called from a delivery callback: closing without waiting for pending records")
        producer._sender.force_close()
        return
    if producer._breaker_manager is not None:
        # Closing drains everything: muted partitions get their records tried too.
        producer._breaker_manager.close()
    if producer._router.parked:
        # Records still waiting for metadata get it (or fail at max.block.ms) before the drain.
        start = time.monotonic()
        producer._router.await_unparked(timeout)
        if timeout is not None:
            timeout = max(0.0, timeout - (time.monotonic() - start))
    producer._sender.initiate_close()
    if not producer._io_thread_started:
        # No I/O thread (a test drives the Sender): its closing work runs here. close(0) waits for
        # nothing, as with the thread (and Java's close(Duration.ZERO)): what is left fails now.
        if timeout is not None and timeout <= 0:
            producer._sender.force_close()
        producer._sender.run()
    _join_io_thread(producer, timeout)
    if producer._io_thread.is_alive():
        log.warning("producer %s did not drain within %.1fs: failing the remaining records", producer.client_id, timeout or 0)
        producer._sender.force_close()
        producer._io_thread.join(5.0)
    producer._pool.close()
    for obj in (producer._key_serializer, producer._value_serializer, producer._partitioner, *producer._interceptors):
        close = getattr(obj, "close", None)
        if callable(close):
            try:
                close()
            except Exception:
                log.exception("error closing %r", obj)
    if producer._breaker is not None:
        producer._breaker.close()
    producer._callback_errors.closed()
    for reporter in producer._reporters:
        try:
            reporter.close()
        except Exception:
            log.exception("error closing metrics reporter %r", reporter)


def _join_io_thread(producer: Producer, timeout: float | None) -> None:
    """Wait for the I/O thread to drain; past a few seconds, say at WARNING what it is waiting for."""
    start = time.monotonic()
    deadline = None if timeout is None else start + timeout
    report_at = start + _CLOSE_REPORT_AFTER_S
    while producer._io_thread.is_alive():
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            return
        wait = report_at - now if deadline is None else min(report_at, deadline) - now
        producer._io_thread.join(max(wait, 0.0))
        now = time.monotonic()
        if producer._io_thread.is_alive() and now >= report_at:
            log.warning("close() has waited %.0f s: %s", now - start, _describe_pending(producer, timeout))
            report_at = now + _CLOSE_REPORT_EVERY_S


def _describe_pending(producer: Producer, timeout: float | None) -> str:
    """What is still undelivered and until when close() waits for it, for the close() WARNING."""
    batches = [b for b in producer._accumulator.incomplete_batches() if not b.result.completed]
    records = sum(b.record_count for b in batches)
    tps = sorted({str(b.topic_partition) for b in batches})
    shown = ", ".join(tps[:5]) + (f" and {len(tps) - 5} more" if len(tps) > 5 else "")
    oldest_s = (producer._clock() - min(b.created_ms for b in batches)) / 1000.0 if batches else 0.0
    bound = (
        f"close(timeout={timeout:g}) fails them after that"
        if timeout is not None
        else f"they fail after delivery.timeout.ms={producer.config.delivery_timeout_ms} ms; "
        "pass close(timeout=seconds) to bound the wait"
    )
    return (
        f"{records} {'record' if records == 1 else 'records'} in {len(batches)} "
        f"{'batch' if len(batches) == 1 else 'batches'} to {shown or 'no partition'} are undelivered "
        f"(oldest {oldest_s:.1f} s); {bound}; {producer._metadata.describe_reachability()}"
    )
