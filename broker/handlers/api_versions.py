"""ApiVersions: advertises exactly the dispatch table, plus the supported and finalized feature
versions (v3+, broker/config/features.py). As Kafka does (KIP-1022), requests below v4 are not told about
supported features whose range starts at 0: older clients assumed a minimum of 1."""
from __future__ import annotations

import re
from collections import OrderedDict

from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from minikafka.broker.network.connection import api_versions_list
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.protocol.errors import INVALID_REQUEST

# Kafka ApiVersionsRequest.isValid (v3+): client software name and version must match this, else
# INVALID_REQUEST with an empty api_keys list (ApiVersionsRequest.getErrorResponse)
_SOFTWARE_NAME_VERSION = re.compile(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?")
FEATURE_LEVEL_0_SINCE = 4


def _features(ctx: RequestContext) -> dict:
    features = getattr(ctx.broker, "features", None)
    if features is None or ctx.api_version < 3:
        return {"supported_features": [], "finalized_features_epoch": -1, "finalized_features": []}
    drop_min_0 = ctx.api_version < FEATURE_LEVEL_0_SINCE
    supported = [ApiVersionsResponse.SupportedFeatureKey(name=f.name, min_version=f.min_version,
                                                         max_version=f.max_version)
                 for f in features.supported() if not (drop_min_0 and f.min_version == 0)]
    levels = features.finalized()
    quorum = getattr(ctx.broker, "quorum", None)
    if quorum is not None:
        # a quorum node: kraft.version 0-1 supported (a static quorum may be upgraded to 1, KAFKA-16538) and, in a
        # dynamic quorum (KIP-853), finalized at the quorum's level, as Kafka's KRaftMetadataCache reports the raft
        # client's kraft.version
        supported = [s for s in supported if s.name != "kraft.version"]
        supported.append(ApiVersionsResponse.SupportedFeatureKey(name="kraft.version", min_version=0, max_version=1))
        if drop_min_0:
            supported.pop()
        if quorum.node.kraft_version >= 1:
            levels = {**levels, "kraft.version": quorum.node.kraft_version}
    finalized = [ApiVersionsResponse.FinalizedFeatureKey(name=name, max_version_level=level, min_version_level=level)
                 for name, level in sorted(levels.items())]
    return {"supported_features": supported, "finalized_features_epoch": features.epoch,
            "finalized_features": finalized}


SOFTWARE_TABLE_SIZE = 16384  # connections whose software name/version are remembered


def note_client_software(state, peer: str, name: str, version: str) -> None:
    """Kafka's ClientInformation: the software name and version an ApiVersions v3+ told, kept per connection
    (bounded, oldest out first) for client metrics subscriptions' `client_software_*` match patterns (KIP-714)."""
    table = getattr(state, "client_software", None)
    if table is None:
        table = OrderedDict()
        try:
            state.client_software = table
        except AttributeError:
            return
    table[peer] = (name, version)
    table.move_to_end(peer)
    while len(table) > SOFTWARE_TABLE_SIZE:
        table.popitem(last=False)


@handles(ApiVersionsRequest, ApiVersionsResponse, 0, 4)
async def handle_api_versions(ctx: RequestContext, req: ApiVersionsRequest) -> ApiVersionsResponse:
    if ctx.api_version >= 3 and not (_SOFTWARE_NAME_VERSION.fullmatch(req.client_software_name)
                                     and _SOFTWARE_NAME_VERSION.fullmatch(req.client_software_version)):
        return ApiVersionsResponse(error_code=INVALID_REQUEST, api_keys=[], throttle_time_ms=0,
                                   supported_features=[], finalized_features_epoch=-1, finalized_features=[])
    if ctx.api_version >= 3:  # KIP-714 subscriptions may match on them (client_software_name/_version)
        note_client_software(ctx.broker, ctx.peer, req.client_software_name, req.client_software_version)
    config = getattr(ctx.broker, "config", None)
    controller = ctx.listener in getattr(config, "controller_listener_names", ())
    quorum = getattr(config, "quorum", None) is not None
    return ApiVersionsResponse(error_code=0, api_keys=api_versions_list(controller, quorum), throttle_time_ms=0,
                               **_features(ctx))
