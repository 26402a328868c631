"""What the NetworkClient sends and answers: ClientRequest, ClientResponse, and request bodies.

As Java's ClientRequest / ClientResponse. A request's body may be a builder that is given the
version negotiated with its node when it goes out (``request_body``), so callers need not know
which broker a request reaches before it is sent.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kproducer.errors import UnsupportedVersionError
from kproducer.network import protocol
from kproducer.network.protocol import ApiKey

if TYPE_CHECKING:
    from kproducer.network.connection import KafkaConnection

__all__ = ["ClientRequest", "ClientResponse", "build_metadata_request", "request_body"]


@dataclass(slots=True, eq=False)
class ClientRequest:
    """A request for one node. ``request`` is a body, or a builder given the negotiated version."""

    node_id: int
    api_key: int
    request: Any
    expect_response: bool = True
    callback: Callable[[ClientResponse], None] | None = None
    created_ms: int = 0
    request_timeout_ms: int | None = None
    correlation_id: int = -1
    api_version: int = -1
    send_ms: int = 0


@dataclass(slots=True, eq=False)
class ClientResponse:
    request: ClientRequest
    response: Any = None
    received_ms: int = 0
    disconnected: bool = False
    timed_out: bool = False
    error: Exception | None = None
    latency_ms: int = 0

    @property
    def node_id(self) -> int:
        return self.request.node_id

    @property
    def api_key(self) -> int:
        return self.request.api_key


def request_body(request: ClientRequest, conn: KafkaConnection) -> Any:
    """The body to send: ``request.request``, or its builder called with the version ``conn`` negotiated."""
    body = request.request
    if callable(body) and not hasattr(body, "__api_key__") and not isinstance(body, protocol.ProduceRequestData):
        version = conn.api_version(request.api_key)
        if version is None:
            raise UnsupportedVersionError(
                f"node {request.node_id} supports no version of {ApiKey(request.api_key).name}"
            )
        body = body(version)
    return body


def build_metadata_request(version: int, topics: list[str] | None, allow_auto_topic_creation: bool) -> Any:
    """A Metadata request naming ``topics`` (None = all topics)."""
    mod = protocol.request_class(ApiKey.METADATA, version)
    topic_cls = _metadata_topic_class(version)
    if topics is None:
        entries = None
    else:
        if version >= 10:
            entries = tuple(topic_cls(name=t, topic_id=None) for t in topics)
        else:
            entries = tuple(topic_cls(name=t) for t in topics)
    kwargs: dict[str, Any] = {"topics": entries}
    if version >= 4:
        kwargs["allow_auto_topic_creation"] = allow_auto_topic_creation
    if 8 <= version <= 10:
        kwargs["include_cluster_authorized_operations"] = False
    if version >= 8:
        kwargs["include_topic_authorized_operations"] = False
    return mod(**kwargs)


def _metadata_topic_class(version: int) -> Any:
    m = importlib.import_module(f"kio.schema.metadata.v{version}.request")
    return m.MetadataRequestTopic
