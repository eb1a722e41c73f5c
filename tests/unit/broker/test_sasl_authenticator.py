"""The per-connection SASL state machine (broker/security/sasl/authenticator.py) without sockets: what may be
processed in which state, failures are terminal, re-authentication rules (KIP-368)."""
from __future__ import annotations

import pytest

from minikafka.broker.security.sasl.authenticator import (AUTHENTICATE, COMPLETE, FAILED, HANDSHAKE, SaslAuthenticator,
                                                 SaslFailure, SessionExpired)
from minikafka.broker.security.sasl.scram import ScramClient, ScramCredential
from minikafka.broker.security.sasl.settings import ListenerSasl

API_VERSIONS, HANDSHAKE_KEY, AUTHENTICATE_KEY, METADATA, PRODUCE = 18, 17, 36, 3, 0
CRED = ScramCredential.from_password("SCRAM-SHA-256", "bob-secret", 4096)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def make(reauth_ms: int = 0, clock: Clock | None = None) -> SaslAuthenticator:
    settings = ListenerSasl("SASL_PLAINTEXT", ("PLAIN", "SCRAM-SHA-256"), {"alice": "alice-secret"},
                            {"PLAIN": reauth_ms, "SCRAM-SHA-256": reauth_ms})
    return SaslAuthenticator(settings, lambda u, m: CRED if u == "bob" else None, clock or Clock())


def plain_login(auth: SaslAuthenticator, user: str = "alice", password: str = "alice-secret") -> int:
    auth.check_request(HANDSHAKE_KEY)
    auth.handshake("PLAIN", 1)
    auth.check_request(AUTHENTICATE_KEY)
    return auth.evaluate(f"\0{user}\0{password}".encode())[1]


def test_only_api_versions_and_handshake_before_authentication():
    auth = make()
    auth.check_request(API_VERSIONS)
    auth.api_versions_answered(True)
    assert auth.state == HANDSHAKE
    with pytest.raises(SaslFailure) as info:  # a second ApiVersions
        auth.check_request(API_VERSIONS)
    assert not info.value.delayed and auth.state == FAILED
    for key in (METADATA, PRODUCE, AUTHENTICATE_KEY):
        with pytest.raises(SaslFailure):
            make().check_request(key)


def test_after_the_handshake_only_sasl_authenticate():
    auth = make()
    auth.check_request(HANDSHAKE_KEY)
    auth.handshake("PLAIN", 1)
    assert auth.state == AUTHENTICATE
    with pytest.raises(SaslFailure) as info:
        auth.check_request(METADATA)
    assert info.value.delayed and "during SASL authentication" in str(info.value)


def test_plain_success_sets_the_principal_and_failure_is_terminal():
    auth = make()
    assert plain_login(auth) == 0
    assert (auth.state, auth.principal, auth.authenticated) == (COMPLETE, "User:alice", True)
    auth.check_request(PRODUCE)
    bad = make()
    with pytest.raises(SaslFailure, match="Invalid username or password"):
        plain_login(bad, password="nope")
    assert bad.state == FAILED and bad.principal is None
    with pytest.raises(SaslFailure):
        bad.check_request(PRODUCE)


def test_unsupported_mechanism_answers_the_list_in_kafka_order():
    auth = make()
    with pytest.raises(SaslFailure) as info:
        auth.handshake("GSSAPI", 1)
    assert info.value.response.error_code == 33
    assert info.value.response.mechanisms == ["PLAIN", "SCRAM-SHA-256"]


def test_handshake_v0_switches_to_raw_tokens_until_complete():
    auth = make()
    auth.handshake("SCRAM-SHA-256", 0)
    assert auth.raw_tokens
    client = ScramClient("SCRAM-SHA-256", "bob", "bob-secret")
    first, _ = auth.evaluate(client.first())
    final, _ = auth.evaluate(client.final(first))
    assert client.verify(final) and auth.principal == "User:bob" and not auth.raw_tokens


def test_session_expiry_and_reauthentication_rules():
    clock = Clock()
    auth = make(reauth_ms=5000, clock=clock)
    assert plain_login(auth) == 5000
    clock.now += 0.5
    auth.check_request(HANDSHAKE_KEY)  # begins re-authentication
    assert auth.state == HANDSHAKE and auth.reauthenticating
    auth.handshake("PLAIN", 1)
    assert auth.evaluate(b"\0alice\0alice-secret")[1] == 5000
    clock.now += 0.5  # within a second of the last re-authentication: handled as a normal request
    auth.check_request(HANDSHAKE_KEY)
    assert auth.state == COMPLETE
    clock.now += 5.0
    with pytest.raises(SessionExpired):
        auth.check_request(PRODUCE)


def test_reauthentication_keeps_mechanism_and_principal():
    clock = Clock()
    auth = make(reauth_ms=5000, clock=clock)
    plain_login(auth)
    clock.now += 1.5
    auth.check_request(HANDSHAKE_KEY)
    auth.handshake("SCRAM-SHA-256", 1)  # accepted, then the next token fails (Kafka's REAUTH_BAD_MECHANISM)
    with pytest.raises(SaslFailure, match="not supported for re-authentication"):
        auth.check_request(AUTHENTICATE_KEY)
    auth = make(reauth_ms=5000, clock=clock)
    users = {"alice": "alice-secret", "carol": "carol-secret"}
    auth.settings.plain_users.update(users)  # type: ignore[attr-defined]
    plain_login(auth)
    clock.now += 1.5
    auth.check_request(HANDSHAKE_KEY)
    auth.handshake("PLAIN", 1)
    with pytest.raises(SaslFailure, match="Cannot change principals during re-authentication from User.alice: User.carol"):
        auth.evaluate(b"\0carol\0carol-secret")
    assert auth.state == FAILED


def test_without_reauth_ms_a_handshake_after_authentication_is_not_a_reauthentication():
    auth = make()
    plain_login(auth)
    auth.check_request(HANDSHAKE_KEY)  # goes to the handler, which answers ILLEGAL_SASL_STATE
    assert auth.state == COMPLETE and auth.session_expires_at is None
