"""EndTxn: commit or abort the producer's transaction. v0-4 end it with the producer's epoch (TV1);
v5 (KIP-890 part 2, a client of transaction.version 2) ends it with an epoch bump and answers with
the producer id/epoch the client continues with (a new producer id once the epochs run out)."""
from __future__ import annotations

import kafka.errors as ke

from kafka.protocol.producer import EndTxnRequest, EndTxnResponse

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.broker.handlers.txn_common import durable, for_version

FENCED_SINCE = 2
TV2_SINCE = 5


@handles(EndTxnRequest, EndTxnResponse, 0, 5)
async def handle_end_txn(ctx: RequestContext, req: EndTxnRequest) -> EndTxnResponse:
    version = ctx.api_version
    if not authorize(ctx, acl.WRITE, acl.TRANSACTIONAL_ID, req.transactional_id):
        return EndTxnResponse(throttle_time_ms=0, error_code=ke.TransactionalIdAuthorizationFailedError.errno,
                              producer_id=-1, producer_epoch=-1)
    res = ctx.broker.txns.end_transaction(req.transactional_id, req.producer_id, req.producer_epoch, req.committed,
                                          client_tv=2 if version >= TV2_SINCE else 0)
    if ctx.broker.txns.clustered and not res.error_code:  # the PREPARE record replicated first
        if (code := await durable(ctx.broker, req.transactional_id, 0)):
            res = res._replace(error_code=code, producer_id=-1, producer_epoch=-1)
    return EndTxnResponse(throttle_time_ms=0, error_code=for_version(res.error_code, version, FENCED_SINCE),
                          producer_id=res.producer_id, producer_epoch=res.producer_epoch)
