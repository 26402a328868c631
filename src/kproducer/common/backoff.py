"""Exponential backoff with jitter, as the Java client's ``ExponentialBackoff``.

``backoff(attempts) = initial * multiplier ** attempts * uniform(1 - jitter, 1 + jitter)``, with the
exponent stopped where the term reaches ``maximum`` and the jittered value capped at ``maximum``
(KIP-580 for ``retry.backoff.ms`` / ``retry.backoff.max.ms``, KIP-144 for the reconnect backoff,
KIP-601 for the connection set-up timeout). When ``maximum`` is not above ``initial`` the backoff is
the constant ``initial``, without jitter.
"""

from __future__ import annotations

import math
import random

__all__ = ["ExponentialBackoff"]


class ExponentialBackoff:
    """``initial * multiplier**attempts`` capped at ``maximum``, with +-``jitter``; thread-safe to read."""

    __slots__ = ("initial", "maximum", "multiplier", "jitter", "_exp_max", "_rng")

    def __init__(
        self,
        initial: int,
        maximum: int,
        multiplier: float = 2.0,
        jitter: float = 0.2,
        rng: random.Random | None = None,
    ) -> None:
        if not 0.0 <= jitter <= 1.0:
            raise ValueError(f"jitter must be between 0 and 1, got {jitter}")
        self.initial = max(0, initial)
        self.maximum = max(self.initial, maximum)
        self.multiplier = multiplier
        self.jitter = jitter
        self._rng = rng if rng is not None else random.Random()
        if self.maximum > self.initial > 0:
            self._exp_max = math.log(self.maximum / self.initial) / math.log(multiplier)
        else:
            self._exp_max = 0.0

    def backoff(self, attempts: int) -> int:
        """The backoff before retry number ``attempts + 1`` (attempts counted from 0)."""
        if self._exp_max == 0:
            return self.initial
        # Past the exponent where the term reaches the maximum, the term is the maximum itself
        # (not initial * multiplier**exp_max, which float rounding can leave 1 ms short of it).
        exp = max(attempts, 0)
        term = float(self.maximum) if exp >= self._exp_max else self.initial * self.multiplier**exp
        factor = self._rng.uniform(1 - self.jitter, 1 + self.jitter) if self.jitter > 0 else 1.0
        return min(int(term * factor), self.maximum)
