"""DescribeUserScramCredentials (50) and AlterUserScramCredentials (51), as Kafka's controller
(ScramControlManager) and metadata image (ScramImage) answer them.

Alter: per user, one result. A user named twice in one request (deletion or upsertion, whatever the
mechanisms) -> DUPLICATE_RESOURCE; empty name -> UNACCEPTABLE_CREDENTIAL; unknown mechanism ->
UNSUPPORTED_SASL_MECHANISM; iterations outside [4096, 16384] -> UNACCEPTABLE_CREDENTIAL; deleting a
credential that does not exist -> RESOURCE_NOT_FOUND. The valid alterations are applied together and
durably (broker/security/sasl/credentials.py, off the event loop) before the answer; an upsertion's salted
password is turned into StoredKey/ServerKey (two HMACs) and is not kept.

Describe: null/empty users = every user with a credential; a named user without one ->
RESOURCE_NOT_FOUND, a user named twice -> DUPLICATE_RESOURCE.

Authorization as Kafka: Alter needs ALTER on the CLUSTER (else every named user gets
CLUSTER_AUTHORIZATION_FAILED), Describe needs DESCRIBE on the CLUSTER (else the top-level error and
one result per named user, without its name, as Kafka's getErrorResponse builds them).
"""
from __future__ import annotations

import asyncio
import logging
from typing import Callable

import kafka.errors as ke
from kafka.protocol.admin.users import (AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
                                        DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse)

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize_cluster
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.broker.security.sasl.scram import MAX_ITERATIONS, MECHANISM_BY_TYPE, MIN_ITERATIONS, MECHANISM_TYPES, ScramCredential

CLUSTER_DENIED = ke.ClusterAuthorizationFailedError.errno
CLUSTER_DENIED_MESSAGE = "Cluster authorization failed."
log = logging.getLogger(__name__)

AlterResult = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
DescribeResult = DescribeUserScramCredentialsResponse.DescribeUserScramCredentialsResult
CredentialInfo = DescribeResult.CredentialInfo
DUPLICATE = "A user credential cannot be altered twice in the same request"
DESCRIBE_DUPLICATE_USER = "Cannot describe SCRAM credentials for the same user twice in a single request: "
DESCRIBE_MISSING_USER = "Attempt to describe a user credential that does not exist: "


def _check_name_and_mechanism(name: str, mechanism: int) -> tuple[int, str | None] | None:
    if not name:
        return ke.UnacceptableCredentialError.errno, "Username must not be empty"
    if mechanism not in MECHANISM_BY_TYPE:
        return ke.UnsupportedSaslMechanismError.errno, "Unknown SCRAM mechanism"
    return None


Plan = tuple[dict[str, tuple[int, str | None]], dict[str, tuple[str, str]], dict[str, tuple[str, str, ScramCredential]]]


def plan_alterations(req: AlterUserScramCredentialsRequest,
                     get: Callable[[str, str], ScramCredential | None]) -> Plan:
    """(errors by user, deletions by user, upsertions by user) of `req` against the credentials `get`
    finds (ScramControlManager's checks; the same on a single node and on the active controller)."""
    errors: dict[str, tuple[int, str | None]] = {}
    deletions: dict[str, tuple[str, str]] = {}
    upserts: dict[str, tuple[str, str, ScramCredential]] = {}
    for d in req.deletions:
        if d.name in errors:
            continue
        if deletions.pop(d.name, None) is not None:
            errors[d.name] = (ke.DuplicateResourceError.errno, DUPLICATE)
            continue
        error = _check_name_and_mechanism(d.name, d.mechanism)
        if error is None and get(d.name, MECHANISM_BY_TYPE[d.mechanism]) is None:
            error = (ke.ResourceNotFoundError.errno, "Attempt to delete a user credential that does not exist")
        if error is not None:
            errors[d.name] = error
        else:
            deletions[d.name] = (d.name, MECHANISM_BY_TYPE[d.mechanism])
    for u in req.upsertions:
        if u.name in errors:
            continue
        if deletions.pop(u.name, None) is not None or upserts.pop(u.name, None) is not None:
            errors[u.name] = (ke.DuplicateResourceError.errno, DUPLICATE)
            continue
        error = _check_name_and_mechanism(u.name, u.mechanism)
        if error is None and u.iterations < MIN_ITERATIONS:
            error = (ke.UnacceptableCredentialError.errno, "Too few iterations")
        elif error is None and u.iterations > MAX_ITERATIONS:
            error = (ke.UnacceptableCredentialError.errno, "Too many iterations")
        elif error is None and not u.salted_password:
            # Kafka: HMAC with an empty key throws IllegalArgumentException -> UNKNOWN_SERVER_ERROR, no message
            error = (ke.UnknownError.errno, None)
        if error is not None:
            errors[u.name] = error
            continue
        mechanism = MECHANISM_BY_TYPE[u.mechanism]
        upserts[u.name] = (u.name, mechanism, ScramCredential.from_salted_password(
            mechanism, bytes(u.salt), bytes(u.salted_password), u.iterations))
    return errors, deletions, upserts


def alter_response(plan: Plan) -> AlterUserScramCredentialsResponse:
    errors, deletions, upserts = plan
    results = [AlterResult(user=name, error_code=0, error_message=None) for name in [*deletions, *upserts]]
    for name, (code, message) in errors.items():
        results.append(AlterResult(user=name, error_code=code, error_message=message))
    return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=results)


@handles(AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, 0, 0)
async def handle_alter_user_scram_credentials(ctx: RequestContext, req: AlterUserScramCredentialsRequest
                                              ) -> AlterUserScramCredentialsResponse:
    if not authorize_cluster(ctx, acl.ALTER):
        names = sorted({d.name for d in req.deletions} | {u.name for u in req.upsertions})
        return AlterUserScramCredentialsResponse(throttle_time_ms=0, results=[
            AlterResult(user=n, error_code=CLUSTER_DENIED, error_message=CLUSTER_DENIED_MESSAGE) for n in names])
    if ctx.broker.cluster is not None:  # a cluster: the active controller decides (Kafka forwards it)
        from minikafka.broker.cluster.forwarding import forward_scram, forwarded_for
        return await forward_scram(ctx.broker, req, forwarded_for(ctx))
    store = ctx.broker.scram_credentials
    errors, deletions, upserts = plan_alterations(req, store.get)
    if deletions or upserts:
        try:
            await asyncio.to_thread(store.apply, list(upserts.values()), list(deletions.values()))
        except OSError as exc:
            log.error("writing SCRAM credentials failed: %s", exc)
            for name in [*deletions, *upserts]:
                errors[name] = (ke.UnknownError.errno, "The server experienced an unexpected error when processing "
                                                       "the request.")
            deletions, upserts = {}, {}
    return alter_response((errors, deletions, upserts))


@handles(DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse, 0, 0)
async def handle_describe_user_scram_credentials(ctx: RequestContext, req: DescribeUserScramCredentialsRequest
                                                 ) -> DescribeUserScramCredentialsResponse:
    if not authorize_cluster(ctx, acl.DESCRIBE):
        return DescribeUserScramCredentialsResponse(
            throttle_time_ms=0, error_code=CLUSTER_DENIED, error_message=CLUSTER_DENIED_MESSAGE,
            results=[DescribeResult(user="", error_code=CLUSTER_DENIED, error_message=CLUSTER_DENIED_MESSAGE,
                                    credential_infos=[]) for _ in req.users or ()])
    users = ctx.broker.scram_credentials.users()
    if not req.users:
        wanted = {name: False for name in sorted(users)}
    else:
        wanted = {}
        for u in req.users:
            wanted[u.name] = u.name in wanted  # True: named twice
    results = []
    for name, duplicate in wanted.items():
        if duplicate:
            results.append(DescribeResult(user=name, error_code=ke.DuplicateResourceError.errno,
                                          error_message=DESCRIBE_DUPLICATE_USER + name, credential_infos=[]))
        elif name in users:
            infos = [CredentialInfo(mechanism=MECHANISM_TYPES[m], iterations=c.iterations)
                     for m, c in sorted(users[name].items(), key=lambda mc: MECHANISM_TYPES[mc[0]])]
            results.append(DescribeResult(user=name, error_code=0, error_message="", credential_infos=infos))
        else:
            results.append(DescribeResult(user=name, error_code=ke.ResourceNotFoundError.errno,
                                          error_message=DESCRIBE_MISSING_USER + name, credential_infos=[]))
    # Kafka 4.3 answers "" (not null) as the error message of a success, at the top and per user
    return DescribeUserScramCredentialsResponse(throttle_time_ms=0, error_code=0, error_message="", results=results)
