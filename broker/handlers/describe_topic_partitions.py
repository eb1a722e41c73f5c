"""DescribeTopicPartitions (KIP-966, API 75): what the Java 4.x admin client's describeTopics uses.

As Kafka's DescribeTopicPartitionsRequestHandler: the named topics (or all, if none are named), from
the cursor's topic on, sorted by name, at most `response_partition_limit` partitions (clamped to
[1, max.request.partition.size.limit = 2000]); `next_cursor` points at the first partition left out.
A named topic that does not exist answers UNKNOWN_TOPIC_OR_PARTITION (INVALID_TOPIC_EXCEPTION for
an illegal name); in the listing of all topics there are none. A cursor whose topic is not among
the named ones, or with a negative partition, fails the whole request with INVALID_REQUEST (an
empty topic name with UNKNOWN_SERVER_ERROR, as Kafka's authorizer call fails on it).
"""
from __future__ import annotations

import kafka.errors as ke
from kafka.protocol.admin import DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse

from minikafka.broker.security.authorized_operations import TOPIC_OPERATIONS, bitfield
from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorized_names, authorized_operations
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.broker.topic_catalog import InvalidTopicNameError, validate_topic_name
from minikafka.broker.handlers.common import INTERNAL_TOPICS, LEADER_EPOCH, ZERO_UUID

Topic = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
Partition = Topic.DescribeTopicPartitionsResponsePartition
Cursor = DescribeTopicPartitionsResponse.Cursor
MAX_PARTITIONS = 2000  # Kafka's max.request.partition.size.limit default
TOPIC_OPS = bitfield(TOPIC_OPERATIONS)  # this field is a plain int32 in kafka.protocol


class _RequestError(Exception):
    """Fails the whole request: every named topic gets `code` (Kafka's getErrorResponse)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def _error_topic(name: str, code: int) -> Topic:
    return Topic(error_code=code, name=name, topic_id=ZERO_UUID, is_internal=name in INTERNAL_TOPICS,
                 partitions=[], topic_authorized_operations=TOPIC_OPS)


def _describe(ctx: RequestContext, req: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    state = ctx.broker
    catalog = state.catalog
    node = state.node_id
    fetch_all = not req.topics
    cursor = req.cursor
    cursor_topic = cursor.topic_name if cursor is not None else ""
    if fetch_all:
        names = {n for n in catalog.topics if n >= cursor_topic}
    else:
        names = {t.name for t in req.topics if t.name >= cursor_topic}
        if cursor is not None and cursor.topic_name not in names:
            raise _RequestError(ke.InvalidRequestError.errno, "DescribeTopicPartitionsRequest topic list should "
                                f"contain the cursor topic: {cursor.topic_name}")
    if cursor is not None and cursor.partition_index < 0:
        raise _RequestError(ke.InvalidRequestError.errno, "DescribeTopicPartitionsRequest cursor partition must be valid")
    if "" in names:  # Kafka fails the request in its authorization of an empty resource name
        raise _RequestError(-1, "topic name is empty")
    denied: list[Topic] = []  # after the others; not even checked for existence (as Kafka)
    if state.authorizer is not None:
        visible = authorized_names(ctx, acl.DESCRIBE, acl.TOPIC, names)
        if not fetch_all:
            denied = [Topic(error_code=ke.TopicAuthorizationFailedError.errno, name=n, topic_id=ZERO_UUID,
                            is_internal=False, partitions=[], topic_authorized_operations=bitfield(None))
                      for n in sorted(names - visible)]
        names = visible
    remaining = max(min(MAX_PARTITIONS, req.response_partition_limit), 1)
    topics: list[Topic] = []
    next_cursor = None
    for name in sorted(names):
        if remaining == 0:
            next_cursor = Cursor(topic_name=name, partition_index=0)
            break
        info = catalog.get(name)
        if info is None:
            if not fetch_all:
                try:
                    validate_topic_name(name)
                    code = ke.UnknownTopicOrPartitionError.errno
                except InvalidTopicNameError:
                    code = ke.InvalidTopicError.errno
                topics.append(_error_topic(name, code))
            continue
        start = cursor.partition_index if cursor is not None and name == cursor_topic else 0
        upper = min(info.partitions, start + remaining)
        if state.cluster is not None:  # a cluster: from the metadata image
            from minikafka.broker.cluster.views import partition_view
            views = [(p, partition_view(state.cluster.image, name, p, ctx.listener)) for p in range(start, upper)]
            parts = [Partition(error_code=v.error, partition_index=p, leader_id=v.leader, leader_epoch=v.leader_epoch,
                               replica_nodes=v.replicas, isr_nodes=v.isr, eligible_leader_replicas=v.elr,
                               last_known_elr=v.last_known_elr, offline_replicas=v.offline)
                     for p, v in views if v is not None]
        else:
            parts = [Partition(error_code=0, partition_index=p, leader_id=node, leader_epoch=LEADER_EPOCH,
                               replica_nodes=[node], isr_nodes=[node], eligible_leader_replicas=[], last_known_elr=[],
                               offline_replicas=[]) for p in range(start, upper)]
        topics.append(Topic(error_code=0, name=name, topic_id=info.topic_id,
                            is_internal=info.internal or name in INTERNAL_TOPICS, partitions=parts,
                            topic_authorized_operations=TOPIC_OPS))
        if upper < info.partitions:
            next_cursor = Cursor(topic_name=name, partition_index=upper)
            break
        remaining -= len(parts)
    if state.authorizer is not None:
        for t in topics:
            t.topic_authorized_operations = bitfield(authorized_operations(ctx, acl.TOPIC, t.name))
    return DescribeTopicPartitionsResponse(throttle_time_ms=0, topics=topics + denied, next_cursor=next_cursor)


@handles(DescribeTopicPartitionsRequest, DescribeTopicPartitionsResponse, 0, 0)
async def handle_describe_topic_partitions(ctx: RequestContext,
                                           req: DescribeTopicPartitionsRequest) -> DescribeTopicPartitionsResponse:
    try:
        return _describe(ctx, req)
    except _RequestError as exc:
        # Kafka's getErrorResponse: every named topic with the error, nothing else
        return DescribeTopicPartitionsResponse(throttle_time_ms=0, next_cursor=None, topics=[
            Topic(error_code=exc.code, name=t.name, topic_id=ZERO_UUID, is_internal=False,
                  partitions=[], topic_authorized_operations=bitfield(None)) for t in req.topics])
