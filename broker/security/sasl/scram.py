"""SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's ScramSaslServer runs them.

The primitives are the standard library's (hashlib.pbkdf2_hmac is Hi(), hmac, hashlib); the message
grammar is Kafka's ScramMessages (regexes below), usernames are Kafka's saslname escaping (`=2C` for
',', `=3D` for '='; no SASLprep, as Kafka). The server never runs PBKDF2: a credential is stored as
salt + StoredKey + ServerKey + iterations (`ScramCredential`), and verifying a proof is two HMACs and
a hash. `ScramCredential.from_password` (PBKDF2, cost = iterations) is for the CLI and tests only.

Invariant: the exchange fails closed. Any parse error, unknown user, nonce mismatch, bad channel
binding or wrong proof raises `ScramError`, and `ScramServer` is then FAILED for good.
"""
from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Callable

# Kafka's ScramMechanism: (hash name, min iterations, max iterations); type ids of the admin API
MECHANISMS: dict[str, str] = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MECHANISM_TYPES: dict[str, int] = {"SCRAM-SHA-256": 1, "SCRAM-SHA-512": 2}
MECHANISM_BY_TYPE: dict[int, str] = {v: k for k, v in MECHANISM_TYPES.items()}
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
DEFAULT_ITERATIONS = 4096

_VALUE_SAFE = r"[\x01-\x2b\x2d-\x3c\x3e-\x7f]+"  # [\x01-\x7F] minus '=' and ','
_VALUE = r"[\x01-\x2b\x2d-\x7f]+"  # [\x01-\x7F] minus ','
_PRINTABLE = r"[\x21-\x2b\x2d-\x7e]+"  # [\x21-\x7E] minus ','
_SASLNAME = r"(?:[\x01-\x2b\x2d-\x3c\x3e-\x7f]|=2C|=3D)+"
_B64C = r"[a-zA-Z0-9/+]"
_BASE64 = rf"(?:{_B64C}{{4}})*(?:{_B64C}{{3}}=|{_B64C}{{2}}==)?"
_RESERVED = rf"(?:m={_VALUE},)?"
_EXTENSIONS = rf"(?:,[A-Za-z]+={_VALUE})*"
CLIENT_FIRST = re.compile(
    rf"n,(?:a=(?P<authzid>{_SASLNAME}))?,(?P<bare>{_RESERVED}n=(?P<saslname>{_SASLNAME}),"
    rf"r=(?P<nonce>{_PRINTABLE})(?P<extensions>{_EXTENSIONS}))")
CLIENT_FINAL = re.compile(
    rf"(?P<without_proof>c=(?P<channel>{_BASE64}),r=(?P<nonce>{_PRINTABLE}){_EXTENSIONS}),p=(?P<proof>{_BASE64})")


class ScramError(Exception):
    """The SCRAM exchange failed; `client_message` is what Kafka would tell the client (None: the
    generic 'invalid credentials' text, which leaks nothing, e.g. whether the user exists)."""

    def __init__(self, reason: str, client_message: str | None = None) -> None:
        super().__init__(reason)
        self.client_message = client_message


def _hash(mechanism: str) -> str:
    return MECHANISMS[mechanism]


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(Normalize(password), salt, i) = PBKDF2-HMAC; Kafka's Normalize is plain UTF-8."""
    return hashlib.pbkdf2_hmac(_hash(mechanism), password.encode("utf-8"), salt, iterations)


def client_key(mechanism: str, salted: bytes) -> bytes:
    return hmac.new(salted, b"Client Key", _hash(mechanism)).digest()


def stored_key(mechanism: str, key: bytes) -> bytes:
    return hashlib.new(_hash(mechanism), key).digest()


def server_key(mechanism: str, salted: bytes) -> bytes:
    return hmac.new(salted, b"Server Key", _hash(mechanism)).digest()


def username_from_saslname(saslname: str) -> str:
    """Kafka's ScramFormatter.username: '=2C' -> ',', '=3D' -> '='; any other '=' is invalid."""
    name = saslname.replace("=2C", ",")
    if "=" in name.replace("=3D", ""):
        raise ScramError(f"Invalid username: {saslname}")
    return name.replace("=3D", "=")


def saslname(username: str) -> str:
    return username.replace("=", "=3D").replace(",", "=2C")


@dataclass(frozen=True)
class ScramCredential:
    """What the broker keeps for one user and mechanism (Kafka's ScramCredential); never the password."""
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(cls, mechanism: str, salt: bytes, salted: bytes, iterations: int) -> "ScramCredential":
        """As Kafka's controller does for AlterUserScramCredentials upsertions (HMACs only)."""
        return cls(salt, stored_key(mechanism, client_key(mechanism, salted)), server_key(mechanism, salted),
                   iterations)

    @classmethod
    def from_password(cls, mechanism: str, password: str, iterations: int = DEFAULT_ITERATIONS,
                      salt: bytes | None = None) -> "ScramCredential":
        """PBKDF2 with `iterations` (CLI/bootstrap and tests; never on the event loop). The default
        salt is like Kafka's: the UTF-8 of a random 130-bit number in base 36."""
        if salt is None:
            salt = _random_string().encode("ascii")
        return cls.from_salted_password(mechanism, salt, salted_password(mechanism, password, salt, iterations),
                                        iterations)


def _random_string() -> str:
    """Kafka's ScramFormatter.secureRandomString: a random 130-bit number in base 36."""
    n = secrets.randbits(130)
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        n, r = divmod(n, 36)
        out = digits[r] + out
        if not n:
            return out


CredentialLookup = Callable[[str, str], "ScramCredential | None"]  # (username, mechanism) -> credential
# delegation tokens: (token id, mechanism) -> (credential, owner name, expiry ms), None for an unknown token
TokenLookup = Callable[[str, str], "tuple[ScramCredential, str, int] | None"]


def extensions_of(text: str) -> dict[str, str]:
    """The client-first message's extensions (",key=value" each), as Kafka's ScramExtensions."""
    return dict(part.split("=", 1) for part in text.split(",") if part)


class ScramServer:
    """One server side of a SCRAM exchange: client-first -> server-first, client-final -> server-final.

    `username` is set once `complete`; the principal is User:<authorization_id>: the username, or
    with the extension `tokenauth=true` (a delegation token login, username = token id) the token's
    owner (`token_authenticated`, `token_expiry_ms`)."""

    def __init__(self, mechanism: str, lookup: CredentialLookup, server_nonce: str | None = None,
                 token_lookup: TokenLookup | None = None) -> None:
        if mechanism not in MECHANISMS:
            raise ValueError(f"not a SCRAM mechanism: {mechanism}")
        self.mechanism = mechanism
        self._lookup = lookup
        self._token_lookup = token_lookup
        self.authorization_id: str | None = None
        self.token_authenticated = False
        self.token_expiry_ms: int | None = None
        self._server_nonce = server_nonce or _random_string()
        self._state = "client_first"
        self._credential: ScramCredential | None = None
        self._client_first_bare = ""
        self._gs2_header = ""
        self._server_first = ""
        self._nonce = ""
        self.username: str | None = None
        self.complete = False

    def evaluate(self, token: bytes) -> bytes:
        """The server's next message for the client's `token`; ScramError when authentication fails."""
        try:
            if self._state == "client_first":
                return self._client_first(token)
            if self._state == "client_final":
                return self._client_final(token)
            raise ScramError(f"Unexpected challenge in Sasl server state {self._state}")
        except ScramError:
            self._state, self._credential, self.complete = "failed", None, False
            raise
        except Exception as exc:  # anything unexpected on untrusted input also fails closed
            self._state, self._credential, self.complete = "failed", None, False
            raise ScramError(f"SCRAM exchange failed: {exc!r}") from None

    def _client_first(self, token: bytes) -> bytes:
        message = token.decode("utf-8")
        m = CLIENT_FIRST.fullmatch(message)
        if m is None:
            raise ScramError(f"Invalid SCRAM client first message format: {message}")
        username = username_from_saslname(m.group("saslname"))
        if extensions_of(m.group("extensions")).get("tokenauth", "").lower() == "true":
            found = self._token_lookup(username, self.mechanism) if self._token_lookup is not None else None
            if found is None:
                raise ScramError(f"Token Authentication failed: Invalid tokenId : {username}")
            credential, self.authorization_id, self.token_expiry_ms = found
            self.token_authenticated = True
        else:
            credential = self._lookup(username, self.mechanism)
            self.authorization_id = username
        if credential is None:
            raise ScramError("Authentication failed: Invalid user credentials")
        authzid = m.group("authzid") or ""
        if authzid and authzid != username:
            raise ScramError("Authentication failed: Client requested an authorization id that is different from username",
                             client_message="Authentication failed: Client requested an authorization id that is "
                                            "different from username")
        if credential.iterations < MIN_ITERATIONS:
            raise ScramError(f"Iterations {credential.iterations} is less than the minimum {MIN_ITERATIONS} "
                             f"for {self.mechanism}")
        self._credential = credential
        self.username = username
        self._client_first_bare = m.group("bare")
        self._gs2_header = message[:len(message) - len(self._client_first_bare)]
        self._nonce = m.group("nonce") + self._server_nonce
        salt = base64.b64encode(credential.salt).decode("ascii")
        self._server_first = f"r={self._nonce},s={salt},i={credential.iterations}"
        self._state = "client_final"
        return self._server_first.encode("ascii")

    def _client_final(self, token: bytes) -> bytes:
        message = token.decode("utf-8")
        m = CLIENT_FINAL.fullmatch(message)
        if m is None:
            raise ScramError(f"Invalid SCRAM client final message format: {message}")
        if m.group("nonce") != self._nonce:
            raise ScramError("Invalid client nonce in the final client message.")
        if base64.b64decode(m.group("channel")) != self._gs2_header.encode("utf-8"):
            raise ScramError("Invalid channel binding in the final client message.")
        credential = self._credential
        assert credential is not None
        h = _hash(self.mechanism)
        auth_message = f"{self._client_first_bare},{self._server_first},{m.group('without_proof')}".encode("utf-8")
        client_signature = hmac.new(credential.stored_key, auth_message, h).digest()
        proof = base64.b64decode(m.group("proof"))
        if len(proof) != len(client_signature):
            raise ScramError("Invalid client credentials")
        computed = hashlib.new(h, bytes(a ^ b for a, b in zip(client_signature, proof))).digest()
        if not hmac.compare_digest(computed, credential.stored_key):
            raise ScramError("Invalid client credentials")
        server_signature = hmac.new(credential.server_key, auth_message, h).digest()
        self._credential = None
        self._state = "complete"
        self.complete = True
        return b"v=" + base64.b64encode(server_signature)


class ScramClient:
    """The client side (tests, and checking our server against RFC vectors): not used by the broker."""

    def __init__(self, mechanism: str, username: str, password: str, client_nonce: str | None = None) -> None:
        self.mechanism, self.username, self.password = mechanism, username, password
        self.nonce = client_nonce or _random_string()
        self._bare = f"n={saslname(username)},r={self.nonce}"
        self._server_signature = b""

    def first(self) -> bytes:
        return ("n,," + self._bare).encode()

    def final(self, server_first: bytes) -> bytes:
        parts = dict(p.split("=", 1) for p in server_first.decode().split(","))
        salt, iterations = base64.b64decode(parts["s"]), int(parts["i"])
        salted = salted_password(self.mechanism, self.password, salt, iterations)
        without_proof = f"c=biws,r={parts['r']}"
        auth_message = f"{self._bare},{server_first.decode()},{without_proof}".encode()
        h = _hash(self.mechanism)
        ck = client_key(self.mechanism, salted)
        signature = hmac.new(stored_key(self.mechanism, ck), auth_message, h).digest()
        proof = bytes(a ^ b for a, b in zip(ck, signature))
        self._server_signature = hmac.new(server_key(self.mechanism, salted), auth_message, h).digest()
        return f"{without_proof},p={base64.b64encode(proof).decode()}".encode()

    def verify(self, server_final: bytes) -> bool:
        return hmac.compare_digest(server_final, b"v=" + base64.b64encode(self._server_signature))
