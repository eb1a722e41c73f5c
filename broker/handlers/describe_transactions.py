"""DescribeTransactions (KIP-664): state, producer, timeout, start time and partitions per id."""
from __future__ import annotations

import kafka.errors as ke

from kafka.protocol.admin.transactions import DescribeTransactionsRequest, DescribeTransactionsResponse

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize, authorized_names
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles

TxnState = DescribeTransactionsResponse.TransactionState
TopicData = TxnState.TopicData


@handles(DescribeTransactionsRequest, DescribeTransactionsResponse, 0, 0)
async def handle_describe_transactions(ctx: RequestContext,
                                       req: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    out = []
    for txn_id in req.transactional_ids:
        if not authorize(ctx, acl.DESCRIBE, acl.TRANSACTIONAL_ID, txn_id):
            out.append(TxnState(error_code=ke.TransactionalIdAuthorizationFailedError.errno, transactional_id=txn_id,
                                transaction_state="", transaction_timeout_ms=0, transaction_start_time_ms=0,
                                producer_id=0, producer_epoch=0, topics=[]))
            continue
        if (code := await ctx.broker.txns.txns.committed_view(txn_id)):  # cluster: only replicated state is shown
            out.append(TxnState(error_code=code, transactional_id=txn_id, transaction_state="",
                                transaction_timeout_ms=0, transaction_start_time_ms=0, producer_id=0,
                                producer_epoch=0, topics=[]))
            continue
        d = ctx.broker.txns.describe(txn_id)
        by_topic: dict[str, list[int]] = {}
        visible = authorized_names(ctx, acl.DESCRIBE, acl.TOPIC, {topic for topic, _p in d.partitions})
        for topic, p in d.partitions:
            if topic not in visible:  # only the partitions of topics the principal may DESCRIBE
                continue
            by_topic.setdefault(topic, []).append(p)
        out.append(TxnState(error_code=d.error_code, transactional_id=txn_id, transaction_state=d.state,
                            transaction_timeout_ms=d.timeout_ms, transaction_start_time_ms=d.start_ms,
                            producer_id=d.producer_id, producer_epoch=d.producer_epoch,
                            topics=[TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()]))
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=out)
