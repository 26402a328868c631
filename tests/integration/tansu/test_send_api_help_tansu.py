"""send()'s convenience forms (dict headers, str values) reach a real broker as bytes."""

from __future__ import annotations

from kproducer.embedded_broker import EmbeddedBroker
from kproducer.producer import Producer
from tests.support.readback import create_topic, read_topic


def test_dict_headers_and_str_values_are_sent(tansu: EmbeddedBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    with Producer(bootstrap_servers=tansu.bootstrap) as p:
        p.send(topic_name, b"a", headers={"trace": "abc", "raw": b"\x00", "none": None}).result(20)
        p.send(topic_name, b"b", headers=[("k", bytearray(b"x")), ("k", memoryview(b"y"))]).result(20)
    recs = read_topic(tansu.bootstrap, topic_name, 2)
    assert [r.headers for r in recs] == [
        [("trace", b"abc"), ("raw", b"\x00"), ("none", None)],
        [("k", b"x"), ("k", b"y")],
    ]
