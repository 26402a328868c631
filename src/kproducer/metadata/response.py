"""A Metadata response (any version) read into the values a :class:`~kproducer.metadata.cluster.Cluster` is built from.

Also the tables of per-topic error codes: which keep a topic urgent (retried with a per-topic
backoff), which no refresh can cure, and which the cluster snapshot keeps for callers to act on.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from kproducer.errors import (
    InvalidTopicError,
    LeaderNotAvailableError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
    error_codes,
)
from kproducer.structs import Node, PartitionInfo

# The package's logger, as when metadata was one module.
logger = logging.getLogger("kproducer.metadata")

#: Per-topic errors that keep a topic urgent (with backoff).
RETRIABLE_TOPIC_ERRORS = error_codes(UnknownTopicOrPartitionError, LeaderNotAvailableError)
#: Per-topic errors that no refresh can cure: records for the topic fail at once.
FINAL_TOPIC_ERRORS = error_codes(InvalidTopicError, TopicAuthorizationFailedError)
#: Per-topic errors kept in ``cluster.topic_errors`` for callers to act on.
SURFACED_TOPIC_ERRORS = RETRIABLE_TOPIC_ERRORS | FINAL_TOPIC_ERRORS


@dataclass(frozen=True, slots=True)
class MetadataResponseData:
    """What one Metadata response says, as plain values."""

    nodes: list[Node]
    partitions: list[PartitionInfo]
    #: Topic name -> its non-zero error code.
    topic_errors: dict[str, int]
    internal_topics: list[str]
    #: The topics the response names, in its order.
    topics: list[str]
    #: Topics with a partition that has no leader.
    leaderless: set[str]
    cluster_id: str | None
    controller_id: int


def read_metadata_response(response: Any) -> MetadataResponseData:
    """Read a decoded Metadata response; a topic error this client does not act on is logged at WARNING."""
    nodes = [
        Node(int(b.node_id), str(b.host), int(b.port), getattr(b, "rack", None)) for b in response.brokers
    ]
    parts: list[PartitionInfo] = []
    errors: dict[str, int] = {}
    internal: list[str] = []
    names: list[str] = []
    leaderless: set[str] = set()
    for t in response.topics:
        name = t.name
        if name is None:
            continue
        name = str(name)
        names.append(name)
        code = int(t.error_code)
        if code != 0:
            errors[name] = code
            if code not in SURFACED_TOPIC_ERRORS:
                logger.warning("metadata for topic %s returned error %d", name, code)
        if getattr(t, "is_internal", False):
            internal.append(name)
        for p in t.partitions:
            leader = int(p.leader_id)
            if leader < 0:
                leaderless.add(name)
            parts.append(
                PartitionInfo(
                    name,
                    int(p.partition_index),
                    leader,
                    int(getattr(p, "leader_epoch", -1)),
                    tuple(int(r) for r in p.replica_nodes),
                    tuple(int(r) for r in p.isr_nodes),
                    tuple(int(r) for r in getattr(p, "offline_replicas", ())),
                )
            )
    return MetadataResponseData(
        nodes,
        parts,
        errors,
        internal,
        names,
        leaderless,
        getattr(response, "cluster_id", None),
        int(getattr(response, "controller_id", -1)),
    )
