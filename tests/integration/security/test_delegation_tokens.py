"""Delegation tokens (KIP-48, KIP-373): CreateDelegationToken / RenewDelegationToken /
ExpireDelegationToken / DescribeDelegationToken over raw requests from SCRAM users, Kafka's
`kafka-delegation-tokens` tool, and logins with a token (SCRAM with the extension tokenauth=true, from
the Java client's ScramLoginModule tokenauth="true" and from a raw SCRAM exchange): the session is the
token's owner, so the owner's ACLs apply; a removed token no longer logs in.

The broker (minikafka, or Apache Kafka 4.3.1 with `--broker=kafka`): a PLAINTEXT listener (User:ANONYMOUS,
a super user, for setup) and a SASL_PLAINTEXT one with SCRAM users admin, alice, bob and carol,
StandardAuthorizer, `delegation.token.secret.key` set. Restart and a broker without the secret key are
minikafka only (tests at the end).
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import re
import sys
import time
import uuid

import pytest
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from minikafka.broker.security import acl as A
from minikafka.broker.security.sasl.scram import ScramClient
from minikafka.protocol.messages import (CreateDelegationTokenRequest, CreateDelegationTokenResponse,
                                         DescribeDelegationTokenRequest, DescribeDelegationTokenResponse,
                                         ExpireDelegationTokenRequest, ExpireDelegationTokenResponse,
                                         RenewDelegationTokenRequest, RenewDelegationTokenResponse)
from tests.conftest import ROOT, broker_kind
from tests.support.authz_helpers import create_acls
from tests.support.helpers import RawClient, wait_until
from tests.support.sasl_helpers import (SASL_CONFIG, SaslBroker, authenticate, client_properties, format_scram,
                                        handshake, lab, scram_login, start_minikafka)

pytestmark = pytest.mark.timeout(300)

SECRET = "token-secret-key"
USERS = ("admin", "alice", "bob", "carol")
CONFIG = {**SASL_CONFIG, "delegation.token.secret.key": SECRET,
          "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
          "super.users": "User:admin;User:ANONYMOUS"}
SCRAM_USERS = [f"SCRAM-SHA-{bits}=[name={u},password={u}-secret]" for u in USERS for bits in (256, 512)]
DAY, WEEK = 24 * 3600 * 1000, 7 * 24 * 3600 * 1000
NOT_ALLOWED, NOT_FOUND, OWNER_MISMATCH, AUTHZ_FAILED, EXPIRED, DISABLED = 64, 62, 63, 65, 66, 61
INVALID_PRINCIPAL_TYPE, TOPIC_DENIED = 67, 29


@pytest.fixture(scope="module")
def broker(request, tmp_path_factory):
    kind = broker_kind(request.config)
    if kind == "kafka":
        sys.path.insert(0, str(ROOT))
        from scripts.apache_kafka import KafkaBroker
        kb = KafkaBroker()
        kb.start(overrides=CONFIG, extra_listeners={"SASL_PLAINTEXT": "SASL_PLAINTEXT"},
                 format_args=[a for spec in SCRAM_USERS for a in ("--add-scram", spec)], timeout=120)
        yield SaslBroker(kb.bootstrap, kb.bootstrap_for("SASL_PLAINTEXT"))
        kb.stop()
        kb.cleanup()
        return
    if kind != "minikafka":
        pytest.skip("needs a broker this test run configures (minikafka or kafka)")
    data_dir = tmp_path_factory.mktemp("tokens") / "data"
    done = format_scram(data_dir, SCRAM_USERS)
    assert done.returncode == 0, done.stderr
    b = start_minikafka(data_dir, CONFIG)
    yield b
    assert b.mk is not None
    log = b.mk.log_text(20000)
    b.mk.close()
    assert "Traceback" not in log, log


def login(broker: SaslBroker, user: str) -> RawClient:
    client = RawClient(broker.sasl, timeout=15)
    scram_login(client, "SCRAM-SHA-256", user, f"{user}-secret")
    return client


def token_login(broker: SaslBroker, token_id: str, hmac_bytes: bytes, mechanism: str = "SCRAM-SHA-512"):
    """A raw SCRAM exchange with the extension tokenauth=true: (client, None) once logged in, or
    (None, the SaslAuthenticate error) when refused."""
    client = RawClient(broker.sasl, timeout=15)
    scram = ScramClient(mechanism, token_id, base64.b64encode(hmac_bytes).decode())
    scram._bare += ",tokenauth=true"  # the extension, inside client-first-message-bare as Kafka's client sends it
    assert handshake(client, mechanism).error_code == 0
    first = authenticate(client, scram.first())
    if first.error_code:
        client.close()
        return None, first
    final = authenticate(client, scram.final(first.auth_bytes))
    if final.error_code:
        client.close()
        return None, final
    assert scram.verify(final.auth_bytes)
    return client, None


def create(client: RawClient, renewers=(), max_life: int = -1, owner: tuple[str, str] | None = None, version: int = 3):
    Renewer = CreateDelegationTokenRequest.CreatableRenewers
    req = CreateDelegationTokenRequest(owner_principal_type=owner[0] if owner else None,
                                       owner_principal_name=owner[1] if owner else None,
                                       renewers=[Renewer(principal_type=t, principal_name=n) for t, n in renewers],
                                       max_lifetime_ms=max_life)
    return client.request(req, version, CreateDelegationTokenResponse)


def renew(client: RawClient, hmac_bytes: bytes, period: int = -1):
    return client.request(RenewDelegationTokenRequest(hmac=hmac_bytes, renew_period_ms=period), 2,
                          RenewDelegationTokenResponse)


def expire(client: RawClient, hmac_bytes: bytes, period: int = -1):
    return client.request(ExpireDelegationTokenRequest(hmac=hmac_bytes, expiry_time_period_ms=period), 2,
                          ExpireDelegationTokenResponse)


def describe(client: RawClient, owners: list[tuple[str, str]] | None = None):
    Owner = DescribeDelegationTokenRequest.DescribeDelegationTokenOwner
    req = DescribeDelegationTokenRequest(
        owners=None if owners is None else [Owner(principal_type=t, principal_name=n) for t, n in owners])
    return client.request(req, 3, DescribeDelegationTokenResponse)


def ids(resp) -> set[str]:
    assert resp.error_code == 0, resp
    return {t.token_id for t in resp.tokens}


def near(value: int, expected: int, slack: int = 30_000) -> bool:
    return abs(value - expected) <= slack


def grant(broker: SaslBroker, *bindings: A.AclBinding) -> None:
    with RawClient(broker.plain) as admin:
        assert create_acls(admin, list(bindings)) == [0] * len(bindings)


def acl(rtype: int, name: str, op: int, principal: str) -> A.AclBinding:
    return A.AclBinding(rtype, name, A.LITERAL, principal, "*", op, A.ALLOW)


def find(client: RawClient, token_id: str):
    """The described token `token_id`, or None."""
    return next((t for t in describe(client).tokens if t.token_id == token_id), None)


def settled(predicate, what: str):
    """Apache Kafka answers a token change once its controller committed it; the broker's token cache (which
    its controller reads too in combined mode) follows the metadata log a moment later: wait for it."""
    return wait_until(predicate, timeout=20, interval=0.1, what=what)


def test_create_describe_renew_expire(broker):
    with login(broker, "alice") as alice:
        t0 = int(time.time() * 1000)
        made = create(alice, renewers=[("User", "bob")])
        assert made.error_code == 0, made
        assert (made.principal_type, made.principal_name) == ("User", "alice")
        assert (made.token_requester_principal_type, made.token_requester_principal_name) == ("User", "alice")
        assert made.expiry_timestamp_ms - made.issue_timestamp_ms == DAY
        assert made.max_timestamp_ms - made.issue_timestamp_ms == WEEK
        assert near(made.issue_timestamp_ms, t0)
        assert bytes(made.hmac) == hmac.new(SECRET.encode(), made.token_id.encode(), hashlib.sha512).digest()
        assert re.fullmatch(r"[A-Za-z0-9_-]{22}", made.token_id), made.token_id  # Kafka's Uuid text
        token = settled(lambda: find(alice, made.token_id), "the new token described")
        assert (token.principal_name, token.token_requester_principal_name, bytes(token.hmac)) == (
            "alice", "alice", bytes(made.hmac))
        assert (token.issue_timestamp, token.expiry_timestamp, token.max_timestamp) == (
            made.issue_timestamp_ms, made.expiry_timestamp_ms, made.max_timestamp_ms)
        assert [(r.principal_type, r.principal_name) for r in token.renewers] == [("User", "bob")]
        assert made.token_id in ids(describe(alice, [("User", "alice")]))
        assert ids(describe(alice, [])) == set()  # an empty owner list: no tokens

        renewed = renew(alice, made.hmac, 3_600_000)
        assert renewed.error_code == 0 and near(renewed.expiry_timestamp_ms, t0 + 3_600_000)
        assert renew(alice, made.hmac, -1).expiry_timestamp_ms - int(time.time() * 1000) > DAY - 60_000
        short = expire(alice, made.hmac, 60_000)
        assert short.error_code == 0 and near(short.expiry_timestamp_ms, t0 + 60_000)
        settled(lambda: find(alice, made.token_id).expiry_timestamp == short.expiry_timestamp_ms, "the new expiry")

        capped = create(alice, max_life=120_000)  # a max lifetime below the expiry time caps both
        assert capped.max_timestamp_ms - capped.issue_timestamp_ms == 120_000
        assert capped.expiry_timestamp_ms == capped.max_timestamp_ms
        settled(lambda: find(alice, capped.token_id), "the capped token described")
        gone = expire(alice, capped.hmac, -1)  # negative: removed at once
        assert gone.error_code == 0 and near(gone.expiry_timestamp_ms, int(time.time() * 1000))
        settled(lambda: find(alice, capped.token_id) is None, "the expired token gone")
        assert (renew(alice, capped.hmac).error_code, expire(alice, capped.hmac).error_code) == (NOT_FOUND, NOT_FOUND)
        assert renew(alice, b"not a token hmac").error_code == NOT_FOUND


def test_renewers_owners_and_errors(broker):
    with login(broker, "alice") as alice, login(broker, "bob") as bob, login(broker, "carol") as carol:
        made = create(alice, renewers=[("User", "bob")])
        assert made.error_code == 0
        settled(lambda: find(alice, made.token_id), "the new token described")
        assert renew(carol, made.hmac).error_code == OWNER_MISMATCH
        assert expire(carol, made.hmac, 1000).error_code == OWNER_MISMATCH
        assert renew(bob, made.hmac, 10_000).error_code == 0  # a renewer may renew
        # describe: owners and renewers see the token, others only with DESCRIBE / DESCRIBE_TOKENS
        assert made.token_id in ids(describe(bob))
        assert made.token_id in ids(describe(bob, [("User", "alice")]))  # bob renews one of alice's tokens
        assert made.token_id not in ids(describe(carol))
        bad = create(alice, renewers=[("Group", "g")])
        assert (bad.error_code, bad.token_id, bad.issue_timestamp_ms, bytes(bad.hmac)) == (
            INVALID_PRINCIPAL_TYPE, "", -1, b"")
        # KIP-373: a token for another owner needs CREATE_TOKENS on that USER
        other = create(carol, owner=("User", "alice"))
        assert (other.error_code, other.principal_name, other.token_requester_principal_name) == (
            AUTHZ_FAILED, "alice", "carol")
        grant(broker, acl(A.USER, "User:alice", A.CREATE_TOKENS, "User:carol"),
              acl(A.USER, "User:alice", A.DESCRIBE_TOKENS, "User:carol"))
        settled(lambda: made.token_id in ids(describe(carol)), "carol's new ACLs applied")
        other = create(carol, owner=("User", "alice"))
        assert other.error_code == 0, other
        assert (other.principal_name, other.token_requester_principal_name) == ("alice", "carol")
        settled(lambda: {made.token_id, other.token_id} <= ids(describe(carol)),  # DESCRIBE_TOKENS on User:alice
                "alice's tokens described to carol")
        [t] = [t for t in describe(carol).tokens if t.token_id == other.token_id]
        assert (t.principal_name, t.token_requester_principal_name) == ("alice", "carol")
        assert renew(carol, other.hmac).error_code == OWNER_MISMATCH  # the requester is not the owner
        assert renew(alice, other.hmac).error_code == 0


def test_plaintext_and_token_connections_may_not_manage_tokens(broker):
    with login(broker, "alice") as alice:
        made = create(alice)
        settled(lambda: find(alice, made.token_id), "the new token described")
    with RawClient(broker.plain) as anonymous:
        refused = create(anonymous)
        assert (refused.error_code, refused.principal_name, refused.issue_timestamp_ms, refused.token_id) == (
            NOT_ALLOWED, "ANONYMOUS", -1, "")
        assert (renew(anonymous, made.hmac).error_code, renew(anonymous, made.hmac).expiry_timestamp_ms) == (
            NOT_ALLOWED, -1)
        assert (expire(anonymous, made.hmac).error_code, expire(anonymous, made.hmac).expiry_timestamp_ms) == (
            NOT_ALLOWED, -1)
        assert (describe(anonymous).error_code, describe(anonymous).tokens) == (NOT_ALLOWED, [])
    client = settled(lambda: token_login(broker, made.token_id, made.hmac)[0], "a login with the token")
    with client:
        # the session is the owner's, token-authenticated: no token management from it
        refused = create(client)
        assert (refused.error_code, refused.principal_name) == (NOT_ALLOWED, "alice")
        assert renew(client, made.hmac).error_code == NOT_ALLOWED
        assert describe(client).error_code == NOT_ALLOWED
        meta = client.request(MetadataRequest(topics=[], allow_auto_topic_creation=False), 1, MetadataResponse)
        assert meta.brokers
    with login(broker, "alice") as alice:
        assert expire(alice, made.hmac).error_code == 0
    # SASL_AUTHENTICATION_FAILED once the token is gone
    error = settled(lambda: token_login(broker, made.token_id, made.hmac, "SCRAM-SHA-256")[1], "the login refused")
    assert error.error_code == 58, error
    client, error = token_login(broker, str(uuid.uuid4()), b"x" * 64)
    assert client is None and error.error_code == 58


def test_java_client_logs_in_with_a_token_as_its_owner(broker, tmp_path):
    """The Java client's ScramLoginModule with tokenauth="true" produces as the token's owner, whose ACLs
    apply: alice may write one topic and not another."""
    tools = lab()
    allowed, denied = f"tok-ok-{uuid.uuid4().hex[:6]}", f"tok-no-{uuid.uuid4().hex[:6]}"
    from confluent_kafka.admin import AdminClient, NewTopic
    admin = AdminClient({"bootstrap.servers": broker.plain})
    for f in admin.create_topics([NewTopic(allowed, 1, 1), NewTopic(denied, 1, 1)]).values():
        f.result(timeout=30)
    grant(broker, acl(A.TOPIC, allowed, A.WRITE, "User:alice"), acl(A.TOPIC, allowed, A.DESCRIBE, "User:alice"))
    with login(broker, "alice") as alice:
        made = create(alice)
        settled(lambda: find(alice, made.token_id), "the new token described")
    props = tmp_path / "token.properties"
    props.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
                     "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
                     f'username="{made.token_id}" password="{base64.b64encode(made.hmac).decode()}" tokenauth="true";\n')
    produced = tools.run_tool("kafka-console-producer", ["--bootstrap-server", broker.sasl, "--topic", allowed,
                                                         "--command-config", str(props)],
                              input="t-0\nt-1\nt-2\n", timeout=120)
    assert produced.returncode == 0, produced.stdout + produced.stderr
    from confluent_kafka import Consumer, TopicPartition
    consumer = Consumer({"bootstrap.servers": broker.plain, "group.id": f"g-{uuid.uuid4().hex[:6]}"})
    consumer.assign([TopicPartition(allowed, 0, 0)])
    got = []
    deadline = time.monotonic() + 30
    while len(got) < 3 and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None:
            got.append(msg.value())
    consumer.close()
    assert got == [b"t-0", b"t-1", b"t-2"]
    failed = tools.run_tool("kafka-console-producer", ["--bootstrap-server", broker.sasl, "--topic", denied,
                                                       "--command-config", str(props),
                                                       "--producer-property", "max.block.ms=10000"],
                            input="x\n", timeout=120)
    assert "TopicAuthorizationException" in failed.stdout + failed.stderr or \
        "Not authorized to access topics" in failed.stdout + failed.stderr, failed.stdout + failed.stderr


def test_kafka_delegation_tokens_tool(broker, tmp_path):
    tools = lab()
    props = client_properties(tmp_path, "SCRAM-SHA-512", "alice", "alice-secret")
    base = ["--bootstrap-server", broker.sasl, "--command-config", str(props)]
    # kafka-delegation-tokens.sh runs this class
    made = tools.run_tool("DelegationTokenCommand", [*base, "--create", "--max-life-time-period", "-1",
                                                      "--renewer-principal", "User:bob"], timeout=120)
    assert made.returncode == 0, made.stdout + made.stderr
    assert "Created delegation token with tokenId" in made.stdout, made.stdout
    row = [line for line in made.stdout.splitlines() if re.match(r"^[A-Za-z0-9_-]{22}\s", line)]
    assert row, made.stdout
    token_id, hmac_b64 = row[0].split()[:2]
    assert base64.b64decode(hmac_b64) == hmac.new(SECRET.encode(), token_id.encode(), hashlib.sha512).digest()
    # without --owner-principal the tool asks with an empty owner list, which Kafka answers with no tokens
    described = tools.run_tool("DelegationTokenCommand", [*base, "--describe"], timeout=120)
    assert described.returncode == 0 and "Total number of tokens : 0" in described.stdout, described.stdout
    owner = ["--owner-principal", "User:alice"]
    described = tools.run_tool("DelegationTokenCommand", [*base, "--describe", *owner], timeout=120)
    assert described.returncode == 0 and token_id in described.stdout, described.stdout + described.stderr
    renewed = tools.run_tool("DelegationTokenCommand", [*base, "--renew", "--hmac", hmac_b64,
                                                         "--renew-time-period", "-1"], timeout=120)
    assert renewed.returncode == 0 and "Completed renew operation" in renewed.stdout, renewed.stdout + renewed.stderr
    expired = tools.run_tool("DelegationTokenCommand", [*base, "--expire", "--hmac", hmac_b64,
                                                         "--expiry-time-period", "-1"], timeout=120)
    assert expired.returncode == 0 and "Completed expire operation" in expired.stdout, expired.stdout + expired.stderr
    described = tools.run_tool("DelegationTokenCommand", [*base, "--describe", *owner], timeout=120)
    assert described.returncode == 0 and token_id not in described.stdout, described.stdout


# -- minikafka only: restart, the expiry sweep, no secret key ---------------------------------------------

@pytest.mark.minikafka_only
def test_tokens_survive_restart_and_expired_ones_are_swept(tmp_path):
    data_dir = tmp_path / "data"
    assert format_scram(data_dir, SCRAM_USERS).returncode == 0
    b = start_minikafka(data_dir, {**CONFIG, "delegation.token.expiry.check.interval.ms": "500"})
    assert b.mk is not None
    try:
        with login(b, "alice") as alice:
            kept = create(alice, renewers=[("User", "bob")])
            short = create(alice)
            assert expire(alice, short.hmac, 1).error_code == 0  # expires in 1 ms: the sweep removes it
        b.mk.kill()  # kill -9 right after the acknowledged changes
        b.mk.start()
        with login(b, "alice") as alice:
            deadline = time.monotonic() + 10
            while short.token_id in ids(describe(alice)) and time.monotonic() < deadline:
                time.sleep(0.2)
            [t] = [t for t in describe(alice).tokens if t.token_id == kept.token_id]
            assert (t.expiry_timestamp, t.max_timestamp, bytes(t.hmac)) == (
                kept.expiry_timestamp_ms, kept.max_timestamp_ms, bytes(kept.hmac))
            assert short.token_id not in ids(describe(alice))
            assert renew(alice, short.hmac).error_code == NOT_FOUND
        client, error = token_login(b, kept.token_id, kept.hmac)
        assert error is None
        client.close()
    finally:
        b.mk.close()


@pytest.mark.minikafka_only
def test_without_a_secret_key_tokens_are_disabled(tmp_path):
    data_dir = tmp_path / "data"
    assert format_scram(data_dir, SCRAM_USERS).returncode == 0
    b = start_minikafka(data_dir)
    assert b.mk is not None
    try:
        with login(b, "alice") as alice:
            refused = create(alice)
            assert (refused.error_code, refused.principal_name, refused.issue_timestamp_ms, refused.token_id) == (
                DISABLED, "alice", 0, "")
            assert (renew(alice, b"x").error_code, renew(alice, b"x").expiry_timestamp_ms) == (DISABLED, 0)
            assert expire(alice, b"x").error_code == DISABLED
            assert describe(alice).error_code == DISABLED
    finally:
        b.mk.close()
