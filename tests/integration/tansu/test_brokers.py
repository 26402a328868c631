"""The test brokers themselves work, and the independent read-back sees what confluent-kafka wrote."""

from __future__ import annotations

from tests.support.readback import create_topic, read_topic
from tests.support.tansu import TansuBroker


def test_tansu_roundtrip_with_independent_client(tansu: TansuBroker, topic_name: str) -> None:
    from confluent_kafka import Producer

    create_topic(tansu.bootstrap, topic_name, 3)
    p = Producer({"bootstrap.servers": tansu.bootstrap})
    for i in range(30):
        p.produce(topic_name, value=b"v%d" % i, key=b"k%d" % i, partition=i % 3, headers=[("h", b"%d" % i)])
    assert p.flush(10) == 0
    recs = read_topic(tansu.bootstrap, topic_name, 30)
    assert len(recs) == 30
    for part in range(3):
        values = [r.value for r in recs if r.partition == part]
        assert values == [b"v%d" % i for i in range(part, 30, 3)]
        assert [r.offset for r in recs if r.partition == part] == list(range(10))
