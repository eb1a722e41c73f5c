"""UnregisterBroker (API 64, `kafka-cluster unregister --id N`, Admin.unregisterBroker) on a broker
listener, as Kafka: ALTER on the cluster (else CLUSTER_AUTHORIZATION_FAILED); in a cluster the request is
forwarded to the active controller (broker/handlers/controller.py: the broker leaves every ISR and
leadership, then its registration), BROKER_ID_NOT_REGISTERED for an id without a registration.

A single node is its own controller and the only registered broker: its own id is answered NONE and, as
it is the node answering, it stays (minikafka's cluster brokers register again when their heartbeat finds
no registration; Kafka's keep heartbeating in vain until restarted); any other id
BROKER_ID_NOT_REGISTERED with Kafka's message.
"""
from __future__ import annotations

from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize_cluster
from minikafka.protocol.errors import BROKER_ID_NOT_REGISTERED, CLUSTER_AUTHORIZATION_FAILED
from minikafka.protocol.messages import UnregisterBrokerRequest, UnregisterBrokerResponse


def _answer(code: int, message: str | None = None) -> UnregisterBrokerResponse:
    return UnregisterBrokerResponse(throttle_time_ms=0, error_code=code, error_message=message)


@handles(UnregisterBrokerRequest, UnregisterBrokerResponse, 0, 0)
async def handle_unregister_broker(ctx: RequestContext, req: UnregisterBrokerRequest) -> UnregisterBrokerResponse:
    state = ctx.broker
    if not authorize_cluster(ctx, acl.ALTER):
        return _answer(CLUSTER_AUTHORIZATION_FAILED)
    cluster = getattr(state, "cluster", None)
    if cluster is not None:
        from minikafka.broker.cluster.forwarding import forwarded_for
        from minikafka.broker.cluster.runtime import ControllerUnavailableError
        try:
            return await cluster.controller_request(req, ctx.api_version, UnregisterBrokerResponse,
                                                    on_behalf=forwarded_for(ctx))
        except ControllerUnavailableError as exc:
            return _answer(exc.code)
    if req.broker_id == state.node_id:
        return _answer(0, "")
    return _answer(BROKER_ID_NOT_REGISTERED, f"Broker ID {req.broker_id} is not currently registered")
