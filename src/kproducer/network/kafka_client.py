"""The network layer as the Sender and the coordinator requests see it: Java's ``KafkaClient`` interface.

:class:`kproducer.network.client.NetworkClient` implements it over sockets; the tests drive the
Sender with a scripted one (``tests/support/mock_client.py``), as Java's ``MockClient`` does.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from kproducer.errors import KafkaError
from kproducer.network.client_request import ClientRequest, ClientResponse

__all__ = ["KafkaClient"]


class KafkaClient(Protocol):
    """What the Sender needs of the network layer (Java's ``KafkaClient``).

    :class:`kproducer.network.client.NetworkClient` is the real one; tests drive the
    Sender with a scripted mock (``tests/support/mock_client.py``), as Java's
    ``MockClient`` does, so that every completion branch runs without a broker.
    """

    def ready(self, node_id: int, now: int) -> bool: ...

    def send(self, request: ClientRequest, now: int) -> None: ...

    def poll(self, timeout_ms: int, now: int) -> list[ClientResponse]: ...

    def wakeup(self) -> None: ...

    def wakeup_by(self, deadline_ms: int) -> None: ...

    def close(self) -> None: ...

    def least_loaded_node(self, now: int) -> int | None: ...

    def connection_delay(self, node_id: int, now: int) -> int: ...

    def authentication_error(self, node_id: int) -> KafkaError | None: ...

    def stalled_connections(self, now: int, after_ms: int) -> Mapping[int, int]: ...

    def in_flight_request_count(self, node_id: int | None = None) -> int: ...

    def in_flight_requests_by_node(self) -> dict[int, int]: ...

    def metadata_request_due(self, now: int) -> bool: ...

    def max_usable_produce_magic(self) -> int: ...
