"""A sans-I/O Kafka connection: bytes in, bytes out, no sockets.

It frames requests (int32 size prefix), hands out correlation ids, matches
responses to in-flight requests in order, negotiates API versions
(ApiVersions first, then the highest version both sides support) and runs the
SASL exchange (any mechanism of ``sasl``, and KIP-368 re-authentication before the
session the broker granted ends). The I/O layer (``selector``) only moves bytes; the
NetworkClient decides when to connect, time out and back off.
"""

from __future__ import annotations

import logging
import random
import struct
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kproducer._version import __version__
from kproducer.errors import AuthenticationError, KafkaError, SslAuthenticationError, error_for_code
from kproducer.network import protocol
from kproducer.network.connection_states import ConnectionState, transition
from kproducer.network.protocol import ApiKey, Buffer, ProtocolError

__all__ = [
    "AuthenticationFailed",
    "ConnectionState",
    "KafkaConnection",
    "InFlightRequest",
    "Response",
    "ProtocolError",
]

logger = logging.getLogger(__name__)

DEFAULT_MAX_RECEIVE_SIZE = 100 * 1024 * 1024
# Correlation ids of requests sent without expecting a response (acks=0) that are remembered,
# so that a broker answering them anyway (Tansu does) is not reported as unknown ids.
NO_RESPONSE_IDS_REMEMBERED = 1024
_I32 = struct.Struct(">i")


class AuthenticationFailed(ProtocolError):
    """The broker refused this client's credentials or mechanism: ``error`` is the KafkaError
    (SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM...) that waiting records end with."""

    def __init__(self, error: KafkaError) -> None:
        super().__init__(str(error))
        self.error = error


@dataclass(slots=True)
class InFlightRequest:
    correlation_id: int
    api_key: int
    api_version: int
    send_time_ms: int
    internal: bool
    context: Any = None


@dataclass(slots=True)
class Response:
    """A parsed response to a non-internal request, with what the caller attached when sending."""

    correlation_id: int
    api_key: int
    api_version: int
    body: Any
    context: Any
    send_time_ms: int
    size_bytes: int = 0  # the frame, size prefix included (metadata-response-bytes-total)


class KafkaConnection:
    """Protocol state of one broker connection (see module docstring)."""

    def __init__(
        self,
        node_id: int,
        client_id: str | None,
        *,
        max_receive_size: int = DEFAULT_MAX_RECEIVE_SIZE,
        client_versions: Mapping[ApiKey, tuple[int, int]] = protocol.CLIENT_VERSIONS,
        sasl_mechanism: str | None = None,
        sasl_username: str | None = None,
        sasl_password: str | None = None,
        authenticator_factory: Callable[[], Any] | None = None,
        rng: random.Random | None = None,
    ) -> None:
        if authenticator_factory is None and sasl_mechanism is not None:
            if sasl_mechanism != "PLAIN":
                raise ValueError(
                    f"SASL mechanism {sasl_mechanism!r} needs an authenticator_factory "
                    "(only PLAIN is built from a user name and password here)"
                )
            from kproducer.network.sasl import PlainAuthenticator

            user, password = sasl_username or "", sasl_password or ""
            authenticator_factory = lambda: PlainAuthenticator(user, password)  # noqa: E731
        self.node_id = node_id
        self.client_id = client_id
        self.max_receive_size = max_receive_size
        self.client_versions = client_versions
        self._authenticator_factory = authenticator_factory
        self._authenticator: Any = None
        self.sasl_mechanism = (
            sasl_mechanism if sasl_mechanism is not None or authenticator_factory is None
            else authenticator_factory().mechanism
        )
        self._rng = rng or random.Random()
        # KIP-368: when the current SASL session must be renewed (-1: never), and whether it is.
        self.session_expires_ms = -1
        self.reauthenticate_at_ms = -1
        self.reauthenticating = False
        self.reauth_started_ms = -1
        self.reauthentications = 0
        self.state = ConnectionState.DISCONNECTED
        self.api_versions: dict[int, int] = {}
        self.broker_api_versions: dict[int, tuple[int, int]] = {}
        self.in_flight: deque[InFlightRequest] = deque()
        # acks=0 ids in send order, and the same as a set for lookup; bounded by NO_RESPONSE_IDS_REMEMBERED.
        self._no_response_ids: deque[int] = deque()
        self._no_response_set: set[int] = set()
        self._outbound: list[Buffer] = []
        self._inbound = bytearray()
        self._next_correlation_id = 0
        self.last_activity_ms = 0
        self.error: Exception | None = None

    # ------------------------------------------------------------- lifecycle
    def start_connect(self, now: int) -> None:
        self._reset()
        self._move(ConnectionState.CONNECTING)
        self.last_activity_ms = now

    def connection_made(self, now: int) -> None:
        """The transport is up: ask for the broker's API versions before anything else."""
        self._move(ConnectionState.CHECKING_API_VERSIONS)
        self.last_activity_ms = now
        self._send_api_versions(self.client_versions[ApiKey.API_VERSIONS][1], now)

    def close(self, error: Exception | None = None) -> list[InFlightRequest]:
        """Drop all state; returns the in-flight requests that will never be answered."""
        pending = [r for r in self.in_flight if not r.internal]
        self.error = error
        self._reset()
        self._move(ConnectionState.DISCONNECTED)
        return pending

    def _move(self, target: ConnectionState) -> None:
        self.state = transition(self.state, target, self.node_id)

    def _reset(self) -> None:
        self.in_flight.clear()
        self._no_response_ids.clear()
        self._no_response_set.clear()
        self._outbound = []
        self._inbound = bytearray()
        self.api_versions = {}
        self.broker_api_versions = {}
        self._authenticator = None
        self.session_expires_ms = -1
        self.reauthenticate_at_ms = -1
        self.reauthenticating = False

    @property
    def inbound_bytes(self) -> int:
        """Bytes received but not yet a whole frame (0 on a fresh or reset connection)."""
        return len(self._inbound)

    @property
    def is_ready(self) -> bool:
        """Ready for requests from outside: connected, authenticated, and not re-authenticating."""
        return self.state is ConnectionState.READY and not self.reauthenticating

    def maybe_begin_reauthentication(self, now: int) -> bool:
        """KIP-368: start a new SASL exchange on this connection when its session is due.

        Requests already in flight are answered first (a connection's answers come in order), and
        nothing new is sent until the exchange ends, so no batch is lost or reordered by it.
        """
        if (
            self.state is not ConnectionState.READY
            or self.reauthenticating
            or self.reauthenticate_at_ms < 0
            or now < self.reauthenticate_at_ms
        ):
            return False
        logger.debug("node %s: re-authenticating (KIP-368) before the session ends", self.node_id)
        self.reauthenticating = True
        self.reauth_started_ms = now
        self.reauthenticate_at_ms = -1
        self._send_sasl_handshake(now)
        return True

    # ------------------------------------------------------------- sending
    def _correlation_id(self) -> int:
        cid = self._next_correlation_id
        self._next_correlation_id = (cid + 1) & 0x7FFFFFFF
        return cid

    def send_request(
        self,
        body: Any,
        now: int,
        *,
        expect_response: bool = True,
        context: Any = None,
        internal: bool = False,
    ) -> int:
        """Queue one request; returns its correlation id. The version is the body's own."""
        api_key = (
            int(body.api_key) if isinstance(body, protocol.ProduceRequestData) else int(body.__api_key__)
        )
        version = protocol.body_version(api_key, body)
        if not internal and (self.state is not ConnectionState.READY or self.reauthenticating):
            raise ProtocolError(
                f"node {self.node_id} is "
                f"{'re-authenticating' if self.reauthenticating else self.state.value}, "
                f"not ready to send {ApiKey(api_key).name}"
            )
        cid = self._correlation_id()
        self._outbound.extend(protocol.encode_request(api_key, version, cid, self.client_id, body))
        if expect_response:
            self.in_flight.append(InFlightRequest(cid, api_key, version, now, internal, context))
        else:
            self._remember_no_response(cid)
        self.last_activity_ms = now
        return cid

    def _remember_no_response(self, cid: int) -> None:
        ids = self._no_response_ids
        if len(ids) >= NO_RESPONSE_IDS_REMEMBERED:
            self._no_response_set.discard(ids.popleft())
        ids.append(cid)
        self._no_response_set.add(cid)

    def _forget_no_response_up_to(self, cid: int) -> None:
        """Forget ``cid`` and the acks=0 ids sent before it: answers come in order, so theirs have passed."""
        ids, seen = self._no_response_ids, self._no_response_set
        while ids:
            old = ids.popleft()
            seen.discard(old)
            if old == cid:
                return

    def data_to_send(self) -> list[Buffer]:
        """Everything queued since the last call, in order (the caller writes it all)."""
        out, self._outbound = self._outbound, []
        return out

    def api_version(self, api_key: int) -> int | None:
        """The negotiated version of ``api_key``, or None when the broker and we share none."""
        return self.api_versions.get(int(api_key))

    # ------------------------------------------------------------- receiving
    def receive_data(self, data: Buffer, now: int) -> list[Response]:
        """Feed bytes from the socket; returns the complete responses for the caller.

        Raises ProtocolError on a bad frame; the connection is then closed and
        the caller must fail its in-flight requests.
        """
        self._inbound += data
        self.last_activity_ms = now
        out: list[Response] = []
        buf = self._inbound
        pos = 0
        try:
            while len(buf) - pos >= 4:
                (size,) = _I32.unpack_from(buf, pos)
                if size < 4 or size > self.max_receive_size:
                    if buf[pos] in (0x15, 0x16) and buf[pos + 1] == 0x03:
                        # A TLS record (alert or handshake) where a Kafka frame should be.
                        raise AuthenticationFailed(
                            SslAuthenticationError(
                                f"node {self.node_id} answered with TLS: its listener expects TLS, but "
                                "security.protocol is PLAINTEXT or SASL_PLAINTEXT (use SSL or SASL_SSL)"
                            )
                        )
                    raise ProtocolError(
                        f"invalid frame size {size} from node {self.node_id} "
                        f"(must be 4..{self.max_receive_size}); closing the connection"
                    )
                if len(buf) - pos - 4 < size:
                    break
                whole = memoryview(buf)
                frame = whole[pos + 4 : pos + 4 + size].toreadonly()
                try:
                    resp = self._handle_frame(frame, now)
                finally:
                    frame.release()
                    whole.release()
                pos += 4 + size
                if resp is not None:
                    out.append(resp)
        except ProtocolError as e:
            self.close(e)
            raise
        if pos:
            del buf[:pos]
        return out

    def _handle_frame(self, frame: memoryview, now: int) -> Response | None:
        (cid,) = _I32.unpack_from(frame, 0)
        head = self.in_flight[0] if self.in_flight else None
        if head is None or head.correlation_id != cid:
            if any(r.correlation_id == cid for r in self.in_flight):
                raise ProtocolError(
                    f"node {self.node_id} answered correlation id {cid} before "
                    f"{head.correlation_id if head else None}: responses out of order"
                )
            if cid in self._no_response_set:
                # A broker that answers acks=0 requests anyway (Tansu): expected, not worth a warning.
                self._forget_no_response_up_to(cid)
                logger.debug(
                    "node %s: dropping the answer to acks=0 request %s (%d bytes)",
                    self.node_id,
                    cid,
                    len(frame),
                )
                return None
            logger.warning(
                "node %s: dropping a response with unknown correlation id %s (%d bytes)",
                self.node_id,
                cid,
                len(frame),
            )
            return None
        self.in_flight.popleft()
        _, body_offset = protocol.decode_response_header(
            protocol.response_header_version(head.api_key, head.api_version), frame
        )
        body = protocol.decode_response(head.api_key, head.api_version, frame, body_offset)
        if head.internal:
            self._handle_internal(head, body, now)
            return None
        return Response(
            cid, head.api_key, head.api_version, body, head.context, head.send_time_ms, len(frame) + 4
        )

    # ------------------------------------------------------------- handshake
    def _send_api_versions(self, version: int, now: int) -> None:
        cls = protocol.request_class(ApiKey.API_VERSIONS, version)
        if version >= 3:
            body = cls(client_software_name="kproducer", client_software_version=__version__)
        else:
            body = cls()
        self.send_request(body, now, internal=True)

    def _handle_internal(self, head: Any, body: Any, now: int) -> None:
        if head.api_key == ApiKey.API_VERSIONS:
            code = int(body.error_code)
            broker = protocol.api_version_entries(body)
            if code == 35:
                theirs = broker.get(ApiKey.API_VERSIONS, (0, 0))[1]
                retry = min(theirs, head.api_version - 1)
                if retry < 0:
                    raise ProtocolError(f"node {self.node_id} supports no ApiVersions version")
                logger.debug("node %s: retrying ApiVersions at v%d", self.node_id, retry)
                self._send_api_versions(retry, now)
                return
            if code != 0:
                raise ProtocolError(f"node {self.node_id}: ApiVersions failed with error {code}")
            self.broker_api_versions = broker
            self.api_versions = protocol.negotiate(broker, self.client_versions)
            logger.debug("node %s: negotiated %s", self.node_id, self.api_versions)
            if self._authenticator_factory is None:
                self._move(ConnectionState.READY)
                return
            if (
                ApiKey.SASL_HANDSHAKE not in self.api_versions
                or ApiKey.SASL_AUTHENTICATE not in self.api_versions
            ):
                raise ProtocolError(
                    f"node {self.node_id} does not support SaslHandshake v1 / SaslAuthenticate"
                )
            self._move(ConnectionState.AUTHENTICATING)
            self._send_sasl_handshake(now)
        elif head.api_key == ApiKey.SASL_HANDSHAKE:
            code = int(body.error_code)
            if code == 33:  # UNSUPPORTED_SASL_MECHANISM
                raise AuthenticationFailed(
                    error_for_code(
                        code,
                        f"node {self.node_id} rejected SASL mechanism {self.sasl_mechanism}; "
                        f"the broker enables {', '.join(body.mechanisms) or 'none'}",
                    )
                )
            if code != 0:
                raise AuthenticationFailed(
                    error_for_code(
                        code,
                        f"node {self.node_id}: SaslHandshake for {self.sasl_mechanism} failed",
                    )
                )
            try:
                self._authenticator = self._authenticator_factory()  # type: ignore[misc]
                token = self._authenticator.first_message()
            except AuthenticationError as e:
                raise AuthenticationFailed(
                    type(e)(f"node {self.node_id}: {self.sasl_mechanism}: {e.message}")
                ) from e
            self._send_sasl_authenticate(token, now)
        elif head.api_key == ApiKey.SASL_AUTHENTICATE:
            code = int(body.error_code)
            auth = self._authenticator
            if code != 0:
                detail = auth.failure_detail() if auth is not None else ""
                raise AuthenticationFailed(
                    error_for_code(
                        code,
                        f"node {self.node_id}: SASL {self.sasl_mechanism} authentication failed: "
                        f"{body.error_message or 'no message from the broker'}"
                        + (f" (broker said: {detail})" if detail else ""),
                    )
                )
            try:
                reply = auth.evaluate(bytes(body.auth_bytes or b""))
            except AuthenticationError as e:
                raise AuthenticationFailed(type(e)(f"node {self.node_id}: {e.message}")) from e
            if reply is not None:
                self._send_sasl_authenticate(reply, now)
                return
            lifetime = getattr(body, "session_lifetime", None)
            lifetime_ms = int(lifetime.total_seconds() * 1000) if lifetime is not None else 0
            if lifetime_ms > 0:
                # As Java's client: renew at a random point in 85-95% of the session, so that many
                # clients do not all come back at once.
                self.session_expires_ms = now + lifetime_ms
                self.reauthenticate_at_ms = now + int(lifetime_ms * self._rng.uniform(0.85, 0.95))
            else:
                self.session_expires_ms = self.reauthenticate_at_ms = -1
            if self.reauthenticating:
                self.reauthenticating = False
                self.reauthentications += 1
                logger.debug("node %s: re-authenticated; next session ends in %d ms", self.node_id, lifetime_ms)
            self._authenticator = None
            self._move(ConnectionState.READY)

    def _send_sasl_handshake(self, now: int) -> None:
        hs = protocol.request_class(ApiKey.SASL_HANDSHAKE, 1)(mechanism=self.sasl_mechanism)
        self.send_request(hs, now, internal=True)

    def _send_sasl_authenticate(self, token: bytes, now: int) -> None:
        v = self.api_versions[ApiKey.SASL_AUTHENTICATE]
        self.send_request(
            protocol.request_class(ApiKey.SASL_AUTHENTICATE, v)(auth_bytes=token), now, internal=True
        )
