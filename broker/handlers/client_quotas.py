"""DescribeClientQuotas (48) and AlterClientQuotas (49), as Kafka's broker (ClientQuotasImage.describe)
and controller (ClientQuotaControlManager) answer them; the rules are in broker/quota/model.py.

Authorization as Kafka: Describe needs DESCRIBE_CONFIGS on the CLUSTER (else the top-level error and no
entries), Alter ALTER_CONFIGS on it (else every request entry, with its entity, gets
CLUSTER_AUTHORIZATION_FAILED). A bad describe filter is the top-level INVALID_REQUEST (an unknown
entity type UNSUPPORTED_VERSION) with Kafka's message; an alteration's errors are per entity
(INVALID_REQUEST). validate_only checks everything and stores nothing.

A single node stores the quotas in its log dir (broker/quota/store.py); a cluster node forwards the
alteration to the active controller (broker/handlers/controller_quotas.py), which appends
ClientQuota records; every node's quotas follow the metadata image.
"""
from __future__ import annotations

import logging

import kafka.errors as ke
from kafka.protocol.admin.client_quotas import (AlterClientQuotasRequest, AlterClientQuotasResponse,
                                                DescribeClientQuotasRequest, DescribeClientQuotasResponse)

from minikafka.broker.quota import model as m
from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize_cluster
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles

log = logging.getLogger(__name__)
CLUSTER_DENIED_MESSAGE = "Cluster authorization failed."
INVALID_REQUEST = ke.InvalidRequestError.errno
AEntry = AlterClientQuotasResponse.EntryData
AEntity = AEntry.EntityData
DEntry = DescribeClientQuotasResponse.EntryData


def alter_error_response(req: AlterClientQuotasRequest, code: int, message: str | None) -> AlterClientQuotasResponse:
    """Every request entry with its entity as sent and one error (Kafka's getErrorResponse)."""
    return AlterClientQuotasResponse(throttle_time_ms=0, entries=[
        AEntry(error_code=code, error_message=message,
               entity=[AEntity(entity_type=e.entity_type, entity_name=e.entity_name) for e in entry.entity])
        for entry in req.entries])


def plan(req: AlterClientQuotasRequest, current: m.Quotas, resolvable: frozenset[str] = frozenset()
         ) -> tuple[list[tuple[m.Entity, str | None]], list[m.Change]]:
    return m.plan_alterations((([(e.entity_type, e.entity_name) for e in entry.entity],
                                [(op.key, op.value, op.remove) for op in entry.ops]) for entry in req.entries),
                              current, resolvable)


async def ip_hosts(req: AlterClientQuotasRequest) -> frozenset[str]:
    """The ip entities' host names that resolve (off the event loop)."""
    return await m.resolve_hosts(e.entity_name for entry in req.entries for e in entry.entity if e.entity_type == m.IP)


def alter_response(results: list[tuple[m.Entity, str | None]]) -> AlterClientQuotasResponse:
    return AlterClientQuotasResponse(throttle_time_ms=0, entries=[
        AEntry(error_code=0 if error is None else INVALID_REQUEST, error_message=error,
               entity=[AEntity(entity_type=t, entity_name=n) for t, n in entity]) for entity, error in results])


@handles(AlterClientQuotasRequest, AlterClientQuotasResponse, 0, 1)
async def handle_alter_client_quotas(ctx: RequestContext, req: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
    if not authorize_cluster(ctx, acl.ALTER_CONFIGS):
        return alter_error_response(req, ke.ClusterAuthorizationFailedError.errno, CLUSTER_DENIED_MESSAGE)
    state = ctx.broker
    if state.cluster is not None:  # a cluster: the active controller decides (Kafka forwards it)
        from minikafka.broker.cluster.forwarding import forward_client_quotas, forwarded_for
        return await forward_client_quotas(state, req, ctx.api_version, forwarded_for(ctx))
    store = state.client_quotas
    hosts = await ip_hosts(req)
    async with store.lock:
        results, changes = plan(req, store.quotas, hosts)
        if not req.validate_only and changes:
            try:
                await store.commit(changes)
            except OSError as exc:
                log.error("writing client quotas failed: %s", exc)
                return alter_error_response(req, ke.UnknownError.errno, "The server experienced an unexpected "
                                                                        "error when processing the request.")
    return alter_response(results)


def describe_response(quotas: m.Quotas, req: DescribeClientQuotasRequest) -> DescribeClientQuotasResponse:
    try:
        found = m.describe(quotas, [(c.entity_type, c.match_type, c.match) for c in req.components], req.strict)
    except m.QuotaError as exc:
        code = ke.UnsupportedVersionError.errno if exc.unsupported else INVALID_REQUEST
        return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=code, error_message=exc.message,
                                            entries=None)
    return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=0, error_message=None, entries=[
        DEntry(entity=[DEntry.EntityData(entity_type=t, entity_name=n) for t, n in entity],
               values=[DEntry.ValueData(key=k, value=v) for k, v in sorted(values.items())])
        for entity, values in found])


@handles(DescribeClientQuotasRequest, DescribeClientQuotasResponse, 0, 1)
async def handle_describe_client_quotas(ctx: RequestContext, req: DescribeClientQuotasRequest
                                        ) -> DescribeClientQuotasResponse:
    if not authorize_cluster(ctx, acl.DESCRIBE_CONFIGS):  # Kafka: DESCRIBE_CONFIGS on the CLUSTER
        return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=ke.ClusterAuthorizationFailedError.errno,
                                            error_message=CLUSTER_DENIED_MESSAGE, entries=None)
    return describe_response(ctx.broker.client_quotas.quotas, req)
