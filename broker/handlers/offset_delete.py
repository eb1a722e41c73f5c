"""OffsetDelete: remove a group's committed offsets for partitions it is not subscribed to."""
from __future__ import annotations

import kafka.errors as ke
from kafka.protocol.consumer import OffsetDeleteRequest, OffsetDeleteResponse

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize, authorized_names
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles

TopicResponse = OffsetDeleteResponse.OffsetDeleteResponseTopic
PartitionResponse = TopicResponse.OffsetDeleteResponsePartition
UNKNOWN_TOPIC_OR_PARTITION = ke.UnknownTopicOrPartitionError.errno


@handles(OffsetDeleteRequest, OffsetDeleteResponse, 0, 0)
async def handle_offset_delete(ctx: RequestContext, req: OffsetDeleteRequest) -> OffsetDeleteResponse:
    state = ctx.broker
    if not authorize(ctx, acl.DELETE, acl.GROUP, req.group_id):
        return OffsetDeleteResponse(error_code=ke.GroupAuthorizationFailedError.errno, throttle_time_ms=0, topics=[])
    readable = authorized_names(ctx, acl.READ, acl.TOPIC, [t.name for t in req.topics])
    denied = {(t.name, p.partition_index): ke.TopicAuthorizationFailedError.errno
              for t in req.topics if t.name not in readable for p in t.partitions}
    known = [(t.name, p.partition_index) for t in req.topics for p in t.partitions
             if t.name in readable and state.catalog.has_partition(t.name, p.partition_index)]
    code, results = state.groups.delete_offsets(req.group_id, known)
    if code:
        return OffsetDeleteResponse(error_code=code, throttle_time_ms=0, topics=[])
    return OffsetDeleteResponse(error_code=0, throttle_time_ms=0, topics=[
        TopicResponse(name=t.name, partitions=[
            PartitionResponse(partition_index=p.partition_index,
                              error_code=denied.get((t.name, p.partition_index))
                              or results.get((t.name, p.partition_index), UNKNOWN_TOPIC_OR_PARTITION))
            for p in t.partitions])
        for t in req.topics])
