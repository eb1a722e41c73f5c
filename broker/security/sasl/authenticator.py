"""Per-connection SASL state machine, as Kafka's SaslServerAuthenticator (KIP-43, KIP-152, KIP-368).

States: HANDSHAKE_OR_VERSIONS (one ApiVersions may come first) -> HANDSHAKE -> AUTHENTICATE ->
COMPLETE; FAILED is terminal. Before COMPLETE only ApiVersions, SaslHandshake and SaslAuthenticate
in their state are processed: anything else fails authentication and closes the connection, unanswered
and never decoded (`check_request`). SaslHandshake v0 switches to raw tokens: the client's frames are
bare SASL tokens and the answers bare size-prefixed tokens (`raw_token`).

Re-authentication (KIP-368): when `connections.max.reauth.ms` > 0 a completed authentication gets a
session lifetime (SaslAuthenticate v1+ `session_lifetime_ms`); a SaslHandshake on the authenticated
connection (at most one per second) starts a new exchange, which must keep the mechanism and the
principal; a request after the session expired closes the connection instead of being processed.

Invariant (fail closed): `principal` is set only by a completed exchange, and `authenticated` is
true only in COMPLETE; every failure raises `SaslFailure`, after which the connection answers (if
Kafka answers) after `connection.failed.authentication.delay.ms` and closes.
"""
from __future__ import annotations

import logging
import time
from typing import Any, Callable

import kafka.errors as ke

from minikafka.broker.security.sasl.errors import SaslFailure, SessionExpired
from minikafka.broker.security.sasl.oauthbearer import OAuthAuthError, OAuthBearerServer, OAuthSaslError
from minikafka.broker.security.sasl.plain import PlainError, PlainServer
from minikafka.broker.security.sasl.scram import (MECHANISMS as SCRAM_MECHANISMS, CredentialLookup, ScramError,
                                                  ScramServer, TokenLookup)
from minikafka.broker.security.sasl.settings import ListenerSasl

log = logging.getLogger(__name__)

API_VERSIONS, SASL_HANDSHAKE, SASL_AUTHENTICATE = 18, 17, 36
HANDSHAKE_OR_VERSIONS, HANDSHAKE, AUTHENTICATE, REAUTH_BAD_MECHANISM, COMPLETE, FAILED = (
    "HANDSHAKE_OR_VERSIONS", "HANDSHAKE", "AUTHENTICATE", "REAUTH_BAD_MECHANISM", "COMPLETE", "FAILED")
MIN_REAUTH_INTERVAL_S = 1.0
_API_NAMES = {0: "PRODUCE", 1: "FETCH", 3: "METADATA", 17: "SASL_HANDSHAKE", 18: "API_VERSIONS",
              36: "SASL_AUTHENTICATE"}


def _api_name(key: int) -> str:
    return _API_NAMES.get(key, str(key))


class SaslAuthenticator:
    """The SASL side of one connection on a SASL listener (transport-independent)."""

    def __init__(self, settings: ListenerSasl, scram_lookup: CredentialLookup,
                 clock: Callable[[], float] = time.monotonic, token_lookup: TokenLookup | None = None) -> None:
        self.settings = settings
        self._lookup = scram_lookup
        self._token_lookup = token_lookup  # delegation tokens (SCRAM extension tokenauth=true)
        self.token_authenticated = False  # the principal logged in with a delegation token
        self._clock = clock
        self.state = HANDSHAKE_OR_VERSIONS
        self.raw_tokens = False  # after SaslHandshake v0: bare tokens, no Kafka headers
        self.mechanism: str | None = None
        self.principal: str | None = None
        self.session_expires_at: float | None = None  # clock() time; None: no expiry
        self._server: PlainServer | ScramServer | None = None
        self._reauth_from: tuple[str, str] | None = None  # (mechanism, principal) being re-authenticated
        self._bad_mechanism_message = ""
        self._last_reauth_start: float | None = None

    # -- state queries --------------------------------------------------------------------------
    @property
    def authenticated(self) -> bool:
        return self.state == COMPLETE

    @property
    def reauthenticating(self) -> bool:
        return self._reauth_from is not None

    @property
    def failure_delay_s(self) -> float:
        return self.settings.failed_auth_delay_ms / 1000.0

    def _fail(self, reason: str, response: Any = None, delayed: bool = True) -> SaslFailure:
        self.state = FAILED
        self._server = None
        return SaslFailure(reason, response, delayed)

    # -- the gate before any request is decoded ---------------------------------------------------
    def check_request(self, api_key: int) -> None:
        """Raise unless a request of `api_key` may be processed now (it is then handled normally:
        ApiVersions, SaslHandshake, SaslAuthenticate by their handlers, which call back here)."""
        state = self.state
        if state == COMPLETE:
            now = self._clock()
            if api_key == SASL_HANDSHAKE and self._may_begin_reauth(now):
                self._last_reauth_start = now
                assert self.mechanism is not None and self.principal is not None
                self._reauth_from = (self.mechanism, self.principal)
                self.state = HANDSHAKE
                return
            if self.session_expires_at is not None and now > self.session_expires_at:
                raise SessionExpired("SASL session expired (connections.max.reauth.ms); closing the connection")
            return
        if state == HANDSHAKE_OR_VERSIONS and api_key in (API_VERSIONS, SASL_HANDSHAKE):
            return
        if state == HANDSHAKE and api_key == SASL_HANDSHAKE:
            return
        if state == AUTHENTICATE and api_key == SASL_AUTHENTICATE:
            return
        if state == REAUTH_BAD_MECHANISM:
            raise self._fail(self._bad_mechanism_message)
        if state == HANDSHAKE and api_key == API_VERSIONS:
            raise self._fail(f"Unexpected ApiVersions request received during SASL authentication state {state}",
                             delayed=False)
        if state == FAILED:
            raise SaslFailure("request after a failed authentication", delayed=False)
        if state == AUTHENTICATE:  # Kafka answers with the request's error response (ILLEGAL_SASL_STATE); we do not
            raise self._fail(f"Unexpected Kafka request of type {_api_name(api_key)} during SASL authentication.")
        # before the handshake Kafka 4.3 closes at once (measured: no failure delay)
        raise self._fail(f"Unexpected Kafka request of type {_api_name(api_key)} during SASL handshake.", delayed=False)

    def _may_begin_reauth(self, now: float) -> bool:
        if self.session_expires_at is None:
            return False  # re-authentication disabled: the handshake gets ILLEGAL_SASL_STATE
        return self._last_reauth_start is None or now - self._last_reauth_start >= MIN_REAUTH_INTERVAL_S

    def api_versions_answered(self, ok: bool) -> None:
        """An ApiVersions request was answered (before authentication): only one may come first."""
        if ok and self.state == HANDSHAKE_OR_VERSIONS:
            self.state = HANDSHAKE

    # -- SaslHandshake ------------------------------------------------------------------------------
    def handshake(self, mechanism: str, version: int) -> None:
        """Select `mechanism`; SaslFailure (UNSUPPORTED_SASL_MECHANISM) if it is not enabled here.
        The caller answers with error NONE and `settings.mechanisms` on return."""
        if mechanism not in self.settings.mechanisms:
            from kafka.protocol.sasl import SaslHandshakeResponse
            raise self._fail(f"Unsupported SASL mechanism {mechanism}",
                             SaslHandshakeResponse(error_code=ke.UnsupportedSaslMechanismError.errno,
                                                   mechanisms=self.settings.handshake_mechanisms))
        self.raw_tokens = version == 0
        if self._reauth_from is not None and mechanism != self._reauth_from[0]:
            self._bad_mechanism_message = (f"SASL mechanism '{mechanism}' requested by client is not supported for "
                                           f"re-authentication of mechanism '{self._reauth_from[0]}'")
            self.state = REAUTH_BAD_MECHANISM
            return
        self.mechanism = mechanism
        if mechanism == "PLAIN":
            self._server = PlainServer(self.settings.plain_users)
        elif mechanism == "OAUTHBEARER":
            self._server = OAuthBearerServer(self.settings.oauth)
        elif mechanism in SCRAM_MECHANISMS:
            self._server = ScramServer(mechanism, self._lookup, token_lookup=self._token_lookup)
        else:  # pragma: no cover - settings refuse other mechanisms at start-up
            raise self._fail(f"no server for mechanism {mechanism}", delayed=False)
        self.state = AUTHENTICATE

    # -- tokens -------------------------------------------------------------------------------------
    def _failure_text(self) -> str:
        return "re-authentication" if self.reauthenticating else "authentication"

    async def prepare(self, token: bytes) -> None:
        """Before `evaluate`, on the event loop: what a mechanism must fetch first (OAUTHBEARER's JWKS keys,
        fetched in a thread)."""
        if isinstance(self._server, OAuthBearerServer) and self.state == AUTHENTICATE:
            await self._server.prepare(token)

    def evaluate(self, token: bytes) -> tuple[bytes, int]:
        """The server's answer to a client token and, once complete, the session lifetime in ms
        (0: none); SaslFailure with Kafka's client message (`str(exc)`) when authentication fails."""
        if self.state == REAUTH_BAD_MECHANISM:
            raise self._fail(self._bad_mechanism_message)
        server = self._server
        if self.state != AUTHENTICATE or server is None:
            raise self._fail(f"SASL token in state {self.state}", delayed=False)
        try:
            answer = server.evaluate(token)
        except (PlainError, OAuthAuthError) as exc:
            raise self._fail(str(exc)) from None
        except OAuthSaslError as exc:  # Kafka's SaslException: its text stays in the broker's log
            log.debug("OAUTHBEARER authentication failed: %s", exc)
            if exc.unanswered:
                raise self._fail(str(exc), delayed=False) from None
            raise self._fail(f"Authentication failed during {self._failure_text()} due to invalid credentials with "
                             f"SASL mechanism {self.mechanism}") from None
        except ScramError as exc:
            log.debug("SCRAM authentication failed: %s", exc)
            message = exc.client_message or (f"Authentication failed during {self._failure_text()} due to invalid "
                                             f"credentials with SASL mechanism {self.mechanism}")
            raise self._fail(message) from None
        if not server.complete:
            return answer, 0
        token_expiry_ms = None
        if isinstance(server, ScramServer):
            principal = f"User:{server.authorization_id}"
            token_expiry_ms = server.token_expiry_ms if server.token_authenticated else None
        else:
            principal = f"User:{server.username}"
        if self._reauth_from is not None and principal != self._reauth_from[1]:
            old, new = self._reauth_from[1].split(":", 1), principal.split(":", 1)
            raise self._fail(f"Cannot change principals during re-authentication from {old[0]}.{old[1]}: "
                             f"{new[0]}.{new[1]}")
        lifetime_ms = max(0, self.settings.reauth_ms.get(self.mechanism or "", 0))
        if lifetime_ms > 0 and token_expiry_ms is not None:  # Kafka: a token's session ends with the token
            lifetime_ms = max(1, min(lifetime_ms, token_expiry_ms - int(time.time() * 1000)))
        self.token_authenticated = token_expiry_ms is not None
        self.session_expires_at = self._clock() + lifetime_ms / 1000.0 if lifetime_ms > 0 else None
        if isinstance(server, OAuthBearerServer) and server.credential_expiration_ms is not None:
            # Kafka: the session ends with the token, and with connections.max.reauth.ms when it is set
            remaining = max(0, server.credential_expiration_ms - int(time.time() * 1000))
            lifetime_ms = min(remaining, lifetime_ms) if lifetime_ms > 0 else remaining
            self.session_expires_at = self._clock() + lifetime_ms / 1000.0
        self.principal = principal
        self._server = None
        self._reauth_from = None
        self.raw_tokens = False
        self.state = COMPLETE
        return answer, lifetime_ms
