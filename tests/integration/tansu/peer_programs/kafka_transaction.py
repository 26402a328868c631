"""kafka-python's transactional producer: init_transactions, a committed transaction with consumer
offsets (send_offsets_to_transaction), an aborted one. Returns what it observed."""

from __future__ import annotations

from typing import Any

from kafka import KafkaProducer
from kafka.structs import OffsetAndMetadata, TopicPartition


def main(bootstrap: str, topic: str, transactional_id: str, group_id: str) -> list[Any]:
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id=transactional_id)
    observed: list[Any] = []
    producer.init_transactions()

    producer.begin_transaction()
    futures = [producer.send(topic, b"committed-%d" % i, key=b"k%d" % i) for i in range(6)]
    producer.send_offsets_to_transaction({TopicPartition(topic, 0): OffsetAndMetadata(3, "", -1)}, group_id)
    producer.commit_transaction()
    observed.append(("committed", [(f.is_done, f.succeeded(), f.value.partition) for f in futures]))

    producer.begin_transaction()
    aborted = producer.send(topic, b"aborted", key=b"k0")
    producer.abort_transaction()
    observed.append(("aborted", aborted.is_done, type(aborted.exception).__name__ if aborted.failed() else None))

    producer.begin_transaction()
    producer.send(topic, b"last", key=b"k1")
    producer.commit_transaction()
    producer.close()
    return observed
