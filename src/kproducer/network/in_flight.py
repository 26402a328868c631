"""Requests sent and not yet complete, per node (Java's InFlightRequests).

A request stays here from ``send`` until its response, its connection's loss or, for acks=0,
until its last byte is on the socket (Java completes those on completedSends), so that the
in-flight window also bounds what waits unwritten in the selector.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from kproducer.network.client_request import ClientRequest, ClientResponse

__all__ = ["InFlightRequests"]


class InFlightRequests:
    """Per node: requests by correlation id, and the acks=0 ones not yet fully written."""

    __slots__ = ("_requests", "unwritten")

    def __init__(self) -> None:
        self._requests: dict[int, dict[int, ClientRequest]] = {}
        # Per node, acks=0 requests not yet fully written: (selector byte offset of their end, request).
        self.unwritten: dict[int, deque[tuple[int, ClientRequest]]] = {}

    def add(self, request: ClientRequest, unwritten_end: int | None = None) -> None:
        """Track a request just handed to the selector; ``unwritten_end``: for acks=0, the selector's
        byte count once its last byte is written."""
        node_id = request.node_id
        self._requests.setdefault(node_id, {})[request.correlation_id] = request
        if unwritten_end is not None:
            self.unwritten.setdefault(node_id, deque()).append((unwritten_end, request))

    def pop(self, node_id: int, correlation_id: int) -> ClientRequest | None:
        """The request a response answers (None if it is not in flight)."""
        return self._requests.get(node_id, {}).pop(correlation_id, None)

    def count(self, node_id: int | None = None) -> int:
        if node_id is None:
            return sum(len(v) for v in self._requests.values())
        return len(self._requests.get(node_id, ()))

    def by_node(self) -> dict[int, int]:
        return {n: len(reqs) for n, reqs in self._requests.items() if reqs}

    def clear(self, node_id: int) -> list[ClientRequest]:
        """Forget every request to the node (its connection is gone); returns them in send order."""
        self.unwritten.pop(node_id, None)
        return list(self._requests.pop(node_id, {}).values())

    def complete_written(
        self, bytes_sent: Callable[[int], int | None], bytes_written: dict[int, int], now: int
    ) -> list[ClientResponse]:
        """Complete the acks=0 requests whose bytes are all on the socket now, in send order."""
        done: list[ClientResponse] = []
        for node_id, queue in list(self.unwritten.items()):
            written = bytes_sent(node_id)
            if written is None:  # closed during this poll, possibly after the write
                written = bytes_written.get(node_id, -1)
            in_flight = self._requests.get(node_id, {})
            while queue and queue[0][0] <= written:
                req = queue.popleft()[1]
                in_flight.pop(req.correlation_id, None)
                done.append(ClientResponse(req, None, now, latency_ms=now - req.send_ms))
            if not queue:
                del self.unwritten[node_id]
        return done

    def next_timeout(self, now: int, best: int, default_timeout_ms: int) -> int:
        """``best`` or the time until the earliest request times out, whichever is less."""
        for reqs in self._requests.values():
            for r in reqs.values():
                best = min(best, r.send_ms + (r.request_timeout_ms or default_timeout_ms) - now)
        return best

    def has_timed_out(self, node_id: int, now: int, default_timeout_ms: int) -> bool:
        reqs = self._requests.get(node_id)
        if not reqs:
            return False
        return any(now - r.send_ms >= (r.request_timeout_ms or default_timeout_ms) for r in reqs.values())
