"""The arguments of ``send_offsets_to_transaction`` from whatever the caller holds: the consumer's group metadata
(KIP-447) and the offsets to commit."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kproducer.structs import TopicPartition


@dataclass(frozen=True, slots=True)
class GroupMetadata:
    """A consumer's group metadata for send_offsets_to_transaction (KIP-447 fencing of zombies)."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None


def group_metadata_from(value: str | GroupMetadata | Any) -> GroupMetadata:
    """A group id, a GroupMetadata, or a consumer's metadata object (confluent-kafka, kafka-python)."""
    if isinstance(value, GroupMetadata):
        return value
    if isinstance(value, str):
        if not value:
            raise ValueError("send_offsets_to_transaction: the group id must not be empty")
        return GroupMetadata(value)
    if isinstance(value, bytes | bytearray) and bytes(value[:7]) == _LIBRDKAFKA_CGMD_MAGIC:
        return _parse_librdkafka_group_metadata(bytes(value))
    group_id = getattr(value, "group_id", None)
    if isinstance(group_id, str) and group_id:
        return GroupMetadata(
            group_id,
            int(getattr(value, "generation_id", -1)),
            str(getattr(value, "member_id", "") or ""),
            getattr(value, "group_instance_id", None),
        )
    raise TypeError(
        "send_offsets_to_transaction: group_metadata must be a group id (str), a kproducer GroupMetadata "
        f"or a consumer's group metadata with a group_id attribute, got {type(value).__name__}"
    )


_LIBRDKAFKA_CGMD_MAGIC = b"CGMDv2:"


def _parse_librdkafka_group_metadata(data: bytes) -> GroupMetadata:
    """confluent-kafka's ``consumer.consumer_group_metadata()``: librdkafka's serialized form.

    ``CGMDv2:``, the generation id (int32, host byte order, written by memcpy), the
    group id and member id (NUL-terminated), then one byte that is 1 when there is
    no group instance id, or 0 followed by the NUL-terminated instance id.
    """
    pos = len(_LIBRDKAFKA_CGMD_MAGIC)
    try:
        generation = int.from_bytes(data[pos : pos + 4], sys.byteorder, signed=True)
        pos += 4
        end = data.index(b"\0", pos)
        group_id = data[pos:end].decode()
        pos = end + 1
        end = data.index(b"\0", pos)
        member_id = data[pos:end].decode()
        pos = end + 1
        instance: str | None = None
        if data[pos] == 0:
            end = data.index(b"\0", pos + 1)
            instance = data[pos + 1 : end].decode()
    except (ValueError, IndexError) as e:
        raise ValueError(f"send_offsets_to_transaction: cannot read the consumer group metadata {data!r}") from e
    return GroupMetadata(group_id, generation, member_id, instance)


def normalize_offsets(offsets: Mapping[TopicPartition, int] | Iterable[Any]) -> dict[TopicPartition, tuple[int, str | None]]:
    """``send_offsets_to_transaction``'s offsets: ``{TopicPartition: offset}`` or objects with topic/partition/offset (and metadata) attributes or methods."""
    out: dict[TopicPartition, tuple[int, str | None]] = {}
    items: Iterable[Any] = offsets.items() if isinstance(offsets, Mapping) else offsets
    for item in items:
        if isinstance(item, tuple) and len(item) == 2:
            tp_like, offset = item
            meta = getattr(offset, "metadata", None)
            offset = getattr(offset, "offset", offset)
        else:
            tp_like, offset, meta = item, getattr(item, "offset", None), getattr(item, "metadata", None)
        topic = getattr(tp_like, "topic", None)
        partition = getattr(tp_like, "partition", None)
        topic = topic() if callable(topic) else topic
        partition = partition() if callable(partition) else partition
        offset = offset() if callable(offset) else offset
        meta = meta() if callable(meta) else meta
        if not isinstance(topic, str) or not isinstance(partition, int) or not isinstance(offset, int) or offset < 0:
            raise ValueError(
                f"send_offsets_to_transaction: {item!r} is not a (topic, partition) with a next offset >= 0 to commit"
            )
        out[TopicPartition(topic, partition)] = (offset, meta if isinstance(meta, str) else None)
    return out
