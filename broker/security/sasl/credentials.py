"""The broker's SCRAM credentials (Kafka keeps them in the KRaft metadata log as
UserScramCredentialRecords): user -> mechanism -> salt, StoredKey, ServerKey, iterations. Never a
password or a salted password.

Stored as one JSON file in the first log dir, `scram-credentials.json`, replaced atomically (temp
file, fsync, rename, directory fsync) before a change is acknowledged, so credentials survive restart
and kill -9. `minikafka storage format --add-scram ...` writes the same file before the broker first
starts (Kafka's `kafka-storage format --add-scram`). A file that cannot be read refuses start-up:
security never fails open (an unreadable store must not look like "no users"). In a cluster the
metadata log holds them instead (UserScramCredential records): `follow` replaces the map, no file;
the formatted file is read only as the bootstrap the first active controller puts into the log.
"""
from __future__ import annotations

import base64
import json
import threading
from pathlib import Path
from typing import Iterable, Mapping

from minikafka.storage.partition_metadata import atomic_write
from minikafka.broker.security.sasl.scram import MECHANISMS, ScramCredential

from minikafka.broker.security.sasl.errors import CREDENTIALS_FILE, CredentialStoreError  # noqa: E402  (re-exported)
FORMAT_VERSION = 1


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _encode(creds: Mapping[str, Mapping[str, ScramCredential]]) -> bytes:
    users = {user: {mech: {"salt": _b64(c.salt), "stored_key": _b64(c.stored_key),
                           "server_key": _b64(c.server_key), "iterations": c.iterations}
                    for mech, c in sorted(by_mech.items())}
             for user, by_mech in sorted(creds.items()) if by_mech}
    return json.dumps({"version": FORMAT_VERSION, "users": users}, indent=1, sort_keys=True).encode("utf-8")


def _decode(data: bytes, path: Path) -> dict[str, dict[str, ScramCredential]]:
    try:
        doc = json.loads(data)
        if doc.get("version") != FORMAT_VERSION:
            raise ValueError(f"unknown format version {doc.get('version')!r}")
        out: dict[str, dict[str, ScramCredential]] = {}
        for user, by_mech in doc["users"].items():
            for mech, c in by_mech.items():
                if mech not in MECHANISMS:
                    raise ValueError(f"unknown mechanism {mech!r} for user {user!r}")
                out.setdefault(user, {})[mech] = ScramCredential(
                    base64.b64decode(c["salt"], validate=True), base64.b64decode(c["stored_key"], validate=True),
                    base64.b64decode(c["server_key"], validate=True), int(c["iterations"]))
        return out
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CredentialStoreError(f"{path}: malformed SCRAM credentials file: {exc}") from None


class ScramCredentialStore:
    """User -> mechanism -> ScramCredential, persisted in `<dir>/scram-credentials.json`.

    Reads (`get`) are lock-free dictionary lookups on the event loop; `apply` (from a worker thread)
    writes the new file first and swaps the in-memory map only after the write succeeded."""

    def __init__(self, directory: Path) -> None:
        self.path = Path(directory) / CREDENTIALS_FILE
        self._creds: dict[str, dict[str, ScramCredential]] = {}
        self._write_lock = threading.Lock()

    def load(self) -> "ScramCredentialStore":
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            self._creds = {}
            return self
        except OSError as exc:
            raise CredentialStoreError(f"cannot read {self.path}: {exc}") from None
        self._creds = _decode(data, self.path)
        return self

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._creds.get(user, {}).get(mechanism)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        """A snapshot: user -> mechanism -> credential."""
        return {u: dict(m) for u, m in self._creds.items()}

    def follow(self, creds: Mapping[str, Mapping[str, ScramCredential]]) -> None:
        """A cluster: the credentials are now exactly `creds` (the applied metadata image; no file)."""
        self._creds = {u: dict(m) for u, m in creds.items() if m}

    def apply(self, upserts: Iterable[tuple[str, str, ScramCredential]],
              deletions: Iterable[tuple[str, str]]) -> None:
        """Delete then upsert (user, mechanism) credentials, durably, all or nothing."""
        with self._write_lock:
            new = {u: dict(m) for u, m in self._creds.items()}
            for user, mech in deletions:
                new.get(user, {}).pop(mech, None)
                if user in new and not new[user]:
                    del new[user]
            for user, mech, cred in upserts:
                new.setdefault(user, {})[mech] = cred
            self.path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(self.path, _encode(new))
            self._creds = new
