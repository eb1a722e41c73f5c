"""SaslHandshake on a PLAINTEXT listener: Kafka answers ILLEGAL_SASL_STATE with no mechanisms."""
from __future__ import annotations

import kafka.errors as ke
from kafka.protocol.sasl import SaslHandshakeRequest, SaslHandshakeResponse

from ..context import RequestContext
from ..registry import handles


@handles(SaslHandshakeRequest, SaslHandshakeResponse, 0, 1)
async def handle_sasl_handshake(ctx: RequestContext, req: SaslHandshakeRequest) -> SaslHandshakeResponse:
    return SaslHandshakeResponse(error_code=ke.IllegalSaslStateError.errno, mechanisms=[])
