"""Producer interceptors (``interceptor.classes``; Java's ``ProducerInterceptors``).

Each interceptor sees every record before it is serialized (``on_send``, which
may return a replacement) and every acknowledgement (``on_acknowledgement``,
on the I/O thread). An interceptor that raises is logged and skipped, as in
Java: it never fails the record. ``send()`` only comes here when interceptors
are configured (and the C send lane is then off).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from kproducer.common import load_object
from kproducer.structs import ProducerRecord

if TYPE_CHECKING:
    from kproducer.delivery import Callback
    from kproducer.errors import KafkaError
    from kproducer.structs import RecordMetadata

__all__ = ["ProducerInterceptors"]

log = logging.getLogger("kproducer.producer")


class ProducerInterceptors:
    """The configured interceptors, in ``interceptor.classes`` order (Java's ``ProducerInterceptors``)."""

    __slots__ = ("_interceptors",)

    def __init__(self, interceptors: Iterable[Any]) -> None:
        self._interceptors = tuple(interceptors)

    @classmethod
    def from_config(cls, specs: Iterable[Any] | None) -> ProducerInterceptors | None:
        """``interceptor.classes``: dotted paths, classes or instances with on_send/on_acknowledgement.

        None when there are none: ``send()`` then skips this step with one truth test.
        """
        from kproducer.errors import ConfigError

        out = []
        for spec in specs or ():
            try:
                obj = load_object(spec) if isinstance(spec, str) else spec
            except (ImportError, AttributeError, ValueError) as e:
                raise ConfigError(f"interceptor.classes: cannot load {spec!r} ({e})") from e
            if isinstance(obj, type):
                obj = obj()
            if not (hasattr(obj, "on_send") and hasattr(obj, "on_acknowledgement")):
                raise ConfigError(
                    f"interceptor.classes entry {spec!r} must provide on_send(record) and "
                    "on_acknowledgement(metadata, exception)"
                )
            out.append(obj)
        return cls(out) if out else None

    def __iter__(self) -> Iterator[Any]:
        return iter(self._interceptors)

    def on_send(
        self, topic: str, value: Any, key: Any, partition: int | None, timestamp: int | None, headers: Any
    ) -> tuple[str, Any, Any, int | None, int | None, Any]:
        """The record after every interceptor's ``on_send``, in ``interceptor.classes`` order."""
        record = ProducerRecord(topic, value, key, partition, timestamp, headers)
        for ic in self._interceptors:
            try:
                out = ic.on_send(record)
                if out is not None:
                    record = out
            except Exception:
                log.exception("interceptor %r on_send raised; record passed on unchanged", ic)
        return record.topic, record.value, record.key, record.partition, record.timestamp, record.headers

    def wrap_callback(self, on_delivery: Callback | None) -> Callback:
        """``on_delivery`` wrapped so that every interceptor sees the acknowledgement first."""
        interceptors = self._interceptors

        def callback(md: RecordMetadata | None, exc: KafkaError | None) -> None:
            for ic in interceptors:
                try:
                    ic.on_acknowledgement(md, exc)
                except Exception:
                    log.exception("interceptor %r on_acknowledgement raised", ic)
            if on_delivery is not None:
                on_delivery(md, exc)

        return callback
