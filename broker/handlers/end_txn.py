"""EndTxn: commit or abort the producer's transaction. Versions 0-4 (v5 is KIP-890 part 2's epoch bump
per transaction, which comes with transaction.version 2, not offered here)."""
from __future__ import annotations

from kafka.protocol.producer import EndTxnRequest, EndTxnResponse

from ..context import RequestContext
from ..registry import handles
from .txn_common import for_version

FENCED_SINCE = 2


@handles(EndTxnRequest, EndTxnResponse, 0, 4)
async def handle_end_txn(ctx: RequestContext, req: EndTxnRequest) -> EndTxnResponse:
    code = ctx.broker.txns.end_txn(req.transactional_id, req.producer_id, req.producer_epoch, req.committed)
    return EndTxnResponse(throttle_time_ms=0, error_code=for_version(code, ctx.api_version, FENCED_SINCE))
