"""NetworkClient against a real broker (Tansu); misbehaving servers are in test_network_fake_broker.py."""

from __future__ import annotations

import socket

import pytest

from kproducer.errors import ConfigError, KafkaTimeoutError
from kproducer.network.client import ClientRequest, ClientResponse, NetworkClient
from kproducer.network.protocol import CLIENT_VERSIONS, ApiKey, build_produce_request
from kproducer.structs import TopicPartition
from tests.support.latch import returns
from tests.support.readback import create_topic, read_topic
from tests.support.tansu import TansuBroker


def test_negotiated_versions_match_what_tansu_advertises(tansu: TansuBroker) -> None:
    c = NetworkClient(bootstrap_servers=tansu.bootstrap)
    try:
        assert c.await_ready(-1, 5000)
        advertised = c.broker_api_versions(-1)
        assert advertised, "broker advertised no APIs"
        for key, (lo, hi) in CLIENT_VERSIONS.items():
            b = advertised.get(int(key))
            expected = None if b is None or max(lo, b[0]) > min(hi, b[1]) else min(hi, b[1])
            assert c.api_version(-1, key) == expected, key
    finally:
        c.close()


def test_metadata_for_a_subset_of_topics(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name + "-a", 3)
    create_topic(tansu.bootstrap, topic_name + "-b", 1)
    c = NetworkClient(bootstrap_servers=tansu.bootstrap)
    try:
        c.fetch_metadata([topic_name + "-a"], 5000)
        cl = c.metadata.cluster
        assert topic_name + "-a" in cl.topics and topic_name + "-b" not in cl.topics
        assert cl.partition_count(topic_name + "-a") == 3
        assert all(p.leader in cl.nodes for p in cl.partitions_for_topic(topic_name + "-a"))
        c.metadata.allow_auto_topic_creation = False
        c.fetch_metadata([topic_name + "-missing"], 5000)
        assert c.metadata.cluster.topic_errors.get(topic_name + "-missing") == 3
    finally:
        c.close()


def _v2_batch(values: list[bytes]) -> memoryview:
    from kproducer.record.builder import MemoryRecordsBuilder

    b = MemoryRecordsBuilder(bytearray(16384), magic=2, write_limit=16384)
    for i, v in enumerate(values):
        b.append(1_700_000_000_000 + i, b"k%d" % i, v)
    b.close()
    return b.buffer()


def test_produce_through_network_client_and_read_back(tansu: TansuBroker, topic_name: str) -> None:
    create_topic(tansu.bootstrap, topic_name, 2)
    c = NetworkClient(bootstrap_servers=tansu.bootstrap)
    try:
        c.fetch_metadata([topic_name], 5000)
        leader = c.metadata.cluster.leader_for(TopicPartition(topic_name, 0))
        assert leader is not None
        batches = {
            TopicPartition(topic_name, p): _v2_batch([b"p%d-v%d" % (p, i) for i in range(5)]) for p in (0, 1)
        }
        resp = c.send_and_receive(
            ClientRequest(
                leader.id, ApiKey.PRODUCE, lambda v: build_produce_request(v, -1, 5000, None, batches)
            ),
            5000,
        )
        assert resp.error is None and resp.request.api_version == c.api_version(leader.id, ApiKey.PRODUCE)
        parts, _throttle = resp.response
        assert {tp: r.error_code for tp, r in parts.items()} == {tp: 0 for tp in batches}
    finally:
        c.close()
    recs = read_topic(tansu.bootstrap, topic_name, 10)
    assert sorted(r.value for r in recs) == sorted(b"p%d-v%d" % (p, i) for p in (0, 1) for i in range(5))


def test_acks0_completes_without_response_and_connection_survives(
    tansu: TansuBroker, topic_name: str
) -> None:
    create_topic(tansu.bootstrap, topic_name, 1)
    c = NetworkClient(bootstrap_servers=tansu.bootstrap)
    try:
        c.fetch_metadata([topic_name], 5000)
        leader = c.metadata.cluster.leader_for(TopicPartition(topic_name, 0))
        assert leader is not None and c.await_ready(leader.id, 5000)
        tp = TopicPartition(topic_name, 0)
        done: list[ClientResponse] = []
        req = ClientRequest(
            leader.id,
            ApiKey.PRODUCE,
            lambda v: build_produce_request(v, 0, 5000, None, {tp: _v2_batch([b"fire-and-forget"])}),
            expect_response=False,
            callback=done.append,
        )
        c.send(req, c._clock())
        c.poll(0, c._clock())
        assert len(done) == 1 and done[0].response is None and done[0].error is None
        # Whatever the broker answers to acks=0 is dropped; a normal request still works afterwards.
        c.fetch_metadata([topic_name], 5000)
        assert c.is_ready(leader.id)
    finally:
        c.close()
    assert [r.value for r in read_topic(tansu.bootstrap, topic_name, 1)] == [b"fire-and-forget"]


@pytest.mark.parametrize("entry", ["localhost", "host:notaport", ":9092", "a:b:c", "host:70000", ""])
def test_unparsable_bootstrap_raises_config_error_naming_entry(entry: str) -> None:
    with pytest.raises(ConfigError) as ei:
        NetworkClient(bootstrap_servers=f"127.0.0.1:1,{entry}" if entry else "")
    if entry:
        assert repr(entry) in str(ei.value)


def test_unreachable_bootstrap_times_out_naming_addresses() -> None:
    with socket.socket() as s:  # a port with nobody listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    c = NetworkClient(
        bootstrap_servers=f"127.0.0.1:{port}", reconnect_backoff_ms=10, reconnect_backoff_max_ms=50
    )
    try:
        with pytest.raises(KafkaTimeoutError) as ei:
            returns(lambda: c.fetch_metadata(["x"], 600), "fetch_metadata with a 600 ms budget")
        assert "within 600 ms" in str(ei.value)
        assert f"127.0.0.1:{port}" in str(ei.value) and "addresses tried" in str(ei.value)
        assert f"127.0.0.1:{port}" in c.metadata.tried_addresses
    finally:
        c.close()
