"""OffsetForLeaderEpoch: one leader epoch (0) that started at offset 0 and is still current."""
from __future__ import annotations

from kafka.protocol.consumer import OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse

from ..context import RequestContext
from ..registry import handles
from .common import LEADER_EPOCH, leader_epoch_error, lookup_partition

TopicResult = OffsetForLeaderEpochResponse.OffsetForLeaderTopicResult
EpochEndOffset = TopicResult.EpochEndOffset


@handles(OffsetForLeaderEpochRequest, OffsetForLeaderEpochResponse, 2, 4)
async def handle_offset_for_leader_epoch(ctx: RequestContext,
                                         req: OffsetForLeaderEpochRequest) -> OffsetForLeaderEpochResponse:
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            plog, code = lookup_partition(ctx.broker, t.topic, p.partition)
            code = code or leader_epoch_error(p.current_leader_epoch)
            epoch, end = -1, -1
            if not code and p.leader_epoch == LEADER_EPOCH:
                epoch, end = LEADER_EPOCH, plog.log_end_offset
            parts.append(EpochEndOffset(error_code=code, partition=p.partition, leader_epoch=epoch, end_offset=end))
        topics.append(TopicResult(topic=t.topic, partitions=parts))
    return OffsetForLeaderEpochResponse(throttle_time_ms=0, topics=topics)
