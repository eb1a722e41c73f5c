"""OffsetForLeaderEpoch: the end offset of a leader epoch, from the partition's leader epoch cache
(storage/leader_epoch_cache.py; Kafka Partition.lastOffsetForLeaderEpoch). Followers ask it before
truncating; consumers ask it after a leader change (KIP-320) to detect truncation.

Answer per partition: (largest epoch <= the requested one, start offset of the next epoch, or the log
end offset for the latest); (-1, -1) for an undefined or unknown-newer epoch. On a single broker the
partition is led in epoch 0 from its log start even before anything was appended (Kafka assigns the
epoch when the partition becomes leader), so an empty cache answers as if it held (0, log start).
On a cluster only the leader answers (NOT_LEADER_OR_FOLLOWER, FENCED/UNKNOWN_LEADER_EPOCH from the
replica manager)."""
from __future__ import annotations

import kafka.errors as ke

from kafka.protocol.consumer import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize_cluster, authorized_names
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.broker.handlers.common import LEADER_EPOCH, leader_epoch_error, lookup_partition

TopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEndOffset = TopicResult.EpochEndOffset


def end_offset_for(plog, requested: int, single_broker: bool) -> tuple[int, int]:
    """(epoch, end offset) for `requested` from the log's epoch cache; see the module docstring."""
    if single_broker and plog.latest_epoch < LEADER_EPOCH:
        return (LEADER_EPOCH, plog.log_end_offset) if requested == LEADER_EPOCH else (-1, -1)
    return plog.end_offset_for_epoch(requested)


@handles(OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, 2, 4)
async def handle_offset_for_leader_epoch(ctx: RequestContext,
                                         req: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    topics = []
    replicas = getattr(ctx.broker, "replicas", None)  # the replica manager on a cluster, None alone
    # CLUSTER_ACTION (a follower) allows every topic; otherwise DESCRIBE on each topic
    allowed = None
    if ctx.broker.authorizer is not None and not authorize_cluster(ctx, acl.CLUSTER_ACTION):
        allowed = authorized_names(ctx, acl.DESCRIBE, acl.TOPIC, [t.topic for t in req.topics])
    for t in req.topics:
        parts = []
        for p in t.partitions:
            if allowed is not None and t.topic not in allowed:
                parts.append(EpochEndOffset(error_code=ke.TopicAuthorizationFailedError.errno, partition=p.partition,
                                            leader_epoch=-1, end_offset=-1))
                continue
            plog, code = lookup_partition(ctx.broker, t.topic, p.partition)
            if replicas is not None:
                code = replicas.leader_error(t.topic, p.partition, p.current_leader_epoch) or code
            else:
                code = code or leader_epoch_error(p.current_leader_epoch)
            epoch, end = -1, -1
            if not code:
                epoch, end = end_offset_for(plog, p.leader_epoch, replicas is None)
            parts.append(EpochEndOffset(error_code=code, partition=p.partition, leader_epoch=epoch, end_offset=end))
        topics.append(TopicResult(topic=t.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
