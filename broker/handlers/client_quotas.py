"""DescribeClientQuotas (48): minikafka has no client quotas (AlterClientQuotas is not served), so
every filter matches nothing, which is what Kafka answers when no quota is set. `kafka-configs
--describe --entity-type users` asks for quotas next to the SCRAM credentials of the users."""
from __future__ import annotations

import kafka.errors as ke
from kafka.protocol.admin.client_quotas import DescribeClientQuotasRequest, DescribeClientQuotasResponse

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize_cluster
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles


@handles(DescribeClientQuotasRequest, DescribeClientQuotasResponse, 0, 1)
async def handle_describe_client_quotas(ctx: RequestContext, req: DescribeClientQuotasRequest
                                        ) -> DescribeClientQuotasResponse:
    if not authorize_cluster(ctx, acl.DESCRIBE_CONFIGS):  # Kafka: DESCRIBE_CONFIGS on the CLUSTER
        return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=ke.ClusterAuthorizationFailedError.errno,
                                            error_message="Cluster authorization failed.", entries=None)
    return DescribeClientQuotasResponse(throttle_time_ms=0, error_code=0, error_message="", entries=[])  # "" as Kafka
