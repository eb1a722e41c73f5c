"""DescribeGroups: state, protocol and members (metadata and assignment once Stable)."""
from __future__ import annotations

import kafka.errors as ke

from kafka.protocol.admin import DescribeGroupsRequest, DescribeGroupsResponse

from minikafka.coordinator.group.metadata import GroupError
from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize, authorized_operations
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.protocol.errors import GROUP_ID_NOT_FOUND

DescribedGroup = DescribeGroupsResponse.DescribedGroup
DescribedMember = DescribedGroup.DescribedGroupMember


@handles(DescribeGroupsRequest, DescribeGroupsResponse, 0, 6)
async def handle_describe_groups(ctx: RequestContext, req: DescribeGroupsRequest) -> DescribeGroupsResponse:
    v = ctx.api_version
    with_ops = v >= 3 and req.include_authorized_operations
    out = []
    denied = []  # as Kafka's handler: the groups the caller may not describe come first, in request order
    for group_id in req.groups:
        ops = authorized_operations(ctx, acl.GROUP, group_id) if with_ops else None
        if not authorize(ctx, acl.DESCRIBE, acl.GROUP, group_id):
            denied.append(DescribedGroup(error_code=ke.GroupAuthorizationFailedError.errno,
                                         error_message="Group authorization failed.", group_id=group_id,
                                         group_state="", protocol_type="", protocol_data="", members=[],
                                         authorized_operations=None))
            continue
        try:
            d = ctx.broker.groups.describe_group(group_id)
        except GroupError as exc:
            out.append(DescribedGroup(error_code=exc.errno, error_message=None, group_id=group_id,
                                      group_state="", protocol_type="", protocol_data="", members=[],
                                      authorized_operations=None))
            continue
        if d is None:
            # v6+ reports an unknown group as an error (KIP-1043); older versions as a Dead group.
            # A KIP-848 group is not a classic group: the same answer, with its own message
            missing = v >= 6
            groups = ctx.broker.groups
            modern = any(group_id in part.groups for part in (groups.consumer, groups.streams, groups.share))
            message = f"Group {group_id} is not a classic group." if modern else f"Group {group_id} not found."
            out.append(DescribedGroup(error_code=GROUP_ID_NOT_FOUND if missing else 0,
                                      error_message=message if missing else None,
                                      group_id=group_id, group_state="Dead", protocol_type="", protocol_data="",
                                      members=[], authorized_operations=None if missing else ops))
            continue
        out.append(DescribedGroup(
            error_code=0, error_message=None, group_id=d.group_id, group_state=d.state,
            protocol_type=d.protocol_type, protocol_data=d.protocol_data, authorized_operations=ops,
            members=[DescribedMember(member_id=m.member_id, group_instance_id=m.group_instance_id,
                                     client_id=m.client_id, client_host=m.client_host, member_metadata=m.metadata,
                                     member_assignment=m.assignment) for m in d.members]))
    return DescribeGroupsResponse(throttle_time_ms=0, groups=denied + out)
