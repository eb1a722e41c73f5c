"""The wire answers of cluster-wide ACL, SCRAM and broker-config changes on three nodes, each request
pinned to one node with raw kafka.protocol: made through one node, validated by the active controller
(its errors and messages come back through the broker), described on another. The same test runs on
three Apache Kafka 4.3 nodes with `--broker=kafka` (scripts/apache_kafka.py KafkaCluster)."""
from __future__ import annotations

import sys
import time

import pytest
from kafka.protocol.admin import (AlterConfigsRequest, AlterConfigsResponse, CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
                                  DescribeAclsRequest, DescribeAclsResponse, DescribeConfigsRequest,
                                  DescribeConfigsResponse, IncrementalAlterConfigsRequest,
                                  IncrementalAlterConfigsResponse)
from kafka.protocol.admin.users import (AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
                                        DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse)

from tests.conftest import ROOT, broker_kind
from tests.support.helpers import RawClient

pytestmark = pytest.mark.serial  # three processes (three JVMs on the oracle)

SECURITY = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": "User:ANONYMOUS", "allow.everyone.if.no.acl.found": "false"}
CLUSTER, LITERAL, ANY, DESCRIBE_CONFIGS, ALLOW = 4, 3, 1, 8, 3
INVALID_REQUEST, RESOURCE_NOT_FOUND = 42, 91
SOURCE_DEFAULT, SOURCE_DYNAMIC_DEFAULT = 5, 3


@pytest.fixture(scope="module")
def nodes(request, tmp_path_factory):
    """node id -> bootstrap of its PLAINTEXT listener (User:ANONYMOUS, the super user)."""
    kind = broker_kind(request.config)
    if kind == "kafka":
        sys.path.insert(0, str(ROOT))
        from scripts.apache_kafka import KafkaCluster
        kc = KafkaCluster(3, work_dir=tmp_path_factory.mktemp("kafka"), overrides=SECURITY).start(timeout=240)
        try:
            yield {n: f"127.0.0.1:{kc.ports[n]}" for n in kc.ids}
        finally:
            kc.stop()
        return
    if kind != "minikafka":
        pytest.skip("needs three brokers this test starts")
    from tests.support.cluster_harness import Cluster
    c = Cluster(tmp_path_factory.mktemp("cluster"), config={
        **SECURITY, "broker.session.timeout.ms": "1500", "broker.heartbeat.interval.ms": "300"}).start()
    try:
        yield {n: c.nodes[n].bootstrap for n in c.ids}
    finally:
        for n in c.ids:
            c.kill(n)
        c.stop()


def call(addr: str, req, version: int, resp_cls):
    with RawClient(addr, timeout=15) as c:
        return c.request(req, version, resp_cls)


def eventually(fn, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = fn()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(0.1)


ACL = CreateAclsRequest.AclCreation(resource_type=CLUSTER, resource_name="kafka-cluster", resource_pattern_type=LITERAL,
                                    principal="User:alice", host="*", operation=DESCRIBE_CONFIGS, permission_type=ALLOW)
EVERY_ACL = DescribeAclsRequest(resource_type_filter=ANY, resource_name_filter=None, pattern_type_filter=ANY,
                                principal_filter=None, host_filter=None, operation=ANY, permission_type=ANY)


def acls_on(addr: str) -> list:
    resp = call(addr, EVERY_ACL, 3, DescribeAclsResponse)
    return [(r.resource_type, r.resource_name, [(a.principal, a.operation) for a in r.acls]) for r in resp.resources]


def test_acls_made_on_one_node_described_and_deleted_on_others(nodes):
    for _ in range(2):  # the second time it exists already: a success without a second binding
        resp = call(nodes[1], CreateAclsRequest(creations=[ACL]), 3, CreateAclsResponse)
        assert [(r.error_code, r.error_message) for r in resp.results] == [(0, "")]
    bad = CreateAclsRequest.AclCreation(resource_type=CLUSTER, resource_name="other", resource_pattern_type=LITERAL,
                                        principal="User:alice", host="*", operation=DESCRIBE_CONFIGS,
                                        permission_type=ALLOW)
    resp = call(nodes[2], CreateAclsRequest(creations=[bad]), 3, CreateAclsResponse)
    assert [(r.error_code, r.error_message) for r in resp.results] == [
        (INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster")]
    assert eventually(lambda: acls_on(nodes[3])) == [(CLUSTER, "kafka-cluster", [("User:alice", DESCRIBE_CONFIGS)])]
    # two filters matching the same binding: both list it
    F = DeleteAclsRequest.DeleteAclsFilter
    flt = F(resource_type_filter=ANY, resource_name_filter=None, pattern_type_filter=ANY, principal_filter="User:alice",
            host_filter=None, operation=ANY, permission_type=ANY)
    resp = call(nodes[3], DeleteAclsRequest(filters=[flt, flt]), 3, DeleteAclsResponse)
    assert [(r.error_code, [(m.principal, m.operation) for m in r.matching_acls]) for r in resp.filter_results] == \
        [(0, [("User:alice", DESCRIBE_CONFIGS)])] * 2
    assert eventually(lambda: acls_on(nodes[1]) == []) is True


def test_scram_credentials_made_on_one_node_described_on_another(nodes):
    U = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
    D = AlterUserScramCredentialsRequest.ScramCredentialDeletion
    resp = call(nodes[1], AlterUserScramCredentialsRequest(deletions=[], upsertions=[
        U(name="alice", mechanism=1, iterations=4096, salt=b"salt", salted_password=b"x" * 32)]), 0,
        AlterUserScramCredentialsResponse)
    assert [(r.user, r.error_code) for r in resp.results] == [("alice", 0)]
    # the controller checks against the cluster's credentials
    resp = call(nodes[2], AlterUserScramCredentialsRequest(deletions=[D(name="nobody", mechanism=1)], upsertions=[]),
                0, AlterUserScramCredentialsResponse)
    assert [(r.user, r.error_code, r.error_message) for r in resp.results] == [
        ("nobody", RESOURCE_NOT_FOUND, "Attempt to delete a user credential that does not exist")]

    def described():
        resp = call(nodes[3], DescribeUserScramCredentialsRequest(users=None), 0, DescribeUserScramCredentialsResponse)
        return [(r.user, r.error_code, [(i.mechanism, i.iterations) for i in r.credential_infos]) for r in resp.results]
    assert eventually(described) == [("alice", 0, [(1, 4096)])]


def test_broker_configs_default_set_on_one_node_per_broker_only_on_its_own(nodes):
    R = IncrementalAlterConfigsRequest.AlterConfigsResource

    def alter(addr: str, name: str, key: str, value: str) -> list:
        req = IncrementalAlterConfigsRequest(resources=[R(resource_type=4, resource_name=name, configs=[
            R.AlterableConfig(name=key, config_operation=0, value=value)])], validate_only=False)
        return [(r.error_code, r.error_message) for r in call(addr, req, 1, IncrementalAlterConfigsResponse).responses]
    assert alter(nodes[2], "", "log.retention.ms", "7200000") == [(0, None)]
    assert alter(nodes[1], "3", "log.retention.ms", "1000") == [
        (INVALID_REQUEST, "Unexpected broker id, expected 1, but received 3")]
    DR = DescribeConfigsRequest.DescribeConfigsResource

    def describe(name: str, keys, synonyms: bool) -> list:
        req = DescribeConfigsRequest(resources=[DR(resource_type=4, resource_name=name, configuration_keys=keys)],
                                     include_synonyms=synonyms, include_documentation=False)
        return call(nodes[1], req, 4, DescribeConfigsResponse).results[0].configs

    def on_node_1():
        return [(c.value, c.config_source, [(s.name, s.value, s.source) for s in c.synonyms])
                for c in describe("1", ["log.retention.ms"], True) if c.value == "7200000"]
    assert eventually(on_node_1) == [("7200000", SOURCE_DYNAMIC_DEFAULT, [
        ("log.retention.ms", "7200000", SOURCE_DYNAMIC_DEFAULT), ("log.retention.hours", "168", SOURCE_DEFAULT)])]
    # (Kafka 4.3 also keeps a cluster-level min.insync.replicas there, written at bootstrap)
    assert ("log.retention.ms", "7200000", SOURCE_DYNAMIC_DEFAULT) in [
        (c.name, c.value, c.config_source) for c in describe("", None, False)]
    # the legacy AlterConfigs (the whole layer) through a third node (Kafka 4.3 refuses a layer without
    # its min.insync.replicas while ELR is on, so it is given)
    A = AlterConfigsRequest.AlterConfigsResource
    req = AlterConfigsRequest(resources=[A(resource_type=4, resource_name="", configs=[
        A.AlterableConfig(name="log.retention.ms", value="3600000"),
        A.AlterableConfig(name="min.insync.replicas", value="1")])], validate_only=False)
    resp = call(nodes[3], req, 2, AlterConfigsResponse)
    assert [(r.error_code, r.error_message) for r in resp.responses] == [(0, None)]
    assert eventually(lambda: sorted((c.name, c.value, c.config_source) for c in describe("", None, False)) == [
        ("log.retention.ms", "3600000", SOURCE_DYNAMIC_DEFAULT),
        ("min.insync.replicas", "1", SOURCE_DYNAMIC_DEFAULT)]) is True
