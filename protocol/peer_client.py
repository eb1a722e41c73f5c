"""A small asyncio Kafka-protocol client for one peer controller: one persistent connection, one
request in flight, kafka.protocol for encoding. Any failure (refused, reset, timeout, a response that
does not decode or answers another correlation id) closes the connection and raises PeerError; the
next request reconnects, but not before a backoff that doubles per consecutive failure (from
`retry_backoff_s` up to `max_backoff_s`) has passed since the last failure — waited inside the
request's timeout but for at most half of it, so a request sent right after a failure can still succeed.

A pooled connection the peer has closed (it restarted, or dropped an idle connection) is not a failure
of the request: one already at EOF is replaced before sending, and one that ends before the first byte
of the answer is retried once on a fresh connection (the old peer never answered, so it was not there
to act on the request).

Security (`PeerSecurity`, built from the broker config by broker/security/peer_security.py): on an SSL / SASL_SSL
listener the connection is TLS with the given client context; on a SASL listener every new connection
first authenticates (SaslHandshake v1, then SaslAuthenticate v2 rounds with kafka-python's PLAIN /
SCRAM client mechanisms) before the request goes out. A refused TLS handshake or failed
authentication is a PeerError like any other failure (same backoff) and is logged as one warning line
(again only once the reason changes or after a success). A session with a lifetime (KIP-368
`connections.max.reauth.ms` on the server) is replaced by a fresh, re-authenticated connection at 85%
of its lifetime.
"""
from __future__ import annotations

import asyncio
import logging
import ssl
import struct
import time
from dataclasses import dataclass, field
from typing import Any

_SIZE = struct.Struct(">i")
MAX_RESPONSE_BYTES = 64 << 20
SASL_HANDSHAKE_VERSION = 1
SASL_AUTHENTICATE_VERSION = 2
REAUTH_FRACTION = 0.85  # of the server's session lifetime (Kafka's clients: 85-95%)

log = logging.getLogger(__name__)


class PeerError(Exception):
    """The request got no usable answer (the message counts as lost)."""


class PeerAuthError(PeerError):
    """The peer's listener refused this node: TLS handshake or SASL authentication failed."""


@dataclass(frozen=True)
class PeerSecurity:
    """How to connect to one listener of the peers: its security protocol, the TLS client context
    (SSL, SASL_SSL) and the SASL mechanism with this node's credentials (SASL_*)."""
    listener: str = "PLAINTEXT"
    protocol: str = "PLAINTEXT"
    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    sasl_username: str = ""
    sasl_password: str = field(default="", repr=False)


PLAINTEXT = PeerSecurity()
_CLOSED = (ssl.SSLError, asyncio.IncompleteReadError, ConnectionResetError)


def _tls_refusal(exc: BaseException) -> PeerAuthError:
    """A fresh TLS connection that ends before its first answer: with TLS 1.3 the server's refusal of
    the client certificate arrives only then."""
    # the same words however the close shows (reset, EOF): the warning is logged once per reason
    what = f" ({exc.reason})" if isinstance(exc, ssl.SSLError) and exc.reason else ""
    return PeerAuthError(f"the TLS connection was closed before the first answer{what}; does the listener "
                         "require a client certificate (ssl.client.auth) that this node's keystore does not give?")


class PeerClient:
    def __init__(self, node_id: int, host: str, port: int, client_id: str, request_timeout_s: float,
                 retry_backoff_s: float = 0.02, max_backoff_s: float = 1.0,
                 security: PeerSecurity = PLAINTEXT) -> None:
        self.node_id, self.host, self.port = node_id, host, port
        self.security = security
        self.client_id = client_id
        self.request_timeout_s = request_timeout_s
        self.retry_backoff_s, self.max_backoff_s = retry_backoff_s, max_backoff_s
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._correlation = 0
        self._failures = 0
        self._failed_at = 0.0
        self._lock = asyncio.Lock()
        self._session_ends: float | None = None  # monotonic; SASL sessions with a lifetime only
        self._logged_refusal: str | None = None

    async def request(self, req: Any, version: int, response_class: type) -> Any:
        async with self._lock:
            try:
                resp = await asyncio.wait_for(self._roundtrip(req, version, response_class), self.request_timeout_s)
            except PeerAuthError as exc:
                self._fail()
                if str(exc) != self._logged_refusal:
                    self._logged_refusal = str(exc)
                    log.warning("cannot connect to node %d (%s:%d, listener %s): %s", self.node_id, self.host,
                                self.port, self.security.listener, exc)
                raise PeerError(f"node {self.node_id} ({self.host}:{self.port}): {exc}") from None
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError, struct.error,
                    PeerError) as exc:
                self._fail()
                raise PeerError(f"node {self.node_id} ({self.host}:{self.port}): {exc!r}") from None
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                # Python 3.11's wait_for returns the result when the inner call finishes as the task is
                # cancelled, and the cancellation is lost (gh-86296): deliver it here
                raise asyncio.CancelledError()
            return resp

    async def _roundtrip(self, req: Any, version: int, response_class: type) -> Any:
        reused = self._writer is not None
        expired = self._session_ends is not None and time.monotonic() >= self._session_ends
        if reused and (expired or self._writer.is_closing() or self._reader.at_eof()):  # type: ignore[union-attr]
            self.close()
            reused = False
        try:
            return await self._exchange(req, version, response_class)
        except (asyncio.IncompleteReadError, ConnectionResetError, BrokenPipeError) as exc:
            if not reused or (isinstance(exc, asyncio.IncompleteReadError) and exc.partial):
                raise
        self.close()  # the peer closed the pooled connection before answering: once more, freshly
        return await self._exchange(req, version, response_class)

    async def _exchange(self, req: Any, version: int, response_class: type) -> Any:
        fresh = self._writer is None
        if fresh:
            # at most half the request timeout: a backoff that had grown to the whole timeout failed
            # every request to a peer that is back (each timeout restarting the backoff), so a
            # follower's fetches to a restarted leader never got through (issue 16)
            wait = min(self._backoff_left(), self.request_timeout_s / 2)
            if wait > 0:
                await asyncio.sleep(wait)
            await self._connect()
        try:
            resp = await self._call(req, version, response_class)
        except _CLOSED as exc:
            if fresh and self.security.ssl_context is not None and self.security.sasl_mechanism is None:
                raise _tls_refusal(exc) from None
            raise
        self._failures = 0
        self._logged_refusal = None  # a later refusal is news again
        return resp

    async def _connect(self) -> None:
        """A new connection, TLS and SASL done; PeerAuthError when the peer's listener refuses us."""
        sec = self.security
        try:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port, ssl=sec.ssl_context)
        except ssl.SSLError as exc:
            raise PeerAuthError(f"TLS handshake failed: {exc.reason or exc}") from None
        self._session_ends = None
        if sec.sasl_mechanism is not None:
            try:
                await self._authenticate()
            except _CLOSED as exc:
                if sec.ssl_context is None:
                    raise
                raise _tls_refusal(exc) from None

    async def _authenticate(self) -> None:
        from kafka.net.sasl import get_sasl_mechanism
        from kafka.protocol.sasl import (SaslAuthenticateRequest, SaslAuthenticateResponse,
                                         SaslHandshakeRequest, SaslHandshakeResponse)
        sec = self.security
        mechanism = sec.sasl_mechanism
        assert mechanism is not None
        handshake = await self._call(SaslHandshakeRequest(mechanism=mechanism), SASL_HANDSHAKE_VERSION,
                                     SaslHandshakeResponse)
        if handshake.error_code:
            raise PeerAuthError(f"SASL mechanism {mechanism} is not enabled there (it enables "
                                f"{', '.join(handshake.mechanisms) or 'none'}; error {handshake.error_code})")
        username = sec.sasl_username
        if mechanism.startswith("SCRAM-"):  # kafka-python sends the name as it is: escape it as RFC 5802 wants
            username = username.replace("=", "=3D").replace(",", "=2C")
        client = get_sasl_mechanism(mechanism)(sasl_mechanism=mechanism, sasl_plain_username=username,
                                               sasl_plain_password=sec.sasl_password, host=self.host)
        lifetime_ms = 0
        while not client.is_done():
            resp = await self._call(SaslAuthenticateRequest(auth_bytes=client.auth_bytes()),
                                    SASL_AUTHENTICATE_VERSION, SaslAuthenticateResponse)
            if resp.error_code:
                raise PeerAuthError(f"SASL {mechanism} authentication as {sec.sasl_username!r} failed: "
                                    f"{resp.error_message or f'error {resp.error_code}'}")
            lifetime_ms = resp.session_lifetime_ms
            try:  # SCRAM's PBKDF2 (4096+ iterations) runs off the event loop
                await asyncio.to_thread(client.receive, bytes(resp.auth_bytes))
            except Exception as exc:
                raise PeerAuthError(f"SASL {mechanism}: the server's answer does not verify ({exc})") from None
        if not client.is_authenticated():
            raise PeerAuthError(f"SASL {mechanism} authentication as {sec.sasl_username!r} failed")
        if lifetime_ms > 0:
            self._session_ends = time.monotonic() + lifetime_ms / 1000 * REAUTH_FRACTION

    async def _call(self, req: Any, version: int, response_class: type) -> Any:
        """One framed request and its answer on the open connection."""
        assert self._reader is not None and self._writer is not None
        self._correlation = (self._correlation + 1) & 0x7FFFFFFF
        req.with_header(correlation_id=self._correlation, client_id=self.client_id)
        self._writer.write(bytes(req.encode(version=version, header=True, framed=True)))
        await self._writer.drain()
        size, = _SIZE.unpack(await self._reader.readexactly(4))
        if not 4 <= size <= MAX_RESPONSE_BYTES:
            raise PeerError(f"response frame of {size} bytes")
        frame = await self._reader.readexactly(size)
        resp = response_class.decode(frame, version=version, header=True)
        if resp.header.correlation_id != self._correlation:
            raise PeerError(f"correlation id {resp.header.correlation_id}, expected {self._correlation}")
        return resp

    def _backoff_left(self) -> float:
        if not self._failures:
            return 0.0
        # the exponent is capped: a peer down for minutes must not overflow the float (it did after ~1000
        # failures, and every later request to that peer then failed before connecting)
        backoff = min(self.max_backoff_s, self.retry_backoff_s * 2 ** min(self._failures - 1, 30))
        return self._failed_at + backoff - time.monotonic()

    def _fail(self) -> None:
        self._failures += 1
        self._failed_at = time.monotonic()
        self.close()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.transport.abort()
        self._reader = self._writer = None
