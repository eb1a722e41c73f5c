"""OffsetFetch: one group (v1-v7) or a batch of groups (v8+); all partitions or listed ones;
require_stable (v7+) answers UNSTABLE_OFFSET_COMMIT for partitions with a pending transactional commit."""
from __future__ import annotations

import kafka.errors as ke
from kafka.protocol.consumer import OffsetFetchRequest, OffsetFetchResponse

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize, authorized_names
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.broker.handlers.common import ZERO_UUID

V7Topic = OffsetFetchResponse.OffsetFetchResponseTopic
V7Partition = V7Topic.OffsetFetchResponsePartition
UNKNOWN_TOPIC_ID = ke.UnknownTopicIdError.errno
Group = OffsetFetchResponse.OffsetFetchResponseGroup
GroupTopic = Group.OffsetFetchResponseTopics
GroupPartition = GroupTopic.OffsetFetchResponsePartitions


async def _fetch(ctx: RequestContext, group_id: str, topics, require_stable: bool, by_id: bool,
                 member: tuple[str | None, int] = (None, -1)):
    """(group error, [(name, topic id, rows)]) with rows (partition, offset, epoch, metadata, error);
    `member`: (member id, member epoch) of v9+. As Kafka: DESCRIBE on the group, else
    GROUP_AUTHORIZATION_FAILED; topics the principal may not DESCRIBE are left out of an all-topics
    answer and answered TOPIC_AUTHORIZATION_FAILED (after the others) when asked for by name. On a
    cluster, commits not yet replicated are waited for, never shown."""
    state = ctx.broker
    if not authorize(ctx, acl.DESCRIBE, acl.GROUP, group_id):
        return ke.GroupAuthorizationFailedError.errno, []
    if (code := await state.groups.committed_view(group_id)):
        return code, []
    if topics is None:
        code, found = state.groups.fetch_offsets(group_id, None, require_stable, *member)
        if state.authorizer is not None and found:
            visible = authorized_names(ctx, acl.DESCRIBE, acl.TOPIC, [name for name, _ in found])
            found = [(name, rows) for name, rows in found if name in visible]
        out = []
        for name, rows in found:
            info = state.catalog.get(name)
            if by_id and info is None:
                continue  # a deleted topic has no id to answer with
            out.append((name, info.topic_id if info is not None else ZERO_UUID, rows))
        return code, out
    wanted = []
    for t in topics:
        if by_id:
            info = state.catalog.by_id.get(t.topic_id)
            wanted.append((info.name if info is not None else "", t.topic_id, list(t.partition_indexes)))
        else:
            wanted.append((t.name, ZERO_UUID, list(t.partition_indexes)))
    denied = []
    if state.authorizer is not None:
        visible = authorized_names(ctx, acl.DESCRIBE, acl.TOPIC, [n for n, _, _ in wanted if n])
        denied = [(n, tid, [(p, -1, -1, "", ke.TopicAuthorizationFailedError.errno) for p in parts])
                  for n, tid, parts in wanted if n and n not in visible]
        wanted = [w for w in wanted if not w[0] or w[0] in visible]
    code, found = state.groups.fetch_offsets(group_id, [(n, parts) for n, _, parts in wanted], require_stable,
                                             *member)
    if code:
        return code, []
    out = []
    for (name, tid, parts), (_, rows) in zip(wanted, found):
        if by_id and not name:  # v10: an id no topic has
            rows = [(p, -1, -1, "", UNKNOWN_TOPIC_ID) for p in parts]
        out.append((name, tid, rows))
    return code, out + denied


@handles(OffsetFetchRequest, OffsetFetchResponse, 1, 10)
async def handle_offset_fetch(ctx: RequestContext, req: OffsetFetchRequest) -> OffsetFetchResponse:
    v = ctx.api_version
    require_stable = bool(req.require_stable) if v >= 7 else False
    if v >= 8:
        groups = []
        for g in req.groups:
            member = (g.member_id, g.member_epoch) if v >= 9 else (None, -1)
            code, topics = await _fetch(ctx, g.group_id, g.topics, require_stable, by_id=v >= 10, member=member)
            groups.append(Group(group_id=g.group_id, error_code=code, topics=[
                GroupTopic(name=name if v < 10 else None, topic_id=tid, partitions=[
                    GroupPartition(partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=m,
                                   error_code=err) for p, o, e, m, err in rows])
                for name, tid, rows in topics]))
        return OffsetFetchResponse(throttle_time_ms=0, groups=groups)
    code, topics = await _fetch(ctx, req.group_id, req.topics, require_stable, by_id=False)
    if code and v < 2 and req.topics:
        # v1 has no group-level error: every requested partition carries it
        topics = [(t.name, ZERO_UUID, [(p, -1, -1, "", code) for p in t.partition_indexes]) for t in req.topics]
    return OffsetFetchResponse(throttle_time_ms=0, error_code=code, topics=[
        V7Topic(name=name, partitions=[
            V7Partition(partition_index=p, committed_offset=o, committed_leader_epoch=e, metadata=m, error_code=err)
            for p, o, e, m, err in rows])
        for name, _, rows in topics])
