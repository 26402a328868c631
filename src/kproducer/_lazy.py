"""Public names that load their modules on first use (PEP 562), for a package's ``__init__``.

The package root and ``kproducer.avro`` re-export names from their submodules without importing
them: ``import kproducer`` stays a few milliseconds, and a producer that imports one Avro module
does not load the Schema Registry client. Imports nothing itself.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False  # not typing's: importing typing is what the package root avoids

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any


def lazy_exports(
    package: str, exports: Mapping[str, str], names: list[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of ``package``, whose public name ``n`` is defined by
    the module ``exports[n]``; a name once loaded is stored in the package's namespace, so later
    lookups are plain attribute reads."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        __import__(module)
        value = getattr(sys.modules[module], name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(names))

    return __getattr__, __dir__
