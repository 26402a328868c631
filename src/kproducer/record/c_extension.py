"""Which implementation runs: kproducer's C extensions, or their pure-Python twins.

Three modules are compiled at install time with the machine's compiler (setup.py):
``kproducer._speedups`` (the record encoder, murmur2, the send lane),
``kproducer.network._sockio`` (the Sender's non-blocking socket calls) and
``kproducer.record._compression_worker`` (lz4/zstd off the GIL). Each caller loads
its module with :func:`load`, which records why a module is missing; when one is,
or ``KPRODUCER_PURE_PYTHON=1`` is set, the callers use the pure-Python reference
(:mod:`kproducer.record.default_record`, :mod:`kproducer.murmur2`,
:mod:`kproducer.record.native`, :mod:`kproducer.network.sockio`,
:mod:`kproducer.record.compression_worker`), which the C code mirrors.

:func:`native_available` (``kproducer.native_available()``) tells the user which one
runs and, when it is pure Python, the real cause. This module imports nothing else of
kproducer, so any module can ask it.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

__all__ = [
    "AVAILABLE",
    "EXTENSIONS",
    "NativeStatus",
    "c",
    "load",
    "native_available",
    "pure_python_forced",
    "report_implementation_once",
]

# The name these lines have always been logged under (the loader lived in kproducer.record.native).
log = logging.getLogger("kproducer.record.native")

EXTENSIONS = (
    "kproducer._speedups",
    "kproducer.network._sockio",
    "kproducer.record._compression_worker",
    "kproducer.avro._avro_encoder",
)
"""Every C extension setup.py builds, by module name."""

# The modules that load each extension (importing one makes it try), for native_available().
_LOADERS = {
    "kproducer._speedups": "kproducer.record.c_extension",
    "kproducer.network._sockio": "kproducer.network.sockio",
    "kproducer.record._compression_worker": "kproducer.record.compression_worker",
    "kproducer.avro._avro_encoder": "kproducer.avro.encoder",
}

_ENV = "KPRODUCER_PURE_PYTHON"

# Why each extension that load() was asked for is not in use; None when it is loaded.
_missing: dict[str, str | None] = {}


def pure_python_forced() -> bool:
    """Whether ``KPRODUCER_PURE_PYTHON`` asks for the pure-Python path of every C extension."""
    return os.environ.get(_ENV, "").strip() not in ("", "0")


def _why_not_found(name: str) -> str:
    """The cause of a ModuleNotFoundError for an extension: not built, or built for another Python."""
    package, _, leaf = name.rpartition(".")
    pkg = sys.modules.get(package)
    where = os.path.dirname(getattr(pkg, "__file__", None) or "") if pkg is not None else ""
    tags: list[str] = []
    if where:
        try:
            names = os.listdir(where)
        except OSError:
            names = []
        # _speedups.cpython-312-x86_64-linux-gnu.so -> cpython-312-x86_64-linux-gnu
        tags = sorted({f.split(".")[1] for f in names if f.startswith(leaf + ".") and f.count(".") >= 2})
    if tags:
        return (
            f"built for another Python ({', '.join(tags)}; this is {sys.implementation.cache_tag}): "
            "reinstall kproducer with this interpreter"
        )
    return (
        "not built: the C compile failed or was skipped when kproducer was installed (reinstall it "
        "with a C compiler and the Python headers; `pip install -v` shows the compiler's error)"
    )


def load(name: str) -> Any:
    """Import the C extension ``name``, or None (recording the real cause) when it cannot run.

    ``importlib.import_module`` rather than ``from package import leaf``: while the package is
    still being imported, the latter reports a missing file as a "circular import".
    """
    if pure_python_forced():
        _missing[name] = f"{_ENV}=1 asks for the pure-Python implementation"
        log.debug("%s is set: not loading %s", _ENV, name)
        return None
    try:
        module: ModuleType = importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name != name:  # the extension is there but something it needs is not
            _missing[name] = f"unloadable: {e}"
        else:
            _missing[name] = _why_not_found(name)
        log.debug("%s: %s", name, _missing[name])
        return None
    except ImportError as e:  # present but unloadable: a missing symbol, a wrong architecture...
        _missing[name] = f"unloadable: {e}"
        log.debug("%s: %s", name, _missing[name])
        return None
    _missing[name] = None
    return module


@dataclass(frozen=True)
class NativeStatus:
    """Whether kproducer runs its C extensions; true in a boolean context when all of them are loaded.

    ``reason`` is None when they are, else which are missing and why; ``extensions`` maps each
    extension's module name to None (loaded) or its cause.
    """

    available: bool
    reason: str | None
    extensions: dict[str, str | None] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return self.available

    @property
    def implementation(self) -> str:
        """``C extensions`` or ``pure Python``: what runs, in two words."""
        return "C extensions" if self.available else "pure Python"

    @property
    def forced(self) -> bool:
        """Whether pure Python runs because ``KPRODUCER_PURE_PYTHON=1`` asked for it."""
        return pure_python_forced()


def native_available() -> NativeStatus:
    """Whether kproducer's C extensions are loaded and, when not, the real cause.

    ``bool(kproducer.native_available())`` is True when every extension runs;
    ``.reason`` names what is missing and why (not built at install time, built for
    another Python, unloadable, or ``KPRODUCER_PURE_PYTHON=1``). Without them,
    kproducer runs its pure-Python implementation: the same results, more CPU per record.
    """
    for name, loader in _LOADERS.items():
        if name not in _missing:
            importlib.import_module(loader)  # its import calls load(name)
    extensions = {name: _missing.get(name) for name in EXTENSIONS}
    if pure_python_forced():
        return NativeStatus(False, f"{_ENV}=1 asks for the pure-Python implementation", extensions)
    by_cause: dict[str, list[str]] = {}
    for name, why in extensions.items():
        if why is not None:
            by_cause.setdefault(why, []).append(name)
    reason = "; ".join(
        f"{', '.join(names)} {'is' if len(names) == 1 else 'are'} {why}" for why, names in by_cause.items()
    )
    return NativeStatus(not by_cause, reason or None, extensions)


_reported = False
_report_lock = threading.Lock()


def report_implementation_once(logger: logging.Logger) -> None:
    """At a producer's start, once per process: a WARNING with the real cause when it runs without its
    C extensions (an INFO when ``KPRODUCER_PURE_PYTHON=1`` asked for that), nothing when they run."""
    global _reported
    if _reported:
        return
    with _report_lock:
        if _reported:
            return
        _reported = True
    status = native_available()
    if status:
        return
    if status.forced:
        logger.info("kproducer runs its pure-Python implementation: %s", status.reason)
    else:
        logger.warning(
            "kproducer runs its pure-Python implementation (slower, same results): %s", status.reason
        )


c: Any = load("kproducer._speedups")
"""The C module, or None when it is not built or KPRODUCER_PURE_PYTHON=1."""

AVAILABLE: bool = c is not None
"""Whether ``kproducer._speedups`` (the record encoder's C twin) is in use."""
