"""Named config resources kept as Kafka keeps them (GROUP and CLIENT_METRICS resources): resource name ->
{key: value} of the keys set, a resource with no key set being no resource at all.

A cluster keeps them in its metadata log (ConfigRecords through the active controller) and every node's
store follows the metadata image (`follow`); its file is neither read nor written. A single node keeps
them in one JSON file in the first log dir, replaced atomically (temp file, fsync, rename, directory
fsync) before a change is acknowledged, so they survive restart and kill -9. Subclasses say which keys
exist (`known`), how a resource's whole set is validated (`check`) and whom to tell of a change
(`_notify`).
"""
from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Iterable, Mapping

import kafka.errors as ke

from minikafka.storage.partition_metadata import atomic_write
from minikafka.broker.config.dynamic import ConfigRequestError

log = logging.getLogger(__name__)

INVALID_CONFIG = ke.InvalidConfigurationError.errno
INVALID_REQUEST = ke.InvalidRequestError.errno
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3

Resources = dict[str, dict[str, str]]


class ResourceConfigStore:
    """Resource name -> its configs (only the keys set), persisted on a single node."""
    FILE = ""  # the single node's file in the first log dir
    SECTION = ""  # the file's top-level key
    WHAT = "configs"  # for the log line of an unreadable file

    def __init__(self, config, data_dir: Path) -> None:
        self.config = config
        self.path = Path(data_dir) / self.FILE
        self.resources: Resources = {}
        self.lock = asyncio.Lock()  # held by a request changing resources (see `commit`)

    def known(self, key: str) -> bool:
        raise NotImplementedError

    def check(self, name: str, props: Mapping[str, str]) -> dict[str, str]:
        """`props` as the resource's whole set, validated (nothing changes); ConfigRequestError."""
        raise NotImplementedError

    def _notify(self, changes: Mapping[str, Mapping[str, str]]) -> None:
        """The resources in `changes` now have these configs (empty: removed)."""

    def _list_op_refused(self, key: str, op: int) -> ConfigRequestError:
        """APPEND / SUBTRACT: none of these keys is a LIST in Kafka's config schema."""
        verb = "APPEND" if op == APPEND else "SUBTRACT"
        return ConfigRequestError(INVALID_CONFIG, f"Can't {verb} to key {key} because its type is not LIST.")

    # -- persistence ----------------------------------------------------------------------------
    def _clean(self, data: Mapping) -> Resources:
        out = {str(n): {str(k): str(v) for k, v in c.items() if self.known(str(k))} for n, c in data.items()}
        return {n: c for n, c in out.items() if c}

    def load(self) -> None:
        if getattr(self.config, "quorum", None) is not None:  # a cluster: the metadata image holds them
            return
        if not self.path.exists():
            return
        try:
            self.resources = self._clean(json.loads(self.path.read_text()).get(self.SECTION, {}))
        except (OSError, ValueError, AttributeError) as exc:
            log.error("%s in %s unreadable, ignored: %s", self.WHAT, self.path, exc)

    def _snapshot(self, changes: Mapping[str, Mapping[str, str]]) -> Resources:
        resources = dict(self.resources)
        for name, props in changes.items():
            if props:
                resources[name] = dict(props)
            else:
                resources.pop(name, None)
        return resources

    def _write(self, resources: Mapping[str, Mapping[str, str]]) -> None:
        atomic_write(self.path, json.dumps({self.SECTION: resources}, indent=1, sort_keys=True).encode())

    def _applied(self, resources: Resources, changes: Mapping[str, Mapping[str, str]]) -> None:
        self.resources = resources
        self._notify(changes)

    # -- changes --------------------------------------------------------------------------------
    def incremental(self, name: str, ops: Iterable[tuple[str, int, str | None]]) -> dict[str, str]:
        """The resource's configs after SET / DELETE (IncrementalAlterConfigs, not yet validated)."""
        props = dict(self.resources.get(name, {}))
        for key, op, value in ops:
            if op == SET:
                props[key] = value or ""
            elif op == DELETE:
                props.pop(key, None)
            elif op in (APPEND, SUBTRACT):
                raise self._list_op_refused(key, op)
            else:
                raise ConfigRequestError(INVALID_REQUEST, f"Unknown operations type {op}")
        return props

    def replace(self, name: str, props: Mapping[str, str], validate_only: bool = False) -> None:
        """Make `props` the resource's whole set: validate, persist, notify (synchronous: tests and
        tools; handlers use `commit`)."""
        props = self.check(name, props)
        if validate_only:
            return
        resources = self._snapshot({name: props})
        self._write(resources)
        self._applied(resources, {name: props})

    def follow(self, resources: Mapping[str, Mapping[str, str]]) -> None:
        """A cluster: the resources become the metadata image's configs of this type (no file); the
        resources that changed are notified as after a local commit."""
        new = self._clean(resources)
        changed = {n: new.get(n, {}) for n in sorted(set(self.resources) | set(new))
                   if self.resources.get(n) != new.get(n)}
        if changed:
            self._applied(new, changed)

    async def commit(self, changes: Mapping[str, Mapping[str, str]]) -> None:
        """Persist checked changes of several resources (one request) with one file write in a worker
        thread, then make them current. Callers hold `lock` from reading the configs they changed until
        this returns, so concurrent requests never lose each other's changes."""
        if not changes:
            return
        resources = self._snapshot(changes)
        await asyncio.to_thread(self._write, resources)
        self._applied(resources, changes)
