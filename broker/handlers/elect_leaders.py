"""ElectLeaders (API 43, `kafka-leader-election`): preferred leader election.

A single node leads every partition it has, its only replica: each named partition answers
ELECTION_NOT_NEEDED (UNKNOWN_TOPIC_OR_PARTITION if it does not exist). On a cluster the request goes
to the active controller (broker/handlers/controller.py), which moves leadership to the first replica
when that replica is in the ISR and alive (PREFERRED_LEADER_NOT_AVAILABLE otherwise). As Kafka's
controller, a request for all partitions (null) lists every topic but only the partitions not already
led by their preferred replica.
"""
from __future__ import annotations

from typing import Callable

from kafka.protocol.admin import ElectLeadersRequest, ElectLeadersResponse

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize_cluster
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.protocol.errors import CLUSTER_AUTHORIZATION_FAILED, ELECTION_NOT_NEEDED, UNKNOWN_TOPIC_OR_PARTITION

MESSAGES = {ELECTION_NOT_NEEDED: "Leader election not needed for topic partition.",
            80: "The preferred leader was not available.", 41: "This is not the correct controller for this cluster.",
            83: "Eligible topic partition leaders are not available.",
            CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.", 7: "The request timed out."}


def elect_leaders_response(req: ElectLeadersRequest, version: int, error_of: Callable[[str, int], int], *,
                           top_error: int = 0, partitions: list[tuple[str, int]] | None = None) -> ElectLeadersResponse:
    """The answer for `partitions` (default: those of the request); for a request naming none (null),
    partitions whose election was not needed are left out."""
    R = ElectLeadersResponse.ReplicaElectionResult
    P = R.PartitionResult
    if partitions is None:
        partitions = [(t.topic, p) for t in req.topic_partitions or () for p in t.partitions]
    by_topic: dict[str, list] = {}
    for topic, p in partitions:
        code = error_of(topic, p)
        if req.topic_partitions is None and code == ELECTION_NOT_NEEDED:
            by_topic.setdefault(topic, [])  # Kafka 4.3 still lists the topic, with no partitions
            continue
        message = f"No such partition as {topic}-{p}" if code == UNKNOWN_TOPIC_OR_PARTITION else MESSAGES.get(code)
        by_topic.setdefault(topic, []).append(P(partition_id=p, error_code=code, error_message=message if code else None))
    return ElectLeadersResponse(throttle_time_ms=0, error_code=top_error if version >= 1 else 0,
                                replica_election_results=[R(topic=t, partition_result=ps) for t, ps in by_topic.items()])


@handles(ElectLeadersRequest, ElectLeadersResponse, 0, 2)
async def handle_elect_leaders(ctx: RequestContext, req: ElectLeadersRequest) -> ElectLeadersResponse:
    state = ctx.broker
    if state.authorizer is not None and not authorize_cluster(ctx, acl.ALTER):
        return elect_leaders_response(req, ctx.api_version, lambda _t, _p: CLUSTER_AUTHORIZATION_FAILED,
                                      top_error=CLUSTER_AUTHORIZATION_FAILED)
    cluster = getattr(state, "cluster", None)
    if cluster is not None:
        from minikafka.broker.cluster.forwarding import forwarded_for
        from minikafka.broker.cluster.runtime import ControllerUnavailableError
        try:
            return await cluster.controller_request(req, ctx.api_version, ElectLeadersResponse,
                                                    on_behalf=forwarded_for(ctx))
        except ControllerUnavailableError as exc:
            code = exc.code
            return elect_leaders_response(req, ctx.api_version, lambda _t, _p: code, top_error=code)
    catalog = state.catalog

    def error_of(topic: str, p: int) -> int:
        return ELECTION_NOT_NEEDED if catalog.has_partition(topic, p) else UNKNOWN_TOPIC_OR_PARTITION
    partitions = None
    if req.topic_partitions is None:
        partitions = [(name, p) for name, info in catalog.topics.items() for p in range(info.partitions)]
    return elect_leaders_response(req, ctx.api_version, error_of, partitions=partitions)
