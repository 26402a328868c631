"""Cluster metadata, one module per job:

* ``cluster``: :class:`Cluster`, the immutable snapshot of brokers, topics and partitions that
  caller threads read without a lock.
* ``refresh_policy``: :class:`MetadataRefreshPolicy`, KIP-526's choice of the topics each
  Metadata request names (urgent and non-urgent sets, target size, idle eviction), pure.
* ``response``: reading a Metadata response, and the per-topic error tables
  (:data:`FINAL_TOPIC_ERRORS`, :data:`SURFACED_TOPIC_ERRORS`).
* ``producer_metadata``: :class:`Metadata`, the mutable holder the Sender's NetworkClient
  drives (working set, request scheduling and coalescing, failure backoff, version waits).
"""

from kproducer.metadata.cluster import Cluster
from kproducer.metadata.producer_metadata import Metadata
from kproducer.metadata.refresh_policy import (
    MetadataRefreshPolicy,
    RefreshSelection,
    TopicState,
    WorkingSetPolicy,
)
from kproducer.metadata.response import FINAL_TOPIC_ERRORS, SURFACED_TOPIC_ERRORS

__all__ = [
    "Cluster",
    "Metadata",
    "MetadataRefreshPolicy",
    "RefreshSelection",
    "TopicState",
    "WorkingSetPolicy",
    "FINAL_TOPIC_ERRORS",
    "SURFACED_TOPIC_ERRORS",
]
