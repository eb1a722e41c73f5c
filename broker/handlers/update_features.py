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

import logging

import kafka.errors as ke

from kafka.protocol.admin import UpdateFeaturesRequest, UpdateFeaturesResponse

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize_cluster
from minikafka.broker.network.context import RequestContext
from minikafka.broker.config.features import ELR_VERSION, UPGRADE, FeatureUpdate, FeatureUpdateError, plan_update
from minikafka.broker.network.registry import handles

log = logging.getLogger(__name__)
Result = UpdateFeaturesResponse.UpdatableFeatureResult
RESULTS_UNTIL = 1
KRAFT = "kraft.version"
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
        kraft = wanted.pop(KRAFT, None)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + VISIBLE_WAIT_S  # this node's image shows the change (a describe here sees it)
        while loop.time() < deadline and (any(state.features.level(f) != v for f, v in wanted.items()) or (
                kraft is not None and state.quorum.node.kraft_version < kraft)):
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
    kraft = [u for u in updates if u.feature == KRAFT]
    if kraft:  # the Raft leader's business (KAFKA-16538): never a FeatureLevel record
        try:
            for u in kraft:
                _check_kraft(u, cluster, state.node_id)
        except FeatureUpdateError as exc:
            return _error(exc.errno, FAILED_PREFIX + exc.message)
        updates = [u for u in updates if u.feature != KRAFT]
        if not validate_only and kraft[-1].level > cluster.driver.node.kraft_version:
            code, message = await upgrade_kraft_version(cluster.driver, kraft[-1].level,
                                                        cluster.driver.quorum.request_timeout_ms / 1000 * 10)
            if code == NOT_CONTROLLER:
                return _error(code, not_controller_message(cluster))
            if code:
                return _error(code, None if message is None else FAILED_PREFIX + message)
        if not updates:
            return _ok(kraft, version)
    kraft_results = kraft

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
    return _ok(kraft_results + updates, version)


def _check_kraft(u: FeatureUpdate, cluster, node_id: int) -> None:
    """Kafka's FeatureControlManager.updateFeature for kraft.version, in its order: the upgrade type, the
    controllers' support (this one: 0-1), the downgrade rules, then the Raft leader's checks (every voter
    supports the level, as it told the leader)."""
    from minikafka.broker.cluster.controller_registration import reason_controllers_do_not_support
    from minikafka.broker.config.features import INVALID_UPDATE_VERSION, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE

    def invalid(reason: str) -> FeatureUpdateError:
        return FeatureUpdateError(INVALID_UPDATE_VERSION,
                                  f"Invalid update version {u.level} for feature {KRAFT}. {reason}")
    driver = cluster.driver
    current = driver.node.kraft_version
    if u.upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        raise invalid("The controller does not support the given upgrade type.")
    if u.level < 0:
        raise invalid("A feature version cannot be less than 0.")
    if u.level > 1:
        raise invalid(f"Local controller {node_id} only supports versions 0-1")
    reason = reason_controllers_do_not_support(cluster.image.controllers, node_id, driver.quorum.voters, KRAFT,
                                               u.level)
    if reason:
        raise invalid(reason)
    if u.level < current and u.upgrade_type == UPGRADE:
        raise invalid("Can't downgrade the version of this feature without setting the upgrade type to either "
                      "safe or unsafe downgrade.")
    if u.level > current and u.upgrade_type != UPGRADE:
        raise invalid("Can't downgrade to a newer version.")
    if u.level < current:
        raise invalid("Can't downgrade the version of this feature.")
    if u.level > current:
        why = kraft_upgrade_check(driver, u.level)
        if why is not None:
            raise FeatureUpdateError(INVALID_UPDATE_VERSION, why)


def kraft_upgrade_check(driver, level: int) -> str | None:
    """Why the Raft leader cannot upgrade to kraft.version `level` now (Kafka's LeaderState
    maybeAppendUpgradedKRaftVersion), None when it can: every voter must support it, as it told the leader in
    this epoch (UpdateRaftVoter at kraft.version 0, raft/driver.py)."""
    from minikafka.raft.core import LEADER
    node = driver.node
    if node.role != LEADER:
        return "Upgrade kraft version failed because the replica is not the current leader"
    for v in node.voters:
        info = driver.own_voter_entry("") if v == driver.id else driver.static_info().get(v)
        if info is None or int(info.get("kRaftVersionFeature", {}).get("maxSupportedVersion", 0)) < level:
            return f"Invalid upgrade of kraft.version to KRAFT_VERSION_{level} because not all of the voters support it"
    return None


async def upgrade_kraft_version(driver, level: int, timeout_s: float) -> tuple[int, str | None]:
    """kraft.version 0 -> 1 on a static quorum (KAFKA-16538): the KRaftVersion record and a VotersRecord with the
    static voters' ids, directory ids and endpoints, answered once committed; from then on the voter set is the
    log's (add-controller / remove-controller work)."""
    import time

    from minikafka.protocol.errors import INVALID_UPDATE_VERSION, NOT_CONTROLLER, REQUEST_TIMED_OUT
    from minikafka.raft.core import KRAFT_VERSION_RECORD, LEADER, voters_record
    node = driver.node
    if node.kraft_version >= level:
        return 0, None
    reason = kraft_upgrade_check(driver, level)
    if reason is not None:
        return INVALID_UPDATE_VERSION, reason
    voters = [driver.own_voter_entry(driver.own_directory_id() or "") if v == driver.id
              else driver.static_info()[v] for v in node.voters]
    if driver._voter_change_pending or any(not v.get("voterDirectoryId") for v in voters):
        return REQUEST_TIMED_OUT, None  # Kafka: one voter change at a time; every directory id known
    driver._voter_change_pending = True
    try:
        offsets = driver.propose([{"type": KRAFT_VERSION_RECORD, "version": 0, "kRaftVersion": level},
                                  voters_record(voters)])
        if offsets is None:
            return NOT_CONTROLLER, None
        log.info("kraft.version %d with voters %s appended at offset %d", level, sorted(node.voters), offsets[0])
        epoch, deadline = node.epoch, time.monotonic() + timeout_s
        while node.high_watermark <= offsets[-1]:
            left = deadline - time.monotonic()
            if node.epoch != epoch or node.role != LEADER:
                return NOT_CONTROLLER, None
            if left <= 0:
                return REQUEST_TIMED_OUT, None
            await driver.wait_for_change(min(left, 0.2))
        return 0, None
    finally:
        driver._voter_change_pending = False
