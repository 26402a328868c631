"""kafka-python with a custom Partitioner subclass (reading the raw key and the cluster) and kafka-python's
Serializer classes. Returns what it observed."""

from __future__ import annotations

from typing import Any

from kafka import KafkaProducer
from kafka.partitioner import Partitioner
from kafka.serializer import DefaultSerializer, JsonSerializer


class ByRegion(Partitioner):
    """Records of region "eu" to the lowest partition, the others by the length of their key."""

    def partition(self, topic: Any, key: Any, serialized_key: Any, value: Any, serialized_value: Any, cluster: Any) -> int:
        partitions = sorted(cluster.partitions_for_topic(topic))
        available = cluster.available_partitions_for_topic(topic)
        if value is not None and value.get("region") == "eu":
            return partitions[0]
        assert set(available) <= set(partitions) and topic in cluster.topics()
        return partitions[len(key) % len(partitions)]


def main(bootstrap: str, topic: str) -> list[Any]:
    producer = KafkaProducer(
        bootstrap_servers=bootstrap,
        partitioner=ByRegion(),
        key_serializer=DefaultSerializer(),
        value_serializer=JsonSerializer(),
    )
    observed: list[Any] = []
    futures = []
    for i in range(20):
        region = "eu" if i % 3 == 0 else "us"
        futures.append(producer.send(topic, {"i": i, "region": region}, key="user-" + "x" * (i % 4)))
    producer.flush()
    for i, f in enumerate(futures):
        md = f.get(10)
        observed.append((i, md.partition, md.offset, md.serialized_key_size, md.serialized_value_size))
    # JsonSerializer maps None to None: a real tombstone.
    md = producer.send(topic, None, key="user-x").get(10)
    observed.append(("tombstone", md.partition, md.serialized_value_size))
    producer.close()
    return observed
