"""Everything of issue 15 at once, configured as a production Kafka would be: a SASL_SSL listener
(SCRAM-SHA-512 over TLS), StandardAuthorizer with no access by default, a super user `admin` created
before the first start (`storage format --add-scram`), application users created at run time with
AlterUserScramCredentials and given exactly the ACLs their role needs. Then the exactly-once pipeline
(consume, transform, produce in transactions, offsets committed in the transaction, one transaction
aborted) runs with stock clients and its output is read exactly once, read_committed, by another user
through the Java client. Unauthenticated and unauthorized clients get nothing. Same test on the Apache
Kafka oracle (`--broker=kafka`); minikafka also after kill -9.
"""
from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                   ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)

from tests.conftest import ROOT, BrokerProcess, broker_kind, free_port
from tests.support.helpers import wait_until
from tests.support.sasl_helpers import format_scram
from tests.support.tls_certs import Pki

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
ADMIN_PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
                    'password="admin-secret" user_admin="admin-secret";')
PLAIN_USERS_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required user_dave="dave-secret";'
MECHANISM = "SCRAM-SHA-512"


def secure_config(pki: Pki) -> dict[str, str]:
    """The broker's security keys (Kafka's own), for the SECURE listener."""
    return {
        "listener.name.secure.ssl.keystore.type": "PEM",
        "listener.name.secure.ssl.keystore.location": pki.path("server.pem"),
        "listener.name.secure.sasl.enabled.mechanisms": "SCRAM-SHA-512,SCRAM-SHA-256,PLAIN",
        "listener.name.secure.plain.sasl.jaas.config": PLAIN_USERS_JAAS,
        "listener.name.secure.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
        "listener.name.secure.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
        "authorizer.class.name": AUTHORIZER,
        "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "false",
    }


class SecureBroker:
    """minikafka, or the Kafka lab, with PLAINTEXT (no rights) and SECURE (SASL_SSL) listeners."""

    def __init__(self, kind: str, work: Path, pki: Pki) -> None:
        self.kind = kind
        config = secure_config(pki)
        users = ["SCRAM-SHA-512=[name=admin,password=admin-secret]"]
        if kind == "kafka":
            sys.path.insert(0, str(ROOT))
            from scripts.apache_kafka import KafkaBroker

            class Lab(KafkaBroker):
                def properties(self, overrides=None):
                    props = super().properties(overrides)
                    # Kafka's own inter-broker and controller connections authenticate as the super user
                    internal = self.listener_ports.setdefault("INTERNAL", free_port())
                    props["listeners"] += f",INTERNAL://127.0.0.1:{internal}"
                    props["advertised.listeners"] += f",INTERNAL://127.0.0.1:{internal}"
                    props["listener.security.protocol.map"] = props["listener.security.protocol.map"].replace(
                        "CONTROLLER:PLAINTEXT", "CONTROLLER:SASL_PLAINTEXT") + ",INTERNAL:SASL_PLAINTEXT"
                    props.update({"inter.broker.listener.name": "INTERNAL",
                                  "sasl.enabled.mechanisms": "PLAIN",
                                  "sasl.mechanism.inter.broker.protocol": "PLAIN",
                                  "sasl.mechanism.controller.protocol": "PLAIN",
                                  "listener.name.internal.plain.sasl.jaas.config": ADMIN_PLAIN_JAAS,
                                  "listener.name.controller.plain.sasl.jaas.config": ADMIN_PLAIN_JAAS})
                    return props

            self.lab = Lab(work_dir=work / "kafka")
            self.lab.start(overrides=config, extra_listeners={"SECURE": "SASL_SSL"}, timeout=180,
                           format_args=[a for u in users for a in ("--add-scram", u)])
            self.secure = self.lab.bootstrap_for("SECURE")
            self.plain = self.lab.bootstrap
        else:
            data = work / "data"
            done = format_scram(data, users)
            assert done.returncode == 0, done.stderr
            port, secure = free_port(), free_port()
            config.update({"listeners": f"PLAINTEXT://127.0.0.1:{port},SECURE://127.0.0.1:{secure}",
                           "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SECURE:SASL_SSL",
                           "group.initial.rebalance.delay.ms": "0"})
            self.proc = BrokerProcess(data, config, port=port).start()
            self.secure, self.plain = f"127.0.0.1:{secure}", f"127.0.0.1:{port}"

    def stop(self) -> None:
        if self.kind == "kafka":
            self.lab.stop()
            self.lab.cleanup()
        else:
            assert self.proc.stop() == 0
            assert "Traceback" not in self.proc.log_text()


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    return Pki(tmp_path_factory.mktemp("pki"))


@pytest.fixture(scope="module")
def broker(request, pki, tmp_path_factory):
    kind = broker_kind(request.config)
    if kind not in ("minikafka", "kafka"):
        pytest.skip("needs a broker this test configures")
    b = SecureBroker(kind, tmp_path_factory.mktemp("secure"), pki)
    yield b
    b.stop()


def client(b: SecureBroker, pki: Pki, user: str, password: str, mechanism: str = MECHANISM, **extra) -> dict:
    return {"bootstrap.servers": b.secure, "security.protocol": "SASL_SSL", "ssl.ca.location": pki.path("ca.pem"),
            "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password, **extra}


@pytest.mark.parametrize("mechanism, user, password", [("PLAIN", "dave", "dave-secret"),
                                                       ("SCRAM-SHA-256", "erin", "erin-secret"),
                                                       ("SCRAM-SHA-512", "admin", "admin-secret")])
def test_each_mechanism_over_sasl_ssl_right_and_wrong_password(broker, pki, mechanism, user, password):
    if mechanism == "SCRAM-SHA-256":  # a SCRAM-SHA-256 credential made by the admin at run time
        admin = AdminClient(client(broker, pki, "admin", "admin-secret"))
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, info, password.encode())])[user].result(30)
    ok = AdminClient(client(broker, pki, user, password, mechanism))
    ok.list_topics(timeout=30)  # authenticated over TLS (listing needs no ACL)
    errors: list = []
    bad = AdminClient(client(broker, pki, user, password + "-wrong", mechanism, error_cb=errors.append))
    with pytest.raises(KafkaException):
        bad.list_topics(timeout=5)
    def reported() -> list:
        bad.poll(0.2)  # error callbacks are served from poll()
        return errors
    wait_until(reported, timeout=15, what="the error callback")
    assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors


def acl(rtype: ResourceType, name: str, principal: str, op: AclOperation) -> AclBinding:
    return AclBinding(rtype, name, ResourcePatternType.LITERAL, principal, "*", op, AclPermissionType.ALLOW)


def consume_all(conf: dict, topic: str, n: int, timeout: float = 60) -> list[bytes]:
    c = Consumer({**conf, "enable.auto.commit": False, "isolation.level": "read_committed"})
    c.assign([TopicPartition(topic, 0, 0)])
    out: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(out) < n and time.monotonic() < deadline:
        out += [m.value() for m in c.consume(100, 0.5) if not m.error()]
    extra = [m.value() for m in c.consume(100, 1.0) if not m.error()]  # nothing beyond the committed ones
    c.close()
    return out + extra


def test_exactly_once_pipeline_over_sasl_ssl_with_acls(broker, pki, tmp_path):
    run = uuid.uuid4().hex[:8]
    src, dst, group, txn = f"orders-{run}", f"totals-{run}", f"pipeline-{run}", f"pipeline-tx-{run}"
    admin_conf = client(broker, pki, "admin", "admin-secret")
    admin = AdminClient(admin_conf)
    # application users, created by the super user at run time
    for user, password in (("alice", "alice-secret"), ("bob", "bob-secret")):
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
        admin.alter_user_scram_credentials([UserScramCredentialUpsertion(user, info, password.encode())])[user].result(30)
    for f in admin.create_topics([NewTopic(src, 1, 1), NewTopic(dst, 1, 1)]).values():
        f.result(30)
    # alice runs the pipeline, bob reads its output: exactly the ACLs their roles need
    bindings = [acl(ResourceType.TOPIC, src, "User:alice", AclOperation.READ),
                acl(ResourceType.GROUP, group, "User:alice", AclOperation.READ),
                acl(ResourceType.TOPIC, dst, "User:alice", AclOperation.WRITE),
                acl(ResourceType.TRANSACTIONAL_ID, txn, "User:alice", AclOperation.WRITE),
                acl(ResourceType.TOPIC, dst, "User:bob", AclOperation.READ),
                acl(ResourceType.GROUP, f"reader-{run}", "User:bob", AclOperation.READ)]
    for f in admin.create_acls(bindings).values():
        f.result(30)
    wait_until(lambda: len(admin.describe_acls(_filter()).result(30)) >= len(bindings), timeout=30,
               what="ACLs visible")

    seed = Producer({**admin_conf, "enable.idempotence": True})
    for i in range(20):
        seed.produce(src, value=f"{i}".encode())
    assert seed.flush(30) == 0

    alice = client(broker, pki, "alice", "alice-secret")
    consumer = Consumer({**alice, "group.id": group, "enable.auto.commit": False, "auto.offset.reset": "earliest",
                         "isolation.level": "read_committed"})
    consumer.subscribe([src])
    producer = Producer({**alice, "transactional.id": txn, "linger.ms": 0})
    producer.init_transactions(30)
    got: list = []
    wait_until(lambda: got.extend(m for m in consumer.consume(20, 0.5) if not m.error()) or len(got) >= 20,
               timeout=60, what="the input records")
    assert [int(m.value()) for m in got] == list(range(20))
    # an aborted attempt: its output must never be seen
    producer.begin_transaction()
    for m in got[:10]:
        producer.produce(dst, value=b"ABORTED-" + m.value())
    producer.abort_transaction(30)
    # two committed transactions of 10, each with its input offsets
    for chunk in (got[:10], got[10:]):
        producer.begin_transaction()
        for m in chunk:
            producer.produce(dst, value=str(int(m.value()) * 10).encode())
        last = chunk[-1]
        producer.send_offsets_to_transaction([TopicPartition(src, 0, last.offset() + 1)],
                                             consumer.consumer_group_metadata(), 30)
        producer.commit_transaction(30)
    consumer.close()

    bob = client(broker, pki, "bob", "bob-secret", **{"group.id": f"reader-{run}"})
    assert consume_all(bob, dst, 20) == [str(i * 10).encode() for i in range(20)]
    committed = admin.list_consumer_group_offsets([_group_offsets(group, src)])[group].result(30).topic_partitions
    assert [tp.offset for tp in committed] == [20]

    # the same output read by the Java client (kafka-clients 4.3) as bob, over SASL_SSL with SCRAM
    props = tmp_path / "bob.properties"
    props.write_text("security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                     "username=\"bob\" password=\"bob-secret\";\n"
                     f"ssl.truststore.type=PEM\nssl.truststore.location={pki.path('ca.pem')}\n"
                     "isolation.level=read_committed\n")
    sys.path.insert(0, str(ROOT))
    from scripts import apache_kafka as lab
    java = lab.run_tool("kafka-console-consumer", [
        "--bootstrap-server", broker.secure, "--topic", dst, "--from-beginning", "--max-messages", "20",
        "--group", f"reader-{run}", "--consumer.config", str(props), "--timeout-ms", "60000"], timeout=180)
    records = [line for line in java.stdout.splitlines() if line.strip().isdigit()]  # past the tool's notices
    assert records == [str(i * 10) for i in range(20)], java.stdout[-3000:] + java.stderr[-3000:]

    # what others may not do
    with pytest.raises(KafkaException) as refused:
        Producer({**bob, "transactional.id": txn}).init_transactions(30)  # bob has no WRITE on alice's txn id
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    anonymous = Consumer({"bootstrap.servers": broker.plain, "group.id": f"reader-{run}", "enable.auto.commit": False})
    anonymous.assign([TopicPartition(dst, 0, 0)])
    seen = anonymous.consume(10, 5.0)
    anonymous.close()
    assert not [m for m in seen if not m.error()]  # no record reaches an unauthenticated client
    errors = {m.error().code() for m in seen}
    assert errors & {KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED}, errors
    wrong_errors: list = []
    wrong = Producer(client(broker, pki, "alice", "not-her-password", **{"error_cb": wrong_errors.append}))
    wrong.produce(dst, value=b"x")
    wrong.flush(5)
    assert any(e.code() == KafkaError._AUTHENTICATION for e in wrong_errors), wrong_errors


@pytest.mark.minikafka_only  # kill -9 of the broker under test
def test_users_and_acls_survive_kill_minus_9(broker, pki):
    admin_conf = client(broker, pki, "admin", "admin-secret")
    admin = AdminClient(admin_conf)
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion("carol", info, b"carol-secret")])["carol"].result(30)
    topic = f"kept-{uuid.uuid4().hex[:8]}"
    for f in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        f.result(30)
    for f in admin.create_acls([acl(ResourceType.TOPIC, topic, "User:carol", AclOperation.WRITE)]).values():
        f.result(30)
    broker.proc.kill()
    broker.proc.start()
    p = Producer(client(broker, pki, "carol", "carol-secret"))
    p.produce(topic, value=b"after the crash")
    assert p.flush(30) == 0
    denied: list = []
    p.produce(f"other-{topic}", value=b"x", on_delivery=lambda err, msg: denied.append(err))
    p.flush(30)
    assert denied and denied[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def _filter():
    from confluent_kafka.admin import AclBindingFilter
    return AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                            AclPermissionType.ANY)


def _group_offsets(group: str, topic: str):
    from confluent_kafka import ConsumerGroupTopicPartitions
    return ConsumerGroupTopicPartitions(group, [TopicPartition(topic, 0)])
