"""Talk to a transaction coordinator without a producer: find it, fence an id, end a transaction.

A two-phase commit across processes (Spark tasks write and flush, the driver
commits) needs to finish a transaction that another process opened: EndTxn with
that transaction's ``(transactional id, producer id, epoch)``, sent straight to
its coordinator, is exactly what that producer's own commit_transaction() would
have sent last. Likewise InitProducerId for an id fences every earlier producer
with it and aborts their open transaction (this is how a lost attempt is fenced).

These calls block and retry what the Java client retries (the coordinator moved,
loading, or a transaction of the id still completing), within ``timeout``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kproducer.errors import KafkaTimeoutError, error_for_code
from kproducer.network import protocol
from kproducer.network.client import ClientRequest, NetworkClient, security_options
from kproducer.network.protocol import COORDINATOR_KEY_GROUP, COORDINATOR_KEY_TRANSACTION, ApiKey

__all__ = [
    "end_transaction",
    "init_producer_id",
    "find_coordinator",
    "COORDINATOR_KEY_GROUP",
    "COORDINATOR_KEY_TRANSACTION",
]

log = logging.getLogger(__name__)

_COORDINATOR_MOVED = frozenset({15, 16})  # COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR
_RETRY = frozenset({14, 51, 7})  # COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS, REQUEST_TIMED_OUT
_BACKOFF_S = 0.05


def _client(
    bootstrap_servers: str | Iterable[str],
    timeout_ms: int,
    client_options: dict[str, Any] | None,
    config: Mapping[str, Any] | None,
) -> NetworkClient:
    """A client with the security settings of ``config`` (producer config keys: security.protocol,
    ssl.*, sasl.*), as the producer that wrote the transaction had; ``client_options``: extra
    NetworkClient keywords (``client_id``...)."""
    options: dict[str, Any] = {"client_id": "kproducer-coordinator", "request_timeout_ms": timeout_ms}
    if config:
        from kproducer.config import ProducerConfig

        cfg = ProducerConfig({**config, "bootstrap.servers": bootstrap_servers})
        options.update(security_options(cfg))
    options.update(client_options or {})
    return NetworkClient(bootstrap_servers=bootstrap_servers, **options)


def _remaining_ms(deadline: float, what: str) -> int:
    left = deadline - time.monotonic()
    if left <= 0:
        raise KafkaTimeoutError(f"{what} did not complete in time")
    return max(1, int(left * 1000))


def find_coordinator(client: NetworkClient, key: str, key_type: int, deadline: float) -> int:
    """The node id of ``key``'s coordinator (a transactional id or a group id), retrying until ``deadline``."""
    what = f"FindCoordinator for {key!r}"
    while True:
        if not client.metadata.cluster.nodes:
            client.fetch_metadata([], _remaining_ms(deadline, what))
        node = next(iter(client.metadata.cluster.nodes))
        resp = client.send_and_receive(
            ClientRequest(node, ApiKey.FIND_COORDINATOR, lambda v: protocol.build_find_coordinator_request(v, key, key_type)),
            _remaining_ms(deadline, what),
        )
        if resp.error is None and resp.response is not None:
            found = protocol.find_coordinator_result(resp.response, key)
            if found.error_code == 0:
                if client.metadata.cluster.node(found.node_id) is None:
                    client.fetch_metadata([], _remaining_ms(deadline, what))
                if client.metadata.cluster.node(found.node_id) is not None:
                    return found.node_id
            elif found.error_code not in _COORDINATOR_MOVED and found.error_code not in _RETRY:
                raise error_for_code(found.error_code, found.error_message)
        _remaining_ms(deadline, what)
        time.sleep(_BACKOFF_S)


def _coordinator_call(
    client: NetworkClient,
    transactional_id: str,
    api_key: ApiKey,
    build: Callable[[int], Any],
    deadline: float,
    what: str,
) -> Any:
    """Send one request to the id's transaction coordinator, following it when it moves."""
    node = find_coordinator(client, transactional_id, COORDINATOR_KEY_TRANSACTION, deadline)
    while True:
        resp = client.send_and_receive(ClientRequest(node, api_key, build), _remaining_ms(deadline, what))
        if resp.error is not None or resp.response is None:
            log.debug("%s: %s; finding the coordinator again", what, resp.error)
            node = find_coordinator(client, transactional_id, COORDINATOR_KEY_TRANSACTION, deadline)
            continue
        code = int(resp.response.error_code)
        if code == 0:
            return resp.response
        if code in _COORDINATOR_MOVED:
            node = find_coordinator(client, transactional_id, COORDINATOR_KEY_TRANSACTION, deadline)
        elif code not in _RETRY:
            raise error_for_code(code, f"{what}: {error_for_code(code).name}")
        _remaining_ms(deadline, what)
        time.sleep(_BACKOFF_S)


def end_transaction(
    bootstrap_servers: str | Iterable[str],
    transactional_id: str,
    producer_id: int,
    producer_epoch: int,
    *,
    commit: bool,
    timeout: float = 30.0,
    config: Mapping[str, Any] | None = None,
    client_options: dict[str, Any] | None = None,
) -> None:
    """Commit (or abort) the open transaction of ``transactional_id`` under ``(producer_id, producer_epoch)``.

    Raises the coordinator's error: ProducerFencedError / InvalidProducerEpochError
    when a newer producer took the id over, InvalidTxnStateError when the
    transaction is not in a state to be ended that way.
    """
    what = f"EndTxn({'COMMIT' if commit else 'ABORT'}) for {transactional_id!r}"
    deadline = time.monotonic() + timeout
    client = _client(bootstrap_servers, int(timeout * 1000), client_options, config)
    try:
        _coordinator_call(
            client,
            transactional_id,
            ApiKey.END_TXN,
            lambda v: protocol.build_end_txn_request(v, transactional_id, producer_id, producer_epoch, commit),
            deadline,
            what,
        )
    finally:
        client.close()


def init_producer_id(
    bootstrap_servers: str | Iterable[str],
    transactional_id: str,
    *,
    transaction_timeout_ms: int = 60_000,
    timeout: float = 30.0,
    config: Mapping[str, Any] | None = None,
    client_options: dict[str, Any] | None = None,
) -> tuple[int, int]:
    """InitProducerId for ``transactional_id``: fences every earlier producer with it, aborts its open
    transaction, and returns the new ``(producer id, epoch)``."""
    what = f"InitProducerId for {transactional_id!r}"
    deadline = time.monotonic() + timeout
    client = _client(bootstrap_servers, int(timeout * 1000), client_options, config)
    try:
        body = _coordinator_call(
            client,
            transactional_id,
            ApiKey.INIT_PRODUCER_ID,
            lambda v: protocol.build_init_producer_id_request(v, transactional_id, transaction_timeout_ms),
            deadline,
            what,
        )
        return int(body.producer_id), int(body.producer_epoch)
    finally:
        client.close()
