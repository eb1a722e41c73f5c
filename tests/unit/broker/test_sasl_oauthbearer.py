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


class _JwksServer:
    """A loopback HTTP JWKS endpoint that counts its fetches and answers after `delay` seconds."""

    def __init__(self, body: dict, delay: float = 0.0) -> None:
        import http.server
        import threading
        outer = self
        self.body, self.delay, self.fetches = body, delay, 0

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802
                outer.fetches += 1
                time.sleep(outer.delay)
                data = json.dumps(outer.body).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/jwks.json"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def test_jwks_over_http_fetched_off_the_event_loop_cached_and_refreshed_for_a_new_key():
    key = RSAKey.generate_key(2048, parameters={"kid": "k1", "use": "sig"})
    server = _JwksServer(KeySet([key]).as_dict(private=False), delay=0.5)
    clock = [1000.0]
    source = JwksSource(server.url, refresh_ms=3600_000, missing_kid_backoff_ms=10_000, wall=lambda: clock[0])
    v = JwksValidator(source)
    token = signed(key, {"sub": "alice", "iat": NOW, "exp": NOW + 60})

    async def run():
        ticks = 0

        async def ticker():
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1
        task = asyncio.create_task(ticker())
        # ten logins at once: one fetch, the loop keeps running while it is under way
        await asyncio.gather(*(v.prepare(token) for _ in range(10)))
        task.cancel()
        return ticks
    try:
        assert asyncio.run(run()) >= 20  # ~0.5 s of fetch; the event loop was never blocked
        assert server.fetches == 1 and v.validate(token, NOW * 1000).principal == "alice"
        asyncio.run(v.prepare(token))
        assert server.fetches == 1  # cached
        # the provider rotates its key: an unknown kid refetches, at most once per back-off
        new = RSAKey.generate_key(2048, parameters={"kid": "k2", "use": "sig"})
        server.body = KeySet([key, new]).as_dict(private=False)
        rotated = signed(new, {"sub": "bob", "iat": NOW, "exp": NOW + 60}, kid="k2")
        asyncio.run(v.prepare(rotated))
        assert server.fetches == 1  # fetched less than the back-off ago
        clock[0] += 11
        asyncio.run(v.prepare(rotated))
        assert server.fetches == 2 and v.validate(rotated, NOW * 1000).principal == "bob"
        asyncio.run(v.prepare(signed(new, {}, kid="k3")))
        assert server.fetches == 2  # an unknown kid does not refetch within the back-off
        clock[0] += 3600
        asyncio.run(v.prepare(rotated))
        assert server.fetches == 3  # sasl.oauthbearer.jwks.endpoint.refresh.ms
    finally:
        server.close()


def test_jwks_endpoint_down_keeps_the_cached_keys():
    key = RSAKey.generate_key(2048, parameters={"kid": "k1", "use": "sig"})
    server = _JwksServer(KeySet([key]).as_dict(private=False))
    clock = [1000.0]
    source = JwksSource(server.url, refresh_ms=1000, missing_kid_backoff_ms=10_000, wall=lambda: clock[0])
    v = JwksValidator(source)
    token = signed(key, {"sub": "alice", "iat": NOW, "exp": NOW + 60})
    asyncio.run(v.prepare(token))
    server.close()
    clock[0] += 5
    asyncio.run(v.prepare(token))  # the refresh fails: logged, the old keys stay
    assert v.validate(token, NOW * 1000).principal == "alice"


# -- configuration (broker/security/sasl/settings.py) ----------------------------------------------------
JAAS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
VALIDATOR_CLASS = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


def broker_config(tmp_path, **props: str):
    from minikafka.broker.config.core import BrokerConfig
    return BrokerConfig({"log.dirs": str(tmp_path / "data"), "listeners": "SASL_PLAINTEXT://127.0.0.1:9092",
                         "sasl.enabled.mechanisms": "OAUTHBEARER",
                         "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": JAAS, **props})


def test_unsecured_validator_is_the_default(tmp_path):
    cfg = broker_config(tmp_path, **{"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
                                     JAAS[:-1] + ' unsecuredValidatorRequiredScope="a b";'})
    assert cfg.sasl["SASL_PLAINTEXT"].oauth == UnsecuredValidator(required_scope=("a", "b"))


def test_jwks_validator_keys_resolved_as_kafka(tmp_path, jwks):
    _, path = jwks
    cfg = broker_config(tmp_path, **{
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": VALIDATOR_CLASS,
        "listener.name.sasl_plaintext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url": path.as_uri(),
        "listener.name.sasl_plaintext.sasl.oauthbearer.expected.issuer": "https://iss",
        "sasl.oauthbearer.expected.audience": "a1, a2",
        "sasl.oauthbearer.sub.claim.name": "client_id"})
    v = cfg.sasl["SASL_PLAINTEXT"].oauth
    assert isinstance(v, JwksValidator)
    assert (v.source.url, v.expected_issuer, v.expected_audience, v.clock_skew_s, v.sub_claim, v.scope_claim) == (
        path.as_uri(), "https://iss", ("a1", "a2"), 30, "client_id", "scope")
    assert (v.source.refresh_s, v.source.missing_kid_backoff_s) == (3600.0, 10.0)


@pytest.mark.parametrize("props,message", [
    ({"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": VALIDATOR_CLASS},
     'requires "sasl.oauthbearer.jwks.endpoint.url" to be configured'),
    ({"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": VALIDATOR_CLASS,
      "sasl.oauthbearer.jwks.endpoint.url": "ftp://x/jwks"}, 'contains an invalid protocol (ftp)'),
    ({"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": VALIDATOR_CLASS,
      "sasl.oauthbearer.jwks.endpoint.url": "file:///nonexistent/jwks.json"}, "that doesn't exist"),
    ({"listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class": "com.example.Mine"},
     "com.example.Mine is not supported"),
    ({"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config": ""}, "Could not find a 'KafkaServer'"),
    ({"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
      "org.apache.kafka.common.security.plain.PlainLoginModule required;"}, "no org.apache.kafka.common.security."
                                                                           "oauthbearer.OAuthBearerLoginModule entry"),
    ({"listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config":
      JAAS[:-1] + ' unsecuredValidatorAllowableClockSkewMs="-5";'}, "must not be negative"),
])
def test_unusable_oauthbearer_config_refused_at_start(tmp_path, props, message):
    from minikafka.broker.config.core import ConfigError
    with pytest.raises(ConfigError) as err:
        broker_config(tmp_path, **props)
    assert message in str(err.value)


def test_listener_prefixed_oauthbearer_keys_are_known():
    from minikafka.broker.security.sasl.settings import is_sasl_key
    assert is_sasl_key("listener.name.ext.oauthbearer.sasl.server.callback.handler.class")
    assert is_sasl_key("listener.name.ext.oauthbearer.sasl.oauthbearer.jwks.endpoint.url")
    assert is_sasl_key("listener.name.ext.oauthbearer.sasl.jaas.config")
    assert not is_sasl_key("listener.name.ext.oauthbearer.sasl.oauthbearer.nonsense")


def test_oauthbearer_is_no_mechanism_for_a_nodes_own_connections(tmp_path):
    from minikafka.broker.config.core import BrokerConfig, ConfigError
    from minikafka.broker.security.peer_security import peer_factory
    cfg = BrokerConfig({
        "node.id": "1", "process.roles": "broker,controller", "log.dirs": str(tmp_path),
        "controller.quorum.voters": "1@127.0.0.1:9093,2@127.0.0.1:9193,3@127.0.0.1:9293",
        "controller.listener.names": "CONTROLLER", "inter.broker.listener.name": "INTERNAL",
        "listeners": "INTERNAL://127.0.0.1:9094,CONTROLLER://127.0.0.1:9093",
        "listener.security.protocol.map": "INTERNAL:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
        "sasl.enabled.mechanisms": "OAUTHBEARER", "sasl.mechanism.inter.broker.protocol": "OAUTHBEARER",
        "listener.name.internal.oauthbearer.sasl.jaas.config": JAAS})
    with pytest.raises(ConfigError, match="does not support for its own connections"):
        peer_factory(cfg)


@pytest.mark.parametrize("validator", ["unsecured", "jwks"])
def test_hostile_first_messages_only_ever_fail_authentication(jwks, validator):
    """Random and crafted messages: the server answers, or raises its two authentication errors, nothing else."""
    import random
    _, path = jwks
    if validator == "jwks":
        v = JwksValidator(JwksSource(path.as_uri(), 3600_000, 10_000))
        asyncio.run(v.prepare(""))
    else:
        v = UnsecuredValidator()
    rng = random.Random(31)
    crafted = [unsecured({"sub": "a", "exp": 10 ** 400}), unsecured({"sub": "a", "exp": 1, "iat": [1]}),
               unsecured({"sub": ["a"], "exp": NOW + 9}), unsecured({"sub": "a", "exp": True}),
               f"{b64({'alg': 'none'})}.{base64.urlsafe_b64encode(b'[' * 100000).decode()}.",
               f"{base64.urlsafe_b64encode(b'{' * 100000).decode()}.e30.", "a.b.c", "....", "=.=.=",
               f"{b64({'alg': 'RS256', 'kid': 7})}.{b64({'sub': 'a'})}.AAAA"]
    messages = [first_message(t) for t in crafted]
    messages += [bytes(rng.getrandbits(8) for _ in range(rng.randrange(0, 300))) for _ in range(200)]
    messages += [first_message("".join(rng.choice("ab.-_~+/=") for _ in range(rng.randrange(1, 80))))
                 for _ in range(200)]
    for message in messages:
        server = OAuthBearerServer(v, wall=lambda: NOW)
        try:
            answer = server.evaluate(message)
        except (OAuthSaslError, OAuthAuthError):
            continue
        assert answer in (b"", b'{"status":"invalid_token"}')
        assert not server.complete or server.username
