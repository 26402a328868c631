"""Checks an installed kproducer, run by the interpreter it is installed in (no test dependencies).

Every C extension is present and loaded (not the pure-Python fallback), py.typed ships, and the
C hot path agrees with its Python reference on a few inputs. Used by the packaging test on a wheel
built from the sdist, and by cibuildwheel's test-command on each wheel it builds (pyproject.toml).
Exits non-zero with the reason on the first failure; prints what it checked.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

EXTENSIONS = (
    "kproducer._speedups",
    "kproducer.network._sockio",
    "kproducer.record._compression_worker",
    "kproducer.avro._avro_encoder",
)


def main() -> int:
    if os.environ.get("KPRODUCER_PURE_PYTHON", "").strip() not in ("", "0"):
        print("unset KPRODUCER_PURE_PYTHON: this checks the C extensions", file=sys.stderr)
        return 2
    import kproducer

    package = Path(kproducer.__file__).parent
    status = kproducer.native_available()
    if not status:
        print(f"C extensions not loaded: {status.reason}", file=sys.stderr)
        return 1
    for name in EXTENSIONS:
        module = importlib.import_module(name)
        print(f"{name}: {Path(module.__file__ or '?').relative_to(package.parent)}")
    if not (package / "py.typed").is_file():
        print(f"py.typed missing from {package}", file=sys.stderr)
        return 1
    print("py.typed: present")

    from kproducer.record import native

    keys = [b"", b"a", b"kproducer", bytes(range(256)), "key-\u00e9".encode()]
    for key in keys:
        if native.c.murmur2(key) != native.py.murmur2(key):
            print(f"murmur2 differs between C and Python for {key!r}", file=sys.stderr)
            return 1
    if native.c.partition_seq(keys, 0, len(keys), 7) != native.py.partition_seq(keys, 0, len(keys), 7):
        print("partition_seq differs between C and Python", file=sys.stderr)
        return 1
    print(f"kproducer {kproducer.__version__}: {status.implementation}, C and Python agree")
    return 0


if __name__ == "__main__":
    sys.exit(main())
