"""Client telemetry (KIP-714): GetTelemetrySubscriptions (71), PushTelemetry (72), and
ListConfigResources (74, formerly ListClientMetricsResources), as Kafka 4.3.1's KafkaApis answers them.
The manager is broker/ops/client_telemetry.py; the subscriptions are CLIENT_METRICS config resources
(broker/config/client_metrics_configs.py)."""
from __future__ import annotations

import kafka.errors as ke
from kafka.protocol.admin.configs import ListConfigResourcesRequest, ListConfigResourcesResponse

from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.broker.ops.client_telemetry import ACCEPTED_COMPRESSION_TYPES, NONE
from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize_cluster
from minikafka.protocol.messages import (
    GetTelemetrySubscriptionsRequest,
    GetTelemetrySubscriptionsResponse,
    PushTelemetryRequest,
    PushTelemetryResponse,
)

TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP = 2, 4, 8, 16, 32
# Kafka's ListConfigResourcesRequest.supportedResourceTypes: v0 lists client metrics subscriptions only
_SUPPORTED = {0: (CLIENT_METRICS,), 1: (TOPIC, BROKER, BROKER_LOGGER, CLIENT_METRICS, GROUP)}
_ZERO = "00000000-0000-0000-0000-000000000000"


def _software(ctx: RequestContext) -> tuple[str, str] | None:
    """The connection's client software name and version from its ApiVersions (v3+), if it sent them."""
    table = getattr(ctx.broker, "client_software", None)
    return table.get(ctx.peer) if table else None


@handles(GetTelemetrySubscriptionsRequest, GetTelemetrySubscriptionsResponse, 0, 0)
async def handle_get_telemetry_subscriptions(ctx: RequestContext, req: GetTelemetrySubscriptionsRequest
                                             ) -> GetTelemetrySubscriptionsResponse:
    code, inst = ctx.broker.client_telemetry.get_subscriptions(req.client_instance_id, ctx.client_id, ctx.peer,
                                                               _software(ctx))
    if code != NONE or inst is None:  # Kafka's getErrorResponse: every other field at its default
        return GetTelemetrySubscriptionsResponse(throttle_time_ms=0, error_code=code, client_instance_id=_ZERO,
                                                 subscription_id=0, accepted_compression_types=[], push_interval_ms=0,
                                                 telemetry_max_bytes=0, delta_temporality=False, requested_metrics=[])
    return GetTelemetrySubscriptionsResponse(
        throttle_time_ms=0, error_code=0, client_instance_id=inst.id, subscription_id=inst.subscription_id,
        accepted_compression_types=list(ACCEPTED_COMPRESSION_TYPES), push_interval_ms=inst.interval_ms,
        telemetry_max_bytes=ctx.broker.client_telemetry.max_bytes, delta_temporality=True,
        requested_metrics=list(inst.metrics))


@handles(PushTelemetryRequest, PushTelemetryResponse, 0, 0)
async def handle_push_telemetry(ctx: RequestContext, req: PushTelemetryRequest) -> PushTelemetryResponse:
    telemetry = ctx.broker.client_telemetry
    payload = bytes(req.metrics or b"")
    code, inst = telemetry.check_push(req.client_instance_id, ctx.client_id, ctx.peer, req.subscription_id,
                                      bool(req.terminating), req.compression_type, len(payload), _software(ctx))
    if code == NONE and inst is not None and payload:
        code = await telemetry.export(inst, ctx.client_id, req.compression_type, payload)
    return PushTelemetryResponse(throttle_time_ms=0, error_code=code)


def _broker_ids(state) -> list[int]:
    cluster = getattr(state, "cluster", None)
    image = getattr(cluster, "image", None) if cluster is not None else None
    brokers = getattr(image, "brokers", None) if image is not None else None
    if brokers:
        return sorted(int(b) for b in brokers)
    return [state.node_id]


@handles(ListConfigResourcesRequest, ListConfigResourcesResponse, 0, 1)
async def handle_list_config_resources(ctx: RequestContext, req: ListConfigResourcesRequest
                                       ) -> ListConfigResourcesResponse:
    Resource = ListConfigResourcesResponse.ConfigResource
    if not authorize_cluster(ctx, acl.DESCRIBE_CONFIGS):
        return ListConfigResourcesResponse(throttle_time_ms=0, error_code=ke.ClusterAuthorizationFailedError.errno,
                                           config_resources=[])
    supported = _SUPPORTED[min(ctx.api_version, 1)]
    wanted = list(getattr(req, "resource_types", None) or []) if ctx.api_version >= 1 else []
    wanted = wanted or list(supported)
    if any(t not in supported for t in wanted):
        return ListConfigResourcesResponse(throttle_time_ms=0, error_code=ke.UnsupportedVersionError.errno,
                                           config_resources=[])
    state = ctx.broker
    out = []
    if GROUP in wanted:
        out += [Resource(resource_name=g, resource_type=GROUP) for g in sorted(state.group_configs.overrides)]
    if CLIENT_METRICS in wanted:
        out += [Resource(resource_name=n, resource_type=CLIENT_METRICS)
                for n in sorted(state.client_metrics_configs.subscriptions)]
    for kind in (BROKER_LOGGER, BROKER):
        if kind in wanted:
            out += [Resource(resource_name=str(b), resource_type=kind) for b in _broker_ids(state)]
    if TOPIC in wanted:
        out += [Resource(resource_name=t, resource_type=TOPIC) for t in sorted(state.catalog.topics)]
    return ListConfigResourcesResponse(throttle_time_ms=0, error_code=0, config_resources=out)
