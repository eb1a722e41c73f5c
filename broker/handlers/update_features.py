"""UpdateFeatures (KIP-584): change finalized feature levels (broker/config/features.py). The updates of a
request are applied together or not at all. As Kafka 4.3 answers: a refused request gets a top-level
error whose message names the failing feature, and no feature results; an accepted one (v0-1) a
result per update with error NONE. v1+ carry an upgrade type (1 upgrade, 2 safe downgrade, 3 unsafe
downgrade) and `validate_only`; v0's `allow_downgrade` is ignored, as Kafka 4.3 does (the upgrade
type a v0 request leaves at its default: upgrade only)."""
from __future__ import annotations

import kafka.errors as ke

from kafka.protocol.admin import UpdateFeaturesRequest, UpdateFeaturesResponse

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize_cluster
from minikafka.broker.network.context import RequestContext
from minikafka.broker.config.features import UPGRADE, FeatureUpdate, FeatureUpdateError
from minikafka.broker.network.registry import handles

Result = UpdateFeaturesResponse.UpdatableFeatureResult
RESULTS_UNTIL = 1
FAILED_PREFIX = "The update failed for all features since the following feature had an error: "


def _updates(req: UpdateFeaturesRequest, version: int) -> list[FeatureUpdate]:
    return [FeatureUpdate(u.feature, u.max_version_level, u.upgrade_type if version >= 1 else UPGRADE)
            for u in req.feature_updates]


@handles(UpdateFeaturesRequest, UpdateFeaturesResponse, 0, 2)
async def handle_update_features(ctx: RequestContext, req: UpdateFeaturesRequest) -> UpdateFeaturesResponse:
    version = ctx.api_version
    if not authorize_cluster(ctx, acl.ALTER):
        return UpdateFeaturesResponse(throttle_time_ms=0, error_code=ke.ClusterAuthorizationFailedError.errno,
                                      error_message="Cluster authorization failed.", results=[])
    updates = _updates(req, version)
    elsewhere = None
    cluster = getattr(ctx.broker, "cluster", None)
    if cluster is not None:  # KIP-919: every registered controller (and static voter) must support the level
        from minikafka.broker.cluster.controller_registration import reason_controllers_do_not_support

        def elsewhere(feature: str, level: int) -> str | None:
            return reason_controllers_do_not_support(cluster.image.controllers, ctx.broker.node_id,
                                                     cluster.driver.quorum.voters, feature, level)
    try:
        ctx.broker.features.update(updates, validate_only=version >= 1 and req.validate_only, elsewhere=elsewhere)
    except FeatureUpdateError as exc:
        return UpdateFeaturesResponse(throttle_time_ms=0, error_code=exc.errno,
                                      error_message=FAILED_PREFIX + exc.message, results=[])
    results = [Result(feature=u.feature, error_code=0, error_message="NONE") for u in updates] \
        if version <= RESULTS_UNTIL else []
    return UpdateFeaturesResponse(throttle_time_ms=0, error_code=0, error_message=None, results=results)
