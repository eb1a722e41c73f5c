"""JSON Schema compatibility over real HTTP and through confluent-kafka's JSON serde: a compatible evolution
registers as version 2, an incompatible one answers 409 with Confluent's message, and records written with
either version are read back through the broker (the new schema reads what the old one wrote)."""
from __future__ import annotations

import json

import pytest

from minikafka.testing import MiniKafka
from tests.integration.schema_registry.test_schema_registry import consume_all, http_call, produce

pytest.importorskip("confluent_kafka.schema_registry")
pytest.importorskip("jsonschema")

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient  # noqa: E402
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer  # noqa: E402
from confluent_kafka.serialization import MessageField, SerializationContext  # noqa: E402

pytestmark = pytest.mark.minikafka_only

# a closed content model: an optional property may be added under BACKWARD, a required one may not
PERSON_V1 = {"type": "object", "title": "Person", "additionalProperties": False,
             "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}, "required": ["name"]}
PERSON_V2 = {**PERSON_V1, "properties": {**PERSON_V1["properties"], "email": {"type": "string"}}}
PERSON_BAD = {**PERSON_V1, "properties": {**PERSON_V1["properties"], "team": {"type": "string"}},
              "required": ["name", "team"]}


def body(schema: dict) -> dict:
    return {"schemaType": "JSON", "schema": json.dumps(schema)}


def test_json_evolution_over_http() -> None:
    with MiniKafka(schema_registry=True) as kafka:
        url = kafka.schema_registry_url
        assert http_call(url, "POST", "/subjects/people-value/versions", body(PERSON_V1))[:2] == (200, {"id": 1})
        old = http_call(url, "GET", "/subjects/people-value/versions/1/schema")[1]  # the stored text
        assert old == json.dumps(PERSON_V1, separators=(",", ":"))

        status, answer, _ = http_call(url, "POST", "/subjects/people-value/versions", body(PERSON_BAD))
        detail = ("{errorType:\"REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL\", description:\"The new schema has "
                  "an unopen content model and has a required property at path '#/properties/team' which is "
                  "missing in the old schema'}")
        assert (status, answer) == (409, {"error_code": 409, "message": (
            "Schema being registered is incompatible with an earlier schema for subject \"people-value\", "
            f"details: [{detail}, {{oldSchemaVersion: 1}}, {{oldSchema: '{old}'}}, {{compatibility: 'BACKWARD'}}]")})

        status, verbose, _ = http_call(url, "POST", "/compatibility/subjects/people-value/versions/latest"
                                       "?verbose=true", body(PERSON_BAD))
        assert status == 200 and verbose["is_compatible"] is False and verbose["messages"][0] == detail
        assert http_call(url, "POST", "/compatibility/subjects/people-value/versions/latest",
                         body(PERSON_V2))[1] == {"is_compatible": True}

        assert http_call(url, "POST", "/subjects/people-value/versions", body(PERSON_V2))[:2] == (200, {"id": 2})
        assert http_call(url, "GET", "/subjects/people-value/versions")[1] == [1, 2]

        # FORWARD: the old schema must read the new one's records; a new property it closes out cannot be
        assert http_call(url, "PUT", "/config/people-value", {"compatibility": "FORWARD"})[0] == 200
        wider = {**PERSON_V2, "properties": {**PERSON_V2["properties"], "phone": {"type": "string"}}}
        status, answer, _ = http_call(url, "POST", "/subjects/people-value/versions", body(wider))
        assert (status, answer["error_code"]) == (409, 409)
        assert "{errorType:\"PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL\", description:\"The old has a closed " \
               "content model and is missing a property or item present at path '#/properties/phone' in the new " \
               "schema'}" in answer["message"]
        assert "{compatibility: 'FORWARD'}" in answer["message"]


def test_json_serde_with_an_evolved_schema() -> None:
    with MiniKafka(schema_registry=True, config={"group.initial.rebalance.delay.ms": "0"}) as kafka:
        client = SchemaRegistryClient({"url": kafka.schema_registry_url})
        ctx = SerializationContext("people", MessageField.VALUE)
        v1 = JSONSerializer(json.dumps(PERSON_V1), client)
        v2 = JSONSerializer(json.dumps(PERSON_V2), client)  # registers version 2 itself: compatible
        old_people = [{"name": "ada", "age": 36}, {"name": "alan"}]
        new_people = [{"name": "grace", "email": "g@example.com"}]
        produce(kafka.bootstrap_servers, "people", [v1(p, ctx) for p in old_people]
                + [v2(p, ctx) for p in new_people])
        assert client.get_versions("people-value") == [1, 2]
        assert client.get_latest_version("people-value").schema_id == 2

        msgs = consume_all(kafka.bootstrap_servers, "people", 3)
        assert [int.from_bytes(m.value()[1:5], "big") for m in msgs] == [1, 1, 2]
        by_writer = JSONDeserializer(None, schema_registry_client=client)
        assert [by_writer(m.value(), ctx) for m in msgs] == old_people + new_people
        # the new schema reads (validates) what the old one wrote: BACKWARD compatibility in practice
        by_v2 = JSONDeserializer(json.dumps(PERSON_V2), schema_registry_client=client)
        assert [by_v2(m.value(), ctx) for m in msgs] == old_people + new_people

        with pytest.raises(Exception) as info:  # an incompatible schema is refused at registration
            client.register_schema("people-value", Schema(json.dumps(PERSON_BAD), "JSON"))
        assert getattr(info.value, "error_code", None) == 409
