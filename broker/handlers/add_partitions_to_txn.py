"""AddPartitionsToTxn: v0-3 from producers (add partitions to the open transaction); v4+ is the
batched broker form, whose `verify_only` entries ask whether partitions are already in the
transaction (KIP-890 part 1). Unknown partitions fail alone; the others are then OPERATION_NOT_ATTEMPTED."""
from __future__ import annotations

import kafka.errors as ke

from kafka.protocol.producer import AddPartitionsToTxnRequest, AddPartitionsToTxnResponse

from minikafka.coordinator.txn.coordinator import TransactionCoordinator
from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize, authorize_cluster, authorized_names
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.broker.state import BrokerState
from minikafka.broker.handlers.common import INTERNAL_TOPICS
from minikafka.broker.handlers.txn_common import OPERATION_NOT_ATTEMPTED, UNKNOWN_TOPIC_OR_PARTITION, durable, for_version, unknown_partitions

Result = AddPartitionsToTxnResponse.AddPartitionsToTxnResult
TopicResult = AddPartitionsToTxnResponse.AddPartitionsToTxnTopicResult
PartitionResult = TopicResult.AddPartitionsToTxnPartitionResult
FENCED_SINCE = 2


def _results(state: BrokerState, coord: TransactionCoordinator, txn_id: str, pid: int, epoch: int, topics,
             verify_only: bool, batched: bool = False) -> dict[tuple[str, int], int]:
    parts = [(t.name, p) for t in topics for p in t.partitions]
    unknown = unknown_partitions(state, parts)
    if unknown:
        return {tp: UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else OPERATION_NOT_ATTEMPTED for tp in parts}
    if verify_only:
        return coord.verify_partitions(txn_id, pid, epoch, parts)
    # the batched broker form (v4+) stands for a TV2 partition leader adding its partition (Kafka:
    # transactionVersionForAddPartitionsToTxn)
    code = coord.add_partitions(txn_id, pid, epoch, set(parts), client_tv=2 if batched else 0)
    return {tp: code for tp in parts}


async def _replicated(state: BrokerState, txn_id: str, errors: dict[tuple[str, int], int]) -> dict[tuple[str, int], int]:
    """Cluster: partitions added are answered once the coordinator's write is replicated."""
    if not errors or any(errors.values()):
        return errors
    code = await durable(state, txn_id, 0)
    return {tp: code for tp in errors} if code else errors


def _topic_results(errors: dict[tuple[str, int], int], topic_cls=TopicResult) -> list:
    by_topic: dict[str, list] = {}
    for (topic, p), code in errors.items():
        by_topic.setdefault(topic, []).append(
            topic_cls.AddPartitionsToTxnPartitionResult(partition_index=p, partition_error_code=code))
    return [topic_cls(name=t, results_by_partition=ps) for t, ps in by_topic.items()]


def _unauthorized(ctx: RequestContext, txn_id: str, topics) -> dict[tuple[str, int], int] | None:
    """Kafka's checks for client requests (v0-3): WRITE on the transactional id (else every partition
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED), WRITE on each topic (internal topics never pass); a refused
    topic fails the request: its partitions TOPIC_AUTHORIZATION_FAILED, unknown ones
    UNKNOWN_TOPIC_OR_PARTITION, the rest OPERATION_NOT_ATTEMPTED. None when all is allowed."""
    parts = [(t.name, p) for t in topics for p in t.partitions]
    if not authorize(ctx, acl.WRITE, acl.TRANSACTIONAL_ID, txn_id):
        return {tp: ke.TransactionalIdAuthorizationFailedError.errno for tp in parts}
    names = {t.name for t in topics}
    allowed = authorized_names(ctx, acl.WRITE, acl.TOPIC, [n for n in names if n not in INTERNAL_TOPICS])
    if names <= allowed:
        return None
    unknown = unknown_partitions(ctx.broker, [tp for tp in parts if tp[0] in allowed])
    return {tp: ke.TopicAuthorizationFailedError.errno if tp[0] not in allowed
            else UNKNOWN_TOPIC_OR_PARTITION if tp in unknown else OPERATION_NOT_ATTEMPTED for tp in parts}


@handles(AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, 0, 5)
async def handle_add_partitions_to_txn(ctx: RequestContext, req: AddPartitionsToTxnRequest) -> AddPartitionsToTxnResponse:
    state = ctx.broker
    coord = state.txns
    version = ctx.api_version
    if version >= 4 and not authorize_cluster(ctx, acl.CLUSTER_ACTION):
        # the batched form comes from brokers only
        return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=ke.ClusterAuthorizationFailedError.errno,
                                          results_by_transaction=[])
    if version < 4:
        # Kafka filters internal topics out before authorizing topics, so they fail also without an authorizer
        if state.authorizer is not None or any(t.name in INTERNAL_TOPICS for t in req.v3_and_below_topics):
            refused = _unauthorized(ctx, req.v3_and_below_transactional_id, req.v3_and_below_topics)
            if refused is not None:
                return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(refused))
        errors = _results(state, coord, req.v3_and_below_transactional_id, req.v3_and_below_producer_id,
                          req.v3_and_below_producer_epoch, req.v3_and_below_topics, verify_only=False)
        if coord.clustered:
            errors = await _replicated(state, req.v3_and_below_transactional_id, errors)
        errors = {tp: for_version(code, version, FENCED_SINCE) for tp, code in errors.items()}
        return AddPartitionsToTxnResponse(throttle_time_ms=0, results_by_topic_v3_and_below=_topic_results(errors))
    results = []
    for txn in req.transactions:
        errors = _results(state, coord, txn.transactional_id, txn.producer_id, txn.producer_epoch, txn.topics,
                          verify_only=txn.verify_only, batched=True)
        if coord.clustered and not txn.verify_only:
            errors = await _replicated(state, txn.transactional_id, errors)
        results.append(Result(transactional_id=txn.transactional_id,
                              topic_results=_topic_results(errors, Result.AddPartitionsToTxnTopicResult)))
    return AddPartitionsToTxnResponse(throttle_time_ms=0, error_code=0, results_by_transaction=results)
