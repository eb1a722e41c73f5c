"""The pure parts of delegation tokens (broker/security/delegation_tokens.py): the controller's
decisions (DelegationTokenControlManager's rules), the describe filter, the durable store, and a SCRAM
login with the extension tokenauth=true through ScramServer and SaslAuthenticator."""
from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest

from minikafka.broker.security.delegation_tokens import (DelegationTokenStore, TokenInfo, TokenSettings,
                                                         TokenStoreError, decide_create, decide_expire, decide_renew,
                                                         describe_filter, token_hmac)
from minikafka.broker.security.sasl.authenticator import SaslAuthenticator
from minikafka.broker.security.sasl.scram import ScramClient, ScramError, ScramServer, extensions_of
from minikafka.broker.security.sasl.settings import ListenerSasl
from minikafka.protocol.errors import (DELEGATION_TOKEN_AUTH_DISABLED, DELEGATION_TOKEN_EXPIRED,
                                       DELEGATION_TOKEN_NOT_FOUND, DELEGATION_TOKEN_OWNER_MISMATCH,
                                       INVALID_PRINCIPAL_TYPE)

ON = TokenSettings("secret", max_lifetime_ms=10_000, expiry_time_ms=1_000)
OFF = TokenSettings(None)
NOW = 1_000_000


def token(**kw) -> TokenInfo:
    base = dict(token_id="t1", owner="User:alice", requester="User:alice", renewers=("User:bob",),
                issue_ms=NOW, max_ms=NOW + 10_000, expiry_ms=NOW + 1_000)
    return TokenInfo(**{**base, **kw})


def test_hmac_is_hmac_sha512_of_the_token_id():
    assert token_hmac("k", "id") == hmac.new(b"k", b"id", hashlib.sha512).digest()


def test_create_lifetimes_and_errors():
    d = decide_create(ON, "User:alice", "User:alice", [("User", "bob")], -1, NOW, token_id="t1")
    assert (d.error, d.token.issue_ms, d.token.expiry_ms, d.token.max_ms) == (0, NOW, NOW + 1_000, NOW + 10_000)
    assert d.hmac == token_hmac("secret", "t1") and d.upsert == d.token and d.token.renewers == ("User:bob",)
    d = decide_create(ON, "User:alice", "User:alice", [], 500, NOW)  # a shorter max lifetime caps the expiry
    assert (d.token.expiry_ms, d.token.max_ms) == (NOW + 500, NOW + 500)
    d = decide_create(ON, "User:alice", "User:alice", [], 50_000, NOW)  # never past the broker's max
    assert d.token.max_ms == NOW + 10_000
    assert decide_create(OFF, "User:a", "User:a", [], -1, NOW).error == DELEGATION_TOKEN_AUTH_DISABLED
    bad = decide_create(ON, "User:a", "User:a", [("Group", "g")], -1, NOW)
    assert (bad.error, bad.upsert) == (INVALID_PRINCIPAL_TYPE, None)
    big = decide_create(TokenSettings("s", max_lifetime_ms=2 ** 63 - 1, expiry_time_ms=2 ** 63 - 1), "User:a",
                        "User:a", [], -1, NOW)
    assert big.token.max_ms == 2 ** 63 - 1  # Kafka's saturating sum


def test_renew():
    t = token()
    assert decide_renew(OFF, t, "User:alice", -1, NOW).error == DELEGATION_TOKEN_AUTH_DISABLED
    assert decide_renew(ON, None, "User:alice", -1, NOW).error == DELEGATION_TOKEN_NOT_FOUND
    assert decide_renew(ON, t, "User:carol", -1, NOW).error == DELEGATION_TOKEN_OWNER_MISMATCH
    assert decide_renew(ON, t, "User:alice", -1, NOW + 1_001).error == DELEGATION_TOKEN_EXPIRED
    d = decide_renew(ON, t, "User:bob", 300, NOW + 500)
    assert (d.error, d.expiry_ms, d.upsert.expiry_ms) == (0, NOW + 800, NOW + 800)
    assert decide_renew(ON, t, "User:alice", 5_000, NOW + 500).expiry_ms == NOW + 1_500  # at most the expiry time
    late = token(expiry_ms=NOW + 9_900)
    assert decide_renew(ON, late, "User:alice", -1, NOW + 9_800).expiry_ms == NOW + 10_000  # at most max


def test_expire():
    t = token()
    assert decide_expire(ON, None, "User:alice", 0, NOW).error == DELEGATION_TOKEN_NOT_FOUND
    assert decide_expire(ON, t, "User:carol", -1, NOW).error == DELEGATION_TOKEN_OWNER_MISMATCH
    d = decide_expire(ON, t, "User:alice", -1, NOW + 5_000)  # negative: removed, even when expired
    assert (d.error, d.remove, d.expiry_ms) == (0, "t1", NOW + 5_000)
    assert decide_expire(ON, t, "User:alice", 10, NOW + 5_000).error == DELEGATION_TOKEN_EXPIRED
    d = decide_expire(ON, t, "User:bob", 100, NOW)
    assert (d.error, d.upsert.expiry_ms) == (0, NOW + 100)
    assert decide_expire(ON, t, "User:alice", 10**9, NOW).expiry_ms == NOW + 10_000


def test_describe_filter():
    t = token()
    no = lambda _: False  # noqa: E731
    assert describe_filter("User:alice", None, t, no, no)
    assert describe_filter("User:bob", None, t, no, no)
    assert not describe_filter("User:carol", None, t, no, no)
    assert describe_filter("User:carol", None, t, lambda tid: tid == "t1", no)
    assert describe_filter("User:carol", None, t, no, lambda owner: owner == "User:alice")
    assert not describe_filter("User:alice", ["User:carol"], t, no, no)
    assert describe_filter("User:alice", ["User:bob"], t, no, no)


def test_store_persists_without_the_hmac_and_refuses_a_bad_file(tmp_path):
    store = DelegationTokenStore(tmp_path, ON).load()
    store.apply([token(), token(token_id="t2")])
    doc = json.loads((tmp_path / "delegation-tokens.json").read_text())
    assert set(doc["tokens"]) == {"t1", "t2"} and "hmac" not in json.dumps(doc)
    again = DelegationTokenStore(tmp_path, ON).load()
    assert again.get("t1") == token()
    assert again.by_hmac(token_hmac("secret", "t2")).token_id == "t2"
    assert again.hmac_of("t1") == token_hmac("secret", "t1")
    again.apply([token(expiry_ms=NOW + 5)], ["t2"])
    third = DelegationTokenStore(tmp_path, ON).load()
    assert [t.token_id for t in third.tokens()] == ["t1"] and third.get("t1").expiry_ms == NOW + 5
    assert third.expired(NOW + 6) == ["t1"] and third.expired(NOW) == []
    (tmp_path / "delegation-tokens.json").write_text("{not json")
    with pytest.raises(TokenStoreError):
        DelegationTokenStore(tmp_path, ON).load()


def _login(server: ScramServer, client: ScramClient, extensions: str = ",tokenauth=true") -> None:
    client._bare += extensions
    final = server.evaluate(client.final(server.evaluate(client.first())))
    assert client.verify(final)


def test_scram_token_login_is_the_owner():
    store = DelegationTokenStore(None, ON)
    store.apply([token()])
    password = base64.b64encode(token_hmac("secret", "t1")).decode()
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        server = ScramServer(mechanism, lambda u, m: None, token_lookup=store.scram_lookup)
        _login(server, ScramClient(mechanism, "t1", password))
        assert (server.username, server.authorization_id, server.token_authenticated) == ("t1", "alice", True)
        assert server.token_expiry_ms == NOW + 1_000
    wrong = ScramServer("SCRAM-SHA-256", lambda u, m: None, token_lookup=store.scram_lookup)
    with pytest.raises(ScramError):
        _login(wrong, ScramClient("SCRAM-SHA-256", "t1", "not-the-hmac"))
    unknown = ScramServer("SCRAM-SHA-256", lambda u, m: None, token_lookup=store.scram_lookup)
    with pytest.raises(ScramError, match="Invalid tokenId"):
        _login(unknown, ScramClient("SCRAM-SHA-256", "t9", password))
    # without the extension the token id is looked up as an ordinary user (none here)
    plain = ScramServer("SCRAM-SHA-256", lambda u, m: None, token_lookup=store.scram_lookup)
    with pytest.raises(ScramError):
        _login(plain, ScramClient("SCRAM-SHA-256", "t1", password), extensions="")
    assert extensions_of(",tokenauth=true,a=b") == {"tokenauth": "true", "a": "b"}


def test_authenticator_marks_a_token_session():
    store = DelegationTokenStore(None, ON)
    store.apply([token()])
    settings = ListenerSasl("SASL_PLAINTEXT", ("SCRAM-SHA-256",), failed_auth_delay_ms=0)
    sasl = SaslAuthenticator(settings, lambda u, m: None, token_lookup=store.scram_lookup)
    sasl.check_request(17)
    sasl.handshake("SCRAM-SHA-256", 1)
    client = ScramClient("SCRAM-SHA-256", "t1", base64.b64encode(token_hmac("secret", "t1")).decode())
    client._bare += ",tokenauth=true"
    first, _ = sasl.evaluate(client.first())
    final, _ = sasl.evaluate(client.final(first))
    assert client.verify(final)
    assert (sasl.principal, sasl.token_authenticated, sasl.authenticated) == ("User:alice", True, True)
