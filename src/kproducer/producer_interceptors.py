"""Producer interceptors (``interceptor.classes``; Java's ``ProducerInterceptors``).

Each interceptor sees every record before it is serialized (``on_send``, which
may return a replacement) and every acknowledgement (``on_acknowledgement``,
on the I/O thread). An interceptor that raises is logged and skipped, as in
Java: it never fails the record. ``send()`` only comes here when interceptors
are configured (and the C send lane is then off).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from kproducer.common import load_object
from kproducer.structs import ProducerRecord

if TYPE_CHECKING:
    from kproducer.delivery import Callback
    from kproducer.errors import KafkaError
    from kproducer.producer import Producer
    from kproducer.structs import RecordMetadata

__all__ = ["intercept_callback", "intercept_send", "resolve_interceptors"]

log = logging.getLogger("kproducer.producer")


def intercept_send(
    producer: Producer, topic: str, value: Any, key: Any, partition: int | None, timestamp: int | None, headers: Any
) -> tuple[str, Any, Any, int | None, int | None, Any]:
    """The record after every interceptor's ``on_send``, in ``interceptor.classes`` order."""
    record = ProducerRecord(topic, value, key, partition, timestamp, headers)
    for ic in producer._interceptors:
        try:
            out = ic.on_send(record)
            if out is not None:
                record = out
        except Exception:
            log.exception("interceptor %r on_send raised; record passed on unchanged", ic)
    return record.topic, record.value, record.key, record.partition, record.timestamp, record.headers


def intercept_callback(producer: Producer, on_delivery: Callback | None) -> Callback:
    """``on_delivery`` wrapped so that every interceptor sees the acknowledgement first."""
    interceptors = producer._interceptors

    def callback(md: RecordMetadata | None, exc: KafkaError | None) -> None:
        for ic in interceptors:
            try:
                ic.on_acknowledgement(md, exc)
            except Exception:
                log.exception("interceptor %r on_acknowledgement raised", ic)
        if on_delivery is not None:
            on_delivery(md, exc)

    return callback


def resolve_interceptors(specs: Iterable[Any] | None) -> list[Any]:
    """``interceptor.classes``: dotted paths, classes or instances with on_send/on_acknowledgement."""
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
                f"interceptor.classes entry {spec!r} must provide on_send(record) and on_acknowledgement(metadata, exception)"
            )
        out.append(obj)
    return out
