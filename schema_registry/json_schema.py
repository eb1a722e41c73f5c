"""JSON Schema schemas (schemaType JSON): parsed and validated against their draft's meta-schema by the
`jsonschema` library (the draft their `$schema` names, draft-07 when none, as Confluent's default), stored as
compact JSON (`normalize`: keys sorted).

Compatibility between JSON schemas is not decided here yet: no maintained Python library implements
Confluent's JSON Schema rules, and a partial hand-written set would accept changes Confluent refuses. The
registry therefore registers a new version of a JSON subject only when its compatibility level is NONE
(or it has no live version yet), and says so otherwise (registry.py).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from minikafka.schema_registry import errors


@dataclass(frozen=True)
class ParsedJson:
    schema: Any  # the JSON document (an object or a boolean)
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
        if not isinstance(doc, (dict, bool)):
            raise errors.invalid_schema(f"{source[:1000]}, details: a JSON schema is an object or a boolean")
        try:
            validator_for(doc, default=Draft7Validator).check_schema(doc)
        except SchemaError as exc:
            raise errors.invalid_schema(f"{source[:1000]}, details: {what}: {exc.message}") from None
        docs.append(doc)
    schema = docs[-1]
    return ParsedJson(schema, json.dumps(schema, separators=(",", ":"), sort_keys=normalize, ensure_ascii=False))


def check(level: str, new: Any, previous: list[tuple[int, str, Any]]) -> list[str]:
    """Not decided yet: a new version of a JSON subject needs level NONE (42205 says so)."""
    raise errors.operation_not_permitted(
        f"Compatibility of JSON schemas is not checked by this registry yet: compatibility {level}; set it to "
        "NONE (PUT /config/{subject}) to register or test a new version")
