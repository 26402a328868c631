"""Producer id, epoch and sequences (idempotence), and the transaction state machine.

As in the Java client's ``TransactionManager``, one object holds both halves
(:class:`TransactionManager`, in ``manager``); the pieces it is made of, one module each:

* ``state``: :class:`TransactionState` (Java's ``TransactionManager.State``), the table of
  allowed transitions :data:`ALLOWED_PREVIOUS_STATES` and what a user may call next in each
  state, :data:`ALLOWED_NEXT_CALLS`.
* ``sequences``: the idempotent producer's per-partition sequences and in-flight batches
  (Java's ``TxnPartitionMap``), which the accumulator's drain and the Sender consult.
* ``requests``: a queued coordinator request (:class:`TxnRequest`), the order requests go
  out in (:class:`Priority`) and what a caller waits on (:class:`TransactionalRequestResult`).
* ``error_classes``: how each broker error is handled, as tables: :data:`RETRY_ERRORS`,
  :data:`COORDINATOR_MOVED_ERRORS`, :data:`ABORTABLE_ERRORS` and :data:`FATAL_ERRORS` (the
  Java client's classification).
* ``group_metadata``: :class:`GroupMetadata` for ``send_offsets_to_transaction`` (KIP-447),
  read from a group id or a consumer's group metadata.
"""

from kproducer.errors import ABORTABLE_ERRORS
from kproducer.transaction_manager.error_classes import (
    COORDINATOR_MOVED_ERRORS,
    EPOCH_BUMP_PRODUCE_ERRORS,
    FATAL_ERRORS,
    FATAL_PRODUCE_ERRORS,
    RETRY_ERRORS,
)
from kproducer.transaction_manager.group_metadata import GroupMetadata, group_metadata_from, normalize_offsets
from kproducer.transaction_manager.manager import TransactionManager
from kproducer.transaction_manager.requests import Priority, TransactionalRequestResult, TxnRequest
from kproducer.transaction_manager.sequences import (
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    TxnPartitionMap,
)
from kproducer.transaction_manager.state import ALLOWED_NEXT_CALLS, ALLOWED_PREVIOUS_STATES, TransactionState

__all__ = [
    "TransactionManager",
    "TransactionState",
    "TransactionalRequestResult",
    "GroupMetadata",
    "group_metadata_from",
    "normalize_offsets",
    "ALLOWED_PREVIOUS_STATES",
    "ALLOWED_NEXT_CALLS",
    "RETRY_ERRORS",
    "COORDINATOR_MOVED_ERRORS",
    "ABORTABLE_ERRORS",
    "FATAL_ERRORS",
    "FATAL_PRODUCE_ERRORS",
    "EPOCH_BUMP_PRODUCE_ERRORS",
    "NO_PRODUCER_ID",
    "NO_PRODUCER_EPOCH",
    "NO_SEQUENCE",
    "Priority",
    "TxnRequest",
    "TxnPartitionMap",
]
