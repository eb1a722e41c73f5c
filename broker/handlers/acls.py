"""CreateAcls / DescribeAcls / DeleteAcls (v1-3, as Kafka 4.3's AclApis).

Each needs the CLUSTER operation Kafka's handler checks (DESCRIBE for DescribeAcls, ALTER for the
other two; refused with CLUSTER_AUTHORIZATION_FAILED), then SECURITY_DISABLED when no authorizer is
configured. Invalid ACLs get INVALID_REQUEST in their own creation result; a filter with UNKNOWN
fields gets INVALID_REQUEST (DescribeAcls: top level; DeleteAcls: in its filter result).
"""
from __future__ import annotations

import kafka.errors as ke
from kafka.protocol.admin import (CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
                                  DescribeAclsRequest, DescribeAclsResponse)

from .. import acl as A
from ..acl import AclBinding, AclFilter, InvalidAclError
from ..authorizer import authorize_cluster
from ..context import RequestContext
from ..registry import handles

CLUSTER_DENIED = ke.ClusterAuthorizationFailedError.errno
SECURITY_DISABLED = ke.SecurityDisabledError.errno
INVALID_REQUEST = ke.InvalidRequestError.errno
NO_AUTHORIZER = "No Authorizer is configured."


def _filter(f) -> AclFilter:
    return AclFilter(f.resource_type_filter, f.resource_name_filter, f.pattern_type_filter, f.principal_filter,
                     f.host_filter, f.operation, f.permission_type)


@handles(CreateAclsRequest, CreateAclsResponse, 1, 3)
async def handle_create_acls(ctx: RequestContext, req: CreateAclsRequest) -> CreateAclsResponse:
    Result = CreateAclsResponse.AclCreationResult
    n = len(req.creations)
    if not authorize_cluster(ctx, A.ALTER):
        return CreateAclsResponse(throttle_time_ms=0, results=[
            Result(error_code=CLUSTER_DENIED, error_message="Cluster authorization failed.")] * n)
    store = ctx.broker.authorizer.store if ctx.broker.authorizer is not None else None
    if store is None:
        return CreateAclsResponse(throttle_time_ms=0, results=[
            Result(error_code=SECURITY_DISABLED, error_message=NO_AUTHORIZER)] * n)
    bindings = [AclBinding(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                           c.operation, c.permission_type) for c in req.creations]
    errors = await store.create(bindings)
    return CreateAclsResponse(throttle_time_ms=0, results=[
        Result(error_code=0, error_message=None) if err is None
        else Result(error_code=INVALID_REQUEST, error_message=str(err)) for err in errors])


@handles(DescribeAclsRequest, DescribeAclsResponse, 1, 3)
async def handle_describe_acls(ctx: RequestContext, req: DescribeAclsRequest) -> DescribeAclsResponse:
    def error(code: int, message: str) -> DescribeAclsResponse:
        return DescribeAclsResponse(throttle_time_ms=0, error_code=code, error_message=message, resources=[])
    if not authorize_cluster(ctx, A.DESCRIBE):
        return error(CLUSTER_DENIED, "Cluster authorization failed.")
    if ctx.broker.authorizer is None:
        return error(SECURITY_DISABLED, "No Authorizer is configured on the broker")
    flt = _filter(req)
    if flt.is_unknown():
        return error(INVALID_REQUEST, "DescribeAclsRequest contains UNKNOWN elements")
    return DescribeAclsResponse(throttle_time_ms=0, error_code=0, error_message=None,
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
    if not authorize_cluster(ctx, A.ALTER):
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            FilterResult(error_code=CLUSTER_DENIED, error_message="Cluster authorization failed.", matching_acls=[])] * n)
    if ctx.broker.authorizer is None:
        return DeleteAclsResponse(throttle_time_ms=0, filter_results=[
            FilterResult(error_code=SECURITY_DISABLED, error_message=NO_AUTHORIZER, matching_acls=[])] * n)
    results = await ctx.broker.authorizer.store.delete([_filter(f) for f in req.filters])
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
