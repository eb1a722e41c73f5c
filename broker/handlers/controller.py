"""The active controller's RPCs on the CONTROLLER listener (issue 16, KRaft combined mode):
BrokerRegistration, BrokerHeartbeat, AlterPartition, AllocateProducerIds, and the topic changes
brokers forward (CreateTopics, DeleteTopics, CreatePartitions, ElectLeaders).

Each decision is made by metadata/controller.py over the controller's image and answered
only once its records are committed (metadata/active_controller.py). A node that is not the
active controller answers NOT_CONTROLLER (brokers retry at the new one).

With an authorizer, the broker-to-controller RPCs need CLUSTER_ACTION on the cluster (the brokers'
principal: a super user, as in Kafka) and the forwarded topic changes the operation a client would
need (checked per request here as well as on the broker that forwarded it); otherwise
CLUSTER_AUTHORIZATION_FAILED / TOPIC_AUTHORIZATION_FAILED.
"""
from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter

from kafka.protocol.admin import (AlterConfigsRequest, AlterConfigsResponse, CreatePartitionsRequest, CreatePartitionsResponse, CreateTopicsRequest,
                                  CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse,
                                  ElectLeadersRequest, ElectLeadersResponse)

from minikafka.metadata.controller import ControllerError
from minikafka.protocol.messages import (AllocateProducerIdsRequest, AllocateProducerIdsResponse, AlterPartitionRequest,
                                  AlterPartitionResponse, BrokerHeartbeatRequest, BrokerHeartbeatResponse,
                                  BrokerRegistrationRequest, BrokerRegistrationResponse,
                                  ControllerRegistrationRequest, ControllerRegistrationResponse, UnregisterBrokerRequest,
                                  UnregisterBrokerResponse)
from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize, authorize_cluster
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.broker.topic_catalog import InvalidTopicNameError, validate_topic_name
from minikafka.protocol.errors import (
    CLUSTER_AUTHORIZATION_FAILED,
    INCONSISTENT_CLUSTER_ID,
    INVALID_REQUEST,
    INVALID_TOPIC,
    NEW_LEADER_ELECTED,
    NOT_CONTROLLER,
    REQUEST_TIMED_OUT,
    STALE_BROKER_EPOCH,
    TOPIC_AUTHORIZATION_FAILED,
    UNKNOWN_TOPIC_ID,
    UNKNOWN_SERVER_ERROR,
    UNKNOWN_TOPIC_OR_PARTITION,
    UNSUPPORTED_VERSION,
)

log = logging.getLogger(__name__)

TOPIC_RESOURCE = 2
METADATA_TOPIC = "__cluster_metadata"
COMMIT_TIMEOUT_S = 30.0
ZERO_UUID = uuid.UUID(int=0)


def _active(ctx: RequestContext):
    cluster = getattr(ctx.broker, "cluster", None)
    return None if cluster is None else cluster.active


async def _run(ctx: RequestContext, fn):
    """(result, error code): `fn(controller)` committed; NOT_CONTROLLER / REQUEST_TIMED_OUT otherwise."""
    from minikafka.metadata.active_controller import NotControllerError
    active = _active(ctx)
    if active is None:
        return None, NOT_CONTROLLER
    try:
        return await active.run(fn, COMMIT_TIMEOUT_S), 0
    except NotControllerError:
        return None, NOT_CONTROLLER
    except asyncio.TimeoutError:
        return None, REQUEST_TIMED_OUT


def _now_ms() -> int:
    import time
    return int(time.monotonic() * 1000)


# -- brokers ------------------------------------------------------------------------------------------
def _dir_id(value) -> str:
    """A log dir id (a UUID on the wire) as Kafka prints it and meta.properties holds it (url-safe base64)."""
    import base64
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


@handles(BrokerRegistrationRequest, BrokerRegistrationResponse, 0, 4, controller=True)
async def handle_broker_registration(ctx: RequestContext, req: BrokerRegistrationRequest) -> BrokerRegistrationResponse:
    from minikafka.broker.cluster.runtime import SECURITY_PROTOCOL_NAMES

    def answer(code: int, epoch: int = -1) -> BrokerRegistrationResponse:
        return BrokerRegistrationResponse(throttle_time_ms=0, error_code=code, broker_epoch=epoch)
    if not authorize_cluster(ctx, acl.CLUSTER_ACTION):
        return answer(CLUSTER_AUTHORIZATION_FAILED)
    active = _active(ctx)
    if active is None:
        return answer(NOT_CONTROLLER)
    cluster_id = ctx.broker.cluster_id
    if cluster_id is not None and req.cluster_id != cluster_id:
        return answer(INCONSISTENT_CLUSTER_ID)
    endpoints = [(l.name, l.host, l.port, SECURITY_PROTOCOL_NAMES.get(l.security_protocol, "PLAINTEXT"))
                 for l in req.listeners]

    def register(c):
        return c.register_broker(req.broker_id, str(req.incarnation_id), endpoints, req.rack, _now_ms(),
                                 active.next_offset, previous_broker_epoch=req.previous_broker_epoch,
                                 log_dirs=[_dir_id(d) for d in req.log_dirs or ()])
    try:
        epoch, code = await _run(ctx, register)
    except ControllerError as exc:
        return answer(exc.code)
    return answer(code, epoch if code == 0 else -1)


@handles(BrokerHeartbeatRequest, BrokerHeartbeatResponse, 0, 2, controller=True)
async def handle_broker_heartbeat(ctx: RequestContext, req: BrokerHeartbeatRequest) -> BrokerHeartbeatResponse:
    active = _active(ctx)

    def answer(code: int, hb=None) -> BrokerHeartbeatResponse:
        return BrokerHeartbeatResponse(throttle_time_ms=0, error_code=code,
                                       is_caught_up=bool(hb and hb.is_caught_up),
                                       is_fenced=True if hb is None else hb.is_fenced,
                                       should_shut_down=bool(hb and hb.should_shut_down))
    if not authorize_cluster(ctx, acl.CLUSTER_ACTION):
        return answer(CLUSTER_AUTHORIZATION_FAILED)
    if active is None:
        return answer(NOT_CONTROLLER)

    def beat(c):
        cordoned = getattr(req, "cordoned_log_dirs", None) if ctx.api_version >= 2 else None  # KIP-1066
        return c.heartbeat(req.broker_id, req.broker_epoch, req.current_metadata_offset, req.want_fence,
                           req.want_shut_down, active.committed_offset, _now_ms(),
                           cordoned_log_dirs=None if cordoned is None else [_dir_id(d) for d in cordoned])
    hb, code = await _run(ctx, beat)
    if code:
        return answer(code)
    return answer(hb.error, hb if hb.error == 0 else None)


CONTROLLER_REGISTRATION_MV = 15  # metadata.version 3.7-IV0: Kafka's isControllerRegistrationSupported

# Kafka's Errors messages, which ControllerRegistrationRequest.getErrorResponse answers with
_DEFAULT_MESSAGES = {
    CLUSTER_AUTHORIZATION_FAILED: "Cluster authorization failed.",
    NOT_CONTROLLER: "This is not the correct controller for this cluster.",
    REQUEST_TIMED_OUT: "The request timed out.",
    UNKNOWN_SERVER_ERROR: "The server experienced an unexpected error when processing the request.",
    UNSUPPORTED_VERSION: "The version of API is not supported.",
}


@handles(ControllerRegistrationRequest, ControllerRegistrationResponse, 0, 0, controller=True)
async def handle_controller_registration(ctx: RequestContext,
                                         req: ControllerRegistrationRequest) -> ControllerRegistrationResponse:
    """KIP-919, as Kafka's ControllerApis / ClusterControlManager.registerController: CLUSTER_ACTION on the
    cluster; the active controller appends a RegisterController record with the listeners and features
    as sent (an unknown security protocol id: UNKNOWN_SERVER_ERROR) and answers once it is committed."""
    from minikafka.broker.cluster.runtime import SECURITY_PROTOCOL_NAMES

    def answer(code: int) -> ControllerRegistrationResponse:
        return ControllerRegistrationResponse(throttle_time_ms=0, error_code=code,
                                              error_message=_DEFAULT_MESSAGES.get(code, "") if code else "")
    if not authorize_cluster(ctx, acl.CLUSTER_ACTION):
        return answer(CLUSTER_AUTHORIZATION_FAILED)
    if _active(ctx) is None:
        return answer(NOT_CONTROLLER)
    features_state = getattr(ctx.broker, "features", None)
    if features_state is not None and features_state.level("metadata.version") < CONTROLLER_REGISTRATION_MV:
        return answer(UNSUPPORTED_VERSION)  # "The current MetadataVersion is too old ..." (Errors' message sent)
    if any(l.security_protocol not in SECURITY_PROTOCOL_NAMES for l in req.listeners):
        return answer(UNKNOWN_SERVER_ERROR)  # Kafka: ListenerInfo's "Unknown security protocol" RuntimeException
    listeners = {l.name: (l.name, l.host, l.port, SECURITY_PROTOCOL_NAMES[l.security_protocol])
                 for l in req.listeners}  # mapKey: the last of a name wins, as Kafka's LinkedHashMap
    features = {f.name: (f.name, f.min_supported_version, f.max_supported_version) for f in req.features}

    def register(c):
        return c.register_controller(req.controller_id, str(req.incarnation_id), listeners.values(),
                                     features.values())
    _r, code = await _run(ctx, register)
    if code == 0:
        log.info("controller: controller %d registered (incarnation %s)", req.controller_id, req.incarnation_id)
    return answer(code)


# -- partitions ---------------------------------------------------------------------------------------
@handles(AlterPartitionRequest, AlterPartitionResponse, 2, 3, controller=True)
async def handle_alter_partition(ctx: RequestContext, req: AlterPartitionRequest) -> AlterPartitionResponse:
    T = AlterPartitionResponse.TopicData
    P = T.PartitionData
    active = _active(ctx)

    def top(code: int) -> AlterPartitionResponse:
        return AlterPartitionResponse(throttle_time_ms=0, error_code=code, topics=[])
    if not authorize_cluster(ctx, acl.CLUSTER_ACTION):
        return top(CLUSTER_AUTHORIZATION_FAILED)
    if active is None or active.controller is None:
        return top(NOT_CONTROLLER)
    broker = active.controller.image.brokers.get(req.broker_id)
    if broker is None or (req.broker_epoch != -1 and broker.epoch != req.broker_epoch):
        return top(STALE_BROKER_EPOCH)
    v3 = ctx.api_version >= 3

    def alter(c):
        out = []
        for t in req.topics:
            parts = []
            for p in t.partitions:
                new_isr = [(e.broker_id, e.broker_epoch) for e in p.new_isr_with_epochs] if v3 else \
                    [(b, -1) for b in p.new_isr]
                try:
                    info = c.alter_partition(req.broker_id, t.topic_id.bytes, p.partition_index, p.leader_epoch,
                                             p.partition_epoch, new_isr)
                    if info.leader != req.broker_id:  # the change completed a reassignment that moved the leader
                        raise ControllerError(NEW_LEADER_ELECTED)
                    parts.append(P(partition_index=p.partition_index, error_code=0, leader_id=info.leader,
                                   leader_epoch=info.leader_epoch, isr=list(info.isr), leader_recovery_state=0,
                                   partition_epoch=info.partition_epoch))
                except ControllerError as exc:
                    log.info("controller: AlterPartition from broker %d refused: error %d %s", req.broker_id,
                             exc.code, exc.message or "")
                    parts.append(P(partition_index=p.partition_index, error_code=exc.code, leader_id=-1,
                                   leader_epoch=-1, isr=[], leader_recovery_state=0, partition_epoch=-1))
            out.append(T(topic_id=t.topic_id, partitions=parts))
        return out
    topics, code = await _run(ctx, alter)
    if code:
        return top(code)
    return AlterPartitionResponse(throttle_time_ms=0, error_code=0, topics=topics)


@handles(AllocateProducerIdsRequest, AllocateProducerIdsResponse, 0, 0, controller=True)
async def handle_allocate_producer_ids(ctx: RequestContext,
                                       req: AllocateProducerIdsRequest) -> AllocateProducerIdsResponse:
    def answer(code: int, start: int = -1, length: int = -1) -> AllocateProducerIdsResponse:
        return AllocateProducerIdsResponse(throttle_time_ms=0, error_code=code, producer_id_start=start,
                                           producer_id_len=length)
    if not authorize_cluster(ctx, acl.CLUSTER_ACTION):
        return answer(CLUSTER_AUTHORIZATION_FAILED)
    try:
        block, code = await _run(ctx, lambda c: c.allocate_producer_ids(req.broker_id, req.broker_epoch))
    except ControllerError as exc:
        return answer(exc.code)
    return answer(code) if code else answer(0, *block)


@handles(UnregisterBrokerRequest, UnregisterBrokerResponse, 0, 0, controller=True)
async def handle_unregister_broker(ctx: RequestContext, req: UnregisterBrokerRequest) -> UnregisterBrokerResponse:
    """`kafka-cluster unregister --id N` (forwarded by brokers): ALTER on the cluster; the broker leaves
    every ISR and leadership, then its registration (BROKER_ID_NOT_REGISTERED when it has none)."""
    def answer(code: int, message: str | None = None) -> UnregisterBrokerResponse:
        return UnregisterBrokerResponse(throttle_time_ms=0, error_code=code, error_message=message)
    if not authorize_cluster(ctx, acl.ALTER):
        return answer(CLUSTER_AUTHORIZATION_FAILED)
    try:
        _r, code = await _run(ctx, lambda c: c.unregister_broker(req.broker_id))
    except ControllerError as exc:
        return answer(exc.code, exc.message)
    return answer(code, None if code else "")


# -- topics -------------------------------------------------------------------------------------------
CreatableTopicResult = CreateTopicsResponse.CreatableTopicResult


def _topic_error(name: str, code: int, message: str | None) -> CreatableTopicResult:
    return CreatableTopicResult(name=name, topic_id=ZERO_UUID, error_code=code, error_message=message,
                                num_partitions=-1, replication_factor=-1, configs=[])


def _check_configs(ctx: RequestContext, configs: dict[str, str]) -> None:
    from minikafka.storage.log_config import LogConfig
    LogConfig.from_props(dict(configs), ctx.broker.config.log_config)


@handles(CreateTopicsRequest, CreateTopicsResponse, 2, 7, controller=True)
async def handle_create_topics(ctx: RequestContext, req: CreateTopicsRequest) -> CreateTopicsResponse:
    from minikafka.broker.errors import error_code, error_message
    from minikafka.broker.handlers.configs import describe_topic_configs
    state = ctx.broker
    active = _active(ctx)
    counts = Counter(t.name for t in req.topics)
    results = []
    for t in req.topics:
        if active is None or active.controller is None:
            results.append(_topic_error(t.name, NOT_CONTROLLER, "This is not the correct controller for this cluster."))
            continue
        if counts[t.name] > 1:
            results.append(_topic_error(t.name, INVALID_REQUEST,
                                        "Create topics request from client contains duplicate topic name"))
            continue
        if not (authorize_cluster(ctx, acl.CREATE) or authorize(ctx, acl.CREATE, acl.TOPIC, t.name)):
            results.append(_topic_error(t.name, TOPIC_AUTHORIZATION_FAILED, "Authorization failed."))
            continue
        if t.name == METADATA_TOPIC:
            results.append(_topic_error(t.name, INVALID_REQUEST,
                                        f"Creation of internal topic {METADATA_TOPIC} is prohibited."))
            continue
        try:
            validate_topic_name(t.name)
        except InvalidTopicNameError as exc:
            results.append(_topic_error(t.name, INVALID_TOPIC, str(exc)))
            continue
        configs = {}
        bad = None
        for c in t.configs:
            if c.value is None:
                bad = f"Null value not supported for topic configs: {c.name}"
            configs[c.name] = c.value
        if bad:
            results.append(_topic_error(t.name, INVALID_REQUEST, bad))
            continue
        try:
            _check_configs(ctx, configs)
        except Exception as exc:
            results.append(_topic_error(t.name, error_code(exc), error_message(exc)))
            continue
        assignments = None
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                results.append(_topic_error(t.name, INVALID_REQUEST, "Both numPartitions or replicationFactor and "
                                            "replicasAssignments were set. Both cannot be used at the same time."))
                continue
            assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments}
        partitions = t.num_partitions if t.num_partitions != -1 else state.config.num_partitions
        rf = t.replication_factor if t.replication_factor != -1 else state.config.default_replication_factor
        name = t.name

        def create(c, name=name, partitions=partitions, rf=rf, configs=configs, assignments=assignments):
            return c.create_topic(name, partitions, rf, configs, assignments, validate_only=req.validate_only)
        try:
            out, code = await _run(ctx, create)
        except ControllerError as exc:
            results.append(_topic_error(t.name, exc.code, exc.message))
            continue
        if code:
            results.append(_topic_error(t.name, code, None))
            continue
        topic_id, plan = out
        tid = ZERO_UUID if req.validate_only else uuid.UUID(topic_id)
        if not authorize(ctx, acl.DESCRIBE_CONFIGS, acl.TOPIC, t.name):
            # as Kafka's controller: no configs, partitions or replication factor without DESCRIBE_CONFIGS
            results.append(CreatableTopicResult(name=t.name, topic_id=tid, error_code=0, error_message=None,
                                                num_partitions=-1, replication_factor=-1, configs=[],
                                                topic_config_error_code=TOPIC_AUTHORIZATION_FAILED))
            continue
        described = [CreatableTopicResult.CreatableTopicConfigs(
            name=c.name, value=c.value, read_only=c.read_only, config_source=c.config_source, is_sensitive=False)
            for c in describe_topic_configs(state, configs, None, False)]
        results.append(CreatableTopicResult(name=t.name, topic_id=tid,
                                            error_code=0, error_message=None, num_partitions=len(plan),
                                            replication_factor=len(next(iter(plan.values()))) if plan else rf,
                                            configs=described))
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


@handles(DeleteTopicsRequest, DeleteTopicsResponse, 1, 6, controller=True)
async def handle_delete_topics(ctx: RequestContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    R = DeleteTopicsResponse.DeletableTopicResult
    active = _active(ctx)
    targets = [(t.name, t.topic_id) for t in req.topics] if ctx.api_version >= 6 else \
        [(n, ZERO_UUID) for n in req.topic_names]
    results = []
    cluster_delete = authorize_cluster(ctx, acl.DELETE)  # Kafka's controller: DELETE on the cluster allows all
    for name, topic_id in targets:
        if active is None or active.controller is None:
            results.append(R(name=name, topic_id=topic_id, error_code=NOT_CONTROLLER, error_message=None))
            continue
        by_id = name is None
        if by_id:
            t = active.controller.image.topic_by_id(topic_id)
            if t is None:
                results.append(R(name=None, topic_id=topic_id, error_code=UNKNOWN_TOPIC_ID, error_message=None))
                continue
            name = t.name
        if not cluster_delete:
            describable = authorize(ctx, acl.DESCRIBE, acl.TOPIC, name)
            if not by_id and not describable:  # before its existence: nothing about an undescribable name
                results.append(R(name=name, topic_id=topic_id, error_code=TOPIC_AUTHORIZATION_FAILED,
                                 error_message=None))
                continue
            exists = active.controller.image.topics.get(name) is not None
            if not by_id and not exists:
                results.append(R(name=name, topic_id=topic_id, error_code=UNKNOWN_TOPIC_OR_PARTITION,
                                 error_message=None))
                continue
            if not authorize(ctx, acl.DELETE, acl.TOPIC, name):
                results.append(R(name=name if describable else None, topic_id=topic_id,
                                 error_code=TOPIC_AUTHORIZATION_FAILED, error_message=None))
                continue
        try:
            tid, code = await _run(ctx, lambda c, name=name: c.delete_topic(name))
        except ControllerError as exc:
            results.append(R(name=name, topic_id=topic_id, error_code=exc.code, error_message=exc.message))
            continue
        results.append(R(name=name, topic_id=uuid.UUID(tid) if not code else topic_id, error_code=code,
                         error_message=None))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)


@handles(CreatePartitionsRequest, CreatePartitionsResponse, 0, 3, controller=True)
async def handle_create_partitions(ctx: RequestContext, req: CreatePartitionsRequest) -> CreatePartitionsResponse:
    R = CreatePartitionsResponse.CreatePartitionsTopicResult
    active = _active(ctx)
    counts = Counter(t.name for t in req.topics)
    results = []
    for t in req.topics:
        if active is None or active.controller is None:
            results.append(R(name=t.name, error_code=NOT_CONTROLLER, error_message=None))
            continue
        if counts[t.name] > 1:
            results.append(R(name=t.name, error_code=INVALID_REQUEST, error_message="Duplicate topic in request."))
            continue
        if not authorize(ctx, acl.ALTER, acl.TOPIC, t.name):
            results.append(R(name=t.name, error_code=TOPIC_AUTHORIZATION_FAILED, error_message=None))
            continue
        assignments = None if t.assignments is None else [list(a.broker_ids) for a in t.assignments]
        try:
            _r, code = await _run(ctx, lambda c, t=t, a=assignments: c.create_partitions(t.name, t.count, a,
                                                                                          req.validate_only))
        except ControllerError as exc:
            results.append(R(name=t.name, error_code=exc.code, error_message=exc.message))
            continue
        results.append(R(name=t.name, error_code=code, error_message=None))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)


@handles(ElectLeadersRequest, ElectLeadersResponse, 0, 2, controller=True)
async def handle_elect_leaders(ctx: RequestContext, req: ElectLeadersRequest) -> ElectLeadersResponse:
    """Preferred (election type 0) or unclean (1: a live ISR member, else any live replica, leads a
    partition without a live leader) leader election."""
    from minikafka.broker.handlers.elect_leaders import elect_leaders_response
    if not authorize_cluster(ctx, acl.ALTER):
        return elect_leaders_response(req, ctx.api_version, lambda _t, _p: CLUSTER_AUTHORIZATION_FAILED,
                                      top_error=CLUSTER_AUTHORIZATION_FAILED)
    active = _active(ctx)
    if active is None or active.controller is None:
        return elect_leaders_response(req, ctx.api_version, lambda _t, _p: NOT_CONTROLLER, top_error=NOT_CONTROLLER)
    image = active.controller.image
    wanted = [(t.topic, p) for t in req.topic_partitions for p in t.partitions] if req.topic_partitions is not None \
        else [(name, p) for name, topic in image.topics.items() for p in topic.partitions]
    errors: dict[tuple[str, int], int] = {}

    def elect(c):
        for topic, p in wanted:
            errors[(topic, p)] = c.elect_preferred(topic, p) if getattr(req, "election_type", 0) == 0 else \
                c.elect_unclean(topic, p)
    _r, code = await _run(ctx, elect)
    if code:
        return elect_leaders_response(req, ctx.api_version, lambda _t, _p: code, top_error=code)
    return elect_leaders_response(req, ctx.api_version, lambda t, p: errors.get((t, p), 3), partitions=wanted)


@handles(AlterConfigsRequest, AlterConfigsResponse, 0, 2, controller=True)
async def handle_alter_configs(ctx: RequestContext, req: AlterConfigsRequest) -> AlterConfigsResponse:
    """Topic overrides forwarded by brokers (each resource: the topic's complete new overrides)."""
    from minikafka.broker.errors import error_code, error_message
    R = AlterConfigsResponse.AlterConfigsResourceResponse
    active = _active(ctx)
    out = []
    for r in req.resources:
        def answer(code: int, message: str | None = None, r=r) -> None:
            out.append(R(error_code=code, error_message=message, resource_type=r.resource_type,
                         resource_name=r.resource_name))
        if active is None or active.controller is None:
            answer(NOT_CONTROLLER)
            continue
        from minikafka.broker.handlers.controller_security import _alter_configs_denied
        denied = _alter_configs_denied(ctx, r.resource_type, r.resource_name)
        if denied:
            answer(*denied)
            continue
        if r.resource_type != TOPIC_RESOURCE:
            answer(INVALID_REQUEST, "Only topic configs are altered through the controller here")
            continue
        props = {c.name: c.value for c in r.configs}
        try:
            _check_configs(ctx, props)
        except Exception as exc:
            answer(error_code(exc), error_message(exc))
            continue
        if req.validate_only:
            answer(0)
            continue
        try:
            _r, code = await _run(ctx, lambda c, name=r.resource_name, props=props: c.set_topic_configs(name, props))
        except ControllerError as exc:
            answer(exc.code, exc.message)
            continue
        answer(code)
    return AlterConfigsResponse(throttle_time_ms=0, responses=out)
