"""Helpers shared by the transaction handlers: version-dependent error codes and topic checks."""
from __future__ import annotations

import kafka.errors as ke

from ..state import BrokerState

PRODUCER_FENCED = ke.ProducerFencedError.errno
INVALID_PRODUCER_EPOCH = ke.InvalidProducerEpochError.errno
UNKNOWN_TOPIC_OR_PARTITION = ke.UnknownTopicOrPartitionError.errno
OPERATION_NOT_ATTEMPTED = ke.OperationNotAttemptedError.errno


def for_version(code: int, version: int, fenced_since: int) -> int:
    """PRODUCER_FENCED exists from `fenced_since` on; older clients get INVALID_PRODUCER_EPOCH."""
    if code == PRODUCER_FENCED and version < fenced_since:
        return INVALID_PRODUCER_EPOCH
    return code


def unknown_partitions(state: BrokerState, parts: list[tuple[str, int]]) -> set[tuple[str, int]]:
    """Partitions that do not exist (Kafka answers them UNKNOWN_TOPIC_OR_PARTITION and does not
    attempt the others)."""
    catalog = state.catalog
    return {(t, p) for t, p in parts if not catalog.has_partition(t, p)}


TRANSACTIONAL_ID_AUTHORIZATION_FAILED = ke.TransactionalIdAuthorizationFailedError.errno
TRANSACTION_ABORTABLE = ke.TransactionAbortableError.errno
CONCURRENT_TRANSACTIONS = ke.ConcurrentTransactionsError.errno
NOT_ENOUGH_REPLICAS = ke.NotEnoughReplicasError.errno
# coordinator errors a producer would not retry on Produce: Kafka answers NOT_ENOUGH_REPLICAS instead
_RETRIABLE_VERIFICATION = frozenset({CONCURRENT_TRANSACTIONS, ke.CoordinatorLoadInProgressError.errno,
                                     ke.CoordinatorNotAvailableError.errno, ke.NotCoordinatorError.errno})
ABORTABLE_PRODUCE_VERSION = 11  # TRANSACTION_ABORTABLE (KIP-890)
IMPLICIT_ADD_PRODUCE_VERSION = 12  # Kafka adds the partition to the transaction itself


def verify_transactional_produce(state: BrokerState, transactional_id: str | None, producer_id: int, epoch: int,
                                 topic: str, partition: int, version: int) -> tuple[int, str | None]:
    """(error, message) for a transactional batch before it is appended (KIP-890 part 1), as Kafka
    answers each Produce version."""
    if transactional_id is None:
        return TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
    code = state.txns.verify_produce(transactional_id, producer_id, epoch, (topic, partition),
                                     add_if_missing=version >= IMPLICIT_ADD_PRODUCE_VERSION)
    if not code:
        return 0, None
    if code == PRODUCER_FENCED:
        return INVALID_PRODUCER_EPOCH, None
    if code == TRANSACTION_ABORTABLE:
        if version >= ABORTABLE_PRODUCE_VERSION:
            return TRANSACTION_ABORTABLE, None
        return ke.InvalidTxnStateError.errno, "Partition was not added to the transaction"
    if code in _RETRIABLE_VERIFICATION and not (code == CONCURRENT_TRANSACTIONS
                                                and version >= IMPLICIT_ADD_PRODUCE_VERSION):
        return NOT_ENOUGH_REPLICAS, ("Unable to verify the partition has been added to the transaction. "
                                     f"Underlying error: {ke.for_code(code).__name__}")
    return code, None
