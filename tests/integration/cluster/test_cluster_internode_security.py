"""A three-node cluster whose inter-node traffic is secured (issue 16, broker/security/peer_security.py): the
CONTROLLER listener (quorum, registration, heartbeats) and the INTERNAL inter-broker listener (replica
fetchers) are SASL_SSL with SCRAM-SHA-512, clients use a separate PLAINTEXT listener. The cluster
forms, an RF-3 topic takes idempotent acks=all writes, a node killed -9 and restarted rejoins the ISR
(it replicates over SASL_SSL again); a node whose inter-broker password is wrong never rejoins the ISR
while the others go on, and its log says why."""
from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests.support.cluster_harness import Cluster, registered, running
from tests.conftest import free_port
from tests.support.helpers import RawClient, metadata_raw, wait_until
from tests.support.tls_certs import PASSWORD, Pki

pytestmark = [pytest.mark.minikafka_only, pytest.mark.serial]  # three processes with short timeouts

USER, SECRET = "broker", "broker-secret"
INTRUDER, INTRUDER_SECRET = "mallory", "mallory-secret"  # may log in to the controller listener, no more
TIMEOUTS = {"replica.lag.time.max.ms": "1500", "broker.session.timeout.ms": "2000",
            "broker.heartbeat.interval.ms": "200", "replica.fetch.wait.max.ms": "200",
            "replica.fetch.backoff.ms": "100"}


def jaas(password: str) -> str:
    return f'org.apache.kafka.common.security.scram.ScramLoginModule required username="{USER}" password="{password}";'


def plain_jaas(password: str) -> str:
    """The controller listener's PLAIN login (username/password) and its users (user_<name>)."""
    return (f'org.apache.kafka.common.security.plain.PlainLoginModule required username="{USER}" '
            f'password="{password}" user_{USER}="{SECRET}" user_{INTRUDER}="{INTRUDER_SECRET}";')


def secured_config(pki: Pki) -> dict[str, str]:
    return {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:SASL_SSL",
        "inter.broker.listener.name": "INTERNAL",
        # SCRAM between brokers; PLAIN on the controller listener, as Kafka needs it: SCRAM credentials
        # live in the metadata log, which the controllers cannot read before they have logged in
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.controller.sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "sasl.mechanism.controller.protocol": "PLAIN",
        "listener.name.internal.scram-sha-512.sasl.jaas.config": jaas(SECRET),
        "listener.name.controller.plain.sasl.jaas.config": plain_jaas(SECRET),
        # a broker-wide keystore and PEM truststore; INTERNAL has its own PKCS12 truststore (prefixed keys)
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": pki.path("server.p12"),
        "ssl.keystore.password": PASSWORD,
        "ssl.truststore.type": "PEM", "ssl.truststore.location": pki.path("ca.pem"),
        "listener.name.internal.ssl.truststore.type": "PKCS12",
        "listener.name.internal.ssl.truststore.location": pki.path("truststore.p12"),
        "listener.name.internal.ssl.truststore.password": PASSWORD,
        # Kafka's authorizer: the nodes' principal and the PLAINTEXT clients are super users
        "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "super.users": f"User:{USER};User:ANONYMOUS",
        **TIMEOUTS,
    }


@pytest.fixture(scope="module")
def cluster():
    from minikafka.broker.security.sasl.bootstrap import add_scram_credentials
    with tempfile.TemporaryDirectory() as root:
        pki = Pki(Path(root) / "pki")
        c = Cluster(Path(root), config=secured_config(pki))
        c.pki = pki  # type: ignore[attr-defined]
        for node in c.nodes.values():
            node.config["listeners"] += f",INTERNAL://127.0.0.1:{free_port()}"
            node.data_dir.mkdir(parents=True, exist_ok=True)  # the SCRAM user before the first start
            add_scram_credentials(node.data_dir, [f'SCRAM-SHA-512=[name="{USER}",password="{SECRET}"]'])
        with running(c) as c:
            yield c


def isrs(cluster: Cluster, topic: str, n: int = 1) -> dict[int, frozenset[int]]:
    """partition -> ISR as node n's Metadata answers ({} when it cannot say)."""
    try:
        with RawClient(cluster.nodes[n].bootstrap, timeout=3.0) as c:
            t = metadata_raw(c, [topic]).topics[0]
    except OSError:
        return {}
    return {} if t.error_code else {p.partition_index: frozenset(p.isr_nodes) for p in t.partitions}


def produce(cluster: Cluster, topic: str, count: int, prefix: str) -> None:
    from confluent_kafka import Producer
    errors: list = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all",
                         "message.timeout.ms": 20000})
    for i in range(count):
        producer.produce(topic, f"{prefix}-{i}".encode(), key=str(i).encode(),
                         on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(30) == 0
    assert errors == []


def test_secured_cluster_forms_replicates_and_a_killed_node_rejoins(cluster):
    wait_until(lambda: registered(cluster), timeout=30, what="three brokers registered over SASL_SSL")
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("secured", 3, 3, config={"min.insync.replicas": "2"})])["secured"].result(30)
    produce(cluster, "secured", 200, "a")
    full = frozenset(cluster.ids)
    wait_until(lambda: set(isrs(cluster, "secured").values()) == {full}, timeout=20,
               what="every partition's ISR is all three nodes (fetchers replicate over INTERNAL)")

    cluster.kill(3)
    wait_until(lambda: all(3 not in isr for isr in isrs(cluster, "secured").values()), timeout=20,
               what="node 3 leaves the ISR once killed")
    produce(cluster, "secured", 100, "b")  # acks=all with two in-sync replicas
    cluster.restart(3)
    wait_until(lambda: set(isrs(cluster, "secured").values()) == {full}, timeout=30,
               what="the restarted node 3 catches up over SASL_SSL and rejoins every ISR")
    for node in cluster.nodes.values():  # (a TLS connection cut by the kill may be logged; no login failed)
        assert "authentication as 'broker' failed" not in node.log_path.read_text(errors="replace")


def test_wrong_inter_broker_password_keeps_the_node_out_and_says_why(cluster):
    wait_until(lambda: registered(cluster), timeout=30, what="three brokers registered")
    node = cluster.nodes[2]
    node.stop()
    node.config["listener.name.internal.scram-sha-512.sasl.jaas.config"] = jaas("wrong-password")

    def log() -> str:
        return node.log_path.read_text(errors="replace")
    try:
        node.start()
        wait_until(lambda: "SASL SCRAM-SHA-512 authentication as 'broker' failed" in log(), timeout=20,
                   what="node 2 logs why its replica fetchers cannot connect")
        line = next(l for l in log().splitlines() if "authentication as 'broker' failed" in l)
        assert "listener INTERNAL" in line and "invalid credentials" in line.lower(), line
        produce(cluster, "secured", 100, "c")  # the others go on (min.insync.replicas=2)
        assert all(2 not in isr for isr in isrs(cluster, "secured").values())
        assert log().count("authentication as 'broker' failed") <= 4  # once per connection, not per retry
    finally:
        node.stop()
        node.config["listener.name.internal.scram-sha-512.sasl.jaas.config"] = jaas(SECRET)
        node.start()
    full = frozenset(cluster.ids)
    wait_until(lambda: set(isrs(cluster, "secured").values()) == {full}, timeout=30,
               what="with the right password node 2 rejoins every ISR")


def test_a_client_side_that_cannot_be_built_fails_start_up(tmp_path):
    """sasl.mechanism.inter.broker.protocol left at Kafka's default (GSSAPI) on a SASL_SSL inter-broker
    listener: exit code 2 and one clear line, before any listener opens."""
    from minikafka.testing import MiniKafka, MiniKafkaError
    pki = Pki(tmp_path / "pki")
    port, internal, controller = free_port(), free_port(), free_port()
    config = {k: v for k, v in secured_config(pki).items() if k != "sasl.mechanism.inter.broker.protocol"}
    config.update({"node.id": "1", "process.roles": "broker,controller", "controller.listener.names": "CONTROLLER",
                   "controller.quorum.voters": f"1@127.0.0.1:{controller},2@127.0.0.1:{free_port()},"
                                               f"3@127.0.0.1:{free_port()}",
                   "listeners": f"PLAINTEXT://127.0.0.1:{port},INTERNAL://127.0.0.1:{internal},"
                                f"CONTROLLER://127.0.0.1:{controller}"})
    kafka = MiniKafka(config=config, data_dir=tmp_path / "data", port=port, start=False, startup_timeout=20)
    try:
        with pytest.raises(MiniKafkaError, match="exited with code 2"):
            kafka.start()
        assert ("minikafka: cannot connect to the other nodes: sasl.mechanism.inter.broker.protocol must be "
                "included in sasl.enabled.mechanisms when SASL is used for inter-broker communication") in kafka.log_text()
        assert "GSSAPI (Kafka's default)" in kafka.log_text() and "listening on" not in kafka.log_text()
    finally:
        kafka.close()


def test_the_controller_listener_authorizes_what_it_is_asked(cluster):
    """Kafka's ControllerApis: a principal that may log in to the controller listener but is no super
    user and holds no ACL gets CLUSTER_AUTHORIZATION_FAILED for the broker-to-controller RPCs and
    DescribeQuorum, TOPIC_AUTHORIZATION_FAILED for a topic creation; the nodes' own principal is served."""
    import asyncio
    import ssl

    from kafka.protocol.admin import (CreateTopicsRequest, CreateTopicsResponse, DescribeQuorumRequest,
                                      DescribeQuorumResponse)

    from minikafka.protocol.peer_client import PeerClient, PeerSecurity
    from minikafka.protocol.messages import (AllocateProducerIdsRequest, AllocateProducerIdsResponse,
                                             BrokerHeartbeatRequest, BrokerHeartbeatResponse)
    wait_until(lambda: registered(cluster), timeout=30, what="three brokers registered")
    tls = ssl.create_default_context(cafile=cluster.pki.path("ca.pem"))
    Q = DescribeQuorumRequest.TopicData

    async def ask(user: str, password: str) -> dict[str, int]:
        client = PeerClient(1, "127.0.0.1", cluster.controller_ports[1], f"{user}-client", 10.0,
                            security=PeerSecurity("CONTROLLER", "SASL_SSL", tls, "PLAIN", user, password))
        try:
            heartbeat = await client.request(BrokerHeartbeatRequest(
                broker_id=1, broker_epoch=-1, current_metadata_offset=0, want_fence=False, want_shut_down=False,
                offline_log_dirs=[]), 1, BrokerHeartbeatResponse)
            ids = await client.request(AllocateProducerIdsRequest(broker_id=1, broker_epoch=-1), 0,
                                       AllocateProducerIdsResponse)
            quorum = await client.request(DescribeQuorumRequest(topics=[Q(
                topic_name="__cluster_metadata", partitions=[Q.PartitionData(partition_index=0)])]), 2,
                DescribeQuorumResponse)
            topic = await client.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
                name=f"by-{user}", num_partitions=1, replication_factor=1, assignments=[], configs=[])],
                timeout_ms=10000, validate_only=True), 7, CreateTopicsResponse)
        finally:
            client.close()
        return {"heartbeat": heartbeat.error_code, "producer ids": ids.error_code,
                "describe quorum": quorum.error_code, "create topic": topic.topics[0].error_code}

    denied = asyncio.run(ask(INTRUDER, INTRUDER_SECRET))
    assert denied == {"heartbeat": 31, "producer ids": 31, "describe quorum": 31, "create topic": 29}, denied
    served = asyncio.run(ask(USER, SECRET))
    assert served["describe quorum"] == 0 and 31 not in served.values() and 29 not in served.values(), served
