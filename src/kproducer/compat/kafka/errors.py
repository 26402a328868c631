"""kafka-python's exception names (``kafka.errors``), each also the kproducer exception of the same condition.

``except MessageSizeTooLargeError`` (or ``except KafkaError``) in a program
written for kafka-python catches what :class:`~kproducer.compat.kafka.KafkaProducer`
raises or puts on a future: the adapter turns kproducer's exceptions into these
classes, which also derive from kproducer's (``except
kproducer.errors.RecordTooLargeError`` works too). Broker errors are matched by
their protocol code, with kafka-python's retriable / invalid-metadata parents.
Client-side names: ``KafkaTimeoutError``, ``KafkaConfigurationError``,
``TransactionAbortedError`` and ``IllegalStateError`` are kproducer's errors of
those names' meaning; a send after ``close()`` raises ``IllegalStateError``, as
in kafka-python. While kafka-python is installed, each class also derives from kafka-python's class of
the same name, so ``except`` clauses that still import from kafka-python catch
these too. Names kproducer never raises (consumer and connection
internals) exist so that ``except`` clauses naming them still run.
"""

from __future__ import annotations

from typing import Any

from kproducer.compat._errors import build_errors

_TABLE = """
KafkaError(Exception) = KafkaError
RetriableError(KafkaError) = RetriableError
InvalidMetadataError(RetriableError) = InvalidMetadataError
Cancelled(RetriableError)
CommitFailedError(KafkaError)
IllegalArgumentError(KafkaError)
IllegalStateError(KafkaError) = IllegalStateError
KafkaConfigurationError(KafkaError) = ConfigError
KafkaConnectionError(InvalidMetadataError)
KafkaProtocolError(KafkaError)
CorrelationIdError(RetriableError, KafkaProtocolError)
InvalidReceiveError(KafkaProtocolError)
KafkaTimeoutError(RetriableError) = KafkaTimeoutError
MetadataEmptyBrokerList(RetriableError)
NoOffsetForPartitionError(KafkaError)
LogTruncationError(KafkaError)
NodeNotReadyError(RetriableError)
UnknownBrokerIdError(KafkaError)
QuotaViolationError(KafkaError)
StaleMetadata(InvalidMetadataError)
TooManyInFlightRequests(RetriableError)
UnrecognizedBrokerVersion(KafkaError)
UnsupportedCodecError(KafkaError)
TransactionAbortedError(KafkaError) = TransactionAbortedError
BrokerResponseError(KafkaError) = BrokerResponseError
AuthorizationError(BrokerResponseError)
NoError(BrokerResponseError) = #0
UnknownError(BrokerResponseError) = #-1
OffsetOutOfRangeError(BrokerResponseError) = #1
CorruptRecordError(BrokerResponseError) = #2
CorruptRecordException = CorruptRecordError
UnknownTopicOrPartitionError(InvalidMetadataError, BrokerResponseError) = #3
InvalidFetchRequestError(BrokerResponseError) = #4
LeaderNotAvailableError(InvalidMetadataError, BrokerResponseError) = #5
NotLeaderForPartitionError(InvalidMetadataError, BrokerResponseError) = #6
RequestTimedOutError(RetriableError, BrokerResponseError) = #7
BrokerNotAvailableError(BrokerResponseError) = #8
ReplicaNotAvailableError(InvalidMetadataError, BrokerResponseError) = #9
MessageSizeTooLargeError(BrokerResponseError) = #10
StaleControllerEpochError(BrokerResponseError) = #11
OffsetMetadataTooLargeError(BrokerResponseError) = #12
NetworkExceptionError(InvalidMetadataError, BrokerResponseError) = #13
CoordinatorLoadInProgressError(RetriableError, BrokerResponseError) = #14
CoordinatorNotAvailableError(RetriableError, BrokerResponseError) = #15
NotCoordinatorError(RetriableError, BrokerResponseError) = #16
InvalidTopicError(BrokerResponseError) = #17
RecordListTooLargeError(BrokerResponseError) = #18
NotEnoughReplicasError(RetriableError, BrokerResponseError) = #19
NotEnoughReplicasAfterAppendError(RetriableError, BrokerResponseError) = #20
InvalidRequiredAcksError(BrokerResponseError) = #21
IllegalGenerationError(BrokerResponseError) = #22
InconsistentGroupProtocolError(BrokerResponseError) = #23
InvalidGroupIdError(BrokerResponseError) = #24
UnknownMemberIdError(BrokerResponseError) = #25
InvalidSessionTimeoutError(BrokerResponseError) = #26
RebalanceInProgressError(BrokerResponseError) = #27
InvalidCommitOffsetSizeError(BrokerResponseError) = #28
TopicAuthorizationFailedError(AuthorizationError) = #29
GroupAuthorizationFailedError(AuthorizationError) = #30
ClusterAuthorizationFailedError(AuthorizationError) = #31
InvalidTimestampError(BrokerResponseError) = #32
UnsupportedSaslMechanismError(BrokerResponseError) = #33
IllegalSaslStateError(BrokerResponseError) = #34
UnsupportedVersionError(BrokerResponseError) = #35
IncompatibleBrokerVersion(UnsupportedVersionError)
TopicAlreadyExistsError(BrokerResponseError) = #36
InvalidPartitionsError(BrokerResponseError) = #37
InvalidReplicationFactorError(BrokerResponseError) = #38
InvalidReplicationAssignmentError(BrokerResponseError) = #39
InvalidConfigurationError(BrokerResponseError) = #40
NotControllerError(RetriableError, BrokerResponseError) = #41
InvalidRequestError(BrokerResponseError) = #42
UnsupportedForMessageFormatError(BrokerResponseError) = #43
PolicyViolationError(BrokerResponseError) = #44
OutOfOrderSequenceNumberError(BrokerResponseError) = #45
DuplicateSequenceNumberError(BrokerResponseError) = #46
InvalidProducerEpochError(BrokerResponseError) = #47
InvalidTxnStateError(BrokerResponseError) = #48
InvalidProducerIdMappingError(BrokerResponseError) = #49
InvalidTransactionTimeoutError(BrokerResponseError) = #50
ConcurrentTransactionsError(RetriableError, BrokerResponseError) = #51
TransactionCoordinatorFencedError(BrokerResponseError) = #52
TransactionalIdAuthorizationFailedError(AuthorizationError) = #53
SecurityDisabledError(BrokerResponseError) = #54
OperationNotAttemptedError(BrokerResponseError) = #55
KafkaStorageError(InvalidMetadataError, BrokerResponseError) = #56
LogDirNotFoundError(BrokerResponseError) = #57
SaslAuthenticationFailedError(BrokerResponseError) = #58
UnknownProducerIdError(BrokerResponseError) = #59
ReassignmentInProgressError(BrokerResponseError) = #60
DelegationTokenAuthDisabledError(BrokerResponseError) = #61
DelegationTokenNotFoundError(BrokerResponseError) = #62
DelegationTokenOwnerMismatchError(BrokerResponseError) = #63
DelegationTokenRequestNotAllowedError(BrokerResponseError) = #64
DelegationTokenAuthorizationFailedError(AuthorizationError) = #65
DelegationTokenExpiredError(BrokerResponseError) = #66
InvalidPrincipalTypeError(BrokerResponseError) = #67
NonEmptyGroupError(BrokerResponseError) = #68
GroupIdNotFoundError(BrokerResponseError) = #69
FetchSessionIdNotFoundError(RetriableError, BrokerResponseError) = #70
InvalidFetchSessionEpochError(RetriableError, BrokerResponseError) = #71
ListenerNotFoundError(InvalidMetadataError, BrokerResponseError) = #72
TopicDeletionDisabledError(BrokerResponseError) = #73
FencedLeaderEpochError(InvalidMetadataError, BrokerResponseError) = #74
UnknownLeaderEpochError(InvalidMetadataError, BrokerResponseError) = #75
UnsupportedCompressionTypeError(BrokerResponseError) = #76
StaleBrokerEpochError(BrokerResponseError) = #77
OffsetNotAvailableError(RetriableError, BrokerResponseError) = #78
MemberIdRequiredError(BrokerResponseError) = #79
PreferredLeaderNotAvailableError(InvalidMetadataError, BrokerResponseError) = #80
GroupMaxSizeReachedError(BrokerResponseError) = #81
FencedInstanceIdError(BrokerResponseError) = #82
EligibleLeadersNotAvailableError(InvalidMetadataError, BrokerResponseError) = #83
ElectionNotNeededError(InvalidMetadataError, BrokerResponseError) = #84
NoReassignmentInProgressError(BrokerResponseError) = #85
GroupSubscribedToTopicError(BrokerResponseError) = #86
InvalidRecordError(BrokerResponseError) = #87
UnstableOffsetCommitError(RetriableError, BrokerResponseError) = #88
ThrottlingQuotaExceededError(RetriableError, BrokerResponseError) = #89
ProducerFencedError(BrokerResponseError) = #90
ResourceNotFoundError(BrokerResponseError) = #91
DuplicateResourceError(BrokerResponseError) = #92
UnacceptableCredentialError(BrokerResponseError) = #93
InconsistentVoterSetError(BrokerResponseError) = #94
InvalidUpdateVersionError(BrokerResponseError) = #95
FeatureUpdateFailedError(BrokerResponseError) = #96
PrincipalDeserializationFailureError(BrokerResponseError) = #97
SnapshotNotFoundError(BrokerResponseError) = #98
PositionOutOfRangeError(BrokerResponseError) = #99
UnknownTopicIdError(InvalidMetadataError, BrokerResponseError) = #100
DuplicateBrokerRegistrationError(BrokerResponseError) = #101
BrokerIdNotRegisteredError(BrokerResponseError) = #102
InconsistentTopicIdError(InvalidMetadataError, BrokerResponseError) = #103
InconsistentClusterIdError(BrokerResponseError) = #104
TransactionalIdNotFoundError(BrokerResponseError) = #105
FetchSessionTopicIdError(RetriableError, BrokerResponseError) = #106
IneligibleReplicaError(BrokerResponseError) = #107
NewLeaderElectedError(BrokerResponseError) = #108
OffsetMovedToTieredStorageError(BrokerResponseError) = #109
FencedMemberEpochError(BrokerResponseError) = #110
UnreleasedInstanceIdError(BrokerResponseError) = #111
UnsupportedAssignorError(BrokerResponseError) = #112
StaleMemberEpochError(BrokerResponseError) = #113
MismatchedEndpointTypeError(BrokerResponseError) = #114
UnsupportedEndpointTypeError(BrokerResponseError) = #115
UnknownControllerIdError(BrokerResponseError) = #116
UnknownSubscriptionIdError(BrokerResponseError) = #117
TelemetryTooLargeError(BrokerResponseError) = #118
InvalidRegistrationError(BrokerResponseError) = #119
TransactionAbortableError(BrokerResponseError) = #120
InvalidRecordStateError(BrokerResponseError) = #121
ShareSessionNotFoundError(RetriableError, BrokerResponseError) = #122
InvalidShareSessionEpochError(RetriableError, BrokerResponseError) = #123
FencedStateEpochError(BrokerResponseError) = #124
InvalidVoterKeyError(BrokerResponseError) = #125
DuplicateVoterError(BrokerResponseError) = #126
VoterNotFoundError(BrokerResponseError) = #127
ProducerClosedError -> IllegalStateError
"""

translate = build_errors(__name__, globals(), _TABLE, peer="kafka.errors")


def __getattr__(name: str) -> Any:
    # mypy: the classes are made at import time by build_errors
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
