"""The `_schemas` topic's records, in Confluent Schema Registry's JSON formats (its KafkaStore's keys and
values), so that a registry's topic reads the same to either implementation:

    SCHEMA          {"keytype":"SCHEMA","subject":s,"version":v,"magic":1}
                    -> {"subject":s,"version":v,"id":i,"schemaType":t (absent for AVRO),"references":[..],
                        "schema":"...","deleted":false}
    CONFIG          {"keytype":"CONFIG","subject":s,"magic":0}  -> {"compatibilityLevel":"BACKWARD"}
    MODE            {"keytype":"MODE","subject":s,"magic":0}    -> {"mode":"READONLY"}
                    (the global CONFIG / MODE key has no "subject": Confluent's keys omit empty fields, and
                    compaction matches keys byte for byte)
    DELETE_SUBJECT  {"keytype":"DELETE_SUBJECT","subject":s,"magic":0}  -> {"subject":s,"version":v}
    NOOP            {"keytype":"NOOP","magic":0}                         -> null

A null value (tombstone) removes what its key names (a version permanently deleted, a subject's config or
mode deleted); compaction keeps the last record of each key. Keys are written with their fields in this
order and no spaces, so that one key is always the same bytes.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

SCHEMA, CONFIG, MODE, DELETE_SUBJECT, CLEAR_SUBJECT, NOOP = (
    "SCHEMA", "CONFIG", "MODE", "DELETE_SUBJECT", "CLEAR_SUBJECT", "NOOP")


def _dump(value: dict) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dump({"keytype": SCHEMA, "subject": subject, "version": version, "magic": 1})


def _subject_key(keytype: str, subject: str | None) -> bytes:
    return _dump({"keytype": keytype, "magic": 0} if subject is None
                 else {"keytype": keytype, "subject": subject, "magic": 0})


def config_key(subject: str | None) -> bytes:
    return _subject_key(CONFIG, subject)


def mode_key(subject: str | None) -> bytes:
    return _subject_key(MODE, subject)


def delete_subject_key(subject: str) -> bytes:
    return _dump({"keytype": DELETE_SUBJECT, "subject": subject, "magic": 0})


def noop_key() -> bytes:
    return _dump({"keytype": NOOP, "magic": 0})


def schema_value(subject: str, version: int, schema_id: int, schema_type: str, schema: str,
                 references: list[dict], deleted: bool) -> bytes:
    value: dict[str, Any] = {"subject": subject, "version": version, "id": schema_id}
    if schema_type != "AVRO":
        value["schemaType"] = schema_type
    if references:
        value["references"] = references
    value["schema"] = schema
    value["deleted"] = deleted
    return _dump(value)


def config_value(level: str) -> bytes:
    return _dump({"compatibilityLevel": level})


def mode_value(mode: str) -> bytes:
    return _dump({"mode": mode})


def delete_subject_value(subject: str, version: int) -> bytes:
    return _dump({"subject": subject, "version": version})


@dataclass(frozen=True)
class Record:
    """One decoded `_schemas` record: its key's fields and its value (None for a tombstone)."""
    keytype: str
    key: dict
    value: dict | None


class RecordFormatError(ValueError):
    """A `_schemas` record this registry cannot read (skipped with a warning on replay, as Confluent's reader
    skips what it cannot deserialize)."""


def decode(key: bytes | None, value: bytes | None) -> Record:
    if key is None:
        raise RecordFormatError("a record without a key")
    try:
        k = json.loads(key)
        v = None if value is None else json.loads(value)
    except (ValueError, UnicodeDecodeError) as exc:
        raise RecordFormatError(f"not JSON: {exc}") from None
    except RecursionError:
        raise RecordFormatError("JSON nested too deeply") from None
    if not isinstance(k, dict) or not isinstance(k.get("keytype"), str):
        raise RecordFormatError(f"a key without a keytype: {key[:200]!r}")
    if v is not None and not isinstance(v, dict):
        raise RecordFormatError(f"a value that is not a JSON object: {value[:200]!r}")
    return Record(k["keytype"], k, v)
