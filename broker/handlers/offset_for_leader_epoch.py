"""OffsetForLeaderEpoch: one leader epoch (0) that started at offset 0 and is still current."""
from __future__ import annotations

import kafka.errors as ke

from kafka.protocol.consumer import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

from .. import acl
from ..authorizer import authorize_cluster, authorized_names
from ..context import RequestContext
from ..registry import handles
from .common import LEADER_EPOCH, leader_epoch_error, lookup_partition

TopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEndOffset = TopicResult.EpochEndOffset


@handles(OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, 2, 4)
async def handle_offset_for_leader_epoch(ctx: RequestContext,
                                         req: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    topics = []
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
            code = code or leader_epoch_error(p.current_leader_epoch)
            epoch, end = -1, -1
            if not code and p.leader_epoch == LEADER_EPOCH:
                epoch, end = LEADER_EPOCH, plog.log_end_offset
            parts.append(EpochEndOffset(error_code=code, partition=p.partition, leader_epoch=epoch, end_offset=end))
        topics.append(TopicResult(topic=t.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
