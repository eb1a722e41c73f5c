"""WriteTxnMarkers: append COMMIT/ABORT markers as a coordinator would (the in-process coordinator uses
the same path). Per partition: UNKNOWN_TOPIC_OR_PARTITION, INVALID_PRODUCER_EPOCH for a marker older
than the producer's epoch (TV2, v2's transaction_version 2: not newer than it), TRANSACTION_COORDINATOR_FENCED
for an older coordinator epoch."""
from __future__ import annotations

import kafka.errors as ke

from kafka.protocol.producer import WriteTxnMarkersRequest, WriteTxnMarkersResponse

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize_cluster
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles

MarkerResult = WriteTxnMarkersResponse.WritableTxnMarkerResult
TopicResult = MarkerResult.WritableTxnMarkerTopicResult
PartitionResult = TopicResult.WritableTxnMarkerPartitionResult


@handles(WriteTxnMarkersRequest, WriteTxnMarkersResponse, 1, 2)
async def handle_write_txn_markers(ctx: RequestContext, req: WriteTxnMarkersRequest) -> WriteTxnMarkersResponse:
    if not (authorize_cluster(ctx, acl.ALTER) or authorize_cluster(ctx, acl.CLUSTER_ACTION)):
        # Kafka: ALTER or CLUSTER_ACTION on the cluster, else every partition CLUSTER_AUTHORIZATION_FAILED
        code = ke.ClusterAuthorizationFailedError.errno
        return WriteTxnMarkersResponse(markers=[MarkerResult(producer_id=m.producer_id, topics=[
            TopicResult(name=t.name, partitions=[PartitionResult(partition_index=p, error_code=code)
                                                 for p in t.partition_indexes]) for t in m.topics])
            for m in req.markers])
    writer = ctx.broker.txns.markers
    if writer.route is not None:
        return await _write_replicated(writer, req, ctx.api_version)
    markers = []
    for m in req.markers:
        topics = []
        for t in m.topics:
            parts = [PartitionResult(partition_index=p,
                                     error_code=writer.write(t.name, p, m.producer_id, m.producer_epoch,
                                                             m.transaction_result, m.coordinator_epoch,
                                                             m.transaction_version if ctx.api_version >= 2 else 0))
                     for p in t.partition_indexes]
            topics.append(TopicResult(name=t.name, partitions=parts))
        markers.append(MarkerResult(producer_id=m.producer_id, topics=topics))
    return WriteTxnMarkersResponse(markers=markers)


async def _write_replicated(writer, req: WriteTxnMarkersRequest, version: int) -> WriteTxnMarkersResponse:
    """Cluster: each marker appended by this node as the partition's leader (NOT_LEADER_OR_FOLLOWER
    otherwise) and answered once replicated, as Kafka appends markers with acks=all."""
    import asyncio

    from minikafka.coordinator.txn.markers import Marker
    markers = []
    for m in req.markers:
        marker = Marker(m.producer_id, m.producer_epoch, m.transaction_result, m.coordinator_epoch,
                        m.transaction_version if version >= 2 else 0, ())
        tps = [(t.name, p) for t in m.topics for p in t.partition_indexes]
        codes: dict = {}
        for part in await asyncio.gather(*(writer.write_replicated(tp, marker) for tp in tps)):
            codes.update(part)
        markers.append(MarkerResult(producer_id=m.producer_id, topics=[
            TopicResult(name=t.name, partitions=[PartitionResult(partition_index=p, error_code=codes[(t.name, p)])
                                                 for p in t.partition_indexes]) for t in m.topics]))
    return WriteTxnMarkersResponse(markers=markers)
