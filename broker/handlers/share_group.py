"""ShareGroupHeartbeat (API 76) and ShareGroupDescribe (API 77): share-group membership (KIP-932); the work is
done by coordinator/group/share/coordinator.py. As Kafka 4.3, both answer UNSUPPORTED_VERSION unless the
share.version feature is finalized at 1 or more."""
from __future__ import annotations

import logging

import kafka.errors as ke

from minikafka.coordinator.group.share.coordinator import ShareHeartbeat
from minikafka.protocol.messages import (
    ShareGroupDescribeRequest,
    ShareGroupDescribeResponse,
    ShareGroupHeartbeatRequest,
    ShareGroupHeartbeatResponse,
)
from minikafka.broker.security import acl
from minikafka.broker.security.authorized_operations import bitfield
from minikafka.broker.security.authorizer import authorize, authorized_names, authorized_operations
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.broker.handlers.groups import client_host

log = logging.getLogger(__name__)
UNSUPPORTED_VERSION = ke.UnsupportedVersionError.errno
HbAssignment = ShareGroupHeartbeatResponse.Assignment
HbTopicPartitions = HbAssignment.TopicPartitions
DescribedGroup = ShareGroupDescribeResponse.DescribedGroup
DescribedMember = DescribedGroup.Member
DescribedAssignment = DescribedMember.Assignment
DescribedTopicPartitions = DescribedAssignment.TopicPartitions


def share_groups_enabled(ctx: RequestContext) -> bool:
    """Kafka 4.3's KafkaApis.isShareGroupProtocolEnabled: share.version >= 1."""
    return ctx.broker.features.level("share.version") >= 1


def _heartbeat_error(code: int, message: str | None = None) -> ShareGroupHeartbeatResponse:
    return ShareGroupHeartbeatResponse(throttle_time_ms=0, error_code=code, error_message=message, member_id=None,
                                       member_epoch=0, heartbeat_interval_ms=0, assignment=None)


@handles(ShareGroupHeartbeatRequest, ShareGroupHeartbeatResponse, 1, 1)
async def handle_share_group_heartbeat(ctx: RequestContext, req: ShareGroupHeartbeatRequest
                                       ) -> ShareGroupHeartbeatResponse:
    if not share_groups_enabled(ctx):
        return _heartbeat_error(UNSUPPORTED_VERSION)
    if not authorize(ctx, acl.READ, acl.GROUP, req.group_id):
        return _heartbeat_error(ke.GroupAuthorizationFailedError.errno, "Group authorization failed.")
    if req.subscribed_topic_names and ctx.broker.authorizer is not None:
        names = set(req.subscribed_topic_names)
        if len(authorized_names(ctx, acl.DESCRIBE, acl.TOPIC, names)) < len(names):
            return _heartbeat_error(ke.TopicAuthorizationFailedError.errno)
    groups = ctx.broker.groups
    result = groups.share.heartbeat(ShareHeartbeat(
        group_id=req.group_id, member_id=req.member_id, member_epoch=req.member_epoch, rack_id=req.rack_id,
        subscribed_topic_names=list(req.subscribed_topic_names) if req.subscribed_topic_names is not None else None,
        client_id=ctx.client_id or "", client_host=client_host(ctx)))
    if result.error == 0 and (code := await groups.durable(req.group_id)):
        return _heartbeat_error(code)
    await initialize_share_partitions(ctx)
    if result.error:
        return _heartbeat_error(result.error, result.message)
    assignment = None
    if result.assignment is not None:
        assignment = HbAssignment(topic_partitions=[
            HbTopicPartitions(topic_id=t, partitions=sorted(ps))
            for t, ps in sorted(result.assignment.items(), key=lambda kv: str(kv[0]))])
    return ShareGroupHeartbeatResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                       member_id=result.member_id, member_epoch=result.member_epoch,
                                       heartbeat_interval_ms=result.heartbeat_interval_ms, assignment=assignment)


async def initialize_share_partitions(ctx: RequestContext) -> None:
    """The share-partitions the group coordinator just assigned for the first time get their state (start
    offset unset: the partition leader applies share.auto.offset.reset when it first loads them)."""
    share = ctx.broker.groups.share
    while share.to_initialize:
        group_id, parts = share.to_initialize.pop(0)
        for topic_id, partitions in parts.items():
            for p in sorted(partitions):
                result = await ctx.broker.share_persister.initialize(group_id, topic_id, p, 0, -1)
                if result.error_code:
                    log.warning("share group %s: initializing %s-%d failed: %s", group_id, topic_id, p,
                                result.error_code)


def _assignment(share, assigned) -> DescribedAssignment:
    return DescribedAssignment(topic_partitions=[
        DescribedTopicPartitions(topic_id=t, topic_name=share.topic_name(t) or "", partitions=sorted(ps))
        for t, ps in sorted(assigned.items(), key=lambda kv: str(kv[0]))])


@handles(ShareGroupDescribeRequest, ShareGroupDescribeResponse, 1, 1)
async def handle_share_group_describe(ctx: RequestContext, req: ShareGroupDescribeRequest
                                      ) -> ShareGroupDescribeResponse:
    share = ctx.broker.groups.share
    enabled = share_groups_enabled(ctx)
    out, denied = [], []

    def failed(group_id: str, code: int, message: str | None = None):
        return DescribedGroup(error_code=code, error_message=message, group_id=group_id, group_state="",
                              group_epoch=0, assignment_epoch=0, assignor_name="", members=[],
                              authorized_operations=-2**31)
    for group_id in req.group_ids:
        if not enabled:
            out.append(failed(group_id, UNSUPPORTED_VERSION))
            continue
        if not authorize(ctx, acl.DESCRIBE, acl.GROUP, group_id):
            denied.append(failed(group_id, ke.GroupAuthorizationFailedError.errno, "Group authorization failed."))
            continue
        code, message, group = share.describe(group_id)
        if code:
            out.append(failed(group_id, code, message))
            continue
        members = [DescribedMember(member_id=m.member_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                                   client_id=m.client_id, client_host=m.client_host,
                                   subscribed_topic_names=list(m.subscribed_topic_names),
                                   assignment=_assignment(share, m.assigned))
                   for m in group.members.values()]
        out.append(DescribedGroup(
            error_code=0, error_message=None, group_id=group_id, group_state=group.state.value,
            group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch, assignor_name=share.assignor_name,
            members=members, authorized_operations=bitfield(authorized_operations(ctx, acl.GROUP, group_id))
            if req.include_authorized_operations else -2**31))
    return ShareGroupDescribeResponse(throttle_time_ms=0, groups=denied + out)
