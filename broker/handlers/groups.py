"""Classic group membership: JoinGroup, SyncGroup, Heartbeat, LeaveGroup (the group coordinator does
the work; JoinGroup and SyncGroup park on its barriers)."""
from __future__ import annotations

import kafka.errors as ke

from kafka.protocol.consumer import (
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    SyncGroupRequest,
    SyncGroupResponse,
)

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles

JoinMember = JoinGroupResponse.JoinGroupResponseMember
GROUP_DENIED = ke.GroupAuthorizationFailedError.errno  # every API here needs READ on the group
LeaveMemberResponse = LeaveGroupResponse.MemberResponse


def client_host(ctx: RequestContext) -> str:
    """Kafka shows the client address as Java's InetAddress.toString(): "/127.0.0.1"."""
    host = ctx.peer.rpartition(":")[0] or ctx.peer
    return "/" + host


@handles(JoinGroupRequest, JoinGroupResponse, 0, 9)
async def handle_join_group(ctx: RequestContext, req: JoinGroupRequest) -> JoinGroupResponse:
    v = ctx.api_version
    if not authorize(ctx, acl.READ, acl.GROUP, req.group_id):
        return JoinGroupResponse(throttle_time_ms=0, error_code=GROUP_DENIED, generation_id=-1,
                                 protocol_type=None, protocol_name=None if v >= 7 else "", leader="",
                                 skip_assignment=False, member_id="", members=[])
    rebalance_timeout = req.rebalance_timeout_ms if v >= 1 else req.session_timeout_ms
    result = await ctx.broker.groups.join_group(
        group_id=req.group_id, member_id=req.member_id or "",
        group_instance_id=req.group_instance_id if v >= 5 else None,
        protocol_type=req.protocol_type or "", protocols=[(p.name, bytes(p.metadata or b"")) for p in req.protocols],
        session_timeout_ms=req.session_timeout_ms, rebalance_timeout_ms=rebalance_timeout,
        client_id=ctx.client_id or "", client_host=client_host(ctx), api_version=v,
        reason=req.reason if v >= 8 else None)
    protocol_name = result.protocol_name
    if protocol_name is None and v < 7:
        protocol_name = ""  # nullable from v7 only
    return JoinGroupResponse(
        throttle_time_ms=0, error_code=result.error, generation_id=result.generation_id,
        protocol_type=result.protocol_type, protocol_name=protocol_name, leader=result.leader,
        skip_assignment=result.skip_assignment, member_id=result.member_id,
        members=[JoinMember(member_id=mid, group_instance_id=iid, metadata=meta)
                 for mid, iid, meta in result.members])


@handles(SyncGroupRequest, SyncGroupResponse, 0, 5)
async def handle_sync_group(ctx: RequestContext, req: SyncGroupRequest) -> SyncGroupResponse:
    v = ctx.api_version
    if not authorize(ctx, acl.READ, acl.GROUP, req.group_id):
        return SyncGroupResponse(throttle_time_ms=0, error_code=GROUP_DENIED, protocol_type=None,
                                 protocol_name=None, assignment=b"")
    result = await ctx.broker.groups.sync_group(
        group_id=req.group_id, generation_id=req.generation_id, member_id=req.member_id,
        group_instance_id=req.group_instance_id if v >= 3 else None,
        protocol_type=req.protocol_type if v >= 5 else None, protocol_name=req.protocol_name if v >= 5 else None,
        assignments={a.member_id: bytes(a.assignment or b"") for a in req.assignments})
    if ctx.broker.groups.replication is not None and not result.error:
        if (code := await ctx.broker.groups.durable(req.group_id)):  # cluster: the assignment replicated first
            return SyncGroupResponse(throttle_time_ms=0, error_code=code, protocol_type=None, protocol_name=None,
                                     assignment=b"")
    return SyncGroupResponse(throttle_time_ms=0, error_code=result.error, protocol_type=result.protocol_type,
                             protocol_name=result.protocol_name, assignment=result.assignment)


@handles(HeartbeatRequest, HeartbeatResponse, 0, 4)
async def handle_heartbeat(ctx: RequestContext, req: HeartbeatRequest) -> HeartbeatResponse:
    if not authorize(ctx, acl.READ, acl.GROUP, req.group_id):
        return HeartbeatResponse(throttle_time_ms=0, error_code=GROUP_DENIED)
    code = ctx.broker.groups.heartbeat(group_id=req.group_id, generation_id=req.generation_id,
                                       member_id=req.member_id,
                                       group_instance_id=req.group_instance_id if ctx.api_version >= 3 else None)
    return HeartbeatResponse(throttle_time_ms=0, error_code=code)


@handles(LeaveGroupRequest, LeaveGroupResponse, 0, 5)
async def handle_leave_group(ctx: RequestContext, req: LeaveGroupRequest) -> LeaveGroupResponse:
    v = ctx.api_version
    if not authorize(ctx, acl.READ, acl.GROUP, req.group_id):
        return LeaveGroupResponse(throttle_time_ms=0, error_code=GROUP_DENIED, members=[])
    if v >= 3:
        members = [(m.member_id, m.group_instance_id, m.reason if v >= 5 else None) for m in req.members]
    else:
        members = [(req.member_id, None, None)]
    top, results = ctx.broker.groups.leave_group(req.group_id, members)
    if v < 3:
        # one member, one error (Kafka's LeaveGroupResponse folds the member error into the top level)
        if top == 0 and results:
            top = results[0][2]
        return LeaveGroupResponse(throttle_time_ms=0, error_code=top)
    return LeaveGroupResponse(throttle_time_ms=0, error_code=top, members=[
        LeaveMemberResponse(member_id=mid, group_instance_id=iid, error_code=code) for mid, iid, code in results])
