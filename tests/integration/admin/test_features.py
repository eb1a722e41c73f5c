"""Feature versions: ApiVersions' supported/finalized features (v3 and v4, KIP-1022), UpdateFeatures with
its upgrade / downgrade / validate-only rules and errors over the raw protocol, Kafka's own
`kafka-features` tool (describe, downgrade and upgrade of transaction.version), and the finalized levels
surviving a restart and a kill -9. Black-box tests restore transaction.version=2 when they end (the
oracle is shared by the whole run)."""
from __future__ import annotations

import re

import pytest
from kafka.protocol.admin import UpdateFeaturesRequest, UpdateFeaturesResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from tests.conftest import broker_kind
from tests.support.helpers import RawClient
from tests.integration.clients.test_reference_lab import tool

U = UpdateFeaturesRequest.FeatureUpdateKey
TV = "transaction.version"
INVALID_UPDATE_VERSION = 95
UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3
FAILED = "The update failed for all features since the following feature had an error: "
# Kafka 4.3.1 on a freshly formatted single-node cluster (the reference lab)
KAFKA_SUPPORTED = {"metadata.version": (7, 30), "kraft.version": (0, 1), "transaction.version": (0, 2),
                   "group.version": (0, 1), "eligible.leader.replicas.version": (0, 1), "share.version": (0, 1),
                   "streams.version": (0, 1)}
KAFKA_FINALIZED = {"metadata.version": 30, "transaction.version": 2, "group.version": 1,
                   "eligible.leader.replicas.version": 1, "share.version": 1, "streams.version": 1}
# minikafka advertises only what it implements (issue 26): a single node or a static quorum has no dynamic quorum
# (kraft.version 1); eligible leader replicas (KIP-966) are there since issue 31, finalized at 1 as in Kafka 4.3.1
NOT_YET: set[str] = set()
MINIKAFKA_SUPPORTED = {k: v for k, v in KAFKA_SUPPORTED.items() if k not in NOT_YET} | {"kraft.version": (0, 0)}
MINIKAFKA_FINALIZED = {k: v for k, v in KAFKA_FINALIZED.items() if k not in NOT_YET}


@pytest.fixture
def expected(request) -> tuple[dict[str, tuple[int, int]], dict[str, int]]:
    """(supported ranges, finalized levels) of the broker under test."""
    if broker_kind(request.config) == "minikafka":
        return MINIKAFKA_SUPPORTED, MINIKAFKA_FINALIZED
    return KAFKA_SUPPORTED, KAFKA_FINALIZED


def api_versions(bootstrap: str, version: int = 4) -> ApiVersionsResponse:
    with RawClient(bootstrap) as c:
        return c.request(ApiVersionsRequest(client_software_name="minikafka-tests", client_software_version="1"),
                         version, ApiVersionsResponse)


def finalized(bootstrap: str) -> tuple[dict[str, int], int]:
    r = api_versions(bootstrap)
    assert all(f.min_version_level == f.max_version_level for f in r.finalized_features)
    return {f.name: f.max_version_level for f in r.finalized_features}, r.finalized_features_epoch


def update(bootstrap: str, updates: list, *, validate_only: bool = False, version: int = 1) -> UpdateFeaturesResponse:
    with RawClient(bootstrap) as c:
        return c.request(UpdateFeaturesRequest(timeout_ms=30000, feature_updates=updates, validate_only=validate_only),
                         version, UpdateFeaturesResponse)


def set_tv(bootstrap: str, level: int) -> None:
    current = finalized(bootstrap)[0].get(TV, 0)
    kind = UPGRADE if level >= current else SAFE_DOWNGRADE
    r = update(bootstrap, [U(feature=TV, max_version_level=level, upgrade_type=kind)])
    assert r.error_code == 0, r


@pytest.fixture
def tv_restored(broker):
    yield broker
    set_tv(broker.bootstrap, 2)


def test_api_versions_reports_supported_and_finalized_features(broker, expected):
    supported, finalized_levels = expected
    v4 = api_versions(broker.bootstrap, 4)
    assert {f.name: (f.min_version, f.max_version) for f in v4.supported_features} == supported
    fin, epoch = finalized(broker.bootstrap)
    assert fin == finalized_levels and epoch >= 0
    # ApiVersions v3: supported features starting at level 0 are left out (older clients assumed >= 1)
    v3 = api_versions(broker.bootstrap, 3)
    assert all(f.min_version > 0 for f in v3.supported_features)
    assert {f.name: f.max_version_level for f in v3.finalized_features} == fin
    assert v3.finalized_features_epoch == epoch
    assert {k.api_key: k.max_version for k in v4.api_keys if k.api_key in (26, 28)} == {26: 5, 28: 5}


@pytest.mark.parametrize("level, kind, reason", [
    (1, UPGRADE, "Can't downgrade the version of this feature without setting the upgrade type to either safe or "
                 "unsafe downgrade."),
    (3, UPGRADE, "Local controller 1 only supports versions 0-2"),
    (-1, SAFE_DOWNGRADE, "A feature version cannot be less than 0."),
])
def test_update_features_refusals(broker, level, kind, reason):
    before = finalized(broker.bootstrap)[0]  # levels: Kafka's epoch moves with any metadata change
    for version in (1, 2):
        r = update(broker.bootstrap, [U(feature=TV, max_version_level=level, upgrade_type=kind)], version=version,
                   validate_only=version == 1)
        message = f"{FAILED}Invalid update version {level} for feature {TV}. {reason}"
        assert (r.error_code, r.error_message, r.results) == (INVALID_UPDATE_VERSION, message, [])
    assert finalized(broker.bootstrap)[0] == before


def test_update_features_unknown_feature_is_refused(broker):
    r = update(broker.bootstrap, [U(feature="no.such.feature", max_version_level=1, upgrade_type=UPGRADE)],
               version=2)
    assert r.error_code == INVALID_UPDATE_VERSION
    assert r.error_message == f"{FAILED}Invalid update version 1 for feature no.such.feature. Local controller 1 " \
                              "does not support this feature."


def test_validate_only_downgrade_changes_nothing(broker):
    before = finalized(broker.bootstrap)[0]  # levels: Kafka's epoch moves with any metadata change
    r = update(broker.bootstrap, [U(feature=TV, max_version_level=1, upgrade_type=SAFE_DOWNGRADE)],
               validate_only=True)
    assert (r.error_code, r.error_message) == (0, None)
    assert [(x.feature, x.error_code, x.error_message) for x in r.results] == [(TV, 0, "NONE")]
    assert finalized(broker.bootstrap)[0] == before


def test_one_refused_update_refuses_the_request(broker):
    before = finalized(broker.bootstrap)[0]  # levels: Kafka's epoch moves with any metadata change
    r = update(broker.bootstrap, [U(feature=TV, max_version_level=1, upgrade_type=SAFE_DOWNGRADE),
                                  U(feature="group.version", max_version_level=5, upgrade_type=UPGRADE)], version=2)
    assert (r.error_code, r.error_message) == (
        INVALID_UPDATE_VERSION, f"{FAILED}Invalid update version 5 for feature group.version. Local controller 1 "
                                "only supports versions 0-1")
    r = update(broker.bootstrap, [U(feature="metadata.version", max_version_level=7, upgrade_type=SAFE_DOWNGRADE)])
    assert (r.error_code, r.error_message) == (
        INVALID_UPDATE_VERSION, f"{FAILED}Unsupported metadata.version downgrade from 30 to 7. Refusing to perform "
                                "the requested downgrade because it might delete metadata information.")
    assert finalized(broker.bootstrap)[0] == before


def test_downgrade_and_upgrade_bump_the_epoch(tv_restored):
    b = tv_restored.bootstrap
    _, epoch = finalized(b)
    set_tv(b, 1)
    fin, epoch1 = finalized(b)
    assert fin[TV] == 1 and epoch1 > epoch
    set_tv(b, 2)
    fin, epoch2 = finalized(b)
    assert fin[TV] == 2 and epoch2 > epoch1


def describe_lines(bootstrap: str) -> dict[str, dict[str, str]]:
    res, out = tool("kafka-features", "--bootstrap-server", bootstrap, "describe")
    rows = {}
    for line in res.stdout.splitlines():
        fields = dict(re.findall(r"(\w+):\s*(\S+)", line))
        if "Feature" in fields:
            rows[fields["Feature"]] = fields
    return rows


def test_kafka_features_tool_describe_downgrade_upgrade(tv_restored, expected):
    b = tv_restored.bootstrap
    supported, finalized_levels = expected
    rows = describe_lines(b)
    described = {name: (r["SupportedMinVersion"], r["SupportedMaxVersion"], r["FinalizedVersionLevel"])
                 for name, r in rows.items()}
    want = {name: (str(lo), str(hi), str(finalized_levels.get(name, 0))) for name, (lo, hi) in supported.items()}
    want["metadata.version"] = ("3.3-IV3", "4.3-IV0", "4.3-IV0")
    assert described == want
    res, out = tool("kafka-features", "--bootstrap-server", b, "downgrade", "--feature", f"{TV}=1")
    assert f"{TV} was downgraded to 1." in res.stdout, out
    assert describe_lines(b)[TV]["FinalizedVersionLevel"] == "1"
    res, out = tool("kafka-features", "--bootstrap-server", b, "upgrade", "--feature", f"{TV}=2")
    assert f"{TV} was upgraded to 2." in res.stdout, out
    assert describe_lines(b)[TV]["FinalizedVersionLevel"] == "2"
    res, out = tool("kafka-features", "--bootstrap-server", b, "upgrade", "--feature", f"{TV}=1", ok=False)
    assert res.returncode != 0 and "Can't downgrade the version of this feature" in res.stdout + res.stderr, out


@pytest.mark.minikafka_only
def test_finalized_levels_survive_restart_and_kill(broker_factory):
    b = broker_factory()
    set_tv(b.bootstrap, 1)
    fin, epoch = finalized(b.bootstrap)
    b.kill()
    b.start()
    assert finalized(b.bootstrap) == (fin, epoch)
    set_tv(b.bootstrap, 2)
    b.stop()
    b.start()
    fin2, epoch2 = finalized(b.bootstrap)
    assert fin2[TV] == 2 and epoch2 == epoch + 1


def test_update_features_v0_upgrades_only(tv_restored):
    """Kafka 4.3 reads v0's allow_downgrade as nothing: a v0 request can only upgrade."""
    b = tv_restored.bootstrap
    for allow in (False, True):
        r = update(b, [U(feature=TV, max_version_level=1, allow_downgrade=allow)], version=0)
        reason = "Can't downgrade the version of this feature without setting the upgrade type to either safe or " \
                 "unsafe downgrade."
        assert (r.error_code, r.error_message, r.results) == (
            INVALID_UPDATE_VERSION, f"{FAILED}Invalid update version 1 for feature {TV}. {reason}", [])
    set_tv(b, 1)
    r = update(b, [U(feature=TV, max_version_level=2, allow_downgrade=True)], version=0)
    assert (r.error_code, [(x.feature, x.error_code, x.error_message) for x in r.results]) == (0, [(TV, 0, "NONE")])
    assert finalized(b)[0][TV] == 2


@pytest.mark.minikafka_only
@pytest.mark.parametrize("feature", sorted(NOT_YET | {"kraft.version"}))
def test_features_not_implemented_cannot_be_finalized(broker, feature):
    """UpdateFeatures refuses a level minikafka does not implement, as Kafka refuses an unknown feature."""
    r = update(broker.bootstrap, [U(feature=feature, max_version_level=1, upgrade_type=UPGRADE)], version=2)
    assert r.error_code == INVALID_UPDATE_VERSION
    reason = "only supports versions 0" if feature == "kraft.version" else "does not support this feature."
    assert r.error_message == f"{FAILED}Invalid update version 1 for feature {feature}. Local controller 1 {reason}"
    assert feature not in finalized(broker.bootstrap)[0]


@pytest.mark.minikafka_only
def test_a_data_dir_that_claimed_unimplemented_features_drops_them(broker_factory, tmp_path):
    """A data dir written by a release that finalized kraft.version 1 on a single node loads without it (and says
    so); share.version, streams.version and eligible.leader.replicas.version, implemented now, stay."""
    import json
    b = broker_factory()
    b.stop()
    path = b.data_dir / "finalized-features.json"
    doc = json.loads(path.read_text())
    epoch = doc["epoch"]
    doc["features"].update({"share.version": 1, "streams.version": 1, "eligible.leader.replicas.version": 1,
                            "kraft.version": 1})
    path.write_text(json.dumps(doc))
    b.start()
    fin, new_epoch = finalized(b.bootstrap)
    assert fin == MINIKAFKA_FINALIZED and new_epoch == epoch + 1
    assert "dropped: minikafka does not implement them" in b.log_text()


def test_eligible_leader_replicas_feature(broker):
    """KIP-966: Kafka 4.3.1 finalizes eligible.leader.replicas.version=1 on a new cluster (ELRV_1, the latest
    production level, bootstraps at metadata.version 4.1-IV0); kafka-features downgrades it to 0 and upgrades it
    back, refuses a level it does not support, and `describe` shows it as Kafka's does."""
    b = broker.bootstrap
    elr = "eligible.leader.replicas.version"
    assert finalized(b)[0][elr] == 1
    _, out = tool("kafka-features", "--bootstrap-server", b, "describe")
    assert re.search(rf"Feature: {re.escape(elr)}\s+SupportedMinVersion: 0\s+SupportedMaxVersion: 1\s+"
                     r"FinalizedVersionLevel: 1\s+Epoch: \d+", out), out
    try:
        _, out = tool("kafka-features", "--bootstrap-server", b, "downgrade", "--feature", f"{elr}=0")
        assert f"{elr} was downgraded to 0." in out, out
        assert elr not in finalized(b)[0]
        _, out = tool("kafka-features", "--bootstrap-server", b, "describe")
        assert re.search(rf"Feature: {re.escape(elr)}\s+SupportedMinVersion: 0\s+SupportedMaxVersion: 1\s+"
                         r"FinalizedVersionLevel: 0\s+", out), out
        _, out = tool("kafka-features", "--bootstrap-server", b, "upgrade", "--feature", f"{elr}=2", ok=False)
        assert (f"Could not upgrade {elr} to 2. {FAILED}Invalid update version 2 for feature {elr}. Local controller "
                f"1 only supports versions 0-1") in out, out
    finally:
        _, out = tool("kafka-features", "--bootstrap-server", b, "upgrade", "--feature", f"{elr}=1")
    assert f"{elr} was upgraded to 1." in out, out
    assert finalized(b)[0][elr] == 1
