"""InitProducerId without a transactional id: a fresh producer id at epoch 0, as Kafka does."""
from __future__ import annotations

import kafka.errors as ke
from kafka.protocol.producer import InitProducerIdRequest, InitProducerIdResponse

from ..context import RequestContext
from ..registry import handles


@handles(InitProducerIdRequest, InitProducerIdResponse, 0, 5)
async def handle_init_producer_id(ctx: RequestContext, req: InitProducerIdRequest) -> InitProducerIdResponse:
    if req.transactional_id is not None:
        # Transactions are not served yet; FindCoordinator(TRANSACTION) is not advertised either.
        return InitProducerIdResponse(throttle_time_ms=0, error_code=ke.CoordinatorNotAvailableError.errno,
                                      producer_id=-1, producer_epoch=-1)
    return InitProducerIdResponse(throttle_time_ms=0, error_code=0,
                                  producer_id=ctx.broker.producer_ids.next_id(), producer_epoch=0)
