"""The controller's admin APIs authorize the real client, as Kafka's ControllerApis does: called directly on a
CONTROLLER listener by a principal that may log in there, and forwarded by a broker (inside an Envelope that
carries the client's principal and address). Each row runs with the exact ACLs Kafka requires (allowed),
without each of them, and with each of them overridden by a DENY (Kafka's error code both times).

The principal is User:alice, logged in with SASL PLAIN from 127.0.0.1; ACLs are granted by the admin of
tests/support/authz_helpers.py. On Apache Kafka (`--broker=kafka`): one KRaft node, alice on its CONTROLLER listener
(direct) and on its SASL inter-broker listener (forwarded: Kafka's broker forwards to its controller). On
minikafka: three nodes, alice on the active controller's CONTROLLER listener and on a SASL client listener
of another node, which forwards to the active controller."""
from __future__ import annotations

import socket
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest
from kafka.protocol.admin import (AlterPartitionReassignmentsRequest, DescribeClusterRequest, ElectLeadersRequest,
                                  ListPartitionReassignmentsRequest)

from minikafka.broker.security import acl as A
from tests.support.authz_helpers import (ADMIN_HOST, AUTH_ERRORS, CLUSTER_DENIED, STANDARD_AUTHORIZER, TOPIC_DENIED, Admin,
                                 binding, bootstrap_admin, describe_acls, oracle_kafka)
from tests.conftest import ROOT, broker_kind, free_port
from tests.support.helpers import RawClient, wait_until
from tests.integration.security.test_authorization import (Res, alter_scram_user, alter_topic_configs, create_acls_call,
                                                  create_partitions, create_topics, delete_acls_call, delete_topics,
                                                  fresh, incremental_alter_broker)
from tests.support.sasl_helpers import authenticate, handshake

pytestmark = pytest.mark.serial  # three nodes (a JVM on the oracle)

ALICE, ALICE_SECRET = "alice", "alice-secret"
PRINCIPAL = f"User:{ALICE}"
NOT_AUTH = "any answer but an authorization error"


class AliceClient(RawClient):
    """A RawClient logged in with SASL PLAIN (as alice unless told otherwise)."""

    def __init__(self, address: str, user: str = ALICE, password: str = ALICE_SECRET) -> None:
        super().__init__(address, timeout=30.0, client_id=f"{user}-admin")
        assert handshake(self, "PLAIN").error_code == 0
        assert authenticate(self, f"\0{user}\0{password}".encode()).error_code == 0


@dataclass
class Env:
    admin_bootstrap: str
    admin_node: int  # the node id behind admin_bootstrap (topics are placed there)
    acl_views: list[str]  # PLAINTEXT addresses whose ACLs must show a change before a call
    targets: dict[str, str]  # "controller" / "forwarded" -> address alice calls
    node_login: tuple[str, str]  # the nodes' own PLAIN user on the controller listener (a super user)


def _minikafka(tmp: Path):
    from tests.support.cluster_harness import Cluster
    users = f'user_broker="broker-secret" user_{ALICE}="{ALICE_SECRET}"'
    jaas = f'org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" ' \
           f'password="broker-secret" {users};'
    config = {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CLIENT:SASL_PLAINTEXT,INTERNAL:SASL_PLAINTEXT,"
                                                "CONTROLLER:SASL_PLAINTEXT",
              "inter.broker.listener.name": "INTERNAL", "sasl.enabled.mechanisms": "PLAIN",
              "sasl.mechanism.inter.broker.protocol": "PLAIN", "sasl.mechanism.controller.protocol": "PLAIN",
              **{f"listener.name.{n}.plain.sasl.jaas.config": jaas for n in ("client", "internal", "controller")},
              "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": "User:broker",
              "allow.everyone.if.no.acl.found": "true"}
    cluster = Cluster(tmp, config=config)
    clients = {}
    for n, node in cluster.nodes.items():
        clients[n] = free_port()
        node.config["listeners"] += f",CLIENT://127.0.0.1:{clients[n]},INTERNAL://127.0.0.1:{free_port()}"
    cluster.start()
    cluster.client_ports = clients  # type: ignore[attr-defined]
    return cluster


@pytest.fixture(scope="module")
def env(request, tmp_path_factory):
    kind = broker_kind(request.config)
    if kind == "kafka":
        sys.path.insert(0, str(ROOT))
        kb = oracle_kafka(tmp_path_factory.mktemp("kafka-ctl"), controller_users={ALICE: ALICE_SECRET})
        kb.start(timeout=180)
        try:
            yield Env(kb.bootstrap, 1, [kb.bootstrap], {"controller": f"127.0.0.1:{kb.controller_port}",
                                                     "forwarded": f"127.0.0.1:{kb.internal_port}"},
                      ("admin", "admin-secret"))
        finally:
            kb.stop()
            kb.cleanup()
        return
    if kind != "minikafka":
        pytest.skip("needs brokers this test configures")
    cluster = _minikafka(tmp_path_factory.mktemp("ctl-authz"))
    try:
        wait_until(lambda: _registered(cluster), timeout=30, what="three brokers registered")
        leader = wait_until(lambda: _quorum_leader(cluster.nodes[1].bootstrap), timeout=30, what="a quorum leader")
        other = next(n for n in cluster.ids if n != leader)
        yield Env(cluster.nodes[other].bootstrap, other, [cluster.nodes[n].bootstrap for n in cluster.ids],
                  {"controller": f"127.0.0.1:{cluster.controller_ports[leader]}",
                   "forwarded": f"127.0.0.1:{cluster.client_ports[other]}"}, ("broker", "broker-secret"))
    finally:
        cluster.stop()


def _quorum_leader(bootstrap: str) -> int | None:
    """The active controller, as a broker listener's DescribeQuorum names it (before any ACL exists)."""
    from kafka.protocol.admin import DescribeQuorumRequest, DescribeQuorumResponse
    Q = DescribeQuorumRequest.TopicData
    try:
        with RawClient(bootstrap, timeout=3) as c:
            resp = c.request(DescribeQuorumRequest(topics=[Q(topic_name="__cluster_metadata", partitions=[
                Q.PartitionData(partition_index=0)])]), 2, DescribeQuorumResponse)
    except OSError:
        return None
    leader = resp.topics[0].partitions[0].leader_id if resp.error_code == 0 and resp.topics else -1
    return leader if leader > 0 else None


def _registered(cluster) -> bool:
    from tests.support.helpers import metadata_raw
    try:
        with RawClient(cluster.nodes[1].bootstrap, timeout=3) as c:
            return len(metadata_raw(c).brokers) == len(cluster.ids)
    except OSError:
        return False


@pytest.fixture(scope="module")
def admin(env):
    a = bootstrap_admin(env.admin_bootstrap)
    a.node = env.admin_node  # type: ignore[attr-defined]
    yield a
    a.close()


def _sync(env: Env, done: Callable[[set], bool]) -> None:
    """Until every node's authorizer shows the ACL change (the controller's too)."""
    from tests.support.authz_helpers import AdminRawClient
    for address in env.acl_views:
        with AdminRawClient(address) as c:
            wait_until(lambda: done(describe_acls(c)), timeout=20, what=f"ACLs on {address}")


def grant(admin: Admin, env: Env, *bindings: A.AclBinding) -> None:
    if bindings:
        assert admin.create_acls(list(bindings)) == [0] * len(bindings)
        _sync(env, lambda acls: set(bindings) <= acls)


def revoke(admin: Admin, env: Env, *bindings: A.AclBinding) -> None:
    if bindings:
        admin.revoke(*bindings)
        _sync(env, lambda acls: not set(bindings) & acls)


# -- calls --------------------------------------------------------------------------------------------
def describe_cluster_controllers(c: RawClient, r: Res) -> int:
    return c.request(DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=2,
                                            include_fenced_brokers=False), 2).error_code


def controller_registration(c: RawClient, r: Res) -> int:
    """KIP-919: a controller's registration (an id no node has, the features every node supports)."""
    import uuid
    from minikafka.protocol.messages import ControllerRegistrationRequest as Reg
    from minikafka.protocol.messages import ControllerRegistrationResponse as RegResp
    resp = c.request(Reg(controller_id=4242, incarnation_id=uuid.uuid4(), zk_migration_ready=False,
                         listeners=[Reg.Listener(name="CONTROLLER", host="127.0.0.1", port=1, security_protocol=2)],
                         features=[Reg.Feature(name="metadata.version", min_supported_version=7,
                                               max_supported_version=30)]), 0, RegResp)
    return resp.error_code


def elect_leaders(c: RawClient, r: Res) -> int:
    T = ElectLeadersRequest.TopicPartitions
    resp = c.request(ElectLeadersRequest(election_type=0, topic_partitions=[T(topic=r.topic, partitions=[0])],
                                         timeout_ms=10000), 2)
    return resp.error_code or resp.replica_election_results[0].partition_result[0].error_code


def alter_reassignments(c: RawClient, r: Res) -> int:
    T = AlterPartitionReassignmentsRequest.ReassignableTopic
    resp = c.request(AlterPartitionReassignmentsRequest(timeout_ms=10000, topics=[T(name=r.topic, partitions=[
        T.ReassignablePartition(partition_index=0, replicas=None)])]), 0)
    return resp.error_code


def list_reassignments(c: RawClient, r: Res) -> int:
    return c.request(ListPartitionReassignmentsRequest(timeout_ms=10000, topics=None), 0).error_code


def create_topic_configs_hidden(c: RawClient, r: Res) -> int:
    """CreateTopics shows the new topic's configs only with DESCRIBE_CONFIGS (else its config error is 29)."""
    from kafka.protocol.admin import CreateTopicsRequest
    T = CreateTopicsRequest.CreatableTopic
    t = c.request(CreateTopicsRequest(topics=[T(name=r.topic, num_partitions=1, replication_factor=1, assignments=[],
                                                configs=[])], timeout_ms=30000, validate_only=True), 7).topics[0]
    if t.error_code:
        return t.error_code
    return t.topic_config_error_code


def topic(admin: Admin, r: Res) -> None:
    """A topic whose one replica is the admin's node (so the admin's node leads it)."""
    from kafka.protocol.admin import CreateTopicsRequest
    T = CreateTopicsRequest.CreatableTopic
    resp = admin.client.request(CreateTopicsRequest(topics=[T(
        name=r.topic, num_partitions=-1, replication_factor=-1, configs=[],
        assignments=[T.CreatableReplicaAssignment(partition_index=0, broker_ids=[admin.node])])],
        timeout_ms=30000, validate_only=False), 7)
    assert resp.topics[0].error_code == 0, resp
    from tests.support.helpers import list_offset
    wait_until(lambda: list_offset(admin.client, r.topic)[0] == 0, timeout=30, what=f"{r.topic} led")


@dataclass
class Row:
    api: str
    call: Callable[[RawClient, Res], int]
    grants: list[tuple[int, str, int, int]]  # (resource type, "topic"/"cluster", operation, error without it)
    allowed: int | str = NOT_AUTH
    setup: Callable[[Admin, Res], None] | None = None


T, C = A.TOPIC, A.CLUSTER
ROWS = [
    Row("CreateAcls", create_acls_call, [(C, "cluster", A.ALTER, CLUSTER_DENIED)], 0),
    Row("DeleteAcls", delete_acls_call, [(C, "cluster", A.ALTER, CLUSTER_DENIED)], 0),
    Row("AlterUserScramCredentials", alter_scram_user, [(C, "cluster", A.ALTER, CLUSTER_DENIED)], 0),
    Row("IncrementalAlterConfigs(broker)", incremental_alter_broker, [(C, "cluster", A.ALTER_CONFIGS, CLUSTER_DENIED)]),
    Row("AlterConfigs(topic)", alter_topic_configs, [(T, "topic", A.ALTER_CONFIGS, TOPIC_DENIED)], 0, topic),
    Row("CreateTopics", create_topics, [(T, "topic", A.CREATE, TOPIC_DENIED)], 0),
    Row("CreateTopics(configs)", create_topic_configs_hidden,
        [(T, "topic", A.CREATE, TOPIC_DENIED), (T, "topic", A.DESCRIBE_CONFIGS, TOPIC_DENIED)], 0),
    Row("DeleteTopics", delete_topics, [(T, "topic", A.DELETE, TOPIC_DENIED)], 0, topic),
    Row("CreatePartitions", create_partitions, [(T, "topic", A.ALTER, TOPIC_DENIED)], NOT_AUTH, topic),
    Row("ElectLeaders", elect_leaders, [(C, "cluster", A.ALTER, CLUSTER_DENIED)], NOT_AUTH, topic),
    Row("AlterPartitionReassignments", alter_reassignments, [(C, "cluster", A.ALTER, CLUSTER_DENIED)]),
    Row("ListPartitionReassignments", list_reassignments, [(C, "cluster", A.DESCRIBE, CLUSTER_DENIED)], 0),
]
CONTROLLER_ONLY = [Row("DescribeCluster(controllers)", describe_cluster_controllers,
                       [(C, "cluster", A.ALTER, CLUSTER_DENIED)], 0),
                   Row("ControllerRegistration", controller_registration,
                       [(C, "cluster", A.CLUSTER_ACTION, CLUSTER_DENIED)], 0)]


def _alice(rtype: int, name: str, op: int, perm: int = A.ALLOW) -> A.AclBinding:
    return binding(rtype, name, op, perm, principal=PRINCIPAL, host="127.0.0.1")


def _run(env: Env, admin: Admin, row: Row, where: str) -> None:
    r = fresh()
    if row.setup is not None:
        row.setup(admin, r)
    acls = [_alice(rtype, r.name(key), op) for rtype, key, op, _code in row.grants]
    made: list[A.AclBinding] = []
    try:
        with AliceClient(env.targets[where]) as c:
            for i, (_rtype, _key, _op, code) in enumerate(row.grants):  # each grant missing
                others = acls[:i] + acls[i + 1:]
                grant(admin, env, *others)
                made = list(others)
                assert row.call(c, r) == code, (row.api, where, "without", acls[i])
                revoke(admin, env, *others)
                made = []
            for i, (_rtype, _key, _op, code) in enumerate(row.grants):  # each grant overridden by a DENY
                deny = acls[i]._replace(permission=A.DENY)
                grant(admin, env, *acls, deny)
                made = [*acls, deny]
                assert row.call(c, r) == code, (row.api, where, "denied", deny)
                revoke(admin, env, deny)
                made = list(acls)
            got = row.call(c, r)
            if row.allowed == NOT_AUTH:
                assert got not in AUTH_ERRORS, (row.api, where, got)
            else:
                assert got == row.allowed, (row.api, where, got)
    finally:
        revoke(admin, env, *made)


@pytest.mark.parametrize("row", ROWS + CONTROLLER_ONLY, ids=[r.api for r in ROWS + CONTROLLER_ONLY])
def test_controller_listener(env, admin, row):
    _run(env, admin, row, "controller")


@pytest.mark.parametrize("row", ROWS, ids=[r.api for r in ROWS])
def test_forwarded_by_a_broker(env, admin, row):
    _run(env, admin, row, "forwarded")


def test_the_envelope_needs_cluster_action(env, admin):
    """A client that sends an Envelope itself to the controller listener (to pass as someone else) is
    refused: CLUSTER_AUTHORIZATION_FAILED without CLUSTER_ACTION, and nothing inside is executed."""
    from minikafka.protocol.envelope import inner_request_bytes, principal_bytes
    from minikafka.protocol.messages import EnvelopeRequest, EnvelopeResponse
    from kafka.protocol.admin import CreateAclsRequest
    inner = CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
        resource_type=A.CLUSTER, resource_name=A.CLUSTER_NAME, resource_pattern_type=A.LITERAL, principal=PRINCIPAL,
        host="*", operation=A.ALL, permission_type=A.ALLOW)])
    env_req = EnvelopeRequest(request_data=inner_request_bytes(inner, 2, "forger"),
                              request_principal=principal_bytes("User:broker"),
                              client_host_address=socket.inet_aton("127.0.0.1"))
    with AliceClient(env.targets["controller"]) as c:
        resp = c.request(env_req, 0, EnvelopeResponse)
    assert (resp.error_code, resp.response_data) == (CLUSTER_DENIED, None)
    from tests.support.authz_helpers import AdminRawClient
    with AdminRawClient(env.admin_bootstrap) as a:
        time.sleep(0.5)
        assert not any(b.principal == PRINCIPAL and b.operation == A.ALL for b in describe_acls(a))


def test_an_envelope_is_authorized_as_the_client_it_carries(env, admin):
    """The nodes' own principal (CLUSTER_ACTION) forwards alice's CreateAcls: the envelope passes, the request
    inside is refused as alice's, from alice's address."""
    from kafka.protocol.admin import CreateAclsRequest, CreateAclsResponse

    from minikafka.protocol.envelope import inner_request_bytes, inner_response_body, principal_bytes
    from minikafka.protocol.messages import EnvelopeRequest, EnvelopeResponse
    inner = CreateAclsRequest(creations=[CreateAclsRequest.AclCreation(
        resource_type=A.CLUSTER, resource_name=A.CLUSTER_NAME, resource_pattern_type=A.LITERAL, principal=PRINCIPAL,
        host="*", operation=A.ALL, permission_type=A.ALLOW)])
    env_req = EnvelopeRequest(request_data=inner_request_bytes(inner, 2, "alice-admin", correlation_id=7),
                              request_principal=principal_bytes(PRINCIPAL),
                              client_host_address=socket.inet_aton("127.0.0.1"))
    with AliceClient(env.targets["controller"], *env.node_login) as c:
        resp = c.request(env_req, 0, EnvelopeResponse)
    assert resp.error_code == 0, resp
    answer = CreateAclsResponse.decode(bytes(inner_response_body(bytes(resp.response_data), True)), version=2,
                                       header=False)
    assert [r.error_code for r in answer.results] == [CLUSTER_DENIED]
    assert bytes(resp.response_data)[:4] == (7).to_bytes(4, "big")  # the inner correlation id comes back
