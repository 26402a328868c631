"""NetworkClient against a scripted loopback broker: bad frames name their fault, stray frames are dropped.

The garbage test checks that the recorded reason names the fault the bytes contain (and that the
same client then connects to a healthy broker); the unsolicited-response test follows the stray
frame with a valid answer and checks that the connection reaches READY and serves a Metadata request.
"""

from __future__ import annotations

import logging
import re
import struct
import time
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kproducer.network.client import NetworkClient
from kproducer.network.protocol import ApiKey
from tests.support.fake_broker import FakeRequest, Reply, Script, ScriptedBroker
from tests.support.kio_responses import metadata_response
from tests.support.wire import api_versions_response, frame_response

MAX_RECEIVE = 100 * 1024 * 1024  # NetworkClient's default max_receive_size
BROKER_VERSIONS = {ApiKey.API_VERSIONS: (0, 3), ApiKey.METADATA: (0, 9), ApiKey.PRODUCE: (0, 9)}
BOOTSTRAP_NODE = -1


def _api_versions_answer(cid: int) -> bytes:
    return frame_response(ApiKey.API_VERSIONS, 3, cid, api_versions_response(3, BROKER_VERSIONS))


def _metadata_answer(cid: int, port: int) -> bytes:
    body = metadata_response(9, [(1, "127.0.0.1", port)], {"t": (0, [(0, 1, 0, (1,))])})
    return frame_response(ApiKey.METADATA, 9, cid, body)


def healthy(port: int, stray_before: int | None = None) -> Script:
    """A broker answering ApiVersions and Metadata; ``stray_before`` (an api key) gets a stray frame first."""

    def script(req: FakeRequest) -> Reply:
        stray = struct.pack(">ii", 8, req.correlation_id + 12345) + b"\x00" * 4
        if req.api_key == ApiKey.API_VERSIONS:
            answer = _api_versions_answer(req.correlation_id)
        elif req.api_key == ApiKey.METADATA:
            answer = _metadata_answer(req.correlation_id, port)
        else:
            return Reply(close=True)
        return Reply((stray if req.api_key == stray_before else b"") + answer)

    return script


@pytest.fixture(scope="module")
def broker() -> Iterator[ScriptedBroker]:
    b = ScriptedBroker(lambda req: Reply(close=True))
    try:
        yield b
    finally:
        b.close()


def _client(broker: ScriptedBroker) -> NetworkClient:
    return NetworkClient(
        bootstrap_servers=broker.bootstrap,
        reconnect_backoff_ms=10,
        reconnect_backoff_max_ms=20,
        socket_connection_setup_timeout_ms=2000,
        socket_connection_setup_timeout_max_ms=2000,
    )


def _first_failure(c: NetworkClient, address: str, timeout_s: float = 3.0) -> str:
    """Poll until the client records why ``address`` failed; that reason."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        c.poll(20, c._clock())
        reason = c.metadata.tried_addresses.get(address)
        if reason:
            return reason
    raise AssertionError(f"no failure recorded for {address} within {timeout_s} s")


def _expected_reason(payload: bytes) -> str:
    """The fault in a payload that holds no complete frame, as the client must name it."""
    if len(payload) >= 4:
        (size,) = struct.unpack_from(">i", payload, 0)
        if not 4 <= size <= MAX_RECEIVE:
            return rf"invalid frame size {size} from node -1 \(must be 4\.\.{MAX_RECEIVE}\)"
    return "connection closed by the broker"  # a frame cut short (or no full size prefix) and then EOF


def _no_complete_frame(payload: bytes) -> bool:
    return len(payload) < 4 or not 4 <= struct.unpack_from(">i", payload, 0)[0] <= len(payload) - 4


# Answers to ApiVersions that hold no complete frame; _expected_reason says what each must be called.
BAD_PAYLOADS = st.one_of(
    st.binary(min_size=1, max_size=200).filter(_no_complete_frame),  # garbage
    st.integers(MAX_RECEIVE + 1, 2**31 - 1).map(lambda n: struct.pack(">i", n)),  # huge length prefix
    st.integers(-(2**31), 3).map(lambda n: struct.pack(">i", n) + b"xxxx"),  # negative or too short
    st.tuples(st.integers(10, 1000), st.integers(0, 9)).map(  # truncated: n announced, fewer sent
        lambda t: struct.pack(">ii", t[0], 0) + b"\x00" * min(t[1], t[0] - 5)
    ),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(payload=BAD_PAYLOADS)
def test_bad_frame_names_its_fault_and_the_client_recovers(broker: ScriptedBroker, payload: bytes) -> None:
    broker.script = lambda req: Reply(payload, close=True)
    c = _client(broker)
    try:
        reason = _first_failure(c, broker.bootstrap)
        assert re.search(_expected_reason(payload), reason), (payload, reason)
        assert not c.is_ready(BOOTSTRAP_NODE)
        # Still alive: the same client connects once the broker behaves.
        broker.script = healthy(broker.port)
        assert c.await_ready(BOOTSTRAP_NODE, 3000), c.metadata.tried_addresses
    finally:
        c.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(1, 40))
def test_undecodable_answer_to_api_versions_names_the_api(broker: ScriptedBroker, cut: int) -> None:
    # A frame the right size for its contents, addressed to the request, but the body is cut short.
    def script(req: FakeRequest) -> Reply:
        whole = _api_versions_answer(req.correlation_id)[4:]
        body = whole[: max(4, len(whole) - cut)]
        return Reply(struct.pack(">i", len(body)) + body, close=True)

    broker.script = script
    c = _client(broker)
    try:
        reason = _first_failure(c, broker.bootstrap)
        assert "cannot decode API_VERSIONS v3 response" in reason, reason
        broker.script = healthy(broker.port)
        assert c.await_ready(BOOTSTRAP_NODE, 3000), c.metadata.tried_addresses
    finally:
        c.close()


@pytest.mark.parametrize("stray_before", [ApiKey.API_VERSIONS, ApiKey.METADATA], ids=lambda k: k.name)
def test_unsolicited_response_is_dropped_and_the_connection_serves_on(
    broker: ScriptedBroker, stray_before: int, caplog: pytest.LogCaptureFixture
) -> None:
    broker.script = healthy(broker.port, stray_before=stray_before)
    connections_before = broker.connections
    c = _client(broker)
    try:
        with caplog.at_level(logging.WARNING, logger="kproducer.network.connection"):
            assert c.await_ready(BOOTSTRAP_NODE, 3000), c.metadata.tried_addresses
            c.fetch_metadata(["t"], 3000)
        assert c.is_ready(BOOTSTRAP_NODE)
        assert c.metadata.cluster.partition_count("t") == 1
        assert broker.connections == connections_before + 1, "the stray frame must not cost a reconnect"
        assert broker.bootstrap not in c.metadata.tried_addresses
        dropped = [r.getMessage() for r in caplog.records if "unknown correlation id" in r.getMessage()]
        assert len(dropped) == 1 and "(8 bytes)" in dropped[0], dropped
    finally:
        c.close()
