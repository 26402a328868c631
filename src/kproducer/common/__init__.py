"""Small leaf helpers shared by every layer: the clock, the retry backoff and the class loader.

Nothing here imports the rest of kproducer except :mod:`kproducer.errors`, so any module may use
it without an import cycle.
"""

from __future__ import annotations

from kproducer.common.backoff import ExponentialBackoff
from kproducer.common.clock import monotonic_ms, wall_clock_ms
from kproducer.common.loader import load_object

__all__ = ["ExponentialBackoff", "load_object", "monotonic_ms", "wall_clock_ms"]
