"""Load a class or object named by a ``'pkg.mod:Name'`` or ``'pkg.mod.Name'`` path.

Class-typed config keys (``partitioner.class``, ``key.serializer``, ``interceptor.classes``...)
accept such paths where the Java client accepts a class name. Each key reports a bad path in its
own words, so the caller passes the key and the text saying what the key allows.
"""

from __future__ import annotations

import importlib
from typing import Any

from kproducer.errors import ConfigError

__all__ = ["load_object", "split_path"]


def split_path(path: str) -> tuple[str, str]:
    """``('pkg.mod', 'Name')`` for ``'pkg.mod:Name'`` or ``'pkg.mod.Name'``; empty parts when it is neither."""
    module_name, sep, attr = path.partition(":")
    if not sep:
        module_name, _, attr = path.rpartition(".")
    return module_name, attr


def load_object(path: str, key: str | None = None, allowed: str = "") -> Any:
    """Import the module of ``path`` and walk the attribute names after it.

    Without ``key`` the failures are Python's own: ImportError for a path that is not
    ``module:Name`` or a module that cannot be imported, AttributeError for a missing name.
    With ``key`` they are ConfigError naming the key, the path and (for a malformed path)
    ``allowed``, the text that says what the key accepts.
    """
    module_name, attr = split_path(path)
    if not module_name or not attr:
        if key is None:
            raise ImportError(f"not a 'module:Name' path: {path!r}")
        raise ConfigError(f"{key}: {path!r} is not a known name nor a dotted path; {allowed}")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as e:
        if key is None:
            raise
        raise ConfigError(f"{key}: cannot import module {module_name!r} from {path!r}: {e}") from e
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError as e:
            if key is None:
                raise
            raise ConfigError(f"{key}: module {module_name!r} has no attribute {attr!r}") from e
    return obj
