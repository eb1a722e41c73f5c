"""ListGroups: every classic and consumer (KIP-848) group of this coordinator, filtered by state (v4+)
and type (v5+)."""
from __future__ import annotations

from kafka.protocol.admin import ListGroupsRequest, ListGroupsResponse

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize_cluster, authorized_names
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles

ListedGroup = ListGroupsResponse.ListedGroup


@handles(ListGroupsRequest, ListGroupsResponse, 0, 5)
async def handle_list_groups(ctx: RequestContext, req: ListGroupsRequest) -> ListGroupsResponse:
    v = ctx.api_version
    states = set(req.states_filter or []) if v >= 4 else set()
    types = set(req.types_filter or []) if v >= 5 else set()
    code, groups = ctx.broker.groups.list_groups(states, types)
    if not authorize_cluster(ctx, acl.DESCRIBE):  # else only the groups the principal may DESCRIBE
        visible = authorized_names(ctx, acl.DESCRIBE, acl.GROUP, [g.group_id for g in groups])
        groups = [g for g in groups if g.group_id in visible]
    return ListGroupsResponse(throttle_time_ms=0, error_code=code, groups=[
        ListedGroup(group_id=g.group_id, protocol_type=g.protocol_type or "", group_state=g.state.value,
                    group_type=getattr(g, "group_type", "classic"))
        for g in groups])
