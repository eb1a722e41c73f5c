"""AlterPartitionReassignments (API 45) and ListPartitionReassignments (API 46): moving replicas
(KIP-455; `kafka-reassign-partitions`).

ALTER on the cluster to change, DESCRIBE to list (else CLUSTER_AUTHORIZATION_FAILED at the top and on
every partition, as Kafka's error response). On a cluster a broker authorizes and forwards the request
to the active controller, which decides over its image (metadata/controller.py) and answers
once the records are committed; the replicas then follow the metadata (new ones fetch from the leader,
removed ones drop their log). A single node is its only broker: a partition's replicas are [node.id],
so a target of exactly that is a success with nothing to do, any other broker id is not registered
(INVALID_REPLICA_ASSIGNMENT), a cancel finds NO_REASSIGNMENT_IN_PROGRESS, and nothing is listed.
"""
from __future__ import annotations

from typing import Callable

from kafka.protocol.admin import (AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
                                  ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse)

from minikafka.metadata.controller import ControllerError, check_reassignment_target
from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize_cluster
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.protocol.errors import CLUSTER_AUTHORIZATION_FAILED, INVALID_REPLICATION_FACTOR, NOT_CONTROLLER, NO_REASSIGNMENT_IN_PROGRESS, REQUEST_TIMED_OUT, UNKNOWN_TOPIC_OR_PARTITION

MESSAGES = {CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.", REQUEST_TIMED_OUT: "The request timed out.",
            NOT_CONTROLLER: "This is not the correct controller for this cluster.",
            NO_REASSIGNMENT_IN_PROGRESS: "No partition reassignment is in progress for this topic-partition."}

Outcome = tuple[int, "str | None"]  # (error code, message)


def _targets(req: AlterPartitionReassignmentsRequest) -> list[tuple[str, int, list[int] | None]]:
    return [(t.name, p.partition_index, None if p.replicas is None else list(p.replicas))
            for t in req.topics for p in t.partitions]


def alter_response(req: AlterPartitionReassignmentsRequest, outcome: Callable[[str, int, list[int] | None], Outcome],
                   top: int = 0) -> AlterPartitionReassignmentsResponse:
    R = AlterPartitionReassignmentsResponse.ReassignableTopicResponse
    P = R.ReassignablePartitionResponse
    topics = []
    for t in req.topics:
        parts = []
        for p in t.partitions:
            code, message = outcome(t.name, p.partition_index, None if p.replicas is None else list(p.replicas))
            parts.append(P(partition_index=p.partition_index, error_code=code, error_message=message))
        topics.append(R(name=t.name, partitions=parts))
    return AlterPartitionReassignmentsResponse(
        throttle_time_ms=0, allow_replication_factor_change=_allow_rf_change(req), error_code=top,
        error_message=MESSAGES.get(top) if top else None, responses=topics)


def _allow_rf_change(req: AlterPartitionReassignmentsRequest) -> bool:
    allow = getattr(req, "allow_replication_factor_change", True)
    return True if allow is None else bool(allow)


def list_response(req: ListPartitionReassignmentsRequest, ongoing: list[tuple[str, list]],
                  top: int = 0) -> ListPartitionReassignmentsResponse:
    """`ongoing`: (topic, [PartitionInfo being reassigned]); with an error, the request's partitions
    echoed without replicas (Kafka's getErrorResponse)."""
    T = ListPartitionReassignmentsResponse.OngoingTopicReassignment
    P = T.OngoingPartitionReassignment
    if top:
        topics = [T(name=t.name, partitions=[P(partition_index=i, replicas=[], adding_replicas=[], removing_replicas=[])
                                             for i in t.partition_indexes]) for t in req.topics or ()]
    else:
        topics = [T(name=name, partitions=[P(partition_index=p.partition, replicas=list(p.replicas),
                                             adding_replicas=list(p.adding), removing_replicas=list(p.removing))
                                           for p in parts]) for name, parts in ongoing]
    return ListPartitionReassignmentsResponse(throttle_time_ms=0, error_code=top,
                                              error_message=MESSAGES.get(top) if top else None, topics=topics)


def _wanted(req: ListPartitionReassignmentsRequest) -> list[tuple[str, list[int]]] | None:
    return None if req.topics is None else [(t.name, list(t.partition_indexes)) for t in req.topics]


# -- broker listeners ---------------------------------------------------------------------------------
@handles(AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, 0, 1)
async def handle_alter_partition_reassignments(ctx: RequestContext, req: AlterPartitionReassignmentsRequest
                                               ) -> AlterPartitionReassignmentsResponse:
    if not authorize_cluster(ctx, acl.ALTER):
        return _alter_error(req, CLUSTER_AUTHORIZATION_FAILED)
    cluster = getattr(ctx.broker, "cluster", None)
    if cluster is not None:
        from minikafka.broker.cluster.forwarding import forwarded_for
        from minikafka.broker.cluster.runtime import ControllerUnavailableError
        try:
            return await cluster.controller_request(req, ctx.api_version, AlterPartitionReassignmentsResponse,
                                                    timeout_s=max(req.timeout_ms, 1) / 1000,
                                                    on_behalf=forwarded_for(ctx))
        except ControllerUnavailableError as exc:
            return _alter_error(req, exc.code)
    node, catalog = ctx.broker.node_id, ctx.broker.catalog

    def single_node(topic: str, p: int, target: list[int] | None) -> Outcome:
        if not catalog.has_partition(topic, p):
            return UNKNOWN_TOPIC_OR_PARTITION, (f"Unable to find a topic named {topic}." if catalog.get(topic) is None
                                                else f"Unable to find partition {topic}:{p}.")
        if target is None:
            return NO_REASSIGNMENT_IN_PROGRESS, MESSAGES[NO_REASSIGNMENT_IN_PROGRESS]
        try:
            check_reassignment_target(target, lambda b: b == node)
        except ControllerError as exc:
            return exc.code, exc.message
        if not _allow_rf_change(req) and len(target) != 1:
            return INVALID_REPLICATION_FACTOR, (f"The replication factor is changed from 1 to {len(target)} but "
                                                f"allowReplicationFactorChange is false.")
        return 0, None
    return alter_response(req, single_node)


def _alter_error(req: AlterPartitionReassignmentsRequest, code: int) -> AlterPartitionReassignmentsResponse:
    return alter_response(req, lambda _t, _p, _r: (code, MESSAGES.get(code)), top=code)


@handles(ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, 0, 0)
async def handle_list_partition_reassignments(ctx: RequestContext, req: ListPartitionReassignmentsRequest
                                              ) -> ListPartitionReassignmentsResponse:
    if not authorize_cluster(ctx, acl.DESCRIBE):
        return list_response(req, [], top=CLUSTER_AUTHORIZATION_FAILED)
    cluster = getattr(ctx.broker, "cluster", None)
    if cluster is not None:
        from minikafka.broker.cluster.forwarding import forwarded_for
        from minikafka.broker.cluster.runtime import ControllerUnavailableError
        try:
            return await cluster.controller_request(req, ctx.api_version, ListPartitionReassignmentsResponse,
                                                    timeout_s=max(req.timeout_ms, 1) / 1000,
                                                    on_behalf=forwarded_for(ctx))
        except ControllerUnavailableError as exc:
            return list_response(req, [], top=exc.code)
    return list_response(req, [])  # a single replica per partition: nothing ever moves


# -- the active controller (CONTROLLER listener) ------------------------------------------------------
@handles(AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse, 0, 1, controller=True)
async def controller_alter_partition_reassignments(ctx: RequestContext, req: AlterPartitionReassignmentsRequest
                                                   ) -> AlterPartitionReassignmentsResponse:
    from minikafka.broker.handlers.controller import _active, _run
    if not authorize_cluster(ctx, acl.ALTER):
        return _alter_error(req, CLUSTER_AUTHORIZATION_FAILED)
    active = _active(ctx)
    if active is None or active.controller is None:
        return _alter_error(req, NOT_CONTROLLER)
    allow = _allow_rf_change(req)
    outcomes: dict[tuple[str, int], Outcome] = {}

    def alter(c) -> None:
        for topic, p, target in _targets(req):
            try:
                c.alter_reassignment(topic, p, target, allow)
                outcomes[(topic, p)] = (0, None)
            except ControllerError as exc:
                outcomes[(topic, p)] = (exc.code, exc.message or None)
    _r, code = await _run(ctx, alter)
    if code:
        return _alter_error(req, code)
    return alter_response(req, lambda t, p, _r: outcomes[(t, p)])


@handles(ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse, 0, 0, controller=True)
async def controller_list_partition_reassignments(ctx: RequestContext, req: ListPartitionReassignmentsRequest
                                                  ) -> ListPartitionReassignmentsResponse:
    """From the active controller's image (what it has decided, committed or about to be)."""
    from minikafka.broker.handlers.controller import _active
    if not authorize_cluster(ctx, acl.DESCRIBE):
        return list_response(req, [], top=CLUSTER_AUTHORIZATION_FAILED)
    active = _active(ctx)
    if active is None or active.controller is None:
        return list_response(req, [], top=NOT_CONTROLLER)
    return list_response(req, active.controller.reassignments(_wanted(req)))
