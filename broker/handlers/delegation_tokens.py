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

A change is written durably (off the event loop) before the answer. In a cluster, Create / Renew /
Expire are forwarded (in an Envelope with the client's principal) to the active controller, which
decides against its image and appends a DelegationToken / RemoveDelegationToken record (Kafka's
DelegationTokenControlManager); every node's token cache follows the metadata image
(broker/cluster/security_sync.py), and the forwarding node answers once its own image shows the change.
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
                                       NOT_CONTROLLER, REQUEST_TIMED_OUT, UNKNOWN_SERVER_ERROR)
from minikafka.protocol.messages import (CreateDelegationTokenRequest, CreateDelegationTokenResponse,
                                         DescribeDelegationTokenRequest, DescribeDelegationTokenResponse,
                                         ExpireDelegationTokenRequest, ExpireDelegationTokenResponse,
                                         RenewDelegationTokenRequest, RenewDelegationTokenResponse)

log = logging.getLogger(__name__)
ERROR_TIMESTAMP = -1  # Kafka's DelegationTokenManager.ErrorTimestamp
VISIBLE_WAIT_S = 5.0


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
    if ctx.broker.cluster is not None:
        resp = await _forward(ctx, req, CreateDelegationTokenResponse)
        if resp is None:
            return _create_error(owner, requester, REQUEST_TIMED_OUT, ERROR_TIMESTAMP)
        if resp.error_code == NONE:
            await _until(lambda: ctx.broker.delegation_tokens.get(resp.token_id) is not None)
        return resp
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
    if ctx.broker.cluster is not None:
        return await _forward_change(ctx, req, RenewDelegationTokenResponse)
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
    if ctx.broker.cluster is not None:
        return await _forward_change(ctx, req, ExpireDelegationTokenResponse)
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


# -- a cluster: forwarded to the active controller, which appends the records -------------------------------

async def _until(done, timeout_s: float = VISIBLE_WAIT_S) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout_s
    while not done() and loop.time() < deadline:
        await asyncio.sleep(0.02)


async def _forward(ctx: RequestContext, req, resp_cls):
    """The active controller's answer to `req` (sent for this client), or None when none answered in time."""
    from minikafka.broker.cluster.forwarding import forwarded_for
    from minikafka.broker.cluster.runtime import ControllerUnavailableError
    try:
        return await ctx.broker.cluster.controller_request(
            req, ctx.api_version, resp_cls, not_controller=lambda r: r.error_code == NOT_CONTROLLER,
            on_behalf=forwarded_for(ctx))
    except ControllerUnavailableError:
        return None


async def _forward_change(ctx: RequestContext, req, resp_cls):
    """Renew / expire through the controller; answered once this node's token cache shows the new expiry."""
    resp = await _forward(ctx, req, resp_cls)
    if resp is None:
        return resp_cls(error_code=REQUEST_TIMED_OUT, expiry_timestamp_ms=ERROR_TIMESTAMP, throttle_time_ms=0)
    if resp.error_code == NONE:
        store = ctx.broker.delegation_tokens
        token = store.by_hmac(req.hmac)
        if token is not None:
            token_id = token.token_id
            await _until(lambda: (t := store.get(token_id)) is None or t.expiry_ms == resp.expiry_timestamp_ms
                         or resp.expiry_timestamp_ms <= now_ms())
    return resp


def _controller_store(ctx: RequestContext, c):
    """The active controller's view: its settings and the tokens of its image by HMAC."""
    from minikafka.broker.security.delegation_tokens import token_hmac
    settings = ctx.broker.delegation_tokens.settings
    tokens = {tid: TokenInfo.from_record(d) for tid, d in c.image.delegation_tokens.items()}
    by_hmac = {token_hmac(settings.secret, tid): t for tid, t in tokens.items()} if settings.secret else {}
    return settings, by_hmac


async def _controller_change(ctx: RequestContext, decide):
    """Run `decide(settings, by_hmac)` -> Decision on the active controller; append its record."""
    from minikafka.broker.handlers.controller import _run
    from minikafka.metadata import records as r

    def change(c):
        settings, by_hmac = _controller_store(ctx, c)
        d = decide(settings, by_hmac)
        if d.error == NONE and d.upsert is not None:
            t = d.upsert
            c._emit(r.delegation_token(t.token_id, t.owner, t.requester, list(t.renewers), t.issue_ms, t.max_ms,
                                       t.expiry_ms))
        elif d.error == NONE and d.remove is not None:
            c._emit(r.remove_delegation_token(d.remove))
        return d
    decision, code = await _run(ctx, change)
    return (decision, code) if code else (decision, NONE)


@handles(CreateDelegationTokenRequest, CreateDelegationTokenResponse, 1, 3, controller=True)
async def controller_create_delegation_token(ctx: RequestContext, req: CreateDelegationTokenRequest
                                             ) -> CreateDelegationTokenResponse:
    """ControllerApis: the broker's checks again (for whoever the request is from), then the decision."""
    requester = ctx.principal
    owner_name = req.owner_principal_name if ctx.api_version >= 3 else None
    owner = f"{req.owner_principal_type}:{owner_name}" if owner_name else requester
    if not ctx.forwarded and not allow_token_requests(ctx):  # forwarded: the broker checked the client's
        return _create_error(owner, requester, DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, ERROR_TIMESTAMP)
    if owner != requester and not authorize(ctx, acl.CREATE_TOKENS, acl.USER, owner):
        return _create_error(owner, requester, DELEGATION_TOKEN_AUTHORIZATION_FAILED, ERROR_TIMESTAMP)
    renewers = [(x.principal_type, x.principal_name) for x in req.renewers]
    decision, code = await _controller_change(ctx, lambda settings, _by_hmac: decide_create(
        settings, owner, requester, renewers, req.max_lifetime_ms, now_ms()))
    token = decision.token if decision is not None else None
    if code != NONE or decision is None or decision.error != NONE or token is None:
        return _create_error(owner, requester, code or (decision.error if decision else NOT_CONTROLLER), 0)
    response = _create_error(owner, requester, NONE, 0)
    response.issue_timestamp_ms, response.expiry_timestamp_ms = token.issue_ms, token.expiry_ms
    response.max_timestamp_ms, response.token_id, response.hmac = token.max_ms, token.token_id, decision.hmac
    return response


@handles(RenewDelegationTokenRequest, RenewDelegationTokenResponse, 1, 2, controller=True)
async def controller_renew_delegation_token(ctx: RequestContext, req: RenewDelegationTokenRequest
                                            ) -> RenewDelegationTokenResponse:
    if not ctx.forwarded and not allow_token_requests(ctx):  # forwarded: the broker checked the client's
        return RenewDelegationTokenResponse(error_code=DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
                                            expiry_timestamp_ms=ERROR_TIMESTAMP, throttle_time_ms=0)
    decision, code = await _controller_change(ctx, lambda settings, by_hmac: decide_renew(
        settings, by_hmac.get(bytes(req.hmac)), ctx.principal, req.renew_period_ms, now_ms()))
    error = code or decision.error
    return RenewDelegationTokenResponse(error_code=error, expiry_timestamp_ms=decision.expiry_ms if error == NONE else 0,
                                        throttle_time_ms=0)


@handles(ExpireDelegationTokenRequest, ExpireDelegationTokenResponse, 1, 2, controller=True)
async def controller_expire_delegation_token(ctx: RequestContext, req: ExpireDelegationTokenRequest
                                             ) -> ExpireDelegationTokenResponse:
    if not ctx.forwarded and not allow_token_requests(ctx):  # forwarded: the broker checked the client's
        return ExpireDelegationTokenResponse(error_code=DELEGATION_TOKEN_REQUEST_NOT_ALLOWED,
                                             expiry_timestamp_ms=ERROR_TIMESTAMP, throttle_time_ms=0)
    decision, code = await _controller_change(ctx, lambda settings, by_hmac: decide_expire(
        settings, by_hmac.get(bytes(req.hmac)), ctx.principal, req.expiry_time_period_ms, now_ms()))
    error = code or decision.error
    return ExpireDelegationTokenResponse(error_code=error, expiry_timestamp_ms=decision.expiry_ms if error == NONE else 0,
                                         throttle_time_ms=0)


async def cluster_expiry_loop(state) -> None:
    """Every delegation.token.expiry.check.interval.ms, the active controller removes the expired tokens
    (Kafka's sweepExpiredDelegationTokens: RemoveDelegationToken records); other nodes skip the pass."""
    while True:
        await asyncio.sleep(max(1, state.delegation_tokens.settings.check_interval_ms) / 1000)
        await _sweep_expired_on_controller(state)


async def _sweep_expired_on_controller(state) -> None:
    from minikafka.metadata import records as r
    active = getattr(state.cluster, "active", None)
    if active is None or getattr(active, "controller", None) is None:
        return

    def sweep(c):
        now = now_ms()
        for tid, d in list(c.image.delegation_tokens.items()):
            if TokenInfo.from_record(d).expired(now):
                c._emit(r.remove_delegation_token(tid))
    try:
        await active.run(sweep, 30.0)
    except Exception as exc:  # not the controller any more, or no commit in time: the next pass retries
        log.debug("delegation token sweep: %r", exc)
