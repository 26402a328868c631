"""NetworkClient: connection management, in-flight tracking and metadata refresh.

Modelled on the Java client's NetworkClient + ClusterConnectionStates +
InFlightRequests + DefaultMetadataUpdater. One thread (the Sender's) owns it;
only ``wakeup()`` may be called from other threads. Callbacks fire inside
``poll`` on the owning thread.
"""

from __future__ import annotations

import itertools
import logging
import math
import random
import socket
import ssl
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kproducer.errors import (
    AuthenticationError,
    ConfigError,
    IllegalStateError,
    KafkaTimeoutError,
    NetworkError,
    SslAuthenticationError,
)
from kproducer.metadata import Metadata
from kproducer.network import protocol
from kproducer.network.connection import AuthenticationFailed, ConnectionState, KafkaConnection, ProtocolError
from kproducer.network.protocol import ApiKey
from kproducer.network.selector import Selector
from kproducer.structs import Node

__all__ = [
    "NetworkClient",
    "ClientRequest",
    "ClientResponse",
    "ExponentialBackoff",
    "parse_bootstrap_servers",
    "security_options",
]

logger = logging.getLogger(__name__)

# A TLS handshake without an answer for this long gets a plaintext ApiVersions probe of its port (a
# TLS broker answers a ClientHello in milliseconds; a plaintext one may wait for the "request" the
# ClientHello's bytes announce). See NetworkClient._maybe_probe_plaintext.
_PLAIN_PROBE_AFTER_MS = 1000


def monotonic_ms() -> int:
    return int(time.monotonic() * 1000)


class ExponentialBackoff:
    """initial * 2**attempts, capped at max, times a uniform jitter factor (Java's ExponentialBackoff)."""

    def __init__(
        self, initial_ms: int, max_ms: int, jitter: float = 0.2, rng: random.Random | None = None
    ) -> None:
        self.initial_ms = initial_ms
        self.max_ms = max(max_ms, initial_ms)
        self.jitter = jitter
        self._rng = rng or random.Random()
        self._exp_max = (
            math.log(self.max_ms / initial_ms, 2) if initial_ms > 0 and self.max_ms > initial_ms else 0.0
        )

    def backoff(self, attempts: int) -> int:
        if self._exp_max == 0:
            term = float(self.initial_ms)
        else:
            term = self.initial_ms * 2 ** min(float(attempts), self._exp_max)
        factor = self._rng.uniform(1 - self.jitter, 1 + self.jitter) if self.jitter > 0 else 1.0
        return int(term * factor)


def parse_bootstrap_servers(servers: str | Iterable[str]) -> list[tuple[str, int]]:
    """Parse ``host:port`` / ``[v6]:port`` / ``PLAINTEXT://host:port`` entries; ConfigError names a bad one."""
    entries = (
        [s.strip() for s in servers.split(",")] if isinstance(servers, str) else [s.strip() for s in servers]
    )
    entries = [e for e in entries if e]
    if not entries:
        raise ConfigError("bootstrap.servers is empty: give at least one host:port")
    out = []
    for entry in entries:
        raw = entry.split("://", 1)[1] if "://" in entry else entry
        if raw.startswith("["):
            host, sep, rest = raw[1:].partition("]")
            port_s = rest[1:] if rest.startswith(":") else ""
            ok = bool(sep) and bool(host)
        else:
            host, _, port_s = raw.rpartition(":")
            ok = bool(host) and ":" not in host
        if not ok or not port_s.isdigit() or not 0 < int(port_s) < 65536:
            raise ConfigError(f"bootstrap.servers entry {entry!r} is not a valid host:port")
        out.append((host, int(port_s)))
    return out


def _describe_node(st: _NodeState) -> str:
    """``broker 1 (10.0.0.5:9092)`` or, before metadata named it, ``bootstrap server kafka:9092 (10.0.0.5:9092)``."""
    address = st.current_address or f"{st.host}:{st.port}"
    if st.node_id < 0:
        name = f"{st.host}:{st.port}" if st.host else address
        return f"bootstrap server {name}" + (f" ({address})" if address != name else "")
    return f"broker {st.node_id} ({address})"


def security_options(cfg: Any) -> dict[str, Any]:
    """NetworkClient keywords for a ProducerConfig's security.protocol: the SSLContext (built once,
    reading every certificate and key file now) and the SASL settings."""
    protocol_name = cfg.security_protocol
    out: dict[str, Any] = {}
    if protocol_name in ("SSL", "SASL_SSL"):
        from kproducer.network.tls import build_ssl_context

        out["ssl_context"] = build_ssl_context(cfg)
    if protocol_name in ("SASL_PLAINTEXT", "SASL_SSL"):
        from kproducer.network.sasl import resolve_sasl_settings

        out["sasl"] = resolve_sasl_settings(cfg.as_dict(), mechanism_explicit=cfg.explicitly_set("sasl.mechanism"))
    return out


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _lookup(host: str, port: int) -> list[tuple[int, tuple[str, int]]]:
    """Every (family, (ip, port)) the name resolves to, in resolver order, without repeats."""
    out: list[tuple[int, tuple[str, int]]] = []
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except UnicodeError as e:  # a label the IDNA codec refuses: as unresolvable as any other
        raise socket.gaierror(f"{host}: {e}") from e
    for family, _t, _p, _canon, sockaddr in infos:
        entry = (int(family), (str(sockaddr[0]), int(sockaddr[1])))
        if entry not in out:
            out.append(entry)
    if not out:
        raise socket.gaierror(f"{host} resolves to no address")
    return out


def _canonical_host_name(ip: str) -> str:
    """The name a reverse lookup gives for ``ip``, or the IP itself (Java's getCanonicalHostName)."""
    try:
        return socket.gethostbyaddr(ip)[0] or ip
    except OSError:
        return ip


@dataclass(slots=True, eq=False)
class ClientRequest:
    """A request for one node. ``request`` is a body, or a builder given the negotiated version."""

    node_id: int
    api_key: int
    request: Any
    expect_response: bool = True
    callback: Callable[[ClientResponse], None] | None = None
    created_ms: int = 0
    request_timeout_ms: int | None = None
    correlation_id: int = -1
    api_version: int = -1
    send_ms: int = 0


@dataclass(slots=True, eq=False)
class ClientResponse:
    request: ClientRequest
    response: Any = None
    received_ms: int = 0
    disconnected: bool = False
    timed_out: bool = False
    error: Exception | None = None
    latency_ms: int = 0

    @property
    def node_id(self) -> int:
        return self.request.node_id

    @property
    def api_key(self) -> int:
        return self.request.api_key


@dataclass(slots=True)
class _NodeState:
    node_id: int
    # Resolved (family, sockaddr) pairs, used in turn; emptied once used up, so resolved again.
    addresses: list[tuple[int, tuple[str, int]]] = field(default_factory=list)
    address_index: int = 0
    host: str = ""
    port: int = 0
    conn: KafkaConnection | None = None
    state: ConnectionState = ConnectionState.DISCONNECTED
    failed_attempts: int = 0
    last_attempt_ms: int = -1
    reconnect_backoff_ms: int = 0
    setup_timeout_ms: int = 0
    current_address: str = ""
    last_address: tuple[int, tuple[str, int]] | None = None
    # Since when every connection attempt has failed (-1: reachable, or not tried yet); an operator
    # gets one WARNING when this starts and one when it ends, not one per attempt.
    unreachable_since_ms: int = -1


class NetworkClient:
    """Java-style NetworkClient over the sans-I/O KafkaConnection and the Selector."""

    def __init__(
        self,
        *,
        bootstrap_servers: str | Iterable[str],
        client_id: str = "kproducer",
        metadata: Metadata | None = None,
        request_timeout_ms: int = 30_000,
        reconnect_backoff_ms: int = 50,
        reconnect_backoff_max_ms: int = 1000,
        socket_connection_setup_timeout_ms: int = 10_000,
        socket_connection_setup_timeout_max_ms: int = 30_000,
        connections_max_idle_ms: int = 540_000,
        max_in_flight_requests_per_connection: int = 5,
        send_buffer_bytes: int = 131072,
        receive_buffer_bytes: int = 32768,
        client_dns_lookup: str = "use_all_dns_ips",
        max_receive_size: int = 100 * 1024 * 1024,
        sasl_mechanism: str | None = None,
        sasl_username: str | None = None,
        sasl_password: str | None = None,
        sasl: Any = None,
        ssl_context: ssl.SSLContext | None = None,
        clock_ms: Callable[[], int] = monotonic_ms,
        rng: random.Random | None = None,
        bootstrap_warning_ms: int | None = None,
    ) -> None:
        """``ssl_context`` turns on TLS (security.protocol SSL / SASL_SSL); ``sasl`` is a
        ``sasl.SaslSettings`` (any mechanism), or ``sasl_mechanism``/``sasl_username``/
        ``sasl_password`` give PLAIN credentials directly."""
        if client_dns_lookup not in ("use_all_dns_ips", "resolve_canonical_bootstrap_servers_only"):
            raise ConfigError(
                f"client.dns.lookup {client_dns_lookup!r} is not one of use_all_dns_ips, "
                "resolve_canonical_bootstrap_servers_only"
            )
        if max_in_flight_requests_per_connection < 1:
            raise ConfigError("max.in.flight.requests.per.connection must be at least 1")
        self.client_id = client_id
        self.metadata = metadata if metadata is not None else Metadata()
        self.request_timeout_ms = request_timeout_ms
        self.connections_max_idle_ms = connections_max_idle_ms
        self.max_in_flight = max_in_flight_requests_per_connection
        self.max_receive_size = max_receive_size
        self.client_dns_lookup = client_dns_lookup
        self._sasl = (sasl_mechanism, sasl_username, sasl_password)
        self._sasl_settings = sasl
        self._ssl_context = ssl_context
        self._rng = rng
        self._clock = clock_ms
        self._reconnect = ExponentialBackoff(reconnect_backoff_ms, reconnect_backoff_max_ms, 0.2, rng)
        self._setup_timeout = ExponentialBackoff(
            socket_connection_setup_timeout_ms, socket_connection_setup_timeout_max_ms, 0.2, rng
        )
        self._selector = Selector(
            send_buffer_bytes=send_buffer_bytes, receive_buffer_bytes=receive_buffer_bytes
        )
        self._nodes: dict[int, _NodeState] = {}
        # Bumped on every connection state change; keys the cached max_usable_produce_magic().
        self._states_version = 0
        self._magic_cache: tuple[int, int] = (-1, 2)
        self._in_flight: dict[int, dict[int, ClientRequest]] = {}
        self._completed: list[ClientResponse] = []
        # Per node, acks=0 requests not yet fully written: (selector byte offset of their end, request).
        self._unwritten: dict[int, deque[tuple[int, ClientRequest]]] = {}
        self._metadata_in_flight: tuple[int, int, list[str] | None] | None = None  # (node, cid, topics)
        # When a due metadata request started waiting for room in a full in-flight window (-1: not waiting).
        self._metadata_window_wait_ms = -1
        self._closed = False
        self._rr = 0
        # No broker reached for this long after the first attempt: one WARNING (the producer passes
        # max.block.ms, how long a send() would wait for metadata).
        self._bootstrap_warning_ms = bootstrap_warning_ms
        self._first_attempt_ms = -1
        self._ever_ready = False
        # TLS probes under way: probe id -> (node id, address "ip:port", deadline ms); and the
        # addresses already probed, each probed at most once (see ``_maybe_probe_tls``).
        self._tls_probes: dict[int, tuple[int, str, int]] = {}
        self._tls_probed: set[str] = set()
        # The converse for TLS clients: plaintext ApiVersions probes (id -> node id, address, deadline,
        # the probe's own sans-I/O connection) and the addresses already probed.
        self._plain_probes: dict[int, tuple[int, str, int, KafkaConnection]] = {}
        self._plain_probed: set[str] = set()
        self._plain_probe_ids = itertools.count(-(1 << 41), -1)
        self._bootstrap: list[Node] = []
        for host, port, addresses in self._resolve_bootstrap(parse_bootstrap_servers(bootstrap_servers)):
            node = Node(-(len(self._bootstrap) + 1), host, port)
            self._bootstrap.append(node)
            self._nodes[node.id] = _NodeState(node.id, addresses, 0, host, port)
        self.metadata.bootstrap(self._bootstrap)

    # ------------------------------------------------------------- nodes
    def _known_nodes(self) -> list[Node]:
        nodes = list(self.metadata.cluster.nodes.values())
        return nodes if nodes else list(self._bootstrap)

    def _node(self, node_id: int) -> Node | None:
        n = self.metadata.cluster.node(node_id)
        if n is not None:
            return n
        return next((b for b in self._bootstrap if b.id == node_id), None)

    def _resolve_bootstrap(
        self, entries: list[tuple[str, int]]
    ) -> list[tuple[str, int, list[tuple[int, tuple[str, int]]]]]:
        """Resolve bootstrap entries now, as Java's ClientUtils.parseAndValidateAddresses does.

        An entry that does not resolve is skipped with a warning; only when none resolves is it a
        ConfigError. With resolve_canonical_bootstrap_servers_only each address of an entry is
        replaced by its canonical host name (reverse lookup), and those names are used from then on.
        """
        out: list[tuple[str, int, list[tuple[int, tuple[str, int]]]]] = []
        failed: list[str] = []
        for host, port in entries:
            entry = _address(host, port)
            try:
                addresses = _lookup(host, port)
            except OSError as e:
                logger.warning("bootstrap.servers entry %s cannot be resolved (%s); skipping it", entry, e)
                failed.append(f"{entry} ({e})")
                continue
            if self.client_dns_lookup == "use_all_dns_ips":
                out.append((host, port, addresses))
                continue
            for _family, (ip, _port) in addresses:
                name = _canonical_host_name(ip)
                if any((name, port) == (h, p) for h, p, _a in out):
                    continue
                try:
                    out.append((name, port, _lookup(name, port)))
                except OSError as e:
                    logger.warning(
                        "bootstrap.servers entry %s: its canonical host name %s cannot be resolved (%s)",
                        entry,
                        name,
                        e,
                    )
                    failed.append(f"{entry} as {name} ({e})")
        if not out:
            raise ConfigError(f"no resolvable bootstrap.servers entry: {', '.join(failed)}")
        return out

    def _resolve(self, node: Node) -> list[tuple[int, tuple[str, int]]]:
        try:
            return _lookup(node.host, node.port)
        except OSError as e:
            logger.warning("cannot resolve %s: %s", node.address, e)
            return []

    def _state_for(self, node: Node) -> _NodeState:
        st = self._nodes.get(node.id)
        if st is None or (st.host, st.port) != (node.host, node.port):
            st = _NodeState(node.id, [], 0, node.host, node.port)
            self._nodes[node.id] = st
        return st

    def _next_address(self, st: _NodeState, node: Node) -> tuple[int, tuple[str, int]] | None:
        """The address for this connection attempt: each in turn, then resolve the name again.

        As Java's ClusterConnectionStates: after a fresh resolution the address tried last is
        skipped when there is another one, so a dead address is not tried twice in a row.
        """
        if not st.addresses:
            st.addresses = self._resolve(node)
            st.address_index = 0
            if not st.addresses:
                return None
            if len(st.addresses) > 1 and st.addresses[0] == st.last_address:
                st.address_index = 1
        chosen = st.addresses[st.address_index]
        st.last_address = chosen
        st.address_index += 1
        if st.address_index >= len(st.addresses):
            st.addresses = []
        return chosen

    # ------------------------------------------------------------- readiness
    def is_ready(self, node_id: int, now: int | None = None) -> bool:
        st = self._nodes.get(node_id)
        return st is not None and st.state is ConnectionState.READY and not self._closed

    def ready(self, node_id: int, now: int) -> bool:
        """True if a request can go to the node now (connected and room in the in-flight window,
        as Java's NetworkClient.ready); otherwise start connecting when allowed."""
        if self.is_ready(node_id, now):
            return self.can_send_more(node_id)
        if self.can_connect(node_id, now):
            self._initiate_connect(node_id, now)
        return False

    def can_connect(self, node_id: int, now: int) -> bool:
        st = self._nodes.get(node_id)
        if st is None:
            return self._node(node_id) is not None
        return st.state is ConnectionState.DISCONNECTED and (
            st.last_attempt_ms < 0 or now - st.last_attempt_ms >= st.reconnect_backoff_ms
        )

    def is_connecting(self, node_id: int) -> bool:
        st = self._nodes.get(node_id)
        return st is not None and st.state in (
            ConnectionState.CONNECTING,
            ConnectionState.CHECKING_API_VERSIONS,
            ConnectionState.AUTHENTICATING,
        )

    def can_send_more(self, node_id: int) -> bool:
        """Java's InFlightRequests.canSendMore: room in the window and the last send fully written."""
        st = self._nodes.get(node_id)
        if st is None or st.conn is None or st.conn.reauthenticating:
            return False
        n = len(self._in_flight.get(node_id, ()))
        return n == 0 or (n < self.max_in_flight and self._selector.pending_bytes(node_id) == 0)

    def in_flight_request_count(self, node_id: int | None = None) -> int:
        if node_id is None:
            return sum(len(v) for v in self._in_flight.values())
        return len(self._in_flight.get(node_id, ()))

    def has_in_flight_requests(self, node_id: int | None = None) -> bool:
        return self.in_flight_request_count(node_id) > 0

    def connection_delay(self, node_id: int, now: int) -> int:
        """Milliseconds before a connection attempt to the node is allowed (0 = now)."""
        st = self._nodes.get(node_id)
        if st is None or st.last_attempt_ms < 0:
            return 0
        if st.state is ConnectionState.DISCONNECTED:
            return max(0, st.last_attempt_ms + st.reconnect_backoff_ms - now)
        return 2**62

    def is_connection_failed(self, node_id: int) -> bool:
        st = self._nodes.get(node_id)
        return st is not None and st.state is ConnectionState.DISCONNECTED and st.failed_attempts > 0

    def api_version(self, node_id: int, api_key: int) -> int | None:
        st = self._nodes.get(node_id)
        if st is None or st.conn is None:
            return None
        return st.conn.api_version(api_key)

    def max_usable_produce_magic(self) -> int:
        """The record format every connected broker accepts: v2 unless one only speaks Produce v0–v2.

        Produce v3+ carries v2 batches, v2 carries v1 message sets, v0/v1 carry v0 (as Java's
        ApiVersions.maxUsableProduceMagic). Unknown (not yet connected) brokers do not lower it.
        """
        # Asked for every new batch: computed again only after a connection changed state.
        cached = self._magic_cache
        if cached[0] == self._states_version:
            return cached[1]
        version = self._states_version
        magic = 2
        for st in self._nodes.values():
            if st.conn is None or st.state is not ConnectionState.READY:
                continue
            v = st.conn.api_version(ApiKey.PRODUCE)
            if v is not None and v < 3:
                magic = min(magic, 1 if v == 2 else 0)
        self._magic_cache = (version, magic)
        return magic

    def in_flight_requests_by_node(self) -> dict[int, int]:
        """Requests awaiting a response, per node (the circuit breaker's view of congestion)."""
        return {n: len(reqs) for n, reqs in self._in_flight.items() if reqs}

    def broker_api_versions(self, node_id: int) -> dict[int, tuple[int, int]]:
        st = self._nodes.get(node_id)
        return {} if st is None or st.conn is None else dict(st.conn.broker_api_versions)

    # ------------------------------------------------------------- connecting
    def _initiate_connect(self, node_id: int, now: int) -> None:
        node = self._node(node_id)
        if node is None:
            raise IllegalStateError(f"unknown node {node_id}")
        st = self._state_for(node)
        st.last_attempt_ms = now
        if self._first_attempt_ms < 0:
            self._first_attempt_ms = now
        chosen = self._next_address(st, node)
        if chosen is None:
            st.current_address = ""  # the failure belongs to the name, not the address tried before
            self._connect_failed(st, now, f"cannot resolve {node.address}")
            return
        family, addr = chosen
        st.current_address = f"{addr[0]}:{addr[1]}"
        sasl_mechanism, user, password = self._sasl
        settings = self._sasl_settings
        st.conn = KafkaConnection(
            node_id,
            self.client_id,
            max_receive_size=self.max_receive_size,
            sasl_mechanism=settings.mechanism if settings is not None else sasl_mechanism,
            sasl_username=user,
            sasl_password=password,
            authenticator_factory=settings.make if settings is not None else None,
            rng=self._rng,
        )
        st.conn.start_connect(now)
        st.state = ConnectionState.CONNECTING
        self._states_version += 1
        st.setup_timeout_ms = self._setup_timeout.backoff(st.failed_attempts)
        logger.debug("connecting to node %s at %s", node_id, st.current_address)
        try:
            if self._ssl_context is None:
                self._selector.connect(node_id, addr[0], addr[1], family)
            else:
                self._selector.connect(
                    node_id, addr[0], addr[1], family, ssl_context=self._ssl_context, server_hostname=node.host
                )
        except OSError as e:
            self._connect_failed(st, now, str(e))

    def _connect_failed(self, st: _NodeState, now: int, reason: str) -> None:
        self._disconnected(st, now, reason)

    def _authentication_failed(self, st: _NodeState, now: int, error: AuthenticationError) -> None:
        """A TLS handshake or SASL exchange failed: waiting callers end with ``error`` (Java's
        AuthenticationException); it is logged at WARNING with the broker and the cause, once until
        the broker accepts the client (see ``_disconnected``)."""
        self.metadata.record_authentication_failure(error)
        self._disconnected(st, now, error.message, error=error)

    def _disconnected(
        self,
        st: _NodeState,
        now: int,
        reason: str,
        *,
        timed_out: bool = False,
        error: Exception | None = None,
    ) -> None:
        """Close a node's connection, fail its in-flight requests and schedule the reconnect backoff."""
        was_ready = st.state is ConnectionState.READY
        if st.state in (
            ConnectionState.CHECKING_API_VERSIONS,
            ConnectionState.AUTHENTICATING,
            ConnectionState.READY,
        ):
            # It had connected: resolve the name again next time, its addresses may have changed (as Java).
            st.addresses = []
        self._selector.close(st.node_id)
        if st.conn is not None:
            st.conn.close()
        st.state = ConnectionState.DISCONNECTED
        self._states_version += 1
        if was_ready:
            st.failed_attempts = 0
        st.reconnect_backoff_ms = self._reconnect.backoff(st.failed_attempts)
        st.failed_attempts += 1
        if not was_ready:
            self.metadata.record_connection_failure(st.current_address or f"{st.host}:{st.port}", reason)
            if st.unreachable_since_ms < 0:
                st.unreachable_since_ms = now
                logger.warning(
                    "%s %s: %s; retrying with backoff up to %d ms (reconnect.backoff.max.ms)",
                    _describe_node(st),
                    "refused this client" if isinstance(error, AuthenticationError) else "is unreachable",
                    reason,
                    self._reconnect.max_ms,
                )
            else:
                logger.debug("%s still unreachable: %s", _describe_node(st), reason)
        else:
            logger.info("node %s (%s) disconnected: %s", st.node_id, st.current_address, reason)
        pending = self._in_flight.pop(st.node_id, {})
        self._unwritten.pop(st.node_id, None)
        for req in pending.values():
            err: Exception
            if error is not None:
                err = error
            elif timed_out:
                err = KafkaTimeoutError(f"request to node {st.node_id} timed out: {reason}")
            else:
                err = NetworkError(f"connection to node {st.node_id} lost: {reason}")
            self._completed.append(
                ClientResponse(
                    req,
                    None,
                    now,
                    disconnected=True,
                    timed_out=timed_out,
                    error=err,
                    latency_ms=now - req.send_ms,
                )
            )
        if self._metadata_in_flight is not None and self._metadata_in_flight[0] == st.node_id:
            self._metadata_in_flight = None
            self.metadata.handle_failure(now, error if error is not None else NetworkError(reason))

    def disconnect(self, node_id: int, now: int | None = None) -> None:
        st = self._nodes.get(node_id)
        if st is not None and st.state is not ConnectionState.DISCONNECTED:
            self._disconnected(st, self._clock() if now is None else now, "disconnected by the client")

    # ------------------------------------------------------------- sending
    def send(self, request: ClientRequest, now: int) -> None:
        """Queue a request to a ready node; the bytes go out in ``poll``."""
        node_id = request.node_id
        st = self._nodes.get(node_id)
        if st is None or st.conn is None or st.state is not ConnectionState.READY:
            raise IllegalStateError(f"attempt to send a request to node {node_id} which is not ready")
        # No exemption for METADATA: Java's doSend checks canSendRequest for every request from
        # outside, and its metadata updater asks canSendRequest before sending its own.
        if not self.can_send_more(node_id):
            raise IllegalStateError(
                f"node {node_id} has {self.in_flight_request_count(node_id)} requests in flight"
            )
        body = request.request
        if (
            callable(body)
            and not hasattr(body, "__api_key__")
            and not isinstance(body, protocol.ProduceRequestData)
        ):
            version = st.conn.api_version(request.api_key)
            if version is None:
                from kproducer.errors import UnsupportedVersionError

                raise UnsupportedVersionError(
                    f"node {node_id} supports no version of {ApiKey(request.api_key).name}"
                )
            body = body(version)
        request.api_version = protocol.body_version(request.api_key, body)
        request.send_ms = now
        if request.created_ms == 0:
            request.created_ms = now
        if request.request_timeout_ms is None:
            request.request_timeout_ms = self.request_timeout_ms
        cid = st.conn.send_request(body, now, expect_response=request.expect_response, context=request)
        request.correlation_id = cid
        selector = self._selector
        selector.send(node_id, st.conn.data_to_send())
        self._in_flight.setdefault(node_id, {})[cid] = request
        if not request.expect_response:
            # acks=0 stays in flight until its last byte is written (Java completes it on
            # completedSends), so that the in-flight window bounds what waits in the selector.
            end = (selector.bytes_sent(node_id) or 0) + selector.pending_bytes(node_id)
            self._unwritten.setdefault(node_id, deque()).append((end, request))

    def wakeup(self) -> None:
        self._selector.wakeup()

    # ------------------------------------------------------------- metadata
    def least_loaded_node(self, now: int) -> int | None:
        """The ready node with the fewest in-flight requests; else a connecting one; else one we may connect to."""
        nodes = self._known_nodes()
        if not nodes:
            return None
        start = self._rr % len(nodes)
        self._rr += 1
        best: int | None = None
        best_inflight = 1 << 30
        connecting: int | None = None
        connectable: int | None = None
        for i in range(len(nodes)):
            n = nodes[(start + i) % len(nodes)]
            cnt = self.in_flight_request_count(n.id)
            if self.is_ready(n.id) and self.can_send_more(n.id):
                if cnt == 0:
                    return n.id
                if cnt < best_inflight:
                    best, best_inflight = n.id, cnt
            elif self.is_connecting(n.id):
                connecting = n.id
            elif self.can_connect(n.id, now) and connectable is None:
                connectable = n.id
        if best is not None:
            return best
        if connecting is not None:
            return connecting
        return connectable

    def metadata_request_due(self, now: int) -> bool:
        """Whether a metadata request should go out now (none in flight, and the policy says it is due)."""
        return self._metadata_in_flight is None and self.metadata.time_to_next_update(now) == 0

    def _maybe_update_metadata(self, now: int) -> int:
        """DefaultMetadataUpdater.maybeUpdate: returns ms until it should be called again."""
        if self._metadata_in_flight is not None:
            return self.request_timeout_ms
        wait = self.metadata.time_to_next_update(now)
        if wait > 0:
            return wait
        node_id = self.least_loaded_node(now)
        if node_id is None:
            # Nothing to try: wait for the earliest reconnect backoff to end.
            delays = [self.connection_delay(n.id, now) for n in self._known_nodes()]
            return max(1, min(delays, default=self._reconnect.initial_ms))
        ready = self.is_ready(node_id)
        if ready and not self.can_send_more(node_id):
            # As in Java, the request waits for room in the window; say so once per wait, since
            # this is where a new topic's first send() spends its time behind slow produce requests.
            if self._metadata_window_wait_ms < 0:
                self._metadata_window_wait_ms = now
                logger.debug(
                    "metadata request due, waiting: node %s has %d requests in flight (the maximum)",
                    node_id,
                    len(self._in_flight.get(node_id, ())),
                )
            return self.request_timeout_ms
        if ready:
            if self._metadata_window_wait_ms >= 0:
                logger.debug("metadata request waited %d ms for the in-flight window", now - self._metadata_window_wait_ms)
                self._metadata_window_wait_ms = -1
            version = self.api_version(node_id, ApiKey.METADATA)
            if version is None:
                self.metadata.handle_failure(now)
                return self.metadata.retry_backoff_ms
            # The policy's choice (KIP-526); an empty list is a broker-only refresh. Only one
            # request is in flight: topics that turn urgent meanwhile join the next one.
            topics = self.metadata.topics_for_request(now)
            body = build_metadata_request(version, topics, self.metadata.allow_auto_topic_creation)
            req = ClientRequest(node_id, ApiKey.METADATA, body, callback=None, created_ms=now)
            self.send(req, now)
            self._metadata_in_flight = (node_id, req.correlation_id, topics)
            return self.request_timeout_ms
        if self.is_connecting(node_id):
            return self._reconnect.initial_ms
        if self.can_connect(node_id, now):
            self._initiate_connect(node_id, now)
            return self._reconnect.initial_ms
        return max(1, self.connection_delay(node_id, now))

    # ------------------------------------------------------------- poll
    def poll(self, timeout_ms: int, now: int) -> list[ClientResponse]:
        """Do network I/O for up to ``timeout_ms``; returns completed responses (callbacks already fired)."""
        if self._closed:
            raise IllegalStateError("NetworkClient is closed")
        if self._completed:
            timeout_ms = 0
        metadata_timeout = self._maybe_update_metadata(now)
        timeout_ms = min(timeout_ms, metadata_timeout, self._next_deadline(now))
        result = self._selector.poll(max(0, timeout_ms) / 1000.0)
        now = self._clock()
        if self._unwritten:
            self._complete_written(result.bytes_written, now)
        if self._plain_probes:
            self._plain_probe_events(result.received, result.disconnected, now)
        for node_id in result.connected:
            st = self._nodes.get(node_id)
            if st is not None and st.conn is not None:
                st.state = ConnectionState.CHECKING_API_VERSIONS
                self._states_version += 1
                st.conn.connection_made(now)
                self._selector.send(node_id, st.conn.data_to_send())
        for node_id, data in result.received:
            st = self._nodes.get(node_id)
            if st is None or st.conn is None:
                continue
            try:
                responses = st.conn.receive_data(data, now)
            except AuthenticationFailed as e:
                err = e.error
                self._authentication_failed(
                    st, now, err if isinstance(err, AuthenticationError) else AuthenticationError(str(err))
                )
                continue
            except ProtocolError as e:
                logger.error("node %s: %s", node_id, e)
                self._disconnected(st, now, str(e))
                continue
            except Exception as e:  # a decode failure must not kill the Sender thread
                logger.exception("node %s: failed to handle a response", node_id)
                self._disconnected(st, now, f"cannot handle response: {e}")
                continue
            out = st.conn.data_to_send()
            if out:
                self._selector.send(node_id, out)
            if st.state is not ConnectionState.READY and st.conn.state is ConnectionState.READY:
                st.state = ConnectionState.READY
                self._states_version += 1
                self.metadata.record_authentication_failure(None)
                logger.debug("node %s ready; versions %s", node_id, st.conn.api_versions)
                if st.unreachable_since_ms >= 0:
                    logger.warning(
                        "%s is reachable again after %.1f s and %d failed connection attempts",
                        _describe_node(st),
                        (now - st.unreachable_since_ms) / 1000.0,
                        st.failed_attempts,
                    )
                    st.unreachable_since_ms = -1
                st.failed_attempts = 0
                self._ever_ready = True
            elif st.conn.state is ConnectionState.AUTHENTICATING:
                st.state = ConnectionState.AUTHENTICATING
                self._states_version += 1
            for resp in responses:
                req = self._in_flight.get(node_id, {}).pop(resp.correlation_id, None)
                if self._metadata_in_flight is not None and self._metadata_in_flight[:2] == (
                    node_id,
                    resp.correlation_id,
                ):
                    topics = self._metadata_in_flight[2]
                    self._metadata_in_flight = None
                    self.metadata.handle_response(resp.body, topics, now, size_bytes=resp.size_bytes)
                    continue
                if req is None:
                    continue
                self._completed.append(ClientResponse(req, resp.body, now, latency_ms=now - req.send_ms))
        for node_id, reason in result.disconnected:
            st = self._nodes.get(node_id)
            if st is not None and st.state is not ConnectionState.DISCONNECTED:
                if st.state is ConnectionState.CHECKING_API_VERSIONS and self._ssl_context is None:
                    reason += (
                        " before it answered ApiVersions (if this is a TLS listener, set "
                        "security.protocol to SSL or SASL_SSL)"
                    )
                    if st.conn is not None and not st.conn.inbound_bytes:
                        # Closed without a byte back, as a TLS listener does: ask the port (bytes
                        # that came back were no TLS, or the connection would say so).
                        self._maybe_probe_tls(st, now)
                if node_id in result.handshake_failed:
                    self._authentication_failed(st, now, SslAuthenticationError(reason))
                else:
                    self._disconnected(st, now, reason)
        for probe_id, spoke_tls, detail in result.tls_probes:
            self._tls_probe_done(probe_id, spoke_tls, detail)
        self._maybe_reauthenticate(now)
        self._handle_timeouts(now)
        if not self._ever_ready and self._bootstrap_warning_ms is not None and self._first_attempt_ms >= 0:
            self._maybe_warn_no_bootstrap(now)
        done, self._completed = self._completed, []
        for cresp in done:
            cb = cresp.request.callback
            if cb is not None:
                try:
                    cb(cresp)
                except Exception:
                    logger.exception("uncaught error in a request callback")
        return done

    def _maybe_probe_tls(self, st: _NodeState, now: int) -> None:
        """A plaintext connection was closed before the broker answered its first request
        (ApiVersions): ask once, on a separate connection, whether that port answers TLS.

        A TLS listener drops plaintext bytes, often without a word (stunnel and OpenSSL-based
        listeners send no alert), so a bare close would only ever end in a timeout at max.block.ms.
        A closed connection alone is not proof (a broker may be restarting), but a port that
        completes a TLS handshake (or answers it with a TLS alert) is a TLS listener: then the
        records fail at once with an error naming security.protocol (librdkafka logs "might be
        caused by incorrect security.protocol configuration (connecting to a SSL listener?)" and
        keeps retrying until the message timeout).
        """
        target = self._claim_probe(st, self._tls_probed)
        if target is None:
            return
        family, ip, port, address = target
        try:
            probe_id = self._selector.probe_tls(ip, port, family)
        except OSError as e:
            logger.debug("TLS probe of %s could not start: %s", address, e)
            return
        self._tls_probes[probe_id] = (st.node_id, address, now + self._setup_timeout.initial_ms)

    def _tls_probe_done(self, probe_id: int, spoke_tls: bool, detail: str) -> None:
        entry = self._tls_probes.pop(probe_id, None)
        if entry is None:
            return
        node_id, address, _deadline = entry
        if not spoke_tls:
            logger.debug("TLS probe of %s: not a TLS listener (%s)", address, detail)
            return
        st = self._nodes.get(node_id)
        name = f"broker {node_id}" if node_id >= 0 else "bootstrap server"
        if st is not None and st.host and _address(st.host, st.port) != address:
            name += f" {_address(st.host, st.port)}"
        sasl = self._sasl_settings is not None or self._sasl[0] is not None
        configured, wanted = ("SASL_PLAINTEXT", "SASL_SSL") if sasl else ("PLAINTEXT", "SSL")
        who = f"{name} ({address})"
        cause = (
            f"closed the connection during the first request (ApiVersions) and that port answers a TLS "
            f"handshake ({detail}): the listener is TLS but security.protocol is {configured}; set "
            f"security.protocol={wanted} (and ssl.truststore.location if its CA is not a system one)"
        )
        logger.warning("%s refused this client: it %s", who, cause)
        self.metadata.record_authentication_failure(SslAuthenticationError(f"{who} {cause}"))

    @staticmethod
    def _claim_probe(st: _NodeState, probed: set[str]) -> tuple[int, str, int, str] | None:
        """(family, ip, port, "ip:port") of the node's last address, marked as probed; None if it was."""
        if st.last_address is None:
            return None
        family, (ip, port) = st.last_address
        address = _address(ip, port)
        if address in probed:
            return None
        probed.add(address)
        return family, ip, port, address

    def _plain_probe_due_at(self, st: _NodeState) -> str | None:
        """The address a stalled handshake's plaintext probe would go to, unless it was probed."""
        if st.last_address is None:
            return None
        address = _address(*st.last_address[1])
        return None if address in self._plain_probed else address

    def _maybe_probe_plaintext(self, st: _NodeState, now: int) -> None:
        """A TLS handshake has had no answer for a while: ask its port, once and on a separate
        connection, for ApiVersions in plaintext.

        A plaintext Kafka listener reads a ClientHello as the start of a request of about 369 MB:
        Apache Kafka closes at once (larger than socket.request.max.bytes), but a broker that waits
        for the rest would hold the handshake until socket.connection.setup.timeout.ms. A valid
        ApiVersions answer proves a plaintext listener; anything else (a close, silence, bytes that
        are no Kafka response) proves nothing and the handshake runs on as before.
        """
        target = self._claim_probe(st, self._plain_probed)
        if target is None:
            return
        family, ip, port, address = target
        conn = KafkaConnection(st.node_id, self.client_id, max_receive_size=self.max_receive_size)
        conn.start_connect(now)
        conn.connection_made(now)
        probe_id = next(self._plain_probe_ids)
        try:
            self._selector.connect(probe_id, ip, port, family)
        except OSError as e:
            logger.debug("plaintext probe of %s could not start: %s", address, e)
            return
        self._selector.send(probe_id, conn.data_to_send())
        self._plain_probes[probe_id] = (st.node_id, address, now + self._setup_timeout.initial_ms, conn)

    def _plain_probe_events(
        self, received: list[tuple[int, bytes]], disconnected: list[tuple[int, str]], now: int
    ) -> None:
        for probe_id, data in received:
            entry = self._plain_probes.get(probe_id)
            if entry is None:
                continue
            node_id, address, _deadline, conn = entry
            try:
                conn.receive_data(data, now)
            except Exception:  # noqa: BLE001 - not a Kafka answer: proves nothing
                self._end_plain_probe(probe_id)
                continue
            if conn.api_versions:
                self._end_plain_probe(probe_id)
                self._plaintext_listener_found(node_id, address, now)
        for probe_id, _reason in disconnected:
            if probe_id in self._plain_probes:
                self._end_plain_probe(probe_id)

    def _end_plain_probe(self, probe_id: int) -> None:
        self._plain_probes.pop(probe_id, None)
        self._selector.close(probe_id)

    def _plaintext_listener_found(self, node_id: int, address: str, now: int) -> None:
        sasl = self._sasl_settings is not None or self._sasl[0] is not None
        configured, wanted = ("SASL_SSL", "SASL_PLAINTEXT") if sasl else ("SSL", "PLAINTEXT")
        st = self._nodes.get(node_id)
        name = f"broker {node_id}" if node_id >= 0 else "bootstrap server"
        cause = (
            f"sent no answer to the TLS handshake, and that port answers a plaintext ApiVersions request: "
            f"the listener is plaintext but security.protocol is {configured}; set security.protocol={wanted} "
            "(or use the broker's TLS listener)"
        )
        error = SslAuthenticationError(f"{name} ({address}) {cause}")
        if st is not None and st.state is not ConnectionState.DISCONNECTED and self._selector.is_handshaking(node_id):
            self._authentication_failed(st, now, error)  # ends the stalled handshake; warns once
            return
        logger.warning("%s (%s) refused this client: it %s", name, address, cause)
        self.metadata.record_authentication_failure(error)

    def _maybe_warn_no_bootstrap(self, now: int) -> None:
        assert self._bootstrap_warning_ms is not None
        if now - self._first_attempt_ms >= self._bootstrap_warning_ms:
            logger.warning(
                "no broker could be reached within %d ms (max.block.ms): %s",
                self._bootstrap_warning_ms,
                self.metadata.describe_reachability(),
            )
            self._bootstrap_warning_ms = None  # once

    def _maybe_reauthenticate(self, now: int) -> None:
        """KIP-368: renew the SASL session of every ready connection whose renewal time has come."""
        if self._sasl_settings is None and self._sasl[0] is None:
            return
        for node_id, st in self._nodes.items():
            conn = st.conn
            if st.state is ConnectionState.READY and conn is not None and conn.maybe_begin_reauthentication(now):
                self._selector.send(node_id, conn.data_to_send())

    def _complete_written(self, bytes_written: dict[int, int], now: int) -> None:
        """Complete the acks=0 requests whose bytes are all on the socket now, in send order."""
        for node_id, queue in list(self._unwritten.items()):
            written = self._selector.bytes_sent(node_id)
            if written is None:  # closed during this poll, possibly after the write
                written = bytes_written.get(node_id, -1)
            in_flight = self._in_flight.get(node_id, {})
            while queue and queue[0][0] <= written:
                req = queue.popleft()[1]
                in_flight.pop(req.correlation_id, None)
                self._completed.append(ClientResponse(req, None, now, latency_ms=now - req.send_ms))
            if not queue:
                del self._unwritten[node_id]

    def _next_deadline(self, now: int) -> int:
        """Milliseconds until the earliest request or connection-setup timeout."""
        best = 2**31
        for _node_id, reqs in self._in_flight.items():
            for r in reqs.values():
                best = min(best, r.send_ms + (r.request_timeout_ms or self.request_timeout_ms) - now)
        for _node, _address, deadline in self._tls_probes.values():
            best = min(best, deadline - now)
        for _node, _address, deadline, _conn in self._plain_probes.values():
            best = min(best, deadline - now)
        tls = self._ssl_context is not None
        for st in self._nodes.values():
            if st.state is not ConnectionState.DISCONNECTED and st.state is not ConnectionState.READY:
                best = min(best, st.last_attempt_ms + st.setup_timeout_ms - now)
                if tls and st.state is ConnectionState.CONNECTING and self._plain_probe_due_at(st) is not None:
                    best = min(best, st.last_attempt_ms + _PLAIN_PROBE_AFTER_MS - now)
            elif st.conn is not None and st.conn.reauthenticate_at_ms >= 0:
                best = min(best, st.conn.reauthenticate_at_ms - now)
        return max(0, best)

    def _handle_timeouts(self, now: int) -> None:
        if self._tls_probes:
            for probe_id, (_node, _address, deadline) in list(self._tls_probes.items()):
                if now >= deadline:  # a port that stays silent after a ClientHello is no TLS listener
                    self._selector.close(probe_id)
                    self._tls_probe_done(probe_id, False, "no answer to a ClientHello")
        if self._plain_probes:
            for probe_id, (_node, _address, deadline, _conn) in list(self._plain_probes.items()):
                if now >= deadline:
                    self._end_plain_probe(probe_id)
        tls = self._ssl_context is not None
        for st in list(self._nodes.values()):
            if st.state is ConnectionState.DISCONNECTED:
                continue
            if (
                tls
                and st.state is ConnectionState.CONNECTING
                and now - st.last_attempt_ms >= _PLAIN_PROBE_AFTER_MS
                and self._plain_probe_due_at(st) is not None
                and self._selector.is_handshaking(st.node_id)
            ):
                self._maybe_probe_plaintext(st, now)
            if st.state is not ConnectionState.READY and now - st.last_attempt_ms >= st.setup_timeout_ms:
                if self._selector.is_handshaking(st.node_id):
                    # A plaintext listener never answers a ClientHello (a Kafka broker closes, some
                    # brokers just wait): name that likely cause instead of a bare timeout.
                    address = st.current_address or f"{st.host}:{st.port}"
                    self._authentication_failed(
                        st,
                        now,
                        SslAuthenticationError(
                            f"TLS handshake with {st.host} ({address}) did not finish within "
                            f"{st.setup_timeout_ms} ms (socket.connection.setup.timeout.ms): the broker "
                            "sent no TLS answer; is this a plaintext listener? (security.protocol is SSL "
                            "or SASL_SSL)"
                        ),
                    )
                    continue
                self._disconnected(st, now, f"connection setup timed out after {st.setup_timeout_ms} ms")
                continue
            conn = st.conn
            if (
                conn is not None
                and conn.reauthenticating
                and now - conn.reauth_started_ms >= self.request_timeout_ms
            ):
                self._disconnected(st, now, "SASL re-authentication timed out; closing the connection")
                continue
            reqs = self._in_flight.get(st.node_id)
            if reqs and any(
                now - r.send_ms >= (r.request_timeout_ms or self.request_timeout_ms) for r in reqs.values()
            ):
                self._disconnected(st, now, "request timed out; closing the connection", timed_out=True)
                continue
            if (
                st.state is ConnectionState.READY
                and not reqs
                and st.conn is not None
                and now - st.conn.last_activity_ms > self.connections_max_idle_ms
            ):
                logger.debug("closing idle connection to node %s", st.node_id)
                st.addresses = []  # as after any established connection: resolve again next time
                self._selector.close(st.node_id)
                st.conn.close()
                st.state = ConnectionState.DISCONNECTED
                self._states_version += 1
        if self._metadata_in_flight is not None:
            mst = self._nodes.get(self._metadata_in_flight[0])
            if mst is None or mst.state is ConnectionState.DISCONNECTED:
                self._metadata_in_flight = None
                self.metadata.handle_failure(now)

    # ------------------------------------------------------------- blocking helpers
    def await_ready(self, node_id: int, timeout_ms: int) -> bool:
        """Poll until the node is ready (admin and CLI use; never on the Sender's hot path)."""
        deadline = self._clock() + timeout_ms
        while True:
            now = self._clock()
            if self.ready(node_id, now):
                return True
            if now >= deadline:
                return False
            self.poll(min(50, deadline - now), now)

    def send_and_receive(self, request: ClientRequest, timeout_ms: int) -> ClientResponse:
        """Send one request and poll until its response (admin and CLI use)."""
        if not self.await_ready(request.node_id, timeout_ms):
            raise KafkaTimeoutError(f"node {request.node_id} not ready within {timeout_ms} ms")
        box: list[ClientResponse] = []
        user_cb = request.callback

        def _cb(r: ClientResponse) -> None:
            box.append(r)
            if user_cb is not None:
                user_cb(r)

        request.callback = _cb
        deadline = self._clock() + timeout_ms
        self.send(request, self._clock())
        while not box:
            now = self._clock()
            if now >= deadline:
                raise KafkaTimeoutError(f"no response from node {request.node_id} within {timeout_ms} ms")
            self.poll(min(100, deadline - now), now)
        return box[0]

    def fetch_metadata(self, topics: list[str] | None, timeout_ms: int) -> None:
        """Refresh metadata for ``topics`` (None = all) and wait for it, polling this client."""
        now = self._clock()
        if topics is None:
            version = self.metadata.request_update_for_all_topics()
        else:
            # Explicitly asked for: these topics are urgent (an empty list refreshes brokers only).
            for t in topics:
                self.metadata.add_topic(t, now)
                self.metadata.mark_urgent(t, now)
            version = self.metadata.request_update()
        deadline = now + timeout_ms
        while self.metadata.version <= version:
            now = self._clock()
            auth_error = self.metadata.authentication_error
            if auth_error is not None:
                raise auth_error
            if now >= deadline:
                tried = ", ".join(f"{a} ({r})" for a, r in self.metadata.tried_addresses.items())
                boot = ", ".join(n.address for n in self._bootstrap)
                raise KafkaTimeoutError(
                    f"metadata not received within {timeout_ms} ms from bootstrap servers {boot}"
                    + (f"; addresses tried: {tried}" if tried else "")
                )
            self.poll(min(100, deadline - now), now)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._selector.close_all()
        for st in self._nodes.values():
            if st.conn is not None:
                st.conn.close()
            st.state = ConnectionState.DISCONNECTED
            self._states_version += 1


def build_metadata_request(version: int, topics: list[str] | None, allow_auto_topic_creation: bool) -> Any:
    """A Metadata request naming ``topics`` (None = all topics)."""
    mod = protocol.request_class(ApiKey.METADATA, version)
    topic_cls = _metadata_topic_class(version)
    if topics is None:
        entries = None
    else:
        if version >= 10:
            entries = tuple(topic_cls(name=t, topic_id=None) for t in topics)
        else:
            entries = tuple(topic_cls(name=t) for t in topics)
    kwargs: dict[str, Any] = {"topics": entries}
    if version >= 4:
        kwargs["allow_auto_topic_creation"] = allow_auto_topic_creation
    if 8 <= version <= 10:
        kwargs["include_cluster_authorized_operations"] = False
    if version >= 8:
        kwargs["include_topic_authorized_operations"] = False
    return mod(**kwargs)


def _metadata_topic_class(version: int) -> Any:
    import importlib

    m = importlib.import_module(f"kio.schema.metadata.v{version}.request")
    return m.MetadataRequestTopic
