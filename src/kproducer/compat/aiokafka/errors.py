"""aiokafka's exception names (``aiokafka.errors``), each also the kproducer exception of the same condition.

``except MessageSizeTooLargeError`` (or ``except KafkaError``) in a program
written for aiokafka catches what :class:`~kproducer.compat.aiokafka.AIOKafkaProducer`
raises: the adapter turns kproducer's exceptions into these classes, which also
derive from kproducer's (``except kproducer.errors.RecordTooLargeError`` works
too). Broker errors are matched by their protocol code. Client-side names:
``IllegalOperation`` is what kproducer's ``IllegalStateError`` becomes (aiokafka
raises it for transactional calls out of place; here it also derives from
``IllegalStateError``, which aiokafka raises for the others); ``ProducerClosed``,
``ProducerFenced``, ``KafkaTimeoutError``, ``KafkaConfigurationError`` and
``AuthenticationFailedError`` are kproducer's errors of those names' meaning, and
``NETWORK_EXCEPTION`` (code 13, which aiokafka names by its pre-1.0 meaning) is
``KafkaConnectionError``. ``retriable`` is the Java client's classification,
which differs from aiokafka's for a few codes (2, 9, 51, 70-72).
While aiokafka is installed, each class also derives from aiokafka's class of
the same name, so ``except`` clauses that still import from aiokafka catch
these too. Names kproducer never raises (consumer and connection internals) exist so that
``except`` clauses naming them still run.
"""

from __future__ import annotations

from typing import Any

from kproducer.compat._errors import build_errors

_TABLE = """
KafkaError(RuntimeError) = KafkaError
IllegalStateError(KafkaError) = IllegalStateError
IllegalArgumentError(KafkaError)
NoBrokersAvailable(KafkaError)
NodeNotReadyError(KafkaError)
KafkaProtocolError(KafkaError)
CorrelationIdError(KafkaProtocolError)
Cancelled(KafkaError)
TooManyInFlightRequests(KafkaError)
StaleMetadata(KafkaError)
MetadataEmptyBrokerList(KafkaError)
UnrecognizedBrokerVersion(KafkaError)
IncompatibleBrokerVersion(KafkaError)
CommitFailedError(KafkaError)
AuthenticationMethodNotSupported(KafkaError)
AuthenticationFailedError(KafkaError) = AuthenticationError
KafkaUnavailableError(KafkaError)
KafkaTimeoutError(KafkaError) = KafkaTimeoutError
KafkaConnectionError(KafkaError)
UnsupportedCodecError(KafkaError)
KafkaConfigurationError(KafkaError) = ConfigError
QuotaViolationError(KafkaError)
ConsumerStoppedError(Exception)
IllegalOperation(IllegalStateError) = IllegalStateError
NoOffsetForPartitionError(KafkaError)
RecordTooLargeError(KafkaError)
ProducerClosed(KafkaError) = ProducerClosedError
ProducerFenced(KafkaError) = ProducerFencedError
BrokerResponseError(KafkaError) = BrokerResponseError
NoError(BrokerResponseError) = #0
UnknownError(BrokerResponseError) = #-1
OffsetOutOfRangeError(BrokerResponseError) = #1
CorruptRecordException(BrokerResponseError) = #2
InvalidMessageError = CorruptRecordException
UnknownTopicOrPartitionError(BrokerResponseError) = #3
InvalidFetchRequestError(BrokerResponseError) = #4
LeaderNotAvailableError(BrokerResponseError) = #5
NotLeaderForPartitionError(BrokerResponseError) = #6
RequestTimedOutError(BrokerResponseError) = #7
BrokerNotAvailableError(BrokerResponseError) = #8
ReplicaNotAvailableError(BrokerResponseError) = #9
MessageSizeTooLargeError(BrokerResponseError) = #10
StaleControllerEpochError(BrokerResponseError) = #11
OffsetMetadataTooLargeError(BrokerResponseError) = #12
StaleLeaderEpochCodeError(BrokerResponseError)
GroupLoadInProgressError(BrokerResponseError) = #14
CoordinatorLoadInProgressError = GroupLoadInProgressError
GroupCoordinatorNotAvailableError(BrokerResponseError) = #15
CoordinatorNotAvailableError = GroupCoordinatorNotAvailableError
NotCoordinatorForGroupError(BrokerResponseError) = #16
NotCoordinatorError = NotCoordinatorForGroupError
InvalidTopicError(BrokerResponseError) = #17
RecordListTooLargeError(BrokerResponseError) = #18
NotEnoughReplicasError(BrokerResponseError) = #19
NotEnoughReplicasAfterAppendError(BrokerResponseError) = #20
InvalidRequiredAcksError(BrokerResponseError) = #21
IllegalGenerationError(BrokerResponseError) = #22
InconsistentGroupProtocolError(BrokerResponseError) = #23
InvalidGroupIdError(BrokerResponseError) = #24
UnknownMemberIdError(BrokerResponseError) = #25
InvalidSessionTimeoutError(BrokerResponseError) = #26
RebalanceInProgressError(BrokerResponseError) = #27
InvalidCommitOffsetSizeError(BrokerResponseError) = #28
TopicAuthorizationFailedError(BrokerResponseError) = #29
GroupAuthorizationFailedError(BrokerResponseError) = #30
ClusterAuthorizationFailedError(BrokerResponseError) = #31
InvalidTimestampError(BrokerResponseError) = #32
UnsupportedSaslMechanismError(BrokerResponseError) = #33
IllegalSaslStateError(BrokerResponseError) = #34
UnsupportedVersionError(BrokerResponseError) = #35
TopicAlreadyExistsError(BrokerResponseError) = #36
InvalidPartitionsError(BrokerResponseError) = #37
InvalidReplicationFactorError(BrokerResponseError) = #38
InvalidReplicationAssignmentError(BrokerResponseError) = #39
InvalidConfigurationError(BrokerResponseError) = #40
NotControllerError(BrokerResponseError) = #41
InvalidRequestError(BrokerResponseError) = #42
UnsupportedForMessageFormatError(BrokerResponseError) = #43
PolicyViolationError(BrokerResponseError) = #44
OutOfOrderSequenceNumber(BrokerResponseError) = #45
DuplicateSequenceNumber(BrokerResponseError) = #46
InvalidProducerEpoch(BrokerResponseError) = #47
InvalidTxnState(BrokerResponseError) = #48
InvalidProducerIdMapping(BrokerResponseError) = #49
InvalidTransactionTimeout(BrokerResponseError) = #50
ConcurrentTransactions(BrokerResponseError) = #51
TransactionCoordinatorFenced(BrokerResponseError) = #52
TransactionalIdAuthorizationFailed(BrokerResponseError) = #53
SecurityDisabled(BrokerResponseError) = #54
OperationNotAttempted(BrokerResponseError) = #55
KafkaStorageError(BrokerResponseError) = #56
LogDirNotFound(BrokerResponseError) = #57
SaslAuthenticationFailed(BrokerResponseError) = #58
UnknownProducerId(BrokerResponseError) = #59
ReassignmentInProgress(BrokerResponseError) = #60
DelegationTokenAuthDisabled(BrokerResponseError) = #61
DelegationTokenNotFound(BrokerResponseError) = #62
DelegationTokenOwnerMismatch(BrokerResponseError) = #63
DelegationTokenRequestNotAllowed(BrokerResponseError) = #64
DelegationTokenAuthorizationFailed(BrokerResponseError) = #65
DelegationTokenExpired(BrokerResponseError) = #66
InvalidPrincipalType(BrokerResponseError) = #67
NonEmptyGroup(BrokerResponseError) = #68
GroupIdNotFound(BrokerResponseError) = #69
FetchSessionIdNotFound(BrokerResponseError) = #70
InvalidFetchSessionEpoch(BrokerResponseError) = #71
ListenerNotFound(BrokerResponseError) = #72
MemberIdRequired(BrokerResponseError) = #79
NetworkError -> KafkaConnectionError
"""

translate = build_errors(__name__, globals(), _TABLE, peer="aiokafka.errors")


def __getattr__(name: str) -> Any:
    # mypy: the classes are made at import time by build_errors
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
