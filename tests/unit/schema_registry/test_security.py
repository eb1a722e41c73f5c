"""The registry listener's security and counters, pure parts (auth.py, access.py, metrics.py) and the
middlewares (rest_security.py) over a loopback aiohttp server with the registry in memory."""
from __future__ import annotations

import asyncio
import base64
import json

import pytest

from minikafka.broker.security.sasl.scram import ScramCredential
from minikafka.schema_registry import auth
from minikafka.schema_registry.access import SCHEMAS_TOPIC, Access, rule, topic_of
from minikafka.schema_registry.metrics import family, status_class


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_parse_basic() -> None:
    assert auth.parse_basic(basic("alice", "s3:cret")) == ("alice", "s3:cret")
    assert auth.parse_basic("basic " + base64.b64encode(b"bob:").decode()) == ("bob", "")
    assert auth.parse_basic(basic("\u00e9l\u00e8ve", "p\u00e4ss")) == ("\u00e9l\u00e8ve", "p\u00e4ss")
    for bad in (None, "", "Basic", "Basic !!!!", "Bearer abc", "Basic " + base64.b64encode(b"nocolon").decode(),
                "Basic " + base64.b64encode(b":pw").decode(), "Basic " + base64.b64encode(b"\xff:x").decode()):
        assert auth.parse_basic(bad) is None, bad


def test_resolve_method() -> None:
    assert auth.resolve_method("", sasl_listeners=True) == "BASIC"
    assert auth.resolve_method(" ", sasl_listeners=False) == "NONE"
    assert auth.resolve_method("none", sasl_listeners=True) == "NONE"
    assert auth.resolve_method("Basic", sasl_listeners=False) == "BASIC"
    with pytest.raises(ValueError, match="NONE or BASIC"):
        auth.resolve_method("digest", sasl_listeners=False)


def test_scram_and_plain_verification() -> None:
    for mechanism in auth.HASHES:
        cred = ScramCredential.from_password(mechanism, "pa55", iterations=4096)
        assert auth.scram_matches(mechanism, "pa55", cred.salt, cred.stored_key, cred.iterations)
        assert not auth.scram_matches(mechanism, "pa56", cred.salt, cred.stored_key, cred.iterations)
    assert auth.plain_matches("x", ["y", "x"]) and not auth.plain_matches("x", []) and not auth.plain_matches("x", ["X"])


def test_authenticator_plain_scram_and_cache(monkeypatch) -> None:
    creds = {"carol": {"SCRAM-SHA-512": ScramCredential.from_password("SCRAM-SHA-512", "carol-pw")}}
    derived = []
    real = auth.scram_matches

    def counting(*args):
        derived.append(args[0])
        return real(*args)
    monkeypatch.setattr(auth, "scram_matches", counting)
    authn = auth.Authenticator(lambda u: {"dave": ("dave-pw",)}.get(u, ()), lambda u: creds.get(u, {}))

    async def scenario() -> None:
        assert await authn.authenticate(basic("dave", "dave-pw")) == "User:dave"
        assert await authn.authenticate(basic("dave", "nope")) is None  # no SCRAM credential: a dummy derivation
        assert await authn.authenticate(basic("carol", "carol-pw")) == "User:carol"
        assert await authn.authenticate(basic("carol", "carol-pw")) == "User:carol"  # remembered: no derivation
        assert derived == ["SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert await authn.authenticate(basic("carol", "wrong")) is None
        assert await authn.authenticate(basic("nobody", "x")) is None  # a dummy derivation
        assert len(derived) == 4
        creds["carol"] = {"SCRAM-SHA-512": ScramCredential.from_password("SCRAM-SHA-512", "new-pw")}
        assert await authn.authenticate(basic("carol", "carol-pw")) is None  # a changed credential is derived again
        assert await authn.authenticate(basic("carol", "new-pw")) == "User:carol"
        assert await authn.authenticate(None) is None
    asyncio.run(scenario())


def test_topic_of_and_rules() -> None:
    assert [topic_of(s) for s in ("orders-value", "orders-key", "com.example.User", "-value", "a-b-value")] == \
        ["orders", "orders", "com.example.User", "-value", "a-b"]
    assert rule("GET", "/subjects/{subject}/versions/{version}") == ("subject", "READ")
    assert rule("POST", "/subjects/{subject}") == ("subject", "READ")
    assert rule("POST", "/compatibility/subjects/{subject}/versions") == ("subject", "READ")
    assert rule("POST", "/subjects/{subject}/versions") == ("subject", "WRITE")
    assert rule("DELETE", "/subjects/{subject}") == ("subject", "WRITE")
    assert rule("PUT", "/config/{subject}") == ("subject", "WRITE")
    assert rule("GET", "/schemas/ids/{id}") == ("id", "READ")
    assert rule("GET", "/config") == ("global", "DESCRIBE_CONFIGS")
    assert rule("PUT", "/mode") == ("global", "ALTER_CONFIGS")
    assert rule("GET", "/subjects").scope == rule("GET", "/schemas/types").scope == "open"
    assert rule("GET", "/v1/metadata/id") == ("global", "READ")


def test_access_decisions_and_filtering() -> None:
    acls = {("User:p", "WRITE", "orders"), ("User:c", "READ", "orders"), ("User:admin", "READ", SCHEMAS_TOPIC),
            ("User:admin", "DESCRIBE", SCHEMAS_TOPIC)}
    asked = []

    def authorize(principal: str, host: str, operation: str, topic: str) -> bool:
        asked.append((principal, host, operation, topic))
        implied = {"DESCRIBE": ("DESCRIBE", "READ", "WRITE")}.get(operation, (operation,))
        return any((principal, op, topic) in acls for op in implied)
    access = Access(authorize, lambda i: {1: ["orders-value"], 2: ["payments-value"]}.get(i, []))
    subject = {"subject": "orders-value"}
    assert access.denial("User:p", "h", "POST", "/subjects/{subject}/versions", subject) is None
    assert access.denial("User:p", "h", "GET", "/subjects/{subject}/versions", subject) == \
        "User is denied operation Read on Subject: orders-value"
    assert asked[-2:] == [("User:p", "h", "READ", "orders"), ("User:p", "h", "READ", SCHEMAS_TOPIC)]
    assert access.denial("User:c", "h", "GET", "/schemas/ids/{id}", {"id": "1"}) is None
    assert access.denial("User:c", "h", "GET", "/schemas/ids/{id}", {"id": "2"}) == \
        "User is denied operation Read on Schema: 2"
    assert access.denial("User:c", "h", "GET", "/schemas/ids/{id}", {"id": "3"}) is None  # none: 40403 answers
    assert access.denial("User:admin", "h", "GET", "/subjects/{subject}", {"subject": "x-key"}) is None
    assert access.denial("User:c", "h", "PUT", "/config", {}) == \
        "User is denied operation AlterConfigs on Topic: _schemas"
    listing = ["orders-value", "payments-value"]
    assert access.filtered("User:c", "h", "/subjects", listing) == ["orders-value"]
    assert access.filtered("User:p", "h", "/subjects", listing) == ["orders-value"]  # WRITE implies DESCRIBE
    assert access.filtered("User:p", "h", "/schemas", [{"subject": "orders-value"}]) == []  # bodies need READ
    assert access.filtered("User:admin", "h", "/subjects", listing) is listing


def test_metrics_labels() -> None:
    assert [family(p) for p in ("/", "/subjects/x/versions", "/schemas/ids/1", "/config", "/nope/x", "")] == \
        ["root", "subjects", "schemas", "config", "other", "root"]
    assert [status_class(s) for s in (200, 401, 404, 500, 999)] == ["2xx", "4xx", "4xx", "5xx", "5xx"]


# ==================================================================== the middlewares over HTTP

V1 = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
BAD = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"},
                                                           {"name": "c", "type": "int"}]})


def test_rest_security_and_metrics() -> None:
    import aiohttp

    from minikafka.schema_registry.registry import SchemaRegistry
    from minikafka.schema_registry.rest import RestServer
    from minikafka.schema_registry.rest_security import Security
    from minikafka.schema_registry.store import MemoryStore

    acls = {("User:alice", "WRITE", "orders"), ("User:alice", "READ", "orders")}
    registry = SchemaRegistry(MemoryStore())

    def authorize(principal: str, host: str, operation: str, topic: str) -> bool:
        assert host == "127.0.0.1"
        return principal == "User:admin" or (principal, operation, topic) in acls or \
            (operation == "DESCRIBE" and (principal, "READ", topic) in acls)
    users = {"alice": ("alice-pw",), "bob": ("bob-pw",), "admin": ("admin-pw",)}
    security = Security(auth.Authenticator(lambda u: users.get(u, ()), lambda u: {}),
                        Access(authorize, lambda i: {s for s, _ in registry.state.id_users.get(i, ())}))

    async def scenario() -> None:
        server = RestServer(registry, "127.0.0.1", 0, security=security)
        port = await server.start()
        base = f"http://127.0.0.1:{port}"
        try:
            async with aiohttp.ClientSession() as http:
                async def call(method: str, path: str, who: str | None, body: object = None):
                    headers = {} if who is None else {"Authorization": basic(who, users[who][0] if who in users
                                                                                  else "x")}
                    async with http.request(method, base + path, json=body, headers=headers) as resp:
                        return resp.status, await resp.json(content_type=None), resp.headers

                status, body, headers = await call("GET", "/subjects", None)
                assert (status, body) == (401, {"error_code": 401, "message": "Unauthorized"})
                assert headers["WWW-Authenticate"] == 'Basic realm="SchemaRegistry", charset="UTF-8"'
                assert (await call("GET", "/subjects", "mallory"))[0] == 401
                assert (await call("POST", "/subjects/orders-value/versions", "alice", {"schema": V1}))[:2] == \
                    (200, {"id": 1})
                assert (await call("POST", "/subjects/orders-value/versions", "alice", {"schema": V1}))[:2] == \
                    (200, {"id": 1})  # the same schema: no new version
                assert (await call("POST", "/subjects/orders-value/versions", "alice", {"schema": BAD}))[0] == 409
                assert (await call("POST", "/compatibility/subjects/orders-value/versions/latest", "alice",
                                   {"schema": BAD}))[1] == {"is_compatible": False}
                assert (await call("POST", "/subjects/secret-value/versions", "admin", {"schema": V1}))[0] == 200
                status, body, _ = await call("POST", "/subjects/secret-value/versions", "bob", {"schema": V1})
                assert (status, body) == (403, {"error_code": 40301,
                                                "message": "User is denied operation Write on Subject: secret-value"})
                assert (await call("GET", "/subjects", "alice"))[1] == ["orders-value"]
                assert (await call("GET", "/subjects", "admin"))[1] == ["orders-value", "secret-value"]
                assert (await call("GET", "/subjects", "bob"))[1] == []
                assert (await call("GET", "/schemas/ids/1/subjects", "alice"))[1] == ["orders-value"]
                assert [s["subject"] for s in (await call("GET", "/schemas", "alice"))[1]] == ["orders-value"]
                assert (await call("GET", "/schemas/ids/1", "bob"))[0] == 403
                assert (await call("GET", "/config", "alice"))[0] == 403
                assert (await call("GET", "/schemas/types", "bob"))[0] == 200
                assert (await call("GET", "/no/such/route", "bob"))[0] == 404
        finally:
            await server.stop()
        m = server.metrics
        assert m.schemas_registered == 2
        assert m.compatibility_rejections == {"register": 1, "check": 1}
        assert m.authentication_failures == 2 and m.authorization_denials == 3
        assert m.requests[("subjects", "2xx")] >= 6 and m.requests[("other", "4xx")] == 1
        assert m.gauges() == {"subjects": 2, "schema_ids": 1, "versions": 2}
    asyncio.run(scenario())


def test_a_bad_authentication_method_is_a_config_error(tmp_path) -> None:
    from minikafka.broker.config.core import BrokerConfig, ConfigError
    base = {"log.dirs": str(tmp_path), "schema.registry.listener": "http://127.0.0.1:8081"}
    assert BrokerConfig({**base, auth.KEY: "basic"}).get(auth.KEY) == "basic"
    with pytest.raises(ConfigError, match=auth.KEY):
        BrokerConfig({**base, auth.KEY: "kerberos"})
