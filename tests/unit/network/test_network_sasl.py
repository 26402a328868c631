"""SASL/PLAIN on the sans-I/O KafkaConnection: bytes in, bytes out, a clock passed in, no sockets.

checking_api_versions → authenticating (SaslHandshake v1, then SaslAuthenticate) → ready, and the
two ways a broker refuses: PLAIN not enabled, and wrong credentials.
"""

from __future__ import annotations

import datetime
import struct
from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from kproducer.network import protocol
from kproducer.network.connection import ConnectionState, KafkaConnection
from kproducer.network.protocol import ApiKey, ProtocolError
from tests.support.wire import api_versions_response, frame_response, parse_request

UNSUPPORTED_SASL_MECHANISM = 33
SASL_AUTHENTICATION_FAILED = 58


def _broker_versions(sasl_authenticate_max: int = 2) -> dict[int, tuple[int, int]]:
    return {
        ApiKey.PRODUCE: (0, 9),
        ApiKey.METADATA: (0, 12),
        ApiKey.API_VERSIONS: (0, 3),
        ApiKey.SASL_HANDSHAKE: (0, 1),
        ApiKey.SASL_AUTHENTICATE: (0, sasl_authenticate_max),
    }


def _sent(conn: KafkaConnection) -> tuple[int, int, int, Any]:
    """The one request the connection queued since the last call."""
    blob = b"".join(bytes(b) for b in conn.data_to_send())
    (size,) = struct.unpack_from(">i", blob, 0)
    assert size == len(blob) - 4, "expected exactly one request frame"
    return parse_request(blob)


def _authenticating(
    user: str = "alice", password: str = "s3cret", sasl_authenticate_max: int = 2
) -> tuple[KafkaConnection, int]:
    """A connection that has sent SaslHandshake; returns it and the handshake's correlation id."""
    conn = KafkaConnection(
        7, "sasl-client", sasl_mechanism="PLAIN", sasl_username=user, sasl_password=password
    )
    conn.start_connect(100)
    conn.connection_made(110)
    api_key, version, cid, _ = _sent(conn)
    assert (api_key, version, conn.state) == (ApiKey.API_VERSIONS, 3, ConnectionState.CHECKING_API_VERSIONS)
    answer = api_versions_response(3, _broker_versions(sasl_authenticate_max))
    assert conn.receive_data(frame_response(ApiKey.API_VERSIONS, 3, cid, answer), 120) == []
    assert conn.state is ConnectionState.AUTHENTICATING
    api_key, version, cid, body = _sent(conn)
    assert (api_key, version, body.mechanism) == (ApiKey.SASL_HANDSHAKE, 1, "PLAIN")
    return conn, cid


def _handshake_response(error: int, mechanisms: tuple[str, ...]) -> Any:
    return protocol.response_class(ApiKey.SASL_HANDSHAKE, 1)(
        error_code=ErrorCode(error), mechanisms=mechanisms
    )


def _authenticate_response(version: int, error: int, message: str | None) -> Any:
    cls = protocol.response_class(ApiKey.SASL_AUTHENTICATE, version)
    kw: dict[str, Any] = {"error_code": ErrorCode(error), "error_message": message, "auth_bytes": b""}
    if version >= 1:
        kw["session_lifetime"] = datetime.timedelta(0)
    return cls(**kw)


@pytest.mark.parametrize("sasl_authenticate_max", [0, 1, 2])
def test_plain_handshake_then_authenticate_then_ready(sasl_authenticate_max: int) -> None:
    conn, cid = _authenticating("alice", "s3cret", sasl_authenticate_max)
    assert conn.api_version(ApiKey.SASL_AUTHENTICATE) == sasl_authenticate_max
    # Nothing from outside goes out while authenticating.
    metadata = protocol.request_class(ApiKey.METADATA, 9)(
        topics=(),
        allow_auto_topic_creation=False,
        include_cluster_authorized_operations=False,
        include_topic_authorized_operations=False,
    )
    with pytest.raises(ProtocolError, match="authenticating, not ready"):
        conn.send_request(metadata, 125)

    handshake = _handshake_response(0, ("SCRAM-SHA-512", "PLAIN"))
    assert conn.receive_data(frame_response(ApiKey.SASL_HANDSHAKE, 1, cid, handshake), 130) == []
    assert conn.state is ConnectionState.AUTHENTICATING
    api_key, version, cid, body = _sent(conn)
    assert (api_key, version) == (ApiKey.SASL_AUTHENTICATE, sasl_authenticate_max)
    # RFC 4616: [authzid] NUL authcid NUL passwd, with no authorization identity.
    assert body.auth_bytes == b"\x00alice\x00s3cret"

    ok = _authenticate_response(sasl_authenticate_max, 0, None)
    frame = frame_response(ApiKey.SASL_AUTHENTICATE, sasl_authenticate_max, cid, ok)
    assert conn.receive_data(frame, 140) == []  # internal: nothing for the caller
    assert conn.state is ConnectionState.READY and conn.is_ready
    assert not conn.in_flight and conn.error is None
    assert conn.last_activity_ms == 140
    cid = conn.send_request(metadata, 150)
    assert _sent(conn)[:3] == (ApiKey.METADATA, 9, cid)


def test_plain_token_is_utf8() -> None:
    conn, cid = _authenticating("jürgen", "pässwörd")
    conn.receive_data(frame_response(ApiKey.SASL_HANDSHAKE, 1, cid, _handshake_response(0, ("PLAIN",))), 130)
    assert _sent(conn)[3].auth_bytes == b"\x00" + "jürgen".encode() + b"\x00" + "pässwörd".encode()


def test_broker_without_plain_fails_naming_the_mechanisms_it_offers() -> None:
    conn, cid = _authenticating()
    refusal = _handshake_response(UNSUPPORTED_SASL_MECHANISM, ("SCRAM-SHA-256", "GSSAPI"))
    with pytest.raises(ProtocolError) as ei:
        conn.receive_data(frame_response(ApiKey.SASL_HANDSHAKE, 1, cid, refusal), 130)
    message = str(ei.value)
    assert "node 7" in message and "PLAIN" in message
    assert "SCRAM-SHA-256" in message and "GSSAPI" in message
    assert conn.state is ConnectionState.DISCONNECTED and conn.error is ei.value
    assert conn.data_to_send() == [], "no SaslAuthenticate may follow a refused handshake"


def test_failed_authentication_surfaces_the_broker_message() -> None:
    conn, cid = _authenticating("alice", "wrong")
    conn.receive_data(frame_response(ApiKey.SASL_HANDSHAKE, 1, cid, _handshake_response(0, ("PLAIN",))), 130)
    _, version, cid, body = _sent(conn)
    assert body.auth_bytes == b"\x00alice\x00wrong"
    broker_message = "Authentication failed: Invalid username or password"
    failed = _authenticate_response(version, SASL_AUTHENTICATION_FAILED, broker_message)
    expected = r"SASL PLAIN authentication failed: " + broker_message + r" \(error 58 SASL_AUTHENTICATION_FAILED\)"
    with pytest.raises(ProtocolError, match=expected) as ei:
        conn.receive_data(frame_response(ApiKey.SASL_AUTHENTICATE, version, cid, failed), 140)
    assert "node 7" in str(ei.value)
    assert conn.state is ConnectionState.DISCONNECTED and conn.error is ei.value
    assert not conn.is_ready and not conn.in_flight


def test_broker_without_sasl_apis_fails_before_authenticating() -> None:
    conn = KafkaConnection(7, "sasl-client", sasl_mechanism="PLAIN", sasl_username="a", sasl_password="b")
    conn.start_connect(0)
    conn.connection_made(1)
    cid = _sent(conn)[2]
    no_sasl = {k: r for k, r in _broker_versions().items() if k != ApiKey.SASL_HANDSHAKE}
    with pytest.raises(ProtocolError, match="does not support SaslHandshake"):
        conn.receive_data(frame_response(ApiKey.API_VERSIONS, 3, cid, api_versions_response(3, no_sasl)), 2)
    assert conn.state is ConnectionState.DISCONNECTED


def test_other_mechanisms_need_an_authenticator() -> None:
    with pytest.raises(ValueError, match="'SCRAM-SHA-256' needs an authenticator_factory"):
        KafkaConnection(1, None, sasl_mechanism="SCRAM-SHA-256")


def test_handshake_answer_split_across_reads_is_reassembled() -> None:
    conn, cid = _authenticating()
    frame = frame_response(ApiKey.SASL_HANDSHAKE, 1, cid, _handshake_response(0, ("PLAIN",)))
    for i in range(len(frame) - 1):
        assert conn.receive_data(frame[i : i + 1], 130 + i) == []
        assert conn.state is ConnectionState.AUTHENTICATING and conn.data_to_send() == []
    conn.receive_data(frame[-1:], 200)
    assert _sent(conn)[0] == ApiKey.SASL_AUTHENTICATE


def test_handshake_error_other_than_unsupported_mechanism_is_named() -> None:
    """ILLEGAL_SASL_STATE (34) is not a refused mechanism: the error says which error it is."""
    conn, cid = _authenticating()
    answer = _handshake_response(34, ("PLAIN",))
    with pytest.raises(ProtocolError, match=r"SaslHandshake for PLAIN failed \(error 34 ILLEGAL_SASL_STATE\)"):
        conn.receive_data(frame_response(ApiKey.SASL_HANDSHAKE, 1, cid, answer), 130)
    assert conn.state is ConnectionState.DISCONNECTED
