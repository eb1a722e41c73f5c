"""DescribeCluster: one broker that is also the controller; on a controller listener (KRaft combined
mode, for `--bootstrap-controller` tools) the registered controllers (KIP-919 ControllerRegistration,
`image.controllers`) with their endpoint on that listener, the quorum leader as controller id."""
from __future__ import annotations

import kafka.errors as ke
from kafka.protocol.admin import DescribeClusterRequest, DescribeClusterResponse

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize_cluster, authorized_operations
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.protocol.errors import MISMATCHED_ENDPOINT_TYPE

BROKERS_ENDPOINT = 1
CONTROLLERS_ENDPOINT = 2


@handles(DescribeClusterRequest, DescribeClusterResponse, 0, 2)
async def handle_describe_cluster(ctx: RequestContext, req: DescribeClusterRequest) -> DescribeClusterResponse:
    state = ctx.broker
    adv = state.advertised_for(ctx.listener)
    endpoint_type = req.endpoint_type if ctx.api_version >= 1 else BROKERS_ENDPOINT
    if ctx.listener in state.config.controller_listener_names:
        return _controllers(ctx, req, endpoint_type)
    if endpoint_type != BROKERS_ENDPOINT:  # Kafka 4.3's answer on a broker listener
        return DescribeClusterResponse(throttle_time_ms=0, error_code=MISMATCHED_ENDPOINT_TYPE,
                                       error_message="The request was sent to an endpoint of type BROKER, but we "
                                                     "wanted an endpoint of type CONTROLLER",
                                       endpoint_type=endpoint_type,
                                       cluster_id=state.cluster_id or "", controller_id=-1, brokers=[])
    brokers = [DescribeClusterResponse.DescribeClusterBroker(broker_id=state.node_id, host=adv.host, port=adv.port,
                                                             rack=None, is_fenced=False)]
    controller = state.node_id
    if state.cluster is not None:  # the registered brokers (fenced ones too from v2 when asked), from the image
        from minikafka.broker.cluster.views import controller_id
        image = state.cluster.image
        fenced_too = ctx.api_version >= 2 and getattr(req, "include_fenced_brokers", False)
        brokers = [DescribeClusterResponse.DescribeClusterBroker(
                       broker_id=b.id, host=b.endpoints[ctx.listener][0], port=b.endpoints[ctx.listener][1],
                       rack=b.rack, is_fenced=b.fenced)
                   for b in sorted(image.brokers.values(), key=lambda b: b.id)
                   if ctx.listener in b.endpoints and (fenced_too or not b.fenced)]
        controller = controller_id(image, ctx.listener)
    ops = None  # as Kafka: DescribeCluster itself needs no ACL; the operations only with DESCRIBE
    if req.include_cluster_authorized_operations:
        ops = authorized_operations(ctx, acl.CLUSTER, acl.CLUSTER_NAME) \
            if authorize_cluster(ctx, acl.DESCRIBE) else frozenset()
    return DescribeClusterResponse(throttle_time_ms=0, error_code=0, error_message=None,
                                   endpoint_type=endpoint_type, cluster_id=state.cluster_id or "",
                                   controller_id=controller, brokers=brokers, authorized_operations=ops)


def _controllers(ctx: RequestContext, req: DescribeClusterRequest, endpoint_type: int) -> DescribeClusterResponse:
    """Kafka's controller: only the CONTROLLER endpoint type is served there."""
    state = ctx.broker
    driver = state.quorum
    if not authorize_cluster(ctx, acl.ALTER):  # Kafka's ControllerApis: "a high level of permissions", first
        return DescribeClusterResponse(throttle_time_ms=0, error_code=ke.ClusterAuthorizationFailedError.errno,
                                       error_message="Cluster authorization failed.", endpoint_type=endpoint_type,
                                       cluster_id=state.cluster_id or "", controller_id=-1, brokers=[])
    if endpoint_type != CONTROLLERS_ENDPOINT or driver is None:
        return DescribeClusterResponse(throttle_time_ms=0, error_code=MISMATCHED_ENDPOINT_TYPE,
                                       error_message="The request was sent to an endpoint of type CONTROLLER, but we "
                                                     "wanted an endpoint of type BROKER",
                                       endpoint_type=endpoint_type, cluster_id=state.cluster_id or "",
                                       controller_id=-1, brokers=[])
    # KIP-919, Kafka's ControllerRegistrationsPublisher: the registered controllers with an endpoint on the
    # listener asked (a controller not yet registered is not listed, as Kafka's)
    registered = state.cluster.image.controllers if state.cluster is not None else {}
    controllers = [DescribeClusterResponse.DescribeClusterBroker(broker_id=c.id, host=c.endpoints[ctx.listener][0],
                                                                 port=c.endpoints[ctx.listener][1], rack=None,
                                                                 is_fenced=False)
                   for c in sorted(registered.values(), key=lambda c: c.id) if ctx.listener in c.endpoints]
    leader = driver.node.leader
    ops = authorized_operations(ctx, acl.CLUSTER, acl.CLUSTER_NAME) if req.include_cluster_authorized_operations \
        else None
    return DescribeClusterResponse(throttle_time_ms=0, error_code=0, error_message=None, endpoint_type=endpoint_type,
                                   cluster_id=state.cluster_id or "", controller_id=-1 if leader is None else leader,
                                   brokers=controllers, authorized_operations=ops)
