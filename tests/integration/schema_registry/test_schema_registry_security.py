"""The Schema Registry listener of a secured broker: SASL users (PLAIN in the JAAS config, SCRAM credentials,
one created at run time by AlterUserScramCredentials) authenticate with HTTP Basic; StandardAuthorizer with
no access by default and a super user; the registry's requests are authorized by the TOPIC ACLs that
confluent-kafka's AdminClient creates (a subject `T-value` is topic `T`'s); confluent-kafka's
SchemaRegistryClient (`basic.auth.user.info`) and Avro serde; the minikafka_schema_registry_* series of
/metrics. Everything over real sockets against a broker subprocess."""
from __future__ import annotations

import base64
import http.client
import json
import re
import urllib.request
from urllib.parse import urlsplit

import pytest

from minikafka.testing import MiniKafka, free_port

sr = pytest.importorskip("confluent_kafka.schema_registry")
pytest.importorskip("confluent_kafka.schema_registry.avro")

from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,  # noqa: E402
                                   ResourcePatternType, ResourceType, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

pytestmark = [pytest.mark.minikafka_only, pytest.mark.timeout(180)]

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
ORDER = json.dumps({"type": "record", "name": "Order", "namespace": "shop",
                    "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}]})
SECRET = json.dumps({"type": "record", "name": "Secret", "fields": [{"name": "s", "type": "string"}]})


@pytest.fixture(scope="module")
def kafka():
    config = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
              "super.users": "User:admin", "allow.everyone.if.no.acl.found": "false",
              "minikafka.metrics.listener": f"http://127.0.0.1:{free_port()}"}
    with MiniKafka(sasl_users=USERS, schema_registry=True, config=config) as k:
        yield k


def admin_client(kafka: MiniKafka) -> AdminClient:
    return AdminClient({"bootstrap.servers": kafka.sasl_bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                        "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "admin",
                        "sasl.password": USERS["admin"]})


def registry(kafka: MiniKafka, user: str, password: str | None = None) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": kafka.schema_registry_url,
                                 "basic.auth.user.info": f"{user}:{password or USERS[user]}"})


def call(kafka: MiniKafka, method: str, path: str, auth: tuple[str, str] | None = None,
         body: object = None) -> tuple[int, object, dict]:
    parts = urlsplit(kafka.schema_registry_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
    if auth is not None:
        headers["Authorization"] = "Basic " + base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
    conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
    resp = conn.getresponse()
    try:
        return resp.status, json.loads(resp.read() or b"null"), dict(resp.getheaders())
    finally:
        conn.close()


def grant(kafka: MiniKafka, principal: str, topic: str, *operations: AclOperation) -> None:
    bindings = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, principal, "*", op,
                           AclPermissionType.ALLOW) for op in operations]
    admin = admin_client(kafka)  # kept until the futures are done (a collected client cancels them)
    for future in admin.create_acls(bindings).values():
        future.result(30)


def test_basic_authentication_of_sasl_users(kafka) -> None:
    status, body, headers = call(kafka, "GET", "/subjects")
    assert (status, body) == (401, {"error_code": 401, "message": "Unauthorized"})
    assert headers["WWW-Authenticate"].startswith('Basic realm="SchemaRegistry"')
    assert call(kafka, "GET", "/subjects", ("alice", "wrong"))[:2] == (401, {"error_code": 401,
                                                                           "message": "Unauthorized"})
    assert call(kafka, "GET", "/subjects", ("nobody", "x"))[0] == 401
    assert call(kafka, "GET", "/", ("alice", USERS["alice"]))[:2] == (200, {})  # a PLAIN (JAAS) user
    assert call(kafka, "GET", "/schemas/types", ("bob", USERS["bob"]))[0] == 200
    with pytest.raises(SchemaRegistryError) as err:
        registry(kafka, "alice", "wrong").get_subjects()
    assert err.value.http_status_code == 401


def test_a_scram_user_created_at_run_time_logs_in(kafka) -> None:
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 8192)
    admin = admin_client(kafka)
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion("carol", info, b"carol-pw")])["carol"].result(30)
    assert call(kafka, "GET", "/schemas/types", ("carol", "carol-pw"))[0] == 200
    assert call(kafka, "GET", "/schemas/types", ("carol", "carol-pw"))[0] == 200  # remembered
    assert call(kafka, "GET", "/schemas/types", ("carol", "carol-px"))[0] == 401
    assert registry(kafka, "carol", "carol-pw").get_subjects() == []  # no ACL: nothing listed


def test_topic_acls_authorize_subjects(kafka) -> None:
    bob = registry(kafka, "bob")
    with pytest.raises(SchemaRegistryError) as err:
        bob.register_schema("orders-value", Schema(ORDER, "AVRO"))
    assert (err.value.http_status_code, err.value.error_code) == (403, 40301)
    assert err.value.error_message == "User is denied operation Write on Subject: orders-value"

    # the producer's and the consumer's own topic ACLs are what the serializers need
    grant(kafka, "User:alice", "orders", AclOperation.WRITE, AclOperation.READ)
    alice = registry(kafka, "alice")
    ctx = SerializationContext("orders", MessageField.VALUE)
    data = AvroSerializer(alice, ORDER)({"id": 7, "item": "book"}, ctx)
    assert AvroDeserializer(alice)(data, ctx) == {"id": 7, "item": "book"}
    schema_id = int.from_bytes(data[1:5], "big")

    admin = registry(kafka, "admin")  # a super user may do anything
    admin.register_schema("secret-value", Schema(SECRET, "AVRO"))
    admin.set_compatibility(level="FULL")
    assert sorted(admin.get_subjects()) == ["orders-value", "secret-value"]
    assert alice.get_subjects() == ["orders-value"]  # lists show only what the principal may describe
    assert bob.get_subjects() == []
    assert [s["subject"] for s in call(kafka, "GET", "/schemas", ("alice", USERS["alice"]))[1]] == ["orders-value"]

    status, body, _ = call(kafka, "GET", f"/schemas/ids/{schema_id}", ("bob", USERS["bob"]))
    assert (status, body["error_code"]) == (403, 40301)
    assert call(kafka, "GET", f"/schemas/ids/{schema_id}", ("alice", USERS["alice"]))[0] == 200
    status, body, _ = call(kafka, "PUT", "/config", ("alice", USERS["alice"]), {"compatibility": "NONE"})
    assert (status, body) == (403, {"error_code": 40301,
                                    "message": "User is denied operation AlterConfigs on Topic: _schemas"})
    assert call(kafka, "GET", "/subjects/secret-value/versions", ("alice", USERS["alice"]))[0] == 403

    # READ on _schemas reads every subject (a Kafka consumer of _schemas could anyway)
    grant(kafka, "User:bob", "_schemas", AclOperation.READ)
    assert sorted(bob.get_subjects()) == ["orders-value", "secret-value"]
    assert call(kafka, "GET", "/subjects/secret-value/versions", ("bob", USERS["bob"]))[:2] == (200, [1])
    with pytest.raises(SchemaRegistryError) as err:
        bob.register_schema("secret-value", Schema(ORDER, "AVRO"))
    assert err.value.http_status_code == 403


def test_registry_series_on_metrics(kafka) -> None:
    assert call(kafka, "GET", "/subjects")[0] == 401
    user = ("admin", USERS["admin"])
    assert call(kafka, "POST", "/subjects/metrics-value/versions", user, {"schema": SECRET})[0] == 200
    bad = json.dumps({"type": "record", "name": "Secret", "fields": [{"name": "t", "type": "int"}]})
    assert call(kafka, "PUT", "/config/metrics-value", user, {"compatibility": "BACKWARD"})[0] == 200
    assert call(kafka, "POST", "/subjects/metrics-value/versions", user, {"schema": bad})[0] == 409
    with urllib.request.urlopen(kafka.admin_url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()

    def value(series: str) -> float:
        match = re.search(rf"^{re.escape(series)} (\S+)$", text, re.M)
        assert match, f"{series} not in /metrics"
        return float(match.group(1))
    assert value('minikafka_schema_registry_requests_total{endpoint="subjects",status="2xx"}') >= 1
    assert value('minikafka_schema_registry_requests_total{endpoint="subjects",status="4xx"}') >= 2
    assert value("minikafka_schema_registry_schemas_registered_total") >= 1
    assert value('minikafka_schema_registry_compatibility_rejections_total{request="register"}') >= 1
    assert value("minikafka_schema_registry_authentication_failures_total") >= 1
    assert value("minikafka_schema_registry_authorization_denials_total") >= 0
    assert value("minikafka_schema_registry_subjects") >= 1
    assert value("minikafka_schema_registry_schema_ids") >= 1
    assert value("minikafka_schema_registry_versions") >= 1
