"""kio Metadata responses of any version, for tests and benchmarks.

A field that a version lacks (leader epochs before v7, authorized operations before v8,
topic ids before v10, ...) is left out, so one description of a cluster serves every version.
"""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from kio.schema.errors import ErrorCode

from kproducer.network import protocol
from kproducer.network.protocol import ApiKey

__all__ = ["PartitionSpec", "for_version", "metadata_response"]

PartitionSpec = tuple[int, int, int, tuple[int, ...]]
"""(partition, leader, leader epoch, replicas); the ISR is the replicas."""

_NO_OPERATIONS = -(2**31)


def for_version(kind: type, **fields: Any) -> Any:
    """``kind(**fields)`` keeping only the fields this generated class has."""
    names = {f.name for f in dataclasses.fields(kind)}
    return kind(**{k: v for k, v in fields.items() if k in names})


def metadata_response(
    version: int,
    brokers: Sequence[tuple[int, str, int]],
    topics: Mapping[str, tuple[int, Sequence[PartitionSpec]]],
    *,
    cluster_id: str = "c1",
    controller_id: int = 1,
) -> Any:
    """A MetadataResponse of ``version``: ``brokers`` as (id, host, port), ``topics`` as {name: (error, partitions)}."""
    cls = protocol.response_class(ApiKey.METADATA, version)
    mod = importlib.import_module(cls.__module__)
    answer = tuple(
        for_version(
            mod.MetadataResponseTopic,
            error_code=ErrorCode(code),
            name=name,
            topic_id=uuid.UUID(int=i + 1),
            is_internal=False,
            topic_authorized_operations=_NO_OPERATIONS,
            partitions=tuple(
                for_version(
                    mod.MetadataResponsePartition,
                    error_code=ErrorCode(0),
                    partition_index=p,
                    leader_id=leader,
                    leader_epoch=epoch,
                    replica_nodes=replicas,
                    isr_nodes=replicas,
                    offline_replicas=(),
                )
                for p, leader, epoch, replicas in parts
            ),
        )
        for i, (name, (code, parts)) in enumerate(topics.items())
    )
    return for_version(
        cls,
        throttle_time=datetime.timedelta(0),
        brokers=tuple(
            for_version(mod.MetadataResponseBroker, node_id=n, host=host, port=port, rack=None)
            for n, host, port in brokers
        ),
        cluster_id=cluster_id,
        controller_id=controller_id,
        topics=answer,
        cluster_authorized_operations=_NO_OPERATIONS,
    )
