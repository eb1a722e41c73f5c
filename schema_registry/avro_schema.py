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
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

from minikafka.schema_registry import errors


@dataclass(frozen=True)
class ParsedAvro:
    schema: Any  # avro.schema.Schema
    text: str  # what is stored and served: the schema's JSON, compact (Confluent stores its canonical string)


def _compact(value: object, sort: bool) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=sort, ensure_ascii=False)


def parse(text: str, references: list[str] = (), normalize: bool = False) -> ParsedAvro:
    """Parse `text` after the referenced schemas' texts (dependencies first), whose named types it may use.
    `normalize` stores the JSON with its keys sorted, so that schemas differing only in layout and attribute
    order are one schema. InvalidSchema (42201) for anything Avro refuses."""
    names = avro.schema.Names(validate_names=True)
    try:
        for ref in references:
            avro.schema.make_avsc_object(json.loads(ref), names)
        data = json.loads(text)
        schema = avro.schema.make_avsc_object(data, names)
    except (ValueError, TypeError, KeyError, AttributeError, avro.errors.AvroException) as exc:
        raise errors.invalid_schema(f"{text[:1000]}, details: {exc}") from None
    if isinstance(data, str):  # a primitive named by a bare string: Confluent's canonical form quotes it
        return ParsedAvro(schema, json.dumps(data))
    return ParsedAvro(schema, _compact(data, normalize))


def _details(result: Any, old_version: int, old_text: str, level: str) -> list[str]:
    out = []
    types = list(result.incompatibilities) or [None]
    messages = sorted(result.messages)
    locations = sorted(result.locations)
    for i, message in enumerate(messages):
        kind = types[min(i, len(types) - 1)]
        error_type = kind.name.upper() if kind is not None else "INCOMPATIBLE"
        location = locations[min(i, len(locations) - 1)] if locations else "/"
        out.append(f"{{errorType:'{error_type}', description:'{message} at path {location}', "
                   f"additionalInfo:'{message}'}}")
    out += [f"{{oldSchemaVersion: {old_version}}}", f"{{oldSchema: '{old_text}'}}", f"{{compatibility: '{level}'}}"]
    return out


def _can_read(reader: Any, writer: Any) -> Any:
    return ReaderWriterCompatibilityChecker().get_compatibility(reader, writer)


def check(level: str, new: Any, previous: list[tuple[int, str, Any]]) -> list[str]:
    """The incompatibility details of `new` (an avro Schema) against `previous`, the subject's live versions
    oldest first as (version, text, avro Schema), under `level`; [] when compatible."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    for version, text, old in reversed(against):  # newest first, as Confluent reports
        checks = []
        if base in ("BACKWARD", "FULL"):
            checks.append(_can_read(new, old))
        if base in ("FORWARD", "FULL"):
            checks.append(_can_read(old, new))
        for result in checks:
            if result.compatibility is not SchemaCompatibilityType.compatible:
                return _details(result, version, text, level)
    return []
