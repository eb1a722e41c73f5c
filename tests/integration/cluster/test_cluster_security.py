"""ACLs, SCRAM credentials and dynamic broker configs of a three-node cluster go through the metadata
log (Kafka's AccessControlEntryRecord, UserScramCredentialRecord, ConfigRecord): made through one node
with confluent-kafka's AdminClient, enforced and described on every node, still there after kill -9;
the SCRAM credential formatted into the data dirs (`storage format --add-scram`) usable on every node.

Each node: PLAINTEXT (inter-broker; User:ANONYMOUS is the super user, as Kafka's PLAINTEXT
inter-broker setups), SASL_PLAINTEXT with SCRAM-SHA-256 for the users, CONTROLLER. StandardAuthorizer,
no access without an ACL. The per-node probe is DescribeConfigs of the BROKER resource "<n>", which
the client sends to broker n itself and which needs DESCRIBE_CONFIGS on the CLUSTER.
"""
from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from kafka.protocol.admin import IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourcePatternType,
                                   ResourceType, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion)

from minikafka.broker.security.sasl.bootstrap import add_scram_credentials
from tests.support.cluster_harness import Cluster, running
from tests.conftest import free_port
from tests.support.helpers import RawClient, wait_until

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]  # three processes with short timeouts

SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
CONFIG = {"broker.session.timeout.ms": "1500", "broker.heartbeat.interval.ms": "300",
          "inter.broker.listener.name": "PLAINTEXT",
          "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
          "super.users": "User:ANONYMOUS;User:admin", "allow.everyone.if.no.acl.found": "false",
          "listener.name.sasl.sasl.enabled.mechanisms": "SCRAM-SHA-256",
          "listener.name.sasl.scram-sha-256.sasl.jaas.config": SCRAM_JAAS}
USERS = {"alice": "alice-secret", "bob": "bob-secret"}
ADMIN = {"admin": "admin-secret"}  # formatted into every node's data dir (`storage format --add-scram`)


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path, config=CONFIG)
    c.sasl = {}
    for n in c.ids:
        node = c.nodes[n]
        c.sasl[n] = f"127.0.0.1:{free_port()}"
        node.config["listeners"] = (f"PLAINTEXT://127.0.0.1:{node.port},SASL://{c.sasl[n]},"
                                    f"CONTROLLER://127.0.0.1:{c.controller_ports[n]}")
        node.config["listener.security.protocol.map"] = "PLAINTEXT:PLAINTEXT,SASL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT"
        add_scram_credentials(node.data_dir, ['SCRAM-SHA-256=[name="admin",password="admin-secret"]'])
    with running(c) as c:
        yield c


def admin(c: Cluster, n: int) -> AdminClient:
    """The super user (ANONYMOUS) on node n's PLAINTEXT listener."""
    return AdminClient({"bootstrap.servers": c.nodes[n].bootstrap})


def as_user(c: Cluster, n: int, user: str) -> AdminClient:
    return AdminClient({"bootstrap.servers": c.sasl[n], "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": user,
                        "sasl.password": {**USERS, **ADMIN}[user]})


def may_describe_broker(c: Cluster, n: int, user: str) -> bool | None:
    """DescribeConfigs of BROKER "<n>" as `user`, answered by node n: True (allowed), False
    (CLUSTER_AUTHORIZATION_FAILED), None (no answer yet: e.g. a restarted node still replaying the log,
    where the user cannot log in yet)."""
    res = ConfigResource(ResourceType.BROKER, str(n))
    client = as_user(c, n, user)  # held: a collected client fails its futures
    try:
        client.describe_configs([res], request_timeout=3)[res].result(5)
        return True
    except KafkaException as exc:
        if exc.args[0].name() == "CLUSTER_AUTHORIZATION_FAILED":
            return False
        return None


def cluster_acl(user: str) -> AclBinding:
    return AclBinding(ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, f"User:{user}", "*",
                      AclOperation.DESCRIBE_CONFIGS, AclPermissionType.ALLOW)


def broker_config(c: Cluster, n: int, name: str) -> tuple[str | None, int] | None:
    res = ConfigResource(ResourceType.BROKER, str(n))
    client = admin(c, n)
    entry = client.describe_configs([res], request_timeout=10)[res].result(15).get(name)
    return None if entry is None else (entry.value, getattr(entry.source, "value", entry.source))


def test_acls_scram_and_broker_configs_are_cluster_wide_and_survive_kill_9(cluster):
    c = cluster
    a1 = admin(c, 1)
    wait_until(lambda: len(a1.list_topics(timeout=5).brokers) == 3, timeout=20, what="three brokers")
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096)
    done = a1.alter_user_scram_credentials([UserScramCredentialUpsertion(u, info, p.encode())
                                            for u, p in USERS.items()])
    for f in done.values():
        f.result(30)
    for binding, f in a1.create_acls([cluster_acl("alice"), cluster_acl("bob")], request_timeout=30).items():
        f.result(30)

    # the controller validates as Kafka's AclControlManager (the answer comes back through the broker)
    bad = AclBinding(ResourceType.BROKER, "not-the-cluster", ResourcePatternType.LITERAL, "User:alice", "*",
                     AclOperation.ALTER, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as refused:
        a1.create_acls([bad], request_timeout=30)[bad].result(30)
    assert refused.value.args[0].name() == "INVALID_REQUEST"
    assert "The only valid name for the CLUSTER resource is kafka-cluster" in refused.value.args[0].str()

    # the users log in on the other nodes (credentials replicated) and the ACLs allow them there
    for n in (2, 3):
        wait_until(lambda n=n: may_describe_broker(c, n, "alice") is True and may_describe_broker(c, n, "bob") is True,
                   timeout=15, what=f"alice and bob allowed on node {n}")

    # bob's ACL deleted through node 3 by the formatted super user (its credential went into the log
    # once, from the first active controller's data dir): node 1 refuses bob, still allows alice
    flt = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:bob", None, AclOperation.ANY,
                           AclPermissionType.ANY)
    a3 = as_user(c, 3, "admin")
    deleted = a3.delete_acls([flt], request_timeout=30)[flt].result(30)
    assert [b.principal for b in deleted] == ["User:bob"]
    wait_until(lambda: may_describe_broker(c, 1, "bob") is False, timeout=15, what="bob refused on node 1")
    assert may_describe_broker(c, 1, "alice") is True

    # a cluster-default dynamic broker config set through node 2 (raw: librdkafka refuses the "" resource)
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    req = IncrementalAlterConfigsRequest(resources=[R(resource_type=4, resource_name="", configs=[
        R.AlterableConfig(name="log.retention.ms", config_operation=0, value="7200000")])], validate_only=False)
    with RawClient(c.nodes[2].bootstrap) as raw:
        resp = raw.request(req, 1, IncrementalAlterConfigsResponse)
    assert [(r.error_code, r.resource_name) for r in resp.responses] == [(0, "")]
    DYNAMIC_DEFAULT = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
    wait_until(lambda: broker_config(c, 1, "log.retention.ms") == ("7200000", DYNAMIC_DEFAULT), timeout=15,
               what="the default on node 1")

    # a per-broker config (sent to broker 3 itself) is broker 3's only
    res3 = ConfigResource(ResourceType.BROKER, "3", incremental_configs=[
        ConfigEntry("message.max.bytes", "2000000", incremental_operation=AlterConfigOpType.SET)])
    a1.incremental_alter_configs([res3], request_timeout=30)[res3].result(30)
    assert broker_config(c, 3, "message.max.bytes") == ("2000000", ConfigSource.DYNAMIC_BROKER_CONFIG.value)
    assert broker_config(c, 1, "message.max.bytes")[1] != ConfigSource.DYNAMIC_BROKER_CONFIG.value

    # kill -9 a node and start it again: the replayed log still holds all of it
    c.kill(2)
    before = len(c.nodes[2].log_path.read_text(errors="replace"))
    c.restart(2)
    wait_until(lambda: may_describe_broker(c, 2, "alice") is True, timeout=30, what="alice allowed on node 2 again")
    # logins wait until the restarted node has replayed the credentials: none of them was refused
    assert "authentication of" not in c.nodes[2].log_path.read_text(errors="replace")[before:]
    assert may_describe_broker(c, 2, "bob") is False
    assert broker_config(c, 2, "log.retention.ms") == ("7200000", DYNAMIC_DEFAULT)
    a2 = admin(c, 2)
    described = a2.describe_user_scram_credentials(["alice", "bob"]).values()
    assert all(d.result(15).scram_credential_infos[0].iterations == 4096 for d in described)
    for n in c.ids:
        assert "Traceback" not in c.nodes[n].log_text(), n
