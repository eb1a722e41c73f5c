"""DeleteGroups: remove empty groups and their committed offsets."""
from __future__ import annotations

from kafka.protocol.admin import DeleteGroupsRequest, DeleteGroupsResponse

from ..context import RequestContext
from ..registry import handles

Result = DeleteGroupsResponse.DeletableGroupResult


@handles(DeleteGroupsRequest, DeleteGroupsResponse, 0, 2)
async def handle_delete_groups(ctx: RequestContext, req: DeleteGroupsRequest) -> DeleteGroupsResponse:
    results = ctx.broker.groups.delete_groups(list(req.groups_names))
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        Result(group_id=g, error_code=results[g]) for g in dict.fromkeys(req.groups_names)])
