"""DescribeCluster: one broker that is also the controller."""
from __future__ import annotations

from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse

from .. import acl
from ..authorizer import authorize_cluster, authorized_operations
from ..context import RequestContext
from ..registry import handles

INVALID_REQUEST = 42
BROKERS_ENDPOINT = 1


@handles(DescribeClusterRequest, DescribeClusterResponse, 0, 2)
async def handle_describe_cluster(ctx: RequestContext, req: DescribeClusterRequest) -> DescribeClusterResponse:
    state = ctx.broker
    adv = state.advertised_for(ctx.listener)
    endpoint_type = req.endpoint_type if ctx.api_version >= 1 else BROKERS_ENDPOINT
    if endpoint_type != BROKERS_ENDPOINT:
        return DescribeClusterResponse(throttle_time_ms=0, error_code=INVALID_REQUEST,
                                       error_message="only broker endpoints are served", endpoint_type=endpoint_type,
                                       cluster_id=state.cluster_id, controller_id=-1, brokers=[])
    broker = DescribeClusterResponse.DescribeClusterBroker(broker_id=state.node_id, host=adv.host, port=adv.port,
                                                           rack=None, is_fenced=False)
    ops = None  # as Kafka: DescribeCluster itself needs no ACL; the operations only with DESCRIBE
    if req.include_cluster_authorized_operations:
        ops = authorized_operations(ctx, acl.CLUSTER, acl.CLUSTER_NAME) \
            if authorize_cluster(ctx, acl.DESCRIBE) else frozenset()
    return DescribeClusterResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                   endpoint_type=endpoint_type, cluster_id=state.cluster_id,
                                   controller_id=state.node_id, brokers=[broker], authorized_operations=ops)
