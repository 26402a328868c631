"""The error-class tables: what the transaction manager does about each broker error code.

As the Java client's ``TransactionManager`` handlers classify them: find the coordinator
again, retry at the same coordinator, make the transaction abortable (the user must abort
it; that table, ``ABORTABLE_ERRORS``, is in :mod:`kproducer.errors`, where an error's
``txn_requires_abort()`` reads it), or make the producer fatal (every later call raises
until ``close()``). Codes in none of these tables are fatal for the request at hand.
"""

from __future__ import annotations

from kproducer.errors import (
    PRODUCER_FENCED_CODES,
    ClusterAuthorizationFailedError,
    ConcurrentTransactionsError,
    CoordinatorLoadInProgressError,
    CoordinatorNotAvailableError,
    InvalidProducerIdMappingError,
    InvalidTransactionTimeoutError,
    InvalidTxnStateError,
    NetworkError,
    NotCoordinatorError,
    OperationNotAttemptedError,
    OutOfOrderSequenceNumberError,
    RequestTimedOutError,
    TopicAuthorizationFailedError,
    TransactionalIdAuthorizationFailedError,
    TransactionCoordinatorFencedError,
    UnknownProducerIdError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
    error_codes,
)

CONCURRENT_TRANSACTIONS = int(ConcurrentTransactionsError.code)
OPERATION_NOT_ATTEMPTED = int(OperationNotAttemptedError.code)
TOPIC_AUTHORIZATION_FAILED = int(TopicAuthorizationFailedError.code)
UNKNOWN_PRODUCER_ID = int(UnknownProducerIdError.code)
INVALID_PRODUCER_ID_MAPPING = int(InvalidProducerIdMappingError.code)

#: The coordinator moved or is not up: find it again, then retry.
COORDINATOR_MOVED_ERRORS: frozenset[int] = error_codes(
    NotCoordinatorError, CoordinatorNotAvailableError, RequestTimedOutError
)
#: Transient at the same coordinator: retry after a backoff.
RETRY_ERRORS: frozenset[int] = error_codes(
    CoordinatorLoadInProgressError, ConcurrentTransactionsError, UnknownTopicOrPartitionError
)
#: The producer cannot go on: every later call raises until close().
FATAL_ERRORS: frozenset[int] = PRODUCER_FENCED_CODES | error_codes(
    TransactionCoordinatorFencedError,
    TransactionalIdAuthorizationFailedError,
    ClusterAuthorizationFailedError,
    InvalidTxnStateError,
    InvalidTransactionTimeoutError,  # transaction.timeout.ms above the broker's maximum
    UnsupportedVersionError,
)
#: Produce errors that make a transactional producer fatal (the rest abort the transaction).
FATAL_PRODUCE_ERRORS: frozenset[int] = PRODUCER_FENCED_CODES | error_codes(
    TransactionalIdAuthorizationFailedError, ClusterAuthorizationFailedError
)
#: Produce errors after which the sequence state is unknown: the abort bumps the epoch (KIP-360).
EPOCH_BUMP_PRODUCE_ERRORS: frozenset[int] = error_codes(
    OutOfOrderSequenceNumberError,
    UnknownProducerIdError,
    InvalidProducerIdMappingError,
    RequestTimedOutError,
    NetworkError,
)
#: Retried or sent to a new coordinator: a TxnOffsetCommit's partitions with only these errors are sent again.
RETRY_OR_MOVED_ERRORS: frozenset[int] = RETRY_ERRORS | COORDINATOR_MOVED_ERRORS
