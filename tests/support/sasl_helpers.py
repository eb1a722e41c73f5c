"""Shared by the SASL tests (tests/integration/security/test_sasl.py, test_scram_credentials.py): the broker
under test configured as a Kafka user would (Kafka's keys only): a PLAINTEXT listener and a
SASL_PLAINTEXT one with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512; the first SCRAM user `admin` created
before the first start (minikafka: `minikafka storage format --add-scram`, Kafka: `kafka-storage
format --add-scram`). With `--broker=kafka` the same tests run against Apache Kafka configured the
same way; MINIKAFKA_SASL_TEST_BROKER=PLAINTEXT_ADDR,SASL_ADDR uses a running broker so configured.
SCRAM-SHA-512 has `connections.max.reauth.ms` = REAUTH_MS (KIP-368), the other mechanisms none.
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from kafka.protocol.admin.users import (AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
                                        DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse)
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.sasl import (SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
                                 SaslHandshakeResponse)

from minikafka.broker.security.sasl.scram import ScramClient, salted_password
from minikafka.testing import MiniKafka, free_port, minikafka_command, subprocess_env
from tests.conftest import ROOT, broker_kind
from tests.support.helpers import RawClient

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
REAUTH_MS = 2000
SASL_CONFIG = {
    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
    "listener.name.sasl_plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config": SCRAM_JAAS,
    "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
    "listener.name.sasl_plaintext.scram-sha-512.connections.max.reauth.ms": str(REAUTH_MS),
}
BOOTSTRAP_USERS = ["SCRAM-SHA-256=[name=admin,password=admin-secret]",
                   "SCRAM-SHA-512=[name=admin,password=admin-secret]"]
# Kafka answers the enabled mechanisms in java.util.HashMap order, not as configured
HANDSHAKE_MECHANISMS = ["PLAIN", "SCRAM-SHA-512", "SCRAM-SHA-256"]
SCRAM_FAILED = "Authentication failed during authentication due to invalid credentials with SASL mechanism {}"


class SaslBroker:
    """The broker under test: `plain` and `sasl` bootstrap addresses; minikafka can restart/kill."""

    def __init__(self, plain: str, sasl: str, mk: MiniKafka | None = None) -> None:
        self.plain, self.sasl, self.mk = plain, sasl, mk


def format_scram(data_dir: Path, specs: list[str]) -> subprocess.CompletedProcess:
    args = [*minikafka_command(), "storage", "format", "--override", f"log.dirs={data_dir}"]
    for spec in specs:
        args += ["--add-scram", spec]
    return subprocess.run(args, capture_output=True, text=True, timeout=60, env=subprocess_env())


def start_minikafka(data_dir: Path, extra: dict[str, str] | None = None) -> SaslBroker:
    port, sasl_port = free_port(), free_port()
    config = {"listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
              **SASL_CONFIG, **(extra or {})}
    mk = MiniKafka(config=config, data_dir=data_dir, port=port)
    return SaslBroker(mk.bootstrap_servers, f"127.0.0.1:{sasl_port}", mk)


def sasl_broker_fixture(request, tmp_path_factory):
    """Body of the module-scoped `sasl_broker` fixtures."""
    kind = broker_kind(request.config)
    if kind == "kafka":
        sys.path.insert(0, str(ROOT))
        from scripts.apache_kafka import KafkaBroker
        kb = KafkaBroker()
        format_args = [a for spec in BOOTSTRAP_USERS for a in ("--add-scram", spec)]
        kb.start(overrides=SASL_CONFIG, extra_listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"},
                 format_args=format_args, timeout=120)
        yield SaslBroker(kb.bootstrap, kb.bootstrap_for("SASL_PLAINTEXT"))
        kb.stop()
        kb.cleanup()
        return
    if kind != "minikafka":
        # a running broker configured like SASL_CONFIG (with the bootstrap users), e.g. a kept oracle:
        # MINIKAFKA_SASL_TEST_BROKER=PLAINTEXT_HOST:PORT,SASL_PLAINTEXT_HOST:PORT
        addresses = os.environ.get("MINIKAFKA_SASL_TEST_BROKER", "").split(",")
        if len(addresses) != 2:
            pytest.skip("needs a broker this test run configures (minikafka or kafka)")
        yield SaslBroker(*addresses)
        return
    data_dir = tmp_path_factory.mktemp("sasl") / "data"
    done = format_scram(data_dir, BOOTSTRAP_USERS)
    assert done.returncode == 0, done.stderr
    broker = start_minikafka(data_dir)
    yield broker
    assert broker.mk is not None
    log = broker.mk.log_text(20000)
    broker.mk.close()
    assert "Traceback" not in log, log


def client_config(broker: SaslBroker, mechanism: str, user: str, password: str, **extra) -> dict:
    return {"bootstrap.servers": broker.sasl, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": mechanism,
            "sasl.username": user, "sasl.password": password, **extra}


def create_topic(broker: SaslBroker, topic: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": broker.plain})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)


def produce_consume(broker: SaslBroker, mechanism: str, user: str, password: str, n: int = 20) -> None:
    from confluent_kafka import Consumer, Producer
    topic = f"sasl-{mechanism.lower()}-{uuid.uuid4().hex[:6]}"
    create_topic(broker, topic)
    producer = Producer(client_config(broker, mechanism, user, password, **{"enable.idempotence": True}))
    errors: list = []
    for i in range(n):
        producer.produce(topic, f"v{i}".encode(), on_delivery=lambda err, msg: err and errors.append(err))
    assert producer.flush(30) == 0 and not errors, errors
    from confluent_kafka import TopicPartition
    consumer = Consumer(client_config(broker, mechanism, user, password, **{
        "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest", "enable.auto.commit": False}))
    consumer.assign([TopicPartition(topic, 0, 0)])  # no group join: no rebalance delay
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < n and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    assert got == [f"v{i}".encode() for i in range(n)]


def auth_error(broker: SaslBroker, mechanism: str, user: str, password: str, timeout: float = 15.0):
    """The error_cb error a producer with these credentials gets (None if none within `timeout`)."""
    from confluent_kafka import KafkaError, Producer
    errors: list = []
    producer = Producer(client_config(broker, mechanism, user, password, error_cb=errors.append))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        producer.poll(0.2)
        for err in errors:
            if err.code() == KafkaError._AUTHENTICATION:
                return err
    return None



# -- raw protocol -------------------------------------------------------------------------------

def handshake(client: RawClient, mechanism: str, version: int = 1):
    return client.request(SaslHandshakeRequest(mechanism=mechanism), version, SaslHandshakeResponse)


def authenticate(client: RawClient, token: bytes, version: int = 2):
    return client.request(SaslAuthenticateRequest(auth_bytes=token), version, SaslAuthenticateResponse)


def scram_login(client: RawClient, mechanism: str, user: str, password: str, version: int = 2):
    scram = ScramClient(mechanism, user, password)
    assert handshake(client, mechanism).error_code == 0
    first = authenticate(client, scram.first(), version)
    assert first.error_code == 0, first
    final = authenticate(client, scram.final(first.auth_bytes), version)
    assert final.error_code == 0, final
    assert scram.verify(final.auth_bytes)
    return final


def metadata(client: RawClient):
    return client.request(MetadataRequest(topics=[], allow_auto_topic_creation=False), 1, MetadataResponse)



Upsertion = AlterUserScramCredentialsRequest.ScramCredentialUpsertion
Deletion = AlterUserScramCredentialsRequest.ScramCredentialDeletion


def upsertion(name: str, mechanism: int, password: str, iterations: int = 4096) -> Upsertion:
    salt = os.urandom(16)
    mech = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}.get(mechanism, "SCRAM-SHA-256")
    return Upsertion(name=name, mechanism=mechanism, iterations=iterations, salt=salt,
                     salted_password=salted_password(mech, password, salt, max(iterations, 1)))


def alter(bootstrap: str, upsertions=(), deletions=()) -> dict[str, tuple[int, str | None]]:
    with RawClient(bootstrap) as c:
        resp = c.request(AlterUserScramCredentialsRequest(deletions=list(deletions), upsertions=list(upsertions)),
                         0, AlterUserScramCredentialsResponse)
    return {r.user: (r.error_code, r.error_message) for r in resp.results}


def describe(bootstrap: str, users: list[str] | None):
    with RawClient(bootstrap) as c:
        req = DescribeUserScramCredentialsRequest(
            users=None if users is None else [DescribeUserScramCredentialsRequest.UserName(name=u) for u in users])
        return c.request(req, 0, DescribeUserScramCredentialsResponse)



def lab():
    sys.path.insert(0, str(ROOT))
    from scripts import apache_kafka as lab
    return lab


def client_properties(tmp_path: Path, mechanism: str, user: str, password: str) -> Path:
    module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
    path = tmp_path / f"{user}-{mechanism}.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\n"
                    f"sasl.mechanism={mechanism}\n"
                    f"sasl.jaas.config=org.apache.kafka.common.security.{module} required "
                    f"username=\"{user}\" password=\"{password}\";\n")
    return path


