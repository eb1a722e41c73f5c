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
from minikafka.protocol.messages import (AddRaftVoterRequest, AddRaftVoterResponse, RemoveRaftVoterRequest,
                                         RemoveRaftVoterResponse, UpdateRaftVoterRequest, UpdateRaftVoterResponse)
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
    INVALID_REQUEST,
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


@handles(FetchRequest, FetchResponse, 13, 18, controller=True)
async def handle_quorum_fetch(ctx: RequestContext, req: FetchRequest) -> FetchResponse:
    driver = _driver(ctx)
    msg = wire.from_fetch_request(req, ctx.api_version)
    error = (CLUSTER_AUTHORIZATION_FAILED if not authorize_cluster(ctx, acl.CLUSTER_ACTION) else
             BROKER_NOT_AVAILABLE if driver is None else
             INCONSISTENT_CLUSTER_ID if driver.cluster_id_conflicts(req.cluster_id) else
             UNKNOWN_TOPIC_OR_PARTITION if msg is None else 0)
    if error:
        return FetchResponse(throttle_time_ms=0, error_code=error, session_id=0, responses=[], node_endpoints=[])
    directory = wire.fetch_directory_id(req, ctx.api_version)
    if directory is not None:
        driver.replica_directories[msg.replica] = directory
    reply = driver.receive(msg, CoreFetchResponse)
    # long poll (Kafka's MaxWaitMs): an answer with nothing new for the follower (no entries, the high
    # watermark it knows: the one its v18 fetch carries (KIP-1166), else the one it was last told) waits
    # for news — an entry, a higher high watermark, another epoch — and the fetch is then answered afresh
    # (the core's handling of a fetch is idempotent)
    deadline = time.monotonic() + min(max(req.max_wait_ms, 0), MAX_WAIT_MS) / 1000
    told = driver.told_high_watermark
    known = wire.fetch_high_watermark(req, ctx.api_version)
    if known is not None:
        told[msg.replica] = known
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
    leader_ep = driver.endpoint(reply.leader) if reply.leader is not None and ctx.api_version >= 16 else None
    if reply.leader == driver.id and leader_ep is None:
        leader_ep = _own_controller_endpoint(ctx)
    return wire.fetch_response(reply, msg.epoch, [(reply.leader, *leader_ep)] if leader_ep else None)


def _own_controller_endpoint(ctx: RequestContext) -> tuple[str, int] | None:
    config = ctx.broker.config
    names = config.controller_listener_names
    for listener in [*config.advertised_listeners, *config.listeners]:
        if names and listener.name == names[0]:
            return listener.host, listener.port
    return None


@handles(FetchSnapshotRequest, FetchSnapshotResponse, 0, 1, controller=True)
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
            directory = _directory_id(node.voter_nodes.get(v))
            if v == node.id:
                voters.append(R(replica_id=v, replica_directory_id=directory, log_end_offset=node.log.end_offset,
                                last_fetch_timestamp=now, last_caught_up_timestamp=now))
            else:
                end, fetched, caught_up = driver.follower_state.get(v, (-1, -1, -1))
                voters.append(R(replica_id=v, replica_directory_id=directory, log_end_offset=end,
                                last_fetch_timestamp=fetched, last_caught_up_timestamp=caught_up))
        for o in sorted(set(driver.follower_state) - set(node.voters)):  # broker-only nodes (observers)
            end, fetched, caught_up = driver.follower_state[o]
            observers.append(R(replica_id=o, replica_directory_id=_directory_id(
                                   {"voterDirectoryId": driver.replica_directories.get(o)}), log_end_offset=end,
                               last_fetch_timestamp=fetched, last_caught_up_timestamp=caught_up))
        error, message = 0, ""
    else:
        error, message = NOT_LEADER_OR_FOLLOWER, "This node is not the leader of the metadata quorum"
    part = P(partition_index=wire.METADATA_PARTITION, error_code=error, error_message=message,
             leader_id=-1 if node.leader is None else node.leader, leader_epoch=node.epoch,
             high_watermark=node.high_watermark, current_voters=voters, observers=observers)
    listener = driver.quorum.controller_listener_names[0]
    L = DescribeQuorumResponse.Node.Listener
    nodes = []
    if node.role == LEADER:
        for v in node.voters:
            record = node.voter_nodes.get(v)
            if record is not None:  # a dynamic quorum: the voter's listeners as its VotersRecord entry has them
                listeners = [L(name=e["name"], host=e["host"], port=int(e["port"])) for e in record.get("endpoints") or ()]
            else:
                host, port = driver.quorum.voters[v]
                listeners = [L(name=listener, host=host, port=port)]
            nodes.append(DescribeQuorumResponse.Node(node_id=v, listeners=listeners))
    return DescribeQuorumResponse(error_code=0, error_message="", nodes=nodes, topics=[
        DescribeQuorumResponse.TopicData(topic_name=wire.METADATA_TOPIC, partitions=[part])])


def _directory_id(record) -> "uuid.UUID | None":
    import base64
    import uuid
    value = (record or {}).get("voterDirectoryId")
    if not value:
        return None
    return uuid.UUID(bytes=base64.urlsafe_b64decode(value + "=" * (-len(value) % 4)))


def _directory_str(value) -> str | None:
    """A request's directory id (a UUID) as Kafka prints it (url-safe base64, no padding); None if zero."""
    import base64
    if value is None or getattr(value, "int", 0) == 0:
        return None
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


async def _voter_rpc(ctx: RequestContext, req, response_class, change):
    """AddRaftVoter / RemoveRaftVoter: served by the quorum leader; another controller answers
    NOT_LEADER_OR_FOLLOWER, a broker listener forwards to the leader (Kafka's brokers forward them)."""
    def answer(error, message=None):
        return response_class(throttle_time_ms=0, error_code=error, error_message=message)
    if not authorize_cluster(ctx, acl.ALTER):
        return answer(CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
    driver = _driver(ctx)
    if driver is None:
        return answer(BROKER_NOT_AVAILABLE)
    if driver.cluster_id_conflicts(req.cluster_id):
        return answer(INCONSISTENT_CLUSTER_ID, f'The given id "{req.cluster_id}" doesn\'t match the cluster id '
                                               f'"{driver.cluster_id}"')
    node = driver.node
    if ctx.listener not in ctx.broker.config.controller_listener_names and node.role != LEADER:
        if node.leader is None:
            return answer(NOT_LEADER_OR_FOLLOWER)
        try:
            return await driver.forward(node.leader, req, ctx.api_version, response_class)
        except PeerError:
            return answer(NOT_LEADER_OR_FOLLOWER)
    error, message = await change(driver)
    return answer(error, message)


@handles(AddRaftVoterRequest, AddRaftVoterResponse, 0, 1, controller=True)
async def handle_add_raft_voter(ctx: RequestContext, req: AddRaftVoterRequest) -> AddRaftVoterResponse:
    async def change(driver):
        directory = _directory_str(req.voter_directory_id)
        if req.voter_id < 0 or directory is None:
            return INVALID_REQUEST, "Add voter request didn't include a valid voter"
        endpoints = [{"name": l.name, "host": l.host, "port": l.port} for l in req.listeners or ()]
        listener = driver.quorum.controller_listener_names[0]
        if driver.node.role == LEADER and not any(e["name"] == listener for e in endpoints):
            shown = ", ".join(f"{e['name']}=/{e['host']}:{e['port']}" for e in endpoints)
            return INVALID_REQUEST, (f"Add voter request didn't include the endpoint (Endpoints(endpoints={{{shown}}}))"
                                     f" for the default listener ListenerName({listener})")
        timeout_s = max(req.timeout_ms, 0) / 1000 or driver.quorum.request_timeout_ms / 1000
        return await driver.add_voter(req.voter_id, directory, endpoints, timeout_s)
    return await _voter_rpc(ctx, req, AddRaftVoterResponse, change)


@handles(RemoveRaftVoterRequest, RemoveRaftVoterResponse, 0, 0, controller=True)
async def handle_remove_raft_voter(ctx: RequestContext, req: RemoveRaftVoterRequest) -> RemoveRaftVoterResponse:
    async def change(driver):
        directory = _directory_str(req.voter_directory_id)
        if req.voter_id < 0 or directory is None:
            return INVALID_REQUEST, "Remove voter request didn't include a valid voter"
        return await driver.remove_voter(req.voter_id, directory, driver.quorum.request_timeout_ms / 1000)
    return await _voter_rpc(ctx, req, RemoveRaftVoterResponse, change)


@handles(UpdateRaftVoterRequest, UpdateRaftVoterResponse, 0, 0, controller=True)
async def handle_update_raft_voter(ctx: RequestContext, req: UpdateRaftVoterRequest) -> UpdateRaftVoterResponse:
    """A voter whose listeners changed (a restart on another port) tells the leader (KIP-853), which
    appends the voter set with its new endpoints; Kafka's checks in KafkaRaftClient's order."""
    driver = _driver(ctx)

    def answer(error: int) -> UpdateRaftVoterResponse:
        node = driver.node if driver is not None else None
        leader = node.leader if node is not None else None
        address = driver.endpoint(leader) if driver is not None and leader is not None else None
        if node is not None and leader == node.id and address is None:
            address = _own_controller_endpoint(ctx)
        host, port = address or ("", -1)
        return UpdateRaftVoterResponse(throttle_time_ms=0, error_code=error, current_leader=(
            UpdateRaftVoterResponse.CurrentLeader(leader_id=-1 if leader is None else leader,
                                                  leader_epoch=node.epoch if node is not None else -1,
                                                  host=host, port=port)))
    if not authorize_cluster(ctx, acl.CLUSTER_ACTION):
        return answer(CLUSTER_AUTHORIZATION_FAILED)
    if driver is None:
        return answer(BROKER_NOT_AVAILABLE)
    if driver.cluster_id_conflicts(req.cluster_id):
        return answer(INCONSISTENT_CLUSTER_ID)
    node = driver.node
    if req.current_leader_epoch < node.epoch:
        return answer(wire.FENCED_LEADER_EPOCH)
    if req.current_leader_epoch > node.epoch:
        return answer(wire.UNKNOWN_LEADER_EPOCH)
    if node.role != LEADER:
        return answer(NOT_LEADER_OR_FOLLOWER)
    directory = _directory_str(req.voter_directory_id)
    endpoints = [{"name": l.name, "host": l.host, "port": l.port} for l in req.listeners or ()]
    feature = req.k_raft_version_feature
    if req.voter_id < 0 or directory is None or not any(
            e["name"] == driver.quorum.controller_listener_names[0] for e in endpoints):
        return answer(INVALID_REQUEST)
    low, high = (feature.min_supported_version, feature.max_supported_version) if feature is not None else (0, 0)
    if low < 0 or high < 0 or high < low:
        return answer(INVALID_REQUEST)
    return answer(driver.update_voter(req.voter_id, directory, endpoints, (low, high)))
