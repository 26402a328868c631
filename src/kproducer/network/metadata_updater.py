"""When and where the NetworkClient asks for metadata (Java's DefaultMetadataUpdater).

The refresh policy itself (what is due, which topics, the KIP-526 urgent set) is
``kproducer.metadata.Metadata``; this updater only turns a due refresh into one Metadata request
to the least-loaded node, keeps at most one in flight, and feeds its answer or failure back.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from kproducer.network.client_request import ClientRequest, build_metadata_request
from kproducer.network.protocol import ApiKey

if TYPE_CHECKING:
    from kproducer.network.client import NetworkClient

__all__ = ["MetadataUpdater"]

# The NetworkClient's log lines keep its logger name, which operators filter on.
logger = logging.getLogger("kproducer.network.client")


class MetadataUpdater:
    """Sends the Metadata requests of one NetworkClient, one at a time."""

    __slots__ = ("_client", "_in_flight", "_window_wait_ms")

    def __init__(self, client: NetworkClient) -> None:
        self._client = client
        self._in_flight: tuple[int, int, list[str] | None] | None = None  # (node, cid, topics)
        # When a due metadata request started waiting for room in a full in-flight window (-1: not waiting).
        self._window_wait_ms = -1

    def is_update_due(self, now: int) -> bool:
        """Whether a metadata request should go out now (none in flight, and the policy says it is due)."""
        return self._in_flight is None and self._client.metadata.time_to_next_update(now) == 0

    def maybe_update(self, now: int) -> int:
        """DefaultMetadataUpdater.maybeUpdate: returns ms until it should be called again."""
        client = self._client
        metadata = client.metadata
        if self._in_flight is not None:
            return client.request_timeout_ms
        wait = metadata.time_to_next_update(now)
        if wait > 0:
            return wait
        node_id = client.least_loaded_node(now)
        reconnect_initial_ms = client.reconnect_backoff_initial_ms
        if node_id is None:
            # Nothing to try: wait for the earliest reconnect backoff to end.
            delays = [client.connection_delay(n.id, now) for n in client.known_nodes()]
            return max(1, min(delays, default=reconnect_initial_ms))
        ready = client.is_ready(node_id)
        if ready and not client.can_send_more(node_id):
            # As in Java, the request waits for room in the window; say so once per wait, since
            # this is where a new topic's first send() spends its time behind slow produce requests.
            if self._window_wait_ms < 0:
                self._window_wait_ms = now
                logger.debug(
                    "metadata request due, waiting: node %s has %d requests in flight (the maximum)",
                    node_id,
                    client.in_flight_request_count(node_id),
                )
            return client.request_timeout_ms
        if ready:
            if self._window_wait_ms >= 0:
                logger.debug("metadata request waited %d ms for the in-flight window", now - self._window_wait_ms)
                self._window_wait_ms = -1
            version = client.api_version(node_id, ApiKey.METADATA)
            if version is None:
                metadata.handle_failure(now)
                return metadata.retry_backoff_ms
            # The policy's choice (KIP-526); an empty list is a broker-only refresh. Only one
            # request is in flight: topics that turn urgent meanwhile join the next one.
            topics = metadata.topics_for_request(now)
            body = build_metadata_request(version, topics, metadata.allow_auto_topic_creation)
            req = ClientRequest(node_id, ApiKey.METADATA, body, callback=None, created_ms=now)
            client.send(req, now)
            self._in_flight = (node_id, req.correlation_id, topics)
            return client.request_timeout_ms
        if client.is_connecting(node_id):
            return reconnect_initial_ms
        if client.can_connect(node_id, now):
            client.initiate_connect(node_id, now)
            return reconnect_initial_ms
        return max(1, client.connection_delay(node_id, now))

    def handle_response(self, node_id: int, correlation_id: int, body: Any, size_bytes: int, now: int) -> bool:
        """Take the answer to the metadata request in flight; False if this response is not it."""
        in_flight = self._in_flight
        if in_flight is None or in_flight[:2] != (node_id, correlation_id):
            return False
        self._in_flight = None
        self._client.metadata.handle_response(body, in_flight[2], now, size_bytes=size_bytes)
        return True

    def handle_disconnect(self, node_id: int, now: int, error: Exception) -> None:
        """The node the request went to disconnected: the refresh failed (it is retried after backoff)."""
        if self._in_flight is not None and self._in_flight[0] == node_id:
            self._in_flight = None
            self._client.metadata.handle_failure(now, error)

    def check_node(self, now: int) -> None:
        """After timeouts were handled: a request whose node is gone or disconnected has failed."""
        if self._in_flight is None:
            return
        if self._client.is_gone_or_disconnected(self._in_flight[0]):
            self._in_flight = None
            self._client.metadata.handle_failure(now)
