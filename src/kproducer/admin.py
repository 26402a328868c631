"""A small admin helper: create topics and wait until metadata shows them.

Tests, examples and the CLI need topics without pulling in a full admin client.
"""

from __future__ import annotations

import datetime
import logging
import time
from collections.abc import Iterable, Mapping

from kproducer.errors import KafkaTimeoutError, error_for_code
from kproducer.network.client import ClientRequest, NetworkClient
from kproducer.network.protocol import ApiKey, request_class

__all__ = ["create_topics"]

logger = logging.getLogger(__name__)

_TOPIC_ALREADY_EXISTS = 36


def create_topics(
    bootstrap: str | Iterable[str],
    topics: Mapping[str, int],
    replication_factor: int = 1,
    timeout: float = 30.0,
    *,
    client_id: str = "kproducer-admin",
) -> None:
    """Create ``{name: partitions}`` and wait until every topic has leaders in metadata.

    A topic that already exists is fine. Raises the broker's error for other
    failures and KafkaTimeoutError when the topics do not appear in time.
    """
    timeout_ms = int(timeout * 1000)
    deadline = time.monotonic() + timeout
    client = NetworkClient(bootstrap_servers=bootstrap, client_id=client_id, request_timeout_ms=timeout_ms)
    try:
        client.fetch_metadata([], timeout_ms)
        cluster = client.metadata.cluster
        node_id = (
            cluster.controller_id if cluster.controller_id in cluster.nodes else next(iter(cluster.nodes))
        )

        def build(version: int) -> object:
            mod_topic = _creatable_topic_class(version)
            entries = tuple(
                mod_topic(
                    name=name,
                    num_partitions=parts,
                    replication_factor=replication_factor,
                    assignments=(),
                    configs=(),
                )
                for name, parts in topics.items()
            )
            return request_class(ApiKey.CREATE_TOPICS, version)(
                topics=entries, timeout=_timedelta_ms(timeout_ms)
            )

        resp = client.send_and_receive(ClientRequest(node_id, ApiKey.CREATE_TOPICS, build), timeout_ms)
        if resp.error is not None:
            raise resp.error
        for result in resp.response.topics:
            code = int(result.error_code)
            if code not in (0, _TOPIC_ALREADY_EXISTS):
                raise error_for_code(code, getattr(result, "error_message", None), topic=str(result.name))
        pending = set(topics)
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise KafkaTimeoutError(
                    f"topics {sorted(pending)} did not appear in metadata within {timeout}s"
                )
            client.fetch_metadata(sorted(pending), int(remaining * 1000))
            c = client.metadata.cluster
            pending = {
                t
                for t in pending
                if not c.partition_count(t)
                or len(c.available_partitions_for_topic(t)) != c.partition_count(t)
            }
            if pending:
                time.sleep(0.05)
    finally:
        client.close()


def _creatable_topic_class(version: int) -> type:
    import importlib

    cls: type = importlib.import_module(f"kio.schema.create_topics.v{version}.request").CreatableTopic
    return cls


def _timedelta_ms(ms: int) -> object:
    from kio.static.primitive import i32Timedelta

    return i32Timedelta.parse(datetime.timedelta(milliseconds=ms))
