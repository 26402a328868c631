"""linger.ms, stretched while the cost of many small batches is what keeps the batches small.

In the Java client the Sender is a thread of its own on a core of its own. Here it shares one
interpreter (the GIL) with the threads that call ``send()``. When those callers keep the
interpreter busy, the CPU splits between them and the Sender, and the split decides the batch
size: every Sender pass drains each ready node's partitions whole (Java's
``RecordAccumulator.drain`` takes the first batch of every partition of a ready node, not only
of the partition whose linger ran out), so a Sender that returns as soon as a batch is
sendable finds each partition holding the few records appended since its last pass. With keyed
records over hundreds of partitions, each pass then carries hundreds of batches of a few
records; each batch costs the caller that opens it, the Sender and the broker a fixed amount,
and the callers get less of the interpreter, so fewer records arrive per pass: the batches stay
small because the batches are small.

:class:`AdaptiveLinger` breaks that loop. After each drain the Sender reports how many batches
it took; over windows of at least :data:`WINDOW_MS` the policy compares the CPU time of the
Sender's thread with the time that passed. When a drain of the window took at least
:data:`MIN_BATCHES` batches and the Sender's share of the window was above
:data:`MAX_SENDER_SHARE`, the effective linger becomes its longest, :data:`MAX_STRETCH_MS`
(or less: see ``max_ms``), and batches opened meanwhile count as full only at
:data:`STRETCHED_READY_FACTOR` times ``batch.size`` (at most ``batch.max.size``; they grow
as KIP-782 lets a hot batch grow, and a batch that may not grow further is full). It stays so
while the drains keep taking many batches; at the first window without such a drain it is
``linger.ms`` and ``batch.size`` again.

Why the longest, and not a linger just long enough to bring the Sender's share down: a linger
set from the Sender's cost shortens whenever the Sender gets cheaper, so that a cheaper ready
check or drain came back as smaller batches, each of which costs the callers and the broker as
much as before (benchmarks/RESULTS.md, "A cheaper ready check and drain, tried and reverted").
Why a larger full size: with records of a kilobyte, ``batch.size`` holds about fifteen, and the
first partition to fill one makes its leader ready, whose drain then takes every partition's
batch, however few records it holds.

What does not change: a full batch, or one with another queued behind it, is sendable at once;
a flush, a close or a thread waiting for memory sends everything at once; and nothing waits longer than
:data:`MAX_STRETCH_MS` (or ``linger.ms``, when that is longer) for this policy. A Sender that
drains few partitions at a time never sees it. The clocks are injected (the Sender's clock and
its thread's CPU time), so tests drive the policy deterministically.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

__all__ = ["AdaptiveLinger", "MAX_SENDER_SHARE", "MAX_STRETCH_MS", "MIN_BATCHES", "STRETCHED_READY_FACTOR", "WINDOW_MS"]

log = logging.getLogger(__name__)

#: The share of the time that the Sender's own CPU may take while it drains many batches; above
#: it, the linger stretches.
MAX_SENDER_SHARE = 0.15
#: The Sender's share is judged over at least this long: several of the interpreter's switch
#: intervals (5 ms by default), so that one thread's turn with the GIL does not decide it.
WINDOW_MS = 20
#: A window none of whose drains took this many batches does not stretch the linger: with few
#: partitions each batch already holds what its partition received, and only the work per
#: record remains, which waiting does not reduce. (The largest drain of the window counts, not
#: their sum: a request that reached max.request.size leaves the rest of a pass to the next
#: drain, and a few partitions drained often must not add up to many.)
MIN_BATCHES = 32
#: The effective linger while stretched (bounds what a record may wait).
MAX_STRETCH_MS = 250
#: While stretched, a new batch counts as full at this many times ``batch.size`` (at most
#: ``batch.max.size``).
STRETCHED_READY_FACTOR = 4


def _thread_cpu_ms() -> float:
    return time.thread_time() * 1000.0


class AdaptiveLinger:
    """The effective linger the accumulator's ready check uses: ``linger.ms``, or longer (see the module)."""

    __slots__ = ("_linger_ms", "_max_ms", "linger_ms", "_sender_cpu_ms", "_window_start", "_largest_drain")

    def __init__(
        self,
        linger_ms: int,
        *,
        max_ms: int = MAX_STRETCH_MS,
        sender_cpu_ms: Callable[[], float] = _thread_cpu_ms,
    ) -> None:
        """``max_ms``: the effective linger while stretched, at most :data:`MAX_STRETCH_MS`. The
        producer passes ``delivery.timeout.ms - request.timeout.ms``, the time the Java client's
        config check leaves a record for lingering, so that a stretched linger never makes a record
        expire that ``linger.ms`` would have sent in time."""
        if linger_ms < 0:
            raise ValueError(f"linger.ms must be >= 0, got {linger_ms}")
        self._linger_ms = linger_ms
        self._max_ms = min(MAX_STRETCH_MS, max_ms)
        #: The effective linger in ms: read by the ready check and by callers opening a batch
        #: (an int written by the Sender thread only).
        self.linger_ms = linger_ms
        # CPU time of the thread that calls on_drain: the Sender's.
        self._sender_cpu_ms = sender_cpu_ms
        # (wall ms, Sender CPU ms) where the current window started; its largest drain in batches.
        self._window_start: tuple[int, float] | None = None
        self._largest_drain = 0

    @property
    def configured_ms(self) -> int:
        """``linger.ms`` as configured: the effective linger never goes below it."""
        return self._linger_ms

    @property
    def stretched(self) -> bool:
        return self.linger_ms > self._linger_ms

    def ready_size(self, batch_size: int, batch_max_size: int) -> int:
        """The size at which a batch opened now counts as full: ``batch.size``, or while stretched
        :data:`STRETCHED_READY_FACTOR` times it, at most ``batch.max.size``."""
        if self.stretched:
            return max(batch_size, min(batch_max_size, batch_size * STRETCHED_READY_FACTOR))
        return batch_size

    def on_drain(self, batches: int, now_ms: int) -> None:
        """The Sender drained ``batches`` batches at ``now_ms``; a window of :data:`WINDOW_MS` or more sets the linger."""
        start = self._window_start
        if start is None:
            self._window_start = (now_ms, self._sender_cpu_ms())
            self._largest_drain = 0
            return
        if batches > self._largest_drain:
            self._largest_drain = batches
        elapsed = now_ms - start[0]
        if elapsed < WINDOW_MS:
            return
        sender_cpu = self._sender_cpu_ms()
        sender = sender_cpu - start[1]
        drained = self._largest_drain
        self._window_start = (now_ms, sender_cpu)
        self._largest_drain = 0
        before = self.linger_ms
        if drained >= MIN_BATCHES and (before > self._linger_ms or sender > MAX_SENDER_SHARE * elapsed):
            # Once stretched it stays so while the drains take many batches: judged against the
            # share again, the share the longer linger brought down would put linger.ms back and
            # flip it on every window.
            self.linger_ms = max(self._linger_ms, self._max_ms)
        else:
            self.linger_ms = self._linger_ms
        if (self.linger_ms > self._linger_ms) != (before > self._linger_ms):
            log.debug(
                "effective linger %d ms (linger.ms %d): drains of up to %d batches in %d ms, Sender CPU %.1f ms",
                self.linger_ms,
                self._linger_ms,
                drained,
                elapsed,
                sender,
            )
