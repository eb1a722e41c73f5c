"""StreamsGroupHeartbeat (API 88) and StreamsGroupDescribe (API 89): the streams rebalance protocol
(KIP-1071); the work is done by coordinator/group/streams/coordinator.py. The internal topics a heartbeat
finds missing are created here, in the background (Kafka's KafkaApis hands them to its auto topic
creation manager): on a single node through the topic catalog, on a cluster through the controller."""
from __future__ import annotations

import asyncio
import logging
import time
import weakref

import kafka.errors as ke

from minikafka.coordinator.group.streams.coordinator import StreamsHeartbeatData
from minikafka.coordinator.group.streams.model import Endpoint, freeze
from minikafka.coordinator.group.streams.records import topology_from
from minikafka.coordinator.group.streams.topology import MISSING_INTERNAL_TOPICS, InternalTopic
from minikafka.protocol.errors import STREAMS_INVALID_TOPOLOGY
from minikafka.protocol.messages import (
    StreamsGroupDescribeRequest,
    StreamsGroupDescribeResponse,
    StreamsGroupHeartbeatRequest,
    StreamsGroupHeartbeatResponse,
)
from minikafka.broker.security import acl
from minikafka.broker.security.authorized_operations import bitfield
from minikafka.broker.security.authorizer import authorize, authorize_cluster, authorized_names, authorized_operations
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.broker.handlers.groups import client_host
from minikafka.broker.topic_catalog import validate_topic_name

log = logging.getLogger(__name__)

UNSUPPORTED_VERSION = ke.UnsupportedVersionError.errno
STREAMS_VERSION = "streams.version"
R = StreamsGroupHeartbeatResponse
D = StreamsGroupDescribeResponse.DescribedGroup
# per broker: the internal topics being created (one creation per name at a time), and recent creation
# errors (topic -> (message, monotonic expiry)) that heartbeats report, as Kafka's topic creation error cache
_creating: "weakref.WeakKeyDictionary[object, set[str]]" = weakref.WeakKeyDictionary()
_creation_errors: "weakref.WeakKeyDictionary[object, dict[str, tuple[str, float]]]" = weakref.WeakKeyDictionary()
_creation_tasks: set[asyncio.Task] = set()
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def streams_protocol_enabled(ctx: RequestContext) -> bool:
    """Kafka serves the streams protocol only with `streams` in group.coordinator.rebalance.protocols and
    streams.version >= 1 finalized; otherwise both APIs answer UNSUPPORTED_VERSION."""
    state = ctx.broker
    protocols = (state.config.get("group.coordinator.rebalance.protocols") or "").split(",")
    if "streams" not in (p.strip().lower() for p in protocols):
        return False
    return state.features.level(STREAMS_VERSION) >= 1


def _tasks(items) -> dict[str, frozenset[int]] | None:
    if items is None:
        return None
    return freeze({t.subtopology_id: set(t.partitions or ()) for t in items})


def _error(code: int, message: str | None = None) -> StreamsGroupHeartbeatResponse:
    return R(throttle_time_ms=0, error_code=code, error_message=message, member_id="", member_epoch=0,
             heartbeat_interval_ms=0, acceptable_recovery_lag=0, task_offset_interval_ms=0, status=None,
             active_tasks=None, standby_tasks=None, warmup_tasks=None, endpoint_information_epoch=0,
             partitions_by_user_endpoint=None)


def _task_ids(tasks) -> list:
    return [R.TaskIds(subtopology_id=s, partitions=sorted(ps)) for s, ps in sorted(tasks.items())]


@handles(StreamsGroupHeartbeatRequest, StreamsGroupHeartbeatResponse, 0, 0)
async def handle_streams_group_heartbeat(ctx: RequestContext, req: StreamsGroupHeartbeatRequest
                                         ) -> StreamsGroupHeartbeatResponse:
    if not streams_protocol_enabled(ctx):
        return _error(UNSUPPORTED_VERSION)
    if not authorize(ctx, acl.READ, acl.GROUP, req.group_id):
        return _error(ke.GroupAuthorizationFailedError.errno, "Group authorization failed.")
    topology = None
    regex = False
    if req.topology is not None:
        # Kafka's KafkaApis: the topology's topics are not Kafka's internal topics, are valid names, and the
        # caller may DESCRIBE them
        names = list(dict.fromkeys(
            n for s in req.topology.subtopologies or ()
            for n in [*(s.source_topics or ()), *(s.repartition_sink_topics or ()),
                      *(t.name for t in s.repartition_source_topics or ()),
                      *(t.name for t in s.state_changelog_topics or ())]))
        internal = [n for n in names if n in INTERNAL_TOPICS]
        if internal:
            return _error(STREAMS_INVALID_TOPOLOGY, f"Use of Kafka internal topics {','.join(internal)} in a Kafka "
                                                    f"Streams topology is prohibited.")
        invalid = [n for n in names if not _valid_topic_name(n)]
        if invalid:
            return _error(STREAMS_INVALID_TOPOLOGY, f"Topic names {','.join(invalid)} are not valid topic names.")
        if ctx.broker.authorizer is not None and \
                len(authorized_names(ctx, acl.DESCRIBE, acl.TOPIC, names)) < len(names):
            return _error(ke.TopicAuthorizationFailedError.errno)
        topology = topology_from(req.topology)
        regex = any(s.source_topic_regex for s in topology.subtopologies)
    endpoint = None if req.user_endpoint is None else Endpoint(req.user_endpoint.host, req.user_endpoint.port)
    data = StreamsHeartbeatData(
        group_id=req.group_id, member_id=req.member_id, member_epoch=req.member_epoch,
        endpoint_information_epoch=req.endpoint_information_epoch, instance_id=req.instance_id, rack_id=req.rack_id,
        rebalance_timeout_ms=req.rebalance_timeout_ms, topology=topology, active=_tasks(req.active_tasks),
        standby=_tasks(req.standby_tasks), warmup=_tasks(req.warmup_tasks), process_id=req.process_id,
        user_endpoint=endpoint,
        client_tags=None if req.client_tags is None else tuple((kv.key, kv.value) for kv in req.client_tags),
        task_offsets=req.task_offsets, task_end_offsets=req.task_end_offsets,
        shutdown_application=bool(req.shutdown_application), source_topic_regex=regex,
        client_id=ctx.client_id or "", client_host=client_host(ctx))
    result = ctx.broker.groups.streams.heartbeat(data)
    if result.error:
        return _error(result.error, result.message)
    if (code := await ctx.broker.groups.durable(req.group_id)):  # cluster: the records replicated before the answer
        return _error(code)
    status = list(result.status or ())  # Kafka 4.3.1 answers an empty list, never null
    if result.internal_topics:
        settings = ctx.broker.groups.streams.configs.settings_for(req.group_id)
        denied = _create_internal_topics(ctx, result.internal_topics, 2 * settings.session_timeout_ms / 1000)
        missing = next((i for i, (code, _d) in enumerate(status) if code == MISSING_INTERNAL_TOPICS), None)
        if denied:
            text = f"Unauthorized to CREATE on topics {','.join(sorted(denied))}."
            if missing is None:
                status.append((MISSING_INTERNAL_TOPICS, text))
            else:
                status[missing] = (MISSING_INTERNAL_TOPICS, f"{status[missing][1]}; {text}")
        failed = _recent_errors(ctx.broker, result.internal_topics)
        if failed and missing is not None:
            listed = ",".join(f"{t} ({m})" for t, m in failed[:3])
            if len(failed) > 3:
                listed = f"{listed} and {len(failed) - 3} more"
            status[missing] = (MISSING_INTERNAL_TOPICS, f"{status[missing][1]}; Creation failed: {listed}.")
    tasks = result.tasks
    by_endpoint = None
    if result.partitions_by_endpoint is not None:
        E = R.EndpointToPartitions
        by_endpoint = [E(
            user_endpoint=E.Endpoint(host=ep.host, port=ep.port),
            active_partitions=[E.TopicPartition(topic=t, partitions=sorted(ps)) for t, ps in sorted(active.items())],
            standby_partitions=[E.TopicPartition(topic=t, partitions=sorted(ps)) for t, ps in sorted(standby.items())])
            for ep, active, standby in result.partitions_by_endpoint]
    return R(throttle_time_ms=0, error_code=0, error_message=None, member_id=result.member_id,
             member_epoch=result.member_epoch, heartbeat_interval_ms=result.heartbeat_interval_ms,
             acceptable_recovery_lag=0, task_offset_interval_ms=0,
             status=[R.Status(status_code=c, status_detail=d) for c, d in status],
             active_tasks=_task_ids(tasks.active) if tasks is not None else None,
             standby_tasks=_task_ids(tasks.standby) if tasks is not None else None,
             warmup_tasks=_task_ids(tasks.warmup) if tasks is not None else None,
             endpoint_information_epoch=result.endpoint_information_epoch,
             partitions_by_user_endpoint=by_endpoint)


def _valid_topic_name(name: str) -> bool:
    try:
        validate_topic_name(name)
    except Exception:
        return False
    return True


def _recent_errors(state, topics) -> list[tuple[str, str]]:
    errors = _creation_errors.get(state) or {}
    now = time.monotonic()
    for name in [n for n, (_m, until) in errors.items() if until <= now]:
        del errors[name]
    return [(n, errors[n][0]) for n in topics if n in errors]


def _create_internal_topics(ctx: RequestContext, topics: dict[str, InternalTopic], error_ttl_s: float) -> set[str]:
    """Start creating the missing internal topics the caller may create (CREATE on the cluster, else on
    each topic, as Kafka); returns the names it may not create."""
    names = set(topics)
    denied: set[str] = set()
    if ctx.broker.authorizer is not None and not authorize_cluster(ctx, acl.CREATE):
        denied = names - authorized_names(ctx, acl.CREATE, acl.TOPIC, names)
    creating = _creating.setdefault(ctx.broker, set())
    todo = [topics[n] for n in sorted(names - denied) if n not in creating]
    if todo:
        creating.update(t.name for t in todo)
        task = asyncio.get_running_loop().create_task(_create(ctx.broker, todo, error_ttl_s),
                                                      name="streams-internal-topics")
        _creation_tasks.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(_creation_tasks.discard)
    return denied


async def _create(state, topics: list[InternalTopic], error_ttl_s: float) -> None:
    errors = _creation_errors.setdefault(state, {})

    def failed(name: str, message: str) -> None:
        log.warning("creating internal topic %s failed: %s", name, message)
        errors[name] = (message, time.monotonic() + error_ttl_s)
    try:
        for t in topics:
            if state.catalog.get(t.name) is not None:
                continue
            rf = t.replication_factor if t.replication_factor > 0 else state.config.default_replication_factor
            configs = dict(t.configs)
            try:
                if state.cluster is not None:
                    code = await state.cluster.create_topic(t.name, t.partitions, rf, configs)
                    if code not in (0, ke.TopicAlreadyExistsError.errno):
                        failed(t.name, ke.for_code(code).__name__)
                        continue
                else:
                    await state.catalog.create_async(t.name, t.partitions, rf, configs, exist_ok=True)
                errors.pop(t.name, None)
                log.info("created streams internal topic %s (%d partitions)", t.name, t.partitions)
            except Exception as exc:  # reported by the next heartbeats, which retry
                failed(t.name, str(exc) or type(exc).__name__)
    finally:
        for t in topics:
            _creating.get(state, set()).discard(t.name)


@handles(StreamsGroupDescribeRequest, StreamsGroupDescribeResponse, 0, 0)
async def handle_streams_group_describe(ctx: RequestContext, req: StreamsGroupDescribeRequest
                                        ) -> StreamsGroupDescribeResponse:
    streams = ctx.broker.groups.streams
    enabled = streams_protocol_enabled(ctx)
    denied, out = [], []

    def failed(group_id: str, code: int, message: str | None):
        return D(error_code=code, error_message=message, group_id=group_id, group_state="", group_epoch=0,
                 assignment_epoch=0, topology=None, members=[], authorized_operations=-2**31)
    for group_id in req.group_ids:
        if enabled and not authorize(ctx, acl.DESCRIBE, acl.GROUP, group_id):
            denied.append(failed(group_id, ke.GroupAuthorizationFailedError.errno, None))
            continue
        code, message, group = streams.describe(group_id) if enabled else (UNSUPPORTED_VERSION, None, None)
        if code:
            out.append(failed(group_id, code, message))
            continue
        members = [_described_member(m, group.target.get(m.member_id)) for m in group.members.values()]
        topology = _described_topology(group)
        if ctx.broker.authorizer is not None and topology is not None:
            names = {n for sub in topology.subtopologies for n in [
                *sub.source_topics, *sub.repartition_sink_topics, *(t.name for t in sub.state_changelog_topics),
                *(t.name for t in sub.repartition_source_topics)]}
            if authorized_names(ctx, acl.DESCRIBE, acl.TOPIC, names) < names:  # as Kafka's KafkaApis
                out.append(failed(group_id, ke.TopicAuthorizationFailedError.errno,
                                  "The described group uses topics that the client is not authorized to describe."))
                continue
        out.append(D(error_code=0, error_message=None, group_id=group_id, group_state=group.state.value,
                     group_epoch=group.group_epoch, assignment_epoch=group.assignment_epoch,
                     topology=topology, members=members,
                     authorized_operations=bitfield(authorized_operations(ctx, acl.GROUP, group_id))
                     if req.include_authorized_operations else -2**31))
    return StreamsGroupDescribeResponse(throttle_time_ms=0, groups=denied + out)


def _described_topology(group):
    """The configured topology when it is ready (partition counts decided), else the one as sent."""
    T = D.Topology
    TI = T.Subtopology.TopicInfo
    KV = TI.KeyValue
    if group.topology is None:
        return None
    configured = group.configured
    subs = []
    for s in group.topology.subtopologies:
        cs = configured.subtopologies.get(s.subtopology_id) if configured is not None and configured.is_ready else None

        def info(t, decided):
            it = decided.get(t.name) if decided is not None else None
            return TI(name=t.name, partitions=it.partitions if it is not None else t.partitions,
                      replication_factor=t.replication_factor,
                      topic_configs=[KV(key=k, value=v) for k, v in t.configs])
        subs.append(T.Subtopology(
            subtopology_id=s.subtopology_id, source_topics=list(s.source_topics),
            repartition_sink_topics=list(s.repartition_sink_topics),
            state_changelog_topics=[info(t, cs.state_changelog_topics if cs else None) for t in s.state_changelog_topics],
            repartition_source_topics=[info(t, cs.repartition_source_topics if cs else None)
                                       for t in s.repartition_source_topics]))
    return T(epoch=group.topology.epoch, subtopologies=subs)


def _described_member(m, target):
    A = D.Member.Assignment
    TI = A.TaskIds

    def ids(tasks):
        return [TI(subtopology_id=s, partitions=sorted(ps)) for s, ps in sorted(tasks.items())]

    def assignment(t):
        if t is None:
            return A(active_tasks=[], standby_tasks=[], warmup_tasks=[])
        return A(active_tasks=ids(t.active), standby_tasks=ids(t.standby), warmup_tasks=ids(t.warmup))
    ep = m.user_endpoint
    return D.Member(
        member_id=m.member_id, member_epoch=m.member_epoch, instance_id=m.instance_id, rack_id=m.rack_id,
        client_id=m.client_id, client_host=m.client_host, topology_epoch=m.topology_epoch, process_id=m.process_id,
        user_endpoint=D.Member.Endpoint(host=ep.host, port=ep.port) if ep is not None else None,
        client_tags=[D.Member.KeyValue(key=k, value=v) for k, v in m.client_tags],
        task_offsets=[], task_end_offsets=[], assignment=assignment(m.assigned()), target_assignment=assignment(target),
        is_classic=False)
