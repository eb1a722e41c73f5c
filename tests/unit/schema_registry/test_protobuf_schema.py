"""Protobuf schemas (schema_registry/protobuf_schema.py, protobuf_printer.py, protobuf_compat.py): parsing .proto
text and base64 descriptors, the printed canonical text (text -> descriptor -> text -> the same descriptor),
references by import name, `?format=serialized`, and Confluent's compatibility rules, each at BACKWARD, FORWARD
and FULL (and transitively through the registry)."""
from __future__ import annotations

import asyncio
import base64

import pytest
from google.protobuf import descriptor_pb2

from minikafka.schema_registry import protobuf_compat, protobuf_schema
from minikafka.schema_registry.errors import RegistryError
from minikafka.schema_registry.registry import ReferenceText, SchemaRegistry
from minikafka.schema_registry.store import MemoryStore

RICH = '''
syntax = "proto3";
package shop.v1;
import "google/protobuf/timestamp.proto";
import "google/protobuf/descriptor.proto";
option java_package = "com.example.shop";
option optimize_for = SPEED;

extend google.protobuf.FieldOptions { string pii = 50001; }

// comments are not kept
message Order {
  option deprecated = true;
  int64 id = 1 [json_name = "orderId"];
  google.protobuf.Timestamp at = 2;
  repeated Line lines = 3;
  map<string, Line> by_sku = 4;
  oneof payment { string card = 5 [(pii) = "card"]; bytes token = 6; }
  optional string note = 7;
  Status status = 8;
  reserved 9, 20 to 30, 100 to max;
  reserved "old", "older";
  message Line { string sku = 1; uint32 qty = 2 [deprecated = true]; }
  enum Status { option allow_alias = true; NEW = 0; OPEN = 0; DONE = 2 [deprecated = true]; reserved 5 to 9; }
}

enum Kind { KIND_UNSET = 0; KIND_A = 1; }

service Shop {
  rpc Get(Order) returns (Order);
  rpc Watch(stream Order) returns (stream Order) { option deprecated = true; }
}
'''

PROTO2 = r'''
syntax = "proto2";
package legacy;
message Item {
  required int32 id = 1 [default = 7];
  optional string name = 2 [default = "a \"quoted\" name"];
  optional bytes raw = 3 [default = "\001\377"];
  optional double ratio = 4 [default = inf];
  optional Color color = 5 [default = RED];
  repeated int32 packed = 6 [packed = true];
  optional group Extra = 7 { optional string note = 1; }
  extensions 100 to 199, 1000 to max;
  enum Color { RED = 1; BLUE = 2; }
}
extend Item { optional int32 more = 100; }
'''


EDITION = '''
edition = "2023";
package ed;
message E { int32 a = 1 [features.field_presence = IMPLICIT]; string b = 2; repeated int32 c = 3; }
'''


def ref(text: str, name: str) -> ReferenceText:
    return ReferenceText(text, name)


def parsed(text: str, refs: list[ReferenceText] = ()) -> protobuf_schema.ParsedProtobuf:
    return protobuf_schema.parse(text, list(refs))


def invalid(text: str, refs: list[ReferenceText] = ()) -> str:
    with pytest.raises(RegistryError) as info:
        parsed(text, refs)
    assert info.value.error_code == 42201
    return info.value.message


def without_names(file: descriptor_pb2.FileDescriptorProto) -> descriptor_pb2.FileDescriptorProto:
    out = descriptor_pb2.FileDescriptorProto()
    out.CopyFrom(file)
    out.ClearField("name")
    return out


# ==================================================================== parsing and printing

@pytest.mark.parametrize("text", [RICH, PROTO2, 'syntax = "proto3";\nmessage Empty {}\n',
                                  'syntax = "proto3";\nenum Only { ZERO = 0; }\n', EDITION])
def test_printed_text_compiles_to_the_same_descriptor(text: str) -> None:
    first = parsed(text)
    again = parsed(first.text)
    assert again.text == first.text
    assert without_names(again.schema.file) == without_names(first.schema.file)


def test_the_printed_text_keeps_what_the_schema_says() -> None:
    text = parsed(RICH).text
    assert "// comments" not in text
    for expected in ('option java_package = "com.example.shop";', "option optimize_for = SPEED;",
                     "option deprecated = true;", 'int64 id = 1 [json_name = "orderId"];',
                     "map<string, .shop.v1.Order.Line> by_sku = 4;", "oneof payment {",
                     'string card = 5 [(shop.v1.pii) = "card"];', "optional string note = 7;",
                     "reserved 9, 20 to 30, 100 to max;", 'reserved "old", "older";',
                     "option allow_alias = true;", "DONE = 2 [deprecated = true];", "reserved 5 to 9;",
                     "rpc Watch(stream .shop.v1.Order) returns (stream .shop.v1.Order) {"):
        assert expected in text, expected
    proto2 = parsed(PROTO2).text
    for expected in ("required int32 id = 1 [default = 7];", r'[default = "a \"quoted\" name"]',
                     r'[default = "\001\377"]', "[default = inf]", "[default = RED]",
                     "optional group Extra = 7 {", "extensions 100 to 199;", "extensions 1000 to max;",
                     "extend .legacy.Item {"):
        assert expected in proto2, expected


def test_a_base64_descriptor_is_the_same_schema_as_its_text() -> None:
    text = parsed(RICH)
    b64 = protobuf_schema.formatted(text.schema, "serialized")
    from_descriptor = parsed(b64)
    assert from_descriptor.text == text.text
    # what confluent-kafka's ProtobufSerializer sends: the generated file's own descriptor, under its own name
    file = descriptor_pb2.FileDescriptorProto()
    file.CopyFrom(text.schema.file)
    file.name = "shop/v1/order.proto"
    assert parsed(base64.b64encode(file.SerializeToString()).decode()).text == text.text
    assert protobuf_schema.formatted(text.schema, "") is None  # the stored text
    assert protobuf_schema.formatted(text.schema, "ignore_extensions") is None


def test_references_are_imported_by_their_name() -> None:
    dep = 'syntax = "proto3";\npackage common;\nmessage Money { int64 units = 1; string currency = 2; }\n'
    main = 'syntax = "proto3";\nimport "common/money.proto";\nmessage Price { common.Money amount = 1; }\n'
    price = parsed(main, [ref(dep, "common/money.proto")])
    assert 'import "common/money.proto";' in price.text and ".common.Money amount = 1;" in price.text
    assert [d.name for d in price.schema.deps] == ["common/money.proto"]
    b64 = protobuf_schema.formatted(price.schema, "serialized")
    assert parsed(b64, [ref(dep, "common/money.proto")]).text == price.text
    assert "File not found" in invalid(main)
    assert "Money" in invalid(main, [ref(dep.replace("Money", "Cash"), "common/money.proto")])
    assert "imported by" in invalid(main, ["not named"])  # type: ignore[list-item]


def test_confluent_imports_and_custom_options() -> None:
    text = '''syntax = "proto3";
package p;
import "confluent/meta.proto";
import "confluent/type/decimal.proto";
message M {
  option (confluent.message_meta) = { doc: "a message", params: [{key: "k", value: "v"}] };
  confluent.type.Decimal amount = 1 [(confluent.field_meta) = { doc: "money", tags: ["PII"] }];
}
'''
    m = parsed(text)
    assert 'option (confluent.message_meta) = { doc: "a message" params { key: "k" value: "v" } };' in m.text
    assert '.confluent.type.Decimal amount = 1 [(confluent.field_meta) = { doc: "money" tags: "PII" }];' in m.text
    assert parsed(m.text).text == m.text
    assert parsed(protobuf_schema.formatted(m.schema, "serialized")).text == m.text


def test_well_known_imports_need_no_reference() -> None:
    text = '''syntax = "proto3";
import "google/protobuf/timestamp.proto";
import "google/protobuf/wrappers.proto";
import "google/type/date.proto";
message Event { google.protobuf.Timestamp at = 1; google.protobuf.StringValue who = 2; google.type.Date day = 3; }
'''
    event = parsed(text)
    assert {d.name for d in event.schema.deps} >= {"google/protobuf/timestamp.proto", "google/type/date.proto"}


@pytest.mark.parametrize("text, detail", [
    ('syntax = "proto3";\nmessage A { strin x = 1; }', 'default:2:13: "strin" is not defined.'),
    ('syntax = "proto3";\nmessage A { int32 x = 1; int32 y = 1; }', "has already been used"),
    ('syntax = "proto3";\nmessage A { required int32 x = 1; }', "Required fields are not allowed in proto3"),
    ("message A {", "Reached end of input"),
    ("QUJD", "neither .proto text nor a base64 FileDescriptorProto"),
    ('syntax = "proto3";\nimport "nowhere/x.proto";\nmessage A {}', "nowhere/x.proto"),
])
def test_invalid_schemas_are_42201(text: str, detail: str) -> None:
    assert detail in invalid(text)


def test_a_descriptor_naming_an_unknown_type_is_invalid() -> None:
    file = descriptor_pb2.FileDescriptorProto(name="x.proto", syntax="proto3")
    message = file.message_type.add(name="A")
    message.field.add(name="b", number=1, type=descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE,
                      type_name=".nowhere.B", label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
    assert "nowhere.B" in invalid(base64.b64encode(file.SerializeToString()).decode())


# ==================================================================== compatibility rules

def schema(body: str, package: str = "p", syntax: str = "proto3") -> protobuf_schema.ProtoSchema:
    head = f'syntax = "{syntax}";\n' + (f"package {package};\n" if package else "")
    return parsed(head + body).schema


def kinds(old: str, new: str, **kw: str) -> list[str]:
    return [d.type for d in protobuf_compat.differences(schema(old, **kw), schema(new, **kw))]


def verdicts(old: str, new: str, **kw: str) -> dict[str, bool]:
    """Compatible at each level (True/False) of `new` registered after `old`."""
    o, n = schema(old, **kw), schema(new, **kw)
    return {level: not protobuf_compat.check(level, n, [(1, "old", o)]) for level in ("BACKWARD", "FORWARD", "FULL")}


BOTH = {"BACKWARD": True, "FORWARD": True, "FULL": True}
NEITHER = {"BACKWARD": False, "FORWARD": False, "FULL": False}
ONLY_FORWARD = {"BACKWARD": False, "FORWARD": True, "FULL": False}
ONLY_BACKWARD = {"BACKWARD": True, "FORWARD": False, "FULL": False}

# (rule, old, new, difference types of new against old, verdicts)
RULES = [
    ("field added", "message M { int32 a = 1; }", "message M { int32 a = 1; string b = 2; }",
     ["FIELD_ADDED"], BOTH),
    ("field removed", "message M { int32 a = 1; string b = 2; }", "message M { int32 a = 1; }",
     ["FIELD_REMOVED"], BOTH),
    ("field renamed", "message M { int32 a = 1; }", "message M { int32 renamed = 1; }",
     ["FIELD_NAME_CHANGED"], BOTH),
    ("field number changed", "message M { int32 a = 1; }", "message M { int32 a = 2; }",
     ["FIELD_REMOVED", "FIELD_ADDED"], BOTH),
    ("int32 -> int64 (one group)", "message M { int32 a = 1; }", "message M { int64 a = 1; }", [], BOTH),
    ("uint64 -> bool (one group)", "message M { uint64 a = 1; }", "message M { bool a = 1; }", [], BOTH),
    ("sint32 -> sint64", "message M { sint32 a = 1; }", "message M { sint64 a = 1; }", [], BOTH),
    ("string -> bytes", "message M { string a = 1; }", "message M { bytes a = 1; }", [], BOTH),
    ("fixed32 -> sfixed32", "message M { fixed32 a = 1; }", "message M { sfixed32 a = 1; }", [], BOTH),
    ("fixed64 -> sfixed64", "message M { fixed64 a = 1; }", "message M { sfixed64 a = 1; }", [], BOTH),
    ("int32 -> enum", "message M { int32 a = 1; }", "message M { E a = 1; } enum E { Z = 0; }",
     ["ENUM_ADDED"], BOTH),
    ("int32 -> sint32", "message M { int32 a = 1; }", "message M { sint32 a = 1; }",
     ["FIELD_SCALAR_KIND_CHANGED"], NEITHER),
    ("int32 -> string", "message M { int32 a = 1; }", "message M { string a = 1; }",
     ["FIELD_SCALAR_KIND_CHANGED"], NEITHER),
    ("fixed32 -> fixed64", "message M { fixed32 a = 1; }", "message M { fixed64 a = 1; }",
     ["FIELD_SCALAR_KIND_CHANGED"], NEITHER),
    ("float -> double", "message M { float a = 1; }", "message M { double a = 1; }",
     ["FIELD_SCALAR_KIND_CHANGED"], NEITHER),
    ("scalar -> message", "message M { int32 a = 1; } message N {}", "message M { N a = 1; } message N {}",
     ["FIELD_KIND_CHANGED"], NEITHER),
    ("scalar -> map", "message M { int32 a = 1; }", "message M { map<string, int32> a = 1; }",
     ["FIELD_KIND_CHANGED"], NEITHER),
    ("map value kind", "message M { map<string, int32> a = 1; }", "message M { map<string, string> a = 1; }",
     ["FIELD_SCALAR_KIND_CHANGED"], NEITHER),
    ("message field names another message", "message M { A f = 1; } message A {} message B {}",
     "message M { B f = 1; } message A {} message B {}", ["FIELD_NAMED_TYPE_CHANGED"], NEITHER),
    ("optional numeric -> repeated", "message M { optional int32 a = 1; }", "message M { repeated int32 a = 1; }",
     ["FIELD_NUMERIC_LABEL_CHANGED"], NEITHER),
    ("optional string -> repeated", "message M { optional string a = 1; }",
     "message M { repeated string a = 1; }", ["FIELD_STRING_OR_BYTES_LABEL_CHANGED"], BOTH),
    ("message removed", "message M {} message N {}", "message M {}", ["MESSAGE_REMOVED"], ONLY_FORWARD),
    ("message added", "message M {}", "message M {} message N {}", ["MESSAGE_ADDED"], ONLY_BACKWARD),
    ("message moved", "message M {} message N {}", "message N {} message M {}",
     ["MESSAGE_MOVED", "MESSAGE_MOVED"], BOTH),
    ("nested message removed", "message M { message In {} }", "message M {}", ["MESSAGE_REMOVED"], ONLY_FORWARD),
    ("enum added and removed", "message M {} enum E { Z = 0; }", "message M {} enum F { Z = 0; }",
     ["ENUM_REMOVED", "ENUM_ADDED"], BOTH),
    ("enum constants", "enum E { Z = 0; A = 1; B = 2; }", "enum E { Z = 0; A2 = 1; C = 3; }",
     ["ENUM_CONST_CHANGED", "ENUM_CONST_REMOVED", "ENUM_CONST_ADDED"], BOTH),
    ("oneof added", "message M { int32 a = 1; }", "message M { int32 a = 1; oneof o { string b = 2; } }",
     ["ONEOF_ADDED", "ONEOF_FIELD_ADDED"], BOTH),
    ("oneof removed whole", "message M { int32 a = 1; oneof o { string b = 2; int32 c = 3; } }",
     "message M { int32 a = 1; }", ["ONEOF_REMOVED"], BOTH),
    ("oneof member removed", "message M { oneof o { string b = 2; int32 c = 3; } }",
     "message M { oneof o { string b = 2; } }", ["ONEOF_FIELD_REMOVED"], ONLY_FORWARD),
    ("oneof member added", "message M { oneof o { string b = 2; } }",
     "message M { oneof o { string b = 2; int32 c = 3; } }", ["ONEOF_FIELD_ADDED"], ONLY_BACKWARD),
    ("oneof member moved to top level", "message M { oneof o { string b = 2; int32 c = 3; } }",
     "message M { string b = 2; oneof o { int32 c = 3; } }", ["ONEOF_FIELD_MOVED_TO_TOP_LEVEL"], ONLY_BACKWARD),
    ("one field moved into a new oneof", "message M { string b = 2; }", "message M { oneof o { string b = 2; } }",
     ["ONEOF_ADDED"], BOTH),
    ("fields moved into one oneof", "message M { string b = 2; int32 c = 3; }",
     "message M { oneof o { string b = 2; int32 c = 3; } }", ["MULTIPLE_FIELDS_MOVED_TO_ONEOF", "ONEOF_ADDED"],
     ONLY_FORWARD),
    ("field moved into an existing oneof", "message M { string b = 2; oneof o { int32 c = 3; } }",
     "message M { oneof o { string b = 2; int32 c = 3; } }", ["FIELD_MOVED_TO_EXISTING_ONEOF"], ONLY_FORWARD),
    ("nested type's field kind", "message M { message In { int32 x = 1; } In i = 1; }",
     "message M { message In { string x = 1; } In i = 1; }", ["FIELD_SCALAR_KIND_CHANGED"], NEITHER),
    ("proto3 singular -> repeated (Confluent has no label to compare)", "message M { int32 a = 1; }",
     "message M { repeated int32 a = 1; }", [], BOTH),
    ("proto3 optional added to a field", "message M { int32 a = 1; }", "message M { optional int32 a = 1; }",
     [], BOTH),
]


@pytest.mark.parametrize("rule, old, new, expected, verdict", RULES, ids=[r[0] for r in RULES])
def test_rule(rule: str, old: str, new: str, expected: list[str], verdict: dict[str, bool]) -> None:
    assert sorted(kinds(old, new)) == sorted(expected)
    assert verdicts(old, new) == verdict


PROTO2_RULES = [
    ("required field added", "message M { optional int32 a = 1; }",
     "message M { optional int32 a = 1; required int32 b = 2; }", ["REQUIRED_FIELD_ADDED"], NEITHER),
    ("required field removed", "message M { optional int32 a = 1; required int32 b = 2; }",
     "message M { optional int32 a = 1; }", ["REQUIRED_FIELD_REMOVED"], NEITHER),
    ("optional -> required", "message M { optional int32 a = 1; }", "message M { required int32 a = 1; }",
     ["FIELD_NUMERIC_LABEL_CHANGED"], NEITHER),
    ("optional field added", "message M { optional int32 a = 1; }",
     "message M { optional int32 a = 1; optional int32 b = 2; }", ["FIELD_ADDED"], BOTH),
]


@pytest.mark.parametrize("rule, old, new, expected, verdict", PROTO2_RULES, ids=[r[0] for r in PROTO2_RULES])
def test_proto2_rule(rule: str, old: str, new: str, expected: list[str], verdict: dict[str, bool]) -> None:
    assert sorted(kinds(old, new, syntax="proto2")) == sorted(expected)
    assert verdicts(old, new, syntax="proto2") == verdict


def test_package_changed_is_incompatible_both_ways() -> None:
    old, new = schema("message M {}", package="a"), schema("message M {}", package="b")
    assert [d.type for d in protobuf_compat.differences(old, new)] == ["PACKAGE_CHANGED"]
    assert protobuf_compat.check("FULL", new, [(1, "old", old)])


def test_syntax_change_alone_is_compatible() -> None:
    # Confluent's diff has no rule for the syntax; what changes with it (labels, required) is judged by field
    assert verdicts("message M { optional int32 a = 1; }", "message M { optional int32 a = 1; }") == BOTH
    proto2 = parsed('syntax = "proto2";\npackage p;\nmessage M { optional int32 a = 1; }').schema
    proto3 = schema("message M { optional int32 a = 1; }")
    assert protobuf_compat.check("FULL", proto3, [(1, "old", proto2)]) == []


def test_details_in_confluents_words() -> None:
    old = schema("message M { int32 a = 1; } message N {}")
    new = schema("message M { string a = 1; }")
    details = protobuf_compat.check("BACKWARD", new, [(3, "OLD TEXT", old)])
    assert details == [
        '{errorType:"FIELD_SCALAR_KIND_CHANGED", description:"The kind of a SCALAR field at path \'#/M/1\' in the '
        'new schema does not match its kind in the old schema"}',
        '{errorType:"MESSAGE_REMOVED", description:"The new schema is missing a MESSAGE type at path \'#/N\' in the '
        'old schema"}',
        "{oldSchemaVersion: 3}", "{oldSchema: 'OLD TEXT'}", "{compatibility: 'BACKWARD'}"]
    forward = protobuf_compat.check("FORWARD", new, [(3, "OLD TEXT", old)])
    assert forward[0] == ('{errorType:"FIELD_SCALAR_KIND_CHANGED", description:"The kind of a SCALAR field at path '
                          '\'#/M/1\' in the old schema does not match its kind in the new schema"}')
    assert forward[-1] == "{compatibility: 'FORWARD'}"


def test_referenced_message_changes_are_compared() -> None:
    v1 = 'syntax = "proto3";\npackage c;\nmessage Money { int64 units = 1; }\n'
    v2 = 'syntax = "proto3";\npackage c;\nmessage Money { string units = 1; }\n'
    main = 'syntax = "proto3";\nimport "c/money.proto";\nmessage Price { c.Money amount = 1; }\n'
    old = parsed(main, [ref(v1, "c/money.proto")]).schema
    new = parsed(main, [ref(v2, "c/money.proto")]).schema
    assert [d.type for d in protobuf_compat.differences(old, new)] == ["FIELD_SCALAR_KIND_CHANGED",
                                                                      "FIELD_NAMED_TYPE_CHANGED"]
    assert [d.path for d in protobuf_compat.differences(old, new)] == ["#/Money/1", "#/Price/1"]
    assert protobuf_compat.differences(old, old) == []


def test_recursive_messages_terminate() -> None:
    old = schema("message Node { Node next = 1; int32 v = 2; }")
    new = schema("message Node { Node next = 1; int64 v = 2; }")
    assert protobuf_compat.differences(old, new) == []


# ==================================================================== through the registry

def run(coro):
    return asyncio.run(coro)


def proto(body: str) -> dict:
    return {"schemaType": "PROTOBUF", "schema": 'syntax = "proto3";\npackage p;\n' + body}


def test_registry_transitive_levels_and_formats() -> None:
    reg = SchemaRegistry(MemoryStore())
    v1 = proto("message M { int32 a = 1; }")
    assert run(reg.register("s", v1)) == {"id": 1}
    as_descriptor = {"schemaType": "PROTOBUF", "schema": reg.schema_by_id(1, "serialized")["schema"]}
    assert run(reg.register("s", as_descriptor)) == {"id": 1}  # the same schema, sent as a descriptor
    assert reg.lookup("s", as_descriptor)["version"] == 1
    assert reg.version("s", 1, fmt="serialized")["schema"] == as_descriptor["schema"]
    assert reg.version_schema("s", "latest", fmt="serialized") == as_descriptor["schema"]
    assert reg.schema_text_by_id(1, "SERIALIZED") == as_descriptor["schema"]
    assert reg.schema_by_id(1)["schema"].startswith('syntax = "proto3";')
    assert reg.schema_by_id(1, "unknown")["schema"] == reg.schema_by_id(1)["schema"]
    assert run(reg.register("s", proto("message M {}"))) == {"id": 2}  # field removed: BACKWARD accepts
    # field 1 comes back as a string: compatible with v2 (a field added), not with v1 (int32 -> string)
    again = proto("message M { string a = 1; }")
    assert reg.check_compatibility("s", None, again)["is_compatible"]
    run(reg.set_config("s", {"compatibility": "BACKWARD_TRANSITIVE"}))
    answer = reg.check_compatibility("s", None, again, verbose=True)
    assert answer["is_compatible"] is False
    assert answer["messages"][0].startswith('{errorType:"FIELD_SCALAR_KIND_CHANGED"')
    assert "{oldSchemaVersion: 1}" in answer["messages"]
    with pytest.raises(RegistryError) as info:
        run(reg.register("s", again))
    assert info.value.error_code == 409
    run(reg.set_config("s", {"compatibility": "FULL"}))
    assert run(reg.register("s", again)) == {"id": 3}


def test_registry_references_by_name() -> None:
    reg = SchemaRegistry(MemoryStore())
    dep = {"schemaType": "PROTOBUF", "schema": 'syntax = "proto3";\npackage c;\nmessage Money { int64 u = 1; }\n'}
    assert run(reg.register("money", dep)) == {"id": 1}
    main = {"schemaType": "PROTOBUF",
            "schema": 'syntax = "proto3";\nimport "c/money.proto";\nmessage Price { c.Money m = 1; }\n',
            "references": [{"name": "c/money.proto", "subject": "money", "version": 1}]}
    assert run(reg.register("price", main)) == {"id": 2}
    assert reg.referenced_by("money", 1) == [2]
    body = reg.version("price", 1, fmt="serialized")
    assert body["references"] == main["references"]
    file = descriptor_pb2.FileDescriptorProto.FromString(base64.b64decode(body["schema"]))
    assert list(file.dependency) == ["c/money.proto"]


def test_a_protobuf_schema_past_the_size_bound_is_42201_before_protoc_runs() -> None:
    """protoc runs on the event loop and grows faster than the text (20 000 messages: most of a minute): a
    schema (with its references) past MAX_SOURCE_CHARS is refused at once; one under it compiles."""
    import time
    messages = 'syntax = "proto3";\n' + "".join(f"message M{i} {{ int32 a = 1; }}\n" for i in range(20_000))
    assert len(messages) > protobuf_schema.MAX_SOURCE_CHARS
    started = time.monotonic()
    with pytest.raises(RegistryError) as info:
        protobuf_schema.parse(messages)
    assert info.value.error_code == 42201 and "limited" in info.value.message
    assert time.monotonic() - started < 5.0
    with pytest.raises(RegistryError) as info:
        protobuf_schema.parse('syntax = "proto3";\nimport "big.proto";\nmessage A { M0 m = 1; }\n',
                              [ReferenceText(messages.replace('syntax = "proto3";\n', ""), "big.proto")])
    assert info.value.error_code == 42201 and "limited" in info.value.message
    under = 'syntax = "proto3";\n' + "".join(f"message M{i} {{ int32 a = 1; }}\n" for i in range(200))
    assert "message M199" in protobuf_schema.parse(under).text
