"""Delegation tokens (KIP-48, KIP-373), as Kafka's DelegationTokenControlManager decides and its
DelegationTokenCache serves them to the SCRAM server.

A token is (id, owner, requester, renewers, issue / expiry / max timestamps). Its password is never
stored: the HMAC is HMAC-SHA512(delegation.token.secret.key, token id) and a client logs in over
SCRAM-SHA-256/512 with username = token id, password = base64(HMAC) and the SCRAM extension
`tokenauth=true`; the session's principal is then the token's owner. The SCRAM credentials of a token
(salt, StoredKey, ServerKey at 4096 iterations, as Kafka's DelegationTokenManager.prepareScramCredentials)
are derived when the token is loaded or created, in the thread that writes the store, never on the
event loop.

Enabled only when `delegation.token.secret.key` is set (Kafka 4 removed the alias
`delegation.token.master.key`); otherwise the token APIs answer DELEGATION_TOKEN_AUTH_DISABLED. Lifetimes: a token lives at most
`delegation.token.max.lifetime.ms` (or the request's shorter max lifetime) and expires
`delegation.token.expiry.time.ms` after its creation or last renewal; expired tokens are removed every
`delegation.token.expiry.check.interval.ms` (until then, as in Kafka, they still authenticate).

Single node: `<first log dir>/delegation-tokens.json`, replaced atomically before a change is
acknowledged (like the SCRAM credentials), so tokens survive restart. The file holds no HMAC: a token
created under another secret key has another HMAC after a restart, as in Kafka.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Iterable

from minikafka.broker.security.sasl.errors import CredentialStoreError
from minikafka.broker.security.sasl.scram import MECHANISMS, MIN_ITERATIONS, ScramCredential
from minikafka.protocol.errors import (DELEGATION_TOKEN_AUTH_DISABLED as AUTH_DISABLED, DELEGATION_TOKEN_EXPIRED as EXPIRED,
                                       DELEGATION_TOKEN_NOT_FOUND as NOT_FOUND, DELEGATION_TOKEN_OWNER_MISMATCH as OWNER_MISMATCH,
                                       INVALID_PRINCIPAL_TYPE, NONE)
from minikafka.storage.partition_metadata import atomic_write

TOKENS_FILE = "delegation-tokens.json"
FORMAT_VERSION = 1
DEFAULT_MAX_LIFETIME_MS = 7 * 24 * 3600 * 1000
DEFAULT_EXPIRY_TIME_MS = 24 * 3600 * 1000
DEFAULT_EXPIRY_CHECK_INTERVAL_MS = 3600 * 1000
LONG_MAX = 2 ** 63 - 1


class TokenStoreError(CredentialStoreError):
    """The tokens file cannot be read: start-up is refused (security never fails open)."""


def split_principal(principal: str) -> tuple[str, str]:
    """"User:alice" -> ("User", "alice") (Kafka's KafkaPrincipal type and name)."""
    kind, _, name = principal.partition(":")
    return kind, name


def token_hmac(secret: str, token_id: str) -> bytes:
    """HMAC-SHA512(secret, token id), both UTF-8 (Kafka's DelegationTokenManager.createHmac)."""
    return hmac.new(secret.encode("utf-8"), token_id.encode("utf-8"), hashlib.sha512).digest()


def new_token_id() -> str:
    """Kafka's Uuid.randomUuid().toString(): 16 random bytes in URL-safe base64 without padding, never the
    zero or metadata-topic id, never starting with '-'."""
    while True:
        raw = uuid.uuid4().bytes
        text = base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")
        if raw not in (bytes(16), bytes(15) + b"\x01") and not text.startswith("-"):
            return text


def _sum(now: int, duration: int) -> int:
    return LONG_MAX if now > LONG_MAX - duration else now + duration


@dataclass(frozen=True)
class TokenInfo:
    """Kafka's TokenInformation; principals as "Type:name"."""
    token_id: str
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_ms: int
    max_ms: int
    expiry_ms: int

    def owner_or_renewer(self, principal: str) -> bool:
        return principal == self.owner or principal in self.renewers

    def expired(self, now_ms: int) -> bool:
        return self.max_ms < now_ms or self.expiry_ms < now_ms

    def to_json(self) -> dict:
        return {"owner": self.owner, "requester": self.requester, "renewers": list(self.renewers),
                "issue_ms": self.issue_ms, "max_ms": self.max_ms, "expiry_ms": self.expiry_ms}

    @classmethod
    def from_record(cls, rec: dict) -> "TokenInfo":
        """From a DelegationToken metadata record's fields (metadata/records.py)."""
        return cls(str(rec["tokenId"]), str(rec["owner"]), str(rec["requester"]), tuple(rec["renewers"]),
                   int(rec["issueTimestamp"]), int(rec["maxTimestamp"]), int(rec["expirationTimestamp"]))

    @classmethod
    def from_json(cls, token_id: str, doc: dict) -> "TokenInfo":
        return cls(token_id, str(doc["owner"]), str(doc["requester"]), tuple(str(r) for r in doc["renewers"]),
                   int(doc["issue_ms"]), int(doc["max_ms"]), int(doc["expiry_ms"]))


@dataclass(frozen=True)
class TokenSettings:
    """The broker's delegation.token.* keys."""
    secret: str | None
    max_lifetime_ms: int = DEFAULT_MAX_LIFETIME_MS
    expiry_time_ms: int = DEFAULT_EXPIRY_TIME_MS
    check_interval_ms: int = DEFAULT_EXPIRY_CHECK_INTERVAL_MS

    @property
    def enabled(self) -> bool:
        return bool(self.secret)

    @classmethod
    def from_config(cls, get: Callable[[str], str]) -> "TokenSettings":
        secret = get("delegation.token.secret.key") or None  # (Kafka 4 removed delegation.token.master.key)

        def ms(key: str, default: int) -> int:
            value = get(key).strip()
            return int(value) if value else default
        return cls(secret, ms("delegation.token.max.lifetime.ms", DEFAULT_MAX_LIFETIME_MS),
                   ms("delegation.token.expiry.time.ms", DEFAULT_EXPIRY_TIME_MS),
                   ms("delegation.token.expiry.check.interval.ms", DEFAULT_EXPIRY_CHECK_INTERVAL_MS))


# -- the controller's decisions (pure: a token map in, a result and the change out) -----------------

@dataclass
class Decision:
    """What a create / renew / expire decided: the error, the new expiry (renew, expire), the token
    to write (`upsert`) or the id to remove (`remove`); nothing to write on an error."""
    error: int = NONE
    expiry_ms: int = 0
    token: TokenInfo | None = None
    upsert: TokenInfo | None = None
    remove: str | None = None
    hmac: bytes = b""


def decide_create(settings: TokenSettings, owner: str, requester: str, renewers: Iterable[tuple[str, str]],
                  max_lifetime_ms: int, now_ms: int, token_id: str | None = None) -> Decision:
    """DelegationTokenControlManager.createDelegationToken."""
    if not settings.enabled:
        return Decision(AUTH_DISABLED)
    max_life = settings.max_lifetime_ms
    if max_lifetime_ms > 0:
        max_life = min(max_life, max_lifetime_ms)
    max_ms = _sum(now_ms, max_life)
    expiry_ms = min(max_ms, _sum(now_ms, settings.expiry_time_ms))
    names = []
    for kind, name in renewers:
        if kind != "User":
            return Decision(INVALID_PRINCIPAL_TYPE)
        names.append(f"{kind}:{name}")
    token_id = token_id or new_token_id()
    token = TokenInfo(token_id, owner, requester, tuple(names), now_ms, max_ms, expiry_ms)
    assert settings.secret is not None
    return Decision(NONE, expiry_ms, token, upsert=token, hmac=token_hmac(settings.secret, token_id))


def decide_renew(settings: TokenSettings, token: TokenInfo | None, principal: str, renew_period_ms: int,
                 now_ms: int) -> Decision:
    """DelegationTokenControlManager.renewDelegationToken (`token`: the one whose HMAC was given)."""
    if not settings.enabled:
        return Decision(AUTH_DISABLED)
    if token is None:
        return Decision(NOT_FOUND)
    if token.expired(now_ms):
        return Decision(EXPIRED)
    if not token.owner_or_renewer(principal):
        return Decision(OWNER_MISMATCH)
    renew = settings.expiry_time_ms
    if renew_period_ms > 0:
        renew = min(renew, renew_period_ms)
    expiry_ms = min(token.max_ms, now_ms + renew)
    return Decision(NONE, expiry_ms, token, upsert=replace(token, expiry_ms=expiry_ms))


def decide_expire(settings: TokenSettings, token: TokenInfo | None, principal: str, expiry_period_ms: int,
                  now_ms: int) -> Decision:
    """DelegationTokenControlManager.expireDelegationToken: a negative period removes the token now."""
    if not settings.enabled:
        return Decision(AUTH_DISABLED)
    if token is None:
        return Decision(NOT_FOUND)
    if not token.owner_or_renewer(principal):
        return Decision(OWNER_MISMATCH)
    if expiry_period_ms < 0:
        return Decision(NONE, now_ms, token, remove=token.token_id)
    if token.expired(now_ms):
        return Decision(EXPIRED)
    expiry_ms = min(token.max_ms, _sum(now_ms, expiry_period_ms))
    return Decision(NONE, expiry_ms, token, upsert=replace(token, expiry_ms=expiry_ms))


def describe_filter(requester: str, owners: list[str] | None, token: TokenInfo,
                    authorize_token: Callable[[str], bool], authorize_owner: Callable[[str], bool]) -> bool:
    """DelegationTokenManager.filterToken: the asked owners' tokens that the requester owns or renews,
    or may DESCRIBE (DELEGATION_TOKEN resource) or DESCRIBE_TOKENS (USER resource of the owner)."""
    if owners is not None and not any(token.owner_or_renewer(o) for o in owners):
        return False
    if token.owner_or_renewer(requester):
        return True
    return authorize_token(token.token_id) or authorize_owner(token.owner)


def now_ms() -> int:
    return int(time.time() * 1000)


# -- the token cache and its file ----------------------------------------------------------------------

@dataclass
class _Entry:
    info: TokenInfo
    hmac_b64: str = ""
    credentials: dict[str, ScramCredential] = field(default_factory=dict)


def _credentials(hmac_b64: str) -> dict[str, ScramCredential]:
    """Kafka's prepareScramCredentials: each SCRAM mechanism, the minimum iterations (PBKDF2: a thread)."""
    return {m: ScramCredential.from_password(m, hmac_b64, MIN_ITERATIONS) for m in MECHANISMS}


class DelegationTokenStore:
    """Token id -> token (+ its HMAC and SCRAM credentials). Reads are plain dict lookups on the event
    loop; `apply` (a worker thread) derives credentials, writes the file (when it has one) and swaps the
    map only after the write succeeded. `follow` (a cluster: the metadata image) replaces the map."""

    def __init__(self, directory: Path | None, settings: TokenSettings) -> None:
        self.path = Path(directory) / TOKENS_FILE if directory is not None else None
        self.settings = settings
        self._tokens: dict[str, _Entry] = {}
        self._by_hmac: dict[str, str] = {}
        self._write_lock = threading.Lock()

    def _entry(self, info: TokenInfo, old: _Entry | None = None) -> _Entry:
        if old is not None and old.hmac_b64:
            return _Entry(info, old.hmac_b64, old.credentials)
        if not self.settings.secret:
            return _Entry(info)
        b64 = base64.b64encode(token_hmac(self.settings.secret, info.token_id)).decode("ascii")
        return _Entry(info, b64, _credentials(b64))

    def _swap(self, tokens: dict[str, _Entry]) -> None:
        self._tokens = tokens
        self._by_hmac = {e.hmac_b64: tid for tid, e in tokens.items() if e.hmac_b64}

    def load(self) -> "DelegationTokenStore":
        if self.path is None:
            return self
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return self
        except OSError as exc:
            raise TokenStoreError(f"cannot read {self.path}: {exc}") from None
        try:
            doc = json.loads(data)
            if doc.get("version") != FORMAT_VERSION:
                raise ValueError(f"unknown format version {doc.get('version')!r}")
            infos = [TokenInfo.from_json(tid, t) for tid, t in doc["tokens"].items()]
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise TokenStoreError(f"{self.path}: malformed delegation tokens file: {exc}") from None
        self._swap({i.token_id: self._entry(i) for i in infos})
        return self

    # -- reads (event loop) --
    def get(self, token_id: str) -> TokenInfo | None:
        entry = self._tokens.get(token_id)
        return entry.info if entry is not None else None

    def by_hmac(self, hmac_bytes: bytes) -> TokenInfo | None:
        token_id = self._by_hmac.get(base64.b64encode(bytes(hmac_bytes)).decode("ascii"))
        return self.get(token_id) if token_id is not None else None

    def hmac_of(self, token_id: str) -> bytes:
        entry = self._tokens.get(token_id)
        return base64.b64decode(entry.hmac_b64) if entry is not None and entry.hmac_b64 else b""

    def tokens(self) -> list[TokenInfo]:
        return [e.info for e in self._tokens.values()]

    def scram_lookup(self, token_id: str, mechanism: str) -> tuple[ScramCredential, str, int] | None:
        """(credential, owner name, expiry ms) of a token login (ScramServerCallbackHandler's
        DelegationTokenCredentialCallback), None for an unknown token."""
        entry = self._tokens.get(token_id)
        if entry is None or mechanism not in entry.credentials:
            return None
        return entry.credentials[mechanism], split_principal(entry.info.owner)[1], entry.info.expiry_ms

    # -- writes (worker thread) --
    def apply(self, upserts: Iterable[TokenInfo] = (), removals: Iterable[str] = ()) -> None:
        with self._write_lock:
            new = dict(self._tokens)
            for token_id in removals:
                new.pop(token_id, None)
            for info in upserts:
                new[info.token_id] = self._entry(info, new.get(info.token_id))
            if self.path is not None:
                doc = {"version": FORMAT_VERSION, "tokens": {tid: e.info.to_json() for tid, e in sorted(new.items())}}
                self.path.parent.mkdir(parents=True, exist_ok=True)
                atomic_write(self.path, json.dumps(doc, indent=1, sort_keys=True).encode("utf-8"))
            self._swap(new)

    def follow(self, infos: Iterable[TokenInfo]) -> None:
        """A cluster: the tokens are now exactly `infos` (credentials of new tokens derived here)."""
        old = self._tokens
        self._swap({i.token_id: self._entry(i, old.get(i.token_id)) for i in infos})

    def expired(self, now: int) -> list[str]:
        return [tid for tid, e in self._tokens.items() if e.info.expired(now)]


async def expiry_loop(store: DelegationTokenStore) -> None:
    """Every delegation.token.expiry.check.interval.ms, remove the tokens past their expiry or max time
    (Kafka's sweepExpiredDelegationTokens); the write runs in a worker thread."""
    import asyncio
    import logging
    log = logging.getLogger(__name__)
    while True:
        await asyncio.sleep(max(1, store.settings.check_interval_ms) / 1000)
        gone = store.expired(now_ms())
        if not gone:
            continue
        try:
            await asyncio.to_thread(store.apply, (), gone)
            for token_id in gone:
                log.info("Delegation token expired for token: %s", token_id)
        except OSError as exc:
            log.error("removing expired delegation tokens failed: %s", exc)
