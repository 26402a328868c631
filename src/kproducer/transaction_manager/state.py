"""The transaction state machine: Java's ``TransactionManager.State`` and its allowed transitions.

One enum, one table of the states each state may be entered from, and what a user may call
next in each state (the text of the errors that refuse a call). The transition itself is
:meth:`kproducer.transaction_manager.TransactionManager._transition_to`, which checks this
table and is the only place a state changes.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping


class TransactionState(enum.Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING_TRANSACTION = "COMMITTING_TRANSACTION"
    ABORTING_TRANSACTION = "ABORTING_TRANSACTION"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


S = TransactionState

#: For each state, the states it may be entered from (Java's ``TransactionManager.State.isTransitionValid``).
#: FATAL_ERROR may be entered from any state. Every other transition is refused with IllegalStateError.
ALLOWED_PREVIOUS_STATES: Mapping[TransactionState, frozenset[TransactionState]] = {
    S.UNINITIALIZED: frozenset(),
    # init_transactions(); after an abort that must bump the epoch (KIP-360); the idempotent
    # producer's new producer id or epoch (from READY).
    S.INITIALIZING: frozenset({S.UNINITIALIZED, S.ABORTING_TRANSACTION, S.READY}),
    S.READY: frozenset({S.INITIALIZING, S.COMMITTING_TRANSACTION, S.ABORTING_TRANSACTION}),
    S.IN_TRANSACTION: frozenset({S.READY}),
    S.COMMITTING_TRANSACTION: frozenset({S.IN_TRANSACTION}),
    S.ABORTING_TRANSACTION: frozenset({S.IN_TRANSACTION, S.ABORTABLE_ERROR}),
    S.ABORTABLE_ERROR: frozenset({S.IN_TRANSACTION, S.COMMITTING_TRANSACTION, S.ABORTABLE_ERROR}),
    S.FATAL_ERROR: frozenset(TransactionState),
}

#: What a user may call next in each state (used in the error messages).
ALLOWED_NEXT_CALLS: Mapping[TransactionState, str] = {
    S.UNINITIALIZED: "call init_transactions() first",
    S.INITIALIZING: "wait for init_transactions() to finish (call it again after a timeout)",
    S.READY: "call begin_transaction() to open a transaction",
    S.IN_TRANSACTION: "send records, send_offsets_to_transaction(), then commit_transaction() or abort_transaction()",
    S.COMMITTING_TRANSACTION: "wait for commit_transaction() to finish (call it again after a timeout)",
    S.ABORTING_TRANSACTION: "wait for abort_transaction() to finish (call it again after a timeout)",
    S.ABORTABLE_ERROR: "call abort_transaction(), then begin a new transaction",
    S.FATAL_ERROR: "close() the producer; it cannot be used any more",
}
