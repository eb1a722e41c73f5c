"""The metadata quorum's RPCs on a controller listener (KRaft combined mode, KIP-595): Vote,
BeginQuorumEpoch, EndQuorumEpoch, Fetch of `__cluster_metadata`-0, and DescribeQuorum for Kafka's
`kafka-metadata-quorum` (DescribeQuorum also on broker listeners of a quorum node: a non-leader
forwards it to the leader, as Kafka's brokers forward it to the active controller). Each request is translated into the Raft core's message
(raft/wire.py) and fed to this node's QuorumDriver; the core's answer is the response.

Kafka's checks first: a request naming another topic/partition is answered UNKNOWN_TOPIC_OR_PARTITION
(Vote/Begin/End at the top level, DescribeQuorum per partition as Kafka 4.3), a cluster id that differs from ours
INCONSISTENT_CLUSTER_ID. DescribeQuorum on a non-leader answers NOT_LEADER_OR_FOLLOWER, as Kafka's
KafkaRaftClient does, but (minikafka) also fills in the leader id and epoch this node knows.
With an authorizer, the Raft RPCs need CLUSTER_ACTION on the cluster (the peers' principal: a super
user, as in Kafka), DescribeQuorum DESCRIBE; otherwise CLUSTER_AUTHORIZATION_FAILED.
"""
from __future__ import annotations

import asyncio
import time

from kafka.protocol.admin import DescribeQuorumRequest, DescribeQuorumResponse
from kafka.protocol.consumer import FetchRequest, FetchResponse

from minikafka.raft import wire
from minikafka.protocol.peer_client import PeerError
from minikafka.raft.core import (LEADER, FetchResponse as CoreFetchResponse,
                                        FetchSnapshotResponse as CoreFetchSnapshotResponse,
                                        VoteResponse as CoreVoteResponse)
from minikafka.protocol.messages import (BeginQuorumEpochRequest, BeginQuorumEpochResponse, EndQuorumEpochRequest,
                                  EndQuorumEpochResponse, FetchSnapshotRequest, FetchSnapshotResponse, VoteRequest,
                                  VoteResponse)
from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize_cluster
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.protocol.errors import (
    BROKER_NOT_AVAILABLE,
    CLUSTER_AUTHORIZATION_FAILED,
    INCONSISTENT_CLUSTER_ID,
    NOT_LEADER_OR_FOLLOWER,
    POSITION_OUT_OF_RANGE,
    SNAPSHOT_NOT_FOUND,
    UNKNOWN_TOPIC_OR_PARTITION,
)

MAX_WAIT_MS = 1000  # the longest a quorum Fetch is held (a request's MaxWaitMs is capped to it)


def _driver(ctx: RequestContext):
    return getattr(ctx.broker, "quorum", None)


@handles(VoteRequest, VoteResponse, 0, 2, controller=True)
async def handle_vote(ctx: RequestContext, req: VoteRequest) -> VoteResponse:
    if not authorize_cluster(ctx, acl.CLUSTER_ACTION):
        return wire.vote_response(None, CLUSTER_AUTHORIZATION_FAILED)
    driver = _driver(ctx)
    if driver is None:
        return wire.vote_response(None, BROKER_NOT_AVAILABLE)
    if driver.cluster_id_conflicts(req.cluster_id):
        return wire.vote_response(None, INCONSISTENT_CLUSTER_ID)
    msg = wire.from_vote_request(req)
    if msg is None:
        return wire.vote_response(None, UNKNOWN_TOPIC_OR_PARTITION)
    return wire.vote_response(driver.receive(msg, CoreVoteResponse))


async def _epoch_rpc(ctx: RequestContext, req, msg, response_class):
    if not authorize_cluster(ctx, acl.CLUSTER_ACTION):
        return response_class(error_code=CLUSTER_AUTHORIZATION_FAILED, topics=[], node_endpoints=[])
    driver = _driver(ctx)
    if driver is None:
        return response_class(error_code=BROKER_NOT_AVAILABLE, topics=[], node_endpoints=[])
    if driver.cluster_id_conflicts(req.cluster_id):
        return response_class(error_code=INCONSISTENT_CLUSTER_ID, topics=[], node_endpoints=[])
    if msg is None:
        return response_class(error_code=UNKNOWN_TOPIC_OR_PARTITION, topics=[], node_endpoints=[])
    driver.receive(msg)
    node = driver.node
    return wire.epoch_response(response_class, node.epoch, node.leader)


@handles(BeginQuorumEpochRequest, BeginQuorumEpochResponse, 0, 1, controller=True)
async def handle_begin_quorum_epoch(ctx: RequestContext, req: BeginQuorumEpochRequest) -> BeginQuorumEpochResponse:
    return await _epoch_rpc(ctx, req, wire.from_begin_request(req), BeginQuorumEpochResponse)


@handles(EndQuorumEpochRequest, EndQuorumEpochResponse, 0, 1, controller=True)
async def handle_end_quorum_epoch(ctx: RequestContext, req: EndQuorumEpochRequest) -> EndQuorumEpochResponse:
    return await _epoch_rpc(ctx, req, wire.from_end_request(req, ctx.api_version), EndQuorumEpochResponse)


@handles(FetchRequest, FetchResponse, 13, 17, controller=True)
async def handle_quorum_fetch(ctx: RequestContext, req: FetchRequest) -> FetchResponse:
    driver = _driver(ctx)
    msg = wire.from_fetch_request(req, ctx.api_version)
    error = (CLUSTER_AUTHORIZATION_FAILED if not authorize_cluster(ctx, acl.CLUSTER_ACTION) else
             BROKER_NOT_AVAILABLE if driver is None else
             INCONSISTENT_CLUSTER_ID if driver.cluster_id_conflicts(req.cluster_id) else
             UNKNOWN_TOPIC_OR_PARTITION if msg is None else 0)
    if error:
        return FetchResponse(throttle_time_ms=0, error_code=error, session_id=0, responses=[], node_endpoints=[])
    reply = driver.receive(msg, CoreFetchResponse)
    # long poll (Kafka's MaxWaitMs): an answer with nothing new for the follower (no entries, the high
    # watermark it was last told) waits for news — an entry, a higher high watermark, another epoch —
    # and the fetch is then answered afresh (the core's handling of a fetch is idempotent)
    deadline = time.monotonic() + min(max(req.max_wait_ms, 0), MAX_WAIT_MS) / 1000
    told = driver.told_high_watermark
    while (reply is not None and not reply.fenced and not reply.entries and reply.diverging is None
           and reply.snapshot_id is None and reply.high_watermark == told.get(msg.replica)):
        left = deadline - time.monotonic()
        if left <= 0 or not await driver.wait_for_change(left):
            break
        reply = driver.receive(msg, CoreFetchResponse)
    if reply is not None and not reply.fenced:
        told[msg.replica] = reply.high_watermark
    if reply is None:  # the core always answers a fetch; be safe
        reply = CoreFetchResponse(driver.node.epoch, driver.node.leader, fenced=True)
    return wire.fetch_response(reply, msg.epoch)


@handles(FetchSnapshotRequest, FetchSnapshotResponse, 0, 0, controller=True)
async def handle_fetch_snapshot(ctx: RequestContext, req: FetchSnapshotRequest) -> FetchSnapshotResponse:
    """KIP-630: a chunk of the leader's snapshot file (the core checks the epoch and that the snapshot
    is still the leader's; the file is read in a worker thread)."""
    if not authorize_cluster(ctx, acl.CLUSTER_ACTION):
        return FetchSnapshotResponse(throttle_time_ms=0, error_code=CLUSTER_AUTHORIZATION_FAILED, topics=[])
    driver = _driver(ctx)
    if driver is None or driver.cluster_id_conflicts(req.cluster_id):
        error = BROKER_NOT_AVAILABLE if driver is None else INCONSISTENT_CLUSTER_ID
        return FetchSnapshotResponse(throttle_time_ms=0, error_code=error, topics=[])
    parsed = wire.from_fetch_snapshot_request(req)
    if parsed is None:
        return FetchSnapshotResponse(throttle_time_ms=0, error_code=UNKNOWN_TOPIC_OR_PARTITION, topics=[])
    msg, position, max_bytes = parsed
    reply = driver.receive(msg, CoreFetchSnapshotResponse)
    node = driver.node
    if reply is None or reply.fenced:
        error = wire.FENCED_LEADER_EPOCH if msg.epoch < node.epoch else NOT_LEADER_OR_FOLLOWER
        return wire.fetch_snapshot_response(error, node.epoch, node.leader, msg.snapshot_id)
    if reply.snapshot_id is None:
        return wire.fetch_snapshot_response(SNAPSHOT_NOT_FOUND, node.epoch, node.leader, msg.snapshot_id)
    chunk = await asyncio.to_thread(driver.read_snapshot_chunk, reply.snapshot_id, position, max(max_bytes, 1))
    if chunk is None:
        return wire.fetch_snapshot_response(SNAPSHOT_NOT_FOUND, node.epoch, node.leader, msg.snapshot_id)
    size, data = chunk
    if position > size:
        return wire.fetch_snapshot_response(POSITION_OUT_OF_RANGE, node.epoch, node.leader, msg.snapshot_id)
    return wire.fetch_snapshot_response(0, node.epoch, node.leader, msg.snapshot_id, size, position, data)


@handles(DescribeQuorumRequest, DescribeQuorumResponse, 0, 2, controller=True)
async def handle_describe_quorum(ctx: RequestContext, req: DescribeQuorumRequest) -> DescribeQuorumResponse:
    driver = _driver(ctx)
    P = DescribeQuorumResponse.TopicData.PartitionData
    ours = any(t.topic_name == wire.METADATA_TOPIC and any(p.partition_index == wire.METADATA_PARTITION
                                                            for p in t.partitions) for t in req.topics or ())
    if not authorize_cluster(ctx, acl.DESCRIBE):
        return DescribeQuorumResponse(error_code=CLUSTER_AUTHORIZATION_FAILED,
                                      error_message="Cluster authorization failed.", topics=[], nodes=[])
    if driver is None:
        return DescribeQuorumResponse(error_code=BROKER_NOT_AVAILABLE, error_message="", topics=[], nodes=[])
    if not ours:  # as Kafka 4.3: each partition asked for is answered UNKNOWN_TOPIC_OR_PARTITION
        return DescribeQuorumResponse(error_code=0, error_message="", nodes=[], topics=[
            DescribeQuorumResponse.TopicData(topic_name=t.topic_name, partitions=[
                P(partition_index=p.partition_index, error_code=UNKNOWN_TOPIC_OR_PARTITION,
                  error_message="This server does not host this topic-partition.", leader_id=0, leader_epoch=0,
                  high_watermark=0, current_voters=[], observers=[]) for p in t.partitions])
            for t in req.topics or ()])
    node = driver.node
    if ctx.listener not in ctx.broker.config.controller_listener_names and node.role != LEADER \
            and node.leader is not None:
        # a broker listener (`kafka-metadata-quorum --bootstrap-server`): Kafka forwards to the active controller
        try:
            return await driver.forward(node.leader, req, ctx.api_version, DescribeQuorumResponse)
        except PeerError:
            pass  # answered below from what this node knows (NOT_LEADER_OR_FOLLOWER)
    R = P.ReplicaState
    voters, observers = [], []
    if node.role == LEADER:
        now = int(time.time() * 1000)
        for v in node.voters:
            if v == node.id:
                voters.append(R(replica_id=v, replica_directory_id=None, log_end_offset=node.log.end_offset,
                                last_fetch_timestamp=now, last_caught_up_timestamp=now))
            else:
                end, fetched, caught_up = driver.follower_state.get(v, (-1, -1, -1))
                voters.append(R(replica_id=v, replica_directory_id=None, log_end_offset=end,
                                last_fetch_timestamp=fetched, last_caught_up_timestamp=caught_up))
        for o in sorted(set(driver.follower_state) - set(node.voters)):  # broker-only nodes (observers)
            end, fetched, caught_up = driver.follower_state[o]
            observers.append(R(replica_id=o, replica_directory_id=None, log_end_offset=end,
                               last_fetch_timestamp=fetched, last_caught_up_timestamp=caught_up))
        error, message = 0, ""
    else:
        error, message = NOT_LEADER_OR_FOLLOWER, "This node is not the leader of the metadata quorum"
    part = P(partition_index=wire.METADATA_PARTITION, error_code=error, error_message=message,
             leader_id=-1 if node.leader is None else node.leader, leader_epoch=node.epoch,
             high_watermark=node.high_watermark, current_voters=voters, observers=observers)
    listener = driver.quorum.controller_listener_names[0]
    nodes = [DescribeQuorumResponse.Node(node_id=v, listeners=[DescribeQuorumResponse.Node.Listener(
                 name=listener, host=host, port=port)])
             for v, (host, port) in sorted(driver.quorum.voters.items())] if node.role == LEADER else []
    return DescribeQuorumResponse(error_code=0, error_message="", nodes=nodes, topics=[
        DescribeQuorumResponse.TopicData(topic_name=wire.METADATA_TOPIC, partitions=[part])])
