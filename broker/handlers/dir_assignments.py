"""AssignReplicasToDirs (API 73, KIP-858) on the CONTROLLER listener: a broker tells the active controller
in which of its log dirs each of its replicas lives (after creating a replica, after an
AlterReplicaLogDirs move completes: broker/cluster/dir_assignments.py sends them).

As Kafka's ControllerApis.handleAssignReplicasToDirs: CLUSTER_ACTION on the cluster, else
CLUSTER_AUTHORIZATION_FAILED; then ReplicationControlManager.handleAssignReplicasToDirs
(metadata/controller.py assign_replicas_to_dirs): a broker epoch other than the registered one (or no
registration) -> STALE_BROKER_EPOCH at the top level with no directories; per partition UNKNOWN_TOPIC_ID,
UNKNOWN_TOPIC_OR_PARTITION, NOT_LEADER_OR_FOLLOWER (not a replica of that broker), else NONE once the
PartitionChange with the new Directories is committed. A node that is not the active controller answers
NOT_CONTROLLER.
"""
from __future__ import annotations

import uuid

from minikafka.broker.handlers.controller import _dir_id, _run
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize_cluster
from minikafka.metadata.controller import ControllerError
from minikafka.protocol.errors import CLUSTER_AUTHORIZATION_FAILED
from minikafka.protocol.messages import AssignReplicasToDirsRequest, AssignReplicasToDirsResponse


def _wire_dir(dir_id: str) -> uuid.UUID:
    """A dir id as the image keeps it (url-safe base64) back to the UUID on the wire."""
    import base64
    return uuid.UUID(bytes=base64.urlsafe_b64decode(dir_id + "=" * (-len(dir_id) % 4)))


@handles(AssignReplicasToDirsRequest, AssignReplicasToDirsResponse, 0, 0, controller=True)
async def handle_assign_replicas_to_dirs(ctx: RequestContext,
                                         req: AssignReplicasToDirsRequest) -> AssignReplicasToDirsResponse:
    D, T, P = (AssignReplicasToDirsResponse.DirectoryData, AssignReplicasToDirsResponse.DirectoryData.TopicData,
               AssignReplicasToDirsResponse.DirectoryData.TopicData.PartitionData)

    def top(code: int) -> AssignReplicasToDirsResponse:
        return AssignReplicasToDirsResponse(throttle_time_ms=0, error_code=code, directories=[])
    if not authorize_cluster(ctx, acl.CLUSTER_ACTION):
        return top(CLUSTER_AUTHORIZATION_FAILED)
    wanted = [(_dir_id(d.id), [(t.topic_id.bytes, [p.partition_index for p in t.partitions]) for t in d.topics])
              for d in req.directories or ()]

    def assign(c):
        try:
            return c.assign_replicas_to_dirs(req.broker_id, req.broker_epoch, wanted), 0
        except ControllerError as exc:
            return None, exc.code
    result, code = await _run(ctx, assign)
    if code == 0:
        result, code = result
    if code:
        return top(code)
    return AssignReplicasToDirsResponse(throttle_time_ms=0, error_code=0, directories=[
        D(id=_wire_dir(dir_id), topics=[
            T(topic_id=uuid.UUID(bytes=tid), partitions=[P(partition_index=i, error_code=e) for i, e in parts])
            for tid, parts in topics])
        for dir_id, topics in result])
