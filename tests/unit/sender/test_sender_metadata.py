"""Metadata refreshes the Sender asks for: after NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION,
FENCED_LEADER_EPOCH or a lost connection the topic's metadata is fetched again, and the retry goes
to the leader the new metadata names (Java's ``Sender.completeBatch`` → ``metadata.requestUpdate``).

The scripted client answers metadata requests from its broker-side table (``broker_topics`` and
``leaders``) whenever the producer's Metadata says one is due.
"""

from __future__ import annotations

import pytest

from kproducer.network.protocol import ApiKey
from kproducer.structs import TopicPartition
from tests.support.mock_client import DISCONNECT, produce_response
from tests.support.producer_rig import ProducerRig
from tests.unit.sender.conftest import MakeRig

TP0 = TopicPartition("t", 0)


@pytest.mark.parametrize("code", [6, 3, 74])  # NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION, FENCED_LEADER_EPOCH
def test_a_stale_leader_error_refreshes_the_topic_and_the_retry_goes_to_the_new_leader(rig: ProducerRig, code: int) -> None:
    fut = rig.send(b"m")
    asked = len(rig.client.metadata_requests)
    rig.client.leaders[TP0] = 1  # the leadership moved to node 1
    rig.client.prepare(ApiKey.PRODUCE, produce_response(code), produce_response(0, 21))
    rig.run()
    assert rig.produce_nodes() == [0]
    rig.run_until(fut.done, step_ms=50)
    assert fut.result(0).offset == 21
    assert rig.produce_nodes() == [0, 1]
    assert ["t"] in rig.client.metadata_requests[asked:]
    assert rig.metadata.cluster.leader_for(TP0).id == 1  # type: ignore[union-attr]


def test_a_lost_connection_refreshes_the_topic(rig: ProducerRig) -> None:
    fut = rig.send()
    asked = len(rig.client.metadata_requests)
    rig.client.prepare(ApiKey.PRODUCE, DISCONNECT, produce_response(0, 2))
    rig.run_until(fut.done, step_ms=50)
    assert ["t"] in rig.client.metadata_requests[asked:]


@pytest.mark.parametrize("code", [19, 7])  # NOT_ENOUGH_REPLICAS, REQUEST_TIMED_OUT: the leader is right
def test_a_retriable_error_that_is_not_about_the_leader_refreshes_nothing(rig: ProducerRig, code: int) -> None:
    fut = rig.send()
    asked = len(rig.client.metadata_requests)
    rig.client.prepare(ApiKey.PRODUCE, produce_response(code), produce_response(0, 2))
    rig.run_until(fut.done, step_ms=50)
    assert rig.client.metadata_requests[asked:] == []
    assert rig.produce_nodes() == [0, 0]


def test_a_partition_without_a_leader_waits_and_goes_once_one_is_elected(make_rig: MakeRig) -> None:
    rig = make_rig()
    rig.client.leaders[TP0] = -1
    rig.metadata.mark_urgent("t", rig.clock())
    rig.run()  # the refresh says t-0 has no leader
    assert rig.metadata.cluster.leader_for(TP0) is None
    fut = rig.send()
    rig.run(2)
    assert rig.produce_bodies() == [] and not fut.done()
    del rig.client.leaders[TP0]  # elected: node 0 again
    rig.client.prepare(ApiKey.PRODUCE, produce_response(0, 30))
    rig.run_until(fut.done, step_ms=100)
    assert fut.result(0).offset == 30
    assert len(rig.client.metadata_requests) >= 3  # the producer kept asking while t-0 had no leader


def test_only_the_failing_topic_is_refreshed(make_rig: MakeRig) -> None:
    rig = make_rig(topics={"t": 2, "u": 2})
    a = rig.send(topic="t")
    b = rig.send(topic="u", partition=1)
    rig.client.prepare(ApiKey.PRODUCE, produce_response({TP0: 6}), produce_response({TP0: 6}), produce_response(0, 2))
    asked = len(rig.client.metadata_requests)
    rig.run_until(lambda: a.done() and b.done(), step_ms=50)
    refreshed = [r for r in rig.client.metadata_requests[asked:] if r is not None]
    assert refreshed and all(r == ["t"] for r in refreshed)
