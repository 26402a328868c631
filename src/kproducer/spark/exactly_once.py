"""Exactly-once into Kafka from Spark: a two-phase commit over Kafka transactions (no KIP-939 needed).

Phase one runs in the tasks: each task attempt opens a transactional producer
under an id of its own (:func:`transactional_id`), sends, flushes until every
batch is acknowledged, and returns ``(transactional id, producer id, epoch)``
in its commit message **without committing**. Its producer is then closed
without ending the transaction, which stays open on the coordinator, its
records invisible to ``read_committed`` consumers.

Phase two runs in the driver's ``commit()``: Spark calls it once, with the
messages of the attempts that won (one per partition). For each, EndTxn(COMMIT)
goes straight to the transaction coordinator with that id, producer id and
epoch: exactly the last request the task's own ``commit_transaction()`` would
have sent. The ids of attempts that lost (a failed attempt that was retried, the
slower copy of a speculative task) are fenced with InitProducerId, which aborts
whatever they left open. ``abort()`` ends the winners' transactions with
EndTxn(ABORT). Flink's KafkaSink does the same, resuming the writers'
transactions through reflection into the Java client; here the protocol layer
is ours, so the driver sends the requests itself (``kproducer.coordinator``).

Streaming adds restarts: Spark re-runs the last micro-batch whose commit it did
not record in its checkpoint, and may call ``commit()`` again for a batch.
:class:`TransactionLog` keeps, in the query's checkpoint location, the batch's
transactions before they are committed and a mark once they all are. So:

* a ``commit()`` for a batch already marked committed aborts the transactions
  of the re-run instead (the batch's rows are in Kafka once already);
* at query start, a batch recorded but not marked (the driver died while
  committing) has its recorded transactions committed, then is marked;
* a micro-batch's ids depend only on the prefix, the batch id, the partition
  and the attempt, so the re-run of a batch whose tasks wrote but whose
  commit never started re-uses their ids, and its InitProducerId aborts what
  the dead run left open.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kproducer.errors import KafkaError

logger = logging.getLogger(__name__)

__all__ = [
    "TransactionLog",
    "TxnCommittable",
    "TransactionCommitError",
    "commit_transactions",
    "abort_transactions",
    "fence_losers",
    "transactional_id",
]


def coordinator_timeout_s(config: Mapping[str, str]) -> float:
    """How long the driver keeps retrying one EndTxn or InitProducerId before giving up on it.

    The producer config's ``max.block.ms`` (default 60 s), the bound Java's
    ``commitTransaction()`` and ``initTransactions()`` block for: retries cover a
    coordinator that moved, is loading, or is still writing markers
    (CONCURRENT_TRANSACTIONS), and a broker that drops the connection.
    """
    from kproducer.config import ProducerConfig

    return ProducerConfig(dict(config)).max_block_ms / 1000.0


class TransactionCommitError(KafkaError):
    """The driver could not commit a task's transaction: its records are not (or not all) visible."""


@dataclass(slots=True, frozen=True)
class TxnCommittable:
    """What a task attempt hands the driver: enough to end its transaction from another process."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partition_id: int
    attempt: int

    def to_json(self) -> dict[str, Any]:
        return {
            "transactional_id": self.transactional_id,
            "producer_id": self.producer_id,
            "producer_epoch": self.producer_epoch,
            "partition_id": self.partition_id,
            "attempt": self.attempt,
        }

    @classmethod
    def from_json(cls, raw: Mapping[str, Any]) -> TxnCommittable:
        return cls(
            str(raw["transactional_id"]),
            int(raw["producer_id"]),
            int(raw["producer_epoch"]),
            int(raw["partition_id"]),
            int(raw["attempt"]),
        )


def transactional_id(prefix: str, scope: str, partition_id: int, attempt: int) -> str:
    """``prefix-scope-partition-attempt``: ``scope`` is a batch write's token or ``b<micro-batch id>``."""
    return f"{prefix}-{scope}-{partition_id}-{attempt}"


def coordinator_client_options(config: Mapping[str, str]) -> tuple[str, dict[str, Any]]:
    """The bootstrap servers and the client id of the driver's coordinator calls.

    The calls also get the whole producer config (``config=``), from which the
    coordinator client takes the same security settings the tasks' producers had.
    """
    from kproducer.config import ProducerConfig

    cfg = ProducerConfig(dict(config))
    options: dict[str, Any] = {"client_id": f"{cfg.client_id or 'kproducer'}-spark-commit"}
    servers = cfg.bootstrap_servers
    return (servers if isinstance(servers, str) else ",".join(servers)), options


def commit_transactions(
    config: Mapping[str, str], txns: Sequence[TxnCommittable], timeout: float | None = None
) -> None:
    """EndTxn(COMMIT) for each transaction; raise :class:`TransactionCommitError` naming what failed.

    Every transaction is tried even when one fails, so that one expired
    transaction does not leave the others open until their own timeout.
    """
    _end_all(config, txns, commit=True, timeout=timeout)


def abort_transactions(
    config: Mapping[str, str], txns: Sequence[TxnCommittable], timeout: float | None = None
) -> None:
    """EndTxn(ABORT) for each transaction (a fenced or already ended one is fine: it is not visible)."""
    from kproducer.coordinator import end_transaction

    servers, options = coordinator_client_options(config)
    timeout = coordinator_timeout_s(config) if timeout is None else timeout
    for t in txns:
        try:
            end_transaction(
                servers, t.transactional_id, t.producer_id, t.producer_epoch,
                commit=False, timeout=timeout, config=dict(config), client_options=options,
            )
        except KafkaError as e:
            # Fenced, or already aborted by its timeout: either way its records stay invisible.
            logger.info("abort of %s (producer %d, epoch %d): %s", t.transactional_id, t.producer_id, t.producer_epoch, e)


def _end_all(
    config: Mapping[str, str], txns: Sequence[TxnCommittable], *, commit: bool, timeout: float | None
) -> None:
    from kproducer.coordinator import end_transaction

    servers, options = coordinator_client_options(config)
    timeout = coordinator_timeout_s(config) if timeout is None else timeout
    failed: list[tuple[TxnCommittable, BaseException]] = []
    done = 0
    for t in txns:
        try:
            end_transaction(
                servers, t.transactional_id, t.producer_id, t.producer_epoch,
                commit=commit, timeout=timeout, config=dict(config), client_options=options,
            )
            done += 1
        except KafkaError as e:
            failed.append((t, e))
    if failed:
        lines = "; ".join(
            f"task {t.partition_id} attempt {t.attempt} ({t.transactional_id}, producer {t.producer_id}, "
            f"epoch {t.producer_epoch}): {type(e).__name__}: {e}"
            for t, e in failed
        )
        raise TransactionCommitError(
            f"could not commit {len(failed)} of {len(txns)} task transactions ({done} committed); "
            f"a fenced or invalid-epoch error means the transaction was aborted, typically because it "
            f"outlived transaction.timeout.ms before the commit: {lines}"
        )


def fence_losers(
    config: Mapping[str, str],
    prefix: str,
    scope: str,
    winners: Iterable[tuple[int, int]],
    timeout: float | None = None,
) -> list[str]:
    """InitProducerId for the ids of attempts that did not win, which aborts what they left open.

    ``winners`` are ``(partition id, attempt)`` pairs. Spark numbers a task's
    attempts 0, 1, 2... whether retries or speculative copies, and runs at most
    one speculative copy at a time; so for a winner with attempt k, every loser
    is below k or is k + 1. Returns the fenced ids.
    """
    from kproducer.coordinator import init_producer_id

    servers, options = coordinator_client_options(config)
    timeout = coordinator_timeout_s(config) if timeout is None else timeout
    txn_timeout = int(dict(config).get("transaction.timeout.ms", "60000"))
    fenced: list[str] = []
    for partition_id, won in winners:
        for attempt in range(won + 2):
            if attempt == won:
                continue
            tid = transactional_id(prefix, scope, partition_id, attempt)
            try:
                init_producer_id(servers, tid, transaction_timeout_ms=txn_timeout, timeout=timeout, config=dict(config), client_options=options)
                fenced.append(tid)
            except KafkaError as e:
                logger.warning("could not fence %s (its transaction, if any, ends at its timeout): %s", tid, e)
    return fenced


class TransactionLog:
    """The streaming sink's durable record of each micro-batch's transactions, in the checkpoint location.

    ``<checkpoint>/kproducer-transactions/<batch>.prepared`` holds the
    transactions before any is committed; ``<batch>.committed`` marks that all
    were. Both are written to a temporary file and renamed, so a reader sees
    a whole file or none.
    """

    KEEP = 100

    def __init__(self, checkpoint_location: str) -> None:
        path = checkpoint_location
        if path.startswith("file://"):
            path = path[len("file://") :]
        elif path.startswith("file:"):
            path = path[len("file:") :]
        elif "://" in path:
            from kproducer.errors import ConfigError

            raise ConfigError(
                f"checkpointLocation {checkpoint_location!r}: the exactly-once sink keeps its transaction log "
                "in the checkpoint location and can only write to a local or mounted path (file:// or a plain path)"
            )
        self.directory = os.path.join(path, "kproducer-transactions")

    def _path(self, batch_id: int, kind: str) -> str:
        return os.path.join(self.directory, f"{batch_id}.{kind}")

    def _write(self, path: str, text: str) -> None:
        os.makedirs(self.directory, exist_ok=True)
        tmp = f"{path}.tmp-{os.getpid()}"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)

    def is_committed(self, batch_id: int) -> bool:
        return os.path.exists(self._path(batch_id, "committed"))

    def prepare(self, batch_id: int, txns: Sequence[TxnCommittable]) -> None:
        self._write(self._path(batch_id, "prepared"), json.dumps([t.to_json() for t in txns]))

    def mark_committed(self, batch_id: int) -> None:
        self._write(self._path(batch_id, "committed"), json.dumps({"committed_at": time.time()}))
        self._trim(batch_id)

    def pending(self) -> dict[int, list[TxnCommittable]]:
        """Batches recorded as prepared but never marked committed (the driver stopped in between)."""
        out: dict[int, list[TxnCommittable]] = {}
        if not os.path.isdir(self.directory):
            return out
        for name in os.listdir(self.directory):
            stem, _, kind = name.partition(".")
            if kind != "prepared" or not stem.isdigit():
                continue
            batch_id = int(stem)
            if self.is_committed(batch_id):
                continue
            with open(os.path.join(self.directory, name), encoding="utf-8") as fh:
                out[batch_id] = [TxnCommittable.from_json(r) for r in json.load(fh)]
        return out

    def _trim(self, latest: int) -> None:
        for name in os.listdir(self.directory):
            stem = name.partition(".")[0]
            if stem.isdigit() and int(stem) < latest - self.KEEP:
                try:
                    os.unlink(os.path.join(self.directory, name))
                except OSError:
                    pass
