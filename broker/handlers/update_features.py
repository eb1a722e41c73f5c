"""UpdateFeatures (KIP-584): change finalized feature levels (broker/config/features.py). The updates of a
request are applied together or not at all. As Kafka 4.3 answers: a refused request gets a top-level
error whose message names the failing feature, and no feature results; an accepted one (v0-1) a
result per update with error NONE. v1+ carry an upgrade type (1 upgrade, 2 safe downgrade, 3 unsafe
downgrade) and `validate_only`; v0's `allow_downgrade` is ignored, as Kafka 4.3 does (the upgrade
type a v0 request leaves at its default: upgrade only).

In a cluster the levels are cluster-wide, as Kafka's FeatureLevelRecords: a broker listener forwards the
request to the active controller (Kafka's ForwardingManager) and answers once this node's image shows
the change; on a controller listener the active controller validates it against its image (this
controller's supported ranges, every registered controller's, KIP-919; brokers' registrations do not
carry their ranges here: every minikafka node supports the same) and appends
FeatureLevel records (metadata/records.py), answered once committed; another controller answers
NOT_CONTROLLER ("The active controller appears to be node N.")."""
from __future__ import annotations

import kafka.errors as ke

from kafka.protocol.admin import UpdateFeaturesRequest, UpdateFeaturesResponse

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize_cluster
from minikafka.broker.network.context import RequestContext
from minikafka.broker.config.features import ELR_VERSION, UPGRADE, FeatureUpdate, FeatureUpdateError, plan_update
from minikafka.broker.network.registry import handles

Result = UpdateFeaturesResponse.UpdatableFeatureResult
RESULTS_UNTIL = 1
VISIBLE_WAIT_S = 5.0
FAILED_PREFIX = "The update failed for all features since the following feature had an error: "


def _updates(req: UpdateFeaturesRequest, version: int) -> list[FeatureUpdate]:
    return [FeatureUpdate(u.feature, u.max_version_level, u.upgrade_type if version >= 1 else UPGRADE)
            for u in req.feature_updates]


def _error(code: int, message: str | None) -> UpdateFeaturesResponse:
    return UpdateFeaturesResponse(throttle_time_ms=0, error_code=code, error_message=message, results=[])


def _ok(updates: list[FeatureUpdate], version: int) -> UpdateFeaturesResponse:
    results = [Result(feature=u.feature, error_code=0, error_message="NONE") for u in updates] \
        if version <= RESULTS_UNTIL else []
    return UpdateFeaturesResponse(throttle_time_ms=0, error_code=0, error_message=None, results=results)


def _denied() -> UpdateFeaturesResponse:
    return _error(ke.ClusterAuthorizationFailedError.errno, "Cluster authorization failed.")


@handles(UpdateFeaturesRequest, UpdateFeaturesResponse, 0, 2)
async def handle_update_features(ctx: RequestContext, req: UpdateFeaturesRequest) -> UpdateFeaturesResponse:
    version = ctx.api_version
    if not authorize_cluster(ctx, acl.ALTER):
        return _denied()
    updates = _updates(req, version)
    if getattr(ctx.broker, "cluster", None) is not None:  # a cluster: the active controller decides
        return await _forward(ctx, req, updates, version)
    try:
        ctx.broker.features.update(updates, validate_only=version >= 1 and req.validate_only)
    except FeatureUpdateError as exc:
        return _error(exc.errno, FAILED_PREFIX + exc.message)
    if not (version >= 1 and req.validate_only) and any(u.feature == ELR_VERSION and u.level >= 1 for u in updates):
        _elr_safety_configs(ctx.broker)
    return _ok(updates, version)


def _elr_safety_configs(state) -> None:
    """Eligible leader replicas turned on (Kafka's maybeGenerateElrSafetyRecords): min.insync.replicas becomes a
    cluster-wide dynamic config (the static value unless set), this broker's own value is removed. (A cluster:
    the active controller's records, metadata/controller.py set_feature_levels.)"""
    dynamic = state.dynamic_config
    default = dynamic.layer(False)
    if "min.insync.replicas" not in default:
        dynamic.replace(False, {**default, "min.insync.replicas": state.config.get("min.insync.replicas")})
    own = dynamic.layer(True)
    if "min.insync.replicas" in own:
        dynamic.replace(True, {k: v for k, v in own.items() if k != "min.insync.replicas"})


async def _forward(ctx: RequestContext, req: UpdateFeaturesRequest, updates: list[FeatureUpdate],
                   version: int) -> UpdateFeaturesResponse:
    import asyncio

    from minikafka.broker.cluster.forwarding import TIMED_OUT_MESSAGE, forwarded_for
    from minikafka.broker.cluster.runtime import ControllerUnavailableError
    from minikafka.protocol.errors import NOT_CONTROLLER
    state = ctx.broker
    try:
        resp = await state.cluster.controller_request(req, version, UpdateFeaturesResponse,
                                                      not_controller=lambda r: r.error_code == NOT_CONTROLLER,
                                                      on_behalf=forwarded_for(ctx))
    except ControllerUnavailableError as exc:
        return _error(exc.code, TIMED_OUT_MESSAGE if exc.code == ke.RequestTimedOutError.errno else str(exc))
    if resp.error_code == 0 and not (version >= 1 and req.validate_only) and updates:
        wanted = {u.feature: u.level for u in updates}
        loop = asyncio.get_running_loop()
        deadline = loop.time() + VISIBLE_WAIT_S  # this node's image shows the change (a describe here sees it)
        while loop.time() < deadline and any(state.features.level(f) != v for f, v in wanted.items()):
            await asyncio.sleep(0.02)
    return resp


def not_controller_message(cluster) -> str:
    """Kafka's ControllerExceptions.newWrongControllerException."""
    leader = cluster.driver.node.leader if cluster is not None else None
    return "No controller appears to be active." if leader is None \
        else f"The active controller appears to be node {leader}."


@handles(UpdateFeaturesRequest, UpdateFeaturesResponse, 0, 2, controller=True)
async def handle_controller_update_features(ctx: RequestContext, req: UpdateFeaturesRequest
                                            ) -> UpdateFeaturesResponse:
    """The controller's side (Kafka's ControllerApis.handleUpdateFeatures -> FeatureControlManager)."""
    from minikafka.broker.handlers.controller import _active, _run
    from minikafka.protocol.errors import NOT_CONTROLLER
    version = ctx.api_version
    if not authorize_cluster(ctx, acl.ALTER):
        return _denied()
    state = ctx.broker
    cluster = getattr(state, "cluster", None)
    active = _active(ctx)
    if cluster is None or active is None or active.controller is None:
        return _error(NOT_CONTROLLER, not_controller_message(cluster))
    updates = _updates(req, version)
    validate_only = version >= 1 and req.validate_only

    def decide(c):
        image = c.image
        current = image.features if image.features_epoch >= 0 else state.features.file_levels()

        def elsewhere(feature: str, level: int) -> str | None:
            from minikafka.broker.cluster.controller_registration import reason_controllers_do_not_support
            return reason_controllers_do_not_support(image.controllers, state.node_id, cluster.driver.quorum.voters,
                                                     feature, level)
        levels = plan_update(current, updates, state.node_id, elsewhere)
        if not validate_only:
            c.set_feature_levels({u.feature: levels.get(u.feature, 0) for u in updates})
    try:
        _r, code = await _run(ctx, decide)
    except FeatureUpdateError as exc:
        return _error(exc.errno, FAILED_PREFIX + exc.message)
    if code == NOT_CONTROLLER:
        return _error(code, not_controller_message(cluster))
    if code:
        return _error(code, None)
    return _ok(updates, version)
