"""Client-wide error events (ClusterConnectionStates' listeners): one per broker going down, ALL_BROKERS_DOWN once."""

from __future__ import annotations

import logging
import socket
import threading

import pytest

from kproducer.common.backoff import ExponentialBackoff
from kproducer.errors import SaslAuthenticationFailedError
from kproducer.network.client_error_event import ClientErrorEvent, ClientErrorKind
from kproducer.network.connection_states import ClusterConnectionStates, ConnectionState, NodeState


def _states(*nodes: NodeState) -> tuple[ClusterConnectionStates, list[ClientErrorEvent]]:
    states = ClusterConnectionStates(ExponentialBackoff(50, 1000), ExponentialBackoff(10_000, 30_000))
    for node in nodes:
        states.nodes[node.node_id] = node
    events: list[ClientErrorEvent] = []
    states.client_error_listeners.add(events.append)
    return states, events


def _fail(states: ClusterConnectionStates, node: NodeState, now: int, error: Exception | None = None, **kw: bool) -> None:
    states.connecting(node)
    node.last_attempt_ms = now
    states.disconnected(node, now + 1, "connect failed: ECONNREFUSED", error, lambda address, why: None, **kw)


def test_each_broker_reported_when_it_goes_down_and_all_brokers_down_once() -> None:
    a = NodeState(node_id=-1, host="10.0.0.1", port=9092)
    b = NodeState(node_id=-2, host="10.0.0.2", port=9092)
    states, events = _states(a, b)
    _fail(states, a, 0)
    # b is untried: it may be up, so not every broker is down yet.
    assert [(e.kind, e.node_id, e.address) for e in events] == [(ClientErrorKind.TRANSPORT, -1, "10.0.0.1:9092")]
    assert events[0].message == "bootstrap server 10.0.0.1:9092: connect failed: ECONNREFUSED"
    _fail(states, a, 100)  # already down: not reported again
    assert len(events) == 1
    _fail(states, b, 200)
    assert [e.kind for e in events] == [
        ClientErrorKind.TRANSPORT, ClientErrorKind.TRANSPORT, ClientErrorKind.ALL_BROKERS_DOWN,
    ]  # fmt: skip
    assert events[2].node_id is None and events[2].message.startswith("2/2 brokers are unreachable")
    _fail(states, a, 300)
    _fail(states, b, 400)
    assert len(events) == 3  # still down: nothing new
    # b comes back and goes down again: reported again, and so is the end of the last broker.
    states.connecting(b)
    states.move(b, ConnectionState.CHECKING_API_VERSIONS)
    states.ready(b, 500)
    states.disconnected(b, 600, "closed by the broker", None, lambda address, why: None)
    _fail(states, b, 700)
    assert [e.kind for e in events[3:]] == [ClientErrorKind.TRANSPORT, ClientErrorKind.ALL_BROKERS_DOWN]


def test_a_broker_connected_or_connecting_means_not_all_are_down() -> None:
    a = NodeState(node_id=1, host="10.0.0.1", port=9092)
    b = NodeState(node_id=2, host="10.0.0.2", port=9092)
    states, events = _states(a, b)
    states.connecting(b)
    b.last_attempt_ms = 0
    _fail(states, a, 0)
    assert [e.kind for e in events] == [ClientErrorKind.TRANSPORT]
    assert events[0].message == "broker 1 (10.0.0.1:9092): connect failed: ECONNREFUSED"


def test_refusal_and_unresolved_name_have_their_own_kind_and_cause() -> None:
    a = NodeState(node_id=1, host="broker-a", port=9092)
    b = NodeState(node_id=2, host="10.0.0.2", port=9092)
    c = NodeState(node_id=3, host="10.0.0.3", port=9092)
    states, events = _states(a, b, c)
    refusal = SaslAuthenticationFailedError("invalid credentials")
    _fail(states, a, 0, unresolved=True)
    _fail(states, b, 0, refusal)
    _fail(states, b, 10, refusal)  # the same refusal again: not reported again
    assert [(e.kind, e.node_id, e.cause) for e in events] == [
        (ClientErrorKind.RESOLVE, 1, None),
        (ClientErrorKind.AUTHENTICATION, 2, refusal),
    ]


def test_a_listener_that_raises_is_logged_and_the_others_still_hear(caplog: pytest.LogCaptureFixture) -> None:
    a = NodeState(node_id=1, host="10.0.0.1", port=9092)
    states, events = _states()
    states.nodes[1] = a

    def broken(event: ClientErrorEvent) -> None:
        raise RuntimeError("listener bug")

    states.client_error_listeners = type(states.client_error_listeners)()
    states.client_error_listeners.add(broken)
    states.client_error_listeners.add(events.append)
    with caplog.at_level(logging.ERROR, logger="kproducer.network.client"):
        _fail(states, a, 0)
    assert [e.kind for e in events] == [ClientErrorKind.TRANSPORT, ClientErrorKind.ALL_BROKERS_DOWN]
    assert any("a client error listener raised" in r.getMessage() for r in caplog.records)
    with pytest.raises(TypeError, match="must be callable"):
        states.client_error_listeners.add(42)  # type: ignore[arg-type]


def test_producer_listener_hears_a_closed_port_on_the_io_thread() -> None:
    """The whole path: Producer(client_error_listener=...) -> NetworkClient -> ClusterConnectionStates."""
    from kproducer import Producer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the with block ends: nothing listens there
    events: list[ClientErrorEvent] = []
    threads: set[str] = set()
    both = threading.Event()

    def listener(event: ClientErrorEvent) -> None:
        threads.add(threading.current_thread().name)
        events.append(event)
        if {e.kind for e in events} >= {ClientErrorKind.TRANSPORT, ClientErrorKind.ALL_BROKERS_DOWN}:
            both.set()

    p = Producer({"bootstrap.servers": f"127.0.0.1:{port}"}, client_error_listener=listener)
    try:
        assert both.wait(60), [e.kind for e in events]
    finally:
        p.close(0)
    assert events[0].kind is ClientErrorKind.TRANSPORT and events[0].address == f"127.0.0.1:{port}"
    assert [e.kind for e in events].count(ClientErrorKind.ALL_BROKERS_DOWN) == 1
    assert all(name.startswith("kafka-producer-network-thread") for name in threads)
