"""A queued coordinator request and what a caller waits on (Java's ``TxnRequestHandler`` and
``TransactionalRequestResult``), and the order requests go out in (``TransactionManager.Priority``).
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kproducer.errors import KafkaTimeoutError
from kproducer.network.api_keys import COORDINATOR_KEY_TRANSACTION, ApiKey
from kproducer.structs import TopicPartition


class Priority(enum.IntEnum):
    """Coordinator requests go out in this order (Java's TransactionManager.Priority)."""

    FIND_COORDINATOR = 0
    INIT_PRODUCER_ID = 1
    ADD_PARTITIONS_OR_OFFSETS = 2
    END_TXN = 3


# ---------------------------------------------------------------------- results
class TransactionalRequestResult:
    """What a caller waits on for init, commit, abort or send_offsets (one latch, one error).

    ``acked`` once a caller's wait saw the outcome: until then a call that timed out is
    still pending, and calling the same method again waits on this same result (Java's
    ``TransactionalRequestResult.isAcked``).
    """

    __slots__ = ("operation", "_event", "error", "acked")

    def __init__(self, operation: str) -> None:
        self.operation = operation
        self._event = threading.Event()
        self.error: BaseException | None = None
        self.acked = False

    def done(self, error: BaseException | None = None) -> None:
        if not self._event.is_set():
            self.error = error
            self._event.set()

    @property
    def is_completed(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None) -> None:
        """Wait; raise the operation's error, or KafkaTimeoutError (the call may then be repeated)."""
        if not self._event.wait(timeout):
            raise KafkaTimeoutError(
                f"{self.operation}() did not finish within {timeout:.3f} s; call {self.operation}() again "
                "to keep waiting for the same operation"
            )
        self.acked = True
        if self.error is not None:
            raise self.error


@dataclass(eq=False)
class TxnRequest:
    """One queued coordinator request: how to build it, where it goes, what to do with the answer."""

    name: str
    api_key: ApiKey
    priority: Priority
    build: Callable[[int], Any]
    on_response: Callable[[Any], None]
    coordinator: int | None = COORDINATOR_KEY_TRANSACTION  # key type, None: any broker
    coordinator_key: str | None = None
    result: TransactionalRequestResult | None = None
    retry_at_ms: int = 0
    attempts: int = 0
    is_end_txn: bool = False
    seq: int = field(default=0)
    #: AddPartitionsToTxn: the partitions it adds (grows with partitions found before it is sent).
    partitions: set[TopicPartition] | None = None
