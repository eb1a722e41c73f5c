"""SASL/OAUTHBEARER's pure parts (broker/security/sasl/oauthbearer.py): the client's first message as
Kafka's OAuthBearerClientInitialResponse parses it, Kafka's unsecured validator, the JWKS validator
with keys generated here (joserfc), and the server's error exchange (JSON error, then `\\x01`)."""
from __future__ import annotations

import asyncio
import base64
import json
import time

import pytest
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey

from minikafka.broker.security.sasl.oauthbearer import (JwksSource, JwksValidator, OAuthAuthError, OAuthBearerServer,
                                                        OAuthSaslError, TokenError, UnsecuredValidator, json_error,
                                                        parse_initial_response)

NOW = 1_700_000_000


def b64(obj) -> str:
    return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()


def unsecured(claims: dict, header: dict | None = None, signature: str = "") -> str:
    return f"{b64({'alg': 'none'} if header is None else header)}.{b64(claims)}.{signature}"


def first_message(token: str, authzid: str = "", extensions: dict | None = None) -> bytes:
    ext = "".join(f"{k}={v}\x01" for k, v in (extensions or {}).items())
    return f"n,{'a=' + authzid if authzid else ''},\x01auth=Bearer {token}\x01{ext}\x01".encode()


def test_initial_response_parsed_as_kafka():
    assert parse_initial_response(first_message("abc.def.", "alice", {"traceId": "123"})) == (
        "abc.def.", "alice", {"traceId": "123"})
    assert parse_initial_response(b"n,,\x01auth=bearer t0k=\x01\x01") == ("t0k=", "", {})


@pytest.mark.parametrize("message,error", [
    (b"", "Invalid OAUTHBEARER client first message"),
    (b"y,,\x01auth=Bearer abc\x01\x01", "Invalid OAUTHBEARER client first message"),
    (b"n,,\x01auth=Bearer abc\x01", "Invalid OAUTHBEARER client first message"),  # no closing \x01
    (b"n,,\x01x=y\x01\x01", "Invalid OAUTHBEARER client first message: 'auth' not specified"),
    (b"n,,\x01auth=Bearer\x01\x01", "Invalid OAUTHBEARER client first message: invalid 'auth' format"),
    (b"n,,\x01auth=Basic abc\x01\x01", "Invalid scheme in OAUTHBEARER client first message: Basic"),
])
def test_malformed_initial_response(message, error):
    with pytest.raises(OAuthSaslError, match="^" + error.replace("(", r"\(") + "$"):
        parse_initial_response(message)


def test_unsecured_token_gives_the_principal_and_expiry():
    token = UnsecuredValidator().validate(unsecured({"sub": "alice", "iat": NOW, "exp": NOW + 60}), NOW * 1000)
    assert (token.principal, token.lifetime_ms) == ("alice", (NOW + 60) * 1000)


@pytest.mark.parametrize("claims,header,signature", [
    ({"sub": "alice", "exp": NOW - 1}, None, ""),                    # expired
    ({"sub": "alice", "exp": NOW}, None, ""),                        # exp == now: expired as in Kafka
    ({"sub": "alice"}, None, ""),                                    # no exp
    ({"exp": NOW + 60}, None, ""),                                   # no sub
    ({"sub": "  ", "exp": NOW + 60}, None, ""),
    ({"sub": 7, "exp": NOW + 60}, None, ""),
    ({"sub": "alice", "exp": NOW + 60, "iat": NOW + 30}, None, ""),  # issued in the future
    ({"sub": "alice", "exp": NOW + 60, "iat": NOW + 60 - 0.5}, None, "x"),
    ({"sub": "alice", "exp": NOW + 60}, {"alg": "RS256"}, ""),
    ({"sub": "alice", "exp": NOW + 60}, {}, ""),
])
def test_unsecured_token_refused(claims, header, signature):
    with pytest.raises(TokenError):
        UnsecuredValidator().validate(unsecured(claims, header, signature), NOW * 1000)


def test_unsecured_options_claim_name_skew_and_scope():
    v = UnsecuredValidator.from_options({"unsecuredValidatorPrincipalClaimName": "user",
                                         "unsecuredValidatorAllowableClockSkewMs": "5000",
                                         "unsecuredValidatorRequiredScope": "read write"})
    ok = {"user": "bob", "exp": NOW - 2, "iat": NOW - 10, "scope": ["read", "write", "x"]}
    assert v.validate(unsecured(ok), NOW * 1000).principal == "bob"  # expired 2 s ago, within the 5 s skew
    assert v.validate(unsecured({**ok, "iat": NOW + 3, "exp": NOW + 60}), NOW * 1000).principal == "bob"
    with pytest.raises(TokenError):
        v.validate(unsecured({**ok, "exp": NOW - 6}), NOW * 1000)
    with pytest.raises(TokenError) as exc:
        v.validate(unsecured({**ok, "scope": ["read"]}), NOW * 1000)
    assert json_error(exc.value.status, exc.value.scope) == '{"status":"insufficient_scope", "scope":"[read, write]"}'
    with pytest.raises(ValueError):
        UnsecuredValidator.from_options({"unsecuredValidatorAllowableClockSkewMs": "-1"})


def test_server_error_exchange_as_kafka():
    server = OAuthBearerServer(UnsecuredValidator(), wall=lambda: NOW)
    answer = server.evaluate(first_message(unsecured({"sub": "alice", "exp": NOW - 5})))
    assert answer == b'{"status":"invalid_token"}' and not server.complete
    with pytest.raises(OAuthAuthError, match='^{"status":"invalid_token"}$'):
        server.evaluate(b"\x01")
    server = OAuthBearerServer(UnsecuredValidator(), wall=lambda: NOW)
    with pytest.raises(OAuthAuthError, match="different from the token's principal name"):
        server.evaluate(first_message(unsecured({"sub": "alice", "exp": NOW + 5}), authzid="bob"))
    server = OAuthBearerServer(UnsecuredValidator(), wall=lambda: NOW)
    assert server.evaluate(first_message(unsecured({"sub": "alice", "exp": NOW + 5}), "alice", {"a": "b"})) == b""
    assert (server.complete, server.username, server.credential_expiration_ms) == (True, "alice", (NOW + 5) * 1000)


@pytest.fixture()
def jwks(tmp_path):
    key = RSAKey.generate_key(2048, parameters={"kid": "k1", "use": "sig", "alg": "RS256"})
    path = tmp_path / "jwks.json"
    path.write_text(json.dumps(KeySet([key]).as_dict(private=False)))
    return key, path


def signed(key, claims: dict, kid: str = "k1") -> str:
    return jwt.encode({"alg": "RS256", "kid": kid}, claims, key)


def test_jwks_validator(jwks):
    key, path = jwks
    v = JwksValidator(JwksSource(path.as_uri(), 3600_000, 10_000), ("kafka",), "https://issuer", 30)
    good = {"sub": "alice", "iat": NOW, "exp": NOW + 60, "aud": "kafka", "iss": "https://issuer"}
    asyncio.run(v.prepare(signed(key, good)))
    assert v.validate(signed(key, good), NOW * 1000).principal == "alice"
    assert v.validate(signed(key, {**good, "aud": ["x", "kafka"]}), NOW * 1000).principal == "alice"
    assert v.validate(signed(key, {**good, "exp": NOW - 20}), NOW * 1000).principal == "alice"  # 30 s skew
    other = RSAKey.generate_key(2048, parameters={"kid": "k1"})
    for bad in (signed(key, {**good, "aud": "other"}), signed(key, {**good, "iss": "https://evil"}),
                signed(key, {**good, "exp": NOW - 31}), signed(key, {k: v for k, v in good.items() if k != "iat"}),
                signed(key, {k: v for k, v in good.items() if k != "sub"}), signed(other, good),
                unsecured(good), signed(key, good, kid="unknown")):
        with pytest.raises(TokenError):
            v.validate(bad, NOW * 1000)


def test_jwks_file_reloaded_when_it_changes(jwks):
    key, path = jwks
    source = JwksSource(path.as_uri(), 3600_000, 0)
    v = JwksValidator(source)
    asyncio.run(v.prepare(signed(key, {})))
    new = RSAKey.generate_key(2048, parameters={"kid": "k2", "use": "sig"})
    path.write_text(json.dumps(KeySet([key, new]).as_dict(private=False)))
    import os
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    token = signed(new, {"sub": "bob", "iat": NOW, "exp": NOW + 60}, kid="k2")
    asyncio.run(v.prepare(token))
    assert v.validate(token, NOW * 1000).principal == "bob" and source.fetches == 2
