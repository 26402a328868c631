"""What confluent-kafka's ``list_topics()`` returns: ``ClusterMetadata`` and its brokers, topics and partitions."""

from __future__ import annotations

from kproducer.compat.confluent_kafka.errors import KafkaError

__all__ = ["BrokerMetadata", "ClusterMetadata", "PartitionMetadata", "TopicMetadata"]


class BrokerMetadata:
    """A broker in :class:`ClusterMetadata`: ``id``, ``host``, ``port``."""

    def __init__(self, broker_id: int, host: str, port: int) -> None:
        self.id = broker_id
        self.host = host
        self.port = port

    def __str__(self) -> str:
        return f"{self.host}:{self.port}/{self.id}"


class PartitionMetadata:
    """A partition in :class:`TopicMetadata`: ``id``, ``leader``, ``replicas``, ``isrs``, ``error``."""

    def __init__(self, partition: int, leader: int, replicas: list[int], isrs: list[int]) -> None:
        self.id = partition
        self.leader = leader
        self.replicas = replicas
        self.isrs = isrs
        self.error: KafkaError | None = None

    def __str__(self) -> str:
        return str(self.id)


class TopicMetadata:
    """A topic in :class:`ClusterMetadata`: ``topic``, ``partitions`` (by id), ``error``."""

    def __init__(self, topic: str, partitions: dict[int, PartitionMetadata], error: KafkaError | None) -> None:
        self.topic = topic
        self.partitions = partitions
        self.error = error

    def __str__(self) -> str:
        return self.topic


class ClusterMetadata:
    """What ``list_topics()`` returns: ``cluster_id``, ``controller_id``, ``brokers``, ``topics``."""

    def __init__(self) -> None:
        self.cluster_id: str | None = None
        self.controller_id = -1
        self.brokers: dict[int, BrokerMetadata] = {}
        self.topics: dict[str, TopicMetadata] = {}
        self.orig_broker_id = -1
        self.orig_broker_name: str | None = None
