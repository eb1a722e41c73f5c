"""TxnOffsetCommit: offsets committed inside a transaction. They stay pending in the group
coordinator until the transaction's marker reaches the group's `__consumer_offsets` partition.

Checked in Kafka's order: unknown partitions; then (KIP-890) that the group's partition is in the
producer's open transaction at this epoch (AddOffsetsToTxn put it there), with the verification
errors mapped as Kafka maps them for TxnOffsetCommit (fenced -> INVALID_PRODUCER_EPOCH, not in the
transaction -> INVALID_TXN_STATE before v4); then the group coordinator (KIP-447 generation/member
checks, the transactional write of the offsets). v5 (a TV2 client, KIP-890 part 2) adds the group's
partition to the open transaction itself, as Produce v12+ does for data partitions; it never sent
AddOffsetsToTxn."""
from __future__ import annotations

import logging

import kafka.errors as ke
from kafka.protocol.producer import TxnOffsetCommitRequest, TxnOffsetCommitResponse

from minikafka.coordinator.txn.coordinator import GROUP_TOPIC, TRANSACTION_ABORTABLE
from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize, authorized_names
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.broker.handlers.txn_common import (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED, UNKNOWN_TOPIC_OR_PARTITION, unknown_partitions,
                         verify_in_transaction)

log = logging.getLogger(__name__)

TopicResponse = TxnOffsetCommitResponse.TxnOffsetCommitResponseTopic
PartitionResponse = TopicResponse.TxnOffsetCommitResponsePartition
ABORTABLE_SINCE = 4
IMPLICIT_ADD_SINCE = 5


def _verification_error(code: int, version: int) -> int:
    if code == PRODUCER_FENCED:
        return INVALID_PRODUCER_EPOCH
    if code == TRANSACTION_ABORTABLE and version < ABORTABLE_SINCE:
        return ke.InvalidTxnStateError.errno
    if code == ke.NetworkExceptionError.errno:  # Kafka: retried by every client, without a coordinator lookup
        return ke.CoordinatorLoadInProgressError.errno
    return code


def _response(errors: dict[tuple[str, int], int]) -> TxnOffsetCommitResponse:
    by_topic: dict[str, list] = {}
    for (topic, p), code in errors.items():
        by_topic.setdefault(topic, []).append(PartitionResponse(partition_index=p, error_code=code))
    return TxnOffsetCommitResponse(throttle_time_ms=0, topics=[TopicResponse(name=t, partitions=ps)
                                                               for t, ps in by_topic.items()])


@handles(TxnOffsetCommitRequest, TxnOffsetCommitResponse, 0, 5)
async def handle_txn_offset_commit(ctx: RequestContext, req: TxnOffsetCommitRequest) -> TxnOffsetCommitResponse:
    state = ctx.broker
    version = ctx.api_version
    denied_topics: set[str] = set()
    if state.authorizer is not None:
        everything = [(t.name, p.partition_index) for t in req.topics for p in t.partitions]
        if not authorize(ctx, acl.WRITE, acl.TRANSACTIONAL_ID, req.transactional_id):
            return _response({tp: ke.TransactionalIdAuthorizationFailedError.errno for tp in everything})
        if not authorize(ctx, acl.READ, acl.GROUP, req.group_id):
            return _response({tp: ke.GroupAuthorizationFailedError.errno for tp in everything})
        names = [t.name for t in req.topics]
        denied_topics = set(names) - authorized_names(ctx, acl.READ, acl.TOPIC, names)
    rows = [(t.name, p.partition_index, p.committed_offset,
             p.committed_leader_epoch if version >= 2 else -1, p.committed_metadata)
            for t in req.topics for p in t.partitions]
    errors: dict[tuple[str, int], int] = {}
    if denied_topics:  # TOPIC_AUTHORIZATION_FAILED before the topic's existence, as Kafka
        errors.update({(t, p): ke.TopicAuthorizationFailedError.errno for t, p, *_ in rows if t in denied_topics})
        rows = [r for r in rows if r[0] not in denied_topics]
    unknown = unknown_partitions(state, [(t, p) for t, p, *_ in rows])
    errors.update({(t, p): UNKNOWN_TOPIC_OR_PARTITION for t, p in unknown})
    known = [r for r in rows if (r[0], r[1]) not in unknown]
    if known:
        group_tp = (GROUP_TOPIC, state.txns.group_partition(req.group_id))
        code = await verify_in_transaction(state, req.transactional_id, req.producer_id, req.producer_epoch,
                                           group_tp, add_if_missing=version >= IMPLICIT_ADD_SINCE, always=True)
        if code:
            errors.update({(t, p): _verification_error(code, version) for t, p, *_ in known})
        else:
            errors.update(state.groups.commit_transactional_offsets(
                group_id=req.group_id, producer_id=req.producer_id, producer_epoch=req.producer_epoch,
                generation_id=req.generation_id if version >= 3 else -1,
                member_id=req.member_id if version >= 3 else "",
                group_instance_id=req.group_instance_id if version >= 3 else None,
                partitions=known))
            if state.groups.replication is not None and not any(errors.values()):
                if (code := await state.groups.durable(req.group_id)):  # cluster: replicated first
                    errors = {tp: code for tp in errors}
    return _response(errors)
