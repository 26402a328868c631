"""Client-wide errors: a broker the client cannot reach, or cannot reach any more, not one record's failure.

The records waiting for such a broker end with their own exception on their future and
callback; these events are for an application that wants to know of the outage itself, as
librdkafka's ``error_cb`` is (``rd_kafka_conf_set_error_cb`` in ``rdkafka.h``). They follow
the WARNING lines of :class:`kproducer.network.connection_states.ClusterConnectionStates`: one
when a broker goes from reachable (or not tried yet) to unreachable, not one per failed attempt,
and one when no broker is connected or connecting any more and every known one was tried.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["ClientErrorEvent", "ClientErrorKind", "ClientErrorListener", "ClientErrorListeners"]

logger = logging.getLogger("kproducer.network.client")


class ClientErrorKind(enum.Enum):
    """What went wrong (librdkafka's code for it in the comment)."""

    #: A connection attempt to the broker failed (_TRANSPORT).
    TRANSPORT = "transport"
    #: The broker's host name does not resolve (_RESOLVE).
    RESOLVE = "resolve"
    #: The broker refused the client: TLS handshake (_SSL) or SASL (_AUTHENTICATION).
    AUTHENTICATION = "authentication"
    #: No broker is connected or connecting any more, and every known one was tried (_ALL_BROKERS_DOWN).
    ALL_BROKERS_DOWN = "all_brokers_down"


@dataclass(frozen=True, slots=True)
class ClientErrorEvent:
    """One client-wide error: its kind, the broker (None for ALL_BROKERS_DOWN), and why."""

    kind: ClientErrorKind
    #: The broker's id (negative for a bootstrap server), None when the event concerns every broker.
    node_id: int | None
    #: ``host:port`` (or the address tried), "" when the event concerns every broker.
    address: str
    #: A sentence saying what happened, as in the WARNING line.
    message: str
    #: The exception behind it (an AuthenticationError for a refusal), None for a plain network failure.
    cause: BaseException | None = None


#: Called on the producer's I/O thread; must be quick and must not block.
ClientErrorListener = Callable[[ClientErrorEvent], None]


class ClientErrorListeners:
    """The listeners of one client; ``notify`` calls each, and a listener that raises is logged, not propagated
    (it runs on the I/O thread, which must keep going)."""

    __slots__ = ("_listeners",)

    def __init__(self) -> None:
        self._listeners: tuple[ClientErrorListener, ...] = ()

    def add(self, listener: ClientErrorListener) -> None:
        if not callable(listener):
            raise TypeError(f"a client error listener must be callable, got {type(listener).__name__}")
        self._listeners = (*self._listeners, listener)  # a new tuple: notify() may run on another thread

    def remove(self, listener: ClientErrorListener) -> None:
        self._listeners = tuple(x for x in self._listeners if x is not listener)

    def __bool__(self) -> bool:
        return bool(self._listeners)

    def notify(self, event: ClientErrorEvent) -> None:
        for listener in self._listeners:
            try:
                listener(event)
            except Exception:
                logger.exception("a client error listener raised for %s", event.kind.value)
