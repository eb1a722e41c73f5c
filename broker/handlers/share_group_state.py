"""The share-group state RPCs (KIP-932), broker to broker: InitializeShareGroupState (83), ReadShareGroupState
(84), WriteShareGroupState (85), DeleteShareGroupState (86), ReadShareGroupStateSummary (87), answered by the
share coordinator of this node (coordinator/share/), as Kafka 4.3.1's KafkaApis and ShareCoordinatorService:

- CLUSTER_ACTION on the cluster, else every partition CLUSTER_AUTHORIZATION_FAILED (the error's message);
- an empty group id, no topics, or a topic without partitions: an empty answer;
- each share-partition is one request to its coordinator partition, all handled concurrently; a topic named
  twice is answered once, a partition named twice once (the last).
"""
from __future__ import annotations

import asyncio
import uuid
from typing import Any, Awaitable, Callable

from minikafka.protocol.errors import CLUSTER_AUTHORIZATION_FAILED
from minikafka.protocol.messages import (
    DeleteShareGroupStateRequest,
    DeleteShareGroupStateResponse,
    InitializeShareGroupStateRequest,
    InitializeShareGroupStateResponse,
    ReadShareGroupStateRequest,
    ReadShareGroupStateResponse,
    ReadShareGroupStateSummaryRequest,
    ReadShareGroupStateSummaryResponse,
    WriteShareGroupStateRequest,
    WriteShareGroupStateResponse,
)
from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize_cluster
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles

CLUSTER_AUTHORIZATION_MESSAGE = "Cluster authorization failed."

Init = InitializeShareGroupStateResponse.InitializeStateResult
Read = ReadShareGroupStateResponse.ReadStateResult
Write = WriteShareGroupStateResponse.WriteStateResult
Delete = DeleteShareGroupStateResponse.DeleteStateResult
Summary = ReadShareGroupStateSummaryResponse.ReadStateSummaryResult


def _valid(req: Any) -> bool:
    return bool(req.group_id) and bool(req.topics) and all(t.partitions for t in req.topics)


async def _per_partition(req: Any, call: Callable[[uuid.UUID, Any], Awaitable[Any]],
                         result: Callable[[uuid.UUID, list], Any]) -> list:
    """`call(topic_id, partition data)` for every share-partition at once; the results by topic."""
    parts: dict[uuid.UUID, dict[int, Any]] = {}
    for t in req.topics:
        for p in t.partitions:
            parts.setdefault(t.topic_id, {})[p.partition] = p
    keys = [(tid, p) for tid, ps in parts.items() for p in ps.values()]
    answers = await asyncio.gather(*(call(tid, p) for tid, p in keys))
    by_topic: dict[uuid.UUID, list] = {}
    for (tid, _p), a in zip(keys, answers):
        by_topic.setdefault(tid, []).append(a)
    return [result(tid, results) for tid, results in by_topic.items()]


def _denied(req: Any, result: Callable[[uuid.UUID, list], Any], partition_result: type) -> list:
    return [result(t.topic_id, [partition_result(partition=p.partition, error_code=CLUSTER_AUTHORIZATION_FAILED,
                                                 error_message=CLUSTER_AUTHORIZATION_MESSAGE)
                                for p in t.partitions]) for t in req.topics]


@handles(InitializeShareGroupStateRequest, InitializeShareGroupStateResponse, 0, 0)
async def handle_initialize(ctx: RequestContext, req: Any) -> Any:
    PR = Init.PartitionResult
    make = lambda tid, ps: Init(topic_id=tid, partitions=ps)  # noqa: E731
    if not authorize_cluster(ctx, acl.CLUSTER_ACTION):
        return InitializeShareGroupStateResponse(results=_denied(req, make, PR))
    if not _valid(req):
        return InitializeShareGroupStateResponse(results=[])
    sc = ctx.broker.share_coordinator

    async def one(tid: uuid.UUID, p: Any) -> Any:
        s = await sc.initialize_state(req.group_id, tid, p.partition, p.state_epoch, p.start_offset)
        return PR(partition=p.partition, error_code=s.error_code, error_message=s.error_message)
    return InitializeShareGroupStateResponse(results=await _per_partition(req, one, make))


@handles(ReadShareGroupStateRequest, ReadShareGroupStateResponse, 0, 0)
async def handle_read(ctx: RequestContext, req: Any) -> Any:
    PR = Read.PartitionResult
    make = lambda tid, ps: Read(topic_id=tid, partitions=ps)  # noqa: E731
    if not authorize_cluster(ctx, acl.CLUSTER_ACTION):
        return ReadShareGroupStateResponse(results=_denied(req, make, PR))
    if not _valid(req):
        return ReadShareGroupStateResponse(results=[])
    sc = ctx.broker.share_coordinator

    async def one(tid: uuid.UUID, p: Any) -> Any:
        s = await sc.read_state(req.group_id, tid, p.partition, p.leader_epoch)
        if s.error_code:
            return PR(partition=p.partition, error_code=s.error_code, error_message=s.error_message, state_epoch=0,
                      start_offset=0, state_batches=[])
        return PR(partition=p.partition, error_code=0, error_message=None, state_epoch=s.state_epoch,
                  start_offset=s.start_offset,
                  state_batches=[PR.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                               delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                                 for b in s.state_batches])
    return ReadShareGroupStateResponse(results=await _per_partition(req, one, make))


@handles(WriteShareGroupStateRequest, WriteShareGroupStateResponse, 0, 1)
async def handle_write(ctx: RequestContext, req: Any) -> Any:
    from minikafka.coordinator.share.persister import StateBatch
    PR = Write.PartitionResult
    make = lambda tid, ps: Write(topic_id=tid, partitions=ps)  # noqa: E731
    if not authorize_cluster(ctx, acl.CLUSTER_ACTION):
        return WriteShareGroupStateResponse(results=_denied(req, make, PR))
    if not _valid(req):
        return WriteShareGroupStateResponse(results=[])
    sc = ctx.broker.share_coordinator
    v1 = ctx.api_version >= 1

    async def one(tid: uuid.UUID, p: Any) -> Any:
        batches = [StateBatch(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                   for b in p.state_batches]
        s = await sc.write_state(req.group_id, tid, p.partition, p.state_epoch, p.leader_epoch, p.start_offset,
                                 batches, p.delivery_complete_count if v1 else -1)
        return PR(partition=p.partition, error_code=s.error_code, error_message=s.error_message)
    return WriteShareGroupStateResponse(results=await _per_partition(req, one, make))


@handles(DeleteShareGroupStateRequest, DeleteShareGroupStateResponse, 0, 0)
async def handle_delete(ctx: RequestContext, req: Any) -> Any:
    PR = Delete.PartitionResult
    make = lambda tid, ps: Delete(topic_id=tid, partitions=ps)  # noqa: E731
    if not authorize_cluster(ctx, acl.CLUSTER_ACTION):
        return DeleteShareGroupStateResponse(results=_denied(req, make, PR))
    if not _valid(req):
        return DeleteShareGroupStateResponse(results=[])
    sc = ctx.broker.share_coordinator

    async def one(tid: uuid.UUID, p: Any) -> Any:
        s = await sc.delete_state(req.group_id, tid, p.partition)
        return PR(partition=p.partition, error_code=s.error_code, error_message=s.error_message)
    return DeleteShareGroupStateResponse(results=await _per_partition(req, one, make))


@handles(ReadShareGroupStateSummaryRequest, ReadShareGroupStateSummaryResponse, 0, 1)
async def handle_read_summary(ctx: RequestContext, req: Any) -> Any:
    PR = Summary.PartitionResult
    make = lambda tid, ps: Summary(topic_id=tid, partitions=ps)  # noqa: E731
    if not authorize_cluster(ctx, acl.CLUSTER_ACTION):
        return ReadShareGroupStateSummaryResponse(results=_denied(req, make, PR))
    if not _valid(req):
        return ReadShareGroupStateSummaryResponse(results=[])
    sc = ctx.broker.share_coordinator

    async def one(tid: uuid.UUID, p: Any) -> Any:
        s = await sc.read_state_summary(req.group_id, tid, p.partition, p.leader_epoch)
        if s.error_code:
            return PR(partition=p.partition, error_code=s.error_code, error_message=s.error_message, state_epoch=0,
                      leader_epoch=0, start_offset=0, delivery_complete_count=-1)
        return PR(partition=p.partition, error_code=0, error_message=None, state_epoch=s.state_epoch,
                  leader_epoch=s.leader_epoch, start_offset=s.start_offset,
                  delivery_complete_count=s.delivery_complete_count)
    return ReadShareGroupStateSummaryResponse(results=await _per_partition(req, one, make))
