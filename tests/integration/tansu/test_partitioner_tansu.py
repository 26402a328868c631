"""The keyed-partition formula against librdkafka's murmur2 partitioner, through a real broker."""

from __future__ import annotations

import random
from typing import Any

from kproducer.partitioner import partition_for_key
from tests.support.readback import create_topic
from tests.support.tansu import TansuBroker


def test_murmur2_matches_librdkafka(tansu: TansuBroker, topic_name: str) -> None:
    """confluent-kafka's murmur2_random partitioner must put every key where partition_for_key says."""
    from confluent_kafka import Producer

    partitions = 7
    create_topic(tansu.bootstrap, topic_name, partitions)
    rng = random.Random(794)
    keys = [b"", b"a", b"ab", b"abc", b"abcd"] + [f"key-{i}".encode() for i in range(300)]
    keys += [rng.randbytes(rng.randrange(1, 64)) for _ in range(500 - len(keys))]
    assert len(set(keys)) == 500
    p = Producer({"bootstrap.servers": tansu.bootstrap, "partitioner": "murmur2_random", "linger.ms": 5})
    got: dict[bytes, int] = {}
    errors: list[Any] = []

    def on_delivery(err: Any, msg: Any) -> None:
        if err is not None:
            errors.append(err)
        else:
            got[msg.key()] = msg.partition()

    for k in keys:
        p.produce(topic_name, key=k, value=b"v", on_delivery=on_delivery)
    assert p.flush(20) == 0, "confluent-kafka did not deliver within 20s"
    assert errors == []
    assert len(got) == 500
    mismatches = {
        k: (v, partition_for_key(k, partitions))
        for k, v in got.items()
        if v != partition_for_key(k, partitions)
    }
    assert mismatches == {}
    assert len(set(got.values())) == partitions  # every partition was hit: the comparison is not vacuous
