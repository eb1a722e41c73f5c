"""The active controller's side of AlterClientQuotas (Kafka's ControllerApis -> ClientQuotaControlManager):
authorized (ALTER_CONFIGS on the cluster, as the client a broker forwarded it for), validated against the
controller's image inside the decision, ClientQuota records appended and answered once committed. Not
the active controller: NOT_CONTROLLER for every entry (the forwarding broker retries)."""
from __future__ import annotations

import kafka.errors as ke
from kafka.protocol.admin.client_quotas import AlterClientQuotasRequest, AlterClientQuotasResponse

from minikafka.broker.handlers.client_quotas import (CLUSTER_DENIED_MESSAGE, alter_error_response, alter_response,
                                                     ip_hosts, plan)
from minikafka.broker.handlers.controller import NOT_CONTROLLER, _active, _run
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.broker.security import acl as A
from minikafka.broker.security.authorizer import authorize_cluster


@handles(AlterClientQuotasRequest, AlterClientQuotasResponse, 0, 1, controller=True)
async def handle_alter_client_quotas(ctx: RequestContext, req: AlterClientQuotasRequest) -> AlterClientQuotasResponse:
    if not authorize_cluster(ctx, A.ALTER_CONFIGS):
        return alter_error_response(req, ke.ClusterAuthorizationFailedError.errno, CLUSTER_DENIED_MESSAGE)
    active = _active(ctx)
    if active is None or active.controller is None:
        return alter_error_response(req, NOT_CONTROLLER, None)

    hosts = await ip_hosts(req)

    def alter(c):
        results, changes = plan(req, c.image.client_quotas, hosts)
        if not req.validate_only:
            c.alter_client_quotas(changes)
        return results
    results, code = await _run(ctx, alter)
    if code:
        return alter_error_response(req, code, None)
    return alter_response(results)
