"""OffsetCommit: unknown topics/partitions are answered here (as KafkaApis does, before the group
coordinator sees the request); the rest goes to the group coordinator in one record batch."""
from __future__ import annotations

import kafka.errors as ke
from kafka.protocol.consumer import OffsetCommitRequest, OffsetCommitResponse

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize, authorized_names
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.broker.handlers.common import ZERO_UUID, has_partition

TopicResponse = OffsetCommitResponse.OffsetCommitResponseTopic
PartitionResponse = TopicResponse.OffsetCommitResponsePartition
UNKNOWN_TOPIC_OR_PARTITION = ke.UnknownTopicOrPartitionError.errno
UNKNOWN_TOPIC_ID = ke.UnknownTopicIdError.errno


def _all(req: OffsetCommitRequest, v: int, code: int) -> OffsetCommitResponse:
    return OffsetCommitResponse(throttle_time_ms=0, topics=[
        TopicResponse(name=t.name if v < 10 else None, topic_id=t.topic_id if v >= 10 else ZERO_UUID,
                      partitions=[PartitionResponse(partition_index=p.partition_index, error_code=code)
                                  for p in t.partitions]) for t in req.topics])


@handles(OffsetCommitRequest, OffsetCommitResponse, 2, 10)
async def handle_offset_commit(ctx: RequestContext, req: OffsetCommitRequest) -> OffsetCommitResponse:
    state = ctx.broker
    v = ctx.api_version
    if not authorize(ctx, acl.READ, acl.GROUP, req.group_id):  # every partition, as Kafka's error response
        return _all(req, v, ke.GroupAuthorizationFailedError.errno)
    errors: dict[tuple[int, int], int] = {}  # (topic index, partition index in request) -> error
    commits = []
    names: list[str | None] = []
    for t in req.topics:
        if v >= 10:
            info = state.catalog.by_id.get(t.topic_id)
            names.append(info.name if info is not None else None)
        else:
            names.append(t.name)
    readable = authorized_names(ctx, acl.READ, acl.TOPIC, [n for n in names if n is not None]) \
        if state.authorizer is not None else None
    for ti, t in enumerate(req.topics):
        name = names[ti]
        missing = UNKNOWN_TOPIC_ID if v >= 10 else UNKNOWN_TOPIC_OR_PARTITION
        for pi, p in enumerate(t.partitions):
            if readable is not None and name is not None and name not in readable:
                errors[(ti, pi)] = ke.TopicAuthorizationFailedError.errno
            elif name is None or not has_partition(state, name, p.partition_index):
                errors[(ti, pi)] = missing if name is None else UNKNOWN_TOPIC_OR_PARTITION
            else:
                commits.append((name, p.partition_index, p.committed_offset,
                                p.committed_leader_epoch if v >= 6 else -1, p.committed_metadata))
    results = {}
    if commits:
        results = state.groups.commit_offsets(
            group_id=req.group_id, generation_id=req.generation_id_or_member_epoch, member_id=req.member_id or "",
            group_instance_id=req.group_instance_id if v >= 7 else None,
            retention_time_ms=req.retention_time_ms if v <= 4 else -1, api_version=v, partitions=commits)
        if state.groups.replication is not None and results and not any(results.values()):
            if (code := await state.groups.durable(req.group_id)):  # cluster: replicated before the answer
                results = {tp: code for tp in results}
    topics = []
    for ti, t in enumerate(req.topics):
        parts = []
        for pi, p in enumerate(t.partitions):
            code = errors.get((ti, pi))
            if code is None:
                code = results.get((names[ti], p.partition_index), 0)
            parts.append(PartitionResponse(partition_index=p.partition_index, error_code=code))
        topics.append(TopicResponse(name=t.name if v < 10 else None,
                                    topic_id=t.topic_id if v >= 10 else ZERO_UUID, partitions=parts))
    return OffsetCommitResponse(throttle_time_ms=0, topics=topics)
