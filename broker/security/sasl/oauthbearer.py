"""SASL/OAUTHBEARER (RFC 7628, KIP-255, KIP-768) as Kafka's OAuthBearerSaslServer and its validators.

The client's first message is the GS2 header and key/value pairs `n,[a=<authzid>],\\x01auth=Bearer
<token>\\x01[<ext>=<value>\\x01]*\\x01` (OAuthBearerClientInitialResponse). The token is checked by
the listener's validator:

- `UnsecuredValidator` (Kafka's OAuthBearerUnsecuredValidatorCallbackHandler, the default): an
  unsigned JWS (`alg` "none", empty signature) whose `sub` claim (JAAS option
  `unsecuredValidatorPrincipalClaimName`) is the principal, `exp` required and `iat` optional, both
  checked with `unsecuredValidatorAllowableClockSkewMs`, and `unsecuredValidatorRequiredScope`.
  This is what librdkafka's `sasl.oauthbearer.config=principal=<name>` and Kafka's unsecured login
  module send. For development only: anyone may claim any principal.
- `JwksValidator` (Kafka's OAuthBearerValidatorCallbackHandler with BrokerJwtValidator, KIP-768):
  a signed JWT verified with the keys of `sasl.oauthbearer.jwks.endpoint.url` (https/http, or a
  file: URL), `exp` and `iat` required, `sasl.oauthbearer.expected.audience` / `.expected.issuer`
  when set, `sasl.oauthbearer.clock.skew.seconds` of leeway, the principal in
  `sasl.oauthbearer.sub.claim.name`. Signatures by joserfc. The key set is fetched off the event loop
  (a thread), cached, refreshed every `sasl.oauthbearer.jwks.endpoint.refresh.ms` and, for a key id
  it does not hold, at most once per `sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms`.

A rejected token is answered, as Kafka does, with a successful SaslAuthenticate carrying the JSON
error `{"status":"invalid_token"}` (or `insufficient_scope` with the required scope); the client
then sends `\\x01` and gets SASL_AUTHENTICATION_FAILED with that JSON as the message. A malformed
first message fails at once with Kafka's generic "invalid credentials" message (`OAuthSaslError`).
The session lifetime (KIP-368) is bounded by the token's `exp` (`credential_expiration_ms`).
"""
from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import re
import time
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

log = logging.getLogger(__name__)

MECHANISM = "OAUTHBEARER"
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
VALIDATOR_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"
UNSECURED_VALIDATOR_HANDLER = ("org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                               "OAuthBearerUnsecuredValidatorCallbackHandler")
SIGNED_ALGORITHMS = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
MAX_JWKS_BYTES = 1 << 20
JWKS_FETCH_TIMEOUT_S = 10.0

_SEP = "\x01"
_SASLNAME_PY = r"(?:[\x01-\x2B\x2D-\x3C\x3E-\x7F]|=2C|=3D)+"  # Kafka's [\x01-\x7F&&[^=,]] or =2C, =3D
_KEY = r"[A-Za-z]+"
_VALUE = r"[\x21-\x7E \t\r\n]+"
_KVPAIRS = f"(?:{_KEY}={_VALUE}{_SEP})*"
_INITIAL_RESPONSE = re.compile(f"n,(?:a=(?P<authzid>{_SASLNAME_PY}))?,{_SEP}(?P<kvpairs>{_KVPAIRS}){_SEP}",
                               re.DOTALL)
_AUTH = re.compile(r"(?P<scheme>\w+) +(?P<token>[-_~+/.a-zA-Z0-9]+=*)")


class OAuthSaslError(Exception):
    """Kafka's SaslException: the client gets the generic "invalid credentials" message. `unanswered`:
    Kafka fails otherwise (the connection closes without an answer)."""

    def __init__(self, message: str, unanswered: bool = False) -> None:
        super().__init__(message)
        self.unanswered = unanswered


class OAuthAuthError(Exception):
    """Kafka's SaslAuthenticationException: the message goes to the client."""


class TokenError(Exception):
    """The token is refused: `status` (invalid_token / insufficient_scope) and `scope` for the JSON error;
    the message is logged only, as Kafka logs it."""

    def __init__(self, message: str, status: str = "invalid_token", scope: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.scope = scope


@dataclass(frozen=True)
class Token:
    principal: str
    lifetime_ms: int  # the absolute expiry (epoch ms), Kafka's OAuthBearerToken.lifetimeMs
    scope: frozenset[str] = frozenset()
    claims: Mapping[str, Any] = field(default_factory=dict)


def parse_initial_response(data: bytes) -> tuple[str, str, dict[str, str]]:
    """(token, authzid, extensions) of the client's first message; OAuthSaslError as Kafka's
    OAuthBearerClientInitialResponse refuses it."""
    text = data.decode("utf-8", "replace")
    m = _INITIAL_RESPONSE.fullmatch(text)
    if m is None:
        raise OAuthSaslError("Invalid OAUTHBEARER client first message")
    props: dict[str, str] = {}
    for pair in m.group("kvpairs").split(_SEP):
        if pair:
            key, _, value = pair.partition("=")
            props[key] = value
    auth = props.pop("auth", None)
    if auth is None:
        raise OAuthSaslError("Invalid OAUTHBEARER client first message: 'auth' not specified")
    am = _AUTH.fullmatch(auth)
    if am is None:
        raise OAuthSaslError("Invalid OAUTHBEARER client first message: invalid 'auth' format")
    if am.group("scheme").lower() != "bearer":
        # Kafka's message would name the scheme, but building it throws (IllegalArgumentException: no group
        # "scheme" in the outer matcher), so Kafka 4.3 closes the connection unanswered; so does minikafka
        raise OAuthSaslError(f"Invalid scheme in OAUTHBEARER client first message: {am.group('scheme')}",
                             unanswered=True)
    return am.group("token"), m.group("authzid") or "", props


def json_error(status: str, scope: str | None = None) -> str:
    """Kafka's jsonErrorResponse (its exact spacing)."""
    out = f'{{"status":"{status}"'
    if scope is not None:
        out += f', "scope":"{scope}"'
    return out + "}"


def _b64url_json(part: str) -> dict[str, Any]:
    try:
        raw = base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise TokenError("malformed Base64 URL encoded value or JSON") from None
    if not isinstance(value, dict):
        raise TokenError("malformed JSON")
    return value


def _number(claims: Mapping[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TokenError(f"The '{name}' claim was not of type Number")
    return float(value)


def _java_list(items: list[str]) -> str:
    return "[" + ", ".join(items) + "]"


# -- the unsecured validator ------------------------------------------------------------------------
@dataclass(frozen=True)
class UnsecuredValidator:
    """Kafka's OAuthBearerUnsecuredValidatorCallbackHandler with its JAAS options."""
    principal_claim: str = "sub"
    scope_claim: str = "scope"
    required_scope: tuple[str, ...] = ()
    clock_skew_ms: int = 0

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> "UnsecuredValidator":
        def opt(name: str) -> str:
            return (options.get("unsecuredValidator" + name) or "").strip()
        skew_text = opt("AllowableClockSkewMs")
        try:
            skew = int(skew_text) if skew_text else 0
        except ValueError:
            raise ValueError(f"unsecuredValidatorAllowableClockSkewMs must be an integer: {skew_text}") from None
        if skew < 0:
            raise ValueError(f"Allowable clock skew millis must not be negative: {skew_text}")
        return cls(opt("PrincipalClaimName") or "sub", opt("ScopeClaimName") or "scope",
                   tuple(opt("RequiredScope").split()), skew)

    def validate(self, token: str, now_ms: int) -> Token:
        if ".." in token:
            raise TokenError("Malformed compact serialization contains '..'")
        parts = token.split(".")
        if len(parts) != 3:
            raise TokenError("Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded values")
        header, claims = _b64url_json(parts[0]), _b64url_json(parts[1])
        if "alg" not in header or header["alg"] is None:
            raise TokenError("JWS header must have an Algorithm value")
        if str(header["alg"]) != "none":
            raise TokenError("Unsecured JWS must have 'none' for an algorithm")
        if parts[2]:
            raise TokenError("Unsecured JWS must not contain a digital signature")
        raw_scope = claims.get(self.scope_claim)
        if isinstance(raw_scope, str):
            scope = frozenset([raw_scope.strip()]) if raw_scope.strip() else frozenset()
        elif isinstance(raw_scope, list):
            scope = frozenset(str(s) for s in raw_scope)
        else:
            scope = frozenset()
        exp = _number(claims, "exp")
        if exp is None:
            raise TokenError("No expiration time in JWT")
        principal = claims.get(self.principal_claim)
        if principal is not None and not isinstance(principal, str):
            raise TokenError(f"The '{self.principal_claim}' claim was not of type String")
        if not principal or not principal.strip():
            raise TokenError(f"No principal name in JWT claim: {self.principal_claim}")
        iat = _number(claims, "iat")
        if iat is not None and 1000 * iat > now_ms + self.clock_skew_ms:
            raise TokenError(f"The Issued At value ({iat} seconds) was after the indicated time ({now_ms} ms) plus "
                             f"allowable clock skew ({self.clock_skew_ms} ms)")
        if now_ms - self.clock_skew_ms >= 1000 * exp:
            raise TokenError(f"The indicated time ({now_ms} ms) minus allowable clock skew ({self.clock_skew_ms} ms) "
                             f"was on or after the Expiration Time value ({exp} seconds)")
        if iat is not None and exp <= iat:
            raise TokenError(f"The Expiration Time time ({exp} seconds) was not after the Issued At time ({iat} seconds)")
        for element in self.required_scope:
            if element not in scope:
                raise TokenError(f"The provided scope was missing a required scope ({element})",
                                 "insufficient_scope", _java_list(list(self.required_scope)))
        return Token(principal, round(exp * 1000), scope, claims)


# -- the JWKS key source ------------------------------------------------------------------------------
class JwksSource:
    """The key set of a JWKS URL (https/http, fetched in a thread) or file: URL (re-read when it changes)."""

    def __init__(self, url: str, refresh_ms: int, missing_kid_backoff_ms: int,
                 wall: Callable[[], float] = time.time) -> None:
        self.url = url
        parsed = urllib.parse.urlparse(url)
        self.is_file = parsed.scheme == "file"
        self.path = urllib.request.url2pathname(parsed.path) if self.is_file else ""
        self.refresh_s = max(refresh_ms, 0) / 1000.0
        self.missing_kid_backoff_s = max(missing_kid_backoff_ms, 0) / 1000.0
        self._wall = wall
        self.keys: Any = None  # joserfc KeySet
        self.kids: frozenset[str] = frozenset()
        self.fetched_at = 0.0
        self._file_mtime: int | None = None
        self._failed_at: float | None = None
        self._lock: asyncio.Lock | None = None
        self.fetches = 0

    def _load(self) -> tuple[Any, frozenset[str], float | None]:
        """Blocking: read and parse the key set (called in a thread)."""
        from joserfc.jwk import KeySet
        mtime = None
        if self.is_file:
            st = os.stat(self.path)
            mtime = st.st_mtime_ns
            with open(self.path, "rb") as f:
                body = f.read(MAX_JWKS_BYTES + 1)
        else:
            req = urllib.request.Request(self.url, headers={"Accept": "application/json"})
            with urllib.request.urlopen(req, timeout=JWKS_FETCH_TIMEOUT_S) as resp:  # noqa: S310 (http/https only)
                body = resp.read(MAX_JWKS_BYTES + 1)
        if len(body) > MAX_JWKS_BYTES:
            raise ValueError(f"JWKS at {self.url} is larger than {MAX_JWKS_BYTES} bytes")
        data = json.loads(body)
        keys = [k for k in data.get("keys", []) if isinstance(k, dict) and k.get("use", "sig") == "sig"]
        key_set = KeySet.import_key_set({"keys": keys})
        return key_set, frozenset(str(k["kid"]) for k in keys if "kid" in k), mtime

    def _file_changed(self) -> bool:
        try:
            return os.stat(self.path).st_mtime_ns != self._file_mtime
        except OSError:
            return False

    def _due(self, kid: str | None) -> bool:
        if self._failed_at is not None and self._wall() - self._failed_at < self.missing_kid_backoff_s:
            return False  # a failed fetch is retried after the back-off, not by every connection
        if self.keys is None:
            return True
        age = self._wall() - self.fetched_at
        if self.is_file and self._file_changed() or not self.is_file and age >= self.refresh_s:
            return True
        return kid is not None and kid not in self.kids and age >= self.missing_kid_backoff_s

    async def ensure(self, kid: str | None) -> None:
        """Make `keys` current for a token with key id `kid`, fetching off the event loop when due
        (one fetch at a time; connections waiting meanwhile use its result)."""
        if not self._due(kid):
            return
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if not self._due(kid):
                return
            try:
                keys, kids, mtime = await asyncio.to_thread(self._load)
            except Exception as exc:  # noqa: BLE001 - keep the old keys, as Kafka's RefreshingHttpsJwks
                self._failed_at = self._wall()
                log.warning("OAuth JWKS refresh of %s encountered an error; not updating local JWKS cache: %s",
                            self.url, exc)
                return
            self.keys, self.kids, self._file_mtime = keys, kids, mtime
            self.fetched_at = self._wall()
            self._failed_at = None
            self.fetches += 1
            log.info("OAuth JWKS refresh of %s complete (%d keys)", self.url, len(kids))


# -- the secured (KIP-768) validator -------------------------------------------------------------
@dataclass
class JwksValidator:
    """Kafka's BrokerJwtValidator: signature by the JWKS, exp/iat required, audience, issuer, skew."""
    source: JwksSource
    expected_audience: tuple[str, ...] = ()
    expected_issuer: str = ""
    clock_skew_s: int = 30
    sub_claim: str = "sub"
    scope_claim: str = "scope"

    @staticmethod
    def token_kid(token: str) -> str | None:
        try:
            kid = _b64url_json(token.split(".", 1)[0]).get("kid")
        except TokenError:
            return None
        return kid if isinstance(kid, str) else None

    async def prepare(self, token: str) -> None:
        await self.source.ensure(self.token_kid(token))

    def validate(self, token: str, now_ms: int) -> Token:
        from joserfc import jwt
        from joserfc.errors import JoseError
        keys = self.source.keys
        if keys is None:
            raise TokenError(f"no keys from {self.source.url}")
        try:
            decoded = jwt.decode(token, keys, algorithms=list(SIGNED_ALGORITHMS))
        except (JoseError, ValueError, TypeError, KeyError) as exc:
            raise TokenError(f"Could not validate the access token: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - anything else the library meets in a hostile token: refused
            raise TokenError(f"Could not validate the access token: {type(exc).__name__}") from None
        claims = decoded.claims
        now = now_ms / 1000.0
        skew = self.clock_skew_s
        exp = _number(claims, "exp")
        if exp is None:
            raise TokenError("Could not validate the access token: No Expiration Time (exp) claim present.")
        if _number(claims, "iat") is None:
            raise TokenError("Could not validate the access token: No Issued At (iat) claim present.")
        if now - skew >= exp:
            raise TokenError(f"Could not validate the access token: The JWT is no longer valid - the evaluation time "
                             f"{now} is on or after the Expiration Time (exp={exp}) claim value")
        nbf = _number(claims, "nbf")
        if nbf is not None and now + skew < nbf:
            raise TokenError(f"Could not validate the access token: The JWT is not yet valid (nbf={nbf})")
        if self.expected_issuer and claims.get("iss") != self.expected_issuer:
            raise TokenError(f"Could not validate the access token: Issuer (iss) claim value ({claims.get('iss')}) "
                             f"doesn't match expected value of {self.expected_issuer}")
        if self.expected_audience:
            aud = claims.get("aud")
            auds = [aud] if isinstance(aud, str) else aud if isinstance(aud, list) else []
            if not any(a in self.expected_audience for a in auds):
                raise TokenError(f"Could not validate the access token: Audience (aud) claim {auds} doesn't contain "
                                 f"an acceptable identifier. Expected one of {list(self.expected_audience)}")
        principal = claims.get(self.sub_claim)
        if not isinstance(principal, str) or not principal.strip():
            raise TokenError(f"Could not extract the '{self.sub_claim}' claim from the access token")
        raw_scope = claims.get(self.scope_claim)
        if isinstance(raw_scope, str):
            scope = frozenset(raw_scope.split())
        elif isinstance(raw_scope, list):
            scope = frozenset(str(s) for s in raw_scope)
        else:
            scope = frozenset()
        return Token(principal.strip(), round(exp * 1000), scope, claims)


Validator = UnsecuredValidator | JwksValidator


# -- the SASL server ------------------------------------------------------------------------------
class OAuthBearerServer:
    """Kafka's OAuthBearerSaslServer for one exchange."""
    mechanism = MECHANISM

    def __init__(self, validator: Validator, wall: Callable[[], float] = time.time) -> None:
        self._validator = validator
        self._wall = wall
        self.username: str | None = None
        self.credential_expiration_ms: int | None = None
        self.extensions: dict[str, str] = {}
        self.complete = False
        self._error: str | None = None

    async def prepare(self, data: bytes) -> None:
        """Before `evaluate`, on the event loop: let a JWKS validator fetch its keys (in a thread)."""
        if isinstance(self._validator, JwksValidator) and not (data == b"\x01" and self._error is not None):
            try:
                token = parse_initial_response(data)[0]
            except OAuthSaslError:
                return
            await self._validator.prepare(token)

    def evaluate(self, data: bytes) -> bytes:
        if data == b"\x01" and self._error is not None:
            raise OAuthAuthError(self._error)
        self._error = None
        token_value, authzid, extensions = parse_initial_response(data)
        try:
            try:
                token = self._validator.validate(token_value, int(self._wall() * 1000))
            except (ValueError, TypeError, OverflowError, RecursionError) as exc:  # hostile claim values: refused
                raise TokenError(f"malformed token: {type(exc).__name__}") from None
        except TokenError as exc:
            self._error = json_error(exc.status, exc.scope)
            log.debug("OAUTHBEARER token refused (%s): %s", self._error, exc)
            return self._error.encode("utf-8")
        if authzid and authzid != token.principal:
            raise OAuthAuthError(f"Authentication failed: Client requested an authorization id ({authzid}) that is "
                                 f"different from the token's principal name ({token.principal})")
        self.extensions = extensions  # both of Kafka's validators accept every extension
        self.username = token.principal
        self.credential_expiration_ms = token.lifetime_ms
        self.complete = True
        return b""
