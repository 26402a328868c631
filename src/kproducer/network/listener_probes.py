"""Probes that tell a wrong ``security.protocol`` from a broker that is merely down.

A plaintext client talking to a TLS listener, or a TLS client talking to a plaintext one, sees
only a closed connection or a handshake that never ends. The NetworkClient then asks the same
port once, on a separate connection, in the other protocol: a TLS handshake that completes (or a
TLS alert) proves a TLS listener, a valid ApiVersions answer a plaintext one. Only such proof ends
the waiting records with an SslAuthenticationError naming ``security.protocol``; anything else
proves nothing and the connection attempts go on as before. librdkafka only logs the suspicion
("might be caused by incorrect security.protocol configuration") and keeps retrying.
"""

from __future__ import annotations

import itertools
import logging
from typing import TYPE_CHECKING

from kproducer.errors import SslAuthenticationError
from kproducer.network.connection import KafkaConnection
from kproducer.network.connection_states import ConnectionState, NodeState
from kproducer.network.dns import format_address

if TYPE_CHECKING:
    from collections.abc import Callable

    from kproducer.common import ExponentialBackoff
    from kproducer.errors import AuthenticationError
    from kproducer.metadata import Metadata
    from kproducer.network.selector import Selector

__all__ = ["ListenerProbes", "PLAIN_PROBE_AFTER_MS"]

# The NetworkClient's log lines keep its logger name, which operators filter on.
logger = logging.getLogger("kproducer.network.client")

# A TLS handshake without an answer for this long gets a plaintext ApiVersions probe of its port (a
# TLS broker answers a ClientHello in milliseconds; a plaintext one may wait for the "request" the
# ClientHello's bytes announce). See ListenerProbes.maybe_probe_plaintext.
PLAIN_PROBE_AFTER_MS = 1000


class ListenerProbes:
    """The probes under way for one NetworkClient, and the addresses already probed (each once).

    The client hands over what a probe needs: its Selector (probes are connections of their own
    on it), its node states, its connection setup timeout, its metadata (where a proven wrong
    protocol is recorded), whether it speaks TLS and SASL, and ``authentication_failed(state,
    now, error)``, which ends a node's stalled handshake with the error.
    """

    def __init__(
        self,
        *,
        selector: Selector,
        nodes: dict[int, NodeState],
        setup_timeout: ExponentialBackoff,
        metadata: Metadata,
        client_id: str,
        max_receive_size: int,
        tls: bool,
        sasl: bool,
        authentication_failed: Callable[[NodeState, int, AuthenticationError], None],
    ) -> None:
        self._selector = selector
        self._nodes = nodes
        self._setup_timeout = setup_timeout
        self._metadata = metadata
        self._client_id = client_id
        self._max_receive_size = max_receive_size
        self._tls = tls
        self._sasl = sasl
        self._authentication_failed = authentication_failed
        # TLS probes under way: probe id -> (node id, address "ip:port", deadline ms).
        self._tls_probes: dict[int, tuple[int, str, int]] = {}
        self._tls_probed: set[str] = set()
        # Plaintext ApiVersions probes: id -> (node id, address, deadline, the probe's own sans-I/O
        # connection).
        self._plain_probes: dict[int, tuple[int, str, int, KafkaConnection]] = {}
        self._plain_probed: set[str] = set()
        self._plain_probe_ids = itertools.count(-(1 << 41), -1)

    @property
    def plaintext_probing(self) -> bool:
        return bool(self._plain_probes)

    # ------------------------------------------------------------- TLS probes (plaintext clients)
    def maybe_probe_tls(self, st: NodeState, now: int) -> None:
        """A plaintext connection was closed before the broker answered its first request
        (ApiVersions): ask once, on a separate connection, whether that port answers TLS.

        A TLS listener drops plaintext bytes, often without a word (stunnel and OpenSSL-based
        listeners send no alert), so a bare close would only ever end in a timeout at max.block.ms.
        A closed connection alone is not proof (a broker may be restarting), but a port that
        completes a TLS handshake (or answers it with a TLS alert) is a TLS listener: then the
        records fail at once with an error naming security.protocol.
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
        self._tls_probes[probe_id] = (st.node_id, address, now + self._setup_timeout.initial)

    def tls_probe_done(self, probe_id: int, spoke_tls: bool, detail: str) -> None:
        entry = self._tls_probes.pop(probe_id, None)
        if entry is None:
            return
        node_id, address, _deadline = entry
        if not spoke_tls:
            logger.debug("TLS probe of %s: not a TLS listener (%s)", address, detail)
            return
        st = self._nodes.get(node_id)
        name = f"broker {node_id}" if node_id >= 0 else "bootstrap server"
        if st is not None and st.host and format_address(st.host, st.port) != address:
            name += f" {format_address(st.host, st.port)}"
        configured, wanted = ("SASL_PLAINTEXT", "SASL_SSL") if self._sasl else ("PLAINTEXT", "SSL")
        who = f"{name} ({address})"
        cause = (
            f"closed the connection during the first request (ApiVersions) and that port answers a TLS "
            f"handshake ({detail}): the listener is TLS but security.protocol is {configured}; set "
            f"security.protocol={wanted} (and ssl.truststore.location if its CA is not a system one)"
        )
        logger.warning("%s refused this client: it %s", who, cause)
        self._metadata.record_authentication_failure(SslAuthenticationError(f"{who} {cause}"))

    @staticmethod
    def _claim_probe(st: NodeState, probed: set[str]) -> tuple[int, str, int, str] | None:
        """(family, ip, port, "ip:port") of the node's last address, marked as probed; None if it was."""
        if st.last_address is None:
            return None
        family, (ip, port) = st.last_address
        address = format_address(ip, port)
        if address in probed:
            return None
        probed.add(address)
        return family, ip, port, address

    # ------------------------------------------------------------- plaintext probes (TLS clients)
    def plaintext_probe_at(self, st: NodeState) -> int | None:
        """When a TLS client's stalled handshake with ``st`` gets its plaintext probe; None if it
        gets none (not a TLS client, not connecting, or that address was probed)."""
        if not self._tls or st.state is not ConnectionState.CONNECTING:
            return None
        if st.last_address is None or format_address(*st.last_address[1]) in self._plain_probed:
            return None
        return st.last_attempt_ms + PLAIN_PROBE_AFTER_MS

    def maybe_probe_plaintext(self, st: NodeState, now: int) -> None:
        """A TLS handshake has had no answer for a while: ask its port, once and on a separate
        connection, for ApiVersions in plaintext.

        A plaintext Kafka listener reads a ClientHello as the start of a request of about 369 MB:
        Apache Kafka closes at once (larger than socket.request.max.bytes), but a broker that waits
        for the rest would hold the handshake until socket.connection.setup.timeout.ms. A valid
        ApiVersions answer proves a plaintext listener; anything else (a close, silence, bytes that
        are no Kafka response) proves nothing and the handshake runs on as before.
        """
        due = self.plaintext_probe_at(st)
        if due is None or now < due or not self._selector.is_handshaking(st.node_id):
            return
        target = self._claim_probe(st, self._plain_probed)
        if target is None:
            return
        family, ip, port, address = target
        conn = KafkaConnection(st.node_id, self._client_id, max_receive_size=self._max_receive_size)
        conn.start_connect(now)
        conn.connection_made(now)
        probe_id = next(self._plain_probe_ids)
        try:
            self._selector.connect(probe_id, ip, port, family)
        except OSError as e:
            logger.debug("plaintext probe of %s could not start: %s", address, e)
            return
        self._selector.send(probe_id, conn.data_to_send())
        self._plain_probes[probe_id] = (st.node_id, address, now + self._setup_timeout.initial, conn)

    def plain_probe_events(
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
        configured, wanted = ("SASL_SSL", "SASL_PLAINTEXT") if self._sasl else ("SSL", "PLAINTEXT")
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
        self._metadata.record_authentication_failure(error)

    # ------------------------------------------------------------- deadlines
    def next_deadline(self, now: int, best: int) -> int:
        """``best`` or the time until the earliest probe deadline, whichever is less."""
        for _node, _address, deadline in self._tls_probes.values():
            best = min(best, deadline - now)
        for _node, _address, deadline, _conn in self._plain_probes.values():
            best = min(best, deadline - now)
        return best

    def handle_timeouts(self, now: int) -> None:
        if self._tls_probes:
            for probe_id, (_node, _address, deadline) in list(self._tls_probes.items()):
                if now >= deadline:  # a port that stays silent after a ClientHello is no TLS listener
                    self._selector.close(probe_id)
                    self.tls_probe_done(probe_id, False, "no answer to a ClientHello")
        if self._plain_probes:
            for probe_id, (_node, _address, deadline, _conn) in list(self._plain_probes.items()):
                if now >= deadline:
                    self._end_plain_probe(probe_id)
