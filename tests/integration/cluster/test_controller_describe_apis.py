"""The describe-side APIs Kafka 4.3.1 serves on a CONTROLLER listener (what admin tools with
`--bootstrap-controller` ask): DescribeConfigs, DescribeAcls, DescribeUserScramCredentials,
DescribeDelegationToken and UpdateFeatures, answered by a controller-only node (process.roles=controller)
from the cluster's metadata, as its brokers answer them; and the quorum's Fetch at v18 (KIP-1166: the
follower's high watermark). minikafka only: Kafka's lab is one combined node (its controller listener
advertises the same APIs, see tests/unit/broker/test_api_parity.py)."""
from __future__ import annotations

import pytest
from kafka.protocol.admin import (AlterUserScramCredentialsRequest, DescribeAclsRequest,
                                  DescribeConfigsRequest, DescribeConfigsResponse,
                                  DescribeUserScramCredentialsRequest, UpdateFeaturesRequest)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from tests.support.cluster_harness import Cluster
from tests.support.helpers import RawClient, wait_until

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]  # four nodes

TOPIC_RES, BROKER_RES = 2, 4


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    c = Cluster(tmp_path_factory.mktemp("ctl-describe"), controller_only=True, broker_only=1).start()
    try:
        from tests.support.helpers import metadata_raw

        def registered() -> bool:
            try:
                with RawClient(c.nodes[4].bootstrap, timeout=3) as b:
                    return len(metadata_raw(b).brokers) == 1
            except OSError:
                return False
        wait_until(registered, timeout=60, what="the broker registered and unfenced")
        yield c
    finally:
        c.stop()


def _controller(c: Cluster) -> RawClient:
    return RawClient(f"127.0.0.1:{c.controller_ports[1]}", timeout=10)


def _describe_configs(client: RawClient, rtype: int, name: str) -> DescribeConfigsResponse:
    R = DescribeConfigsRequest.DescribeConfigsResource
    return client.request(DescribeConfigsRequest(resources=[R(resource_type=rtype, resource_name=name,
                                                              configuration_keys=None)],
                                                 include_synonyms=False, include_documentation=False), 4)


def test_the_controller_listener_advertises_kafkas_describe_side_apis(cluster):
    with _controller(cluster) as c:
        resp = c.request(ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3,
                         ApiVersionsResponse)
    apis = {a.api_key: (a.min_version, a.max_version) for a in resp.api_keys}
    assert apis[29] == (1, 3) and apis[32] == (1, 4) and apis[41] == (1, 3) and apis[50] == (0, 0)
    assert apis[57] == (0, 2) and apis[1][1] == 18


def test_describe_configs_on_a_controller_only_node(cluster):
    lab = pytest.importorskip("scripts.apache_kafka")
    broker = cluster.nodes[4].bootstrap
    res = lab.run_tool("kafka-topics", ["--bootstrap-server", broker, "--create", "--topic", "described",
                                        "--partitions", "2", "--replication-factor", "1",
                                        "--config", "retention.ms=1234567"], timeout=90)
    assert res.returncode == 0, res.stderr[-2000:]

    def topic_config() -> dict[str, str] | None:
        with _controller(cluster) as c:
            (r,) = _describe_configs(c, TOPIC_RES, "described").results
        return {e.name: e.value for e in r.configs} if r.error_code == 0 else None
    configs = wait_until(topic_config, timeout=30, what="the controller describes the topic")
    assert configs["retention.ms"] == "1234567" and configs["cleanup.policy"] == "delete"
    with _controller(cluster) as c:
        (r,) = _describe_configs(c, TOPIC_RES, "no-such-topic").results
        assert r.error_code == 3  # UNKNOWN_TOPIC_OR_PARTITION
        (r,) = _describe_configs(c, BROKER_RES, "1").results
        assert r.error_code == 0 and {e.name for e in r.configs} >= {"node.id", "process.roles"}
    # Kafka's own tool through the controller listener (its Admin sends BROKER resources there; topics it
    # refuses on the client side: "not yet supported when communicating directly with the controller")
    res = lab.run_tool("kafka-configs", ["--bootstrap-controller", f"127.0.0.1:{cluster.controller_ports[1]}",
                                         "--describe", "--all", "--entity-type", "brokers", "--entity-name", "1"],
                       timeout=90)
    assert res.returncode == 0 and "process.roles=controller" in res.stdout, res.stdout + res.stderr[-2000:]


def test_acls_scram_tokens_and_features_on_the_controller(cluster):
    with _controller(cluster) as c:
        resp = c.request(DescribeAclsRequest(resource_type_filter=1, resource_name_filter=None,
                                             pattern_type_filter=1, principal_filter=None, host_filter=None,
                                             operation=1, permission_type=1), 2)
        assert resp.error_code == 54  # SECURITY_DISABLED: no authorizer, as on a broker
    U = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
    with RawClient(cluster.nodes[4].bootstrap) as b:
        resp = b.request(AlterUserScramCredentialsRequest(deletions=[], upsertions=[
            U(name="carol", mechanism=1, iterations=4096, salt=b"salt" * 4, salted_password=b"s" * 32)]), 0)
        assert resp.results[0].error_code == 0

    def scram_users() -> list:
        with _controller(cluster) as c:
            r = c.request(DescribeUserScramCredentialsRequest(users=None), 0)
        return [(u.user, [(i.mechanism, i.iterations) for i in u.credential_infos]) for u in r.results]
    assert wait_until(lambda: scram_users() == [("carol", [(1, 4096)])], timeout=30, what="carol on the controller")
    from minikafka.protocol.messages import DescribeDelegationTokenRequest
    with _controller(cluster) as c:
        resp = c.request(DescribeDelegationTokenRequest(owners=None), 3)
        assert resp.error_code == 64  # DELEGATION_TOKEN_REQUEST_NOT_ALLOWED: a PLAINTEXT channel, as Kafka
        # the controller's own token APIs check a direct (not forwarded) connection as Kafka's ControllerApis
        from minikafka.protocol.messages import CreateDelegationTokenRequest
        resp = c.request(CreateDelegationTokenRequest(owner_principal_type=None, owner_principal_name=None,
                                                      renewers=[], max_lifetime_ms=-1), 3)
        assert resp.error_code == 64, resp
    leader, _epoch = cluster.agreed_leader(cluster.voters)  # UpdateFeatures: the active controller decides
    with RawClient(f"127.0.0.1:{cluster.controller_ports[leader]}", timeout=10) as c:
        F = UpdateFeaturesRequest.FeatureUpdateKey
        resp = c.request(UpdateFeaturesRequest(timeout_ms=10000, feature_updates=[
            F(feature="no.such.feature", max_version_level=1, upgrade_type=1)], validate_only=True), 1)
        assert resp.error_code != 0 and "no.such.feature" in (resp.error_message or ""), resp
