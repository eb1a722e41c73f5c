"""JSON Schema schemas (schemaType JSON): parsed and validated against their draft's meta-schema by the
`jsonschema` library (the draft their `$schema` names, draft-07 when none, as Confluent's default), stored as
compact JSON (`normalize`: keys sorted).

Compatibility follows Confluent's JSON Schema rules (json_diff.py): BACKWARD holds when every difference
from the old schema to the new one is a compatible one, FORWARD when every difference from the new to the
old one is, FULL when both hold; the details are Confluent's strings. A `$ref` is followed within the
schema, and into a referenced schema by the name it is referenced by or by its `$id` (the `referencing`
library); one that does not resolve is compared by its text.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from urllib.parse import urljoin
from typing import Any

from minikafka.schema_registry import errors, json_diff

MAX_SCHEMA_IN_DETAILS = 10 * 1024  # Confluent's limit on the old schema's text quoted in the details


@dataclass(frozen=True)
class JsonDocument:
    """A schema and the schemas it references: (the name it references them by or None, their JSON
    document), dependencies first."""
    root: Any  # an object or a boolean
    references: tuple[tuple[str | None, Any], ...] = ()


@dataclass(frozen=True)
class ParsedJson:
    schema: JsonDocument
    text: str


def parse(text: str, references: list[str] = (), normalize: bool = False) -> ParsedJson:
    """`references` are the referenced schemas' texts (each must be a valid schema too). InvalidSchema (42201)
    for anything that is not a JSON Schema its meta-schema accepts."""
    from jsonschema.exceptions import SchemaError
    from jsonschema.validators import Draft7Validator, validator_for

    docs = []
    for what, source in [*(("reference", r) for r in references), ("schema", text)]:
        try:
            doc = json.loads(source)
        except ValueError as exc:
            raise errors.invalid_schema(f"{source[:1000]}, details: not JSON: {exc}") from None
        except RecursionError:
            raise errors.invalid_schema(f"{source[:1000]}, details: nested too deeply") from None
        if not isinstance(doc, (dict, bool)):
            raise errors.invalid_schema(f"{source[:1000]}, details: a JSON schema is an object or a boolean")
        try:
            validator_for(doc, default=Draft7Validator).check_schema(doc)
        except SchemaError as exc:
            raise errors.invalid_schema(f"{source[:1000]}, details: {what}: {exc.message}") from None
        except RecursionError:
            raise errors.invalid_schema(f"{source[:1000]}, details: {what}: nested too deeply") from None
        except Exception as exc:  # noqa: BLE001 - e.g. a "$schema" that is not a string: jsonschema's own crash
            raise errors.invalid_schema(f"{source[:1000]}, details: {what}: {type(exc).__name__}: {exc}") from None
        docs.append(doc)
    schema = docs[-1]
    names = [getattr(r, "name", None) for r in references]  # registry.ReferenceText carries the name
    return ParsedJson(JsonDocument(schema, tuple(zip(names, docs[:-1]))),
                      json.dumps(schema, separators=(",", ":"), sort_keys=normalize, ensure_ascii=False))


def check(level: str, new: JsonDocument, previous: list[tuple[int, str, JsonDocument]]) -> list[str]:
    """The incompatibility details of `new` against `previous`, the subject's live versions oldest first as
    (version, text, document), under `level`; [] when compatible. The transitive levels check every
    version, newest first, and report the first that fails."""
    if level == "NONE" or not previous:
        return []
    against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
    base = level.removesuffix("_TRANSITIVE")
    for version, text, old in reversed(against):
        details = _validate(base, new, old, version, text)
        if details:
            return [*details, f"{{compatibility: '{level}'}}"]
    return []


def _validate(base: str, new: JsonDocument, old: JsonDocument, version: int, text: str) -> list[str]:
    """Confluent's strategies: BACKWARD, the new schema reads what the old one wrote (the differences from
    old to new); FORWARD, the reverse; FULL, both (the old version is named once, after the second)."""
    if base == "BACKWARD":
        return _formatted(_incompatible(old, new), "new", "old", version, text)
    if base == "FORWARD":
        return _formatted(_incompatible(new, old), "old", "new", version, text)
    return (_formatted(_incompatible(new, old), "old", "new", None, text)
            + _formatted(_incompatible(old, new), "new", "old", version, text))


def _incompatible(original: JsonDocument, update: JsonDocument) -> list[json_diff.Difference]:
    loader = json_diff.Loader()
    try:
        differences = json_diff.compare(_node(loader, original), _node(loader, update))
    except json_diff.TooComplex as exc:
        raise errors.operation_not_permitted(f"JSON schemas not compared: {exc}") from None
    return [d for d in differences if d.type not in json_diff.COMPATIBLE]


def _formatted(differences: list[json_diff.Difference], reader: str, writer: str, version: int | None,
               text: str) -> list[str]:
    out = [d.message(reader, writer) for d in differences]
    if out and version is not None:
        out.append(f"{{oldSchemaVersion: {version}}}")
        out.append(f"{{oldSchema: '{text}'}}" if len(text) <= MAX_SCHEMA_IN_DETAILS
                   else f"{{oldSchema: <truncated> '{text[:MAX_SCHEMA_IN_DETAILS]}...'}}")
    return out


_ROOT_URI = "urn:minikafka:schema"


def _node(loader: json_diff.Loader, document: JsonDocument) -> json_diff.Node:
    """The root schema, its `$ref`s resolved within it and into its references by their `$id`."""
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT7

    def resource(doc: Any) -> Any:
        try:
            return Resource.from_contents(doc, default_specification=DRAFT7)
        except Exception:  # an unknown $schema: read as draft-07
            return DRAFT7.create_resource(doc)

    def uri(doc: Any) -> str | None:
        value = doc.get("$id", doc.get("id")) if isinstance(doc, dict) else None
        return value if isinstance(value, str) and value else None

    base = uri(document.root) or _ROOT_URI
    registry: Any = Registry()
    for name, doc in document.references:
        # as Confluent: by the name it is referenced by (also taken relative to the root's $id), and its $id
        uris = {u for u in (name, name and urljoin(base, name), uri(doc)) if u}
        registry = registry.with_resources((u, resource(doc)) for u in uris)
    registry = registry.with_resource(base, resource(document.root))
    return loader.load(document.root, registry.resolver(base_uri=base))
