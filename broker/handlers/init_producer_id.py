"""InitProducerId: without a transactional id a fresh producer id at epoch 0, as Kafka does; with one,
the transaction coordinator (bump the epoch, fence the previous instance, KIP-360 resumption)."""
from __future__ import annotations

import kafka.errors as ke
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize, authorize_by_resource_type, authorize_cluster
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles


@handles(InitProducerIdRequest, InitProducerIdResponse, 0, 5)
async def handle_init_producer_id(ctx: RequestContext, req: InitProducerIdRequest) -> InitProducerIdResponse:
    if ctx.broker.authorizer is not None:
        # transactional: WRITE on the transactional id; idempotent: IDEMPOTENT_WRITE on the cluster or
        # WRITE on some topic (KIP-679)
        if req.transactional_id is not None:
            if not authorize(ctx, acl.WRITE, acl.TRANSACTIONAL_ID, req.transactional_id):
                return InitProducerIdResponse(throttle_time_ms=0, producer_id=-1, producer_epoch=-1,
                                              error_code=ke.TransactionalIdAuthorizationFailedError.errno)
        elif not (authorize_cluster(ctx, acl.IDEMPOTENT_WRITE)
                  or authorize_by_resource_type(ctx, acl.WRITE, acl.TOPIC)):
            return InitProducerIdResponse(throttle_time_ms=0, producer_id=-1, producer_epoch=-1,
                                          error_code=ke.ClusterAuthorizationFailedError.errno)
    pid, epoch = (req.producer_id, req.producer_epoch) if ctx.api_version >= 3 else (-1, -1)
    if (pid == -1) != (epoch == -1):
        return InitProducerIdResponse(throttle_time_ms=0, error_code=ke.InvalidRequestError.errno,
                                      producer_id=-1, producer_epoch=-1)
    if ctx.broker.cluster is not None and not await ctx.broker.producer_ids.ensure():
        # a cluster: no producer id block from the controller yet (Kafka's RPCProducerIdManager)
        return InitProducerIdResponse(throttle_time_ms=0, error_code=ke.CoordinatorLoadInProgressError.errno,
                                      producer_id=-1, producer_epoch=-1)
    if req.transactional_id is not None:
        try:  # __transaction_state on first use, off the event loop (FindCoordinator usually made it)
            if req.transactional_id:
                await ctx.broker.ensure_internal_topic("__transaction_state")
        except Exception:
            return InitProducerIdResponse(throttle_time_ms=0, error_code=ke.CoordinatorNotAvailableError.errno,
                                          producer_id=-1, producer_epoch=-1)
        code, pid, epoch = ctx.broker.txns.init_producer_id(req.transactional_id, req.transaction_timeout_ms,
                                                            None if pid == -1 else (pid, epoch))
        if ctx.broker.txns.clustered and not code:
            from minikafka.broker.handlers.txn_common import durable
            if (code := await durable(ctx.broker, req.transactional_id, code)):
                pid, epoch = -1, -1
        if code == ke.ProducerFencedError.errno and ctx.api_version < 4:
            code = ke.InvalidProducerEpochError.errno
        return InitProducerIdResponse(throttle_time_ms=0, error_code=code, producer_id=pid, producer_epoch=epoch)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0,
                                  producer_id=ctx.broker.producer_ids.next_id(), producer_epoch=0)
