"""ConsumerGroupHeartbeat (API 68) and ConsumerGroupDescribe (API 69): the KIP-848 consumer group
protocol; the work is done by coordinator/group/consumer/coordinator.py."""
from __future__ import annotations


import kafka.errors as ke

from minikafka.coordinator.group.consumer.coordinator import HeartbeatRequestData
from minikafka.coordinator.group.consumer.model import Assignment, freeze

from minikafka.protocol.messages import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from minikafka.broker.security import acl
from minikafka.broker.security.authorized_operations import bitfield
from minikafka.broker.security.authorizer import authorize, authorized_names, authorized_operations
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.broker.handlers.groups import client_host

HbTopicPartitions = ConsumerGroupHeartbeatResponse.Assignment.TopicPartitions
DescribedGroup = ConsumerGroupDescribeResponse.DescribedGroup
DescribedMember = DescribedGroup.Member
DescribedAssignment = DescribedMember.Assignment
DescribedTopicPartitions = DescribedAssignment.TopicPartitions
CLASSIC_MEMBER_TYPE, CONSUMER_MEMBER_TYPE = 0, 1  # MemberType of ConsumerGroupDescribe v1


UNSUPPORTED_VERSION = ke.UnsupportedVersionError.errno


def consumer_protocol_enabled(ctx: RequestContext) -> bool:
    """Kafka serves the consumer protocol only with `consumer` in group.coordinator.rebalance.protocols
    and group.version >= 1 finalized; otherwise both APIs answer UNSUPPORTED_VERSION."""
    state = ctx.broker
    protocols = (state.config.get("group.coordinator.rebalance.protocols") or "").split(",")
    return "consumer" in (p.strip().lower() for p in protocols) and state.features.level("group.version") >= 1


@handles(ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, 0, 1)
async def handle_consumer_group_heartbeat(ctx: RequestContext, req: ConsumerGroupHeartbeatRequest
                                          ) -> ConsumerGroupHeartbeatResponse:
    if not consumer_protocol_enabled(ctx):
        return ConsumerGroupHeartbeatResponse(throttle_time_ms=0, error_code=UNSUPPORTED_VERSION, error_message=None,
                                              member_id=None, member_epoch=0, heartbeat_interval_ms=0,
                                              assignment=None)
    if not authorize(ctx, acl.READ, acl.GROUP, req.group_id):
        return ConsumerGroupHeartbeatResponse(throttle_time_ms=0, error_code=ke.GroupAuthorizationFailedError.errno,
                                              error_message="Group authorization failed.", member_id=None,
                                              member_epoch=0, heartbeat_interval_ms=0, assignment=None)
    if req.subscribed_topic_names and ctx.broker.authorizer is not None:
        names = list(req.subscribed_topic_names)
        if len(authorized_names(ctx, acl.DESCRIBE, acl.TOPIC, names)) < len(set(names)):
            # Kafka 4.3: every subscribed topic needs DESCRIBE (TOPIC_AUTHORIZATION_FAILED, no message)
            return ConsumerGroupHeartbeatResponse(throttle_time_ms=0, error_code=ke.TopicAuthorizationFailedError.errno,
                                                  error_message=None, member_id=None, member_epoch=0,
                                                  heartbeat_interval_ms=0, assignment=None)
    owned: Assignment | None = None
    if req.topic_partitions is not None:
        owned = freeze({tp.topic_id: set(tp.partitions or ()) for tp in req.topic_partitions})
    data = HeartbeatRequestData(
        group_id=req.group_id, member_id=req.member_id or "", member_epoch=req.member_epoch,
        instance_id=req.instance_id, rack_id=req.rack_id, rebalance_timeout_ms=req.rebalance_timeout_ms,
        subscribed_topic_names=list(req.subscribed_topic_names) if req.subscribed_topic_names is not None else None,
        subscribed_topic_regex=req.subscribed_topic_regex if ctx.api_version >= 1 else None,
        server_assignor=req.server_assignor, owned=owned, client_id=ctx.client_id or "",
        client_host=client_host(ctx),
        topic_filter=(lambda names: authorized_names(ctx, acl.DESCRIBE, acl.TOPIC, names))
        if ctx.broker.authorizer is not None else None)
    result = ctx.broker.groups.consumer.heartbeat(data, ctx.api_version)
    if result.error == 0 and (code := await ctx.broker.groups.durable(req.group_id)):
        # a cluster: the member's new epoch and assignment are replicated before it hears of them
        return ConsumerGroupHeartbeatResponse(throttle_time_ms=0, error_code=code, error_message=None, member_id=None,
                                              member_epoch=0, heartbeat_interval_ms=0, assignment=None)
    assignment = None
    if result.error == 0 and result.assignment is not None:
        assignment = ConsumerGroupHeartbeatResponse.Assignment(topic_partitions=[
            HbTopicPartitions(topic_id=t, partitions=sorted(ps))
            for t, ps in sorted(result.assignment.items(), key=lambda kv: str(kv[0]))])
    return ConsumerGroupHeartbeatResponse(
        throttle_time_ms=0, error_code=result.error, error_message=result.message,
        member_id=result.member_id if result.error == 0 else None,
        member_epoch=result.member_epoch if result.error == 0 else 0,
        heartbeat_interval_ms=result.heartbeat_interval_ms if result.error == 0 else 0, assignment=assignment)


TOPIC_DENIED_MESSAGE = "The group has described topic(s) that the client is not authorized to describe."


def _described_assignment(coordinator, assignment: Assignment) -> DescribedAssignment:
    parts = []
    for t, ps in sorted(assignment.items(), key=lambda kv: str(kv[0])):
        parts.append(DescribedTopicPartitions(topic_id=t, topic_name=coordinator.topic_name(t) or "",
                                              partitions=sorted(ps)))
    return DescribedAssignment(topic_partitions=parts)


@handles(ConsumerGroupDescribeRequest, ConsumerGroupDescribeResponse, 0, 1)
async def handle_consumer_group_describe(ctx: RequestContext, req: ConsumerGroupDescribeRequest
                                         ) -> ConsumerGroupDescribeResponse:
    groups = ctx.broker.groups
    out = []
    denied = []  # as Kafka's handler: groups the caller may not describe come first, in request order
    enabled = consumer_protocol_enabled(ctx)

    def failed(group_id: str, code: int, message: str | None):
        return DescribedGroup(error_code=code, error_message=message, group_id=group_id, group_state="",
                              group_epoch=0, assignment_epoch=0, assignor_name="", members=[],
                              authorized_operations=-2**31)
    for group_id in req.group_ids:
        if enabled and not authorize(ctx, acl.DESCRIBE, acl.GROUP, group_id):
            denied.append(failed(group_id, ke.GroupAuthorizationFailedError.errno, None))
            continue
        code, message, group = groups.consumer.describe(group_id) if enabled else (UNSUPPORTED_VERSION, None, None)
        if code:
            out.append(failed(group_id, code, message))
            continue
        if ctx.broker.authorizer is not None and not _may_describe_assigned_topics(ctx, groups.consumer, group):
            # KAFKA-18813: a group whose (target) assignments name a topic the caller may not describe is hidden
            out.append(failed(group_id, ke.TopicAuthorizationFailedError.errno, TOPIC_DENIED_MESSAGE))
            continue
        members = []
        for m in group.members.values():
            members.append(DescribedMember(
                member_id=m.member_id, instance_id=m.instance_id, rack_id=m.rack_id, member_epoch=m.member_epoch,
                client_id=m.client_id, client_host=m.client_host,
                subscribed_topic_names=sorted(m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex or "",
                assignment=_described_assignment(groups.consumer, m.assigned),
                target_assignment=_described_assignment(groups.consumer, group.target.get(m.member_id, {})),
                member_type=CLASSIC_MEMBER_TYPE if m.classic is not None else CONSUMER_MEMBER_TYPE))
        out.append(DescribedGroup(
            error_code=0, error_message=None, group_id=group_id, group_state=group.state.value,
            group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
            assignor_name=group.assignor_name or groups.consumer.configs.settings_for(group_id).assignors[0],
            members=members, authorized_operations=bitfield(authorized_operations(ctx, acl.GROUP, group_id))
            if req.include_authorized_operations else -2**31))
    return ConsumerGroupDescribeResponse(throttle_time_ms=0, groups=denied + out)


def _may_describe_assigned_topics(ctx: RequestContext, consumer, group) -> bool:
    """DESCRIBE on every topic named in a member's current or target assignment."""
    names = set()
    for m in group.members.values():
        for assignment in (m.assigned, group.target.get(m.member_id, {})):
            names.update(t.topic_name for t in _described_assignment(consumer, assignment).topic_partitions)
    return authorized_names(ctx, acl.DESCRIBE, acl.TOPIC, names) >= names
