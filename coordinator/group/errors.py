"""Error codes of the group coordinator, and how a failed append to `__consumer_offsets` is reported
(Kafka's appendGroupMetadataErrorToResponseError and its OffsetCommit variant)."""
from __future__ import annotations

import kafka.errors as ke
from minikafka.protocol.errors import NONE  # noqa: F401  (re-exported to the group modules)

OFFSETS_TOPIC = "__consumer_offsets"

COORDINATOR_LOAD_IN_PROGRESS = ke.CoordinatorLoadInProgressError.errno
NOT_COORDINATOR = ke.NotCoordinatorError.errno
COORDINATOR_NOT_AVAILABLE = ke.CoordinatorNotAvailableError.errno
UNKNOWN_MEMBER_ID = ke.UnknownMemberIdError.errno
ILLEGAL_GENERATION = ke.IllegalGenerationError.errno
REBALANCE_IN_PROGRESS = ke.RebalanceInProgressError.errno
INCONSISTENT_GROUP_PROTOCOL = ke.InconsistentGroupProtocolError.errno
INVALID_GROUP_ID = ke.InvalidGroupIdError.errno
INVALID_SESSION_TIMEOUT = ke.InvalidSessionTimeoutError.errno
MEMBER_ID_REQUIRED = ke.MemberIdRequiredError.errno
GROUP_MAX_SIZE_REACHED = ke.GroupMaxSizeReachedError.errno
GROUP_ID_NOT_FOUND = ke.GroupIdNotFoundError.errno
NON_EMPTY_GROUP = ke.NonEmptyGroupError.errno
OFFSET_METADATA_TOO_LARGE = ke.OffsetMetadataTooLargeError.errno
GROUP_SUBSCRIBED_TO_TOPIC = ke.GroupSubscribedToTopicError.errno
UNSTABLE_OFFSET_COMMIT = ke.UnstableOffsetCommitError.errno
INVALID_COMMIT_OFFSET_SIZE = ke.InvalidCommitOffsetSizeError.errno
UNKNOWN_SERVER_ERROR = ke.UnknownError.errno

APPEND_ERRORS_GROUP = {
    ke.UnknownTopicOrPartitionError.errno: COORDINATOR_NOT_AVAILABLE,
    ke.NotEnoughReplicasError.errno: COORDINATOR_NOT_AVAILABLE,
    ke.RequestTimedOutError.errno: COORDINATOR_NOT_AVAILABLE,
    ke.NotLeaderForPartitionError.errno: NOT_COORDINATOR,
    ke.KafkaStorageError.errno: NOT_COORDINATOR,
    ke.MessageSizeTooLargeError.errno: UNKNOWN_SERVER_ERROR,
    ke.RecordListTooLargeError.errno: UNKNOWN_SERVER_ERROR,
    ke.InvalidFetchRequestError.errno: UNKNOWN_SERVER_ERROR,
}
APPEND_ERRORS_COMMIT = {
    **APPEND_ERRORS_GROUP,
    ke.MessageSizeTooLargeError.errno: INVALID_COMMIT_OFFSET_SIZE,
    ke.RecordListTooLargeError.errno: INVALID_COMMIT_OFFSET_SIZE,
    ke.InvalidFetchRequestError.errno: INVALID_COMMIT_OFFSET_SIZE,
}


class AppendFailed(Exception):
    """Writing records to __consumer_offsets failed; `errno` is what the request is answered."""

    def __init__(self, errno: int, cause: BaseException) -> None:
        super().__init__(f"append to {OFFSETS_TOPIC} failed: {cause!r}")
        self.errno = errno
