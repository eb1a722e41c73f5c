"""ListTransactions (KIP-664; v1 adds the duration filter of KIP-994, v2 a transactional id pattern)."""
from __future__ import annotations

from kafka.protocol.admin.transactions import ListTransactionsRequest, ListTransactionsResponse

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorized_names
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles

TxnState = ListTransactionsResponse.TransactionState


@handles(ListTransactionsRequest, ListTransactionsResponse, 0, 2)
async def handle_list_transactions(ctx: RequestContext, req: ListTransactionsRequest) -> ListTransactionsResponse:
    version = ctx.api_version
    code, unknown, listings = ctx.broker.txns.list_transactions(
        list(req.state_filters or []), list(req.producer_id_filters or []),
        req.duration_filter if version >= 1 else -1,
        req.transactional_id_pattern if version >= 2 else None)
    visible = authorized_names(ctx, acl.DESCRIBE, acl.TRANSACTIONAL_ID, [x.transactional_id for x in listings])
    listings = [x for x in listings if x.transactional_id in visible]  # as Kafka: only what one may DESCRIBE
    return ListTransactionsResponse(throttle_time_ms=0, error_code=code, unknown_state_filters=unknown,
                                    transaction_states=[TxnState(transactional_id=x.transactional_id,
                                                                 producer_id=x.producer_id,
                                                                 transaction_state=x.state) for x in listings])
