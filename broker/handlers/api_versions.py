"""ApiVersions: advertises exactly the dispatch table."""
from __future__ import annotations

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from ..connection import api_versions_list
from ..context import RequestContext
from ..registry import handles


@handles(ApiVersionsRequest, ApiVersionsResponse, 0, 4)
async def handle_api_versions(ctx: RequestContext, req: ApiVersionsRequest) -> ApiVersionsResponse:
    return ApiVersionsResponse(error_code=0, api_keys=api_versions_list(), throttle_time_ms=0,
                               supported_features=[], finalized_features_epoch=-1, finalized_features=[])
