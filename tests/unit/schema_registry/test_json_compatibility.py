"""JSON Schema compatibility (schema_registry/json_diff.py, json_schema.check): Confluent's rules, one row per
rule. Each row names the difference the change from the old schema to the new one makes, and whether the
change is accepted at BACKWARD (the differences old -> new are all compatible) and at FORWARD (those of
new -> old are); FULL accepts exactly what both accept."""
from __future__ import annotations

import json

import pytest

pytest.importorskip("jsonschema")

from minikafka.schema_registry import errors, json_diff, json_schema  # noqa: E402

S = {"type": "string"}
I = {"type": "integer"}  # noqa: E741
N = {"type": "number"}
B = {"type": "boolean"}


def obj(props: dict, required: tuple = (), **extra) -> dict:
    return {"type": "object", "properties": props, **({"required": list(required)} if required else {}), **extra}


CLOSED = {"additionalProperties": False}
STRINGS_ONLY = {"additionalProperties": S}

# (rule emitted from old to new, old, new, accepted at BACKWARD, accepted at FORWARD)
RULES = [
    ("ID_CHANGED", {"$id": "urn:a", **S}, {"$id": "urn:b", **S}, True, True),
    ("TITLE_CHANGED", {"title": "a", **S}, {"title": "b", **S}, True, True),
    ("DESCRIPTION_CHANGED", {"description": "a", **S}, {"description": "b", **S}, True, True),
    ("DEFAULT_CHANGED", {"default": "a", **S}, {"default": "b", **S}, True, True),
    ("TYPE_CHANGED", S, I, False, False),
    ("TYPE_EXTENDED", I, N, True, False),
    ("TYPE_NARROWED", N, I, False, True),
    ("SUM_TYPE_EXTENDED", S, {"type": ["string", "null"]}, True, False),
    ("TYPE_CHANGED", {}, S, False, True),  # {} reads anything; what {} wrote, a string cannot read
    ("MAX_LENGTH_ADDED", S, {**S, "maxLength": 5}, False, True),
    ("MAX_LENGTH_INCREASED", {**S, "maxLength": 5}, {**S, "maxLength": 9}, True, False),
    ("MAX_LENGTH_DECREASED", {**S, "maxLength": 9}, {**S, "maxLength": 5}, False, True),
    ("MIN_LENGTH_ADDED", S, {**S, "minLength": 2}, False, True),
    ("MIN_LENGTH_DECREASED", {**S, "minLength": 5}, {**S, "minLength": 2}, True, False),
    ("MIN_LENGTH_INCREASED", {**S, "minLength": 2}, {**S, "minLength": 5}, False, True),
    ("PATTERN_ADDED", S, {**S, "pattern": "^a"}, False, True),
    ("PATTERN_REMOVED", {**S, "pattern": "^a"}, S, True, False),
    ("PATTERN_CHANGED", {**S, "pattern": "^a"}, {**S, "pattern": "^b"}, False, False),
    ("MAXIMUM_ADDED", N, {**N, "maximum": 10}, False, True),
    ("MAXIMUM_INCREASED", {**N, "maximum": 10}, {**N, "maximum": 20}, True, False),
    ("MAXIMUM_DECREASED", {**N, "maximum": 20}, {**N, "maximum": 10}, False, True),
    ("MINIMUM_ADDED", N, {**N, "minimum": 1}, False, True),
    ("MINIMUM_DECREASED", {**N, "minimum": 5}, {**N, "minimum": 1}, True, False),
    ("MINIMUM_INCREASED", {**N, "minimum": 1}, {**N, "minimum": 5}, False, True),
    ("EXCLUSIVE_MAXIMUM_ADDED", N, {**N, "exclusiveMaximum": 10}, False, True),
    ("EXCLUSIVE_MAXIMUM_INCREASED", {**N, "exclusiveMaximum": 10}, {**N, "exclusiveMaximum": 20}, True, False),
    ("EXCLUSIVE_MINIMUM_ADDED", N, {**N, "exclusiveMinimum": 0}, False, True),
    ("EXCLUSIVE_MINIMUM_DECREASED", {**N, "exclusiveMinimum": 5}, {**N, "exclusiveMinimum": 0}, True, False),
    ("MULTIPLE_OF_ADDED", N, {**N, "multipleOf": 2}, False, True),
    ("MULTIPLE_OF_REDUCED", {**N, "multipleOf": 4}, {**N, "multipleOf": 2}, True, False),
    ("MULTIPLE_OF_EXPANDED", {**N, "multipleOf": 0.5}, {**N, "multipleOf": 1.5}, False, True),
    ("MULTIPLE_OF_CHANGED", {**N, "multipleOf": 3}, {**N, "multipleOf": 2}, False, False),
    ("REQUIRED_ATTRIBUTE_ADDED", obj({"a": S}), obj({"a": S}, ["a"]), False, True),
    ("REQUIRED_ATTRIBUTE_WITH_DEFAULT_ADDED", obj({"a": {**S, "default": ""}}),
     obj({"a": {**S, "default": ""}}, ["a"]), True, True),
    ("REQUIRED_ATTRIBUTE_REMOVED", obj({"a": S}, ["a"]), obj({"a": S}), True, False),
    ("PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL", obj({"a": S}), obj({"a": S, "b": I}), False, True),
    ("PROPERTY_REMOVED_FROM_OPEN_CONTENT_MODEL", obj({"a": S, "b": I}), obj({"a": S}), True, False),
    ("PROPERTY_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", obj({"a": S}), obj({"a": S, "b": {}}), True, True),
    ("OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", obj({"a": S}, **CLOSED), obj({"a": S, "b": I}, **CLOSED),
     True, False),
    ("PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL", obj({"a": S, "b": I}, **CLOSED), obj({"a": S}, **CLOSED),
     False, True),
    ("REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL", obj({"a": S}, **CLOSED),
     obj({"a": S, "b": I}, ["b"], **CLOSED), False, False),
    ("REQUIRED_PROPERTY_WITH_DEFAULT_ADDED_TO_UNOPEN_CONTENT_MODEL", obj({"a": S}, **CLOSED),
     obj({"a": S, "b": {**I, "default": 0}}, ["b"], **CLOSED), True, False),
    ("PROPERTY_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL", obj({"a": S, "b": False}, **CLOSED),
     obj({"a": S}, **CLOSED), True, True),
    ("PROPERTY_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", obj({"a": S, "b": S}, **STRINGS_ONLY),
     obj({"a": S}, **STRINGS_ONLY), True, True),
    ("PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", obj({"a": S, "b": I}, **STRINGS_ONLY),
     obj({"a": S}, **STRINGS_ONLY), False, False),
    ("PROPERTY_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
     obj({"a": S}, patternProperties={"^x": S}, additionalProperties=False),
     obj({"a": S, "xb": S}, patternProperties={"^x": S}, additionalProperties=False), True, True),
    ("ADDITIONAL_PROPERTIES_REMOVED", obj({"a": S}), obj({"a": S}, **CLOSED), False, True),
    ("ADDITIONAL_PROPERTIES_ADDED", obj({"a": S}, **CLOSED), obj({"a": S}), True, False),
    ("ADDITIONAL_PROPERTIES_NARROWED", obj({"a": S}), obj({"a": S}, **STRINGS_ONLY), False, True),
    ("ADDITIONAL_PROPERTIES_EXTENDED", obj({"a": S}, **STRINGS_ONLY), obj({"a": S}), True, False),
    ("TYPE_CHANGED", obj({"a": S}, **STRINGS_ONLY), obj({"a": S}, additionalProperties=I), False, False),
    ("MAX_PROPERTIES_ADDED", obj({}), obj({}, maxProperties=3), False, True),
    ("MAX_PROPERTIES_INCREASED", obj({}, maxProperties=3), obj({}, maxProperties=5), True, False),
    ("MIN_PROPERTIES_ADDED", obj({}), obj({}, minProperties=1), False, True),
    ("MIN_PROPERTIES_DECREASED", obj({}, minProperties=3), obj({}, minProperties=1), True, False),
    ("DEPENDENCY_ARRAY_ADDED", obj({}), obj({}, dependencies={"a": ["b"]}), False, True),
    ("DEPENDENCY_ARRAY_EXTENDED", obj({}, dependencies={"a": ["b"]}), obj({}, dependencies={"a": ["b", "c"]}),
     False, True),
    ("DEPENDENCY_ARRAY_CHANGED", obj({}, dependencies={"a": ["b"]}), obj({}, dependencies={"a": ["c"]}),
     False, False),
    ("DEPENDENCY_SCHEMA_ADDED", obj({}), obj({}, dependencies={"a": obj({"b": S})}), False, True),
    ("SCHEMA_ADDED", {"type": "array"}, {"type": "array", "items": S}, False, True),
    ("TYPE_CHANGED", {"type": "array", "items": S}, {"type": "array", "items": I}, False, False),
    ("MAX_ITEMS_ADDED", {"type": "array"}, {"type": "array", "maxItems": 3}, False, True),
    ("MAX_ITEMS_INCREASED", {"type": "array", "maxItems": 3}, {"type": "array", "maxItems": 5}, True, False),
    ("MIN_ITEMS_ADDED", {"type": "array"}, {"type": "array", "minItems": 1}, False, True),
    ("MIN_ITEMS_DECREASED", {"type": "array", "minItems": 3}, {"type": "array", "minItems": 1}, True, False),
    ("UNIQUE_ITEMS_ADDED", {"type": "array"}, {"type": "array", "uniqueItems": True}, False, True),
    ("ADDITIONAL_ITEMS_REMOVED", {"type": "array", "items": [S]},
     {"type": "array", "items": [S], "additionalItems": False}, False, True),
    ("ADDITIONAL_ITEMS_NARROWED", {"type": "array", "items": [S]},
     {"type": "array", "items": [S], "additionalItems": S}, False, True),
    ("ITEM_ADDED_TO_OPEN_CONTENT_MODEL", {"type": "array", "items": [S]}, {"type": "array", "items": [S, I]},
     False, True),
    ("ITEM_WITH_EMPTY_SCHEMA_ADDED_TO_OPEN_CONTENT_MODEL", {"type": "array", "items": [S]},
     {"type": "array", "items": [S, {}]}, True, True),
    ("ITEM_ADDED_TO_CLOSED_CONTENT_MODEL", {"type": "array", "items": [S], "additionalItems": False},
     {"type": "array", "items": [S, I], "additionalItems": False}, True, False),
    ("ITEM_ADDED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", {"type": "array", "items": [S], "additionalItems": I},
     {"type": "array", "items": [S, I], "additionalItems": I}, True, True),
    ("ITEM_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", {"type": "array", "items": [S], "additionalItems": I},
     {"type": "array", "items": [S, B], "additionalItems": I}, False, False),
    ("ENUM_ARRAY_EXTENDED", {"enum": ["a", "b"]}, {"enum": ["a", "b", "c"]}, True, False),
    ("ENUM_ARRAY_NARROWED", {"enum": ["a", "b", "c"]}, {"enum": ["a", "b"]}, False, True),
    ("ENUM_ARRAY_CHANGED", {"enum": ["a", "b"]}, {"enum": ["a", "c"]}, False, False),
    ("ENUM_ARRAY_CHANGED", {"const": "a"}, {"const": "b"}, False, False),
    ("SUM_TYPE_EXTENDED", {"oneOf": [S, I]}, {"oneOf": [S, I, B]}, True, False),
    ("SUM_TYPE_NARROWED", {"anyOf": [S, I, B]}, {"anyOf": [S, I]}, False, True),
    ("COMBINED_TYPE_EXTENDED", {"oneOf": [S, I]}, {"anyOf": [S, I]}, True, False),
    ("COMBINED_TYPE_CHANGED", {"oneOf": [S, I]}, {"allOf": [S, I]}, False, False),
    ("COMBINED_TYPE_SUBSCHEMAS_CHANGED", {"oneOf": [S, I]}, {"oneOf": [S, B]}, False, False),
    ("PRODUCT_TYPE_NARROWED", {"allOf": [obj({"a": S}), {"required": ["a"]}]}, obj({"a": S}), True, False),
    ("PRODUCT_TYPE_EXTENDED", {"allOf": [{"minLength": 1}]}, {"allOf": [{"minLength": 1}, {"maxLength": 5}]},
     False, True),
    ("NOT_TYPE_EXTENDED", {"not": S}, {"not": {"type": ["string", "integer"]}}, False, True),
    ("NOT_TYPE_NARROWED", {"not": {"type": ["string", "integer"]}}, {"not": S}, True, False),
    # the counterparts of the rows above
    ("MAX_LENGTH_REMOVED", {**S, "maxLength": 5}, S, True, False),
    ("MIN_LENGTH_REMOVED", {**S, "minLength": 5}, S, True, False),
    ("MAXIMUM_REMOVED", {**N, "maximum": 10}, N, True, False),
    ("MINIMUM_REMOVED", {**N, "minimum": 1}, N, True, False),
    ("EXCLUSIVE_MAXIMUM_DECREASED", {**N, "exclusiveMaximum": 20}, {**N, "exclusiveMaximum": 10}, False, True),
    ("EXCLUSIVE_MAXIMUM_REMOVED", {**N, "exclusiveMaximum": 10}, N, True, False),
    ("EXCLUSIVE_MINIMUM_INCREASED", {**N, "exclusiveMinimum": 0}, {**N, "exclusiveMinimum": 5}, False, True),
    ("EXCLUSIVE_MINIMUM_REMOVED", {**N, "exclusiveMinimum": 0}, N, True, False),
    ("MULTIPLE_OF_REMOVED", {**N, "multipleOf": 2}, N, True, False),
    ("MAX_PROPERTIES_DECREASED", obj({}, maxProperties=5), obj({}, maxProperties=3), False, True),
    ("MAX_PROPERTIES_REMOVED", obj({}, maxProperties=5), obj({}), True, False),
    ("MIN_PROPERTIES_INCREASED", obj({}, minProperties=1), obj({}, minProperties=3), False, True),
    ("MIN_PROPERTIES_REMOVED", obj({}, minProperties=1), obj({}), True, False),
    ("DEPENDENCY_ARRAY_NARROWED", obj({}, dependencies={"a": ["b", "c"]}), obj({}, dependencies={"a": ["b"]}),
     True, False),
    ("DEPENDENCY_ARRAY_REMOVED", obj({}, dependencies={"a": ["b"]}), obj({}), True, False),
    ("DEPENDENCY_SCHEMA_REMOVED", obj({}, dependencies={"a": obj({"b": S})}), obj({}), True, False),
    ("PROPERTY_ADDED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL",
     obj({"a": S}, patternProperties={"^x": S}, additionalProperties=False),
     obj({"a": S, "xb": I}, patternProperties={"^x": S}, additionalProperties=False), False, False),
    ("SCHEMA_REMOVED", {"type": "array", "items": S}, {"type": "array"}, True, False),
    ("MAX_ITEMS_DECREASED", {"type": "array", "maxItems": 5}, {"type": "array", "maxItems": 3}, False, True),
    ("MAX_ITEMS_REMOVED", {"type": "array", "maxItems": 5}, {"type": "array"}, True, False),
    ("MIN_ITEMS_INCREASED", {"type": "array", "minItems": 1}, {"type": "array", "minItems": 3}, False, True),
    ("MIN_ITEMS_REMOVED", {"type": "array", "minItems": 1}, {"type": "array"}, True, False),
    ("UNIQUE_ITEMS_REMOVED", {"type": "array", "uniqueItems": True}, {"type": "array"}, True, False),
    ("ADDITIONAL_ITEMS_ADDED", {"type": "array", "items": [S], "additionalItems": False},
     {"type": "array", "items": [S]}, True, False),
    ("ADDITIONAL_ITEMS_EXTENDED", {"type": "array", "items": [S], "additionalItems": S},
     {"type": "array", "items": [S]}, True, False),
    ("ITEM_REMOVED_FROM_OPEN_CONTENT_MODEL", {"type": "array", "items": [S, I]}, {"type": "array", "items": [S]},
     True, False),
    ("ITEM_REMOVED_FROM_CLOSED_CONTENT_MODEL", {"type": "array", "items": [S, I], "additionalItems": False},
     {"type": "array", "items": [S], "additionalItems": False}, False, True),
    ("ITEM_WITH_FALSE_REMOVED_FROM_CLOSED_CONTENT_MODEL",
     {"type": "array", "items": [S, False], "additionalItems": False},
     {"type": "array", "items": [S], "additionalItems": False}, True, True),
    ("ITEM_REMOVED_IS_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", {"type": "array", "items": [S, I],
                                                                 "additionalItems": I},
     {"type": "array", "items": [S], "additionalItems": I}, True, True),
    ("ITEM_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL", {"type": "array", "items": [S, B],
                                                                  "additionalItems": I},
     {"type": "array", "items": [S], "additionalItems": I}, False, False),
    # references: a $ref is compared as the schema it names
    ("MAX_LENGTH_ADDED", {"$ref": "#/definitions/a", "definitions": {"a": S}},
     {"$ref": "#/definitions/a", "definitions": {"a": {**S, "maxLength": 3}}}, False, True),
    ("TYPE_CHANGED", obj({"a": {"$ref": "#/definitions/s"}}, definitions={"s": S, "i": I}),
     obj({"a": {"$ref": "#/definitions/i"}}, definitions={"s": S, "i": I}), False, False),
]


def differences(old: object, new: object) -> set[str]:
    """Every difference's type from `old` to `new`, the compatible ones included."""
    loader = json_diff.Loader()
    nodes = [json_schema._node(loader, json_schema.parse(json.dumps(s)).schema) for s in (old, new)]
    return {d.type for d in json_diff.compare(*nodes)}


def check(level: str, old: object, new: object) -> list[str]:
    o, n = json_schema.parse(json.dumps(old)), json_schema.parse(json.dumps(new))
    return json_schema.check(level, n.schema, [(1, o.text, o.schema)])


@pytest.mark.parametrize("rule, old, new, backward, forward", RULES, ids=[f"{r[0]}-{i}" for i, r in enumerate(RULES)])
def test_rule(rule: str, old: object, new: object, backward: bool, forward: bool) -> None:
    assert rule in differences(old, new)
    assert (rule in json_diff.COMPATIBLE) >= backward  # an accepted change's own difference is compatible
    assert (check("BACKWARD", old, new) == []) is backward
    assert (check("FORWARD", old, new) == []) is forward
    assert (check("FULL", old, new) == []) is (backward and forward)


def test_unchanged_schemas_are_compatible_at_every_level() -> None:
    recursive = obj({"next": {"$ref": "#"}, "tags": {"type": "array", "items": S}}, ["tags"])
    for schema in (S, obj({"a": S}, ["a"]), recursive, {"oneOf": [S, I]}, True, False, {}):
        for level in ("BACKWARD", "FORWARD", "FULL"):
            assert check(level, schema, schema) == []


def test_recursive_schema_change_is_found_through_the_cycle() -> None:
    old = obj({"next": {"$ref": "#"}, "v": S})
    new = obj({"next": {"$ref": "#"}, "v": {**S, "minLength": 1}})
    assert "MIN_LENGTH_ADDED" in differences(old, new)
    assert check("BACKWARD", old, new) and check("FORWARD", old, new) == []


def test_boolean_schemas() -> None:
    assert check("BACKWARD", obj({"a": S}), obj({"a": True})) == []  # true reads anything
    assert check("BACKWARD", obj({"a": False}), obj({"a": S})) == []  # false wrote nothing
    assert check("BACKWARD", obj({"a": True}), obj({"a": S}))


def test_confluents_messages() -> None:
    old = obj({"a": S})
    text = json_schema.parse(json.dumps(old)).text
    assert check("BACKWARD", old, obj({"a": {**S, "maxLength": 5}})) == [
        '{errorType:"MAX_LENGTH_ADDED", description:"The keyword at path \'#/properties/a/maxLength\' in the new '
        'schema is not present in the old schema\'}',
        "{oldSchemaVersion: 1}", f"{{oldSchema: '{text}'}}", "{compatibility: 'BACKWARD'}"]
    # FORWARD: the roles swap (the old schema reads what the new one writes)
    forward = check("FORWARD", obj({"a": {**S, "maxLength": 5}}), old)
    assert forward[0] == ('{errorType:"MAX_LENGTH_ADDED", description:"The keyword at path \'#/properties/a/'
                          'maxLength\' in the old schema is not present in the new schema\'}')
    # FULL: the forward details first, then the backward ones, the old version named once at the end
    full = check("FULL", obj({"a": {**S, "maxLength": 5}}), obj({"a": {**S, "minLength": 1}}))
    assert [m[:40] for m in full[:2]] == ['{errorType:"MAX_LENGTH_ADDED", descripti',
                                          '{errorType:"MIN_LENGTH_ADDED", descripti']
    assert full[2:4] == ["{oldSchemaVersion: 1}", full[3]] and full[-1] == "{compatibility: 'FULL'}"


def test_transitive_levels_check_every_version_newest_first() -> None:
    v1 = obj({"a": S, "b": I}, **CLOSED)
    v2 = obj({"a": S}, patternProperties={"^b": I}, **CLOSED)  # b is still read, as a pattern property
    v3 = obj({"a": S}, patternProperties={"^b": S}, **CLOSED)  # a pattern's schema is not compared, b's is
    parsed = [json_schema.parse(json.dumps(s)) for s in (v1, v2, v3)]
    previous = [(i + 1, p.text, p.schema) for i, p in enumerate(parsed[:2])]
    assert json_schema.check("BACKWARD", parsed[1].schema, previous[:1]) == []
    assert json_schema.check("BACKWARD", parsed[2].schema, previous) == []
    details = json_schema.check("BACKWARD_TRANSITIVE", parsed[2].schema, previous)
    assert [d.split('"')[1] for d in details[:2]] == [
        "TYPE_CHANGED", "PROPERTY_REMOVED_NOT_COVERED_BY_PARTIALLY_OPEN_CONTENT_MODEL"]  # b: I, then S
    assert "{oldSchemaVersion: 1}" in details and details[-1] == "{compatibility: 'BACKWARD_TRANSITIVE'}"
    assert json_schema.check("NONE", parsed[2].schema, previous) == []


def test_references_resolve_by_id() -> None:
    address = {"$id": "https://example.com/address.json", **obj({"city": S})}
    address2 = {"$id": "https://example.com/address.json", **obj({"city": {**S, "maxLength": 9}})}
    person = json.dumps(obj({"home": {"$ref": "https://example.com/address.json"}}))
    old = json_schema.parse(person, [json.dumps(address)])
    new = json_schema.parse(person, [json.dumps(address2)])
    details = json_schema.check("BACKWARD", new.schema, [(1, old.text, old.schema)])
    assert "#/properties/home/properties/city/maxLength" in details[0]
    assert json_schema.check("FORWARD", new.schema, [(1, old.text, old.schema)]) == []
    # a reference that does not resolve is compared by its text
    unresolved = json_schema.parse(json.dumps(obj({"home": {"$ref": "elsewhere.json"}})))
    other = json_schema.parse(json.dumps(obj({"home": {"$ref": "other.json"}})))
    assert json_schema.check("BACKWARD", unresolved.schema, [(1, unresolved.text, unresolved.schema)]) == []
    assert json_schema.check("BACKWARD", other.schema, [(1, unresolved.text, unresolved.schema)])


def test_connect_bytes_types_are_one_type() -> None:
    old = {"type": "string", "connect.type": "bytes"}
    new = {"type": "number", "connect.type": "bytes"}
    assert check("FULL", old, new) == []


def test_comparison_is_bounded() -> None:
    branches = [obj({f"p{i}": S, f"q{i}": I}) for i in range(150)]
    old, new = {"oneOf": branches}, {"oneOf": branches[::-1] + [S]}
    with pytest.raises(errors.RegistryError) as info:
        check("BACKWARD", old, new)
    assert info.value.error_code == 42205


def test_self_references_and_deep_nesting() -> None:
    looping = {"allOf": [{"$ref": "#"}, S]}
    assert check("FULL", looping, looping) == []
    assert check("FULL", {"$ref": "#"}, {"$ref": "#"}) == []  # a reference to itself only: compared as text
    for depth in (60, 400, 50_000):  # too deep to be compared (42205), or to be read at all (42201)
        text = '{"type":"array","items":' * depth + '{"type":"string"}' + "}" * depth
        try:
            parsed = json_schema.parse(text)
            assert json_schema.check("BACKWARD", parsed.schema, [(1, parsed.text, parsed.schema)]) == []
        except errors.RegistryError as exc:
            assert depth > 60 and exc.error_code in (42201, 42205)


def test_references_resolve_by_name_through_the_registry() -> None:
    import asyncio

    from minikafka.schema_registry.registry import SchemaRegistry
    from minikafka.schema_registry.store import MemoryStore

    reg, run = SchemaRegistry(MemoryStore()), asyncio.run

    def body(schema: object, address_version: int) -> dict:
        return {"schemaType": "JSON", "schema": json.dumps(schema),
                "references": [{"name": "address.json", "subject": "address", "version": address_version}]}

    run(reg.set_config("address", {"compatibility": "NONE"}))
    run(reg.register("address", {"schemaType": "JSON", "schema": json.dumps(obj({"city": S}))}))
    run(reg.register("address", {"schemaType": "JSON", "schema": json.dumps(obj({"city": I}))}))
    person = obj({"home": {"$ref": "address.json"}})
    run(reg.register("person", body(person, 1)))
    # the same text, referencing address version 2: the referenced schemas are compared, city changed type
    answer = reg.check_compatibility("person", "latest", body(person, 2), verbose=True)
    assert answer["is_compatible"] is False
    assert "#/properties/home/properties/city" in answer["messages"][0]
    assert reg.check_compatibility("person", "latest", body(person, 1)) == {"is_compatible": True}


def test_pattern_properties_match_in_linear_time() -> None:
    name = "a" * 40 + "!"  # catastrophic for a backtracking engine with the pattern below
    old = obj({"x": S}, patternProperties={"^(a+)+$": S, "(?=lookahead)": S}, **CLOSED)
    new = obj({"x": S, name: I}, patternProperties={"^(a+)+$": S, "(?=lookahead)": S}, **CLOSED)
    assert "OPTIONAL_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL" in differences(old, new)  # no pattern matches it
    assert check("BACKWARD", old, new) == []
