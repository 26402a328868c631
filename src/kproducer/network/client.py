"""NetworkClient: connections, in-flight tracking and I/O for one thread (the Sender's).

Modelled on the Java client's NetworkClient + InFlightRequests. Only ``wakeup()`` and ``wakeup_by()`` may
be called from other threads; callbacks fire inside ``poll`` on the owning thread. Its parts live next to it:
``connection_states`` (ConnectionState and each node's state, as ClusterConnectionStates),
``metadata_updater`` (DefaultMetadataUpdater), ``client_request`` (ClientRequest, ClientResponse,
request bodies), ``dns`` (bootstrap and node resolution), ``listener_probes`` (telling a wrong
security.protocol from a broker that is down) and ``blocking`` (NetworkClientUtils' blocking calls).
What stays here (a little over 600 lines) is one class whose poll, connect, authentication and
in-flight bookkeeping all read and change the same per-node state on the owning thread; split
further, each part would reach into the others' state.
"""

from __future__ import annotations

import logging
import random
import ssl
from collections.abc import Callable, Iterable
from typing import Any

from kproducer.common import ExponentialBackoff, monotonic_ms
from kproducer.config import parse_bootstrap_servers
from kproducer.errors import (
    AuthenticationError,
    ConfigError,
    IllegalStateError,
    KafkaTimeoutError,
    NetworkError,
    SslAuthenticationError,
)
from kproducer.metadata import Metadata
from kproducer.network import blocking, protocol
from kproducer.network.client_error_event import ClientErrorListener
from kproducer.network.client_request import (
    ClientRequest,
    ClientResponse,
    build_metadata_request,
    request_body,
)
from kproducer.network.connection import AuthenticationFailed, KafkaConnection, ProtocolError
from kproducer.network.connection_states import (
    SETTING_UP,
    ClusterConnectionStates,
    ConnectionState,
    NodeState,
)
from kproducer.network.dns import DNS_LOOKUP_MODES, resolve_bootstrap, resolve_node
from kproducer.network.in_flight import InFlightRequests
from kproducer.network.listener_probes import ListenerProbes
from kproducer.network.metadata_updater import MetadataUpdater
from kproducer.network.selector import Selector
from kproducer.structs import Node

__all__ = [
    "NetworkClient",
    "ClientRequest",
    "ClientResponse",
    "ExponentialBackoff",
    "build_metadata_request",
    "parse_bootstrap_servers",
    "security_options",
]

logger = logging.getLogger(__name__)

# NetworkClient._wait_ends_ms while poll() is not waiting (clock values are never negative).
NOT_WAITING = -1


def security_options(cfg: Any) -> dict[str, Any]:
    """NetworkClient keywords for a ProducerConfig's security.protocol: the SSLContext (built once,
    reading every certificate and key file now) and the SASL settings."""
    protocol_name = cfg.security_protocol
    out: dict[str, Any] = {}
    if protocol_name in ("SSL", "SASL_SSL"):
        from kproducer.network.tls import build_ssl_context

        out["ssl_context"] = build_ssl_context(cfg)
    if protocol_name in ("SASL_PLAINTEXT", "SASL_SSL"):
        from kproducer.config.sasl import resolve_sasl_settings

        out["sasl"] = resolve_sasl_settings(cfg.as_dict(), mechanism_explicit=cfg.explicitly_set("sasl.mechanism"))
    return out


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
        if client_dns_lookup not in DNS_LOOKUP_MODES:
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
        # When poll()'s current wait ends (clock ms), or NOT_WAITING: read by wakeup_by() on callers'
        # threads, written only by the thread that polls.
        self._wait_ends_ms = NOT_WAITING
        # Both exponential with +-20% jitter, capped at their maximum (KIP-144, KIP-601).
        self._reconnect = ExponentialBackoff(reconnect_backoff_ms, reconnect_backoff_max_ms, jitter=0.2, rng=rng)
        self._setup_timeout = ExponentialBackoff(
            socket_connection_setup_timeout_ms, socket_connection_setup_timeout_max_ms, jitter=0.2, rng=rng
        )
        self._selector = Selector(
            send_buffer_bytes=send_buffer_bytes, receive_buffer_bytes=receive_buffer_bytes
        )
        self._states = ClusterConnectionStates(self._reconnect, self._setup_timeout)
        self._nodes = self._states.nodes
        self._in_flight = InFlightRequests()
        self._unwritten = self._in_flight.unwritten
        self._completed: list[ClientResponse] = []
        self._metadata_updater = MetadataUpdater(self)
        self._closed = False
        self._rr = 0
        # No broker reached for this long after the first attempt: one WARNING (the producer passes
        # max.block.ms, how long a send() would wait for metadata).
        self._bootstrap_warning_ms = bootstrap_warning_ms
        self._first_attempt_ms = -1
        self._ever_ready = False
        self._probes = ListenerProbes(
            selector=self._selector,
            nodes=self._nodes,
            setup_timeout=self._setup_timeout,
            metadata=self.metadata,
            client_id=client_id,
            max_receive_size=max_receive_size,
            tls=ssl_context is not None,
            sasl=sasl is not None or sasl_mechanism is not None,
            authentication_failed=self._authentication_failed,
        )
        self._bootstrap: list[Node] = []
        entries = parse_bootstrap_servers(bootstrap_servers)
        for host, port, addresses in resolve_bootstrap(entries, client_dns_lookup):
            node = Node(-(len(self._bootstrap) + 1), host, port)
            self._bootstrap.append(node)
            self._nodes[node.id] = NodeState(node.id, addresses, 0, host, port)
        self.metadata.bootstrap(self._bootstrap)

    @property
    def clock_ms(self) -> Callable[[], int]:
        """The clock this client runs on (milliseconds; a test's fake clock when one was given)."""
        return self._clock

    @property
    def bootstrap_nodes(self) -> list[Node]:
        """The nodes ``bootstrap.servers`` resolved to (ids -1, -2, ...), in the configured order."""
        return list(self._bootstrap)

    @property
    def reconnect_backoff_initial_ms(self) -> int:
        return self._reconnect.initial

    # ------------------------------------------------------------- nodes
    def known_nodes(self) -> list[Node]:
        """The brokers metadata names, or the bootstrap servers before it names any."""
        nodes = list(self.metadata.cluster.nodes.values())
        return nodes if nodes else list(self._bootstrap)

    def _node(self, node_id: int) -> Node | None:
        n = self.metadata.cluster.node(node_id)
        if n is not None:
            return n
        return next((b for b in self._bootstrap if b.id == node_id), None)

    def _state_for(self, node: Node) -> NodeState:
        st = self._nodes.get(node.id)
        if st is None or (st.host, st.port) != (node.host, node.port):
            st = NodeState(node.id, [], 0, node.host, node.port)
            self._nodes[node.id] = st
        return st

    # ------------------------------------------------------------- readiness
    def is_ready(self, node_id: int, now: int | None = None) -> bool:
        return self._states.is_ready(node_id) and not self._closed

    def ready(self, node_id: int, now: int) -> bool:
        """True if a request can go to the node now (connected and room in the in-flight window,
        as Java's NetworkClient.ready); otherwise start connecting when allowed."""
        if self.is_ready(node_id, now):
            return self.can_send_more(node_id)
        if self.can_connect(node_id, now):
            self.initiate_connect(node_id, now)
        return False

    def can_connect(self, node_id: int, now: int) -> bool:
        st = self._nodes.get(node_id)
        if st is None:
            return self._node(node_id) is not None
        return self._states.can_connect(st, now)

    def is_connecting(self, node_id: int) -> bool:
        return self._states.is_connecting(node_id)

    def can_send_more(self, node_id: int) -> bool:
        """Java's InFlightRequests.canSendMore: room in the window and the last send fully written."""
        st = self._nodes.get(node_id)
        if st is None or st.conn is None or st.conn.reauthenticating:
            return False
        n = self._in_flight.count(node_id)
        return n == 0 or (n < self.max_in_flight and self._selector.pending_bytes(node_id) == 0)

    def in_flight_request_count(self, node_id: int | None = None) -> int:
        return self._in_flight.count(node_id)

    def has_in_flight_requests(self, node_id: int | None = None) -> bool:
        return self.in_flight_request_count(node_id) > 0

    def connection_delay(self, node_id: int, now: int) -> int:
        """Milliseconds before a connection attempt to the node is allowed (0 = now)."""
        return self._states.connection_delay(node_id, now)

    def is_connection_failed(self, node_id: int) -> bool:
        return self._states.is_connection_failed(node_id)

    def is_gone_or_disconnected(self, node_id: int) -> bool:
        """The node has no connection state any more, or is disconnected (a request to it cannot complete)."""
        return self._states.is_gone_or_disconnected(node_id)

    def api_version(self, node_id: int, api_key: int) -> int | None:
        st = self._nodes.get(node_id)
        if st is None or st.conn is None:
            return None
        return st.conn.api_version(api_key)

    def max_usable_produce_magic(self) -> int:
        """The record format every connected broker accepts (see ClusterConnectionStates)."""
        return self._states.max_usable_produce_magic()

    def in_flight_requests_by_node(self) -> dict[int, int]:
        """Requests awaiting a response, per node (the circuit breaker's view of congestion)."""
        return self._in_flight.by_node()

    def broker_api_versions(self, node_id: int) -> dict[int, tuple[int, int]]:
        st = self._nodes.get(node_id)
        return {} if st is None or st.conn is None else dict(st.conn.broker_api_versions)

    # ------------------------------------------------------------- connecting
    def initiate_connect(self, node_id: int, now: int) -> None:
        """Start a connection attempt to the node (the caller checked ``can_connect``)."""
        node = self._node(node_id)
        if node is None:
            raise IllegalStateError(f"unknown node {node_id}")
        st = self._state_for(node)
        st.last_attempt_ms = now
        if self._first_attempt_ms < 0:
            self._first_attempt_ms = now
        chosen = st.next_address(lambda: resolve_node(node.host, node.port, node.address))
        if chosen is None:
            st.current_address = ""  # the failure belongs to the name, not the address tried before
            self._disconnected(st, now, f"cannot resolve {node.address}", unresolved=True)
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
        self._states.connecting(st)
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

    def _connect_failed(self, st: NodeState, now: int, reason: str) -> None:
        self._disconnected(st, now, reason)

    def _authentication_failed(self, st: NodeState, now: int, error: AuthenticationError) -> None:
        """A TLS handshake or SASL exchange failed: waiting callers end with ``error`` (Java's
        AuthenticationException); it is logged at WARNING with the broker and the cause, once until
        the broker accepts the client (see ``_disconnected``)."""
        self.metadata.record_authentication_failure(error)
        st.authentication_error = error
        self._disconnected(st, now, error.message, error=error)

    def add_client_error_listener(self, listener: ClientErrorListener) -> None:
        """Call ``listener(ClientErrorEvent)`` when a broker becomes unreachable or refuses the client,
        and when no broker is left connected or connecting (see ClusterConnectionStates); it runs
        inside ``poll`` on the owning thread."""
        self._states.client_error_listeners.add(listener)

    def remove_client_error_listener(self, listener: ClientErrorListener) -> None:
        self._states.client_error_listeners.remove(listener)

    def stalled_connections(self, now: int, after_ms: int) -> dict[int, int]:
        """Nodes whose connection has not been ready for ``after_ms`` ms, with since when (see ConnectionStates)."""
        return self._states.stalled_connections(now, after_ms)

    def authentication_error(self, node_id: int) -> AuthenticationError | None:
        """The TLS or SASL error of the node's last connection attempt; None once it accepted the client."""
        st = self._nodes.get(node_id)
        return None if st is None else st.authentication_error

    def _disconnected(
        self,
        st: NodeState,
        now: int,
        reason: str,
        *,
        timed_out: bool = False,
        error: Exception | None = None,
        unresolved: bool = False,
    ) -> None:
        """Close a node's connection, fail its in-flight requests and schedule the reconnect backoff."""
        self._selector.close(st.node_id)
        if st.conn is not None:
            st.conn.close()
        self._states.disconnected(st, now, reason, error, self.metadata.record_connection_failure, unresolved)
        for req in self._in_flight.clear(st.node_id):
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
        self._metadata_updater.handle_disconnect(
            st.node_id, now, error if error is not None else NetworkError(reason)
        )

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
        body = request_body(request, st.conn)
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
        end = None
        if not request.expect_response:  # in flight until its last byte is written
            end = (selector.bytes_sent(node_id) or 0) + selector.pending_bytes(node_id)
        self._in_flight.add(request, end)

    def wakeup_fd(self) -> int:
        """A socket whose byte interrupts the Sender's poll, for native threads (the compression worker)."""
        return self._selector.wakeup_fd()

    def wakeup(self) -> None:
        self._selector.wakeup()

    def wakeup_by(self, deadline_ms: int) -> None:
        """Make the polling thread look at its work by ``deadline_ms``: wake it unless its wait ends by then.

        Java's producer wakes the Sender for every new batch, so that a Sender asleep
        on a long poll sees it; but a batch that is not full becomes sendable only
        when linger.ms has passed (``RecordAccumulator.new_batch_sendable_at``), and
        while the Sender waits for an earlier deadline (another batch's linger, a
        request timeout) that wakeup only buys it a loop that finds nothing to send.
        librdkafka wakes its broker thread for new messages only when that brings the
        thread's wakeup forward, for the same reason.

        This is safe because the Sender runs its ready pass after every poll before it
        waits again (except while it waits for a producer id, when it sends nothing at
        all), and because the wait's end is published only while it waits: a
        caller that sees NOT_WAITING (the Sender is running, perhaps past this
        batch's partition in its ready pass) wakes it. The deque locks order the
        caller's new batch against the Sender's ready pass, so a caller that sees a
        published end sees the end of a wait whose ready pass either saw the batch or
        ends by ``deadline_ms`` anyway.
        """
        ends = self._wait_ends_ms
        if ends == NOT_WAITING or ends > deadline_ms:
            self._selector.wakeup()

    # ------------------------------------------------------------- metadata
    def least_loaded_node(self, now: int) -> int | None:
        """The ready node with the fewest in-flight requests; else a connecting one; else one we may connect to."""
        nodes = self.known_nodes()
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
        return self._metadata_updater.is_update_due(now)

    # ------------------------------------------------------------- poll
    def poll(self, timeout_ms: int, now: int) -> list[ClientResponse]:
        """Do network I/O for up to ``timeout_ms``; returns completed responses (callbacks already fired)."""
        if self._closed:
            raise IllegalStateError("NetworkClient is closed")
        if self._completed:
            timeout_ms = 0
        metadata_timeout = self._metadata_updater.maybe_update(now)
        timeout_ms = max(0, min(timeout_ms, metadata_timeout, self._next_deadline(now)))
        self._wait_ends_ms = self._clock() + timeout_ms
        try:
            result = self._selector.poll(timeout_ms / 1000.0)
        finally:
            self._wait_ends_ms = NOT_WAITING
        now = self._clock()
        if self._unwritten:
            self._completed += self._in_flight.complete_written(self._selector.bytes_sent, result.bytes_written, now)
        if self._probes.plaintext_probing:
            self._probes.plain_probe_events(result.received, result.disconnected, now)
        for node_id in result.connected:
            st = self._nodes.get(node_id)
            # Only an attempt still under way: one this poll already ended stays ended.
            if st is not None and st.conn is not None and st.state is ConnectionState.CONNECTING:
                self._states.move(st, ConnectionState.CHECKING_API_VERSIONS)
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
                self.metadata.record_authentication_failure(None)
                logger.debug("node %s ready; versions %s", node_id, st.conn.api_versions)
                self._states.ready(st, now)
                self._ever_ready = True
            elif st.conn.state is ConnectionState.AUTHENTICATING:
                self._states.move(st, ConnectionState.AUTHENTICATING)
            for resp in responses:
                req = self._in_flight.pop(node_id, resp.correlation_id)
                if self._metadata_updater.handle_response(
                    node_id, resp.correlation_id, resp.body, resp.size_bytes, now
                ):
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
                        self._probes.maybe_probe_tls(st, now)
                if node_id in result.handshake_failed:
                    self._authentication_failed(st, now, SslAuthenticationError(reason))
                else:
                    self._disconnected(st, now, reason)
        for probe_id, spoke_tls, detail in result.tls_probes:
            self._probes.tls_probe_done(probe_id, spoke_tls, detail)
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

    def _next_deadline(self, now: int) -> int:
        """Milliseconds until the earliest request or connection-setup timeout."""
        best = self._in_flight.next_timeout(now, 2**31, self.request_timeout_ms)
        best = self._probes.next_deadline(now, best)
        for st in self._nodes.values():
            if st.state in SETTING_UP:
                best = min(best, st.last_attempt_ms + st.setup_timeout_ms - now)
                probe_at = self._probes.plaintext_probe_at(st)
                if probe_at is not None:
                    best = min(best, probe_at - now)
            elif st.conn is not None and st.conn.reauthenticate_at_ms >= 0:
                best = min(best, st.conn.reauthenticate_at_ms - now)
        return max(0, best)

    def _handle_timeouts(self, now: int) -> None:
        self._probes.handle_timeouts(now)
        for st in list(self._nodes.values()):
            if st.state is ConnectionState.DISCONNECTED:
                continue
            self._probes.maybe_probe_plaintext(st, now)
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
            if self._in_flight.has_timed_out(st.node_id, now, self.request_timeout_ms):
                self._disconnected(st, now, "request timed out; closing the connection", timed_out=True)
                continue
            if (
                st.state is ConnectionState.READY
                and not self._in_flight.count(st.node_id)
                and st.conn is not None
                and now - st.conn.last_activity_ms > self.connections_max_idle_ms
            ):
                logger.debug("closing idle connection to node %s", st.node_id)
                st.addresses = []  # as after any established connection: resolve again next time
                self._selector.close(st.node_id)
                st.conn.close()
                self._states.move(st, ConnectionState.DISCONNECTED)
        self._metadata_updater.check_node(now)

    # ------------------------------------------------------------- blocking helpers
    def await_ready(self, node_id: int, timeout_ms: int) -> bool:
        """Poll until the node is ready (admin and CLI use; never on the Sender's hot path)."""
        return blocking.await_ready(self, node_id, timeout_ms)

    def send_and_receive(self, request: ClientRequest, timeout_ms: int) -> ClientResponse:
        """Send one request and poll until its response (admin and CLI use)."""
        return blocking.send_and_receive(self, request, timeout_ms)

    def fetch_metadata(self, topics: list[str] | None, timeout_ms: int) -> None:
        """Refresh metadata for ``topics`` (None = all) and wait for it, polling this client."""
        blocking.fetch_metadata(self, topics, timeout_ms)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._selector.close_all()
        for st in self._nodes.values():
            if st.conn is not None:
                st.conn.close()
            self._states.move(st, ConnectionState.DISCONNECTED)

