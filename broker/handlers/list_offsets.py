"""ListOffsets: earliest (-2), latest (-1, LSO for read_committed), max timestamp (-3, v7+), earliest local
(-4, v8+), latest tiered (-5, v9+), earliest pending upload (-6, v11+, KIP-1023), by timestamp.

As Kafka 4.3.1: a special timestamp below the version that introduced it, or any other negative one, is
UNSUPPORTED_VERSION for that partition; without tiered storage -5 and -6 find nothing (offset -1); a
partition answered without an offset has leader epoch -1."""
from __future__ import annotations

import kafka.errors as ke

from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

from minikafka.storage.partition_log import PartitionLog
from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorized_names
from minikafka.broker.network.context import RequestContext
from minikafka.broker.errors import error_code
from minikafka.broker.network.registry import handles
from minikafka.broker.handlers.common import LEADER_EPOCH, leader_epoch_error, lookup_partition

TopicResponse = ListOffsetsResponse.ListOffsetsTopicResponse
PartitionResponse = TopicResponse.ListOffsetsPartitionResponse

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6
READ_COMMITTED = 1
# the first ListOffsets version that knows each special timestamp
SPECIAL_TIMESTAMP_VERSIONS = {LATEST: 0, EARLIEST: 0, MAX_TIMESTAMP: 7, EARLIEST_LOCAL: 8, LATEST_TIERED: 9,
                              EARLIEST_PENDING_UPLOAD: 11}


def timestamp_supported(timestamp: int, version: int) -> bool:
    return timestamp >= 0 or SPECIAL_TIMESTAMP_VERSIONS.get(timestamp, 1 << 15) <= version


def resolve_offset(plog: PartitionLog, timestamp: int, isolation_level: int) -> tuple[int, int]:
    """(offset, timestamp) for one query; (-1, -1) when nothing matches."""
    if timestamp == LATEST:
        return (plog.last_stable_offset if isolation_level == READ_COMMITTED else plog.high_watermark), -1
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return plog.log_start_offset, -1
    if timestamp == MAX_TIMESTAMP:
        offset, ts = plog.max_timestamp()
        return (offset, ts) if offset >= 0 else (-1, -1)
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        return -1, -1  # no tiered storage: nothing was ever tiered nor waits to be
    if timestamp < 0:
        return -1, -1
    found = plog.offset_for_timestamp(timestamp)
    return (found[0], found[1]) if found is not None else (-1, -1)


@handles(ListOffsetsRequest, ListOffsetsResponse, 1, 11)
async def handle_list_offsets(ctx: RequestContext, req: ListOffsetsRequest) -> ListOffsetsResponse:
    topics = []
    # DESCRIBE on each topic (checked once), else TOPIC_AUTHORIZATION_FAILED for its partitions
    allowed = authorized_names(ctx, acl.DESCRIBE, acl.TOPIC, [t.name for t in req.topics]) \
        if ctx.broker.authorizer is not None else None
    for t in req.topics:
        parts = []
        for p in t.partitions:
            if allowed is not None and t.name not in allowed:
                parts.append(PartitionResponse(partition_index=p.partition_index,
                                               error_code=ke.TopicAuthorizationFailedError.errno,
                                               timestamp=-1, offset=-1, leader_epoch=-1))
                continue
            if not timestamp_supported(p.timestamp, ctx.api_version):  # before the partition's lookup (as Kafka)
                parts.append(PartitionResponse(partition_index=p.partition_index,
                                               error_code=ke.UnsupportedVersionError.errno,
                                               timestamp=-1, offset=-1, leader_epoch=-1))
                continue
            plog, code = lookup_partition(ctx.broker, t.name, p.partition_index)
            replicas = ctx.broker.replicas
            if replicas is None:
                code = code or leader_epoch_error(p.current_leader_epoch)
                epoch = LEADER_EPOCH
            else:  # a cluster: the leader answers (latest = its HW)
                code = code or replicas.leader_error(t.name, p.partition_index, p.current_leader_epoch)
                epoch = replicas.leader_epoch(t.name, p.partition_index)
            offset = ts = -1
            if not code:
                try:
                    offset, ts = resolve_offset(plog, p.timestamp, req.isolation_level)
                except Exception as exc:
                    code = error_code(exc)
            parts.append(PartitionResponse(partition_index=p.partition_index, error_code=code, timestamp=ts,
                                           offset=offset, leader_epoch=epoch if not code and offset >= 0 else -1))
        topics.append(TopicResponse(name=t.name, partitions=parts))
    return ListOffsetsResponse(throttle_time_ms=0, topics=topics)
