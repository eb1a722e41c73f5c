"""A single node's client quotas: one JSON file in the first log dir, replaced atomically (temp file,
fsync, rename), written before the change is applied, so quotas survive restart and kill -9. On a
cluster node the quotas follow the metadata image instead (broker/cluster/security_sync.py) and no
file is read or written."""
from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Iterable

from minikafka.storage.partition_metadata import atomic_write
from minikafka.broker.quota import model as m
from minikafka.broker.quota.manager import ClientQuotaManager

log = logging.getLogger(__name__)
QUOTA_FILE = "__minikafka_client_quotas.json"


class ClientQuotaStore:
    def __init__(self, data_dir: Path | str, manager: ClientQuotaManager) -> None:
        self.path = Path(data_dir) / QUOTA_FILE
        self.manager = manager
        self.quotas: m.Quotas = {}
        self.lock = asyncio.Lock()  # held from reading the quotas a request changes until they are stored

    def load(self) -> "ClientQuotaStore":
        if self.path.exists():
            try:
                self.quotas = m.from_json(json.loads(self.path.read_text()).get("quotas", []))
            except (OSError, ValueError, TypeError, AttributeError) as exc:
                log.error("client quotas in %s unreadable, ignored: %s", self.path, exc)
        self.manager.replace(self.quotas)
        return self

    def _write(self, quotas: m.Quotas) -> None:
        atomic_write(self.path, json.dumps({"quotas": m.to_json(quotas)}, indent=1).encode())

    async def commit(self, changes: Iterable[m.Change]) -> None:
        changes = list(changes)
        if not changes:
            return
        quotas = {e: dict(v) for e, v in self.quotas.items()}
        m.apply(quotas, changes)
        await asyncio.to_thread(self._write, quotas)
        self.quotas = quotas
        self.manager.replace(quotas)

    def follow(self, quotas: m.Quotas) -> None:
        """A cluster: the quotas are the metadata image's."""
        if quotas != self.quotas:
            self.quotas = {e: dict(v) for e, v in quotas.items()}
            self.manager.replace(self.quotas)
