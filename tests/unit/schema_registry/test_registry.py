"""The registry's operations over an in-memory store (schema_registry/registry.py, state.py, records.py):
Confluent's answers and error codes, and a replay of the records rebuilding the same state."""
from __future__ import annotations

import asyncio
import json

import pytest

from minikafka.schema_registry import records as r
from minikafka.schema_registry.errors import RegistryError
from minikafka.schema_registry.registry import SchemaRegistry
from minikafka.schema_registry.store import MemoryStore


def record(*fields: str, name: str = "User") -> dict:
    return {"schema": json.dumps({"type": "record", "name": name,
                                  "fields": [{"name": f, "type": "string", "default": ""} for f in fields]})}


REQUIRED_B = {"schema": json.dumps({"type": "record", "name": "User",
                                    "fields": [{"name": "a", "type": "string", "default": ""},
                                               {"name": "b", "type": "string"}]})}


def run(coro):
    return asyncio.run(coro)


def fails(code: int, fn, *args, **kwargs) -> RegistryError:
    with pytest.raises(RegistryError) as info:
        out = fn(*args, **kwargs)
        if asyncio.iscoroutine(out):
            run(out)
    assert info.value.error_code == code, info.value.message
    return info.value


@pytest.fixture
def reg() -> SchemaRegistry:
    return SchemaRegistry(MemoryStore())


def test_register_ids_versions_and_reuse(reg: SchemaRegistry) -> None:
    assert run(reg.register("a-value", record("a"))) == {"id": 1}
    assert run(reg.register("a-value", record("a"))) == {"id": 1}  # identical: the existing id, no new version
    assert run(reg.register("b-value", record("a"))) == {"id": 1}  # same schema elsewhere: same id
    assert run(reg.register("a-value", record("a", "c"))) == {"id": 2}
    assert reg.versions("a-value") == [1, 2]
    assert reg.versions("b-value") == [1]
    assert reg.subjects() == ["a-value", "b-value"]
    latest = reg.version("a-value", "latest")
    assert (latest["version"], latest["id"], latest["subject"]) == (2, 2, "a-value")
    assert "schemaType" not in latest  # AVRO is implied, as Confluent answers
    assert reg.version_schema("a-value", 1) == reg.schema_by_id(1)["schema"]
    assert reg.id_versions(1) == [{"subject": "a-value", "version": 1}, {"subject": "b-value", "version": 1}]
    assert reg.id_subjects(1) == ["a-value", "b-value"]
    assert reg.lookup("a-value", record("a"))["version"] == 1
    assert reg.schema_types() == ["AVRO", "JSON", "PROTOBUF"]
    assert [(b["subject"], b["version"]) for b in reg.schemas()] == [("a-value", 1), ("a-value", 2), ("b-value", 1)]
    assert [(b["subject"], b["version"]) for b in reg.schemas("a", latest_only=True)] == [("a-value", 2)]


def test_not_found_and_invalid_answers(reg: SchemaRegistry) -> None:
    fails(40401, reg.versions, "nope")
    fails(40401, reg.version, "nope", 1)
    fails(40401, reg.lookup, "nope", record("a"))
    fails(40403, reg.schema_by_id, 9)
    run(reg.register("s", record("a")))
    fails(40402, reg.version, "s", 5)
    fails(42202, reg.version, "s", "x")
    fails(42202, reg.version, "s", 0)
    fails(40403, reg.lookup, "s", record("zzz"))
    fails(42201, reg.register, "s", {"schema": "{not json"})
    fails(42201, reg.register, "s", {"schema": "{}", "schemaType": "PROTOBUF"})


def test_incompatible_is_409_and_config_decides(reg: SchemaRegistry) -> None:
    run(reg.register("s", record("a")))
    err = fails(409, reg.register, "s", REQUIRED_B)
    assert err.status == 409 and 'subject "s"' in err.message
    assert reg.check_compatibility("s", "latest", REQUIRED_B) == {"is_compatible": False}
    assert reg.check_compatibility("s", None, record("a", "z")) == {"is_compatible": True}
    assert reg.check_compatibility("s", 1, REQUIRED_B, verbose=True)["messages"]
    assert run(reg.set_config("s", {"compatibility": "forward"})) == {"compatibility": "FORWARD"}
    assert reg.get_config("s") == {"compatibilityLevel": "FORWARD"}
    assert reg.get_config(None) == {"compatibilityLevel": "BACKWARD"}
    assert run(reg.register("s", REQUIRED_B)) == {"id": 2}
    fails(42203, reg.set_config, None, {"compatibility": "SIDEWAYS"})
    fails(40408, reg.get_config, "other")
    assert reg.get_config("other", default_to_global=True) == {"compatibilityLevel": "BACKWARD"}
    assert run(reg.delete_config("s")) == {"compatibilityLevel": "FORWARD"}
    fails(40408, reg.delete_config, "s")


def test_soft_and_permanent_delete(reg: SchemaRegistry) -> None:
    run(reg.register("s", record("a")))
    run(reg.register("s", record("a", "b")))
    fails(40407, reg.delete_version, "s", 1, permanent=True)  # not soft-deleted first
    assert run(reg.delete_version("s", 1)) == 1
    fails(40402, reg.version, "s", 1)
    assert reg.version("s", 1, deleted=True)["id"] == 1
    assert reg.schema_by_id(1)  # soft-deleted versions still resolve by id
    assert reg.versions("s") == [2] and reg.versions("s", deleted=True) == [1, 2]
    fails(40406, reg.delete_version, "s", 1)
    assert run(reg.delete_version("s", 1, permanent=True)) == 1
    fails(40403, reg.schema_by_id, 1)  # nothing carries id 1 any more
    fails(40405, reg.delete_subject, "s", permanent=True)
    assert run(reg.delete_subject("s")) == [2]
    fails(40401, reg.versions, "s")
    assert reg.subjects() == [] and reg.subjects(deleted=True) == ["s"]
    fails(40404, reg.delete_subject, "s")
    assert run(reg.register("s", record("a", "b"))) == {"id": 2}  # re-registered after a soft delete
    assert reg.versions("s") == [3]  # versions are not reused
    run(reg.delete_subject("s"))
    assert run(reg.delete_subject("s", permanent=True)) == [2, 3]
    assert reg.subjects(deleted=True) == []
    assert run(reg.register("s", record("a"))) == {"id": 3}  # ids are not reused either
    assert reg.versions("s") == [1]


def test_modes(reg: SchemaRegistry) -> None:
    assert reg.get_mode(None) == {"mode": "READWRITE"}
    run(reg.register("s", record("a")))
    fails(42205, reg.set_mode, "s", {"mode": "IMPORT"})  # the subject has versions
    assert run(reg.set_mode("s", {"mode": "READONLY"})) == {"mode": "READONLY"}
    fails(42205, reg.register, "s", record("a", "b"))
    fails(42205, reg.delete_version, "s", 1)
    assert run(reg.delete_mode("s")) == {"mode": "READONLY"}
    fails(42204, reg.set_mode, None, {"mode": "WRITEONLY"})
    assert run(reg.set_mode("imp", {"mode": "IMPORT"})) == {"mode": "IMPORT"}
    assert run(reg.register("imp", dict(record("x"), id=100, version=4))) == {"id": 100}
    assert reg.version("imp", 4)["id"] == 100
    fails(42205, reg.register, "imp", dict(record("y"), id=100))  # the id names another schema
    fails(42205, reg.register, "s", dict(record("q"), id=7))  # ids are chosen only in IMPORT mode
    assert run(reg.register("s", record("a", "q"))) == {"id": 101}  # after an import, ids continue above it


def test_references(reg: SchemaRegistry) -> None:
    address = {"schema": json.dumps({"type": "record", "name": "Address", "namespace": "x",
                                     "fields": [{"name": "city", "type": "string"}]})}
    run(reg.register("address", address))
    user = {"schema": json.dumps({"type": "record", "name": "User", "namespace": "x",
                                  "fields": [{"name": "home", "type": "x.Address"}]}),
            "references": [{"name": "x.Address", "subject": "address", "version": 1}]}
    assert run(reg.register("user", user)) == {"id": 2}
    assert reg.schema_by_id(2)["references"] == [{"name": "x.Address", "subject": "address", "version": 1}]
    assert "city" not in reg.schema_by_id(2)["schema"]  # the referenced type is named, not inlined
    assert reg.referenced_by("address", 1) == [2]
    fails(42206, reg.delete_version, "address", 1)
    fails(42201, reg.register, "user2", dict(user, references=[]))  # x.Address unknown without the reference
    assert reg.lookup("user", user)["id"] == 2


def test_replay_rebuilds_the_same_state_and_tombstones_remove() -> None:
    store = MemoryStore()
    reg = SchemaRegistry(store)
    run(reg.register("s", record("a")))
    run(reg.register("s", record("a", "b")))
    run(reg.register("t", record("a")))
    run(reg.set_config("s", {"compatibility": "FULL"}))
    run(reg.set_config(None, {"compatibility": "NONE"}))
    run(reg.set_mode("t", {"mode": "READONLY"}))
    run(reg.delete_version("s", 1))
    again = SchemaRegistry(store)
    run(again.load())
    assert again.state.subjects == reg.state.subjects
    assert again.state.ids == reg.state.ids
    assert again.state.configs == {"s": "FULL", None: "NONE"}
    assert again.state.modes == {"t": "READONLY"}
    # Confluent's key layout, byte for byte
    assert store.records[0][0] == b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}'
    value = json.loads(store.records[0][1])
    assert value["id"] == 1 and value["deleted"] is False and "schemaType" not in value
    # a record written by another writer is picked up on the next request
    store.records.append((r.config_key("t"), r.config_value("FORWARD")))
    reg.refresh()
    assert reg.get_config("t") == {"compatibilityLevel": "FORWARD"}
    store.records.append((r.config_key("t"), None))
    store.records.append((b"not json", b"{}"))  # skipped, not fatal
    store.records.append((r.noop_key(), None))
    reg.refresh()
    fails(40408, reg.get_config, "t")


def test_a_subject_whose_versions_are_all_soft_deleted_is_not_found(reg: SchemaRegistry) -> None:
    run(reg.register("s", record("a")))
    run(reg.delete_subject("s"))
    fails(40401, reg.version, "s", 1)
    fails(40401, reg.version, "s", "latest")
    fails(40401, reg.lookup, "s", record("a"))
    assert reg.lookup("s", record("a"), deleted=True)["version"] == 1
    assert reg.version("s", 1, deleted=True)["id"] == 1


def test_compatibility_of_a_new_subject(reg: SchemaRegistry) -> None:
    assert reg.check_compatibility("new", "latest", record("a")) == {"is_compatible": True}
    assert reg.check_compatibility("new", None, record("a")) == {"is_compatible": True}
    fails(40401, reg.check_compatibility, "new", 1, record("a"))


def _nested_arrays(depth: int, leaf: str = "int") -> str:
    text = json.dumps(leaf)
    for _ in range(depth):
        text = '{"type":"array","items":%s}' % text
    return text


@pytest.mark.parametrize("text", ["[" * 50_000 + "]" * 50_000, _nested_arrays(400), _nested_arrays(2_000)])
def test_an_avro_schema_nested_past_the_stack_is_42201_not_a_crash(reg: SchemaRegistry, text: str) -> None:
    assert "nests too deeply" in fails(42201, reg.register, "deep", {"schema": text}).message
    assert "nests too deeply" in fails(42201, reg.check_compatibility, "deep", None, {"schema": text}).message


def test_avro_schemas_nested_past_the_checker_stack_are_refused_not_a_crash() -> None:
    """Versions parsed fine (a replay, a shallower stack) may nest past the stack Avro's recursive checker has
    left: 42205, not a 500."""
    import sys

    from minikafka.schema_registry import avro_schema
    old, new = avro_schema.parse(_nested_arrays(300)), avro_schema.parse(_nested_arrays(300, "string"))
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(300)  # less than the checker needs for this depth
    try:
        with pytest.raises(RegistryError) as info:
            avro_schema.check("BACKWARD", new.schema, [(1, old.text, old.schema)])
    finally:
        sys.setrecursionlimit(limit)
    assert info.value.error_code == 42205 and "nest too deeply" in info.value.message


def test_replay_reads_every_record_confluent_writes_and_survives_any_other() -> None:
    """Confluent's own layouts (NON_EMPTY: a global key without "subject", a config value without a level,
    tenant/context fields, CONTEXT and ASSOC keys, NOOP, DELETE_SUBJECT, CLEAR_SUBJECT) replay; a record this
    registry cannot read, however nested or odd, is skipped and the catch-up goes on past it."""
    store = MemoryStore()
    schema = json.loads(record("a")["schema"])
    schema_value = json.dumps({"subject": "s", "version": 1, "id": 7, "schema": json.dumps(schema),
                               "deleted": False, "metadata": {"properties": {"owner": "x"}}, "ruleSet": None,
                               "md5": "abc", "ts": 1}).encode()
    store.records += [
        (b'{"keytype":"NOOP","magic":0}', None),
        (b'{"keytype":"CONTEXT","tenant":"default","context":".ctx","magic":0}', b'{"tenant":"default"}'),
        (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', schema_value),
        (b'{"keytype":"CONFIG","magic":0}', b'{"compatibilityLevel":"NONE"}'),  # the global config, no subject
        (b'{"keytype":"CONFIG","subject":"s","magic":0}', b'{"compatibilityLevel":"FULL"}'),
        (b'{"keytype":"CONFIG","subject":"s","magic":0}', b'{"normalize":true}'),  # no level of its own now
        (b'{"keytype":"MODE","magic":0}', b'{"mode":"READWRITE"}'),
        (b'{"keytype":"MODE","subject":"t","magic":0}', b'{}'),
        (b"[" * 100_000 + b"]" * 100_000, b"{}"),  # a key nested past the decoder
        (b'{"keytype":"SCHEMA","subject":"s","version":1,"magic":1}', b"{" * 5 + b"}" * 5),
        (b'{"keytype":"SCHEMA","subject":"s","version":2,"magic":1}',
         b'{"subject":"s","version":2,"id":8,"schema":"\\"int\\"","references":{"x":1}}'),
        (b'{"keytype":"CONFIG","subject":["x"],"magic":0}', b'{"compatibilityLevel":"NONE"}'),
        (b'{"keytype":"DELETE_SUBJECT","subject":"u","magic":0}', b'{"subject":"u","version":"x"}'),
        (b'{"keytype":"ASSOC","tenant":"default","subject":"s","magic":0}', b'{"x":1}'),
        (b'{"keytype":"SCHEMA","subject":"u","version":1,"magic":1,"context":".ctx"}',
         json.dumps({"subject": "u", "version": 1, "id": 9, "schemaType": "AVRO", "schema": '"string"',
                     "deleted": False}).encode()),
        (b'{"keytype":"DELETE_SUBJECT","subject":"u","magic":0}', b'{"subject":"u","version":1}'),
        (b'{"keytype":"CLEAR_SUBJECT","subject":"u","magic":0}', b'{"subject":"u"}'),
    ]
    reg = SchemaRegistry(store)
    run(reg.load())
    assert reg.state.next_offset == len(store.records)
    assert reg.version("s", 1)["id"] == 7 and reg.versions("s") == [1]
    assert reg.get_config(None) == {"compatibilityLevel": "NONE"}
    fails(40408, reg.get_config, "s")  # the level-less config record left none: the global one applies
    assert reg.state.compatibility("s") == "NONE"
    assert reg.get_mode(None) == {"mode": "READWRITE"}
    fails(40409, reg.get_mode, "t")
    fails(40401, reg.versions, "u", deleted=True)  # soft-deleted, then cleared
    assert run(reg.register("s", record("a", "b"))) == {"id": 10}  # ids past every id the log named


def test_a_version_of_a_schema_type_this_registry_lacks_is_served_not_a_500() -> None:
    """A version another registry wrote with a type plugin: its id stays taken, GET answers its text, and a
    compatibility check against it is 42201, never a KeyError's 500; an unreadable value still takes its id."""
    store = MemoryStore()
    store.records += [
        (r.schema_key("x", 1), json.dumps({"subject": "x", "version": 1, "id": 4, "schemaType": "XML",
                                            "schema": "<a/>", "deleted": False}).encode()),
        (r.schema_key("y", 1), json.dumps({"subject": "y", "version": 1, "id": 6, "schema": None}).encode()),
    ]
    reg = SchemaRegistry(store)
    run(reg.load())
    assert reg.schema_by_id(4) == {"schemaType": "XML", "schema": "<a/>"}
    assert reg.schema_by_id(4, "serialized") == {"schemaType": "XML", "schema": "<a/>"}
    run(reg.set_mode("x", {"mode": "IMPORT"}, force=True))
    run(reg.set_mode("x", {"mode": "READWRITE"}))
    fails(40401, reg.versions, "y")
    assert fails(409, reg.register, "x", record("a")).message.count("TYPE_MISMATCH") == 1
    run(reg.set_config("x", {"compatibility": "NONE"}))
    assert run(reg.register("x", record("a"))) == {"id": 7}
    run(reg.set_config("x", {"compatibility": "BACKWARD"}))
    assert run(reg.register("x", record("a", "b"))) == {"id": 8}  # against version 2 only: XML never parsed
    run(reg.set_config("x", {"compatibility": "BACKWARD_TRANSITIVE"}))
    fails(409, reg.register, "x", record("a", "b", "c"))


def test_avro_compatibility_work_is_bounded(reg: SchemaRegistry, monkeypatch) -> None:
    """Two unions of 1000 named types compare a million branch pairs (minutes on the event loop with Avro's
    own checker): refused past the bound (42205); a 5000-field record is compared without the library's
    per-field rebuild of the writer's fields by name (quadratic)."""
    import avro.schema

    def union(prefix: str) -> dict:
        return {"schema": json.dumps([{"type": "fixed", "name": f"{prefix}{i}", "size": i + 1} for i in range(1000)])}
    run(reg.register("u", union("F")))
    assert "pairs of schemas" in fails(42205, reg.register, "u", union("G")).message
    fields = [{"name": f"f{i}", "type": "int"} for i in range(5000)]
    big = {"type": "record", "name": "R", "fields": fields}
    run(reg.register("r", {"schema": json.dumps(big)}))
    rebuilt = []
    library = avro.schema.RecordSchema.fields_dict
    monkeypatch.setattr(avro.schema.RecordSchema, "fields_dict",
                        property(lambda self: rebuilt.append(1) or library.fget(self)))
    wider = dict(big, fields=[*fields[::-1], {"name": "x", "type": "int", "default": 0}])
    assert run(reg.register("r", {"schema": json.dumps(wider)})) == {"id": 3}
    narrower = dict(big, fields=[*fields[:-1], {"name": "y", "type": "int"}])
    assert "READER_FIELD_MISSING_DEFAULT_VALUE" in fails(409, reg.register, "r", {"schema": json.dumps(narrower)}).message
    assert len(rebuilt) < 100  # not once per field compared


def test_a_record_giving_a_taken_id_to_another_schema_is_skipped(reg: SchemaRegistry) -> None:
    """As Confluent's reader: a SCHEMA record whose id already names a different schema (two writers on one
    topic) is ignored, so an id a serializer wrote never resolves to another schema."""
    assert run(reg.register("s", record("a"))) == {"id": 1}
    other = json.loads(record("a", "b")["schema"])
    reg.store.records.append((r.schema_key("t", 1), r.schema_value("t", 1, 1, "AVRO", json.dumps(other), [], False)))
    reg.refresh()
    fails(40401, reg.versions, "t")
    assert reg.schema_by_id(1)["schema"] == reg.version("s", 1)["schema"]
    assert run(reg.register("t", record("a", "b"))) == {"id": 2}
    run(reg.delete_version("s", 1))  # the same schema rewritten under its id (soft delete) still applies
    assert reg.versions("s", deleted=True) == [1] and reg.state.subjects["s"][1].deleted


def test_deleting_a_subject_of_many_versions_is_one_pass(reg: SchemaRegistry) -> None:
    """The reference check of a subject's delete is one pass over the versions, not versions x versions
    (20 000 x 20 000 would stall the event loop for minutes)."""
    import time
    from minikafka.schema_registry.state import StoredSchema, Version
    stored = StoredSchema("AVRO", '"string"')
    reg.state.subjects["big"] = {v: Version("big", v, 1, stored) for v in range(1, 20_001)}
    reg.state.ids[1], reg.state.max_id = stored, 1
    reg.state.id_users[1] = {("big", v) for v in range(1, 20_001)}
    run(reg.register("ref", {"schema": json.dumps(json.loads(record("a")["schema"])), "references": [
        {"name": "x", "subject": "big", "version": 20_000}]}))
    started = time.monotonic()
    fails(42206, reg.delete_subject, "big")
    assert time.monotonic() - started < 30.0
    run(reg.delete_subject("ref"))
    started = time.monotonic()
    assert run(reg.delete_subject("big")) == list(range(1, 20_001))
    assert time.monotonic() - started < 30.0


def test_a_long_chain_of_references_is_resolved_not_a_recursion_error(reg: SchemaRegistry) -> None:
    """Each version referencing the one before, 5000 deep (a client can register that many): the referenced
    texts come out dependencies first, not a 500 from the interpreter's recursion limit."""
    from minikafka.schema_registry.state import StoredSchema, Version
    depth = 5000
    for i in range(1, depth + 1):
        refs = (((f"T{i - 1}", f"c{i - 1}", 1),) if i > 1 else ())
        text = json.dumps({"type": "fixed", "name": f"T{i}", "size": 1})
        reg.state.subjects[f"c{i}"] = {1: Version(f"c{i}", 1, i, StoredSchema("AVRO", text, refs))}
    reg.state.max_id = depth
    texts = reg._reference_texts(((f"T{depth}", f"c{depth}", 1),))
    assert [json.loads(t)["name"] for t in texts] == [f"T{i}" for i in range(1, depth + 1)]
    assert texts[-1].name == f"T{depth}"
    body = {"schema": json.dumps({"type": "record", "name": "Top", "fields": [{"name": "a", "type": f"T{depth}"}]}),
            "references": [{"name": f"T{depth}", "subject": f"c{depth}", "version": 1}]}
    assert run(reg.register("top", body)) == {"id": depth + 1}
