"""A kafka-python program as kafka-python's documentation writes one: serializers, keys, headers,
future.get(), add_callback / add_errback, flush, partitions_for, metrics. Returns what it observed."""

from __future__ import annotations

import json
from typing import Any

from kafka import KafkaProducer
from kafka.errors import KafkaError


def main(bootstrap: str, topic: str) -> list[Any]:
    producer = KafkaProducer(
        bootstrap_servers=[bootstrap],
        key_serializer=str.encode,
        value_serializer=lambda m: json.dumps(m).encode("ascii"),
        linger_ms=5,
    )
    observed: list[Any] = []

    future = producer.send(topic, {"n": 0}, key="first", headers=[("seq", b"0")])
    try:
        md = future.get(timeout=10)
    except KafkaError as e:
        observed.append(("get failed", type(e).__name__))
    else:
        observed.append(
            ("get", md.topic == topic, md.partition, md.offset, md.serialized_key_size, md.serialized_value_size,
             md.serialized_header_size, md.topic_partition.partition)
        )

    def on_send_success(i: int, record_metadata: Any) -> None:
        observed.append(("success", i, record_metadata.partition, record_metadata.offset))

    def on_send_error(i: int, excp: BaseException) -> None:
        observed.append(("error", i, type(excp).__name__))

    for i in range(1, 60):
        producer.send(topic, {"n": i}, key=f"user-{i % 11}", headers=[("seq", str(i).encode())]).add_callback(
            on_send_success, i
        ).add_errback(on_send_error, i)
    producer.flush()

    # A None value goes through the value serializer too (json: null); a callback added after
    # completion runs at once.
    done = producer.send(topic, key="user-1", value=None)
    md = done.get(timeout=10)
    observed.append(("none value", md.partition, md.offset, done.is_done, done.succeeded(), done.failed()))
    observed.append(("value", done.value == md, done.exception))
    done.add_callback(on_send_success, 100)
    observed.append(("explicit", producer.send(topic, {"n": 61}, key="x", partition=2).get(10).partition))
    observed.append(("partitions", sorted(producer.partitions_for(topic))))
    metrics = producer.metrics()
    observed.append(("metrics", "record-send-rate" in metrics["producer-metrics"]))
    producer.close()
    return sorted(observed, key=repr)
