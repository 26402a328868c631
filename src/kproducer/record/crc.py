"""CRC-32C (Castagnoli), the checksum of a v2 record batch, from the ``crc32c`` package's C extension.

The package's ``__init__`` reads its own version through ``importlib.metadata``,
which imports email, zipfile and more: about a fifth of ``import kproducer``'s
time, for a version string kproducer never reads. Only the extension module is
needed, so it is loaded directly from the installed package's directory when it
can be, and through the package's ``__init__`` otherwise (same functions either way).
"""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["crc32c"]


def _load_extension() -> Any:
    name = "crc32c._crc32c"
    loaded = sys.modules.get(name)
    if loaded is not None:
        return loaded
    try:
        import importlib.machinery
        import importlib.util

        package = importlib.util.find_spec("crc32c")  # a top-level spec: the package is not executed
        if package is None or not package.submodule_search_locations:
            raise ImportError("crc32c is not an installed package")
        finder = importlib.machinery.FileFinder(
            list(package.submodule_search_locations)[0],
            (importlib.machinery.ExtensionFileLoader, importlib.machinery.EXTENSION_SUFFIXES),
        )
        spec = finder.find_spec(name)
        if spec is None or spec.loader is None:
            raise ImportError(f"{name} not found next to the crc32c package")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # a later 'import crc32c' reuses it for its own 'from ._crc32c import ...'
        spec.loader.exec_module(module)
        return module
    except ImportError:
        sys.modules.pop(name, None)
        import crc32c as package_module

        return package_module


#: ``crc32c(data, value=0, gil_release_mode=-1) -> int``, hardware-accelerated where the CPU allows.
crc32c = _load_extension().crc32c
