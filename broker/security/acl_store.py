"""Durable ACL store: one JSON file (`__minikafka_acls.json`) in the first log dir.

Invariant: a change is written (temp file, fsync, rename, directory fsync — storage's atomic_write)
before it becomes current and before the request that made it is answered, so ACLs survive restart
and kill -9. Changes are serialized by one lock; the file write runs in a worker thread. The file
holds plain bindings; what they mean is broker/security/acl.py's business.

In a cluster (`follow_image=True`) the file is not used: the bindings are those of the metadata image
(`follow`, from broker/cluster/security_sync.py) and, until the image was first applied, `loaded` is
False and the authorizer denies everyone but super users (Kafka's StandardAuthorizer before its initial
load).
"""
from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Callable, Iterable

from minikafka.storage.partition_metadata import atomic_write
from minikafka.broker.security.acl import AclBinding, AclFilter, AclSet, InvalidAclError, validate_new_acl

ACL_FILE = "__minikafka_acls.json"
FORMAT_VERSION = 1


class AclStore:
    def __init__(self, data_dir: Path, follow_image: bool = False) -> None:
        self.path = Path(data_dir) / ACL_FILE
        self.current = AclSet()
        self.follows_image = follow_image
        self.loaded = not follow_image
        self._lock = asyncio.Lock()
        self._listeners: list[Callable[[AclSet], None]] = []

    def load(self) -> None:
        """Read the file if present; a corrupt file stops the start-up (never fail open)."""
        if not self.path.exists():
            return
        doc = json.loads(self.path.read_text())
        if doc.get("version") != FORMAT_VERSION:
            raise ValueError(f"{self.path}: unknown ACL file version {doc.get('version')!r}")
        self.current = AclSet(AclBinding(*row) for row in doc["acls"])

    def follow(self, acls: Iterable[AclBinding]) -> None:
        """A cluster: the bindings are now exactly `acls` (the applied metadata image)."""
        new = frozenset(acls)
        changed = not self.loaded or new != self.current.acls
        self.loaded = True
        if changed:
            self.current = AclSet(new)
            for listener in self._listeners:
                listener(self.current)

    def on_change(self, listener: Callable[[AclSet], None]) -> None:
        self._listeners.append(listener)

    def _write(self, acls: Iterable[AclBinding]) -> None:
        rows = sorted(list(a) for a in acls)
        atomic_write(self.path, json.dumps({"version": FORMAT_VERSION, "acls": rows}).encode())

    async def _replace(self, acls: frozenset[AclBinding]) -> None:
        await asyncio.to_thread(self._write, acls)
        self.current = AclSet(acls)
        for listener in self._listeners:
            listener(self.current)

    async def create(self, bindings: list[AclBinding]) -> list[Exception | None]:
        """Add valid bindings (an existing one is a success, as Kafka); per binding None or the error."""
        results: list[Exception | None] = []
        async with self._lock:
            acls = set(self.current.acls)
            for binding in bindings:
                try:
                    validate_new_acl(binding)
                except InvalidAclError as exc:
                    results.append(exc)
                    continue
                acls.add(binding)
                results.append(None)
            if acls != self.current.acls:
                await self._replace(frozenset(acls))
        return results

    async def delete(self, filters: list[AclFilter]) -> list[list[AclBinding] | Exception]:
        """Remove the bindings each filter matches; per filter the matched bindings or the error."""
        results: list[list[AclBinding] | Exception] = []
        async with self._lock:
            acls = set(self.current.acls)
            removed: set[AclBinding] = set()
            for flt in filters:
                if flt.pattern_type == 0 or flt.resource_type == 0:
                    results.append(InvalidAclError("Unknown patternFilter."))
                    continue
                if flt.operation == 0 or flt.permission == 0:
                    results.append(InvalidAclError("Unknown entryFilter."))
                    continue
                matched = sorted(a for a in acls if flt.matches(a))
                removed.update(matched)
                results.append(matched)
            if removed:
                await self._replace(frozenset(acls - removed))
        return results

    def describe(self, flt: AclFilter) -> list[AclBinding]:
        return sorted(a for a in self.current.acls if flt.matches(a))
