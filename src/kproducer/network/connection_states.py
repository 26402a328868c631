"""Connection states: the one enum, its allowed transitions, and the per-node bookkeeping.

Modelled on the Java client's ``ConnectionState`` and ``ClusterConnectionStates``. A broker
connection moves DISCONNECTED -> CONNECTING -> CHECKING_API_VERSIONS -> (AUTHENTICATING ->)
READY, and back to DISCONNECTED from any state. Both the sans-I/O ``KafkaConnection`` and the
``NetworkClient``'s view of each node move through :func:`transition`, so an impossible move
(READY straight from CONNECTING, say) fails loudly instead of leaving two copies of the state
disagreeing.

A repeated state is allowed where the protocol repeats a phase: a SASL exchange of several
round trips stays AUTHENTICATING, a KIP-368 re-authentication completes on a READY connection,
and a connection attempt that fails before it starts (an unresolvable name) is DISCONNECTED
again.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from kproducer.common import ExponentialBackoff
from kproducer.errors import AuthenticationError, IllegalStateError
from kproducer.network.api_keys import ApiKey
from kproducer.network.client_error_event import ClientErrorEvent, ClientErrorKind, ClientErrorListeners

if TYPE_CHECKING:
    from kproducer.network.connection import KafkaConnection

__all__ = ["ClusterConnectionStates", "ConnectionState", "NodeState", "describe_node", "transition"]

# The NetworkClient's log lines keep its logger name, which operators filter on.
logger = logging.getLogger("kproducer.network.client")


class ConnectionState(enum.Enum):
    DISCONNECTED = "disconnected"
    CONNECTING = "connecting"
    CHECKING_API_VERSIONS = "checking_api_versions"
    AUTHENTICATING = "authenticating"
    READY = "ready"


_D, _C, _V, _A, _R = (
    ConnectionState.DISCONNECTED,
    ConnectionState.CONNECTING,
    ConnectionState.CHECKING_API_VERSIONS,
    ConnectionState.AUTHENTICATING,
    ConnectionState.READY,
)
# From each state, the states it may move to.
_ALLOWED: dict[ConnectionState, frozenset[ConnectionState]] = {
    _D: frozenset({_C, _D}),
    _C: frozenset({_V, _D}),
    _V: frozenset({_A, _R, _D}),
    _A: frozenset({_A, _R, _D}),
    _R: frozenset({_R, _D}),
}

# The states of a connection that is being set up (socket, TLS handshake, ApiVersions, SASL).
SETTING_UP = frozenset({_C, _V, _A})


def transition(current: ConnectionState, target: ConnectionState, node_id: int) -> ConnectionState:
    """``target``, if a connection in ``current`` may move there; IllegalStateError otherwise."""
    if target not in _ALLOWED[current]:
        raise IllegalStateError(
            f"connection to node {node_id} cannot move from {current.value} to {target.value}"
        )
    return target


@dataclass(slots=True)
class NodeState:
    """What the NetworkClient knows of one node's connection (Java's NodeConnectionState)."""

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
    # The TLS or SASL failure of the last attempt (None once the node accepted the client): the
    # Sender fails this node's queued batches with it instead of letting them wait for
    # delivery.timeout.ms, as records waiting for metadata already fail with it.
    authentication_error: AuthenticationError | None = None
    # Whether this unreachable period's WARNING already said the node refused the client: a refusal
    # that follows plain connection failures is a new cause and is warned about once more.
    refusal_warned: bool = False

    def next_address(
        self, resolve: Callable[[], list[tuple[int, tuple[str, int]]]]
    ) -> tuple[int, tuple[str, int]] | None:
        """The address for this connection attempt: each in turn, then ``resolve()`` the name again.

        As Java's ClusterConnectionStates: after a fresh resolution the address tried last is
        skipped when there is another one, so a dead address is not tried twice in a row.
        """
        if not self.addresses:
            self.addresses = resolve()
            self.address_index = 0
            if not self.addresses:
                return None
            if len(self.addresses) > 1 and self.addresses[0] == self.last_address:
                self.address_index = 1
        chosen = self.addresses[self.address_index]
        self.last_address = chosen
        self.address_index += 1
        if self.address_index >= len(self.addresses):
            self.addresses = []
        return chosen


class ClusterConnectionStates:
    """Every node's NodeState with its reconnect backoff and connection setup timeout (both
    exponential, as Java's), and a version bumped on each state change (a cache key for answers
    computed from all connections, such as the usable record format).

    ``client_error_listeners`` hear of each broker that becomes unreachable (when its WARNING is
    logged) and, once, of the moment no broker is connected or connecting any more; they are
    called on the thread that drives the client (the producer's I/O thread).
    """

    __slots__ = (
        "nodes", "version", "client_error_listeners", "_reconnect", "_setup_timeout", "_magic_cache", "_all_down",
    )  # fmt: skip

    def __init__(self, reconnect: ExponentialBackoff, setup_timeout: ExponentialBackoff) -> None:
        self.nodes: dict[int, NodeState] = {}
        self.version = 0
        self._reconnect = reconnect
        self._setup_timeout = setup_timeout
        # (version, magic): max_usable_produce_magic() as of that version of the states.
        self._magic_cache = (-1, 2)
        self.client_error_listeners = ClientErrorListeners()
        # ALL_BROKERS_DOWN was reported and no connection became ready since (librdkafka reports it
        # once when the last broker goes down, not on every failed attempt after).
        self._all_down = False

    def move(self, st: NodeState, target: ConnectionState) -> None:
        """Move a node's connection to ``target`` (checked by :func:`transition`)."""
        st.state = transition(st.state, target, st.node_id)
        self.version += 1

    def connecting(self, st: NodeState) -> None:
        """A connection attempt started: its setup timeout grows with the failed attempts before it."""
        self.move(st, ConnectionState.CONNECTING)
        st.setup_timeout_ms = self._setup_timeout.backoff(st.failed_attempts)

    def ready(self, st: NodeState, now: int) -> None:
        """Connected and authenticated: the failed attempts (and the backoff they grew) are forgotten."""
        self.move(st, ConnectionState.READY)
        self._all_down = False
        st.authentication_error = None
        st.refusal_warned = False
        if st.unreachable_since_ms >= 0:
            logger.warning(
                "%s is reachable again after %.1f s and %d failed connection attempts",
                describe_node(st),
                (now - st.unreachable_since_ms) / 1000.0,
                st.failed_attempts,
            )
            st.unreachable_since_ms = -1
        st.failed_attempts = 0

    def disconnected(
        self,
        st: NodeState,
        now: int,
        reason: str,
        error: Exception | None,
        record_failure: Callable[[str, str], None],
        unresolved: bool = False,
    ) -> None:
        """The connection is closed: schedule the reconnect backoff; a failed attempt goes to
        ``record_failure(address, reason)``. The first failure of an outage is logged at WARNING,
        and so is the first refusal (TLS or SASL) that follows plain failures in it; the rest at DEBUG.
        Each WARNING is also a client error event (``unresolved``: the host name did not resolve)."""
        was_ready = st.state is ConnectionState.READY
        if st.state in (ConnectionState.CHECKING_API_VERSIONS, ConnectionState.AUTHENTICATING, ConnectionState.READY):
            # It had connected: resolve the name again next time, its addresses may have changed (as Java).
            st.addresses = []
        self.move(st, ConnectionState.DISCONNECTED)
        if was_ready:
            st.failed_attempts = 0
        st.reconnect_backoff_ms = self._reconnect.backoff(st.failed_attempts)
        st.failed_attempts += 1
        if was_ready:
            logger.info("node %s (%s) disconnected: %s", st.node_id, st.current_address, reason)
            return
        record_failure(st.current_address or f"{st.host}:{st.port}", reason)
        refused = isinstance(error, AuthenticationError)
        if st.unreachable_since_ms < 0 or (refused and not st.refusal_warned):
            if st.unreachable_since_ms < 0:
                # Since the failed attempt began: a setup that timed out was stalled from its start.
                st.unreachable_since_ms = st.last_attempt_ms if 0 <= st.last_attempt_ms <= now else now
            # A refusal can follow a plain failure in one outage: a TLS 1.3 listener that requires a
            # client certificate checks it after the client's handshake is done, and may close before
            # its alert is read, so that attempt looks like a dropped connection (TLS 1.3, RFC 8446).
            st.refusal_warned = refused
            logger.warning(
                "%s %s: %s; retrying with backoff up to %d ms (reconnect.backoff.max.ms)",
                describe_node(st),
                "refused this client" if refused else "is unreachable",
                reason,
                self._reconnect.maximum,
            )
            if self.client_error_listeners:
                self._report(st, reason, error, refused, unresolved)
        else:
            logger.debug("%s still unreachable: %s", describe_node(st), reason)

    def _report(self, st: NodeState, reason: str, error: Exception | None, refused: bool, unresolved: bool) -> None:
        """Tell the listeners that ``st`` became unreachable, and, the first time nothing is left, that
        every broker is down."""
        if refused:
            kind = ClientErrorKind.AUTHENTICATION
        elif unresolved:
            kind = ClientErrorKind.RESOLVE
        else:
            kind = ClientErrorKind.TRANSPORT
        address = st.current_address or f"{st.host}:{st.port}"
        self.client_error_listeners.notify(
            ClientErrorEvent(kind, st.node_id, address, f"{describe_node(st)}: {reason}", error)
        )
        # Every broker is down when none is connected or connecting and none is left untried (a second
        # bootstrap server not tried yet may well be up): librdkafka's "N/N brokers are down".
        if self._all_down or any(
            n.state is ConnectionState.READY or n.state in SETTING_UP or n.last_attempt_ms < 0
            for n in self.nodes.values()
        ):
            return
        self._all_down = True
        down = sum(1 for n in self.nodes.values() if n.unreachable_since_ms >= 0)
        self.client_error_listeners.notify(
            ClientErrorEvent(
                ClientErrorKind.ALL_BROKERS_DOWN,
                None,
                "",
                f"{down}/{len(self.nodes)} brokers are unreachable and none is connected or connecting",
            )
        )

    def max_usable_produce_magic(self) -> int:
        """The record format every connected broker accepts: v2 unless one only speaks Produce v0–v2.

        Produce v3+ carries v2 batches, v2 carries v1 message sets, v0/v1 carry v0 (as Java's
        ApiVersions.maxUsableProduceMagic). Unknown (not yet connected) brokers do not lower it.
        """
        # Asked for every new batch: computed again only after a connection changed state.
        cached = self._magic_cache
        if cached[0] == self.version:
            return cached[1]
        magic = 2
        for st in self.nodes.values():
            if st.conn is None or st.state is not ConnectionState.READY:
                continue
            v = st.conn.api_version(ApiKey.PRODUCE)
            if v is not None and v < 3:
                magic = min(magic, 1 if v == 2 else 0)
        self._magic_cache = (self.version, magic)
        return magic

    def is_ready(self, node_id: int) -> bool:
        st = self.nodes.get(node_id)
        return st is not None and st.state is ConnectionState.READY

    def is_connecting(self, node_id: int) -> bool:
        st = self.nodes.get(node_id)
        return st is not None and st.state in SETTING_UP

    def is_gone_or_disconnected(self, node_id: int) -> bool:
        """The node has no state (forgotten, or never known) or is disconnected."""
        st = self.nodes.get(node_id)
        return st is None or st.state is ConnectionState.DISCONNECTED

    def stalled_connections(self, now: int, after_ms: int) -> dict[int, int]:
        """Nodes whose connection has not been ready for ``after_ms``: node id -> since when.

        A node counts from its first failed attempt (refused, setup timeout, TLS or SASL
        failure) or from the start of a setup still in progress (TCP connect, ApiVersions,
        SASL), until a connection becomes ready. A node that was ready and was closed since
        (idle, or no longer needed) does not count.
        """
        stalled: dict[int, int] = {}
        for node_id, st in self.nodes.items():
            if st.state is ConnectionState.READY:
                continue
            since = st.unreachable_since_ms
            if st.state in SETTING_UP and st.last_attempt_ms >= 0 and (since < 0 or st.last_attempt_ms < since):
                since = st.last_attempt_ms
            if since >= 0 and now - since >= after_ms:
                stalled[node_id] = since
        return stalled

    def can_connect(self, st: NodeState, now: int) -> bool:
        """Disconnected, and its reconnect backoff over (or never tried)."""
        return st.state is ConnectionState.DISCONNECTED and (
            st.last_attempt_ms < 0 or now - st.last_attempt_ms >= st.reconnect_backoff_ms
        )

    def connection_delay(self, node_id: int, now: int) -> int:
        """Milliseconds before a connection attempt to the node is allowed (0 = now)."""
        st = self.nodes.get(node_id)
        if st is None or st.last_attempt_ms < 0:
            return 0
        if st.state is ConnectionState.DISCONNECTED:
            return max(0, st.last_attempt_ms + st.reconnect_backoff_ms - now)
        return 2**62

    def is_connection_failed(self, node_id: int) -> bool:
        st = self.nodes.get(node_id)
        return st is not None and st.state is ConnectionState.DISCONNECTED and st.failed_attempts > 0


def describe_node(st: NodeState) -> str:
    """``broker 1 (10.0.0.5:9092)`` or, before metadata named it, ``bootstrap server kafka:9092 (10.0.0.5:9092)``."""
    address = st.current_address or f"{st.host}:{st.port}"
    if st.node_id < 0:
        name = f"{st.host}:{st.port}" if st.host else address
        return f"bootstrap server {name}" + (f" ({address})" if address != name else "")
    return f"broker {st.node_id} ({address})"
