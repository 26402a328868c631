"""Which implementation of the hot path runs: the C extension ``kproducer._speedups`` or pure Python.

The extension is built at install time with the machine's compiler (setup.py).
When it is missing, or ``KPRODUCER_PURE_PYTHON=1`` is set, every caller uses the
pure-Python reference instead (:mod:`kproducer.record.default_record`,
:mod:`kproducer.murmur2`, :mod:`kproducer.record.native`), which the C code mirrors.
This module imports nothing else of kproducer, so any module can ask it.
"""

from __future__ import annotations

import logging
import os
from typing import Any

__all__ = ["AVAILABLE", "c", "pure_python_forced"]

# The name these lines have always been logged under (the loader lived in kproducer.record.native).
log = logging.getLogger("kproducer.record.native")


def pure_python_forced() -> bool:
    """Whether ``KPRODUCER_PURE_PYTHON`` asks for the pure-Python path of every C extension."""
    return os.environ.get("KPRODUCER_PURE_PYTHON", "").strip() not in ("", "0")


def _load_native() -> Any:
    if pure_python_forced():
        log.debug("KPRODUCER_PURE_PYTHON is set: using the pure-Python hot path")
        return None
    try:
        from kproducer import _speedups  # type: ignore[attr-defined]
    except ImportError as e:
        log.info("kproducer C speedups unavailable (%s); using the pure-Python hot path", e)
        return None
    return _speedups


c: Any = _load_native()
"""The C module, or None when it is not built or KPRODUCER_PURE_PYTHON=1."""

AVAILABLE: bool = c is not None
