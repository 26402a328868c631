"""Counting the batches compressed by the Python codecs (``record.builder.compress``), for the
tests that check the compression worker took the others."""

from __future__ import annotations

from typing import Any

import pytest

from kproducer.record import builder as builder_module


def count_python_compressions(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on (for the test), each Python codec call appends its input's length to the list returned."""
    calls: list[int] = []
    real = builder_module.compress

    def counting(*args: Any, **kwargs: Any) -> bytes:
        calls.append(len(args[1]))
        return real(*args, **kwargs)

    monkeypatch.setattr(builder_module, "compress", counting)
    return calls
