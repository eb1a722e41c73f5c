"""DescribeProducers (KIP-664): the producer ids with state in each requested partition."""
from __future__ import annotations

import kafka.errors as ke
from kafka.protocol.admin import DescribeProducersRequest, DescribeProducersResponse

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.broker.topic_catalog import InvalidTopicNameError, validate_topic_name
from minikafka.broker.handlers.common import lookup_partition

TopicResponse = DescribeProducersResponse.TopicResponse
PartitionResponse = TopicResponse.PartitionResponse
ProducerState = PartitionResponse.ProducerState
UNKNOWN_TOPIC_OR_PARTITION = ke.UnknownTopicOrPartitionError.errno
NOT_HOSTED = "This server does not host this topic-partition."


@handles(DescribeProducersRequest, DescribeProducersResponse, 0, 0)
async def handle_describe_producers(ctx: RequestContext, req: DescribeProducersRequest) -> DescribeProducersResponse:
    state = ctx.broker
    topics = []
    for t in req.topics:
        known_topic = state.catalog.get(t.name) is not None
        parts = []
        try:  # Kafka validates the name first: an invalid one is INVALID_TOPIC_EXCEPTION, authorized or not
            validate_topic_name(t.name)
        except InvalidTopicNameError as exc:
            topics.append(TopicResponse(name=t.name, partitions=[
                PartitionResponse(partition_index=index, error_code=ke.InvalidTopicError.errno,
                                  error_message=str(exc), active_producers=[]) for index in t.partition_indexes]))
            continue
        if not authorize(ctx, acl.READ, acl.TOPIC, t.name):
            topics.append(TopicResponse(name=t.name, partitions=[
                PartitionResponse(partition_index=index, error_code=ke.TopicAuthorizationFailedError.errno,
                                  error_message="Topic authorization failed.", active_producers=[])
                for index in t.partition_indexes]))
            continue
        for index in t.partition_indexes:
            plog, code = lookup_partition(state, t.name, index)
            if plog is None:
                # Kafka explains an unknown topic, not an unknown partition of a known one
                parts.append(PartitionResponse(partition_index=index, error_code=code,
                                               error_message=None if known_topic else NOT_HOSTED,
                                               active_producers=[]))
                continue
            producers = [ProducerState(producer_id=e.producer_id, producer_epoch=e.producer_epoch,
                                       last_sequence=e.last_seq, last_timestamp=e.last_timestamp,
                                       coordinator_epoch=e.coordinator_epoch,
                                       current_txn_start_offset=e.current_txn_first_offset)
                         for e in plog.active_producers()]
            parts.append(PartitionResponse(partition_index=index, error_code=0, error_message=None,
                                           active_producers=producers))
        topics.append(TopicResponse(name=t.name, partitions=parts))
    return DescribeProducersResponse(throttle_time_ms=0, topics=topics)
