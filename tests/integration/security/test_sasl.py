"""SASL on a SASL_PLAINTEXT listener with real clients: confluent-kafka (librdkafka) with PLAIN,
SCRAM-SHA-256 and SCRAM-SHA-512 (right and wrong credentials, re-authentication of a long-lived
producer), and raw protocol for what no client sends (requests before authentication, SaslHandshake
v0 with raw tokens, unsupported mechanisms, session expiry). The broker: tests/support/sasl_helpers.py, also
against Apache Kafka (`--broker=kafka`).
"""
from __future__ import annotations

import time
import uuid

import pytest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse

from minikafka.broker.security.sasl.scram import ScramClient
from tests.conftest import broker_kind
from tests.support.helpers import RawClient
from tests.support.sasl_helpers import (HANDSHAKE_MECHANISMS, REAUTH_MS, SCRAM_FAILED, auth_error, authenticate,
                                client_config, create_topic, handshake, metadata, produce_consume, sasl_broker_fixture,
                                scram_login)

pytestmark = pytest.mark.timeout(180)


@pytest.fixture(scope="module")
def sasl_broker(request, tmp_path_factory):
    yield from sasl_broker_fixture(request, tmp_path_factory)


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


def test_random_frames_before_authentication_never_get_through(sasl_broker):
    """Random frames (some with a valid header of a random API) on fresh connections: each is closed
    (or at most answered), and the broker serves the next client normally."""
    import random
    rng = random.Random(15)
    for i in range(20):
        body = bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 200)))
        if i % 2:  # a plausible header: random api key and version, then garbage
            body = rng.randrange(0, 80).to_bytes(2, "big") + rng.randrange(0, 15).to_bytes(2, "big") + body
        with RawClient(sasl_broker.sasl, timeout=5) as c:
            c.send_bytes(len(body).to_bytes(4, "big") + body)
            try:
                c.recv_frame()  # an ApiVersions-like answer is allowed
            except (ConnectionError, OSError):
                continue
    with RawClient(sasl_broker.sasl) as c:
        scram_login(c, "SCRAM-SHA-256", "admin", "admin-secret")
        assert len(metadata(c).brokers) == 1


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
    """librdkafka re-authenticates before its session ends (KIP-368): no delivery fails, and (minikafka,
    whose log says so) no connection of it is closed for an expired session."""
    from confluent_kafka import Producer
    expired_before = sasl_broker.mk.log_text(10**7).count("SASL session expired") if sasl_broker.mk else 0
    topic = f"reauth-{uuid.uuid4().hex[:6]}"
    create_topic(sasl_broker, topic)
    errors: list = []
    producer = Producer(client_config(sasl_broker, "SCRAM-SHA-512", "admin", "admin-secret",
                                      error_cb=errors.append, **{"enable.idempotence": True}))
    delivered: list = []
    deadline = time.monotonic() + 2.2 * REAUTH_MS / 1000
    while time.monotonic() < deadline:
        producer.produce(topic, b"x", on_delivery=lambda err, msg: delivered.append(err))
        producer.poll(0.1)
    assert producer.flush(30) == 0
    assert delivered and all(err is None for err in delivered), [e for e in delivered if e][:3]
    assert not [e for e in errors if "uthenticat" in e.str()], errors
    producer = None
    if sasl_broker.mk is not None:
        assert sasl_broker.mk.log_text(10**7).count("SASL session expired") == expired_before


# -- SCRAM credentials: AlterUserScramCredentials / DescribeUserScramCredentials ------------------



@pytest.mark.parametrize("mechanism,user,password", [("PLAIN", "alice", "alice-secret"),
                                                     ("SCRAM-SHA-512", "admin", "admin-secret")])
def test_aiokafka_producer(sasl_broker, mechanism, user, password, caplog):
    """aiokafka: another client's SASL (SaslAuthenticate v0, no session lifetime)."""
    import asyncio

    from aiokafka import AIOKafkaProducer
    from aiokafka.errors import KafkaConnectionError

    topic = f"aio-sasl-{uuid.uuid4().hex[:6]}"
    create_topic(sasl_broker, topic)

    async def send(pw: str) -> None:
        producer = AIOKafkaProducer(bootstrap_servers=sasl_broker.sasl, security_protocol="SASL_PLAINTEXT",
                                    sasl_mechanism=mechanism, sasl_plain_username=user, sasl_plain_password=pw,
                                    request_timeout_ms=10000)
        try:
            await producer.start()
            await producer.send_and_wait(topic, b"aio")
        finally:
            await producer.stop()

    asyncio.run(send(password))
    with pytest.raises(KafkaConnectionError):  # aiokafka logs the cause and reports no bootstrap
        asyncio.run(send("wrong"))
    expected = ("Authentication failed: Invalid username or password" if mechanism == "PLAIN"
                else SCRAM_FAILED.format(mechanism))
    assert f"[Error 58] SaslAuthenticationFailed: {expected}" in caplog.text, caplog.text
