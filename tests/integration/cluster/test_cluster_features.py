"""Finalized features are cluster-wide in a 3-node cluster (Kafka's FeatureLevelRecords in the metadata log):
Kafka's `kafka-features` tool upgrades and downgrades through any node and every node's ApiVersions shows
the new level and epoch (the offset of the last FeatureLevel record); validate-only changes nothing; errors
come from the active controller with Kafka's messages (unknown feature, a level this controller or a
registered controller does not support, the downgrade rules); a controller listener that is not the active
controller answers NOT_CONTROLLER; a restart and a controller kill keep the levels. A static quorum upgrades
to kraft.version 1 (KAFKA-16538), after which remove-controller works."""
from __future__ import annotations

import re
import sys
import uuid

import pytest
from kafka.protocol.admin import UpdateFeaturesRequest, UpdateFeaturesResponse

from minikafka.protocol.messages import ControllerRegistrationRequest as Reg
from minikafka.protocol.messages import ControllerRegistrationResponse as RegResp
from tests.conftest import ROOT
from tests.integration.admin.test_features import MINIKAFKA_FINALIZED, api_versions, finalized
from tests.integration.clients.test_reference_lab import tool
from tests.support.cluster_harness import Cluster, running
from tests.support.helpers import RawClient, wait_until

sys.path.insert(0, str(ROOT))
from scripts import apache_kafka as lab  # noqa: E402

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]

HOST = "127.0.0.1"
U = UpdateFeaturesRequest.FeatureUpdateKey
UPGRADE, SAFE_DOWNGRADE = 1, 2
INVALID_UPDATE_VERSION, NOT_CONTROLLER = 95, 41
FAILED = "The update failed for all features since the following feature had an error: "
SV, TV = "share.version", "transaction.version"


def update(bootstrap: str, feature: str, level: int, kind: int = UPGRADE, *,
           validate_only: bool = False) -> tuple[int, str | None]:
    with RawClient(bootstrap) as c:
        r = c.request(UpdateFeaturesRequest(timeout_ms=30000, validate_only=validate_only, feature_updates=[
            U(feature=feature, max_version_level=level, upgrade_type=kind)]), 1, UpdateFeaturesResponse)
    return r.error_code, r.error_message


def views(c: Cluster, nodes=None) -> dict[int, tuple[dict[str, int], int]]:
    out = {}
    for n in nodes or c.brokers:
        try:
            out[n] = finalized(c.nodes[n].bootstrap)
        except OSError:
            out[n] = ({}, -2)
    return out


def all_show(c: Cluster, levels: dict[str, int], nodes=None, timeout: float = 30) -> int:
    """Wait until every node reports `levels` with one epoch; that epoch."""
    seen: list = []

    def same() -> bool:
        seen[:] = [views(c, nodes)]
        return len({(tuple(sorted(v[0].items())), v[1]) for v in seen[0].values()}) == 1 and \
            next(iter(seen[0].values()))[0] == levels
    try:
        wait_until(same, timeout=timeout, what=f"every node reporting {levels}")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {seen}") from None
    return next(iter(seen[0].values()))[1]


def test_features_are_cluster_wide(tmp_path):
    with running(Cluster(tmp_path, size=3)) as c:
        leader, _ = c.agreed_leader(c.voters, timeout=20)
        follower, other = [n for n in c.voters if n != leader]
        epoch0 = all_show(c, MINIKAFKA_FINALIZED)  # the first controller's bootstrap records
        assert epoch0 >= 0

        # Kafka's tool through one node: every node follows
        res, out = tool("kafka-features", "--bootstrap-server", c.nodes[follower].bootstrap, "downgrade",
                        "--feature", f"{SV}=0")
        assert f"{SV} was downgraded to 0." in res.stdout, out
        without_sv = {k: v for k, v in MINIKAFKA_FINALIZED.items() if k != SV}
        epoch1 = all_show(c, without_sv)
        assert epoch1 > epoch0
        res, out = tool("kafka-features", "--bootstrap-server", c.nodes[other].bootstrap, "upgrade",
                        "--feature", f"{SV}=1")
        assert f"{SV} was upgraded to 1." in res.stdout, out
        epoch2 = all_show(c, MINIKAFKA_FINALIZED)
        assert epoch2 > epoch1

        # validate-only changes nothing anywhere
        assert update(c.nodes[other].bootstrap, TV, 1, SAFE_DOWNGRADE, validate_only=True) == (0, None)
        assert all_show(c, MINIKAFKA_FINALIZED) == epoch2

        # the active controller's refusals, whichever node got the request
        b = c.nodes[follower].bootstrap
        assert update(b, "no.such.feature", 1) == (INVALID_UPDATE_VERSION, (
            f"{FAILED}Invalid update version 1 for feature no.such.feature. Local controller {leader} does not "
            "support this feature."))
        assert update(b, "group.version", 5) == (INVALID_UPDATE_VERSION, (
            f"{FAILED}Invalid update version 5 for feature group.version. Local controller {leader} only supports "
            "versions 0-1"))
        assert update(b, TV, 1) == (INVALID_UPDATE_VERSION, (
            f"{FAILED}Invalid update version 1 for feature {TV}. Can't downgrade the version of this feature "
            "without setting the upgrade type to either safe or unsafe downgrade."))
        assert update(b, "metadata.version", 7, SAFE_DOWNGRADE) == (INVALID_UPDATE_VERSION, (
            f"{FAILED}Unsupported metadata.version downgrade from 30 to 7. Refusing to perform the requested "
            "downgrade because it might delete metadata information."))
        res, out = tool("kafka-features", "--bootstrap-server", b, "upgrade", "--feature", f"{TV}=1", ok=False)
        assert res.returncode != 0 and "Can't downgrade the version of this feature" in res.stdout + res.stderr, out

        # controller listeners: the active controller decides, another answers NOT_CONTROLLER
        assert update(f"{HOST}:{c.controller_ports[follower]}", TV, 1, SAFE_DOWNGRADE, validate_only=True) == (
            NOT_CONTROLLER, f"The active controller appears to be node {leader}.")
        assert update(f"{HOST}:{c.controller_ports[leader]}", TV, 1, SAFE_DOWNGRADE) == (0, None)
        levels = {**MINIKAFKA_FINALIZED, TV: 1}
        epoch3 = all_show(c, levels)
        assert epoch3 > epoch2

        # a restarted node and a new active controller keep the levels
        c.kill(follower)
        c.restart(follower)
        assert all_show(c, levels) == epoch3
        c.kill(leader)
        new_leader, _ = c.agreed_leader([follower, other], timeout=30)
        rest = [follower, other]
        assert all_show(c, levels, rest) == epoch3
        res, out = tool("kafka-features", "--bootstrap-server", c.nodes[new_leader].bootstrap, "upgrade",
                        "--feature", f"{TV}=2")
        assert f"{TV} was upgraded to 2." in res.stdout, out
        epoch4 = all_show(c, MINIKAFKA_FINALIZED, rest)
        assert epoch4 > epoch3
        c.restart(leader)
        assert all_show(c, MINIKAFKA_FINALIZED) == epoch4

        # a registered controller that does not support a level: refused (KIP-919), nothing changes
        new_leader, _ = c.agreed_leader(c.voters, timeout=30)
        with RawClient(f"{HOST}:{c.controller_ports[new_leader]}") as cl:
            r = cl.request(Reg(controller_id=9, incarnation_id=uuid.uuid4(), zk_migration_ready=False,
                               listeners=[Reg.Listener(name="CONTROLLER", host=HOST, port=1, security_protocol=0)],
                               features=[Reg.Feature(name="metadata.version", min_supported_version=7,
                                                     max_supported_version=30),
                                         Reg.Feature(name=SV, min_supported_version=0, max_supported_version=0)]),
                           0, RegResp)
        assert r.error_code == 0, r
        assert update(c.nodes[other].bootstrap, SV, 0, SAFE_DOWNGRADE) == (0, None)
        assert update(c.nodes[other].bootstrap, SV, 1) == (INVALID_UPDATE_VERSION, (
            f"{FAILED}Invalid update version 1 for feature {SV}. Controller 9 does not support this feature."))
        all_show(c, without_sv)


def _directory_id(data_dir) -> str:
    return re.search(r"^directory.id=(\S+)$", (data_dir / "meta.properties").read_text(), re.M).group(1)


def _voters(port: int) -> list[int]:
    res = lab.run_tool("kafka-metadata-quorum", ["--bootstrap-controller", f"{HOST}:{port}", "describe", "--status"],
                       timeout=90)
    assert res.returncode == 0, res.stderr[-2000:]
    status = dict(re.findall(r"^(\w+):\s+(.*)$", res.stdout, re.M))
    return sorted(int(i) for i in re.findall(r'"id": (\d+)', status["CurrentVoters"]))


def test_static_quorum_upgrades_to_kraft_version_1(tmp_path):
    """KAFKA-16538: a static quorum (controller.quorum.voters) upgraded with `kafka-features upgrade --feature
    kraft.version=1`: the leader writes the KRaftVersion and Voters records from what every voter told it
    (UpdateRaftVoter at kraft.version 0); then remove-controller works."""
    KV = "kraft.version"
    with running(Cluster(tmp_path, size=3)) as c:
        leader, _ = c.agreed_leader(c.voters, timeout=20)
        b = c.nodes[leader].bootstrap
        resp = api_versions(b)
        assert (KV, 0, 1) in [(f.name, f.min_version, f.max_version) for f in resp.supported_features]
        assert KV not in {f.name for f in resp.finalized_features}
        assert update(b, KV, 2) == (INVALID_UPDATE_VERSION, (
            f"{FAILED}Invalid update version 2 for feature {KV}. Local controller {leader} only supports versions 0-1"))
        wait_until(lambda: update(b, KV, 1, validate_only=True) == (0, None), timeout=30,
                   what="every voter's UpdateRaftVoter reached the leader")
        assert KV not in finalized(b)[0]  # validate-only: nothing written
        res, out = tool("kafka-features", "--bootstrap-server", c.nodes[c.voters[0]].bootstrap, "upgrade",
                        "--feature", f"{KV}=1")
        assert f"{KV} was upgraded to 1." in res.stdout, out
        wait_until(lambda: all(finalized(c.nodes[n].bootstrap)[0].get(KV) == 1 for n in c.voters), timeout=30,
                   what="every node reporting kraft.version 1")
        assert update(b, KV, 0, SAFE_DOWNGRADE) == (INVALID_UPDATE_VERSION, (
            f"{FAILED}Invalid update version 0 for feature {KV}. Can't downgrade the version of this feature."))
        assert _voters(c.controller_ports[leader]) == [1, 2, 3]

        # the voter set is the log's now: a follower leaves the quorum with Kafka's tool
        gone = next(n for n in c.voters if n != leader)
        res = lab.run_tool("kafka-metadata-quorum", [
            "--bootstrap-controller", f"{HOST}:{c.controller_ports[leader]}", "remove-controller",
            "--controller-id", str(gone), "--controller-directory-id",
            _directory_id(tmp_path / f"node{gone}" / "data")], timeout=90)
        assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
        rest = [n for n in c.voters if n != gone]
        wait_until(lambda: _voters(c.controller_ports[leader]) == rest, timeout=30, what=f"voters {rest}")
