"""The registry's state in memory, rebuilt by applying `_schemas` records in log order (records.py).

Every change goes through `apply`: a replay on start and a write of this registry (appended to the log
first, then applied) take the same path, so what is served is always what the log says. Reads never touch
the log.

- subjects: subject -> version -> Version (soft-deleted versions are kept, flagged)
- ids: one global id space; an id names one schema (type, text, references) and stays resolvable while any
  version, soft-deleted or not, carries it
- configs / modes: per subject, and the global one under the key None
"""
from __future__ import annotations

import logging
from dataclasses import dataclass, field

from minikafka.schema_registry import records as r

log = logging.getLogger(__name__)

COMPATIBILITY_LEVELS = ("NONE", "BACKWARD", "BACKWARD_TRANSITIVE", "FORWARD", "FORWARD_TRANSITIVE", "FULL",
                        "FULL_TRANSITIVE")
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")
DEFAULT_COMPATIBILITY = "BACKWARD"
DEFAULT_MODE = "READWRITE"


@dataclass(frozen=True)
class StoredSchema:
    """What an id names."""
    schema_type: str
    schema: str
    references: tuple[tuple[str, str, int], ...] = ()  # (name, subject, version)

    def references_json(self) -> list[dict]:
        return [{"name": n, "subject": s, "version": v} for n, s, v in self.references]


@dataclass
class Version:
    subject: str
    version: int
    schema_id: int
    schema: StoredSchema
    deleted: bool = False


@dataclass
class RegistryState:
    subjects: dict[str, dict[int, Version]] = field(default_factory=dict)
    ids: dict[int, StoredSchema] = field(default_factory=dict)
    id_users: dict[int, set[tuple[str, int]]] = field(default_factory=dict)
    by_content: dict[StoredSchema, int] = field(default_factory=dict)
    configs: dict[str | None, str] = field(default_factory=dict)
    modes: dict[str | None, str] = field(default_factory=dict)
    max_id: int = 0
    applied: int = 0  # records applied (replay and writes)
    next_offset: int = 0  # the store's first offset not yet applied (store.py)

    # ================================================================ applying records

    def apply(self, record: r.Record) -> None:
        handler = _HANDLERS.get(record.keytype)
        if handler is None:
            log.warning("_schemas: skipping a record of unknown keytype %r", record.keytype)
            return
        handler(self, record)
        self.applied += 1

    def _apply_schema(self, record: r.Record) -> None:
        subject, version = record.key.get("subject"), record.key.get("version")
        if not isinstance(subject, str) or not isinstance(version, int):
            log.warning("_schemas: skipping a SCHEMA key without subject and version: %r", record.key)
            return
        if record.value is None:  # permanent delete of one version
            self._remove_version(subject, version)
            return
        v = record.value
        schema_id = int(v["id"])
        self.max_id = max(self.max_id, schema_id)  # taken even by a version this registry cannot read
        refs = tuple((ref["name"], ref["subject"], int(ref["version"])) for ref in v.get("references") or ())
        schema_type, text = v.get("schemaType") or "AVRO", v["schema"]
        if not isinstance(schema_type, str) or not isinstance(text, str):
            raise TypeError(f"a SCHEMA value whose schemaType or schema is not a string: {v!r:.200}")
        stored = StoredSchema(schema_type, text, refs)
        taken = self.ids.get(schema_id)
        if taken is not None and taken != stored:  # as Confluent's reader: an id never names a second schema
            log.warning("_schemas: skipping version %d of %r: its id %d already names another schema", version,
                        subject, schema_id)
            return
        self._remove_version(subject, version)
        self.subjects.setdefault(subject, {})[version] = Version(subject, version, schema_id, stored,
                                                                  bool(v.get("deleted", False)))
        self.ids.setdefault(schema_id, stored)
        self.id_users.setdefault(schema_id, set()).add((subject, version))
        self.by_content.setdefault(stored, schema_id)
        self.max_id = max(self.max_id, schema_id)

    def _remove_version(self, subject: str, version: int) -> None:
        versions = self.subjects.get(subject)
        if versions is None or version not in versions:
            return
        old = versions.pop(version)
        if not versions:
            del self.subjects[subject]
        users = self.id_users.get(old.schema_id)
        if users is not None:
            users.discard((subject, version))
            if not users:  # nothing carries the id any more: it no longer resolves
                del self.id_users[old.schema_id]
                stored = self.ids.pop(old.schema_id, None)
                if stored is not None and self.by_content.get(stored) == old.schema_id:
                    del self.by_content[stored]

    def _apply_config(self, record: r.Record) -> None:
        """A config record replaces the subject's config; one without a compatibilityLevel (Confluent writes
        fields only when set, e.g. after PUT /config/s {"normalize": true}) leaves no level of its own, so the
        global one applies (Confluent's mergeConfigs)."""
        subject = record.key.get("subject")
        level = None if record.value is None else record.value.get("compatibilityLevel")
        if isinstance(level, str) and level in COMPATIBILITY_LEVELS:
            self.configs[subject] = level
        else:
            if record.value is not None and level is not None:
                log.warning("_schemas: a config of %r with an unknown compatibilityLevel %r: none kept", subject,
                            level)
            self.configs.pop(subject, None)

    def _apply_mode(self, record: r.Record) -> None:
        subject = record.key.get("subject")
        mode = None if record.value is None else record.value.get("mode")
        if isinstance(mode, str):
            self.modes[subject] = mode
        else:
            self.modes.pop(subject, None)

    def _apply_delete_subject(self, record: r.Record) -> None:
        if record.value is None:
            return
        subject, upto = record.value.get("subject"), record.value.get("version")
        for version, entry in self.subjects.get(subject, {}).items():
            if upto is None or version <= upto:
                entry.deleted = True

    def _apply_clear_subject(self, record: r.Record) -> None:
        if record.value is None:
            return
        subject = record.value.get("subject")
        for version in [v for v, e in self.subjects.get(subject, {}).items() if e.deleted]:
            self._remove_version(subject, version)

    def _apply_noop(self, record: r.Record) -> None:
        pass

    # ================================================================ queries

    def versions(self, subject: str, deleted: bool = False) -> list[Version]:
        """The subject's versions in order, soft-deleted ones only with `deleted`."""
        return [e for _v, e in sorted(self.subjects.get(subject, {}).items()) if deleted or not e.deleted]

    def live_subjects(self, deleted: bool = False) -> list[str]:
        return sorted(s for s in self.subjects if self.versions(s, deleted))

    def next_version(self, subject: str) -> int:
        """One past the highest version, soft-deleted ones included (Confluent never reuses a version that a
        soft delete left in the log)."""
        versions = self.subjects.get(subject)
        return max(versions) + 1 if versions else 1

    def compatibility(self, subject: str | None) -> str:
        if subject is not None and subject in self.configs:
            return self.configs[subject]
        return self.configs.get(None, DEFAULT_COMPATIBILITY)

    def mode(self, subject: str | None) -> str:
        if subject is not None and subject in self.modes:
            return self.modes[subject]
        return self.modes.get(None, DEFAULT_MODE)

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of live schemas whose references name (subject, version)."""
        return self.subject_referenced_by(subject).get(version, [])

    def subject_referenced_by(self, subject: str) -> dict[int, list[int]]:
        """version -> ids of live schemas whose references name it, for each referenced version of `subject`:
        one pass over every version, so a subject's delete is not versions x every version."""
        out: dict[int, set[int]] = {}
        for versions in self.subjects.values():
            for entry in versions.values():
                if not entry.deleted:
                    for _n, s, v in entry.schema.references:
                        if s == subject:
                            out.setdefault(v, set()).add(entry.schema_id)
        return {v: sorted(ids) for v, ids in out.items()}


_HANDLERS = {
    r.SCHEMA: RegistryState._apply_schema,
    r.CONFIG: RegistryState._apply_config,
    r.MODE: RegistryState._apply_mode,
    r.DELETE_SUBJECT: RegistryState._apply_delete_subject,
    r.CLEAR_SUBJECT: RegistryState._apply_clear_subject,
    r.NOOP: RegistryState._apply_noop,
}
