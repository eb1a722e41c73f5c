"""CreateDelegationToken (38), RenewDelegationToken (39), ExpireDelegationToken (40) and
DescribeDelegationToken (41), as Kafka's KafkaApis checks them and its DelegationTokenControlManager
decides (broker/security/delegation_tokens.py).

On every API first: a connection that itself logged in with a delegation token, a PLAINTEXT listener
or an SSL listener without a client certificate (User:ANONYMOUS) gets DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
(Kafka's allowTokenRequests). Create: a token for another owner (v3, KIP-373) needs CREATE_TOKENS on
that USER (else DELEGATION_TOKEN_AUTHORIZATION_FAILED); renewers must be User principals
(INVALID_PRINCIPAL_TYPE); then, without `delegation.token.secret.key`, DELEGATION_TOKEN_AUTH_DISABLED.
Renew / expire find the token by its HMAC (DELEGATION_TOKEN_NOT_FOUND), only its owner or a renewer may
(DELEGATION_TOKEN_OWNER_MISMATCH), an expired one is DELEGATION_TOKEN_EXPIRED; expire with a negative
period removes it at once. Describe: null owners = all, [] = none; a token is shown to its owner and
renewers and to whoever may DESCRIBE it (DELEGATION_TOKEN resource) or DESCRIBE_TOKENS its owner (USER).

A change is written durably (off the event loop) before the answer.
"""
from __future__ import annotations

import asyncio
import logging

from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize
from minikafka.broker.security.delegation_tokens import (Decision, TokenInfo, decide_create, decide_expire,
                                                         decide_renew, describe_filter, now_ms, split_principal)
from minikafka.protocol.errors import (DELEGATION_TOKEN_AUTH_DISABLED, DELEGATION_TOKEN_AUTHORIZATION_FAILED,
                                       DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, INVALID_PRINCIPAL_TYPE, NONE,
                                       UNKNOWN_SERVER_ERROR)
from minikafka.protocol.messages import (CreateDelegationTokenRequest, CreateDelegationTokenResponse,
                                         DescribeDelegationTokenRequest, DescribeDelegationTokenResponse,
                                         ExpireDelegationTokenRequest, ExpireDelegationTokenResponse,
                                         RenewDelegationTokenRequest, RenewDelegationTokenResponse)

log = logging.getLogger(__name__)
ERROR_TIMESTAMP = -1  # Kafka's DelegationTokenManager.ErrorTimestamp


def allow_token_requests(ctx: RequestContext) -> bool:
    """Kafka's KafkaApis.allowTokenRequests."""
    if ctx.sasl is not None and ctx.sasl.token_authenticated:
        return False
    if ctx.security_protocol == "PLAINTEXT":
        return False
    return not (ctx.security_protocol == "SSL" and ctx.principal == "User:ANONYMOUS")


async def _write(ctx: RequestContext, decision: Decision) -> int:
    """Apply the decision's change durably; its error code (UNKNOWN_SERVER_ERROR if the write failed)."""
    if decision.error != NONE or (decision.upsert is None and decision.remove is None):
        return decision.error
    store = ctx.broker.delegation_tokens
    try:
        await asyncio.to_thread(store.apply, [decision.upsert] if decision.upsert else [],
                                [decision.remove] if decision.remove else [])
    except OSError as exc:
        log.error("writing delegation tokens failed: %s", exc)
        return UNKNOWN_SERVER_ERROR
    return NONE


def _create_error(owner: str, requester: str, error: int, timestamp: int) -> CreateDelegationTokenResponse:
    (otype, oname), (rtype, rname) = split_principal(owner), split_principal(requester)
    return CreateDelegationTokenResponse(
        error_code=error, principal_type=otype, principal_name=oname, token_requester_principal_type=rtype,
        token_requester_principal_name=rname, issue_timestamp_ms=timestamp, expiry_timestamp_ms=timestamp,
        max_timestamp_ms=timestamp, token_id="", hmac=b"", throttle_time_ms=0)


@handles(CreateDelegationTokenRequest, CreateDelegationTokenResponse, 1, 3)
async def handle_create_delegation_token(ctx: RequestContext, req: CreateDelegationTokenRequest
                                         ) -> CreateDelegationTokenResponse:
    requester = ctx.principal
    owner_name = req.owner_principal_name if ctx.api_version >= 3 else None
    owner = f"{req.owner_principal_type}:{owner_name}" if owner_name else requester
    if not allow_token_requests(ctx):
        return _create_error(owner, requester, DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, ERROR_TIMESTAMP)
    if owner != requester and not authorize(ctx, acl.CREATE_TOKENS, acl.USER, owner):
        return _create_error(owner, requester, DELEGATION_TOKEN_AUTHORIZATION_FAILED, ERROR_TIMESTAMP)
    renewers = [(r.principal_type, r.principal_name) for r in req.renewers]
    if any(kind != "User" for kind, _ in renewers):
        return _create_error(owner, requester, INVALID_PRINCIPAL_TYPE, ERROR_TIMESTAMP)
    store = ctx.broker.delegation_tokens
    decision = decide_create(store.settings, owner, requester, renewers, req.max_lifetime_ms, now_ms())
    error = await _write(ctx, decision)
    token = decision.token
    if error != NONE or token is None:  # the controller's errors leave the fields at their defaults
        return _create_error(owner, requester, error, 0)
    response = _create_error(owner, requester, NONE, 0)
    response.issue_timestamp_ms, response.expiry_timestamp_ms = token.issue_ms, token.expiry_ms
    response.max_timestamp_ms, response.token_id, response.hmac = token.max_ms, token.token_id, decision.hmac
    return response


@handles(RenewDelegationTokenRequest, RenewDelegationTokenResponse, 1, 2)
async def handle_renew_delegation_token(ctx: RequestContext, req: RenewDelegationTokenRequest
                                        ) -> RenewDelegationTokenResponse:
    if not allow_token_requests(ctx):
        return RenewDelegationTokenResponse(error_code=DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
                                            expiry_timestamp_ms=ERROR_TIMESTAMP, throttle_time_ms=0)
    store = ctx.broker.delegation_tokens
    decision = decide_renew(store.settings, store.by_hmac(req.hmac), ctx.principal, req.renew_period_ms, now_ms())
    error = await _write(ctx, decision)
    return RenewDelegationTokenResponse(error_code=error, expiry_timestamp_ms=decision.expiry_ms if error == NONE else 0,
                                        throttle_time_ms=0)


@handles(ExpireDelegationTokenRequest, ExpireDelegationTokenResponse, 1, 2)
async def handle_expire_delegation_token(ctx: RequestContext, req: ExpireDelegationTokenRequest
                                         ) -> ExpireDelegationTokenResponse:
    if not allow_token_requests(ctx):
        return ExpireDelegationTokenResponse(error_code=DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
                                             expiry_timestamp_ms=ERROR_TIMESTAMP, throttle_time_ms=0)
    store = ctx.broker.delegation_tokens
    decision = decide_expire(store.settings, store.by_hmac(req.hmac), ctx.principal, req.expiry_time_period_ms,
                             now_ms())
    error = await _write(ctx, decision)
    return ExpireDelegationTokenResponse(error_code=error, expiry_timestamp_ms=decision.expiry_ms if error == NONE else 0,
                                         throttle_time_ms=0)


def _described(token: TokenInfo, hmac: bytes) -> DescribeDelegationTokenResponse.DescribedDelegationToken:
    described = DescribeDelegationTokenResponse.DescribedDelegationToken
    renewer = described.DescribedDelegationTokenRenewer
    (otype, oname), (rtype, rname) = split_principal(token.owner), split_principal(token.requester)
    return described(principal_type=otype, principal_name=oname, token_requester_principal_type=rtype,
                     token_requester_principal_name=rname, issue_timestamp=token.issue_ms,
                     expiry_timestamp=token.expiry_ms, max_timestamp=token.max_ms, token_id=token.token_id,
                     hmac=hmac, renewers=[renewer(principal_type=k, principal_name=n)
                                          for k, n in map(split_principal, token.renewers)])


@handles(DescribeDelegationTokenRequest, DescribeDelegationTokenResponse, 1, 3)
async def handle_describe_delegation_token(ctx: RequestContext, req: DescribeDelegationTokenRequest
                                           ) -> DescribeDelegationTokenResponse:
    if not allow_token_requests(ctx):
        return DescribeDelegationTokenResponse(error_code=DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, tokens=[],
                                               throttle_time_ms=0)
    store = ctx.broker.delegation_tokens
    if not store.settings.enabled:
        return DescribeDelegationTokenResponse(error_code=DELEGATION_TOKEN_AUTH_DISABLED, tokens=[],
                                               throttle_time_ms=0)
    owners = None if req.owners is None else [f"{o.principal_type}:{o.principal_name}" for o in req.owners]
    tokens = []
    if owners != []:
        tokens = [_described(t, store.hmac_of(t.token_id)) for t in store.tokens()
                  if describe_filter(ctx.principal, owners, t,
                                     lambda tid: authorize(ctx, acl.DESCRIBE, acl.DELEGATION_TOKEN, tid),
                                     lambda owner: authorize(ctx, acl.DESCRIBE_TOKENS, acl.USER, owner))]
    return DescribeDelegationTokenResponse(error_code=0, tokens=tokens, throttle_time_ms=0)
