"""CreateAcls / DescribeAcls / DeleteAcls (v1-3, as Kafka 4.3's AclApis).

Each needs the CLUSTER operation Kafka's handler checks (DESCRIBE for DescribeAcls, ALTER for the
other two; refused with CLUSTER_AUTHORIZATION_FAILED), then SECURITY_DISABLED when no authorizer is
configured. An invalid ACL gets its own creation result as Kafka 4.3 answers it (INVALID_REQUEST
with Kafka's message for names and principals; UNKNOWN_SERVER_ERROR without message for ANY/UNKNOWN/
MATCH types, operations and permissions); a filter with UNKNOWN fields closes the connection, as
Kafka's request parsing does.

In a cluster, CreateAcls/DeleteAcls are authorized here and then forwarded to the active controller
(broker/cluster/forwarding.py; the controller's side is in controller.py); DescribeAcls answers from
this node's image-fed ACLs.
"""
from __future__ import annotations

import kafka.errors as ke
from kafka.protocol.admin import (CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
                                  DescribeAclsRequest, DescribeAclsResponse)

from minikafka.broker.security import acl as A
from minikafka.broker.security.acl import AclBinding, AclFilter, InvalidAclError
from minikafka.broker.security.authorizer import authorize_cluster
from minikafka.broker.network.connection import CloseConnection
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles

CLUSTER_DENIED = ke.ClusterAuthorizationFailedError.errno
SECURITY_DISABLED = ke.SecurityDisabledError.errno
INVALID_REQUEST = ke.InvalidRequestError.errno
NO_AUTHORIZER = "No Authorizer is configured."


def _unknown(b: AclBinding) -> bool:
    """A value Kafka reads as UNKNOWN (0, or a code it does not know)."""
    return (b.resource_type not in A.RESOURCE_TYPE_NAMES or b.pattern_type not in A.PATTERN_TYPE_NAMES
            or b.operation not in A.OPERATION_NAMES or b.permission not in A.PERMISSION_NAMES
            or A.R_UNKNOWN in (b.resource_type, b.pattern_type, b.operation, b.permission))


def _filter(f) -> AclFilter:
    return AclFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                     f.host_filter, f.operation, f.permission_type)


@handles(CreateAclsRequest, CreateAclsResponse, 1, 3)
async def handle_create_acls(ctx: RequestContext, req: CreateAclsRequest) -> CreateAclsResponse:
    Result = CreateAclsResponse.AclCreationResult
    n = len(req.creations)
    bindings = [AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                           c.operation, c.permission_type) for c in req.creations]
    if any(_unknown(b) for b in bindings):  # Kafka's request parsing refuses UNKNOWN values: no answer
        raise CloseConnection("CreateAclsRequest contains UNKNOWN elements")
    if not authorize_cluster(ctx, A.ALTER):
        return CreateAclsResponse(throttle_time_ms=0, results=[
            Result(error_code=CLUSTER_DENIED, error_message="Cluster authorization failed.")] * n)
    store = ctx.broker.authorizer.store if ctx.broker.authorizer is not None else None
    if store is None:
        return CreateAclsResponse(throttle_time_ms=0, results=[
            Result(error_code=SECURITY_DISABLED, error_message=NO_AUTHORIZER)] * n)
    if any(b.resource_type == A.R_ANY or b.pattern_type in (A.P_ANY, A.MATCH) or b.operation == A.O_ANY
           or b.permission == A.PERM_ANY for b in bindings):
        # Kafka cannot even build such a binding: the whole request fails with UNKNOWN_SERVER_ERROR
        return CreateAclsResponse(throttle_time_ms=0, results=[Result(error_code=-1, error_message=None)] * n)
    if ctx.broker.cluster is not None:  # a cluster: the active controller records it (Kafka forwards it)
        from minikafka.broker.cluster.forwarding import forward_create_acls, forwarded_for
        return await forward_create_acls(ctx.broker, req, ctx.api_version, bindings, forwarded_for(ctx))
    errors = await store.create(bindings)
    return CreateAclsResponse(throttle_time_ms=0, results=[
        Result(error_code=0, error_message="") if err is None
        else Result(error_code=err.code, error_message=err.message) for err in errors])


@handles(DescribeAclsRequest, DescribeAclsResponse, 1, 3)
async def handle_describe_acls(ctx: RequestContext, req: DescribeAclsRequest) -> DescribeAclsResponse:
    def error(code: int, message: str) -> DescribeAclsResponse:
        return DescribeAclsResponse(throttle_time_ms=0, error_code=code, error_message=message, resources=[])
    flt = _filter(req)
    if _unknown(AclBinding(*flt)):  # Kafka fails parsing such a request (IllegalArgumentException): no answer
        raise CloseConnection("DescribeAclsRequest contains UNKNOWN elements")
    if not authorize_cluster(ctx, A.DESCRIBE):
        return error(CLUSTER_DENIED, "Cluster authorization failed.")
    if ctx.broker.authorizer is None:
        return error(SECURITY_DISABLED, "No Authorizer is configured on the broker")
    return DescribeAclsResponse(throttle_time_ms=0, error_code=0, error_message="",
                                resources=_resources(ctx.broker.authorizer.store.describe(flt)))


def _resources(bindings: list[AclBinding]) -> list:
    """DescribeAclsResponse.aclsResources: bindings grouped by resource pattern."""
    Resource = DescribeAclsResponse.DescribeAclsResource
    Desc = Resource.AclDescription
    groups: dict[tuple[int, str, int], list] = {}
    for b in bindings:
        groups.setdefault((b.resource_type, b.name, b.pattern_type), []).append(
            Desc(principal=b.principal, host=b.host, operation=b.operation, permission_type=b.permission))
    return [Resource(resource_type=t, resource_name=n, pattern_type=p, acls=acls)
            for (t, n, p), acls in groups.items()]


@handles(DeleteAclsRequest, DeleteAclsResponse, 1, 3)
async def handle_delete_acls(ctx: RequestContext, req: DeleteAclsRequest) -> DeleteAclsResponse:
    FilterResult = DeleteAclsResponse.DeleteAclsFilterResult
    Matching = FilterResult.DeleteAclsMatchingAcl
    n = len(req.filters)
    filters = [_filter(f) for f in req.filters]
    if any(_unknown(AclBinding(*f)) for f in filters):  # as Kafka's request parsing: no answer
        raise CloseConnection("DeleteAclsRequest filters contain UNKNOWN elements")
    if not authorize_cluster(ctx, A.ALTER):
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            FilterResult(error_code=CLUSTER_DENIED, error_message="Cluster authorization failed.", matching_acls=[])] * n)
    if ctx.broker.authorizer is None:
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            FilterResult(error_code=SECURITY_DISABLED, error_message=NO_AUTHORIZER, matching_acls=[])] * n)
    if ctx.broker.cluster is not None:
        from minikafka.broker.cluster.forwarding import forward_delete_acls, forwarded_for
        return await forward_delete_acls(ctx.broker, req, ctx.api_version, n, forwarded_for(ctx))
    results = await ctx.broker.authorizer.store.delete(filters)
    out = []
    for res in results:
        if isinstance(res, InvalidAclError):
            out.append(FilterResult(error_code=INVALID_REQUEST, error_message=str(res), matching_acls=[]))
            continue
        out.append(FilterResult(error_code=0, error_message=None, matching_acls=[
            Matching(error_code=0, error_message=None, resource_type=b.resource_type, resource_name=b.name,
                     pattern_type=b.pattern_type, principal=b.principal, host=b.host, operation=b.operation,
                     permission_type=b.permission) for b in res]))
    return DeleteAclsResponse(throttle_time_ms=0, filter_results=out)
