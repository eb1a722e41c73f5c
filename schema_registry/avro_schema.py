"""Avro schemas: parsing (with references), the stored text, and compatibility decided by Apache Avro's own
reader/writer checker (`avro.compatibility.ReaderWriterCompatibilityChecker`, the Python port of the Java
`SchemaCompatibility` that Confluent's AvroSchema uses).

Levels (Confluent's CompatibilityChecker): BACKWARD = the new schema reads data written with the previous
one (new is the reader); FORWARD = the previous schema reads data written with the new one; FULL = both;
the *_TRANSITIVE levels check against every live version instead of the latest only; NONE checks nothing.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import avro.errors
import avro.schema
import avro.compatibility as avro_compatibility
from avro.compatibility import (CompatibleResult, ReaderWriterCompatibilityChecker, SchemaCompatibilityResult,
                                SchemaCompatibilityType)

from minikafka.schema_registry import errors


@dataclass(frozen=True)
class ParsedAvro:
    schema: Any  # avro.schema.Schema
    text: str  # what is stored and served: the JSON Avro writes back for the parsed schema, compact (as Confluent
    # stores Avro's Schema.toString): `{"type": "string"}` and `"string"` are one schema


_TYPE_KEYS = ("type", "name", "namespace", "doc", "aliases", "fields", "symbols", "items", "values", "size")
_FIELD_KEYS = ("name", "type", "doc", "default", "order", "aliases")


def _ordered(node: Any, field: bool = False) -> Any:
    """The JSON with its keys in the order Avro's own Schema.toString writes them (a type's `type` and `name`
    first, a field's `name` then `type`), the rest after in their order; layout only, the schema is the same."""
    if isinstance(node, list):
        return [_ordered(item) for item in node]
    if not isinstance(node, dict):
        return node
    first = _FIELD_KEYS if field else _TYPE_KEYS
    keys = [k for k in first if k in node] + [k for k in node if k not in first]
    out = {}
    for k in keys:
        if k == "fields" and not field and isinstance(node[k], list):
            out[k] = [_ordered(f, field=True) for f in node[k]]
        elif k in ("type", "items", "values") or (k == "fields" and not field):
            out[k] = _ordered(node[k])
        else:
            out[k] = node[k]  # defaults, docs, other properties: values, not schemas
    return out


def _compact(value: object, sort: bool) -> str:
    return json.dumps(value if sort else _ordered(value), separators=(",", ":"), sort_keys=sort, ensure_ascii=False)


def _default_error(schema: Any, value: Any) -> str | None:
    """Why `value` is not a valid default of `schema` (None if it is), as Avro's Java parser checks defaults
    (Confluent parses with default validation on): a union's default is one of its first branch; bytes and
    fixed take a JSON string; the values themselves are judged by the library's own `validate`."""
    kind = schema.type
    if kind == "union":
        return _default_error(schema.schemas[0], value)
    if kind in ("bytes", "fixed"):
        if not isinstance(value, str) or (kind == "fixed" and len(value) != schema.size):
            return f"{json.dumps(value)} not a {kind}"
        return None
    if kind in ("record", "error"):
        if not isinstance(value, dict):
            return f"{json.dumps(value)} not a {schema.fullname}"
        for field in schema.fields:
            if field.name in value:
                error = _default_error(field.type, value[field.name])
            else:
                error = None if field.has_default else f"no value for field {field.name}"
            if error:
                return error
        return None
    if kind == "array":
        if not isinstance(value, list):
            return f"{json.dumps(value)} not an array"
        return next((e for e in (_default_error(schema.items, v) for v in value) if e), None)
    if kind == "map":
        if not isinstance(value, dict):
            return f"{json.dumps(value)} not a map"
        return next((e for e in (_default_error(schema.values, v) for v in value.values()) if e), None)
    if kind in ("float", "double") and value in ("NaN", "Infinity", "-Infinity"):
        return None  # JSON has no literal for these; Avro takes the strings
    if isinstance(value, bool) and kind != "boolean":
        return f"{json.dumps(value)} not a {kind}"  # Python's bool is an int; JSON's is not
    return None if schema.validate(value) is not None else f"{json.dumps(value)} not a {kind}"


def _check_defaults(schema: Any, seen: set[int]) -> None:
    """Every field default in `schema`, nested types included (each named type once)."""
    if id(schema) in seen:
        return
    seen.add(id(schema))
    kind = schema.type
    if kind in ("record", "error"):
        for field in schema.fields:
            if field.has_default:
                error = _default_error(field.type, field.default)
                if error:
                    raise avro.errors.SchemaParseException(f"Invalid default for field {field.name}: {error}")
            _check_defaults(field.type, seen)
    elif kind == "union":
        for branch in schema.schemas:
            _check_defaults(branch, seen)
    elif kind == "array":
        _check_defaults(schema.items, seen)
    elif kind == "map":
        _check_defaults(schema.values, seen)


def parse(text: str, references: list[str] = (), normalize: bool = False) -> ParsedAvro:
    """Parse `text` after the referenced schemas' texts (dependencies first), whose named types it may use.
    `normalize` stores the JSON with its keys sorted, so that schemas differing only in layout and attribute
    order are one schema. InvalidSchema (42201) for anything Avro refuses."""
    names = avro.schema.Names(validate_names=True)
    try:
        for ref in references:
            avro.schema.make_avsc_object(json.loads(ref), names)
        referenced = dict(names.names)  # the types the references define: written by name, never inlined
        schema = avro.schema.make_avsc_object(json.loads(text), names)
        _check_defaults(schema, set())
        dump_names = avro.schema.Names(validate_names=True)
        dump_names.names.update(referenced)
        canonical = schema.to_json(dump_names)
        stored = _compact(canonical, normalize)
    except (ValueError, TypeError, KeyError, AttributeError, avro.errors.AvroException) as exc:
        raise errors.invalid_schema(f"{text[:1000]}, details: {exc}") from None
    except RecursionError:  # the JSON decoder, Avro's parser or the dump past the stack: refused, not a crash
        raise errors.invalid_schema(f"{text[:1000]}, details: the schema nests too deeply") from None
    return ParsedAvro(schema, stored)


# Confluent's wording of each Avro incompatibility ({r}/{w}: the reader's and the writer's role, "new"/"old")
_DESCRIPTIONS = {
    "NAME_MISMATCH": "The name of the schema has changed (path '{loc}')",
    "FIXED_SIZE_MISMATCH": "The size of FIXED type field at path '{loc}' in the {r} schema does not match with "
                           "the {w} schema",
    "MISSING_ENUM_SYMBOLS": "The {r} schema is missing enum symbols '{info}' at path '{loc}' in the {w} schema",
    "READER_FIELD_MISSING_DEFAULT_VALUE": "The field '{info}' at path '{loc}' in the {r} schema has no default "
                                          "value and is missing in the {w} schema",
    "TYPE_MISMATCH": "The type (path '{loc}') of a field in the {r} schema does not match with the {w} schema",
    "MISSING_UNION_BRANCH": "The {r} schema is missing a type inside a union field at path '{loc}' in the {w} "
                            "schema",
}


def _details(result: Any, new_reads: bool, old_version: int, old_text: str, level: str) -> list[str]:
    """Confluent's `messages` for an incompatible result: the incompatibility, then the old version, the old
    schema and the level. Avro's checker keeps the messages and locations of several incompatibilities as
    unordered sets, so with more than one, each message is reported with the list of types and locations
    rather than paired by guess."""
    roles = {"r": "new" if new_reads else "old", "w": "old" if new_reads else "new"}
    kinds = [k.name.upper() for k in result.incompatibilities] or ["INCOMPATIBLE"]
    messages = sorted(result.messages) or [""]
    locations = sorted(result.locations) or ["/"]
    if len(kinds) == 1 and len(messages) == 1:
        loc, message = locations[0], messages[0]
        description = _DESCRIPTIONS.get(kinds[0], "{info} at path '{loc}'").format(loc=loc, info=message, **roles)
        out = [f"{{errorType:'{kinds[0]}', description:'{description}', additionalInfo:'{message}'}}"]
    else:
        out = [f"{{errorType:'{'|'.join(dict.fromkeys(kinds))}', description:'{message}', "
               f"additionalInfo:'at paths {', '.join(locations)} of the {roles['r']} schema'}}" for message in messages]
    out += [f"{{oldSchemaVersion: {old_version}}}", f"{{oldSchema: '{old_text}'}}", f"{{compatibility: '{level}'}}"]
    return out


MAX_PAIRS = 20_000  # (reader, writer) schema pairs one check (every version it compares) may compare: about half
# a second of the event loop at worst (two unions compare |reader| x |writer| branch pairs); 42205 past it


class _TooComplex(Exception):
    pass


class _Checker(ReaderWriterCompatibilityChecker):
    """Avro's checker with bounded work on the event loop: its memo keyed by the pair of ids (the library's
    pair hash, id ^ id, collides across a union's branches, making each lookup linear), each record's fields
    by name built once (the library rebuilds `fields_dict` per field looked up: quadratic), and at most
    MAX_PAIRS pairs compared by the checkers sharing `budget` (_TooComplex past it)."""

    def __init__(self, budget: list[int]) -> None:
        super().__init__()
        self.budget = budget  # [pairs left], shared by one check's checkers
        self.fields: dict[int, tuple[Any, dict]] = {}  # id(record) -> (record, its fields by name)

    def get_compatibility(self, reader: Any, writer: Any, reference_token: str = "/",
                          location: list[str] | None = None) -> Any:
        key = (id(reader), id(writer))  # both alive for the whole check: ids stay unique
        memo = self.memoize_map
        if key in memo:
            result = memo[key]
            return CompatibleResult if result.compatibility is SchemaCompatibilityType.recursion_in_progress \
                else result
        self.budget[0] -= 1
        if self.budget[0] < 0:
            raise _TooComplex(f"more than {MAX_PAIRS} pairs of schemas to compare")
        memo[key] = SchemaCompatibilityResult()  # in progress: a recursive type meeting itself is compatible
        result = self.calculate_compatibility(reader, writer, [*(location or ()), reference_token])
        memo[key] = result
        return result

    def lookup_writer_field(self, writer_schema: Any, reader_field: Any) -> Any:
        """avro.compatibility.lookup_writer_field with the writer's fields by name built once."""
        entry = self.fields.get(id(writer_schema))
        if entry is None:
            entry = self.fields[id(writer_schema)] = (writer_schema, {f.name: f for f in writer_schema.fields})
        by_name = entry[1]
        found = by_name.get(reader_field.name)
        if found is not None:
            return found
        aliases = reader_field.props.get("aliases")
        if isinstance(aliases, (list, tuple, str)):  # as the library: any iterable, a string's characters too
            return next((by_name[a] for a in aliases if isinstance(a, str) and a in by_name), None)
        return None


def _can_read(reader: Any, writer: Any, budget: list[int]) -> Any:
    """Avro's checker recurses once per nesting level: a schema parsed on a shallower stack (a replay, a
    request with fewer frames) may still nest past it here, which is refused (42205) rather than a 500; so
    is a pair of schemas past the checker's work bound."""
    checker = _Checker(budget)
    library_lookup = avro_compatibility.lookup_writer_field
    avro_compatibility.lookup_writer_field = checker.lookup_writer_field  # for this synchronous check only
    try:
        return checker.get_compatibility(reader, writer)
    except RecursionError:
        raise errors.operation_not_permitted("Avro schemas not compared: they nest too deeply") from None
    except _TooComplex as exc:
        raise errors.operation_not_permitted(f"Avro schemas not compared: {exc}") from None
    finally:
        avro_compatibility.lookup_writer_field = library_lookup


def check(level: str, new: Any, previous: list[tuple[int, str, Any]]) -> list[str]:
    """The incompatibility details of `new` (an avro Schema) against `previous`, the subject's live versions
    oldest first as (version, text, avro Schema), under `level`; [] when compatible."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    budget = [MAX_PAIRS]
    for version, text, old in reversed(against):  # newest first, as Confluent reports
        checks = []
        if base in ("BACKWARD", "FULL"):
            checks.append((True, _can_read(new, old, budget)))
        if base in ("FORWARD", "FULL"):
            checks.append((False, _can_read(old, new, budget)))
        for new_reads, result in checks:
            if result.compatibility is not SchemaCompatibilityType.compatible:
                return _details(result, new_reads, version, text, level)
    return []
