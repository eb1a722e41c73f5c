"""DeleteRecords: advance a partition's log start offset (-1 means the high watermark)."""
from __future__ import annotations

import kafka.errors as ke

from kafka.protocol.admin import DeleteRecordsRequest, DeleteRecordsResponse

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorized_names
from minikafka.broker.network.context import RequestContext
from minikafka.broker.errors import error_code
from minikafka.broker.network.registry import handles
from minikafka.broker.handlers.common import INTERNAL_TOPICS, INVALID_TOPIC, lookup_partition

TopicResult = DeleteRecordsResponse.DeleteRecordsTopicResult
PartitionResult = TopicResult.DeleteRecordsPartitionResult


@handles(DeleteRecordsRequest, DeleteRecordsResponse, 0, 2)
async def handle_delete_records(ctx: RequestContext, req: DeleteRecordsRequest) -> DeleteRecordsResponse:
    topics = []
    deletable = authorized_names(ctx, acl.DELETE, acl.TOPIC, [t.name for t in req.topics])
    for t in req.topics:
        parts = []
        for p in t.partitions:
            if t.name not in deletable:  # DELETE on the topic, checked before its existence
                parts.append(PartitionResult(partition_index=p.partition_index, low_watermark=-1,
                                             error_code=ke.TopicAuthorizationFailedError.errno))
                continue
            plog, code = lookup_partition(ctx.broker, t.name, p.partition_index)
            if not code and t.name in INTERNAL_TOPICS:  # Kafka: "Cannot delete records of internal topic"
                plog, code = None, INVALID_TOPIC
            if not code and ctx.broker.replicas is not None:  # a cluster: only on the leader
                code = ctx.broker.replicas.leader_error(t.name, p.partition_index)
                plog = plog if not code else None
            low = -1
            if plog is not None:
                try:
                    target = plog.high_watermark if p.offset == -1 else p.offset
                    low = plog.delete_records_before(target)
                except Exception as exc:
                    code = error_code(exc)
            parts.append(PartitionResult(partition_index=p.partition_index, low_watermark=low, error_code=code))
        topics.append(TopicResult(name=t.name, partitions=parts))
    return DeleteRecordsResponse(throttle_time_ms=0, topics=topics)
