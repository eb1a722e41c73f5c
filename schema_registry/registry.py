"""The registry's operations, as Confluent Schema Registry's resources answer them (v7 semantics): every
method returns the JSON body of its answer or raises a RegistryError (errors.py).

Writes are serialized by one lock: the store first applies all it holds (`prepare_write`; on a cluster it
raises NotLeader on a node that does not lead `_schemas`), then a change is appended through the store
(store.py), then applied to the state (state.py) exactly as a replay would apply it. Reads come from memory.
"""
from __future__ import annotations

import asyncio
from typing import Any, Protocol

from minikafka.schema_registry import avro_schema, errors, json_schema, protobuf_schema
from minikafka.schema_registry import records as r
from minikafka.schema_registry.state import COMPATIBILITY_LEVELS, MODES, RegistryState, StoredSchema, Version

INT32_MAX = 2**31 - 1


class ReferenceText(str):
    """A referenced schema's text that also carries the name it is referenced by (`.name`: Protobuf's import
    path); a plain str to the types that need only the text."""
    name: str

    def __new__(cls, text: str, name: str) -> ReferenceText:
        self = super().__new__(cls, text)
        self.name = name
        return self

class SchemaType(Protocol):
    """A schema type's module (avro_schema.py, json_schema.py, ...)."""
    def parse(self, text: str, references: list[str] = (), normalize: bool = False) -> Any:
        """An object with `.schema` (the parsed form) and `.text` (what is stored); InvalidSchema (42201)."""
    def check(self, level: str, new: Any, previous: list[tuple[int, str, Any]]) -> list[str]:
        """Confluent's incompatibility details of `new` against `previous` (version, text, parsed), oldest
        first, under `level` (never NONE); [] if compatible."""


TYPES: dict[str, SchemaType] = {"AVRO": avro_schema, "JSON": json_schema,  # type: ignore[dict-item]
                                "PROTOBUF": protobuf_schema}
SCHEMA_TYPES = tuple(TYPES)



class Store(Protocol):
    """store.py's LogStore (the `_schemas` partition), ReplicatedLogStore (a cluster's) or MemoryStore."""
    async def wait_ready(self, timeout_s: float) -> None: ...
    async def prepare_write(self, state: RegistryState) -> None: ...
    async def append(self, records: list[tuple[bytes, bytes | None]]) -> None: ...
    async def wait_applied(self, state: RegistryState, offset: int, timeout_s: float) -> bool: ...
    def local_end(self) -> int: ...
    def catch_up(self, state: RegistryState, max_chunks: int | None = None) -> bool: ...
    async def replay(self, state: RegistryState) -> None: ...


def parse_version(value: str | int) -> int | None:
    """None for the latest version ("latest" or -1), else a version in [1, 2^31-1]; 42202 otherwise."""
    if value in ("latest", -1, "-1"):
        return None
    try:
        version = int(value)
    except (TypeError, ValueError):
        raise errors.invalid_version(value) from None
    if not 1 <= version <= INT32_MAX:
        raise errors.invalid_version(value)
    return version


def _flag(value: object) -> bool:
    return str(value).lower() == "true"


class SchemaRegistry:
    def __init__(self, store: Store) -> None:
        self.state = RegistryState()
        self.store = store
        self._lock = asyncio.Lock()
        self._parsed: dict[StoredSchema, Any] = {}  # stored schema -> avro Schema (parsed once)

    # ================================================================ the store

    async def load(self) -> None:
        """The start-up replay of the whole store."""
        await self.store.replay(self.state)

    def refresh(self) -> None:
        """Apply what the store holds past what was applied (before each request: records appended by others)."""
        self.store.catch_up(self.state)

    async def _write(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Append, then apply from the store: the state changes only as a replay would change it."""
        try:
            await self.store.append(records)
        except errors.RegistryError:
            raise
        except Exception as exc:
            raise errors.store_error(str(exc) or type(exc).__name__) from None
        self.refresh()

    def _check_writable(self, subject: str | None) -> None:
        if self.state.mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise errors.operation_not_permitted(f"Subject {subject} is in read-only mode")

    # ================================================================ schemas: parsing and references

    def _reference_texts(self, refs: tuple[tuple[str, str, int], ...]) -> list[str]:
        """The referenced schemas' texts, dependencies first, each once (depth first with a stack of its own:
        a chain of references as long as a client registered never meets the interpreter's recursion limit)."""
        seen: set[tuple[str, int]] = set()
        out: list[str] = []
        stack: list[tuple[Any, str | None]] = [(iter(refs), None)]  # (references left, text once they are out)
        while stack:
            left, text = stack[-1]
            ref = next(left, None)
            if ref is None:
                stack.pop()
                if text is not None:
                    out.append(text)
                continue
            name, subject, version = ref
            if (subject, version) in seen:
                continue
            seen.add((subject, version))
            entry = self.state.subjects.get(subject, {}).get(version)
            if entry is None:
                raise errors.invalid_schema(f"reference {subject} version {version} not found")
            stack.append((iter(entry.schema.references), ReferenceText(entry.schema.schema, name)))
        return out

    def _resolve_references(self, raw: object) -> tuple[tuple[str, str, int], ...]:
        if raw is None:
            return ()
        if not isinstance(raw, list):
            raise errors.unprocessable("references must be a list")
        out = []
        for ref in raw:
            if not isinstance(ref, dict) or not isinstance(ref.get("name"), str) \
                    or not isinstance(ref.get("subject"), str):
                raise errors.invalid_schema(f"invalid reference {ref}")
            version = parse_version(ref.get("version", -1))
            if version is None:
                live = self.state.versions(ref["subject"])
                if not live:
                    raise errors.invalid_schema(f"reference subject {ref['subject']} not found")
                version = live[-1].version
            out.append((ref["name"], ref["subject"], version))
        return tuple(out)

    def _parse_request(self, body: object, normalize: bool = False) -> tuple[StoredSchema, Any]:
        if not isinstance(body, dict):
            raise errors.unprocessable("the request body must be a JSON object")
        text = body.get("schema")
        schema_type = body.get("schemaType") or "AVRO"
        if schema_type not in SCHEMA_TYPES:
            raise errors.invalid_schema(f"of type {schema_type}: this registry supports {', '.join(SCHEMA_TYPES)}")
        if not isinstance(text, str) or not text.strip():
            raise errors.invalid_schema("Empty schema")
        refs = self._resolve_references(body.get("references"))
        parsed = TYPES[schema_type].parse(text, self._reference_texts(refs), normalize)
        return StoredSchema(schema_type, parsed.text, refs), parsed.schema

    def _schema(self, stored: StoredSchema) -> Any:
        """The parsed form of a registered schema (cached: one entry per registered schema, nothing a request
        alone can grow)."""
        schema = self._parsed.get(stored)
        if schema is None:
            if stored.schema_type not in TYPES:  # written by another registry (a schema type plugin)
                raise errors.invalid_schema(f"of type {stored.schema_type}: this registry supports "
                                            f"{', '.join(SCHEMA_TYPES)}")
            schema = TYPES[stored.schema_type].parse(stored.schema, self._reference_texts(stored.references)).schema
            self._parsed[stored] = schema
        return schema

    def _incompatibilities(self, subject: str, level: str, stored: StoredSchema, schema: Any,
                           previous: list[Version]) -> list[str]:
        """The details of `schema`'s incompatibility with `previous` (live versions, oldest first) under
        `level`; [] if compatible."""
        if level == "NONE" or not previous:
            return []
        against = previous if level.endswith("_TRANSITIVE") else previous[-1:]
        for entry in reversed(against):
            if entry.schema.schema_type != stored.schema_type:
                return [f"{{errorType:'TYPE_MISMATCH', description:'The schema type {stored.schema_type} does not "
                        f"match the type {entry.schema.schema_type} of version {entry.version}'}}",
                        f"{{oldSchemaVersion: {entry.version}}}", f"{{compatibility: '{level}'}}"]
        return TYPES[stored.schema_type].check(level, schema, [(e.version, e.schema.schema, self._schema(e.schema))
                                                               for e in against])  # only those compared parsed

    # ================================================================ answers

    def _formatted(self, stored: StoredSchema, fmt: str = "") -> str:
        """The schema text in the output format `fmt` (`?format=`, e.g. Protobuf's `serialized`); the stored
        text for none, or one its type does not know (as Confluent answers)."""
        formatter = getattr(TYPES.get(stored.schema_type), "formatted", None)
        if not fmt or formatter is None:
            return stored.schema
        out = formatter(self._schema(stored), fmt)
        return stored.schema if out is None else out

    def _version_body(self, entry: Version, fmt: str = "") -> dict:
        body: dict[str, Any] = {"subject": entry.subject, "version": entry.version, "id": entry.schema_id}
        if entry.schema.schema_type != "AVRO":
            body["schemaType"] = entry.schema.schema_type
        if entry.schema.references:
            body["references"] = entry.schema.references_json()
        body["schema"] = self._formatted(entry.schema, fmt)
        return body

    def _find_version(self, subject: str, version: str | int, deleted: bool = False) -> Version:
        wanted = parse_version(version)
        live = self.state.versions(subject, deleted)
        if not live:
            raise errors.subject_not_found(subject)
        if wanted is None:
            return live[-1]
        for entry in live:
            if entry.version == wanted:
                return entry
        raise errors.version_not_found(wanted)

    # ================================================================ /schemas

    def schema_types(self) -> list[str]:
        return list(SCHEMA_TYPES)

    def schema_by_id(self, schema_id: int, fmt: str = "") -> dict:
        stored = self.state.ids.get(schema_id)
        if stored is None:
            raise errors.schema_id_not_found(schema_id)
        body: dict[str, Any] = {}
        if stored.schema_type != "AVRO":
            body["schemaType"] = stored.schema_type
        if stored.references:
            body["references"] = stored.references_json()
        body["schema"] = self._formatted(stored, fmt)
        return body

    def schema_text_by_id(self, schema_id: int, fmt: str = "") -> str:
        return self.schema_by_id(schema_id, fmt)["schema"]

    def id_versions(self, schema_id: int, deleted: bool = False) -> list[dict]:
        if schema_id not in self.state.ids:
            raise errors.schema_id_not_found(schema_id)
        return [{"subject": s, "version": v} for s, v in sorted(self.state.id_users.get(schema_id, ()))
                if deleted or not self.state.subjects[s][v].deleted]

    def id_subjects(self, schema_id: int, deleted: bool = False) -> list[str]:
        return sorted({item["subject"] for item in self.id_versions(schema_id, deleted)})

    def schemas(self, prefix: str = "", deleted: bool = False, latest_only: bool = False) -> list[dict]:
        """GET /schemas: every version of the matching subjects (or only each one's latest), by subject."""
        out = []
        for subject in self.state.live_subjects(deleted):
            if subject.startswith(prefix):
                entries = self.state.versions(subject, deleted)
                out += [self._version_body(e) for e in (entries[-1:] if latest_only else entries)]
        return out

    # ================================================================ /subjects

    def subjects(self, deleted: bool = False, prefix: str = "") -> list[str]:
        return [s for s in self.state.live_subjects(deleted) if s.startswith(prefix)]

    def versions(self, subject: str, deleted: bool = False) -> list[int]:
        live = self.state.versions(subject, deleted)
        if not live:
            raise errors.subject_not_found(subject)
        return [e.version for e in live]

    def version(self, subject: str, version: str | int, deleted: bool = False, fmt: str = "") -> dict:
        return self._version_body(self._find_version(subject, version, deleted), fmt)

    def version_schema(self, subject: str, version: str | int, deleted: bool = False, fmt: str = "") -> str:
        return self._formatted(self._find_version(subject, version, deleted).schema, fmt)

    def referenced_by(self, subject: str, version: str | int) -> list[int]:
        entry = self._find_version(subject, version)
        return self.state.referenced_by(subject, entry.version)

    def lookup(self, subject: str, body: object, normalize: bool = False, deleted: bool = False, fmt: str = ""
               ) -> dict:
        if not self.state.versions(subject, deleted):
            raise errors.subject_not_found(subject)
        stored, _ = self._parse_request(body, normalize)
        for entry in reversed(self.state.versions(subject, deleted)):
            if entry.schema == stored:
                return self._version_body(entry, fmt)
        raise errors.schema_not_found()

    async def register(self, subject: str, body: object, normalize: bool = False) -> dict:
        async with self._lock:
            await self.store.prepare_write(self.state)  # decide on everything the store holds (leader only)
            return await self._register(subject, body, normalize)

    async def _register(self, subject: str, body: dict, normalize: bool) -> dict:
        self._check_writable(subject)
        stored, schema = self._parse_request(body, normalize)
        live = self.state.versions(subject)
        for entry in live:
            if entry.schema == stored:
                return {"id": entry.schema_id}
        importing = self.state.mode(subject) == "IMPORT"
        wanted_id, wanted_version = body.get("id"), body.get("version")
        if wanted_id is not None and wanted_id != -1:
            if not importing:
                raise errors.operation_not_permitted("Overriding schema id is only allowed in IMPORT mode")
            if not isinstance(wanted_id, int) or wanted_id < 1:
                raise errors.unprocessable(f"Invalid schema id {wanted_id}")
            existing = self.state.ids.get(wanted_id)
            if existing is not None and existing != stored:
                raise errors.operation_not_permitted(f"Overwrite new schema with id {wanted_id} is not permitted.")
            schema_id = wanted_id
        else:
            if not importing:
                details = self._incompatibilities(subject, self.state.compatibility(subject), stored, schema, live)
                if details:
                    raise errors.incompatible_schema(subject, details)
            schema_id = self.state.by_content.get(stored) or self.state.max_id + 1
        if importing and wanted_version not in (None, -1):
            version = parse_version(wanted_version)
            if version is None or version in self.state.subjects.get(subject, {}):
                raise errors.operation_not_permitted(f"Version {wanted_version} already exists in {subject}")
        else:
            version = self.state.next_version(subject)
        await self._write([(r.schema_key(subject, version), r.schema_value(
            subject, version, schema_id, stored.schema_type, stored.schema, stored.references_json(), False))])
        self._parsed[stored] = schema
        return {"id": schema_id}

    async def delete_version(self, subject: str, version: str | int, permanent: bool = False) -> int:
        async with self._lock:
            await self.store.prepare_write(self.state)  # decide on everything the store holds (leader only)
            self._check_writable(subject)
            # `latest` is the latest live version; a number may name a soft-deleted one (40406 / permanent delete)
            entry = self._find_version(subject, version, deleted=parse_version(version) is not None)
            if permanent:
                if not entry.deleted:
                    raise errors.version_not_soft_deleted(subject, entry.version)
                users = self.state.referenced_by(subject, entry.version)
                if users:
                    raise errors.reference_exists(str(users))
                await self._write([(r.schema_key(subject, entry.version), None)])
                return entry.version
            if entry.deleted:
                raise errors.version_soft_deleted(subject, entry.version)
            users = self.state.referenced_by(subject, entry.version)
            if users:
                raise errors.reference_exists(str(users))
            s = entry.schema
            await self._write([(r.schema_key(subject, entry.version), r.schema_value(
                subject, entry.version, entry.schema_id, s.schema_type, s.schema, s.references_json(), True))])
            return entry.version

    async def delete_subject(self, subject: str, permanent: bool = False) -> list[int]:
        async with self._lock:
            await self.store.prepare_write(self.state)  # decide on everything the store holds (leader only)
            self._check_writable(subject)
            every = self.state.versions(subject, deleted=True)
            live = [e for e in every if not e.deleted]
            if not every:
                raise errors.subject_not_found(subject)
            referenced = self.state.subject_referenced_by(subject)
            for entry in live if not permanent else every:
                if referenced.get(entry.version):
                    raise errors.reference_exists(str(referenced[entry.version]))
            if permanent:
                if live:
                    raise errors.subject_not_soft_deleted(subject)
                records: list[tuple[bytes, bytes | None]] = [(r.schema_key(subject, e.version), None) for e in every]
                if subject in self.state.configs:
                    records.append((r.config_key(subject), None))
                if subject in self.state.modes:
                    records.append((r.mode_key(subject), None))
                await self._write(records)
                return [e.version for e in every]
            if not live:
                raise errors.subject_soft_deleted(subject)
            await self._write([(r.delete_subject_key(subject), r.delete_subject_value(subject, live[-1].version))])
            return [e.version for e in live]

    # ================================================================ /compatibility

    def check_compatibility(self, subject: str, version: str | int | None, body: object,
                            verbose: bool = False, normalize: bool = False) -> dict:
        stored, schema = self._parse_request(body, normalize)
        level = self.state.compatibility(subject)
        if version is None:  # every version the level names
            previous = self.state.versions(subject)
        elif parse_version(version) is None and not self.state.versions(subject):
            previous = []  # nothing registered yet: anything is compatible with the latest of nothing
        else:
            previous = [self._find_version(subject, version)]
            level = level.removesuffix("_TRANSITIVE")
        details = self._incompatibilities(subject, level, stored, schema, previous)
        answer: dict[str, Any] = {"is_compatible": not details}
        if verbose:
            answer["messages"] = details
        return answer

    # ================================================================ /config and /mode

    def get_config(self, subject: str | None, default_to_global: bool = False) -> dict:
        if subject is not None and subject not in self.state.configs:
            if not default_to_global:
                raise errors.subject_compatibility_not_configured(subject)
        return {"compatibilityLevel": self.state.compatibility(subject)}

    async def set_config(self, subject: str | None, body: object) -> dict:
        level = body.get("compatibility") if isinstance(body, dict) else None
        if not isinstance(level, str) or level.upper() not in COMPATIBILITY_LEVELS:
            raise errors.invalid_compatibility_level()
        async with self._lock:
            await self.store.prepare_write(self.state)  # decide on everything the store holds (leader only)
            self._check_writable(subject)
            await self._write([(r.config_key(subject), r.config_value(level.upper()))])
        return {"compatibility": level.upper()}

    async def delete_config(self, subject: str | None) -> dict:
        async with self._lock:
            await self.store.prepare_write(self.state)  # decide on everything the store holds (leader only)
            if subject is not None and subject not in self.state.configs:
                raise errors.subject_compatibility_not_configured(subject)
            previous = self.state.compatibility(subject)
            if subject in self.state.configs:
                await self._write([(r.config_key(subject), None)])
        return {"compatibilityLevel": previous}

    def get_mode(self, subject: str | None, default_to_global: bool = False) -> dict:
        if subject is not None and subject not in self.state.modes and not default_to_global:
            raise errors.subject_mode_not_configured(subject)
        return {"mode": self.state.mode(subject)}

    async def set_mode(self, subject: str | None, body: object, force: bool = False) -> dict:
        mode = body.get("mode") if isinstance(body, dict) else None
        if not isinstance(mode, str) or mode.upper() not in MODES:
            raise errors.invalid_mode(mode)
        mode = mode.upper()
        async with self._lock:
            await self.store.prepare_write(self.state)  # decide on everything the store holds (leader only)
            if mode == "IMPORT" and not force:
                has = self.state.versions(subject) if subject is not None else self.state.live_subjects()
                if has:
                    raise errors.operation_not_permitted(
                        "Cannot import since found existing subjects" if subject is None
                        else f"Cannot import since found existing versions for subject {subject}")
            await self._write([(r.mode_key(subject), r.mode_value(mode))])
        return {"mode": mode}

    async def delete_mode(self, subject: str | None) -> dict:
        async with self._lock:
            await self.store.prepare_write(self.state)  # decide on everything the store holds (leader only)
            if subject is not None and subject not in self.state.modes:
                raise errors.subject_mode_not_configured(subject)
            previous = self.state.mode(subject)
            if subject in self.state.modes:
                await self._write([(r.mode_key(subject), None)])
        return {"mode": previous}
