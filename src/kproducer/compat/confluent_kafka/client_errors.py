"""What confluent-kafka's ``error_cb`` and ``logger`` settings receive, from kproducer's client error events and logs.

librdkafka reports client-wide errors (``rd_kafka_conf_set_error_cb`` in ``rdkafka.h``) when a
broker's connection fails (``_TRANSPORT``; ``_RESOLVE`` for a name that does not resolve;
``_SSL`` or ``_AUTHENTICATION`` for a refusal) and once when every broker is down
(``_ALL_BROKERS_DOWN``); confluent-kafka serves them to ``error_cb`` from ``poll()``/``flush()``.
kproducer's :class:`~kproducer.network.client_error_event.ClientErrorEvent` carries the same
moments; :func:`client_error` gives each its librdkafka code.

librdkafka's log lines go to the ``logger`` given in the configuration. kproducer logs through
Python's logging under the ``kproducer`` logger, whose module loggers are shared by every
producer in the process: :class:`LogForwarding` hands each record of that hierarchy to the given
logger while an adapter producer holding it is open.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from kproducer.compat.confluent_kafka.errors import KafkaError
from kproducer.compat.librdkafka_errors import CODES
from kproducer.errors import SslAuthenticationError
from kproducer.network.client_error_event import ClientErrorEvent, ClientErrorKind

__all__ = ["LogForwarding", "client_error"]

_CODES = {
    ClientErrorKind.TRANSPORT: CODES["_TRANSPORT"],
    ClientErrorKind.RESOLVE: CODES["_RESOLVE"],
    ClientErrorKind.AUTHENTICATION: CODES["_AUTHENTICATION"],
    ClientErrorKind.ALL_BROKERS_DOWN: CODES["_ALL_BROKERS_DOWN"],
}


def client_error(event: ClientErrorEvent) -> KafkaError:
    """The ``KafkaError`` librdkafka's error_cb gets for ``event`` (none of these is fatal)."""
    code = _CODES[event.kind]
    if isinstance(event.cause, SslAuthenticationError):
        code = CODES["_SSL"]  # librdkafka reports a failed TLS handshake as _SSL, a SASL failure as _AUTHENTICATION
    error = KafkaError(code, event.message)
    error.exception = event.cause
    return error


_ROOT = "kproducer"


class _Forwarder(logging.Handler):
    """On the ``kproducer`` logger: passes each record to one application logger (as that logger's own)."""

    def __init__(self, target: logging.Logger | logging.LoggerAdapter[Any]) -> None:
        super().__init__()
        self.target = target
        self.users = 0

    def emit(self, record: logging.LogRecord) -> None:
        target = self.target
        if isinstance(target, logging.LoggerAdapter):
            logger = target.logger
            if target.extra:
                record = logging.makeLogRecord({**record.__dict__, **target.extra})
        else:
            logger = target
        if logger.isEnabledFor(record.levelno):
            logger.handle(record)


_lock = threading.Lock()
# One forwarder per application logger, shared by the producers given it (a line is forwarded once).
_forwarders: dict[int, _Forwarder] = {}


class LogForwarding:
    """Forwards the ``kproducer`` hierarchy's records to ``target`` until :meth:`stop`."""

    def __init__(self, target: logging.Logger | logging.LoggerAdapter[Any]) -> None:
        self._key: int | None = None
        if _already_reached(target):
            return  # the records reach it anyway (kproducer's loggers propagate to it): no second copy
        key = id(target)
        with _lock:
            forwarder = _forwarders.get(key)
            if forwarder is None:
                forwarder = _forwarders[key] = _Forwarder(target)
                logging.getLogger(_ROOT).addHandler(forwarder)
            forwarder.users += 1
        self._key = key

    def stop(self) -> None:
        key, self._key = self._key, None
        if key is None:
            return
        with _lock:
            forwarder = _forwarders[key]
            forwarder.users -= 1
            if not forwarder.users:
                del _forwarders[key]
                logging.getLogger(_ROOT).removeHandler(forwarder)


def _already_reached(target: logging.Logger | logging.LoggerAdapter[Any]) -> bool:
    """Whether ``target`` is a logger kproducer's records propagate to (the root logger, usually)."""
    if isinstance(target, logging.LoggerAdapter):
        return False  # it adds its own context: forward through it
    current: logging.Logger | None = logging.getLogger(_ROOT)
    while current is not None:
        if current is target:
            return True
        if not current.propagate:
            return False
        current = current.parent
    return False
