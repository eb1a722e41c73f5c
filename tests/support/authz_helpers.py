"""Helpers for the authorization tests: a broker with Kafka's StandardAuthorizer (minikafka, or the
Apache Kafka oracle configured the same way), an admin connection and ACL management.

Both brokers see the tests' clients as User:ANONYMOUS (PLAINTEXT). The admin is the same principal
connecting from another loopback address, ADMIN_HOST (127.0.0.2): the broker starts with
allow.everyone.if.no.acl.found=true and no ACLs, and `bootstrap_admin` first grants ANONYMOUS@ADMIN_HOST
ALL on the cluster and on every topic, group and transactional id (`*`). From then on every resource
has an ACL, so clients from CLIENT_HOST (127.0.0.1) get exactly what the tests grant them. On the
oracle, the inter-broker and controller listeners use SASL PLAIN as User:admin (a super user): Kafka's
own connections need CLUSTER_ACTION, which the clients under test must not have.
"""
from __future__ import annotations

import socket
import time
from pathlib import Path

from kafka.protocol.admin import (CreateAclsRequest, CreateAclsResponse, CreateTopicsRequest, DeleteAclsRequest,
                                  DeleteAclsResponse, DescribeAclsRequest, DescribeAclsResponse)
from kafka.protocol.consumer import ListOffsetsRequest

from minikafka.broker.security import acl as A
from tests.support.helpers import RawClient, build_batch, produce_raw

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
ADMIN_HOST = "127.0.0.2"
CLIENT_HOST = "127.0.0.1"
ANON = "User:ANONYMOUS"
TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED = 29, 30, 31, 53
AUTH_ERRORS = frozenset({TOPIC_DENIED, GROUP_DENIED, CLUSTER_DENIED, TXN_DENIED})


class AdminRawClient(RawClient):
    """A RawClient whose connection comes from ADMIN_HOST."""

    def __init__(self, bootstrap: str, timeout: float = 15.0) -> None:
        host, _, port = bootstrap.rpartition(":")
        self.sock = socket.create_connection((host, int(port)), timeout=timeout, source_address=(ADMIN_HOST, 0))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_id = "acl-admin"
        self.correlation_id = 0


def oracle_kafka(work_dir: Path | None = None, controller_users: dict[str, str] | None = None):
    """The Apache Kafka lab broker configured as described above (not started). `controller_users`: more
    PLAIN users {name: password} who may log in on the CONTROLLER listener (no rights but their ACLs)."""
    from scripts.apache_kafka import KafkaBroker, free_port

    extra = " ".join(f'user_{u}="{p}"' for u, p in (controller_users or {}).items())
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
            f'password="admin-secret" user_admin="admin-secret" {extra};')

    class SecuredKafka(KafkaBroker):
        def properties(self, overrides=None):
            props = super().properties(overrides)
            internal = self.internal_port = getattr(self, "internal_port", None) or free_port()
            props.update({
                "listeners": f"PLAINTEXT://127.0.0.1:{self.port},INTERNAL://127.0.0.1:{internal},"
                             f"CONTROLLER://127.0.0.1:{self.controller_port}",
                "advertised.listeners": f"PLAINTEXT://127.0.0.1:{self.port},INTERNAL://127.0.0.1:{internal}",
                "inter.broker.listener.name": "INTERNAL",
                "listener.security.protocol.map": "CONTROLLER:SASL_PLAINTEXT,INTERNAL:SASL_PLAINTEXT,"
                                                  "PLAINTEXT:PLAINTEXT",
                "sasl.enabled.mechanisms": "PLAIN",
                "sasl.mechanism.inter.broker.protocol": "PLAIN",
                "sasl.mechanism.controller.protocol": "PLAIN",
                "listener.name.internal.plain.sasl.jaas.config": jaas,
                "listener.name.controller.plain.sasl.jaas.config": jaas,
                "authorizer.class.name": STANDARD_AUTHORIZER,
                "super.users": "User:admin",
                "allow.everyone.if.no.acl.found": "true",
            })
            return props

    return SecuredKafka(work_dir=work_dir)


def binding(rtype: int, name: str, op: int, perm: int = A.ALLOW, *, pattern: int = A.LITERAL,
            principal: str = ANON, host: str = CLIENT_HOST) -> A.AclBinding:
    return A.AclBinding(rtype, name, pattern, principal, host, op, perm)


def _creation(b: A.AclBinding):
    return CreateAclsRequest.AclCreation(resource_type=b.resource_type, resource_name=b.name,
                                         resource_pattern_type=b.pattern_type, principal=b.principal, host=b.host,
                                         operation=b.operation, permission_type=b.permission)


def _exact_filter(b: A.AclBinding):
    return DeleteAclsRequest.DeleteAclsFilter(resource_type_filter=b.resource_type, resource_name_filter=b.name,
                                              pattern_type_filter=b.pattern_type, principal_filter=b.principal,
                                              host_filter=b.host, operation=b.operation,
                                              permission_type=b.permission)


def describe_acls(client: RawClient) -> set[A.AclBinding]:
    req = DescribeAclsRequest(resource_type_filter=A.R_ANY, resource_name_filter=None, pattern_type_filter=A.P_ANY,
                              principal_filter=None, host_filter=None, operation=A.O_ANY,
                              permission_type=A.PERM_ANY)
    resp = client.request(req, 2, DescribeAclsResponse)
    assert resp.error_code == 0, resp
    return {A.AclBinding(r.resource_type, r.resource_name, r.pattern_type, a.principal, a.host, a.operation,
                         a.permission_type) for r in resp.resources for a in r.acls}


def create_acls(client: RawClient, bindings: list[A.AclBinding]) -> list[int]:
    """CreateAcls over `client`; the error code of each creation."""
    resp = client.request(CreateAclsRequest(creations=[_creation(b) for b in bindings]), 2, CreateAclsResponse)
    return [r.error_code for r in resp.results]


class Admin:
    """ACL and topic management from ADMIN_HOST."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.client = AdminRawClient(bootstrap)

    def close(self) -> None:
        self.client.close()

    def create_acls(self, bindings: list[A.AclBinding]) -> list[int]:
        return create_acls(self.client, bindings)

    def grant(self, *bindings: A.AclBinding) -> None:
        codes = self.create_acls(list(bindings))
        assert codes == [0] * len(bindings), codes
        self._wait(lambda acls: set(bindings) <= acls)

    def revoke(self, *bindings: A.AclBinding) -> None:
        if not bindings:
            return
        resp = self.client.request(DeleteAclsRequest(filters=[_exact_filter(b) for b in bindings]), 2,
                                   DeleteAclsResponse)
        assert all(r.error_code == 0 for r in resp.filter_results), resp
        self._wait(lambda acls: not set(bindings) & acls)

    def _wait(self, done, timeout: float = 15.0) -> None:
        """Until the broker's authorizer shows the change (Kafka applies ACLs from its metadata log)."""
        deadline = time.monotonic() + timeout
        while not done(describe_acls(self.client)):
            assert time.monotonic() < deadline, "ACL change not visible"
            time.sleep(0.05)

    def create_topic(self, name: str, partitions: int = 1, records: int = 1) -> None:
        T = CreateTopicsRequest.CreatableTopic
        resp = self.client.request(CreateTopicsRequest(topics=[T(name=name, num_partitions=partitions,
                                                                 replication_factor=1, assignments=[], configs=[])],
                                                       timeout_ms=30000, validate_only=False), 7)
        assert resp.topics[0].error_code == 0, resp
        deadline = time.monotonic() + 30
        while True:  # Kafka elects the leader after CreateTopics returns
            P = ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition
            lo = self.client.request(ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[
                ListOffsetsRequest.ListOffsetsTopic(name=name, partitions=[
                    P(partition_index=p, current_leader_epoch=-1, timestamp=-1) for p in range(partitions)])]), 7)
            if all(p.error_code == 0 for t in lo.topics for p in t.partitions):
                break
            assert time.monotonic() < deadline, lo
            time.sleep(0.1)
        for p in range(partitions):
            for _ in range(records):
                assert produce_raw(self.client, name, build_batch([b"v"]), partition=p).error_code == 0


def bootstrap_admin(bootstrap: str) -> Admin:
    """Grant ANONYMOUS@ADMIN_HOST everything (allowed once: no ACL exists yet)."""
    admin = Admin(bootstrap)
    everything = [binding(rtype, name, A.ALL, host=ADMIN_HOST)
                  for rtype, name in ((A.CLUSTER, A.CLUSTER_NAME), (A.TOPIC, "*"), (A.GROUP, "*"),
                                      (A.TRANSACTIONAL_ID, "*"))]
    admin.grant(*everything)
    return admin


def secured_broker(request, tmp_path_factory):
    """Generator for a module fixture: the bootstrap address of a broker with StandardAuthorizer,
    allow.everyone.if.no.acl.found=true and no ACLs (minikafka, or the oracle with --broker=kafka)."""
    import sys

    import pytest

    from tests.conftest import ROOT, BrokerProcess, broker_kind

    kind = broker_kind(request.config)
    if kind == "kafka":
        sys.path.insert(0, str(ROOT))
        kb = oracle_kafka(tmp_path_factory.mktemp("kafka-acl"))
        kb.start(timeout=180)
        try:
            yield kb.bootstrap
        finally:
            kb.stop()
            kb.cleanup()
        return
    if kind != "minikafka":
        pytest.skip("needs a broker this test can configure")
    d = tmp_path_factory.mktemp("acl") / "data"
    d.mkdir()
    b = BrokerProcess(d, {"authorizer.class.name": STANDARD_AUTHORIZER,
                          "allow.everyone.if.no.acl.found": "true"}).start()
    try:
        yield b.bootstrap
    finally:
        b.stop()
    assert "Traceback" not in b.log_text(), b.log_text()
