"""Blocking calls over a NetworkClient, for the admin helpers and the CLI (Java's NetworkClientUtils).

Each polls the client on the caller's thread until its answer or its deadline; the Sender never
uses them (it must not block on one node).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kproducer.errors import KafkaTimeoutError
from kproducer.network.client_request import ClientRequest, ClientResponse

if TYPE_CHECKING:
    from kproducer.network.client import NetworkClient

__all__ = ["await_ready", "fetch_metadata", "send_and_receive"]


def await_ready(client: NetworkClient, node_id: int, timeout_ms: int) -> bool:
    """Poll until the node is ready (admin and CLI use; never on the Sender's hot path)."""
    deadline = client.clock_ms() + timeout_ms
    while True:
        now = client.clock_ms()
        if client.ready(node_id, now):
            return True
        if now >= deadline:
            return False
        client.poll(min(50, deadline - now), now)


def send_and_receive(client: NetworkClient, request: ClientRequest, timeout_ms: int) -> ClientResponse:
    """Send one request and poll until its response (admin and CLI use)."""
    if not await_ready(client, request.node_id, timeout_ms):
        raise KafkaTimeoutError(f"node {request.node_id} not ready within {timeout_ms} ms")
    box: list[ClientResponse] = []
    user_cb = request.callback

    def _cb(r: ClientResponse) -> None:
        box.append(r)
        if user_cb is not None:
            user_cb(r)

    request.callback = _cb
    deadline = client.clock_ms() + timeout_ms
    client.send(request, client.clock_ms())
    while not box:
        now = client.clock_ms()
        if now >= deadline:
            raise KafkaTimeoutError(f"no response from node {request.node_id} within {timeout_ms} ms")
        client.poll(min(100, deadline - now), now)
    return box[0]


def fetch_metadata(client: NetworkClient, topics: list[str] | None, timeout_ms: int) -> None:
    """Refresh metadata for ``topics`` (None = all) and wait for it, polling the client."""
    metadata = client.metadata
    now = client.clock_ms()
    if topics is None:
        version = metadata.request_update_for_all_topics()
    else:
        # Explicitly asked for: these topics are urgent (an empty list refreshes brokers only).
        for t in topics:
            metadata.add_topic(t, now)
            metadata.mark_urgent(t, now)
        version = metadata.request_update()
    deadline = now + timeout_ms
    while metadata.version <= version:
        now = client.clock_ms()
        auth_error = metadata.authentication_error
        if auth_error is not None:
            raise auth_error
        if now >= deadline:
            tried = ", ".join(f"{a} ({r})" for a, r in metadata.tried_addresses.items())
            boot = ", ".join(n.address for n in client.bootstrap_nodes)
            raise KafkaTimeoutError(
                f"metadata not received within {timeout_ms} ms from bootstrap servers {boot}"
                + (f"; addresses tried: {tried}" if tried else "")
            )
        client.poll(min(100, deadline - now), now)
