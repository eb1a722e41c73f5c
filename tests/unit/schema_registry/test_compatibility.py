"""Avro compatibility per level (schema_registry/avro_schema.py over Apache Avro's checker): the table of
Confluent's documented evolutions, each level in both directions."""
from __future__ import annotations

import json

import pytest

from minikafka.schema_registry import avro_schema
from minikafka.schema_registry.errors import RegistryError


def record(*fields: dict, name: str = "User") -> str:
    return json.dumps({"type": "record", "name": name, "fields": list(fields)})


A = {"name": "a", "type": "int"}
B_REQUIRED = {"name": "b", "type": "string"}
B_DEFAULT = {"name": "b", "type": "string", "default": ""}
A_LONG = {"name": "a", "type": "long"}

V1 = record(A)
ADD_REQUIRED = record(A, B_REQUIRED)  # backward-incompatible (new reader lacks a default), forward-compatible
ADD_OPTIONAL = record(A, B_DEFAULT)  # fully compatible
REMOVE_A = record()  # backward-compatible (a reader ignores it); forward-incompatible (a has no default)
PROMOTE_A = record(A_LONG)  # int -> long: backward only


def check(level: str, new: str, *old: str) -> bool:
    previous = [(i + 1, text, avro_schema.parse(text).schema) for i, text in enumerate(old)]
    return not avro_schema.check(level, avro_schema.parse(new).schema, previous)


@pytest.mark.parametrize("new, backward, forward", [
    (ADD_REQUIRED, False, True),
    (ADD_OPTIONAL, True, True),
    (REMOVE_A, True, False),
    (PROMOTE_A, True, False),
    (record(A, name="Other"), False, False),  # a record's name must match (or be aliased)
])
def test_levels_against_one_version(new: str, backward: bool, forward: bool) -> None:
    assert check("BACKWARD", new, V1) is backward
    assert check("FORWARD", new, V1) is forward
    assert check("FULL", new, V1) is (backward and forward)
    assert check("NONE", new, V1) is True
    for level in ("BACKWARD", "FORWARD", "FULL"):  # one previous version: transitive is the same check
        assert check(level + "_TRANSITIVE", new, V1) is check(level, new, V1)


def test_transitive_levels_check_every_version_plain_ones_the_latest() -> None:
    # v1 {a}, v2 {} (a removed), v3 {a, b required}: v3 reads v2's data only if... it cannot (a has no default)
    v1, v2 = V1, REMOVE_A
    v3 = record({"name": "a", "type": "int", "default": 0})
    assert check("BACKWARD", v3, v1, v2) is True
    assert check("BACKWARD_TRANSITIVE", v3, v1, v2) is True
    # v3' adds a required field b: v2 and v1 lack it
    assert check("BACKWARD", ADD_REQUIRED, REMOVE_A, ADD_OPTIONAL) is True  # latest (ADD_OPTIONAL) has b
    assert check("BACKWARD_TRANSITIVE", ADD_REQUIRED, REMOVE_A, ADD_OPTIONAL) is False
    assert check("FORWARD", V1, ADD_REQUIRED, REMOVE_A) is True  # latest {} reads {a}
    assert check("FORWARD_TRANSITIVE", V1, ADD_REQUIRED, REMOVE_A) is False  # {a, b} cannot read {a}
    assert check("FULL_TRANSITIVE", ADD_OPTIONAL, V1, ADD_OPTIONAL) is True


def test_enum_and_union_rules_come_from_avro() -> None:
    e1 = json.dumps({"type": "enum", "name": "E", "symbols": ["A", "B"]})
    e2 = json.dumps({"type": "enum", "name": "E", "symbols": ["A"]})
    assert check("BACKWARD", e2, e1) is False  # the new reader lacks B
    assert check("FORWARD", e2, e1) is True
    assert check("BACKWARD", json.dumps(["null", "string"]), json.dumps("string")) is True
    assert check("FORWARD", json.dumps(["null", "string"]), json.dumps("string")) is False


def test_details_name_the_error_type_and_the_old_version() -> None:
    previous = [(7, V1, avro_schema.parse(V1).schema)]
    details = avro_schema.check("BACKWARD", avro_schema.parse(ADD_REQUIRED).schema, previous)
    assert details[0] == ("{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'b' at path "
                          "'/fields/1' in the new schema has no default value and is missing in the old schema', "
                          "additionalInfo:'b'}")
    assert "{oldSchemaVersion: 7}" in details
    assert "{compatibility: 'BACKWARD'}" in details


@pytest.mark.parametrize("text", ["", "{", '{"type": "record", "name": "R"}', '"nosuchtype"',
                                  '{"type": "enum", "name": "E", "symbols": ["A", "A"]}'])
def test_invalid_schemas_are_42201(text: str) -> None:
    with pytest.raises(RegistryError) as info:
        avro_schema.parse(text)
    assert (info.value.status, info.value.error_code) == (422, 42201)


def test_stored_text_is_compact_and_normalize_sorts_keys() -> None:
    spaced = '{ "type" : "record",  "name": "R", "fields": [ {"name": "a", "type": "int"} ] }'
    assert avro_schema.parse(spaced).text == '{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}'
    reordered = '{"name": "R", "fields": [{"type": "int", "name": "a"}], "type": "record"}'
    assert avro_schema.parse(spaced, normalize=True).text == avro_schema.parse(reordered, normalize=True).text
    assert avro_schema.parse("\"string\"").text == '"string"'


def test_equivalent_spellings_are_one_stored_schema() -> None:
    assert avro_schema.parse('{"type": "string"}').text == avro_schema.parse('"string"').text == '"string"'
    nested = '{"type": "record", "name": "R", "namespace": "n", "fields": [{"type": "int", "name": "a"}]}'
    assert avro_schema.parse(nested).text == '{"type":"record","name":"R","namespace":"n","fields":[{"name":"a","type":"int"}]}'


@pytest.mark.parametrize("field, valid", [
    ({"type": "int", "default": "x"}, False),
    ({"type": "int", "default": True}, False),
    ({"type": ["null", "int"], "default": 3}, False),  # a union's default belongs to its first branch
    ({"type": ["null", "int"], "default": None}, True),
    ({"type": ["int", "null"], "default": 3}, True),
    ({"type": "bytes", "default": "\u00ff"}, True),
    ({"type": {"type": "fixed", "name": "F", "size": 2}, "default": "abc"}, False),
    ({"type": {"type": "record", "name": "S", "fields": [{"name": "x", "type": "long"}]}, "default": {"x": 1}}, True),
    ({"type": {"type": "record", "name": "S", "fields": [{"name": "x", "type": "long"}]}, "default": {}}, False),
    ({"type": {"type": "array", "items": "string"}, "default": ["a", 1]}, False),
    ({"type": {"type": "map", "values": "long"}, "default": {"k": 2}}, True),
    ({"type": {"type": "enum", "name": "E", "symbols": ["A"]}, "default": "B"}, False),
    ({"type": "double", "default": 1}, True),
    ({"type": "float", "default": "NaN"}, True),
])
def test_field_defaults_are_validated(field: dict, valid: bool) -> None:
    text = record(dict(field, name="f"))
    if valid:
        avro_schema.parse(text)
    else:
        with pytest.raises(RegistryError, match="Invalid default for field f"):
            avro_schema.parse(text)
