"""AddOffsetsToTxn: the group's `__consumer_offsets` partition joins the transaction, so that its
TxnOffsetCommit offsets are settled by the transaction's marker."""
from __future__ import annotations

import kafka.errors as ke

from kafka.protocol.producer import AddOffsetsToTxnRequest, AddOffsetsToTxnResponse

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.broker.handlers.txn_common import durable, for_version

FENCED_SINCE = 2


@handles(AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, 0, 4)
async def handle_add_offsets_to_txn(ctx: RequestContext, req: AddOffsetsToTxnRequest) -> AddOffsetsToTxnResponse:
    if not authorize(ctx, acl.WRITE, acl.TRANSACTIONAL_ID, req.transactional_id):
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=ke.TransactionalIdAuthorizationFailedError.errno)
    if not authorize(ctx, acl.READ, acl.GROUP, req.group_id):
        return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=ke.GroupAuthorizationFailedError.errno)
    code = ctx.broker.txns.add_offsets(req.transactional_id, req.producer_id, req.producer_epoch, req.group_id)
    if ctx.broker.txns.clustered:
        code = await durable(ctx.broker, req.transactional_id, code)
    return AddOffsetsToTxnResponse(throttle_time_ms=0, error_code=for_version(code, ctx.api_version, FENCED_SINCE))
