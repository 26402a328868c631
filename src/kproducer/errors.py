"""Exception hierarchy and the Kafka protocol error-code table.

Every exception a record can end with derives from :class:`KafkaError`, so a
caller can write one ``except``. The split follows the Java client:
``RetriableError`` (the Sender retries it within ``delivery.timeout.ms``),
``InvalidMetadataError`` (retriable, and the topic's metadata is refreshed
first), and ``FatalError`` (the producer cannot continue). Errors carry the
topic, partition and the broker's code and name when they apply.

Why one file of ~800 lines: most of it is the protocol guide's error-code table,
one small class per code (code, name, retriable flag), in code order. It is data
read from top to bottom; split across files it would only be harder to check
against the protocol guide's table.
"""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from kproducer.tracing import PendingSend

__all__ = [
    "MemoryWouldBlock",
    "ErrorCode",
    "ErrorFlag",
    "ErrorName",
    "KafkaError",
    "RetriableError",
    "InvalidMetadataError",
    "FatalError",
    "BrokerResponseError",
    "ConfigError",
    "KafkaTimeoutError",
    "AuthenticationError",
    "SslAuthenticationError",
    "BufferExhaustedError",
    "SerializationError",
    "ProducerClosedError",
    "IllegalStateError",
    "PartitionMutedError",
    "RecordPurgedError",
    "UnsupportedVersionError",
    "TransactionAbortedError",
    "error_for_code",
    "error_class_for_code",
    "no_partitions_error",
    "error_codes",
    "PRODUCER_FENCED_CODES",
]


class ErrorCode(int):
    """An error code that is also callable: ``err.code`` (the Java client's and kafka-python's
    attribute) and ``err.code()`` (confluent-kafka's ``KafkaError.code()``) both work.

    The attribute is the Kafka protocol code (-1 for client-side errors). The call
    gives confluent-kafka's code, which is the same for broker errors and, for
    client-side errors, librdkafka's negative code for the same condition where one
    exists (``_MSG_TIMED_OUT``, ``_QUEUE_FULL``, ``_PURGE_QUEUE``...), so that
    ``err.code() == confluent_kafka.KafkaError._MSG_TIMED_OUT`` keeps its meaning.
    """

    confluent: int

    def __new__(cls, value: int, confluent: int | None = None) -> ErrorCode:
        self = super().__new__(cls, value)
        self.confluent = int(value) if confluent is None else confluent
        return self

    def __call__(self) -> int:
        return self.confluent

    def __reduce__(self) -> tuple[object, ...]:
        return (ErrorCode, (int(self), self.confluent))


class ErrorName(str):
    """An error name that is also callable: ``err.name`` and confluent-kafka's ``err.name()``."""

    __slots__ = ()

    def __call__(self) -> str:
        return str.__str__(self)


class ErrorFlag(int):
    """A class flag (``retriable``, ``fatal``) that is also callable: ``if err.retriable:`` and
    confluent-kafka's ``err.retriable()`` both work (the call returns a real bool)."""

    __slots__ = ()

    def __call__(self) -> bool:
        return bool(self)

    def __repr__(self) -> str:
        return repr(bool(self))

    __str__ = __repr__


_FLAG_ATTRS = ("retriable", "invalid_metadata", "fatal")


class KafkaError(Exception):
    """Base of every kproducer error.

    ``code``/``name`` are the Kafka protocol error code and name when the error
    came from (or mirrors) a broker error; client-side errors use code -1 and
    their own name.

    confluent-kafka's ``KafkaError`` accessors work on every error too, so a
    delivery callback written for confluent-kafka runs unchanged on the
    ``on_delivery=`` keyword: ``err.code()``, ``err.name()``, ``err.str()``,
    ``err.retriable()``, ``err.fatal()`` and ``err.txn_requires_abort()`` (see
    :class:`ErrorCode` for the codes ``code()`` returns).
    """

    code: ClassVar[ErrorCode] = ErrorCode(-1)
    name: ClassVar[ErrorName] = ErrorName("KAFKA_ERROR")
    retriable: ClassVar[ErrorFlag] = ErrorFlag(False)
    invalid_metadata: ClassVar[ErrorFlag] = ErrorFlag(False)
    fatal: ClassVar[ErrorFlag] = ErrorFlag(False)
    # librdkafka's code for the same client-side condition (what ``code()`` returns), if any.
    _confluent_code: ClassVar[int | None] = None
    # Set on an error that put an open transaction into its abortable state.
    _txn_abortable: bool = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Subclasses declare plain ints, strs and bools; make them callable as confluent-kafka's methods.
        super().__init_subclass__(**kwargs)
        own = cls.__dict__
        if ("code" in own and type(own["code"]) is not ErrorCode) or "_confluent_code" in own:
            cls.code = ErrorCode(int(cls.code), own.get("_confluent_code"))
        if "name" in own and type(own["name"]) is not ErrorName:
            cls.name = ErrorName(own["name"])
        for attr in _FLAG_ATTRS:
            if attr in own and type(own[attr]) is not ErrorFlag:
                setattr(cls, attr, ErrorFlag(bool(own[attr])))

    def __init__(
        self,
        message: str | None = None,
        *,
        topic: str | None = None,
        partition: int | None = None,
    ) -> None:
        self.message = message or str.__str__(self.name)
        self.topic = topic
        self.partition = partition
        super().__init__(self.message)

    def __str__(self) -> str:
        where = ""
        if self.topic is not None:
            where = f" [{self.topic}" + (f"-{self.partition}" if self.partition is not None else "") + "]"
        if self.message == self.name:
            return f"{self.name}{where}" + (f" (error {self.code})" if self.code != -1 else "")
        return f"{self.message}{where}" + (f" (error {self.code} {self.name})" if self.code != -1 else f" ({self.name})")

    def __reduce__(self) -> tuple[object, ...]:
        # Picklable, so that Spark can ship a task's Kafka error to the driver.
        return (_rebuild, (type(self), self.message, self.topic, self.partition))

    def mark_transaction_abortable(self) -> None:
        """Raised to a transactional producer whose open transaction can now only be aborted."""
        self._txn_abortable = True

    def txn_requires_abort(self) -> bool:
        """confluent-kafka's ``txn_requires_abort()``: the open transaction can only be aborted now."""
        return self._txn_abortable or int(self.code) in ABORTABLE_ERRORS

    # Defined last: inside the class body this name shadows the builtin for what follows.
    def str(self) -> builtins.str:  # noqa: A003 - confluent-kafka's KafkaError.str()
        """confluent-kafka's ``str()``: the human-readable description (as ``str(err)``)."""
        return self.__str__()


def _rebuild(cls: type[KafkaError], message: str, topic: str | None, partition: int | None) -> KafkaError:
    err = cls.__new__(cls)
    KafkaError.__init__(err, message, topic=topic, partition=partition)
    return err


class RetriableError(KafkaError):
    """A transient condition: the Sender retries within ``delivery.timeout.ms``."""

    retriable = True


class InvalidMetadataError(RetriableError):
    """Retriable, and the metadata for the topic must be refreshed before retrying."""

    invalid_metadata = True


class FatalError(KafkaError):
    """The producer cannot make progress (fenced, unauthorized...): it must be closed."""

    fatal = True


class BrokerResponseError(KafkaError):
    """A non-retriable error code returned by a broker."""


# ---------------------------------------------------------------- client-side errors


class ConfigError(KafkaError, ValueError):
    """A configuration key or value is invalid; the message names the key and what is allowed."""

    name = "CONFIG_ERROR"
    _confluent_code = -186  # _INVALID_ARG


class AuthenticationError(FatalError):
    """The client could not authenticate to a broker (TLS handshake or SASL): retrying the same
    settings cannot help, so records waiting for that cluster fail with it (Java's
    AuthenticationException). The message names the broker and the cause."""

    name = "AUTHENTICATION_FAILED"
    _confluent_code = -169  # _AUTHENTICATION


class SslAuthenticationError(AuthenticationError):
    """The TLS handshake failed: untrusted or expired certificate, host name mismatch, a
    plaintext listener, or a refused client certificate (Java's SslAuthenticationException)."""

    name = "SSL_HANDSHAKE_FAILED"
    _confluent_code = -181  # _SSL


class KafkaTimeoutError(RetriableError, TimeoutError):
    """An operation did not finish within its time bound (max.block.ms, delivery.timeout.ms...)."""

    name = "TIMEOUT"
    _confluent_code = -192  # _MSG_TIMED_OUT


class BufferExhaustedError(KafkaTimeoutError):
    """The BufferPool could not hand out memory within ``max.block.ms``."""

    name = "BUFFER_EXHAUSTED"
    _confluent_code = -184  # _QUEUE_FULL


class MemoryWouldBlock(Exception):
    """A ``send(..., block=False)`` would have had to wait for ``buffer.memory``.

    Raised by the send path only for such a call (the asyncio facade makes them: an
    event loop awaits instead of blocking), never for a caller that may block, which
    waits up to ``max.block.ms`` instead. ``size`` is what the allocation asked for;
    ``poll_s`` is set when no memory event will announce the end of the wait (the
    caller retries after that many seconds). Nothing was charged or appended when it
    is raised: the caller awaits, then sends the record again.

    ``pending_send``: when the send was traced (kproducer.tracing), the record's span,
    started and not ended, with the headers to send the record again with; a
    :class:`kproducer.tracing.PendingSend`, else None.
    """

    def __init__(self, size: int, poll_s: float | None = None) -> None:
        super().__init__(f"allocating {size} bytes would block this thread")
        self.size = size
        self.poll_s = poll_s
        self.pending_send: PendingSend | None = None


class SerializationError(KafkaError, ValueError):
    """A key, value or header could not be serialized."""

    name = "SERIALIZATION_ERROR"


class ProducerClosedError(KafkaError):
    """The producer was closed before the record could be delivered."""

    name = "PRODUCER_CLOSED"
    _confluent_code = -152  # _PURGE_QUEUE: librdkafka purges what close() could not deliver


class IllegalStateError(KafkaError):
    """An API call that is not valid in the producer's current state."""

    name = "ILLEGAL_STATE"
    _confluent_code = -172  # _STATE


class RecordPurgedError(KafkaError):
    """The record was purged from the producer's queue before it was sent (``Producer.purge()``)."""

    name = "PURGE_QUEUE"
    _confluent_code = -152  # _PURGE_QUEUE, what librdkafka's rd_kafka_purge(RD_KAFKA_PURGE_F_QUEUE) reports


class PartitionMutedError(RetriableError):
    """The partition is muted by the circuit breaker (KIP-693)."""

    name = "PARTITION_MUTED"


class TransactionAbortedError(KafkaError):
    """The record's transaction was aborted before the record was sent (Java's TransactionAbortedException)."""

    name = "TRANSACTION_ABORTED"
    _confluent_code = -152  # _PURGE_QUEUE: librdkafka purges the records of an aborted transaction


class UnsupportedVersionError(KafkaError):
    """The broker does not support a request version this client needs."""

    code = 35
    name = "UNSUPPORTED_VERSION"


# ---------------------------------------------------------------- broker error codes
# One class per Kafka error code (clients/src/main/java/org/apache/kafka/common/protocol/Errors.java),
# with the Java client's retriable / invalid-metadata classification.

class UnknownServerError(BrokerResponseError):
    code = -1
    name = "UNKNOWN_SERVER_ERROR"

class OffsetOutOfRangeError(BrokerResponseError):
    code = 1
    name = "OFFSET_OUT_OF_RANGE"

class CorruptRecordError(RetriableError):
    code = 2
    name = "CORRUPT_MESSAGE"

class UnknownTopicOrPartitionError(InvalidMetadataError):
    code = 3
    name = "UNKNOWN_TOPIC_OR_PARTITION"

class InvalidFetchSizeError(BrokerResponseError):
    code = 4
    name = "INVALID_FETCH_SIZE"

class LeaderNotAvailableError(InvalidMetadataError):
    code = 5
    name = "LEADER_NOT_AVAILABLE"

class NotLeaderOrFollowerError(InvalidMetadataError):
    code = 6
    name = "NOT_LEADER_OR_FOLLOWER"

class RequestTimedOutError(RetriableError):
    code = 7
    name = "REQUEST_TIMED_OUT"

class BrokerNotAvailableError(BrokerResponseError):
    code = 8
    name = "BROKER_NOT_AVAILABLE"

class ReplicaNotAvailableError(InvalidMetadataError):
    code = 9
    name = "REPLICA_NOT_AVAILABLE"

class RecordTooLargeError(BrokerResponseError):
    code = 10
    name = "MESSAGE_TOO_LARGE"

class StaleControllerEpochError(BrokerResponseError):
    code = 11
    name = "STALE_CONTROLLER_EPOCH"

class OffsetMetadataTooLargeError(BrokerResponseError):
    code = 12
    name = "OFFSET_METADATA_TOO_LARGE"

class NetworkError(InvalidMetadataError):
    code = 13
    name = "NETWORK_EXCEPTION"

class CoordinatorLoadInProgressError(RetriableError):
    code = 14
    name = "COORDINATOR_LOAD_IN_PROGRESS"

class CoordinatorNotAvailableError(RetriableError):
    code = 15
    name = "COORDINATOR_NOT_AVAILABLE"

class NotCoordinatorError(RetriableError):
    code = 16
    name = "NOT_COORDINATOR"

class InvalidTopicError(BrokerResponseError):
    code = 17
    name = "INVALID_TOPIC_EXCEPTION"

class RecordListTooLargeError(BrokerResponseError):
    code = 18
    name = "RECORD_LIST_TOO_LARGE"

class NotEnoughReplicasError(RetriableError):
    code = 19
    name = "NOT_ENOUGH_REPLICAS"

class NotEnoughReplicasAfterAppendError(RetriableError):
    code = 20
    name = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"

class InvalidRequiredAcksError(BrokerResponseError):
    code = 21
    name = "INVALID_REQUIRED_ACKS"

class IllegalGenerationError(BrokerResponseError):
    code = 22
    name = "ILLEGAL_GENERATION"

class InconsistentGroupProtocolError(BrokerResponseError):
    code = 23
    name = "INCONSISTENT_GROUP_PROTOCOL"

class InvalidGroupIdError(BrokerResponseError):
    code = 24
    name = "INVALID_GROUP_ID"

class UnknownMemberIdError(BrokerResponseError):
    code = 25
    name = "UNKNOWN_MEMBER_ID"

class InvalidSessionTimeoutError(BrokerResponseError):
    code = 26
    name = "INVALID_SESSION_TIMEOUT"

class RebalanceInProgressError(BrokerResponseError):
    code = 27
    name = "REBALANCE_IN_PROGRESS"

class InvalidCommitOffsetSizeError(BrokerResponseError):
    code = 28
    name = "INVALID_COMMIT_OFFSET_SIZE"

class TopicAuthorizationFailedError(FatalError):
    code = 29
    name = "TOPIC_AUTHORIZATION_FAILED"

class GroupAuthorizationFailedError(FatalError):
    code = 30
    name = "GROUP_AUTHORIZATION_FAILED"

class ClusterAuthorizationFailedError(FatalError):
    code = 31
    name = "CLUSTER_AUTHORIZATION_FAILED"

class InvalidTimestampError(BrokerResponseError):
    code = 32
    name = "INVALID_TIMESTAMP"

class UnsupportedSaslMechanismError(AuthenticationError):
    code = 33
    name = "UNSUPPORTED_SASL_MECHANISM"

class IllegalSaslStateError(AuthenticationError):
    code = 34
    name = "ILLEGAL_SASL_STATE"

class TopicAlreadyExistsError(BrokerResponseError):
    code = 36
    name = "TOPIC_ALREADY_EXISTS"

class InvalidPartitionsError(BrokerResponseError):
    code = 37
    name = "INVALID_PARTITIONS"

class InvalidReplicationFactorError(BrokerResponseError):
    code = 38
    name = "INVALID_REPLICATION_FACTOR"

class InvalidReplicaAssignmentError(BrokerResponseError):
    code = 39
    name = "INVALID_REPLICA_ASSIGNMENT"

class InvalidConfigError(BrokerResponseError):
    code = 40
    name = "INVALID_CONFIG"

class NotControllerError(RetriableError):
    code = 41
    name = "NOT_CONTROLLER"

class InvalidRequestError(BrokerResponseError):
    code = 42
    name = "INVALID_REQUEST"

class UnsupportedForMessageFormatError(BrokerResponseError):
    code = 43
    name = "UNSUPPORTED_FOR_MESSAGE_FORMAT"

class PolicyViolationError(BrokerResponseError):
    code = 44
    name = "POLICY_VIOLATION"

class OutOfOrderSequenceNumberError(BrokerResponseError):
    code = 45
    name = "OUT_OF_ORDER_SEQUENCE_NUMBER"

class DuplicateSequenceNumberError(BrokerResponseError):
    code = 46
    name = "DUPLICATE_SEQUENCE_NUMBER"

class InvalidProducerEpochError(BrokerResponseError):
    code = 47
    name = "INVALID_PRODUCER_EPOCH"

class InvalidTxnStateError(BrokerResponseError):
    code = 48
    name = "INVALID_TXN_STATE"

class InvalidProducerIdMappingError(BrokerResponseError):
    code = 49
    name = "INVALID_PRODUCER_ID_MAPPING"

class InvalidTransactionTimeoutError(BrokerResponseError):
    code = 50
    name = "INVALID_TRANSACTION_TIMEOUT"

class ConcurrentTransactionsError(RetriableError):
    code = 51
    name = "CONCURRENT_TRANSACTIONS"

class TransactionCoordinatorFencedError(FatalError):
    code = 52
    name = "TRANSACTION_COORDINATOR_FENCED"

class TransactionalIdAuthorizationFailedError(FatalError):
    code = 53
    name = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"

class SecurityDisabledError(BrokerResponseError):
    code = 54
    name = "SECURITY_DISABLED"

class OperationNotAttemptedError(BrokerResponseError):
    code = 55
    name = "OPERATION_NOT_ATTEMPTED"

class KafkaStorageError(InvalidMetadataError):
    code = 56
    name = "KAFKA_STORAGE_ERROR"

class LogDirNotFoundError(BrokerResponseError):
    code = 57
    name = "LOG_DIR_NOT_FOUND"

class SaslAuthenticationFailedError(AuthenticationError):
    code = 58
    name = "SASL_AUTHENTICATION_FAILED"

class UnknownProducerIdError(BrokerResponseError):
    code = 59
    name = "UNKNOWN_PRODUCER_ID"

class ReassignmentInProgressError(BrokerResponseError):
    code = 60
    name = "REASSIGNMENT_IN_PROGRESS"

class DelegationTokenAuthDisabledError(BrokerResponseError):
    code = 61
    name = "DELEGATION_TOKEN_AUTH_DISABLED"

class DelegationTokenNotFoundError(BrokerResponseError):
    code = 62
    name = "DELEGATION_TOKEN_NOT_FOUND"

class DelegationTokenOwnerMismatchError(BrokerResponseError):
    code = 63
    name = "DELEGATION_TOKEN_OWNER_MISMATCH"

class DelegationTokenRequestNotAllowedError(BrokerResponseError):
    code = 64
    name = "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"

class DelegationTokenAuthorizationFailedError(BrokerResponseError):
    code = 65
    name = "DELEGATION_TOKEN_AUTHORIZATION_FAILED"

class DelegationTokenExpiredError(BrokerResponseError):
    code = 66
    name = "DELEGATION_TOKEN_EXPIRED"

class InvalidPrincipalTypeError(BrokerResponseError):
    code = 67
    name = "INVALID_PRINCIPAL_TYPE"

class NonEmptyGroupError(BrokerResponseError):
    code = 68
    name = "NON_EMPTY_GROUP"

class GroupIdNotFoundError(BrokerResponseError):
    code = 69
    name = "GROUP_ID_NOT_FOUND"

class FetchSessionIdNotFoundError(RetriableError):
    code = 70
    name = "FETCH_SESSION_ID_NOT_FOUND"

class InvalidFetchSessionEpochError(RetriableError):
    code = 71
    name = "INVALID_FETCH_SESSION_EPOCH"

class ListenerNotFoundError(InvalidMetadataError):
    code = 72
    name = "LISTENER_NOT_FOUND"

class TopicDeletionDisabledError(BrokerResponseError):
    code = 73
    name = "TOPIC_DELETION_DISABLED"

class FencedLeaderEpochError(InvalidMetadataError):
    code = 74
    name = "FENCED_LEADER_EPOCH"

class UnknownLeaderEpochError(RetriableError):
    code = 75
    name = "UNKNOWN_LEADER_EPOCH"

class UnsupportedCompressionTypeError(BrokerResponseError):
    code = 76
    name = "UNSUPPORTED_COMPRESSION_TYPE"

class StaleBrokerEpochError(BrokerResponseError):
    code = 77
    name = "STALE_BROKER_EPOCH"

class OffsetNotAvailableError(RetriableError):
    code = 78
    name = "OFFSET_NOT_AVAILABLE"

class MemberIdRequiredError(BrokerResponseError):
    code = 79
    name = "MEMBER_ID_REQUIRED"

class PreferredLeaderNotAvailableError(InvalidMetadataError):
    code = 80
    name = "PREFERRED_LEADER_NOT_AVAILABLE"

class GroupMaxSizeReachedError(BrokerResponseError):
    code = 81
    name = "GROUP_MAX_SIZE_REACHED"

class FencedInstanceIdError(BrokerResponseError):
    code = 82
    name = "FENCED_INSTANCE_ID"

class EligibleLeadersNotAvailableError(RetriableError):
    code = 83
    name = "ELIGIBLE_LEADERS_NOT_AVAILABLE"

class ElectionNotNeededError(BrokerResponseError):
    code = 84
    name = "ELECTION_NOT_NEEDED"

class NoReassignmentInProgressError(BrokerResponseError):
    code = 85
    name = "NO_REASSIGNMENT_IN_PROGRESS"

class GroupSubscribedToTopicError(BrokerResponseError):
    code = 86
    name = "GROUP_SUBSCRIBED_TO_TOPIC"

class InvalidRecordError(BrokerResponseError):
    code = 87
    name = "INVALID_RECORD"

class UnstableOffsetCommitError(RetriableError):
    code = 88
    name = "UNSTABLE_OFFSET_COMMIT"

class ThrottlingQuotaExceededError(RetriableError):
    code = 89
    name = "THROTTLING_QUOTA_EXCEEDED"

class ProducerFencedError(FatalError):
    code = 90
    name = "PRODUCER_FENCED"

class ResourceNotFoundError(BrokerResponseError):
    code = 91
    name = "RESOURCE_NOT_FOUND"

class DuplicateResourceError(BrokerResponseError):
    code = 92
    name = "DUPLICATE_RESOURCE"

class UnacceptableCredentialError(BrokerResponseError):
    code = 93
    name = "UNACCEPTABLE_CREDENTIAL"

class InconsistentVoterSetError(BrokerResponseError):
    code = 94
    name = "INCONSISTENT_VOTER_SET"

class InvalidUpdateVersionError(BrokerResponseError):
    code = 95
    name = "INVALID_UPDATE_VERSION"

class FeatureUpdateFailedError(BrokerResponseError):
    code = 96
    name = "FEATURE_UPDATE_FAILED"

class PrincipalDeserializationFailureError(BrokerResponseError):
    code = 97
    name = "PRINCIPAL_DESERIALIZATION_FAILURE"

class SnapshotNotFoundError(BrokerResponseError):
    code = 98
    name = "SNAPSHOT_NOT_FOUND"

class PositionOutOfRangeError(BrokerResponseError):
    code = 99
    name = "POSITION_OUT_OF_RANGE"

class UnknownTopicIdError(InvalidMetadataError):
    code = 100
    name = "UNKNOWN_TOPIC_ID"

class DuplicateBrokerRegistrationError(BrokerResponseError):
    code = 101
    name = "DUPLICATE_BROKER_REGISTRATION"

class BrokerIdNotRegisteredError(BrokerResponseError):
    code = 102
    name = "BROKER_ID_NOT_REGISTERED"

class InconsistentTopicIdError(InvalidMetadataError):
    code = 103
    name = "INCONSISTENT_TOPIC_ID"

class InconsistentClusterIdError(BrokerResponseError):
    code = 104
    name = "INCONSISTENT_CLUSTER_ID"

class TransactionalIdNotFoundError(BrokerResponseError):
    code = 105
    name = "TRANSACTIONAL_ID_NOT_FOUND"

class FetchSessionTopicIdError(RetriableError):
    code = 106
    name = "FETCH_SESSION_TOPIC_ID_ERROR"

class IneligibleReplicaError(BrokerResponseError):
    code = 107
    name = "INELIGIBLE_REPLICA"

class NewLeaderElectedError(BrokerResponseError):
    code = 108
    name = "NEW_LEADER_ELECTED"

class OffsetMovedToTieredStorageError(BrokerResponseError):
    code = 109
    name = "OFFSET_MOVED_TO_TIERED_STORAGE"

class FencedMemberEpochError(BrokerResponseError):
    code = 110
    name = "FENCED_MEMBER_EPOCH"

class UnreleasedInstanceIdError(BrokerResponseError):
    code = 111
    name = "UNRELEASED_INSTANCE_ID"

class UnsupportedAssignorError(BrokerResponseError):
    code = 112
    name = "UNSUPPORTED_ASSIGNOR"

class StaleMemberEpochError(BrokerResponseError):
    code = 113
    name = "STALE_MEMBER_EPOCH"

class MismatchedEndpointTypeError(BrokerResponseError):
    code = 114
    name = "MISMATCHED_ENDPOINT_TYPE"

class UnsupportedEndpointTypeError(BrokerResponseError):
    code = 115
    name = "UNSUPPORTED_ENDPOINT_TYPE"

class UnknownControllerIdError(BrokerResponseError):
    code = 116
    name = "UNKNOWN_CONTROLLER_ID"

class UnknownSubscriptionIdError(BrokerResponseError):
    code = 117
    name = "UNKNOWN_SUBSCRIPTION_ID"

class TelemetryTooLargeError(BrokerResponseError):
    code = 118
    name = "TELEMETRY_TOO_LARGE"

class InvalidRegistrationError(BrokerResponseError):
    code = 119
    name = "INVALID_REGISTRATION"

class TransactionAbortableError(BrokerResponseError):
    code = 120
    name = "TRANSACTION_ABORTABLE"

_BY_CODE: dict[int, type[KafkaError]] = {}
for _cls in list(globals().values()):
    if (
        isinstance(_cls, type)
        and issubclass(_cls, KafkaError)
        and _cls.__module__ == __name__
        and (_cls.code != -1 or _cls is UnknownServerError)
    ):
        _BY_CODE.setdefault(_cls.code, _cls)
_BY_CODE[35] = UnsupportedVersionError


def error_codes(*classes: type[KafkaError]) -> frozenset[int]:
    """The protocol codes of these error classes, as plain ints: name a group of codes by its classes."""
    return frozenset(int(cls.code) for cls in classes)


#: INVALID_PRODUCER_EPOCH and PRODUCER_FENCED: a newer producer with the same transactional.id
#: (or a newer epoch of this producer id) took over, so this one cannot go on.
PRODUCER_FENCED_CODES: frozenset[int] = error_codes(InvalidProducerEpochError, ProducerFencedError)

#: The transaction cannot commit; the user must abort it and may go on with a new one (the Java
#: client's TransactionManager classification; ``txn_requires_abort()`` answers from it).
ABORTABLE_ERRORS: frozenset[int] = error_codes(
    TopicAuthorizationFailedError,
    GroupAuthorizationFailedError,
    IllegalGenerationError,  # TxnOffsetCommit: the consumer's generation is stale
    UnknownMemberIdError,
    UnknownProducerIdError,
    InvalidProducerIdMappingError,
    TransactionAbortableError,  # KIP-890
)


def no_partitions_error(topic: str) -> KafkaError:
    """What a partitioner raises when the cluster view knows no partitions for ``topic``."""
    return KafkaError(f"topic {topic!r} has no partitions in the current metadata", topic=topic)


def error_class_for_code(code: int) -> type[KafkaError]:
    """The exception class for a Kafka error code (UnknownServerError for codes this table lacks)."""
    return _BY_CODE.get(code, UnknownServerError)


def error_for_code(
    code: int,
    message: str | None = None,
    *,
    topic: str | None = None,
    partition: int | None = None,
) -> KafkaError:
    """Build the exception for a broker error code, keeping the broker's own message when it sent one."""
    cls = _BY_CODE.get(code)
    if cls is None:
        err: KafkaError = UnknownServerError(message or f"unknown Kafka error code {code}", topic=topic, partition=partition)
        return err
    return cls(message, topic=topic, partition=partition)
