"""Success and failure counts over a sliding time window, in fixed buckets."""

from __future__ import annotations


class SlidingWindow:
    """Success and failure record counts over the last ``window_ms``, in fixed buckets.

    Updates are O(1) amortized (at most ``buckets`` slots are cleared per update).
    A record counted at ``t`` is still counted while ``now - t < window_ms - bucket_ms``
    and is forgotten once ``now - t >= window_ms + bucket_ms``.
    """

    __slots__ = ("window_ms", "bucket_ms", "_n", "_succ", "_fail", "_head", "_successes", "_failures")

    def __init__(self, window_ms: int, buckets: int = 10) -> None:
        if window_ms < 1 or buckets < 1:
            raise ValueError(f"window_ms and buckets must be >= 1, got {window_ms}, {buckets}")
        self.window_ms = window_ms
        self.bucket_ms = -(-window_ms // buckets)
        self._n = -(-window_ms // self.bucket_ms)
        self._succ = [0] * self._n
        self._fail = [0] * self._n
        self._head: int | None = None
        self._successes = 0
        self._failures = 0

    def _advance(self, now_ms: int) -> int:
        idx = now_ms // self.bucket_ms
        head = self._head
        if head is None:
            self._head = idx
            return idx
        if idx <= head:
            return head
        if idx - head >= self._n:
            self.reset()
        else:
            for i in range(head + 1, idx + 1):
                slot = i % self._n
                self._successes -= self._succ[slot]
                self._failures -= self._fail[slot]
                self._succ[slot] = 0
                self._fail[slot] = 0
        self._head = idx
        return idx

    def record(self, now_ms: int, successes: int, failures: int) -> None:
        """Count records at ``now_ms`` (an earlier time than the newest counts as the newest)."""
        slot = self._advance(now_ms) % self._n
        self._succ[slot] += successes
        self._fail[slot] += failures
        self._successes += successes
        self._failures += failures

    def counts(self, now_ms: int) -> tuple[int, int]:
        """(successes, failures) in the window ending at ``now_ms``."""
        self._advance(now_ms)
        return self._successes, self._failures

    def reset(self) -> None:
        self._succ = [0] * self._n
        self._fail = [0] * self._n
        self._successes = 0
        self._failures = 0

    def forget_successes(self) -> None:
        """Drop every success counted so far; failures stay until they age out."""
        self._succ = [0] * self._n
        self._successes = 0
