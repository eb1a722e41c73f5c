"""DeleteGroups: remove empty groups and their committed offsets."""
from __future__ import annotations

import kafka.errors as ke

from kafka.protocol.admin import DeleteGroupsRequest, DeleteGroupsResponse

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorized_names
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles

Result = DeleteGroupsResponse.DeletableGroupResult


@handles(DeleteGroupsRequest, DeleteGroupsResponse, 0, 2)
async def handle_delete_groups(ctx: RequestContext, req: DeleteGroupsRequest) -> DeleteGroupsResponse:
    names = list(dict.fromkeys(req.groups_names))
    allowed = authorized_names(ctx, acl.DELETE, acl.GROUP, names)
    results = ctx.broker.groups.delete_groups([g for g in names if g in allowed]) if allowed else {}
    await _delete_share_state(ctx)
    # as Kafka: the refused groups (GROUP_AUTHORIZATION_FAILED) after the others
    return DeleteGroupsResponse(throttle_time_ms=0, results=[
        Result(group_id=g, error_code=results[g]) for g in names if g in allowed] + [
        Result(group_id=g, error_code=ke.GroupAuthorizationFailedError.errno) for g in names if g not in allowed])


async def _delete_share_state(ctx: RequestContext) -> None:
    """Deleted share groups: the state of their share-partitions goes too (through the share coordinator)."""
    share = ctx.broker.groups.share
    while share.deleted_state:
        group_id, parts = share.deleted_state.pop()
        ctx.broker.share_manager.drop(group_id)
        for topic_id, partitions in parts.items():
            for p in sorted(partitions):
                await ctx.broker.share_persister.delete(group_id, topic_id, p)
