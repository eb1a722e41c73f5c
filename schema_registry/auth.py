"""HTTP Basic authentication of the registry's listener against the broker's SASL users
(`schema.registry.authentication.method`): the PLAIN users of the SASL listeners' JAAS configs and the SCRAM
credentials the broker stores (AlterUserScramCredentials, `storage format --add-scram`). A request's
principal is `User:<name>`, as a SASL client of the broker would be; `User:ANONYMOUS` when authentication is
off.

Pure: the broker's wiring injects the two lookups. A SCRAM credential holds no password, so a password is
checked the standard way: SaltedPassword = PBKDF2(password, salt, iterations), ClientKey = HMAC(SaltedPassword,
"Client Key"), StoredKey = H(ClientKey), compared in constant time with the stored one. The PBKDF2 (up to
16384 iterations) runs in a worker thread, at most DERIVATIONS at once, never on the event loop; a verified
(user, credential, password) is remembered as an HMAC under a per-process random key (at most MAX_VERIFIED
entries), so a client sending its credentials on every request pays the derivation once per credential.
An unknown user costs a derivation too, so timing does not tell which users exist.
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import secrets
from typing import Any, Callable, Iterable, Mapping

KEY = "schema.registry.authentication.method"
METHODS = ("NONE", "BASIC")
ANONYMOUS = "User:ANONYMOUS"
REALM = "SchemaRegistry"
CHALLENGE = f'Basic realm="{REALM}", charset="UTF-8"'  # the WWW-Authenticate header of a 401 (RFC 7617)
HASHES = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS, MAX_ITERATIONS = 4096, 16384  # Kafka's bounds: a credential outside them is not derived
DERIVATIONS = 2  # PBKDF2 runs in worker threads at once; more requests wait their turn
MAX_VERIFIED = 4096  # remembered verifications; past it the memory is cleared
_DUMMY_SALT = b"minikafka-schema-registry-unknown-user"

PlainLookup = Callable[[str], Iterable[str]]  # user -> the passwords of the PLAIN listeners' JAAS configs
ScramLookup = Callable[[str], Mapping[str, Any]]  # user -> mechanism -> credential (.salt .stored_key .iterations)


def resolve_method(value: str, sasl_listeners: bool) -> str:
    """NONE or BASIC; empty: BASIC when the broker has a SASL listener, else NONE. ValueError otherwise."""
    method = value.strip().upper()
    if not method:
        return "BASIC" if sasl_listeners else "NONE"
    if method not in METHODS:
        raise ValueError(f"{KEY} must be NONE or BASIC (empty: BASIC when a broker listener uses SASL), "
                         f"got {value!r}")
    return method


def parse_basic(header: str | None) -> tuple[str, str] | None:
    """(user, password) of an `Authorization: Basic <base64(user:password)>` value (RFC 7617, UTF-8); None if
    absent, of another scheme, or malformed (bad base64, no ':', empty user)."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(token.strip(), validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError):  # binascii.Error is a ValueError
        return None
    user, colon, password = decoded.partition(":")
    if not colon or not user:
        return None
    return user, password


def plain_matches(password: str, expected: Iterable[str]) -> bool:
    """Constant-time comparison with each configured password (every one compared)."""
    given = password.encode("utf-8")
    ok = False
    for candidate in expected:
        ok |= hmac.compare_digest(given, candidate.encode("utf-8"))
    return ok


def scram_matches(mechanism: str, password: str, salt: bytes, stored_key: bytes, iterations: int) -> bool:
    """Whether `password` derives the credential's StoredKey (RFC 5802); PBKDF2, so not on the event loop."""
    name = HASHES[mechanism]
    salted = hashlib.pbkdf2_hmac(name, password.encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", name).digest()
    return hmac.compare_digest(hashlib.new(name, client_key).digest(), stored_key)


class Authenticator:
    """`authenticate(header)` -> the principal, or None (answer 401)."""

    def __init__(self, plain: PlainLookup, scram: ScramLookup) -> None:
        self._plain = plain
        self._scram = scram
        self._key = secrets.token_bytes(32)
        self._verified: dict[tuple[str, str], tuple[Any, bytes]] = {}  # (user, mechanism) -> (credential, tag)
        self._derivations: asyncio.Semaphore | None = None

    async def authenticate(self, header: str | None) -> str | None:
        creds = parse_basic(header)
        if creds is None:
            return None
        user, password = creds
        if plain_matches(password, self._plain(user)):
            return f"User:{user}"
        usable = {m: c for m, c in self._scram(user).items()
                  if m in HASHES and MIN_ITERATIONS <= c.iterations <= MAX_ITERATIONS}
        if not usable:
            await self._derive(scram_matches, "SCRAM-SHA-256", password, _DUMMY_SALT, b"", MIN_ITERATIONS)
            return None
        tag = hmac.new(self._key, f"{user}\x00{password}".encode("utf-8"), "sha256").digest()
        for mechanism, cred in usable.items():
            seen = self._verified.get((user, mechanism))
            if seen is not None and seen[0] == cred and hmac.compare_digest(seen[1], tag):
                return f"User:{user}"
        for mechanism, cred in sorted(usable.items()):
            if await self._derive(scram_matches, mechanism, password, cred.salt, cred.stored_key, cred.iterations):
                if len(self._verified) >= MAX_VERIFIED:
                    self._verified.clear()
                self._verified[(user, mechanism)] = (cred, tag)
                return f"User:{user}"
        return None

    async def _derive(self, fn: Callable[..., bool], *args: Any) -> bool:
        if self._derivations is None:
            self._derivations = asyncio.Semaphore(DERIVATIONS)
        async with self._derivations:
            return await asyncio.to_thread(fn, *args)
