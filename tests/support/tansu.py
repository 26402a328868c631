"""The tests' names for the library's Tansu starter, :mod:`kproducer.embedded_broker`.

There is one copy of the code that starts Tansu (the examples, benchmarks and
tests share it); this module only keeps the names older test modules import.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from kproducer.embedded_broker import EmbeddedBroker as TansuBroker
from kproducer.embedded_broker import free_port, tansu_binary
from kproducer.embedded_broker import start_embedded_broker as start_tansu

__all__ = ["TansuBroker", "free_port", "start_tansu", "tansu_binary", "tansu_unless"]


@contextmanager
def tansu_unless(bootstrap: str | None) -> Iterator[tuple[str, TansuBroker | None]]:
    """``bootstrap`` when given (a broker the caller runs), else a Tansu started here and stopped after."""
    if bootstrap is not None:
        yield bootstrap, None
        return
    broker = start_tansu()
    try:
        yield broker.bootstrap, broker
    finally:
        broker.stop()
