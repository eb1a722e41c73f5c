"""Confluent's Protobuf compatibility rules (its protobuf.diff package: SchemaDiff, MessageSchemaDiff,
FieldSchemaDiff, EnumSchemaDiff), applied to compiled descriptors.

`differences(original, update)` lists every Difference of `update` against `original`, each with its path
(`#/Message/Nested/<field number>`, a oneof's name before its members' numbers); a change is compatible when
its type is in COMPATIBLE. BACKWARD compares the old schema (original) with the new (update); FORWARD the
other way round; FULL both. Rules, as Confluent decides them:
- the package, a message (not a map entry) removed, a required (proto2) field added or removed, a oneof member
  removed (unless its whole oneof went), fields of separate origins put together in a oneof: incompatible;
- a field (same number) changing between scalar, message and map: FIELD_KIND_CHANGED; between scalar groups
  (int32/int64/uint32/uint64/bool and enums; sint32/sint64; string/bytes; fixed32/sfixed32;
  fixed64/sfixed64; float; double): FIELD_SCALAR_KIND_CHANGED; a numeric field's label (optional, required,
  repeated) changing: FIELD_NUMERIC_LABEL_CHANGED; a message field naming another message, or one whose own
  changes are incompatible: FIELD_NAMED_TYPE_CHANGED;
- compatible: messages and enums added, enums removed, enum constants added/removed/renamed, fields added
  or removed, a field renamed, a string/bytes field's label, oneofs added or removed, a oneof member added or
  moved out to the top level, a message moved (its index in the file).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from google.protobuf import descriptor_pb2

F = descriptor_pb2.FieldDescriptorProto

COMPATIBLE = frozenset({
    "MESSAGE_ADDED", "MESSAGE_MOVED", "ENUM_ADDED", "ENUM_REMOVED", "ENUM_CONST_ADDED", "ENUM_CONST_CHANGED",
    "ENUM_CONST_REMOVED", "FIELD_ADDED", "FIELD_REMOVED", "FIELD_NAME_CHANGED",
    "FIELD_STRING_OR_BYTES_LABEL_CHANGED", "ONEOF_ADDED", "ONEOF_REMOVED", "ONEOF_FIELD_ADDED",
    "ONEOF_FIELD_MOVED_TO_TOP_LEVEL"})

# Confluent's description of each incompatible difference; %s: the reader's role, then the writer's
_DESCRIPTIONS = {
    "PACKAGE_CHANGED": "The package at '{p}' in the %s schema does not match the package in the %s schema",
    "MESSAGE_REMOVED": "The %s schema is missing a MESSAGE type at path '{p}' in the %s schema",
    "FIELD_KIND_CHANGED": "The type of a field at path '{p}' in the %s schema does not match the %s schema",
    "FIELD_SCALAR_KIND_CHANGED": "The kind of a SCALAR field at path '{p}' in the %s schema does not match its "
                                 "kind in the %s schema",
    "FIELD_NAMED_TYPE_CHANGED": "The type of a MESSAGE field at path '{p}' in the %s schema does not match its "
                                "type in the %s schema",
    "FIELD_NUMERIC_LABEL_CHANGED": "The label for a NUMERIC field at path '{p}' in the %s schema does not match "
                                   "its label in the %s schema",
    "REQUIRED_FIELD_ADDED": "A required field  at path '{p}' in the %s schema is missing in the %s schema",
    "REQUIRED_FIELD_REMOVED": "The %s schema is missing a required field at path: '{p}' in the %s schema",
    "ONEOF_FIELD_REMOVED": "The %s schema is missing a oneof field at path '{p}' in the %s schema",
    "ONEOF_FIELD_MOVED_TO_TOP_LEVEL": "The oneof field at path '{p}' in the %s schema was moved out of its oneof "
                                      "to a top-level field in the %s schema",
    "MULTIPLE_FIELDS_MOVED_TO_ONEOF": "Multiple fields in the oneof at path '{p}' in the %s schema are outside a "
                                      "oneof in the %s schema",
    "FIELD_MOVED_TO_EXISTING_ONEOF": "A field in the oneof at path '{p}' in the %s schema is outside an existing "
                                     "oneof in the %s schema",
}

_SCALAR_KINDS = {
    F.TYPE_INT32: "GENERAL_NUMBER", F.TYPE_INT64: "GENERAL_NUMBER", F.TYPE_UINT32: "GENERAL_NUMBER",
    F.TYPE_UINT64: "GENERAL_NUMBER", F.TYPE_BOOL: "GENERAL_NUMBER", F.TYPE_ENUM: "GENERAL_NUMBER",
    F.TYPE_SINT32: "SIGNED_NUMBER", F.TYPE_SINT64: "SIGNED_NUMBER",
    F.TYPE_STRING: "STRING_OR_BYTES", F.TYPE_BYTES: "STRING_OR_BYTES",
    F.TYPE_FIXED32: "FIXED32", F.TYPE_SFIXED32: "FIXED32", F.TYPE_FIXED64: "FIXED64", F.TYPE_SFIXED64: "FIXED64",
    F.TYPE_FLOAT: "FLOAT", F.TYPE_DOUBLE: "DOUBLE"}


@dataclass(frozen=True)
class Difference:
    type: str
    path: str

    def message(self, reader: str, writer: str) -> str:
        """Confluent's Difference.toString, its roles filled in."""
        description = _DESCRIPTIONS.get(self.type, "").replace("{p}", self.path)
        for role in (reader, writer):
            description = description.replace("%s", role, 1)
        return f'{{errorType:"{self.type}", description:"{description}"}}'


@dataclass(frozen=True)
class _Type:
    package: str
    file: str  # the file that defines it
    syntax: str
    proto: Any  # DescriptorProto or EnumDescriptorProto
    is_enum: bool


def _types(schema: Any) -> dict[str, _Type]:
    """Every message and enum of the schema and its imports, by full name (no leading dot)."""
    out: dict[str, _Type] = {}

    def add(scope: str, messages: Any, enums: Any, file: Any) -> None:
        syntax = file.syntax or "proto2"
        for m in messages:
            name = f"{scope}.{m.name}" if scope else m.name
            out[name] = _Type(file.package, file.name, syntax, m, False)
            add(name, m.nested_type, m.enum_type, file)
        for e in enums:
            name = f"{scope}.{e.name}" if scope else e.name
            out[name] = _Type(file.package, file.name, syntax, e, True)

    for file in [*schema.deps, schema.file]:
        add(file.package, file.message_type, file.enum_type, file)
    return out


@dataclass
class _Context:
    original: dict[str, _Type]
    update: dict[str, _Type]
    main: tuple[str, str]  # the schemas' own file names (original, update)
    path: list[str] = field(default_factory=list)
    in_scope: set[str] = field(default_factory=set)  # original messages being compared (recursion guard)
    diffs: list[Difference] = field(default_factory=list)

    def add(self, kind: str, *extra: str) -> None:
        self.diffs.append(Difference(kind, "#/" + "/".join([*self.path, *extra])))

    def sub(self, local_name: str) -> _Context:
        return _Context(self.original, self.update, self.main, local_name.split("."), set(self.in_scope))


def _name(scope: str, name: str) -> str:
    return f"{scope}.{name}" if scope else name


def _compare_types(ctx: _Context, scopes: tuple[str, str], original: tuple[Any, Any], update: tuple[Any, Any]
                   ) -> None:
    """Messages and enums of one scope (a file's top level or a message), matched by name."""
    def index(messages: Any) -> dict[str, tuple[int, Any]]:
        kept = [m for m in messages if not m.options.map_entry]
        return {m.name: (i, m) for i, m in enumerate(kept)}

    old_messages, new_messages = index(original[0]), index(update[0])
    for name in sorted(old_messages.keys() | new_messages.keys()):
        ctx.path.append(name)
        if name not in new_messages:
            ctx.add("MESSAGE_REMOVED")
        elif name not in old_messages:
            ctx.add("MESSAGE_ADDED")
        else:
            _compare_message(ctx, (_name(scopes[0], name), _name(scopes[1], name)))
            if old_messages[name][0] != new_messages[name][0]:
                ctx.add("MESSAGE_MOVED")
        ctx.path.pop()
    old_enums = {e.name: e for e in original[1]}
    new_enums = {e.name: e for e in update[1]}
    for name in sorted(old_enums.keys() | new_enums.keys()):
        ctx.path.append(name)
        if name not in new_enums:
            ctx.add("ENUM_REMOVED")
        elif name not in old_enums:
            ctx.add("ENUM_ADDED")
        else:
            old_values = {v.number: v.name for v in old_enums[name].value}
            new_values = {v.number: v.name for v in new_enums[name].value}
            for number in sorted(old_values.keys() | new_values.keys()):
                if number not in new_values:
                    ctx.add("ENUM_CONST_REMOVED", str(number))
                elif number not in old_values:
                    ctx.add("ENUM_CONST_ADDED", str(number))
                elif old_values[number] != new_values[number]:
                    ctx.add("ENUM_CONST_CHANGED", str(number))
        ctx.path.pop()


def _fields(message: Any) -> tuple[dict[int, Any], dict[int, str], dict[str, list[Any]]]:
    """Fields by number, the real oneof of each member (proto3 `optional` is none), members by oneof."""
    by_number = {f.number: f for f in message.field}
    oneof_of: dict[int, str] = {}
    oneofs: dict[str, list[Any]] = {}
    for f in message.field:
        if f.HasField("oneof_index") and not f.proto3_optional:
            name = message.oneof_decl[f.oneof_index].name
            oneof_of[f.number] = name
            oneofs.setdefault(name, []).append(f)
    return by_number, oneof_of, oneofs


def _compare_message(ctx: _Context, names: tuple[str, str]) -> None:
    old_type, new_type = ctx.original[names[0]], ctx.update[names[1]]
    original, update = old_type.proto, new_type.proto
    if names[0] not in ctx.in_scope:
        ctx.in_scope.add(names[0])
        try:
            _compare_fields(ctx, old_type, new_type)
        finally:
            ctx.in_scope.discard(names[0])
    _compare_types(ctx, names, (original.nested_type, original.enum_type), (update.nested_type, update.enum_type))


def _compare_fields(ctx: _Context, old_type: _Type, new_type: _Type) -> None:
    old_fields, old_oneof_of, old_oneofs = _fields(old_type.proto)
    new_fields, new_oneof_of, new_oneofs = _fields(new_type.proto)
    gone = {name for name, members in old_oneofs.items()
            if name not in new_oneofs and not any(m.number in new_fields for m in members)}
    for oneof in (o.name for o in new_type.proto.oneof_decl if o.name in new_oneofs):
        origins, moved_in = set(), 0
        for member in new_oneofs[oneof]:
            if member.number in old_oneof_of:
                origins.add("oneof:" + old_oneof_of[member.number])
            elif member.number in old_fields:
                origins.add(f"field:{member.number}")
                moved_in += 1
        if len(origins) > 1:
            ctx.add("MULTIPLE_FIELDS_MOVED_TO_ONEOF" if moved_in > 1 else "FIELD_MOVED_TO_EXISTING_ONEOF", oneof)
    for oneof in sorted(old_oneofs.keys() | new_oneofs.keys()):
        if oneof not in new_oneofs:
            ctx.add("ONEOF_REMOVED", oneof)
        elif oneof not in old_oneofs:
            ctx.add("ONEOF_ADDED", oneof)
    for number in sorted(old_fields.keys() | new_fields.keys()):
        old, new = old_fields.get(number), new_fields.get(number)
        old_oneof, new_oneof = old_oneof_of.get(number), new_oneof_of.get(number)
        if new is None:
            if old_oneof is not None:
                if old_oneof not in gone:
                    ctx.add("ONEOF_FIELD_REMOVED", old_oneof, str(number))
            else:
                required = old.label == F.LABEL_REQUIRED and old_type.syntax != "proto3"
                ctx.add("REQUIRED_FIELD_REMOVED" if required else "FIELD_REMOVED", str(number))
        elif old is None:
            if new_oneof is not None:
                ctx.add("ONEOF_FIELD_ADDED", new_oneof, str(number))
            else:
                required = new.label == F.LABEL_REQUIRED and new_type.syntax != "proto3"
                ctx.add("REQUIRED_FIELD_ADDED" if required else "FIELD_ADDED", str(number))
        else:
            if old_oneof is not None and new_oneof is None:
                ctx.add("ONEOF_FIELD_MOVED_TO_TOP_LEVEL", str(number))
            where = [new_oneof, str(number)] if new_oneof is not None else [str(number)]
            ctx.path += where
            if old.name != new.name:
                ctx.add("FIELD_NAME_CHANGED")
            _compare_labels_and_types(ctx, (_label(old, old_oneof, old_type.syntax), _label(new, new_oneof,
                                                                                           new_type.syntax)),
                                      (_type_of(ctx.original, old), _type_of(ctx.update, new)))
            del ctx.path[-len(where):]


def _label(f: Any, oneof: str | None, syntax: str) -> str | None:
    """The label as Confluent's schema model holds it: none in a oneof nor for a plain proto3 field."""
    if oneof is not None:
        return None
    if f.proto3_optional:
        return "OPTIONAL"
    if f.label == F.LABEL_REPEATED:
        return "REPEATED"
    if syntax == "proto3":
        return None
    return "REQUIRED" if f.label == F.LABEL_REQUIRED else "OPTIONAL"


def _type_of(types: dict[str, _Type], f: Any) -> tuple:
    """("scalar", kind), ("message", full name) or ("map", key type, value type)."""
    if f.type in (F.TYPE_MESSAGE, F.TYPE_GROUP, F.TYPE_ENUM) or (not f.type and f.type_name):
        name = f.type_name.removeprefix(".")
        known = types.get(name)
        if known is not None and known.is_enum:
            return ("scalar", "GENERAL_NUMBER")
        if known is not None and known.proto.options.map_entry:
            key, value = known.proto.field[0], known.proto.field[1]
            return ("map", _type_of(types, key), _type_of(types, value))
        return ("message", name)
    return ("scalar", _SCALAR_KINDS[f.type])


def _compare_labels_and_types(ctx: _Context, labels: tuple[str | None, str | None], types: tuple[tuple, tuple]
                              ) -> None:
    old, new = types
    if old[0] != new[0]:
        ctx.add("FIELD_KIND_CHANGED")
    elif old[0] == "scalar":
        if old[1] != new[1]:
            ctx.add("FIELD_SCALAR_KIND_CHANGED")
        elif None not in labels and labels[0] != labels[1]:
            ctx.add("FIELD_STRING_OR_BYTES_LABEL_CHANGED" if old[1] == "STRING_OR_BYTES"
                    else "FIELD_NUMERIC_LABEL_CHANGED")
    elif old[0] == "message":
        _compare_message_types(ctx, old[1], new[1])
    else:
        _compare_labels_and_types(ctx, (None, None), (old[1], new[1]))
        _compare_labels_and_types(ctx, (None, None), (old[2], new[2]))


def _compare_message_types(ctx: _Context, old_name: str, new_name: str) -> None:
    old, new = ctx.original.get(old_name), ctx.update.get(new_name)
    if old is None or new is None:
        if old_name != new_name:
            ctx.add("FIELD_NAMED_TYPE_CHANGED")
        return
    old_local = old_name.removeprefix(old.package + ".") if old.package else old_name
    new_local = new_name.removeprefix(new.package + ".") if new.package else new_name
    if old_local != new_local:
        ctx.add("FIELD_NAMED_TYPE_CHANGED")
        return
    if old.file == ctx.main[0] and new.file == ctx.main[1]:
        return  # both the schema's own: compared as its messages
    sub = ctx.sub(old_local)
    _compare_message(sub, (old_name, new_name))
    ctx.diffs += sub.diffs
    if any(d.type not in COMPATIBLE for d in sub.diffs):
        ctx.add("FIELD_NAMED_TYPE_CHANGED")


def differences(original: Any, update: Any) -> list[Difference]:
    """Every difference of `update` against `original` (ProtoSchema), in Confluent's order of discovery."""
    ctx = _Context(_types(original), _types(update), (original.file.name, update.file.name))
    if original.file.package != update.file.package:
        ctx.add("PACKAGE_CHANGED")
    _compare_types(ctx, (original.file.package, update.file.package),
                   (original.file.message_type, original.file.enum_type),
                   (update.file.message_type, update.file.enum_type))
    return ctx.diffs


def _incompatible(original: Any, update: Any, reader: str, writer: str) -> list[str]:
    return [d.message(reader, writer) for d in differences(original, update) if d.type not in COMPATIBLE]


def check(level: str, new: Any, previous: list[tuple[int, str, Any]]) -> list[str]:
    """The incompatibility details of `new` against `previous` (version, text, ProtoSchema), oldest first, under
    `level`; [] when compatible. Messages as Confluent's SchemaValidatorBuilder lists them: FORWARD's (the old
    schema reads), then BACKWARD's (the new one reads), then the old version, its schema and the level."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    for version, text, old in reversed(against):  # newest first, as Confluent reports
        forward = _incompatible(new, old, "old", "new") if base in ("FORWARD", "FULL") else []
        backward = _incompatible(old, new, "new", "old") if base in ("BACKWARD", "FULL") else []
        if forward or backward:
            out = forward + backward
            if base == "FORWARD" or backward:
                out += [f"{{oldSchemaVersion: {version}}}", f"{{oldSchema: '{text}'}}"]
            return out + [f"{{compatibility: '{level}'}}"]
    return []
