"""Helpers shared by the transaction handlers: version-dependent error codes and topic checks."""
from __future__ import annotations

import kafka.errors as ke

from minikafka.broker.state import BrokerState

PRODUCER_FENCED = ke.ProducerFencedError.errno
INVALID_PRODUCER_EPOCH = ke.InvalidProducerEpochError.errno
UNKNOWN_TOPIC_OR_PARTITION = ke.UnknownTopicOrPartitionError.errno
OPERATION_NOT_ATTEMPTED = ke.OperationNotAttemptedError.errno


async def durable(state: BrokerState, transactional_id: str, code: int) -> int:
    """Cluster: a successful answer waits until the coordinator's `__transaction_state` write is
    replicated (NOT_COORDINATOR / COORDINATOR_NOT_AVAILABLE if it is not); else `code` as it is."""
    txns = state.txns.txns
    if code or txns.replication is None:
        return code
    return await txns.durable(transactional_id)


def for_version(code: int, version: int, fenced_since: int) -> int:
    """PRODUCER_FENCED exists from `fenced_since` on; older clients get INVALID_PRODUCER_EPOCH."""
    if code == PRODUCER_FENCED and version < fenced_since:
        return INVALID_PRODUCER_EPOCH
    return code


def unknown_partitions(state: BrokerState, parts: list[tuple[str, int]]) -> set[tuple[str, int]]:
    """Partitions that do not exist (Kafka answers them UNKNOWN_TOPIC_OR_PARTITION and does not
    attempt the others)."""
    from minikafka.broker.handlers.common import has_partition
    return {(t, p) for t, p in parts if not has_partition(state, t, p)}


TRANSACTIONAL_ID_AUTHORIZATION_FAILED = ke.TransactionalIdAuthorizationFailedError.errno
TRANSACTION_ABORTABLE = ke.TransactionAbortableError.errno
CONCURRENT_TRANSACTIONS = ke.ConcurrentTransactionsError.errno
NOT_ENOUGH_REPLICAS = ke.NotEnoughReplicasError.errno
# coordinator errors a producer would not retry on Produce: Kafka answers NOT_ENOUGH_REPLICAS instead
NETWORK_EXCEPTION = ke.NetworkExceptionError.errno  # the transaction coordinator could not be asked
_RETRIABLE_VERIFICATION = frozenset({CONCURRENT_TRANSACTIONS, NETWORK_EXCEPTION, ke.CoordinatorLoadInProgressError.errno,
                                     ke.CoordinatorNotAvailableError.errno, ke.NotCoordinatorError.errno})
ABORTABLE_PRODUCE_VERSION = 11  # TRANSACTION_ABORTABLE (KIP-890)
IMPLICIT_ADD_PRODUCE_VERSION = 12  # Kafka adds the partition to the transaction itself


async def verify_in_transaction(state: BrokerState, transactional_id: str, producer_id: int, epoch: int,
                                tp: tuple[str, int], add_if_missing: bool, always: bool = False) -> int:
    """Is `tp` in the producer's open transaction (KIP-890; `add_if_missing`: add it, TV2)? Asked of the
    transaction coordinator: in-process, or on a cluster over the wire when another node leads the
    id's `__transaction_state` partition. `always`: verify even with verification disabled."""
    failover = state.coordinator_failover
    if failover is not None and (node := failover.coordinator_is_remote(transactional_id)) is not None:
        if not (add_if_missing or always or state.txns.config.verification_enabled):
            return 0
        return await failover.verify_remote(node, transactional_id, producer_id, epoch, tp, add_if_missing)
    if always and not add_if_missing:
        return state.txns.verify_partitions(transactional_id, producer_id, epoch, [tp])[tp]
    return state.txns.verify_produce(transactional_id, producer_id, epoch, tp, add_if_missing=add_if_missing)


async def verify_transactional_produce(state: BrokerState, transactional_id: str | None, producer_id: int,
                                       epoch: int, topic: str, partition: int, version: int) -> tuple[int, str | None]:
    """(error, message) for a transactional batch before it is appended (KIP-890 part 1), as Kafka
    answers each Produce version."""
    if transactional_id is None:
        return TRANSACTIONAL_ID_AUTHORIZATION_FAILED, None
    code = await verify_in_transaction(state, transactional_id, producer_id, epoch, (topic, partition),
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
                                     f"Underlying error: {ke.for_code(code).message}")
    return code, None
