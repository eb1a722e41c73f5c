"""DescribeShareGroupOffsets (API 90) v0-1, AlterShareGroupOffsets (91) v0 and DeleteShareGroupOffsets (92) v0:
the start offsets of a share group's share-partitions (KIP-932), read and written through the share
coordinator (`share_persister`). Altering and deleting need an empty group; the partition leader's cached
share-partitions of the group are dropped, so the next fetch starts from the new state."""
from __future__ import annotations

import uuid

import kafka.errors as ke

from minikafka.coordinator.group.errors import AppendFailed
from minikafka.coordinator.group.metadata import GroupError
from minikafka.protocol.errors import NON_EMPTY_GROUP, UNKNOWN_TOPIC_OR_PARTITION
from minikafka.protocol.messages import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsResponse,
    DeleteShareGroupOffsetsRequest,
    DeleteShareGroupOffsetsResponse,
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsResponse,
)
from minikafka.broker.handlers.share_group import share_groups_enabled
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize, authorized_names

UNSUPPORTED_VERSION = ke.UnsupportedVersionError.errno
GROUP_AUTHORIZATION_FAILED = ke.GroupAuthorizationFailedError.errno
TOPIC_AUTHORIZATION_FAILED = ke.TopicAuthorizationFailedError.errno
GROUP_ID_NOT_FOUND = ke.GroupIdNotFoundError.errno
DescGroup = DescribeShareGroupOffsetsResponse.DescribeShareGroupOffsetsResponseGroup
DescTopic = DescGroup.DescribeShareGroupOffsetsResponseTopic
DescPartition = DescTopic.DescribeShareGroupOffsetsResponsePartition
AlterTopic = AlterShareGroupOffsetsResponse.AlterShareGroupOffsetsResponseTopic
AlterPartition = AlterTopic.AlterShareGroupOffsetsResponsePartition
DeleteTopic = DeleteShareGroupOffsetsResponse.DeleteShareGroupOffsetsResponseTopic
NO_TOPIC = uuid.UUID(int=0)


def _group_check(ctx: RequestContext, group_id: str, operation: int) -> tuple[int, str | None]:
    if not share_groups_enabled(ctx):
        return UNSUPPORTED_VERSION, None
    if not authorize(ctx, operation, acl.GROUP, group_id):
        return GROUP_AUTHORIZATION_FAILED, "Group authorization failed."
    code, message, _group = ctx.broker.groups.share.describe(group_id)
    return code, message


@handles(DescribeShareGroupOffsetsRequest, DescribeShareGroupOffsetsResponse, 0, 1)
async def handle_describe_share_group_offsets(ctx: RequestContext, req: DescribeShareGroupOffsetsRequest
                                              ) -> DescribeShareGroupOffsetsResponse:
    state = ctx.broker
    out = []
    for g in req.groups:
        code, message = _group_check(ctx, g.group_id, acl.DESCRIBE)
        if code:
            out.append(DescGroup(group_id=g.group_id, topics=[], error_code=code, error_message=message))
            continue
        group = state.groups.share.groups[g.group_id]
        if g.topics is None:  # every share-partition with state
            wanted = [(name, tid, sorted(ps)) for tid, (name, ps) in group.initialized.items()]
        else:
            wanted = []
            for t in g.topics:
                info = state.catalog.get(t.topic_name)
                wanted.append((t.topic_name, info.topic_id if info is not None else None, list(t.partitions or ())))
        visible = authorized_names(ctx, acl.DESCRIBE, acl.TOPIC, [n for n, _t, _ps in wanted])
        topics = []
        for name, tid, partitions in wanted:
            parts = []
            for p in partitions:
                if name not in visible:
                    parts.append(DescPartition(partition_index=p, start_offset=-1, leader_epoch=-1, lag=-1,
                                               error_code=TOPIC_AUTHORIZATION_FAILED, error_message=None))
                    continue
                if tid is None:
                    parts.append(DescPartition(partition_index=p, start_offset=-1, leader_epoch=-1, lag=-1,
                                               error_code=UNKNOWN_TOPIC_OR_PARTITION, error_message=None))
                    continue
                s = await state.share_persister.read_summary(g.group_id, tid, p, -1)
                start = s.start_offset if not s.error_code else -1
                plog = state.catalog.partition_log(name, p)
                lag = -1
                if start >= 0 and plog is not None:
                    done = max(s.delivery_complete_count, 0)
                    lag = max(plog.high_watermark - start - done, 0)
                parts.append(DescPartition(partition_index=p, start_offset=start, leader_epoch=s.leader_epoch,
                                           lag=lag, error_code=0, error_message=None))
            topics.append(DescTopic(topic_name=name, topic_id=tid or NO_TOPIC, partitions=parts))
        out.append(DescGroup(group_id=g.group_id, topics=topics, error_code=0, error_message=None))
    return DescribeShareGroupOffsetsResponse(throttle_time_ms=0, groups=out)


def _require_empty(ctx: RequestContext, group_id: str) -> tuple[int, str | None]:
    group = ctx.broker.groups.share.groups.get(group_id)
    if group is not None and group.members:
        return NON_EMPTY_GROUP, "The group is not empty."
    return 0, None


@handles(AlterShareGroupOffsetsRequest, AlterShareGroupOffsetsResponse, 0, 0)
async def handle_alter_share_group_offsets(ctx: RequestContext, req: AlterShareGroupOffsetsRequest
                                           ) -> AlterShareGroupOffsetsResponse:
    state = ctx.broker

    def top(code: int, message: str | None = None) -> AlterShareGroupOffsetsResponse:
        return AlterShareGroupOffsetsResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                              responses=[])
    if not share_groups_enabled(ctx):
        return top(UNSUPPORTED_VERSION)
    if not authorize(ctx, acl.READ, acl.GROUP, req.group_id):
        return top(GROUP_AUTHORIZATION_FAILED, "Group authorization failed.")
    code, message, _group = state.groups.share.describe(req.group_id)
    if code and code != GROUP_ID_NOT_FOUND:
        return top(code, message)
    if code == GROUP_ID_NOT_FOUND and message and "not a share group" in message:
        return top(code, message)
    if (code := _require_empty(ctx, req.group_id)[0]):
        return top(code, "The group is not empty.")
    readable = authorized_names(ctx, acl.READ, acl.TOPIC, [t.topic_name for t in req.topics])
    responses, written = [], {}
    for t in req.topics:
        info = state.catalog.get(t.topic_name)
        parts = []
        for p in t.partitions:
            if t.topic_name not in readable:
                err = TOPIC_AUTHORIZATION_FAILED
            elif info is None or not 0 <= p.partition_index < info.partitions:
                err = UNKNOWN_TOPIC_OR_PARTITION
            else:
                old = await state.share_persister.read_summary(req.group_id, info.topic_id, p.partition_index, -1)
                epoch = max(old.state_epoch, 0) + 1 if not old.error_code else 1
                result = await state.share_persister.initialize(req.group_id, info.topic_id, p.partition_index,
                                                                epoch, p.start_offset)
                err = result.error_code
                if not err:
                    written.setdefault(info.topic_id, (t.topic_name, set()))[1].add(p.partition_index)
            parts.append(AlterPartition(partition_index=p.partition_index, error_code=err, error_message=None))
        responses.append(AlterTopic(topic_name=t.topic_name, topic_id=info.topic_id if info else NO_TOPIC,
                                    partitions=parts))
    if written:
        try:
            state.groups.share.add_partitions(req.group_id, {t: (n, frozenset(ps)) for t, (n, ps) in written.items()})
        except (GroupError, AppendFailed) as exc:
            return top(exc.errno)
        if (code := await state.groups.durable(req.group_id)):
            return top(code)
        for tid in written:
            state.share_manager.drop(req.group_id, tid)
    return AlterShareGroupOffsetsResponse(throttle_time_ms=0, error_code=0, error_message=None, responses=responses)


@handles(DeleteShareGroupOffsetsRequest, DeleteShareGroupOffsetsResponse, 0, 0)
async def handle_delete_share_group_offsets(ctx: RequestContext, req: DeleteShareGroupOffsetsRequest
                                            ) -> DeleteShareGroupOffsetsResponse:
    state = ctx.broker

    def top(code: int, message: str | None = None) -> DeleteShareGroupOffsetsResponse:
        return DeleteShareGroupOffsetsResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                               responses=[])
    if not share_groups_enabled(ctx):
        return top(UNSUPPORTED_VERSION)
    if not authorize(ctx, acl.DELETE, acl.GROUP, req.group_id):
        return top(GROUP_AUTHORIZATION_FAILED, "Group authorization failed.")
    code, message = _group_check(ctx, req.group_id, acl.DELETE)
    if code:
        return top(code, message)
    if (code := _require_empty(ctx, req.group_id)[0]):
        return top(code, "The group is not empty.")
    group = state.groups.share.groups[req.group_id]
    readable = authorized_names(ctx, acl.READ, acl.TOPIC, [t.topic_name for t in req.topics])
    responses, deleted = [], set()
    for t in req.topics:
        info = state.catalog.get(t.topic_name)
        err = 0
        if t.topic_name not in readable:
            err = TOPIC_AUTHORIZATION_FAILED
        elif info is None:
            err = UNKNOWN_TOPIC_OR_PARTITION
        else:
            for p in sorted(group.initialized.get(info.topic_id, ("", frozenset()))[1]):
                result = await state.share_persister.delete(req.group_id, info.topic_id, p)
                err = err or result.error_code
            if not err:
                deleted.add(info.topic_id)
        responses.append(DeleteTopic(topic_name=t.topic_name, topic_id=info.topic_id if info else NO_TOPIC,
                                     error_code=err, error_message=None))
    if deleted:
        try:
            state.groups.share.forget_partitions(req.group_id, deleted)
        except (GroupError, AppendFailed) as exc:
            return top(exc.errno)
        if (code := await state.groups.durable(req.group_id)):
            return top(code)
        for tid in deleted:
            state.share_manager.drop(req.group_id, tid)
    return DeleteShareGroupOffsetsResponse(throttle_time_ms=0, error_code=0, error_message=None, responses=responses)
