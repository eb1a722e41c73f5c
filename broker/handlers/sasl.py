"""SaslHandshake (17) and SaslAuthenticate (36).

On a SASL listener before authentication (and during KIP-368 re-authentication) they drive the
connection's authenticator (broker/security/sasl/authenticator.py; `ctx.sasl`). Anywhere else Kafka's
request handlers answer them: ILLEGAL_SASL_STATE, on a PLAINTEXT/SSL listener and on an already
authenticated connection (re-authentication disabled or attempted within a second of the last one).
"""
from __future__ import annotations

import kafka.errors as ke
from kafka.protocol.sasl import (SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
                                 SaslHandshakeResponse)

from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.broker.security.sasl.authenticator import AUTHENTICATE, HANDSHAKE, HANDSHAKE_OR_VERSIONS, REAUTH_BAD_MECHANISM, SaslFailure


@handles(SaslHandshakeRequest, SaslHandshakeResponse, 0, 1)
async def handle_sasl_handshake(ctx: RequestContext, req: SaslHandshakeRequest) -> SaslHandshakeResponse:
    sasl = ctx.sasl
    if sasl is None or sasl.state not in (HANDSHAKE_OR_VERSIONS, HANDSHAKE):
        return SaslHandshakeResponse(error_code=ke.IllegalSaslStateError.errno, mechanisms=[])
    sasl.handshake(req.mechanism, ctx.api_version)  # SaslFailure: the connection answers, then closes
    return SaslHandshakeResponse(error_code=0, mechanisms=sasl.settings.handshake_mechanisms)


@handles(SaslAuthenticateRequest, SaslAuthenticateResponse, 0, 2)
async def handle_sasl_authenticate(ctx: RequestContext, req: SaslAuthenticateRequest) -> SaslAuthenticateResponse:
    sasl = ctx.sasl
    if sasl is None or sasl.state not in (AUTHENTICATE, REAUTH_BAD_MECHANISM):
        return SaslAuthenticateResponse(error_code=ke.IllegalSaslStateError.errno,
                                        error_message="SaslAuthenticate request received after successful authentication",
                                        auth_bytes=b"", session_lifetime_ms=0)
    try:
        await sasl.prepare(bytes(req.auth_bytes))  # OAUTHBEARER: JWKS keys fetched off the event loop
        answer, lifetime_ms = sasl.evaluate(bytes(req.auth_bytes))
    except SaslFailure as exc:
        if exc.response is None and exc.delayed:  # Kafka answers a failed token with error 58 and its message
            exc.response = SaslAuthenticateResponse(error_code=ke.SaslAuthenticationFailedError.errno,
                                                    error_message=str(exc), auth_bytes=b"", session_lifetime_ms=0)
        raise
    return SaslAuthenticateResponse(error_code=0, error_message="", auth_bytes=answer,  # "" as Kafka 4.3
                                    session_lifetime_ms=lifetime_ms)
