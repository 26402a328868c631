"""Sans-I/O KafkaConnection: fed bytes by hand, clock passed in, no sockets."""

from __future__ import annotations

import logging
import struct
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kproducer.network import protocol
from kproducer.network.connection import NO_RESPONSE_IDS_REMEMBERED, ConnectionState, KafkaConnection
from kproducer.network.protocol import ApiKey, ProtocolError
from tests.support.wire import api_versions_response, frame_response, parse_request

BROKER = {0: (0, 9), 3: (0, 20), 18: (0, 3), 19: (2, 5), 22: (0, 1)}


def ready_connection(max_receive_size: int = 1 << 20) -> KafkaConnection:
    c = KafkaConnection(1, "test-client", max_receive_size=max_receive_size)
    c.start_connect(0)
    assert c.state is ConnectionState.CONNECTING
    c.connection_made(5)
    assert c.state is ConnectionState.CHECKING_API_VERSIONS
    out = b"".join(bytes(b) for b in c.data_to_send())
    api_key, version, cid, body = parse_request(out)
    assert (api_key, version) == (ApiKey.API_VERSIONS, 3)
    assert body.client_software_name == "kproducer"
    assert c.receive_data(frame_response(18, 3, cid, api_versions_response(3, BROKER)), 6) == []
    assert c.state is ConnectionState.READY
    return c


def metadata_response(version: int = 9) -> Any:
    mod = __import__(f"kio.schema.metadata.v{version}.response", fromlist=["x"])
    import datetime

    return mod.MetadataResponse(
        throttle_time=datetime.timedelta(0),
        brokers=(mod.MetadataResponseBroker(node_id=1, host="h", port=9092, rack=None),),
        cluster_id="c",
        controller_id=1,
        topics=(),
    )


def metadata_request(version: int) -> Any:
    from kproducer.network.client import build_metadata_request

    return build_metadata_request(version, ["t"], True)


def test_handshake_negotiates_highest_common_versions() -> None:
    c = ready_connection()
    assert c.api_version(ApiKey.PRODUCE) == 9
    assert c.api_version(ApiKey.METADATA) == 12
    assert c.api_version(ApiKey.CREATE_TOPICS) == 5
    assert c.api_version(ApiKey.INIT_PRODUCER_ID) == 1
    assert c.api_version(ApiKey.END_TXN) is None  # broker does not offer it


def test_api_versions_downgrade_on_unsupported_version() -> None:
    c = KafkaConnection(1, "x")
    c.start_connect(0)
    c.connection_made(0)
    _, _, cid, _ = parse_request(b"".join(bytes(b) for b in c.data_to_send()))
    # An old broker answers UNSUPPORTED_VERSION in v0 format, listing what it has.
    c.receive_data(frame_response(18, 0, cid, api_versions_response(0, {18: (0, 1), 0: (0, 2)}, error=35)), 1)
    api_key, version, cid2, _ = parse_request(b"".join(bytes(b) for b in c.data_to_send()))
    assert (api_key, version) == (18, 1)
    c.receive_data(
        frame_response(18, 1, cid2, api_versions_response(1, {18: (0, 1), 0: (0, 2), 3: (0, 5)})), 2
    )
    assert c.is_ready and c.api_version(ApiKey.PRODUCE) == 2 and c.api_version(ApiKey.METADATA) == 5


def test_responses_matched_in_order_and_split_frames() -> None:
    c = ready_connection()
    cid1 = c.send_request(metadata_request(9), 10, context="first")
    cid2 = c.send_request(metadata_request(9), 11, context="second")
    assert cid2 == cid1 + 1
    data = frame_response(3, 9, cid1, metadata_response()) + frame_response(3, 9, cid2, metadata_response())
    got = []
    for i in range(len(data)):  # one byte at a time: framing must cope
        got += c.receive_data(data[i : i + 1], 20)
    assert [r.context for r in got] == ["first", "second"]
    assert got[0].body.brokers[0].port == 9092 and got[0].send_time_ms == 10
    assert not c.in_flight


def test_unknown_correlation_id_is_dropped(caplog: pytest.LogCaptureFixture) -> None:
    c = ready_connection()
    cid = c.send_request(metadata_request(9), 0, context="ctx")
    stray = frame_response(3, 9, 999_999, metadata_response())
    out = c.receive_data(stray + frame_response(3, 9, cid, metadata_response()), 1)
    assert [r.context for r in out] == ["ctx"]
    assert "unknown correlation id 999999" in caplog.text
    assert c.is_ready


def test_acks0_request_not_in_flight_and_its_answer_dropped() -> None:
    c = ready_connection()
    req = protocol.build_produce_request(9, 0, 100, None, {})
    cid = c.send_request(req, 0, expect_response=False)
    assert not c.in_flight
    assert c.receive_data(struct.pack(">i", 6) + struct.pack(">i", cid) + b"\x00\x00", 1) == []
    assert c.is_ready


def _acks0_answer(cid: int) -> bytes:
    """What Tansu sends back to an acks=0 produce request: a frame with its correlation id."""
    return struct.pack(">i", 6) + struct.pack(">i", cid) + b"\x00\x00"


def test_answer_to_acks0_request_is_dropped_at_debug_not_warning(caplog: pytest.LogCaptureFixture) -> None:
    c = ready_connection()
    cid = c.send_request(protocol.build_produce_request(9, 0, 100, None, {}), 0, expect_response=False)
    mid = c.send_request(metadata_request(9), 0, context="after")
    with caplog.at_level(logging.DEBUG, logger="kproducer.network.connection"):
        out = c.receive_data(_acks0_answer(cid) + frame_response(3, 9, mid, metadata_response()), 1)
    assert [r.context for r in out] == ["after"]
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any(
        r.levelno == logging.DEBUG and f"acks=0 request {cid}" in r.getMessage() for r in caplog.records
    )
    # Its id is forgotten once answered: a second answer with it is unknown again.
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="kproducer.network.connection"):
        c.receive_data(_acks0_answer(cid), 2)
    assert [r.levelno for r in caplog.records] == [logging.WARNING]
    assert f"unknown correlation id {cid}" in caplog.text and c.is_ready


def test_truly_unknown_id_still_warns_among_acks0_answers(caplog: pytest.LogCaptureFixture) -> None:
    c = ready_connection()
    ids = [
        c.send_request(protocol.build_produce_request(9, 0, 100, None, {}), 0, expect_response=False)
        for _ in range(3)
    ]
    with caplog.at_level(logging.DEBUG, logger="kproducer.network.connection"):
        c.receive_data(b"".join(_acks0_answer(i) for i in ids) + _acks0_answer(777_777), 1)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "unknown correlation id 777777" in warnings[0]
    assert sum(1 for r in caplog.records if "dropping the answer to acks=0" in r.getMessage()) == 3


def test_remembered_acks0_ids_are_bounded(caplog: pytest.LogCaptureFixture) -> None:
    c = ready_connection()
    body = protocol.build_produce_request(9, 0, 100, None, {})
    ids = [c.send_request(body, 0, expect_response=False) for _ in range(NO_RESPONSE_IDS_REMEMBERED + 5)]
    assert len(c._no_response_ids) == len(c._no_response_set) == NO_RESPONSE_IDS_REMEMBERED
    with caplog.at_level(logging.DEBUG, logger="kproducer.network.connection"):
        c.receive_data(_acks0_answer(ids[0]) + _acks0_answer(ids[-1]), 1)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and f"unknown correlation id {ids[0]}" in warnings[0]
    # The answer to the newest id passed every older one: none is remembered any more.
    assert not c._no_response_ids and not c._no_response_set


def test_out_of_order_response_closes() -> None:
    c = ready_connection()
    c.send_request(metadata_request(9), 0)
    cid2 = c.send_request(metadata_request(9), 0)
    with pytest.raises(ProtocolError, match="out of order"):
        c.receive_data(frame_response(3, 9, cid2, metadata_response()), 1)
    assert c.state is ConnectionState.DISCONNECTED


@pytest.mark.parametrize("size", [-1, 0, 3, (1 << 20) + 1, 0x7FFFFFFF])
def test_bad_size_prefix_closes_with_clear_error(size: int) -> None:
    c = ready_connection()
    c.send_request(metadata_request(9), 0)
    with pytest.raises(ProtocolError, match="invalid frame size"):
        c.receive_data(struct.pack(">i", size) + b"\x00" * 8, 1)
    assert c.state is ConnectionState.DISCONNECTED and not c.in_flight


def test_send_before_ready_is_refused() -> None:
    c = KafkaConnection(1, "x")
    with pytest.raises(ProtocolError, match="not ready"):
        c.send_request(metadata_request(9), 0)


@settings(max_examples=200, deadline=None)
@given(st.binary(min_size=4, max_size=64))
def test_garbage_body_is_a_protocol_error_or_dropped(garbage: bytes) -> None:
    c = ready_connection()
    cid = c.send_request(metadata_request(9), 0)
    frame = struct.pack(">i", cid) + garbage
    try:
        out = c.receive_data(struct.pack(">i", len(frame)) + frame, 1)
    except ProtocolError as e:
        assert str(e)
        assert c.state is ConnectionState.DISCONNECTED
    else:
        # Some random bytes happen to decode; then exactly one response came back.
        assert len(out) == 1 and c.is_ready


def test_connection_states_move_only_along_the_lifecycle() -> None:
    from kproducer.errors import IllegalStateError
    from kproducer.network.connection_states import transition

    s = ConnectionState
    lifecycle = {
        (s.DISCONNECTED, s.CONNECTING),
        (s.CONNECTING, s.CHECKING_API_VERSIONS),
        (s.CHECKING_API_VERSIONS, s.AUTHENTICATING),
        (s.CHECKING_API_VERSIONS, s.READY),
        (s.AUTHENTICATING, s.READY),
        # Phases the protocol repeats: SASL round trips, a KIP-368 re-authentication, a failed attempt.
        (s.AUTHENTICATING, s.AUTHENTICATING),
        (s.READY, s.READY),
        (s.DISCONNECTED, s.DISCONNECTED),
    } | {(a, s.DISCONNECTED) for a in s}
    for a in s:
        for b in s:
            if (a, b) in lifecycle:
                assert transition(a, b, 7) is b
            else:
                with pytest.raises(IllegalStateError, match=f"node 7 cannot move from {a.value} to {b.value}"):
                    transition(a, b, 7)
    # The sans-I/O connection goes through the same function: no second ApiVersions handshake.
    c = ready_connection()
    with pytest.raises(IllegalStateError):
        c.connection_made(10)


def test_one_warning_per_outage_and_one_more_when_the_cause_becomes_a_refusal(caplog: pytest.LogCaptureFixture) -> None:
    """A TLS 1.3 listener that wants a client certificate may close before its alert is read: the
    first attempt looks like a dropped connection, the next one is refused. The operator gets the
    refusal's cause at WARNING too, once, however many attempts follow."""
    from kproducer.common.backoff import ExponentialBackoff
    from kproducer.errors import SslAuthenticationError
    from kproducer.network.connection_states import ClusterConnectionStates, NodeState

    caplog.set_level(logging.DEBUG, logger="kproducer.network")
    states = ClusterConnectionStates(ExponentialBackoff(50, 1000), ExponentialBackoff(10_000, 30_000))
    node = NodeState(node_id=-1, host="127.0.0.1", port=9093)
    failures: list[tuple[str, str]] = []

    def attempt(now: int, reason: str, error: Exception | None) -> None:
        states.connecting(node)
        node.last_attempt_ms = now
        states.disconnected(node, now + 5, reason, error, lambda address, why: failures.append((address, why)))

    def warnings() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]

    refusal = SslAuthenticationError("TLSV13_ALERT_CERTIFICATE_REQUIRED")
    attempt(0, "write failed: EOF occurred in violation of protocol", None)
    attempt(100, "TLSV13_ALERT_CERTIFICATE_REQUIRED", refusal)
    attempt(300, "TLSV13_ALERT_CERTIFICATE_REQUIRED", refusal)
    attempt(700, "write failed: EOF occurred in violation of protocol", None)
    assert len(failures) == 4
    assert warnings() == [
        "bootstrap server 127.0.0.1:9093 is unreachable: write failed: EOF occurred in violation of protocol; "
        "retrying with backoff up to 1000 ms (reconnect.backoff.max.ms)",
        "bootstrap server 127.0.0.1:9093 refused this client: TLSV13_ALERT_CERTIFICATE_REQUIRED; "
        "retrying with backoff up to 1000 ms (reconnect.backoff.max.ms)",
    ]
    assert node.unreachable_since_ms == 0  # the outage is dated from its first attempt
    # Reachable again: the next outage starts afresh, and a refusal first is warned about once.
    states.connecting(node)
    states.move(node, ConnectionState.CHECKING_API_VERSIONS)
    states.ready(node, 2000)
    assert "reachable again after 2.0 s and 4 failed connection attempts" in warnings()[-1]
    states.disconnected(node, 2100, "closed by the broker", None, lambda a, w: failures.append((a, w)))
    caplog.clear()
    attempt(2200, "TLSV13_ALERT_CERTIFICATE_REQUIRED", refusal)
    attempt(2300, "write failed: EOF occurred in violation of protocol", None)
    attempt(2400, "TLSV13_ALERT_CERTIFICATE_REQUIRED", refusal)
    assert len(warnings()) == 1 and "127.0.0.1:9093 refused this client: TLSV13_ALERT_CERTIFICATE_REQUIRED" in warnings()[0]
