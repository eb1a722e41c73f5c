"""SASL/OAUTHBEARER (KIP-255, KIP-768, KIP-368) with real clients.

The broker: a PLAINTEXT listener (the admin; super user User:ANONYMOUS), a SASL_PLAINTEXT listener with
OAUTHBEARER and Kafka's default, unsecured validator, and StandardAuthorizer ACLs. With `--broker=kafka`
the same tests run against Apache Kafka configured the same way (differential). A second listener, JWKS
(SASL_PLAINTEXT), has Kafka's OAuthBearerValidatorCallbackHandler with a JWKS file of an RSA key made
here (Kafka's JVM gets the system properties that allow that file).
"""
from __future__ import annotations

import base64
import json
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                   ResourcePatternType, ResourceType)
from kafka.protocol.sasl import SaslAuthenticateRequest

from minikafka.testing import MiniKafka, free_port
from tests.conftest import ROOT, broker_kind
from tests.support.helpers import RawClient
from tests.support.sasl_helpers import authenticate, handshake, metadata
from tests.support.tls_certs import Pki

pytestmark = pytest.mark.timeout(240)

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
OAUTH_JAAS = ('org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required '
              'unsecuredLoginStringClaim_sub="admin";')
VALIDATOR = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
AUDIENCE, ISSUER = "minikafka-test", "https://issuer.example"
JWKS_REAUTH_MS = 25_000  # the JWKS listener's connections.max.reauth.ms
CONFIG = {
    "authorizer.class.name": STANDARD_AUTHORIZER,
    "super.users": "User:ANONYMOUS",
    "allow.everyone.if.no.acl.found": "false",
    "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "OAUTHBEARER",
    "sasl.enabled.mechanisms": "OAUTHBEARER",
    "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
}


class OAuthBroker:
    def __init__(self, plain: str, sasl: str, jwks: str, secure: str, key, jwks_path, pki, mk=None) -> None:
        self.plain, self.sasl, self.jwks, self.secure, self.key, self.jwks_path = plain, sasl, jwks, secure, key, jwks_path
        self.pki, self.mk = pki, mk


def make_jwks(base):
    from joserfc.jwk import KeySet, RSAKey
    key = RSAKey.generate_key(2048, parameters={"kid": "test-key", "use": "sig", "alg": "RS256"})
    jwks_path = base / "jwks.json"
    jwks_path.write_text(json.dumps(KeySet([key]).as_dict(private=False)))
    return key, jwks_path


def jwks_config(jwks_path, pki) -> dict[str, str]:
    """The JWKS listener (SASL_PLAINTEXT) and the SECURE one (SASL_SSL): Kafka's
    OAuthBearerValidatorCallbackHandler with a file: JWKS URL."""
    return {
        "listener.name.secure.ssl.keystore.type": "PEM",
        "listener.name.secure.ssl.keystore.location": pki.path("server.pem"),
        "listener.name.secure.sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.secure.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
        "listener.name.secure.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
        "listener.name.secure.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": jwks_path.as_uri(),
        "listener.name.jwks.sasl.enabled.mechanisms": "OAUTHBEARER",
        "listener.name.jwks.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
        "listener.name.jwks.oauthbearer.sasl.server.callback.handler.class": VALIDATOR,
        "listener.name.jwks.oauthbearer.connections.max.reauth.ms": str(JWKS_REAUTH_MS),
        "listener.name.jwks.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": jwks_path.as_uri(),
        "sasl.oauthbearer.expected.audience": AUDIENCE,
        "sasl.oauthbearer.expected.issuer": ISSUER,
        "sasl.oauthbearer.clock.skew.seconds": "5",
    }


@pytest.fixture(scope="module")
def broker(request, tmp_path_factory):
    kind = broker_kind(request.config)
    if kind not in ("kafka", "minikafka"):
        pytest.skip("needs a broker this test run configures (minikafka or kafka)")
    base = tmp_path_factory.mktemp("oauth")
    key, jwks_path = make_jwks(base)
    pki = Pki(base / "pki")
    if kind == "kafka":
        sys.path.insert(0, str(ROOT))
        from scripts.apache_kafka import KafkaBroker
        kb = KafkaBroker()
        # Kafka 4.x reads a JWKS URL or file only where these JVM system properties allow it
        kb.jvm_opts = [f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={jwks_path.as_uri()}",
                       f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.files={jwks_path}"]
        kb.start(overrides={**CONFIG, **jwks_config(jwks_path, pki)},
                 extra_listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT", "JWKS": "SASL_PLAINTEXT", "SECURE": "SASL_SSL"},
                 timeout=120)
        yield OAuthBroker(kb.bootstrap, kb.bootstrap_for("SASL_PLAINTEXT"), kb.bootstrap_for("JWKS"),
                          kb.bootstrap_for("SECURE"), key, jwks_path, pki)
        kb.stop()
        kb.cleanup()
        return
    port, sasl_port, jwks_port, secure_port = free_port(), free_port(), free_port(), free_port()
    config = {
        **CONFIG, **jwks_config(jwks_path, pki),
        "listeners": f"PLAINTEXT://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{sasl_port},"
                     f"JWKS://127.0.0.1:{jwks_port},SECURE://127.0.0.1:{secure_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,JWKS:SASL_PLAINTEXT,"
                                          "SECURE:SASL_SSL",
    }
    mk = MiniKafka(config=config, data_dir=base / "data", port=port)
    yield OAuthBroker(mk.bootstrap_servers, f"127.0.0.1:{sasl_port}", f"127.0.0.1:{jwks_port}",
                      f"127.0.0.1:{secure_port}", key, jwks_path, pki, mk)
    log = mk.log_text(20000)
    mk.close()
    assert "Traceback" not in log, log


# -- tokens ---------------------------------------------------------------------------------------------
def _b64(obj) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def unsecured_token(sub: str = "alice", exp_in: float = 3600, **claims) -> str:
    now = int(time.time())
    return f"{_b64({'alg': 'none'})}.{_b64({'sub': sub, 'iat': now, 'exp': now + exp_in, **claims})}."


def signed_token(key, sub: str = "alice", exp_in: float = 3600, kid: str = "test-key", **claims) -> str:
    from joserfc import jwt
    now = int(time.time())
    body = {"sub": sub, "iat": now, "exp": now + exp_in, "aud": AUDIENCE, "iss": ISSUER, **claims}
    return jwt.encode({"alg": "RS256", "kid": kid}, body, key)


def first_message(token: str) -> bytes:
    return f"n,,\x01auth=Bearer {token}\x01\x01".encode()


# -- clients --------------------------------------------------------------------------------------------
def client_config(bootstrap: str, principal: str | None = "alice", oauth_cb=None, **extra) -> dict:
    conf = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            **extra}
    if oauth_cb is not None:
        conf["oauth_cb"] = oauth_cb
    else:
        conf["sasl.oauthbearer.config"] = f"principal={principal}"  # librdkafka's own unsecured JWS
        conf["enable.sasl.oauthbearer.unsecure.jwt"] = True
    return conf


def token_cb(make_token, lifetime: float = 3600, calls: list | None = None):
    """An oauth_cb handing librdkafka `make_token()` with its expiry: the token's `exp` when it has one (so
    that librdkafka refreshes it in time), else now + lifetime."""
    def cb(_config):
        if calls is not None:
            calls.append(time.time())
        token = make_token()
        try:
            exp = json.loads(base64.urlsafe_b64decode(token.split(".")[1] + "==="))["exp"]
        except (ValueError, KeyError, IndexError):
            exp = None
        return token, float(exp) if isinstance(exp, (int, float)) and exp > time.time() else time.time() + lifetime
    return cb


def new_topic(broker: OAuthBroker) -> str:
    topic = f"oauth-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.plain})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    return topic


def grant(broker: OAuthBroker, principal: str, topic: str, group: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.plain})
    bindings = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*", op,
                           AclPermissionType.ALLOW) for op in (AclOperation.WRITE, AclOperation.READ,
                                                              AclOperation.DESCRIBE)]
    bindings.append(AclBinding(ResourceType.GROUP, group, ResourcePatternType.LITERAL, principal, "*",
                               AclOperation.READ, AclPermissionType.ALLOW))
    for fut in admin.create_acls(bindings).values():
        fut.result(timeout=30)
    time.sleep(1.0)  # Kafka applies ACLs from its metadata log


def produce(conf: dict, topic: str, n: int = 10, timeout: float = 30) -> list:
    """The delivery errors of `n` records (empty: all written)."""
    producer = Producer(conf)
    errors: list = []
    for i in range(n):
        producer.produce(topic, f"v{i}".encode(), on_delivery=lambda err, msg: err and errors.append(err))
    producer.flush(timeout)
    return errors


def consume(conf: dict, topic: str, n: int, timeout: float = 30) -> list[bytes]:
    consumer = Consumer({**conf, "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    return got


def auth_error(conf: dict, timeout: float = 15.0):
    """The authentication error a producer with `conf` gets (None if none within `timeout`)."""
    errors: list = []
    producer = Producer({**conf, "error_cb": errors.append})
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        producer.poll(0.2)
        for err in errors:
            if err.code() == KafkaError._AUTHENTICATION:
                return err
    return None


# -- the unsecured validator (differential) -------------------------------------------------------------
def test_principal_from_the_unsecured_token_is_authorized_by_acls(broker):
    topic = new_topic(broker)
    group = f"g-{uuid.uuid4().hex[:6]}"
    errors = produce(client_config(broker.sasl, "alice"), topic, n=3)
    assert errors and all(e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in errors), errors
    grant(broker, "User:alice", topic, group)
    assert produce(client_config(broker.sasl, "alice"), topic, n=10) == []
    got = consume(client_config(broker.sasl, "alice", **{"group.id": group}), topic, 10)
    assert got == [f"v{i}".encode() for i in range(10)]
    # another principal has no ACL: still denied
    errors = produce(client_config(broker.sasl, "mallory"), topic, n=2)
    assert errors and all(e.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED for e in errors), errors


@pytest.mark.parametrize("token", [
    pytest.param(lambda: unsecured_token(exp_in=-10), id="expired"),
    pytest.param(lambda: "not-a-jwt", id="garbage"),
    pytest.param(lambda: unsecured_token(sub=""), id="no-principal"),
    pytest.param(lambda: unsecured_token(exp_in=3600, iat=int(time.time()) + 600), id="issued-in-the-future"),
])
def test_bad_unsecured_token_fails_with_kafkas_error(broker, token):
    err = auth_error(client_config(broker.sasl, oauth_cb=token_cb(token)))
    assert err is not None, "no authentication error reported"
    assert '{"status":"invalid_token"}' in err.str(), err.str()


def test_invalid_token_exchange_on_the_wire(broker):
    with RawClient(broker.sasl) as c:
        assert handshake(c, "OAUTHBEARER").error_code == 0
        first = authenticate(c, first_message(unsecured_token(exp_in=-60)))
        assert (first.error_code, first.auth_bytes) == (0, b'{"status":"invalid_token"}')
        final = authenticate(c, b"\x01")
        assert (final.error_code, final.error_message) == (58, '{"status":"invalid_token"}')
        assert c.closed_by_peer()


@pytest.mark.parametrize("message", [b"n,,\x01x=y\x01\x01", b"n,,\x01auth=Bearer\x01\x01", b"garbage"])
def test_malformed_first_message_fails_at_once(broker, message):
    with RawClient(broker.sasl) as c:
        assert handshake(c, "OAUTHBEARER").error_code == 0
        resp = authenticate(c, message)
        assert resp.error_code == 58
        assert resp.error_message == ("Authentication failed during authentication due to invalid credentials with "
                                      "SASL mechanism OAUTHBEARER")
        assert c.closed_by_peer()


def test_a_scheme_other_than_bearer_closes_unanswered(broker):
    """Kafka 4.3 fails building its "Invalid scheme" message (IllegalArgumentException) and closes."""
    with RawClient(broker.sasl) as c:
        assert handshake(c, "OAUTHBEARER").error_code == 0
        c.send(SaslAuthenticateRequest(auth_bytes=b"n,,\x01auth=Basic abc\x01\x01"), 2)
        assert c.closed_by_peer()


def test_authzid_must_match_the_principal(broker):
    with RawClient(broker.sasl) as c:
        assert handshake(c, "OAUTHBEARER").error_code == 0
        resp = authenticate(c, f"n,a=bob,\x01auth=Bearer {unsecured_token('alice')}\x01\x01".encode())
        assert resp.error_code == 58
        assert resp.error_message == ("Authentication failed: Client requested an authorization id (bob) that is "
                                      "different from the token's principal name (alice)")


def test_session_lifetime_is_the_tokens(broker):
    with RawClient(broker.sasl) as c:
        assert handshake(c, "OAUTHBEARER").error_code == 0
        resp = authenticate(c, f"n,,\x01auth=Bearer {unsecured_token(exp_in=60)}\x01traceId=x1\x01\x01".encode())
        assert resp.error_code == 0, resp
        assert 50_000 < resp.session_lifetime_ms <= 60_000
        assert len(metadata(c).brokers) == 1


# -- the JWKS validator (KIP-768) -----------------------------------------------------------------------
def test_signed_token_produces_and_consumes_with_acls(broker):
    topic = new_topic(broker)
    group = f"g-{uuid.uuid4().hex[:6]}"
    grant(broker, "User:carol", topic, group)
    conf = client_config(broker.jwks, oauth_cb=token_cb(lambda: signed_token(broker.key, "carol")))
    assert produce(conf, topic, n=5) == []
    assert consume({**conf, "group.id": group}, topic, 5) == [f"v{i}".encode() for i in range(5)]


def test_signed_token_on_a_sasl_ssl_listener(broker):
    topic = new_topic(broker)
    group = f"g-{uuid.uuid4().hex[:6]}"
    grant(broker, "User:heidi", topic, group)
    conf = client_config(broker.secure, oauth_cb=token_cb(lambda: signed_token(broker.key, "heidi")),
                         **{"security.protocol": "SASL_SSL", "ssl.ca.location": broker.pki.path("ca.pem")})
    assert produce(conf, topic, n=5) == []
    assert consume({**conf, "group.id": group}, topic, 5) == [f"v{i}".encode() for i in range(5)]
    err = auth_error({**conf, "oauth_cb": token_cb(lambda: signed_token(broker.key, "heidi", aud="nope"))})
    assert err is not None and '{"status":"invalid_token"}' in err.str()


def test_unsecured_token_on_the_jwks_listener_is_refused(broker):
    err = auth_error(client_config(broker.jwks, "alice"))
    assert err is not None and '{"status":"invalid_token"}' in err.str()


@pytest.mark.parametrize("claims", [
    pytest.param({"aud": "someone-else"}, id="audience"),
    pytest.param({"iss": "https://evil.example"}, id="issuer"),
    pytest.param({"exp_in": -60}, id="expired-past-skew"),
    pytest.param({"kid": "unknown-key"}, id="unknown-key-id"),
    pytest.param({"signer": "other"}, id="signature"),
])
def test_wrong_signed_token_is_refused(broker, claims):
    from joserfc.jwk import RSAKey
    claims = dict(claims)
    key = RSAKey.generate_key(2048, parameters={"kid": "test-key"}) if claims.pop("signer", None) else broker.key
    err = auth_error(client_config(broker.jwks, oauth_cb=token_cb(lambda: signed_token(key, "carol", **claims))))
    assert err is not None, "no authentication error reported"
    assert '{"status":"invalid_token"}' in err.str(), err.str()


def test_a_key_added_to_the_jwks_file_is_used(broker):
    from joserfc.jwk import KeySet, RSAKey
    new = RSAKey.generate_key(2048, parameters={"kid": "rotated", "use": "sig", "alg": "RS256"})
    broker.jwks_path.write_text(json.dumps(KeySet([broker.key, new]).as_dict(private=False)))
    with RawClient(broker.jwks) as c:
        assert handshake(c, "OAUTHBEARER").error_code == 0
        resp = authenticate(c, first_message(signed_token(new, "dave", kid="rotated", exp_in=30)))
        assert resp.error_code == 0 and resp.auth_bytes == b"", resp
        assert 20_000 < resp.session_lifetime_ms <= 30_000


def test_reauthentication_follows_a_short_token_lifetime(broker):
    """Tokens of 8 s: the session ends with the token (session_lifetime_ms), librdkafka fetches a new
    token and re-authenticates (KIP-368), and a producer keeps writing across several lifetimes."""
    topic = new_topic(broker)
    group = f"g-{uuid.uuid4().hex[:6]}"
    grant(broker, "User:erin", topic, group)
    calls: list[float] = []
    conf = client_config(broker.jwks, oauth_cb=token_cb(lambda: signed_token(broker.key, "erin", exp_in=8),
                                                        calls=calls))
    producer = Producer(conf)
    errors: list = []
    deadline = time.monotonic() + 20
    sent = 0
    while time.monotonic() < deadline:
        producer.produce(topic, f"v{sent}".encode(), on_delivery=lambda err, msg: err and errors.append(err))
        sent += 1
        producer.poll(0.25)
    assert producer.flush(30) == 0 and not errors, errors
    assert len(calls) >= 3, calls  # a new token about every 6.4 s (librdkafka refreshes at 80%)
    assert consume({**conf, "group.id": group}, topic, sent) == [f"v{i}".encode() for i in range(sent)]
    if broker.mk is not None:
        assert "SASL session expired" not in broker.mk.log_text(200000)


# -- the Java client (Kafka's own login modules) ---------------------------------------------------------
def _java_produce(broker: OAuthBroker, bootstrap: str, topic: str, props_text: str, tmp_path, env=None):
    sys.path.insert(0, str(ROOT))
    from scripts import apache_kafka as lab
    props = tmp_path / f"client-{uuid.uuid4().hex[:6]}.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=OAUTHBEARER\n" + props_text)
    return lab.run_tool("kafka-console-producer", ["--bootstrap-server", bootstrap, "--topic", topic,
                                                   "--command-config", str(props),
                                                   "--producer-property", "max.block.ms=15000"],
                        input="j-0\nj-1\nj-2\n", timeout=120, env=env)


def _consume_plain(broker: OAuthBroker, topic: str, n: int) -> list[bytes]:
    return consume({"bootstrap.servers": broker.plain, "group.id": f"g-{uuid.uuid4().hex[:6]}"}, topic, n)


def test_java_client_unsecured_login_module(broker, tmp_path):
    topic = new_topic(broker)
    jaas = ("sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
            'unsecuredLoginStringClaim_sub="frank";\n')
    denied = _java_produce(broker, broker.sasl, topic, jaas, tmp_path)
    assert "TopicAuthorizationException" in denied.stdout + denied.stderr or \
        "Not authorized to access topics" in denied.stdout + denied.stderr, denied.stdout + denied.stderr
    grant(broker, "User:frank", topic, "unused")
    done = _java_produce(broker, broker.sasl, topic, jaas, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _consume_plain(broker, topic, 3) == [b"j-0", b"j-1", b"j-2"]


def test_java_client_signed_token_from_a_file(broker, tmp_path):
    """Kafka's OAuthBearerLoginCallbackHandler reading a signed JWT from a file (Kafka 4.x
    sasl.oauthbearer.token.endpoint.url=file:...), on the JWKS listener."""
    topic = new_topic(broker)
    grant(broker, "User:grace", topic, "unused")
    token_file = tmp_path / "token.jwt"
    token_file.write_text(signed_token(broker.key, "grace"))
    text = ("sasl.jaas.config=org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;\n"
            "sasl.login.callback.handler.class="
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler\n"
            f"sasl.oauthbearer.token.endpoint.url={token_file.as_uri()}\n")
    env = {"JAVA_TOOL_OPTIONS": f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls={token_file.as_uri()} "
                                f"-Dorg.apache.kafka.sasl.oauthbearer.allowed.files={token_file}"}
    done = _java_produce(broker, broker.jwks, topic, text, tmp_path, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _consume_plain(broker, topic, 3) == [b"j-0", b"j-1", b"j-2"]


def test_raw_tokens_after_handshake_v0(broker):
    """SaslHandshake v0: the tokens go bare (size-prefixed, no Kafka header), as old clients send them."""
    with RawClient(broker.sasl) as c:
        assert handshake(c, "OAUTHBEARER", version=0).error_code == 0
        token = first_message(unsecured_token("alice", exp_in=60))
        c.send_bytes(len(token).to_bytes(4, "big") + token)
        assert c.recv_frame() == b""
        assert len(metadata(c).brokers) == 1
    with RawClient(broker.sasl) as c:
        assert handshake(c, "OAUTHBEARER", version=0).error_code == 0
        token = first_message(unsecured_token("alice", exp_in=-60))
        c.send_bytes(len(token).to_bytes(4, "big") + token)
        assert c.recv_frame() == b'{"status":"invalid_token"}'
        c.send_bytes(b"\x00\x00\x00\x01\x01")
        assert c.closed_by_peer()


@pytest.mark.parametrize("exp_in,low,high", [(3600, JWKS_REAUTH_MS, JWKS_REAUTH_MS), (12, 5_000, 12_000)])
def test_session_lifetime_is_the_shorter_of_token_and_max_reauth(broker, exp_in, low, high):
    with RawClient(broker.jwks) as c:
        assert handshake(c, "OAUTHBEARER").error_code == 0
        resp = authenticate(c, first_message(signed_token(broker.key, "ivan", exp_in=exp_in)))
        assert resp.error_code == 0, resp
        assert low <= resp.session_lifetime_ms <= high
