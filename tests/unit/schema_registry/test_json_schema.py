"""JSON Schema subjects (schema_registry/json_schema.py): validated against their draft's meta-schema by the
jsonschema library; registered, looked up and served as Avro ones are; compatibility judged by Confluent's
JSON Schema rules (the rules themselves: test_json_compatibility.py); a change of schema type is incompatible."""
from __future__ import annotations

import asyncio
import json

import pytest

pytest.importorskip("jsonschema")

from minikafka.schema_registry import json_schema  # noqa: E402
from minikafka.schema_registry.errors import RegistryError  # noqa: E402
from minikafka.schema_registry.registry import SchemaRegistry  # noqa: E402
from minikafka.schema_registry.store import MemoryStore  # noqa: E402

PERSON = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
PERSON2 = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}}}


def body(schema: object, **extra) -> dict:
    return {"schema": json.dumps(schema), "schemaType": "JSON", **extra}


def code(fn, *args) -> int:
    with pytest.raises(RegistryError) as info:
        out = fn(*args)
        if asyncio.iscoroutine(out):
            asyncio.run(out)
    return info.value.error_code


@pytest.mark.parametrize("schema, valid", [
    (PERSON, True),
    (True, True),
    ({"$schema": "https://json-schema.org/draft/2020-12/schema", "type": "object"}, True),
    ({"type": "objekt"}, False),
    ({"properties": {"a": {"minLength": -1}}}, False),
    ({"required": "name"}, False),
    ([1, 2], False),
])
def test_meta_schema_validation(schema: object, valid: bool) -> None:
    if valid:
        json_schema.parse(json.dumps(schema))
    else:
        with pytest.raises(RegistryError) as info:
            json_schema.parse(json.dumps(schema))
        assert info.value.error_code == 42201
    with pytest.raises(RegistryError):
        json_schema.parse("{nope")


def test_stored_compact_and_normalized() -> None:
    assert json_schema.parse('{ "type" : "string" }').text == '{"type":"string"}'
    a = json_schema.parse('{"type": "object", "title": "t"}', normalize=True).text
    assert a == json_schema.parse('{"title": "t", "type": "object"}', normalize=True).text


def test_json_subjects() -> None:
    reg = SchemaRegistry(MemoryStore())
    run = asyncio.run
    assert run(reg.register("p-value", body(PERSON))) == {"id": 1}
    assert run(reg.register("p-value", body(PERSON))) == {"id": 1}
    latest = reg.version("p-value", "latest")
    assert latest["schemaType"] == "JSON" and json.loads(latest["schema"]) == PERSON
    assert reg.schema_by_id(1)["schemaType"] == "JSON"
    assert reg.lookup("p-value", body(PERSON))["id"] == 1
    # under BACKWARD a property added to an open content model is incompatible (Confluent's rule): 409
    assert code(reg.register, "p-value", body(PERSON2)) == 409
    verbose = reg.check_compatibility("p-value", "latest", body(PERSON2), verbose=True)
    assert verbose["is_compatible"] is False
    assert verbose["messages"][0].startswith('{errorType:"PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"')
    run(reg.set_config("p-value", {"compatibility": "NONE"}))
    assert run(reg.register("p-value", body(PERSON2))) == {"id": 2}
    assert reg.check_compatibility("p-value", "latest", body(PERSON)) == {"is_compatible": True}
    # the same text as AVRO and as JSON are two schemas; a type change is incompatible under a level
    run(reg.register("mixed", {"schema": '"string"'}))
    err = code(reg.register, "mixed", body({"type": "string"}))
    assert err == 409
    # a reference to a JSON schema in another subject
    run(reg.register("address", body({"type": "object", "properties": {"city": {"type": "string"}}})))
    with_ref = body({"type": "object", "properties": {"home": {"$ref": "address.json"}}},
                    references=[{"name": "address.json", "subject": "address", "version": 1}])
    assert run(reg.register("person-ref", with_ref))["id"] == 5
    assert reg.referenced_by("address", 1) == [5]
    # to a closed content model, an optional property may be added under BACKWARD
    closed = {**PERSON, "additionalProperties": False}
    run(reg.set_config("c-value", {"compatibility": "BACKWARD"}))
    run(reg.register("c-value", body(closed)))
    assert run(reg.register("c-value", body({**PERSON2, "additionalProperties": False})))["id"] == 7


@pytest.mark.parametrize("meta", [5, ["x"], {"a": 1}, True])
def test_a_schema_whose_meta_schema_is_not_a_string_is_42201_not_a_500(meta: object) -> None:
    with pytest.raises(RegistryError) as info:
        json_schema.parse(json.dumps({"$schema": meta, "type": "string"}))
    assert info.value.error_code == 42201
