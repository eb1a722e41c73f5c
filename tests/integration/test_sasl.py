"""SASL on a SASL_PLAINTEXT listener with real clients: confluent-kafka (librdkafka) with PLAIN,
SCRAM-SHA-256 and SCRAM-SHA-512, the Java client (Kafka's console tools), Kafka's kafka-configs for
SCRAM users, and raw protocol for what no client sends (requests before authentication, SaslHandshake
v0 with raw tokens, unsupported mechanisms, AlterUserScramCredentials' per-user errors).

One broker per module, configured as a Kafka user would (Kafka's keys only): a PLAINTEXT listener and
a SASL_PLAINTEXT one; the first SCRAM user `admin` created before the first start (minikafka:
`minikafka storage format --add-scram`, Kafka: `kafka-storage format --add-scram`). With
`--broker=kafka` the same tests run against Apache Kafka configured the same way.
SCRAM-SHA-512 has `connections.max.reauth.ms` = REAUTH_MS (KIP-368), the other mechanisms none.
"""
from __future__ import annotations

import base64
import os
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from kafka.protocol.admin.users import (AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
                                        DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse)
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.sasl import (SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
                                 SaslHandshakeResponse)

from minikafka.broker.sasl.scram import ScramClient, salted_password
from minikafka.testing import MiniKafka, free_port
from tests.conftest import ROOT, broker_kind
from tests.helpers import RawClient

pytestmark = pytest.mark.timeout(180)

PLAIN_JAAS = ('org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" '
              'password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";')
SCRAM_JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
REAUTH_MS = 3000
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
    args = [sys.executable, "-m", "minikafka.broker.cli", "storage", "format", "--override", f"log.dirs={data_dir}"]
    for spec in specs:
        args += ["--add-scram", spec]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.run(args, capture_output=True, text=True, timeout=60, env=env)


def start_minikafka(data_dir: Path, extra: dict[str, str] | None = None) -> SaslBroker:
    port, sasl_port = free_port(), free_port()
    config = {"listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
              **SASL_CONFIG, **(extra or {})}
    mk = MiniKafka(config=config, data_dir=data_dir, port=port)
    return SaslBroker(mk.bootstrap_servers, f"127.0.0.1:{sasl_port}", mk)


@pytest.fixture(scope="module")
def sasl_broker(request, tmp_path_factory):
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
    consumer = Consumer(client_config(broker, mechanism, user, password, **{
        "group.id": f"g-{uuid.uuid4().hex[:6]}", "auto.offset.reset": "earliest", "enable.auto.commit": False}))
    consumer.subscribe([topic])
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


@pytest.mark.parametrize("mechanism,user,password", [
    ("PLAIN", "alice", "alice-secret"), ("SCRAM-SHA-256", "admin", "admin-secret"),
    ("SCRAM-SHA-512", "admin", "admin-secret")])
def test_right_credentials_produce_and_consume(sasl_broker, mechanism, user, password):
    produce_consume(sasl_broker, mechanism, user, password)


@pytest.mark.parametrize("mechanism,user,password,message", [
    ("PLAIN", "alice", "wrong", "Authentication failed: Invalid username or password"),
    ("PLAIN", "nobody", "alice-secret", "Authentication failed: Invalid username or password"),
    ("SCRAM-SHA-256", "admin", "wrong", SCRAM_FAILED.format("SCRAM-SHA-256")),
    ("SCRAM-SHA-512", "nobody", "admin-secret", SCRAM_FAILED.format("SCRAM-SHA-512")),
    ("SCRAM-SHA-256", "alice", "alice-secret", SCRAM_FAILED.format("SCRAM-SHA-256")),  # a PLAIN-only user
])
def test_wrong_credentials_fail_with_the_clients_authentication_error(sasl_broker, mechanism, user, password, message):
    err = auth_error(sasl_broker, mechanism, user, password)
    assert err is not None, "no authentication error reported"
    assert message in err.str()


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


def test_handshake_answers_the_enabled_mechanisms(sasl_broker):
    with RawClient(sasl_broker.sasl) as c:
        assert c.request(ApiVersionsRequest(), 0, ApiVersionsResponse).error_code == 0
        resp = handshake(c, "PLAIN")
        assert resp.error_code == 0
        assert resp.mechanisms == HANDSHAKE_MECHANISMS
        done = authenticate(c, b"\x00alice\x00alice-secret", 1)
        assert (done.error_code, done.error_message, done.auth_bytes, done.session_lifetime_ms) == (0, "", b"", 0)
        assert len(metadata(c).brokers) == 1


def test_unsupported_mechanism_gets_the_enabled_list_then_close(sasl_broker):
    with RawClient(sasl_broker.sasl) as c:
        resp = handshake(c, "GSSAPI")
        assert resp.error_code == 33  # UNSUPPORTED_SASL_MECHANISM
        assert resp.mechanisms == HANDSHAKE_MECHANISMS
        assert c.closed_by_peer()


@pytest.mark.parametrize("after", ["nothing", "api_versions", "handshake"])
def test_requests_before_authentication_are_never_processed(request, sasl_broker, after):
    broker_kind_is_kafka = broker_kind(request.config) != "minikafka"
    topic = f"unauth-{uuid.uuid4().hex[:6]}"
    with RawClient(sasl_broker.sasl) as c:
        if after == "api_versions":
            assert c.request(ApiVersionsRequest(), 2, ApiVersionsResponse).error_code == 0
        elif after == "handshake":
            assert handshake(c, "PLAIN").error_code == 0
        # auto-creation would make the topic if this Metadata were processed
        c.send(MetadataRequest(topics=[topic], allow_auto_topic_creation=True), 4)
        if after == "handshake" and broker_kind_is_kafka:
            # Kafka answers the request's error response (ILLEGAL_SASL_STATE) before closing; minikafka
            # closes without answering
            assert MetadataResponse.decode(c.recv_frame(), version=4, header=True).topics[0].error_code == 34
        assert c.closed_by_peer()
    with RawClient(sasl_broker.plain) as c:
        names = [t.name for t in c.request(MetadataRequest(topics=None), 1, MetadataResponse).topics]
        assert topic not in names


def test_garbage_before_authentication_closes(sasl_broker):
    with RawClient(sasl_broker.sasl) as c:
        c.send_bytes(b"\x00\x00\x00\x08" + b"\x60\x06garbag")
        assert c.closed_by_peer()


def test_failed_authentication_is_answered_late_then_closed(sasl_broker):
    with RawClient(sasl_broker.sasl) as c:
        assert handshake(c, "PLAIN").error_code == 0
        t0 = time.monotonic()
        resp = authenticate(c, b"\x00alice\x00wrong", 2)
        elapsed = time.monotonic() - t0
        assert resp.error_code == 58  # SASL_AUTHENTICATION_FAILED
        assert resp.error_message == "Authentication failed: Invalid username or password"
        assert elapsed >= 0.09, elapsed  # connection.failed.authentication.delay.ms = 100
        assert c.closed_by_peer()


def test_scram_failure_message_hides_whether_the_user_exists(sasl_broker):
    for user in ("admin", "no-such-user"):
        with RawClient(sasl_broker.sasl) as c:
            scram = ScramClient("SCRAM-SHA-256", user, "wrong")
            assert handshake(c, "SCRAM-SHA-256").error_code == 0
            first = authenticate(c, scram.first())
            if user == "admin":
                assert first.error_code == 0
                first = authenticate(c, scram.final(first.auth_bytes))
            assert (first.error_code, first.error_message) == (58, SCRAM_FAILED.format("SCRAM-SHA-256"))
            assert c.closed_by_peer()


def test_handshake_v0_then_raw_tokens(sasl_broker):
    """SaslHandshake v0: the tokens that follow are bare size-prefixed SASL bytes (pre-KIP-152 clients)."""
    with RawClient(sasl_broker.sasl) as c:
        assert handshake(c, "PLAIN", version=0).error_code == 0
        token = b"\x00alice\x00alice-secret"
        c.send_bytes(len(token).to_bytes(4, "big") + token)
        assert c.recv_frame() == b""  # PLAIN's empty answer, size-prefixed
        assert len(metadata(c).brokers) == 1


def test_handshake_v0_raw_scram(sasl_broker):
    with RawClient(sasl_broker.sasl) as c:
        assert handshake(c, "SCRAM-SHA-256", version=0).error_code == 0
        scram = ScramClient("SCRAM-SHA-256", "admin", "admin-secret")
        first = scram.first()
        c.send_bytes(len(first).to_bytes(4, "big") + first)
        final = scram.final(c.recv_frame())
        c.send_bytes(len(final).to_bytes(4, "big") + final)
        assert scram.verify(c.recv_frame())
        assert len(metadata(c).brokers) == 1


def test_sasl_requests_after_authentication_or_on_plaintext_get_illegal_sasl_state(sasl_broker):
    for bootstrap in (sasl_broker.plain, sasl_broker.sasl):
        with RawClient(bootstrap) as c:
            if bootstrap == sasl_broker.sasl:
                scram_login(c, "SCRAM-SHA-256", "admin", "admin-secret")
            assert handshake(c, "PLAIN").error_code == 34  # ILLEGAL_SASL_STATE
            resp = authenticate(c, b"\x00alice\x00alice-secret", 1)
            assert resp.error_code == 34
            assert len(metadata(c).brokers) == 1  # the connection stays usable


def test_oversized_frame_before_authentication_is_refused(sasl_broker):
    with RawClient(sasl_broker.sasl) as c:
        c.send_bytes((600_000).to_bytes(4, "big") + b"\x00" * 1024)  # > sasl.server.max.receive.size
        assert c.closed_by_peer()


# -- KIP-368 re-authentication (SCRAM-SHA-512 has connections.max.reauth.ms) -------------------------

def test_session_lifetime_and_expiry_closes_the_connection(sasl_broker):
    with RawClient(sasl_broker.sasl) as c:
        final = scram_login(c, "SCRAM-SHA-512", "admin", "admin-secret")
        assert final.session_lifetime_ms == REAUTH_MS
        assert len(metadata(c).brokers) == 1
        time.sleep(REAUTH_MS / 1000 + 0.3)
        c.send(MetadataRequest(topics=[], allow_auto_topic_creation=False), 1)
        assert c.closed_by_peer()


def test_reauthentication_on_the_same_connection(sasl_broker):
    with RawClient(sasl_broker.sasl) as c:
        scram_login(c, "SCRAM-SHA-512", "admin", "admin-secret")
        time.sleep(1.1)  # at most one re-authentication per second
        final = scram_login(c, "SCRAM-SHA-512", "admin", "admin-secret")
        assert final.session_lifetime_ms == REAUTH_MS
        time.sleep(REAUTH_MS / 1000 - 1.0)  # past the first session's end, within the second's
        assert len(metadata(c).brokers) == 1


def test_reauthentication_cannot_change_the_principal(sasl_broker):
    with RawClient(sasl_broker.sasl) as c:
        scram_login(c, "SCRAM-SHA-512", "admin", "admin-secret")
        time.sleep(1.1)
        assert handshake(c, "SCRAM-SHA-512").error_code == 0
        bob = ScramClient("SCRAM-SHA-512", "reauth-other", "other-secret")
        resp = authenticate(c, bob.first())
        assert resp.error_code == 58  # unknown user: refused before any principal
        assert c.closed_by_peer()


def test_long_lived_producer_keeps_working_across_reauthentication(sasl_broker):
    from confluent_kafka import Producer
    topic = f"reauth-{uuid.uuid4().hex[:6]}"
    create_topic(sasl_broker, topic)
    errors: list = []
    producer = Producer(client_config(sasl_broker, "SCRAM-SHA-512", "admin", "admin-secret",
                                      error_cb=errors.append, **{"enable.idempotence": True}))
    delivered: list = []
    deadline = time.monotonic() + 2.5 * REAUTH_MS / 1000
    while time.monotonic() < deadline:
        producer.produce(topic, b"x", on_delivery=lambda err, msg: delivered.append(err))
        producer.poll(0.1)
    assert producer.flush(30) == 0
    assert delivered and all(err is None for err in delivered), [e for e in delivered if e][:3]
    assert not [e for e in errors if "uthenticat" in e.str()], errors


# -- SCRAM credentials: AlterUserScramCredentials / DescribeUserScramCredentials ------------------

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


def test_alter_and_describe_user_scram_credentials(sasl_broker):
    u = f"carol-{uuid.uuid4().hex[:6]}"
    assert alter(sasl_broker.plain, [upsertion(u, 1, "carol-secret", 8192)]) == {u: (0, None)}
    assert alter(sasl_broker.plain, [upsertion(u, 2, "carol-secret")]) == {u: (0, None)}
    resp = describe(sasl_broker.plain, [u])
    assert (resp.error_code, resp.error_message) == (0, "")
    [result] = resp.results
    assert (result.user, result.error_code, result.error_message) == (u, 0, "")
    assert sorted((i.mechanism, i.iterations) for i in result.credential_infos) == [(1, 8192), (2, 4096)]
    all_users = {r.user for r in describe(sasl_broker.plain, None).results}
    assert {"admin", u} <= all_users
    produce_consume(sasl_broker, "SCRAM-SHA-256", u, "carol-secret", n=3)
    assert alter(sasl_broker.plain, deletions=[Deletion(name=u, mechanism=1)]) == {u: (0, None)}
    err = auth_error(sasl_broker, "SCRAM-SHA-256", u, "carol-secret")
    assert err is not None and SCRAM_FAILED.format("SCRAM-SHA-256") in err.str()
    assert alter(sasl_broker.plain, deletions=[Deletion(name=u, mechanism=2)]) == {u: (0, None)}
    [gone] = describe(sasl_broker.plain, [u]).results
    assert (gone.error_code, gone.error_message) == (
        91, f"Attempt to describe a user credential that does not exist: {u}")


def test_alter_user_scram_credentials_errors(sasl_broker):
    tag = uuid.uuid4().hex[:6]
    got = alter(sasl_broker.plain,
                upsertions=[upsertion(f"few-{tag}", 1, "pw", 4095), upsertion(f"many-{tag}", 2, "pw", 16385),
                            upsertion(f"mech-{tag}", 3, "pw"), upsertion("", 1, "pw"),
                            upsertion(f"twice-{tag}", 1, "pw"), upsertion(f"twice-{tag}", 2, "pw"),
                            upsertion(f"both-{tag}", 1, "pw")],
                deletions=[Deletion(name=f"missing-{tag}", mechanism=1), Deletion(name=f"both-{tag}", mechanism=1)])
    assert got == {
        f"few-{tag}": (93, "Too few iterations"),
        f"many-{tag}": (93, "Too many iterations"),
        f"mech-{tag}": (33, "Unknown SCRAM mechanism"),
        "": (93, "Username must not be empty"),
        f"twice-{tag}": (92, "A user credential cannot be altered twice in the same request"),
        f"missing-{tag}": (91, "Attempt to delete a user credential that does not exist"),
        f"both-{tag}": (91, "Attempt to delete a user credential that does not exist"),
    }
    resp = describe(sasl_broker.plain, [f"twice-{tag}", f"twice-{tag}", f"few-{tag}"])
    by_user = {r.user: (r.error_code, r.error_message) for r in resp.results}
    assert by_user == {
        f"twice-{tag}": (92, f"Cannot describe SCRAM credentials for the same user twice in a single request: twice-{tag}"),
        f"few-{tag}": (91, f"Attempt to describe a user credential that does not exist: few-{tag}")}


# -- Kafka's tools and the Java client -----------------------------------------------------------------

def _lab():
    sys.path.insert(0, str(ROOT))
    from scripts import apache_kafka as lab
    return lab


def _client_properties(tmp_path: Path, mechanism: str, user: str, password: str) -> Path:
    module = "plain.PlainLoginModule" if mechanism == "PLAIN" else "scram.ScramLoginModule"
    path = tmp_path / f"{user}-{mechanism}.properties"
    path.write_text("security.protocol=SASL_PLAINTEXT\n"
                    f"sasl.mechanism={mechanism}\n"
                    f"sasl.jaas.config=org.apache.kafka.common.security.{module} required "
                    f"username=\"{user}\" password=\"{password}\";\n")
    return path


def test_kafka_configs_adds_a_scram_user_who_then_logs_in(sasl_broker, tmp_path):
    lab = _lab()
    admin = _client_properties(tmp_path, "SCRAM-SHA-256", "admin", "admin-secret")
    bob = f"bob-{uuid.uuid4().hex[:6]}"
    base = ["--bootstrap-server", sasl_broker.sasl, "--command-config", str(admin), "--entity-type", "users"]
    # two mechanisms of one user in one request: DUPLICATE_RESOURCE, as Kafka 4.3 answers it
    done = lab.run_tool("kafka-configs", [*base, "--alter", "--entity-name", bob, "--add-config",
                                          "SCRAM-SHA-256=[iterations=8192,password=bob-secret],"
                                          "SCRAM-SHA-512=[password=bob-secret]"], timeout=120)
    assert done.returncode != 0 and "A user credential cannot be altered twice in the same request" in done.stderr
    for mechanism in ("SCRAM-SHA-256=[iterations=8192,password=bob-secret]", "SCRAM-SHA-512=[password=bob-secret]"):
        done = lab.run_tool("kafka-configs", [*base, "--alter", "--entity-name", bob, "--add-config", mechanism],
                            timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"Completed updating config for user {bob}." in done.stdout
    shown = lab.run_tool("kafka-configs", [*base, "--describe", "--entity-name", bob], timeout=120)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert (f"SCRAM credential configs for user-principal '{bob}' are SCRAM-SHA-256=iterations=8192, "
            "SCRAM-SHA-512=iterations=4096") in shown.stdout, shown.stdout
    listed = lab.run_tool("kafka-configs", [*base, "--describe"], timeout=120)
    assert f"user-principal '{bob}'" in listed.stdout and "user-principal 'admin'" in listed.stdout, listed.stdout
    produce_consume(sasl_broker, "SCRAM-SHA-512", bob, "bob-secret", n=3)
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        done = lab.run_tool("kafka-configs", [*base, "--alter", "--entity-name", bob, "--delete-config", mechanism],
                            timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
    assert auth_error(sasl_broker, "SCRAM-SHA-512", bob, "bob-secret") is not None


def test_java_client_produces_and_consumes_with_scram(sasl_broker, tmp_path):
    lab = _lab()
    topic = f"java-sasl-{uuid.uuid4().hex[:6]}"
    create_topic(sasl_broker, topic)
    props = _client_properties(tmp_path, "SCRAM-SHA-512", "admin", "admin-secret")
    lines = "".join(f"java-{i}\n" for i in range(10))
    produced = lab.run_tool("kafka-console-producer", ["--bootstrap-server", sasl_broker.sasl, "--topic", topic,
                                                       "--command-config", str(props)], input=lines, timeout=120)
    assert produced.returncode == 0, produced.stdout + produced.stderr
    consumed = lab.run_tool("kafka-console-consumer", [
        "--bootstrap-server", sasl_broker.sasl, "--topic", topic, "--from-beginning", "--max-messages", "10",
        "--timeout-ms", "30000", "--command-config", str(props)], timeout=120)
    assert consumed.stdout.split() == [f"java-{i}" for i in range(10)], consumed.stdout + consumed.stderr
    wrong = _client_properties(tmp_path, "SCRAM-SHA-512", "admin", "wrong")
    failed = lab.run_tool("kafka-console-producer", ["--bootstrap-server", sasl_broker.sasl, "--topic", topic,
                                                     "--command-config", str(wrong)], input="x\n", timeout=120)
    assert "SaslAuthenticationException" in failed.stderr + failed.stdout
    assert SCRAM_FAILED.format("SCRAM-SHA-512") in failed.stderr + failed.stdout


# -- durability and bootstrap (minikafka only) ------------------------------------------------------

@pytest.mark.minikafka_only
def test_credentials_survive_restart_and_kill_9(tmp_path):
    data_dir = tmp_path / "data"
    assert format_scram(data_dir, BOOTSTRAP_USERS).returncode == 0
    broker = start_minikafka(data_dir)
    assert broker.mk is not None
    try:
        assert alter(broker.plain, [upsertion("dave", 1, "dave-secret")]) == {"dave": (0, None)}
        broker.mk.kill()  # kill -9 right after the acknowledged change
        broker.mk.start()
        produce_consume(broker, "SCRAM-SHA-256", "dave", "dave-secret", n=2)
        assert alter(broker.plain, deletions=[Deletion(name="dave", mechanism=1)]) == {"dave": (0, None)}
        broker.mk.restart()
        assert auth_error(broker, "SCRAM-SHA-256", "dave", "dave-secret") is not None
        produce_consume(broker, "SCRAM-SHA-256", "admin", "admin-secret", n=2)
        assert not list(data_dir.glob("*.tmp"))
        text = (data_dir / "scram-credentials.json").read_text()
        assert "admin-secret" not in text and "dave" not in text
    finally:
        log = broker.mk.log_text(20000)
        broker.mk.close()
    assert "Traceback" not in log, log


@pytest.mark.minikafka_only
def test_storage_format_refuses_bad_specs_and_a_corrupt_store_refuses_start(tmp_path):
    data_dir = tmp_path / "data"
    for spec in ("SCRAM-SHA-1=[name=a,password=b]", "SCRAM-SHA-256=[name=a]", "SCRAM-SHA-256=[password=b]",
                 "SCRAM-SHA-256=[name=a,password=b,iterations=100]", "SCRAM-SHA-256=name=a,password=b"):
        done = format_scram(data_dir, [spec])
        assert done.returncode == 1 and "minikafka storage format:" in done.stderr, (spec, done.stderr)
    assert not (data_dir / "scram-credentials.json").exists()
    done = format_scram(data_dir, ['SCRAM-SHA-256=[name=erin,password="with,comma]"]'])
    assert done.returncode == 0 and "Added SCRAM-SHA-256 credential for user erin" in done.stdout, done.stderr
    (data_dir / "scram-credentials.json").write_text("{not json")
    with pytest.raises(Exception, match="malformed SCRAM credentials file"):
        start_minikafka(data_dir)
