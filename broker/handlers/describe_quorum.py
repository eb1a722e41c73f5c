"""DescribeQuorum (API 55) on a single node's broker listener: Kafka's single combined node answers
`kafka-metadata-quorum --bootstrap-server ... describe --status|--replication` as the sole voter and
leader of its metadata quorum, and so does minikafka's single node (a node of a multi-node quorum is
answered by broker/handlers/quorum.py instead: QUORUM_BROKER_API_TABLE).

A single node keeps no `__cluster_metadata` log: it is the leader at epoch 1, its high watermark and log
end offset are 0, the voter's fetch and caught-up times are now (as Kafka's leader reports itself), and
v2's node endpoints are its listeners named in `controller.listener.names` (none without one). Kafka's
checks: DESCRIBE on the cluster (else CLUSTER_AUTHORIZATION_FAILED at the top), any topic-partition
other than `__cluster_metadata`-0 UNKNOWN_TOPIC_OR_PARTITION with Kafka's message.
"""
from __future__ import annotations

import time

from kafka.protocol.admin import DescribeQuorumRequest, DescribeQuorumResponse

from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize_cluster
from minikafka.protocol.errors import (CLUSTER_AUTHORIZATION_FAILED, INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION,
                                       UNSUPPORTED_VERSION)
from minikafka.protocol.messages import (AddRaftVoterRequest, AddRaftVoterResponse, RemoveRaftVoterRequest,
                                         RemoveRaftVoterResponse)

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
LEADER_EPOCH = 1

Partition = DescribeQuorumResponse.TopicData.PartitionData


def _unknown(partition_index: int) -> Partition:
    return Partition(partition_index=partition_index, error_code=UNKNOWN_TOPIC_OR_PARTITION,
                     error_message="This server does not host this topic-partition.", leader_id=0, leader_epoch=0,
                     high_watermark=0, current_voters=[], observers=[])


@handles(DescribeQuorumRequest, DescribeQuorumResponse, 0, 2)
async def handle_describe_quorum(ctx: RequestContext, req: DescribeQuorumRequest) -> DescribeQuorumResponse:
    if not authorize_cluster(ctx, acl.DESCRIBE):
        return DescribeQuorumResponse(error_code=CLUSTER_AUTHORIZATION_FAILED,
                                      error_message="Cluster authorization failed.", topics=[], nodes=[])
    state = ctx.broker
    node_id = state.node_id
    ours = any(t.topic_name == METADATA_TOPIC and any(p.partition_index == METADATA_PARTITION for p in t.partitions)
               for t in req.topics or ())
    if not ours:  # as Kafka 4.3: each partition asked for is answered UNKNOWN_TOPIC_OR_PARTITION
        return DescribeQuorumResponse(error_code=0, error_message="", nodes=[], topics=[
            DescribeQuorumResponse.TopicData(topic_name=t.topic_name,
                                             partitions=[_unknown(p.partition_index) for p in t.partitions])
            for t in req.topics or ()])
    now = int(time.time() * 1000)
    voter = Partition.ReplicaState(replica_id=node_id, replica_directory_id=None, log_end_offset=0,
                                   last_fetch_timestamp=now, last_caught_up_timestamp=now)
    part = Partition(partition_index=METADATA_PARTITION, error_code=0, error_message="", leader_id=node_id,
                     leader_epoch=LEADER_EPOCH, high_watermark=0, current_voters=[voter], observers=[])
    names = {n.strip().upper() for n in state.config.get("controller.listener.names").split(",") if n.strip()}
    Node = DescribeQuorumResponse.Node
    endpoints = [Node.Listener(name=listener.name, host=adv.host, port=adv.port)
                 for listener in state.config.listeners if listener.name in names
                 for adv in (state.advertised_for(listener.name),)]
    return DescribeQuorumResponse(error_code=0, error_message="", nodes=[Node(node_id=node_id, listeners=endpoints)],
                                  topics=[DescribeQuorumResponse.TopicData(topic_name=METADATA_TOPIC, partitions=[part])])


# AddRaftVoter (80) / RemoveRaftVoter (81) on a single node: Kafka's single combined node with static
# voters (kraft.version 0) refuses both with UNSUPPORTED_VERSION and its message, after its checks of the
# request (a voter with a directory id). A dynamic quorum (KIP-853) is a quorum node: broker/handlers/quorum.py.
def _no_voter(voter_id: int, directory_id) -> bool:
    return voter_id < 0 or directory_id is None or getattr(directory_id, "int", 0) == 0


@handles(AddRaftVoterRequest, AddRaftVoterResponse, 0, 1)
async def handle_add_raft_voter(ctx: RequestContext, req: AddRaftVoterRequest) -> AddRaftVoterResponse:
    if not authorize_cluster(ctx, acl.ALTER):
        return AddRaftVoterResponse(throttle_time_ms=0, error_code=CLUSTER_AUTHORIZATION_FAILED,
                                    error_message="Cluster authorization failed.")
    if _no_voter(req.voter_id, req.voter_directory_id):
        return AddRaftVoterResponse(throttle_time_ms=0, error_code=INVALID_REQUEST,
                                    error_message="Add voter request didn't include a valid voter")
    return AddRaftVoterResponse(throttle_time_ms=0, error_code=UNSUPPORTED_VERSION, error_message=(
        "Cluster doesn't support adding voter because the kraft.version feature is 0"))


@handles(RemoveRaftVoterRequest, RemoveRaftVoterResponse, 0, 0)
async def handle_remove_raft_voter(ctx: RequestContext, req: RemoveRaftVoterRequest) -> RemoveRaftVoterResponse:
    if not authorize_cluster(ctx, acl.ALTER):
        return RemoveRaftVoterResponse(throttle_time_ms=0, error_code=CLUSTER_AUTHORIZATION_FAILED,
                                       error_message="Cluster authorization failed.")
    if _no_voter(req.voter_id, req.voter_directory_id):
        return RemoveRaftVoterResponse(throttle_time_ms=0, error_code=INVALID_REQUEST,
                                       error_message="Remove voter request didn't include a valid voter")
    return RemoveRaftVoterResponse(throttle_time_ms=0, error_code=UNSUPPORTED_VERSION, error_message=(
        "Cluster doesn't support removing voter because the kraft.version feature is 0"))
