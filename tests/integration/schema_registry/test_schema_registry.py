"""The built-in Schema Registry (schema.registry.listener) driven by confluent-kafka-python: its
SchemaRegistryClient and Avro serializer/deserializer through a real produce/consume round trip, Confluent's
error codes over HTTP, and everything still there after a restart (replayed from `_schemas`)."""
from __future__ import annotations

import http.client
import json
import uuid
from urllib.parse import urlsplit

import pytest

from minikafka.testing import MiniKafka, free_port
from tests.support.tls_certs import Pki

sr = pytest.importorskip("confluent_kafka.schema_registry")
pytest.importorskip("confluent_kafka.schema_registry.avro")

from confluent_kafka import Consumer, Producer  # noqa: E402
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError  # noqa: E402
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

pytestmark = pytest.mark.minikafka_only

USER_V1 = json.dumps({"type": "record", "name": "User", "namespace": "example",
                      "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"}]})
USER_V2 = json.dumps({"type": "record", "name": "User", "namespace": "example",
                      "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"},
                                 {"name": "email", "type": ["null", "string"], "default": None}]})
USER_BAD = json.dumps({"type": "record", "name": "User", "namespace": "example",
                       "fields": [{"name": "name", "type": "string"}, {"name": "age", "type": "int"},
                                  {"name": "team", "type": "string"}]})  # a new field without a default


def http_call(url: str, method: str, path: str, body: object = None,
              conn: http.client.HTTPConnection | None = None) -> tuple[int, object, str]:
    parts = urlsplit(url)
    conn = conn or http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
    data = None if body is None else json.dumps(body)
    conn.request(method, path, body=data, headers={"Content-Type": "application/vnd.schemaregistry.v1+json"})
    resp = conn.getresponse()
    return resp.status, json.loads(resp.read() or b"null"), resp.getheader("Content-Type", "")


def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    """Produce and flush; the producer is gone when this returns (no client left retrying a stopped broker)."""
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(15) == 0


def consume_all(bootstrap: str, topic: str, count: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    out = []
    try:
        for _ in range(200):
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            out.append(msg)
            if len(out) == count:
                break
    finally:
        consumer.close()
    return out


def test_avro_round_trip_evolution_and_restart(tmp_path) -> None:
    with MiniKafka(schema_registry=True, data_dir=tmp_path / "data",
                   config={"group.initial.rebalance.delay.ms": "0"}) as kafka:
        url = kafka.schema_registry_url
        client = SchemaRegistryClient({"url": url})
        serializer = AvroSerializer(client, USER_V1)
        ctx = SerializationContext("users", MessageField.VALUE)
        users = [{"name": f"user{i}", "age": 20 + i} for i in range(3)]
        produce(kafka.bootstrap_servers, "users", [serializer(user, ctx) for user in users])

        msgs = consume_all(kafka.bootstrap_servers, "users", 3)
        value = msgs[0].value()
        assert value[0] == 0 and int.from_bytes(value[1:5], "big") == 1  # magic byte 0, schema id 1
        deserializer = AvroDeserializer(client)
        assert [deserializer(m.value(), ctx) for m in msgs] == users

        assert client.get_subjects() == ["users-value"]
        latest = client.get_latest_version("users-value")
        assert (latest.schema_id, latest.version) == (1, 1)

        with pytest.raises(SchemaRegistryError) as info:  # BACKWARD (the default) refuses it
            client.register_schema("users-value", Schema(USER_BAD, "AVRO"))
        assert (info.value.http_status_code, info.value.error_code) == (409, 409)
        assert client.test_compatibility("users-value", Schema(USER_V2, "AVRO")) is True
        assert client.register_schema("users-value", Schema(USER_V2, "AVRO")) == 2
        assert client.set_compatibility("users-value", "FULL")["compatibility"] == "FULL"
        stored = consume_all(kafka.bootstrap_servers, "_schemas", 3)  # Confluent's key/value formats
        assert [json.loads(m.key()) for m in stored] == [
            {"keytype": "SCHEMA", "subject": "users-value", "version": 1, "magic": 1},
            {"keytype": "SCHEMA", "subject": "users-value", "version": 2, "magic": 1},
            {"keytype": "CONFIG", "subject": "users-value", "magic": 0}]
        assert json.loads(stored[1].value())["id"] == 2 and json.loads(stored[2].value()) == {
            "compatibilityLevel": "FULL"}

        kafka.restart()

        fresh = SchemaRegistryClient({"url": url})  # no cache: everything is read from the restarted registry
        assert fresh.get_versions("users-value") == [1, 2]
        assert fresh.get_schema(1).schema_str == json.dumps(json.loads(USER_V1), separators=(",", ":"))
        assert fresh.get_compatibility("users-value") == "FULL"
        again = AvroDeserializer(fresh)
        assert [again(m.value(), ctx) for m in consume_all(kafka.bootstrap_servers, "users", 3)] == users
        v2 = AvroSerializer(fresh, USER_V2)  # the registered schema: its id, no new version
        produce(kafka.bootstrap_servers, "users", [v2({"name": "n", "age": 1, "email": "e"}, ctx)])
        assert fresh.get_versions("users-value") == [1, 2]
        last = consume_all(kafka.bootstrap_servers, "users", 4)[-1]
        assert int.from_bytes(last.value()[1:5], "big") == 2
        assert again(last.value(), ctx) == {"name": "n", "age": 1, "email": "e"}


def test_rest_answers_and_error_codes() -> None:
    with MiniKafka(schema_registry=True) as kafka:
        url = kafka.schema_registry_url
        parts = urlsplit(url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)  # one keep-alive connection
        assert http_call(url, "GET", "/subjects", conn=conn)[:2] == (200, [])
        status, body, ctype = http_call(url, "GET", "/subjects/nope/versions", conn=conn)
        assert (status, body["error_code"]) == (404, 40401) and ctype.startswith("application/vnd.schemaregistry")
        assert http_call(url, "POST", "/subjects/s/versions", {"schema": USER_V1}, conn=conn)[:2] == (200, {"id": 1})
        assert http_call(url, "GET", "/subjects/s/versions/9", conn=conn)[1]["error_code"] == 40402
        assert http_call(url, "GET", "/subjects/s/versions/zero", conn=conn)[1]["error_code"] == 42202
        assert http_call(url, "GET", "/schemas/ids/99", conn=conn)[1]["error_code"] == 40403
        assert http_call(url, "POST", "/subjects/s/versions", {"schema": "{bad"}, conn=conn)[1]["error_code"] == 42201
        status, body, _ = http_call(url, "POST", "/subjects/s/versions", {"schema": USER_BAD}, conn=conn)
        assert (status, body["error_code"]) == (409, 409)
        assert http_call(url, "POST", "/subjects/s", {"schema": USER_V1}, conn=conn)[1]["version"] == 1
        assert http_call(url, "PUT", "/config", {"compatibility": "bogus"}, conn=conn)[1]["error_code"] == 42203
        assert http_call(url, "PUT", "/mode/s", {"mode": "READONLY"}, conn=conn)[1] == {"mode": "READONLY"}
        assert http_call(url, "POST", "/subjects/s/versions", {"schema": USER_V2}, conn=conn)[1]["error_code"] == 42205
        assert http_call(url, "DELETE", "/mode/s", conn=conn)[0] == 200
        assert http_call(url, "DELETE", "/subjects/s/versions/1?permanent=true", conn=conn)[1]["error_code"] == 40407
        assert http_call(url, "DELETE", "/subjects/s", conn=conn)[1] == [1]
        assert http_call(url, "GET", "/schemas/ids/1", conn=conn)[0] == 200  # soft-deleted: still by id
        assert http_call(url, "GET", "/subjects?deleted=true", conn=conn)[1] == ["s"]
        assert http_call(url, "GET", "/no/such/route", conn=conn)[0] == 404
        assert http_call(url, "GET", "/schemas/types", conn=conn)[1] == ["AVRO", "JSON", "PROTOBUF"]
        conn.close()


def test_https_listener(tmp_path) -> None:
    pki = Pki(tmp_path / "pki")
    url = f"https://localhost:{free_port('127.0.0.1')}"
    with MiniKafka(config={"schema.registry.listener": url,
                           "listener.name.schema_registry.ssl.keystore.type": "PEM",
                           "listener.name.schema_registry.ssl.keystore.location": pki.path("server.pem")}) as kafka:
        assert kafka.schema_registry_url == url
        client = SchemaRegistryClient({"url": url, "ssl.ca.location": pki.path("ca.pem")})
        assert client.register_schema("tls-value", Schema(USER_V1, "AVRO")) == 1
        assert client.get_schema(1).schema_str == json.dumps(json.loads(USER_V1), separators=(",", ":"))


def test_json_schema_round_trip() -> None:
    from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
    person = json.dumps({"type": "object", "title": "Person",
                         "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                         "required": ["name"]})
    with MiniKafka(schema_registry=True, config={"group.initial.rebalance.delay.ms": "0"}) as kafka:
        client = SchemaRegistryClient({"url": kafka.schema_registry_url})
        ctx = SerializationContext("people", MessageField.VALUE)
        serializer = JSONSerializer(person, client)
        people = [{"name": "ada", "age": 36}, {"name": "alan"}]
        produce(kafka.bootstrap_servers, "people", [serializer(p, ctx) for p in people])
        with pytest.raises(Exception):  # the schema is enforced on the producing side too
            serializer({"age": 1}, ctx)
        deserializer = JSONDeserializer(None, schema_registry_client=client)
        assert [deserializer(m.value(), ctx) for m in consume_all(kafka.bootstrap_servers, "people", 2)] == people
        registered = client.get_latest_version("people-value")
        assert registered.schema.schema_type == "JSON" and registered.schema_id == 1
