"""DescribeTransactions (KIP-664): state, producer, timeout, start time and partitions per id."""
from __future__ import annotations

from kafka.protocol.admin.transactions import DescribeTransactionsRequest, DescribeTransactionsResponse

from ..context import RequestContext
from ..registry import handles

TxnState = DescribeTransactionsResponse.TransactionState
TopicData = TxnState.TopicData


@handles(DescribeTransactionsRequest, DescribeTransactionsResponse, 0, 0)
async def handle_describe_transactions(ctx: RequestContext,
                                       req: DescribeTransactionsRequest) -> DescribeTransactionsResponse:
    out = []
    for txn_id in req.transactional_ids:
        d = ctx.broker.txns.describe(txn_id)
        by_topic: dict[str, list[int]] = {}
        for topic, p in d.partitions:
            by_topic.setdefault(topic, []).append(p)
        out.append(TxnState(error_code=d.error_code, transactional_id=txn_id, transaction_state=d.state,
                            transaction_timeout_ms=d.timeout_ms, transaction_start_time_ms=d.start_ms,
                            producer_id=d.producer_id, producer_epoch=d.producer_epoch,
                            topics=[TopicData(topic=t, partitions=ps) for t, ps in by_topic.items()]))
    return DescribeTransactionsResponse(throttle_time_ms=0, transaction_states=out)
