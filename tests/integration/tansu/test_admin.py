"""kproducer.admin.create_topics against Tansu, checked with confluent-kafka's metadata."""

from __future__ import annotations

from kproducer.admin import create_topics
from tests.support.tansu import TansuBroker


def test_create_topics_and_existing_is_fine(tansu: TansuBroker, topic_name: str) -> None:
    from confluent_kafka.admin import AdminClient

    create_topics(tansu.bootstrap, {topic_name: 4, topic_name + "-x": 1}, timeout=10)
    create_topics(tansu.bootstrap, {topic_name: 4}, timeout=10)  # already exists: no error
    md = AdminClient({"bootstrap.servers": tansu.bootstrap}).list_topics(timeout=10)
    assert len(md.topics[topic_name].partitions) == 4
    assert len(md.topics[topic_name + "-x"].partitions) == 1
