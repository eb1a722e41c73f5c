"""UpdateFeatures (KIP-584): change finalized feature levels (broker/features.py). The updates of a
request are applied together or not at all. As Kafka 4.3 answers: a refused request gets a top-level
error whose message names the failing feature, and no feature results; an accepted one (v0-1) a
result per update with error NONE. v0 says `allow_downgrade`, v1+ an upgrade type (1 upgrade,
2 safe downgrade, 3 unsafe downgrade) and `validate_only`."""
from __future__ import annotations

from kafka.protocol.admin import UpdateFeaturesRequest, UpdateFeaturesResponse

from ..context import RequestContext
from ..features import SAFE_DOWNGRADE, UPGRADE, FeatureUpdate, FeatureUpdateError
from ..registry import handles

Result = UpdateFeaturesResponse.UpdatableFeatureResult
RESULTS_UNTIL = 1
FAILED_PREFIX = "The update failed for all features since the following feature had an error: "


def _updates(req: UpdateFeaturesRequest, version: int) -> list[FeatureUpdate]:
    out = []
    for u in req.feature_updates:
        if version == 0:
            kind = SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE
        else:
            kind = u.upgrade_type
        out.append(FeatureUpdate(u.feature, u.max_version_level, kind))
    return out


@handles(UpdateFeaturesRequest, UpdateFeaturesResponse, 0, 2)
async def handle_update_features(ctx: RequestContext, req: UpdateFeaturesRequest) -> UpdateFeaturesResponse:
    version = ctx.api_version
    updates = _updates(req, version)
    try:
        ctx.broker.features.update(updates, validate_only=version >= 1 and req.validate_only)
    except FeatureUpdateError as exc:
        return UpdateFeaturesResponse(throttle_time_ms=0, error_code=exc.errno,
                                      error_message=FAILED_PREFIX + exc.message, results=[])
    results = [Result(feature=u.feature, error_code=0, error_message="NONE") for u in updates] \
        if version <= RESULTS_UNTIL else []
    return UpdateFeaturesResponse(throttle_time_ms=0, error_code=0, error_message=None, results=results)
