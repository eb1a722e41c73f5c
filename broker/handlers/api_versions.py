"""ApiVersions: advertises exactly the dispatch table."""
from __future__ import annotations

import re

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from ..connection import api_versions_list
from ..context import RequestContext
from ..registry import handles


# Kafka ApiVersionsRequest.isValid (v3+): client software name and version must match this, else
# INVALID_REQUEST with an empty api_keys list (ApiVersionsRequest.getErrorResponse)
_SOFTWARE_NAME_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")
INVALID_REQUEST = 42


@handles(ApiVersionsRequest, ApiVersionsResponse, 0, 4)
async def handle_api_versions(ctx: RequestContext, req: ApiVersionsRequest) -> ApiVersionsResponse:
    if ctx.api_version >= 3 and not (_SOFTWARE_NAME_VERSION.fullmatch(req.client_software_name)
                                     and _SOFTWARE_NAME_VERSION.fullmatch(req.client_software_version)):
        return ApiVersionsResponse(error_code=INVALID_REQUEST, api_keys=[], throttle_time_ms=0,
                                   supported_features=[], finalized_features_epoch=-1, finalized_features=[])
    return ApiVersionsResponse(error_code=0, api_keys=api_versions_list(), throttle_time_ms=0,
                               supported_features=[], finalized_features_epoch=-1, finalized_features=[])
