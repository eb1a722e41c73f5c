"""CreateTopics, DeleteTopics, CreatePartitions against the topic catalog.

The partition files are made and removed off the event loop (`TopicCatalog.*_async`). Bounds as in
Apache Kafka 4.3 (checked against it): a CreateTopics asking for more than
`minikafka.max.partitions.per.request` (10000) partitions in total fails for every topic with
POLICY_VIOLATION "Excessively large number of partitions per request."; one whose metadata records
(per topic 1 + partitions + config entries, as Kafka's controller writes them) exceed the same number
fails for every topic with POLICY_VIOLATION "Unable to perform excessively large batch operation.";
a CreatePartitions adding more than that many partitions fails for that topic with
UNKNOWN_SERVER_ERROR (Kafka's controller lets the BoundedListTooLongException through).
"""
from __future__ import annotations

import asyncio
from collections import Counter

import kafka.errors as ke
from kafka.protocol.admin import (
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)

from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize, authorize_cluster, authorized_names
from minikafka.broker.network.context import RequestContext
from minikafka.broker.errors import UNKNOWN_SERVER_ERROR, error_code, error_message
from minikafka.broker.network.registry import handles
from minikafka.broker.state import BrokerState
from minikafka.broker.topic_catalog import (
    TOO_MANY_PARTITIONS,
    TOO_MANY_RECORDS,
    BatchTooLargeError,
    InvalidReplicaAssignmentError,
    PolicyViolationError,
    TopicInfo,
)
from minikafka.broker.handlers.common import ZERO_UUID
from minikafka.broker.handlers.configs import describe_topic_configs
from minikafka.protocol.errors import NOT_CONTROLLER

CreatableTopicResult = CreateTopicsResponse.CreatableTopicResult
DeletableTopicResult = DeleteTopicsResponse.DeletableTopicResult
CreatePartitionsResult = CreatePartitionsResponse.CreatePartitionsTopicResult
INVALID_REQUEST = ke.InvalidRequestError.errno
POLICY_VIOLATION = ke.PolicyViolationError.errno
THROTTLED = ke.ThrottlingQuotaExceededError.errno
THROTTLED_MESSAGE = None  # Kafka answers THROTTLING_QUOTA_EXCEEDED without a message


def _mutation_quota(ctx: RequestContext, strict_from: int):
    """The request's controller_mutation_rate quota (KIP-599; broker/quota/manager.py): strict (a topic
    past the quota is refused with THROTTLING_QUOTA_EXCEEDED) from `strict_from`, else only throttled."""
    from minikafka.broker.quota.manager import MutationQuota
    return MutationQuota(ctx.broker.quotas, ctx.principal, ctx.client_id, ctx.api_version >= strict_from)


def _error(exc: BaseException) -> tuple[int, str]:
    if isinstance(exc, (PolicyViolationError, BatchTooLargeError)):
        return POLICY_VIOLATION, str(exc)
    return error_code(exc), error_message(exc)


def _check_assignment(state: BrokerState, assignments: list) -> int:
    """Partition count from an explicit replica assignment; every replica list must be [this node]."""
    indexes = sorted(a.partition_index for a in assignments)
    if indexes != list(range(len(indexes))):
        raise InvalidReplicaAssignmentError("partitions must be numbered consecutively from 0")
    for a in assignments:
        if list(a.broker_ids) != [state.node_id]:
            raise InvalidReplicaAssignmentError(
                f"replica assignment {list(a.broker_ids)} must be [{state.node_id}] on a single broker")
    return len(indexes)


def _requested_partitions(state: BrokerState, t) -> int:
    """Partitions a topic of the request asks for, as Kafka's validateTotalNumberOfPartitions counts."""
    if t.assignments:
        return len(t.assignments)
    if t.num_partitions == -1:
        return state.config.num_partitions
    return max(t.num_partitions, 0)


def _topic_error(name: str, code: int, message: str | None) -> CreatableTopicResult:
    return CreatableTopicResult(name=name, topic_id=ZERO_UUID, error_code=code, error_message=message)


def _plan_one(state: BrokerState, t) -> tuple[int, int, dict[str, str]] | CreatableTopicResult:
    """(partitions, replication factor, configs) of a valid topic, else its error result."""
    partitions = t.num_partitions if t.num_partitions != -1 else state.config.num_partitions
    rf = t.replication_factor if t.replication_factor != -1 else state.config.default_replication_factor
    try:
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                return _topic_error(t.name, INVALID_REQUEST, "Both numPartitions or replicationFactor and "
                                                             "replicasAssignments were set. Both cannot be used at "
                                                             "the same time.")
            partitions, rf = _check_assignment(state, t.assignments), 1
        configs = {}
        for c in t.configs:
            if c.value is None:
                return _topic_error(t.name, INVALID_REQUEST, f"Null value not supported for topic configs: {c.name}")
            configs[c.name] = c.value
        state.catalog.check_create(t.name, partitions, rf, configs)
    except Exception as exc:
        return _topic_error(t.name, *_error(exc))
    return partitions, rf, configs


def _created(state: BrokerState, name: str, topic_id, partitions: int, rf: int,
             configs: dict[str, str]) -> CreatableTopicResult:
    described = [CreatableTopicResult.CreatableTopicConfigs(
        name=c.name, value=c.value, read_only=c.read_only, config_source=c.config_source, is_sensitive=False)
        for c in describe_topic_configs(state, configs, None, False)]
    return CreatableTopicResult(name=name, topic_id=topic_id, error_code=0, error_message=None,
                                num_partitions=partitions, replication_factor=rf, configs=described)


METADATA_TOPIC = "__cluster_metadata"


def _hide_configs(result: CreatableTopicResult, describable: set[str] | None) -> None:
    """Without DESCRIBE_CONFIGS on the topic: no configs, counts unknown, TOPIC_AUTHORIZATION_FAILED as
    the topic config error (Kafka's ReplicationControlManager)."""
    if describable is not None and result.name not in describable:
        result.configs, result.num_partitions, result.replication_factor = [], -1, -1
        result.topic_config_error_code = ke.TopicAuthorizationFailedError.errno


@handles(CreateTopicsRequest, CreateTopicsResponse, 2, 7)
async def handle_create_topics(ctx: RequestContext, req: CreateTopicsRequest) -> CreateTopicsResponse:
    state = ctx.broker
    catalog = state.catalog
    counts = Counter(t.name for t in req.topics)
    results: dict[int, CreatableTopicResult] = {}
    unique = []
    for i, t in enumerate(req.topics):
        if counts[t.name] > 1:
            results[i] = _topic_error(t.name, INVALID_REQUEST,
                                      "Create topics request from client contains duplicate topic name")
        elif t.name == METADATA_TOPIC:  # Kafka (KRaft): the metadata log is no topic clients may create
            results[i] = _topic_error(t.name, INVALID_REQUEST, f"Creation of internal topic {METADATA_TOPIC} is prohibited.")
        else:
            unique.append((i, t))
    describable: set[str] | None = None
    if state.authorizer is not None:
        # CREATE on the cluster or on each topic; configs shown only with DESCRIBE_CONFIGS on the topic
        names = [t.name for _i, t in unique]
        creatable = set(names) if authorize_cluster(ctx, acl.CREATE) else \
            authorized_names(ctx, acl.CREATE, acl.TOPIC, names)
        describable = authorized_names(ctx, acl.DESCRIBE_CONFIGS, acl.TOPIC, names)
        for i, t in unique:
            if t.name not in creatable:
                results[i] = _topic_error(t.name, ke.TopicAuthorizationFailedError.errno, "Authorization failed.")
        unique = [(i, t) for i, t in unique if t.name in creatable]
    bound = catalog.max_partitions_per_request

    def refuse_all(message: str) -> CreateTopicsResponse:
        for i, t in unique:
            results[i] = _topic_error(t.name, POLICY_VIOLATION, message)
        return CreateTopicsResponse(throttle_time_ms=0, topics=[results[i] for i in sorted(results)])

    if sum(_requested_partitions(state, t) for _i, t in unique) > bound:
        return refuse_all(TOO_MANY_PARTITIONS)
    quota = _mutation_quota(ctx, 6)
    if state.cluster is not None:  # a cluster: the active controller decides (placement, records)
        if quota.bucket is not None:
            allowed = []
            for i, t in unique:
                if quota.exceeded():
                    results[i] = _topic_error(t.name, THROTTLED, THROTTLED_MESSAGE)
                else:
                    quota.record(_requested_partitions(state, t))
                    allowed.append((i, t))
            unique = allowed
        resp = await _create_on_cluster(ctx, req, unique, results, describable)
        resp.throttle_time_ms = quota.throttle_ms()
        return resp
    plans = []
    records = 0
    for i, t in unique:
        plan = _plan_one(state, t)
        if isinstance(plan, CreatableTopicResult):
            results[i] = plan
            continue
        records += 1 + plan[0] + len(plan[2])  # TopicRecord, PartitionRecords, ConfigRecords
        plans.append((i, t, plan))
    if records > bound:
        return refuse_all(TOO_MANY_RECORDS)
    for i, t, (partitions, rf, configs) in plans:
        if quota.exceeded():
            results[i] = _topic_error(t.name, THROTTLED, THROTTLED_MESSAGE)
            continue
        quota.record(partitions)
        if req.validate_only:  # what Kafka validates; the broker's room (minikafka.max.partitions) is checked
            results[i] = _created(state, t.name, ZERO_UUID, partitions, rf, configs)  # by the creation
            _hide_configs(results[i], describable)
            continue
        try:
            info = await catalog.create_async(t.name, partitions, rf, configs)
        except Exception as exc:
            results[i] = _topic_error(t.name, *_error(exc))
            continue
        results[i] = _created(state, t.name, info.topic_id, partitions, rf, info.configs)
        _hide_configs(results[i], describable)
    return CreateTopicsResponse(throttle_time_ms=quota.throttle_ms(), topics=[results[i] for i in sorted(results)])


async def _create_on_cluster(ctx: RequestContext, req: CreateTopicsRequest, unique: list, results: dict,
                             describable: set[str] | None) -> CreateTopicsResponse:
    """Forward the topics to the active controller; once created, wait (bounded) until this node's
    metadata has them, so that the client's next Metadata request here finds them."""
    from minikafka.broker.cluster.forwarding import forwarded_for
    from minikafka.broker.cluster.runtime import ControllerUnavailableError
    state = ctx.broker
    if unique:
        forward = CreateTopicsRequest(topics=[t for _i, t in unique], timeout_ms=req.timeout_ms,
                                      validate_only=req.validate_only)
        failure = (ke.RequestTimedOutError.errno, "No active controller answered in time.")
        try:
            resp = await state.cluster.controller_request(forward, ctx.api_version, CreateTopicsResponse,
                                                          not_controller=_all_not_controller,
                                                          on_behalf=forwarded_for(ctx))
            answered = {r.name: r for r in resp.topics}
        except ControllerUnavailableError as exc:
            answered = {}
            if exc.code != failure[0]:
                failure = (exc.code, str(exc))
        for i, t in unique:
            r = answered.get(t.name) or _topic_error(t.name, *failure)
            if r.error_code == 0 and not req.validate_only:
                await state.cluster.wait_for_topic(t.name, max(min(req.timeout_ms, 30000), 0) / 1000 or 5.0)
            _hide_configs(r, describable)
            results[i] = r
    return CreateTopicsResponse(throttle_time_ms=0, topics=[results[i] for i in sorted(results)])


def _all_not_controller(resp) -> bool:
    items = getattr(resp, "topics", None) or getattr(resp, "responses", None) or getattr(resp, "results", None) or []
    return bool(items) and all(r.error_code == NOT_CONTROLLER for r in items)




async def _delete_on_cluster(ctx: RequestContext, name: str) -> tuple[int, str | None, object]:
    """(error code, message, topic id) of deleting `name` through the active controller (as the client)."""
    from minikafka.broker.cluster.forwarding import forwarded_for
    from minikafka.broker.cluster.runtime import ControllerUnavailableError
    state = ctx.broker
    req = DeleteTopicsRequest(topics=[DeleteTopicsRequest.DeleteTopicState(name=name, topic_id=ZERO_UUID)],
                              timeout_ms=30000)
    try:
        resp = await state.cluster.controller_request(req, 6, DeleteTopicsResponse, not_controller=_all_not_controller,
                                                      on_behalf=forwarded_for(ctx))
    except ControllerUnavailableError as exc:
        return exc.code, "No active controller answered in time." if exc.code == 7 else str(exc), ZERO_UUID
    r = resp.responses[0]
    if r.error_code == 0:
        await state.cluster.wait_for_topic(name, 5.0, present=False)
    return r.error_code, r.error_message, r.topic_id


async def _create_partitions_on_cluster(ctx: RequestContext, t, validate_only: bool) -> tuple[int, str | None]:
    from minikafka.broker.cluster.forwarding import forwarded_for
    from minikafka.broker.cluster.runtime import ControllerUnavailableError
    state = ctx.broker
    req = CreatePartitionsRequest(topics=[t], timeout_ms=30000, validate_only=validate_only)
    try:
        resp = await state.cluster.controller_request(req, 3, CreatePartitionsResponse,
                                                      not_controller=_all_not_controller, on_behalf=forwarded_for(ctx))
    except ControllerUnavailableError as exc:
        return exc.code, "No active controller answered in time." if exc.code == 7 else str(exc)
    r = resp.results[0]
    if r.error_code == 0 and not validate_only:
        deadline = asyncio.get_running_loop().time() + 5.0
        while asyncio.get_running_loop().time() < deadline:
            info = state.catalog.get(t.name)
            if info is not None and info.partitions >= t.count:
                break
            await asyncio.sleep(0.05)
    return r.error_code, r.error_message


@handles(DeleteTopicsRequest, DeleteTopicsResponse, 1, 6)
async def handle_delete_topics(ctx: RequestContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    state = ctx.broker
    if ctx.api_version >= 6:
        targets = [(t.name, t.topic_id) for t in req.topics]
    else:
        targets = [(name, ZERO_UUID) for name in req.topic_names]
    results = []
    check = state.authorizer is not None and not authorize_cluster(ctx, acl.DELETE)
    quota = _mutation_quota(ctx, 5)
    for name, topic_id in targets:
        by_id = name is None
        if name is None:
            info = state.catalog.by_id.get(topic_id)
            if info is None:
                results.append(DeletableTopicResult(name=None, topic_id=topic_id,
                                                    error_code=ke.UnknownTopicIdError.errno, error_message=None))
                continue
            name = info.name
        describable = not check or authorize(ctx, acl.DESCRIBE, acl.TOPIC, name)
        if check and not authorize(ctx, acl.DELETE, acl.TOPIC, name) and (
                by_id or not describable or state.catalog.get(name) is not None):
            # as Kafka's controller: a name given and describable but unknown is UNKNOWN_TOPIC_OR_PARTITION;
            # a topic given by id is named only to those who may DESCRIBE it
            shown = name if not by_id or describable else None
            results.append(DeletableTopicResult(name=shown, topic_id=topic_id,
                                                error_code=ke.TopicAuthorizationFailedError.errno,
                                                error_message="Topic authorization failed."))
            continue
        if not state.config.delete_topic_enable:
            results.append(DeletableTopicResult(name=name, topic_id=topic_id,
                                                error_code=ke.TopicDeletionDisabledError.errno, error_message=None))
            continue
        if quota.exceeded():
            results.append(DeletableTopicResult(name=name, topic_id=topic_id, error_code=THROTTLED,
                                                error_message=THROTTLED_MESSAGE))
            continue
        if quota.bucket is not None:
            known = state.catalog.get(name)
            quota.record(known.partitions if known is not None else 0)
        if state.cluster is not None:
            code, message, tid = await _delete_on_cluster(ctx, name)
            results.append(DeletableTopicResult(name=name, topic_id=tid if code == 0 else topic_id, error_code=code,
                                                error_message=message))
            continue
        try:
            info = await state.catalog.delete_async(name)
            results.append(DeletableTopicResult(name=name, topic_id=info.topic_id, error_code=0, error_message=None))
        except Exception as exc:
            code, message = _error(exc)
            results.append(DeletableTopicResult(name=name, topic_id=topic_id, error_code=code,
                                                error_message=message))
    return DeleteTopicsResponse(throttle_time_ms=quota.throttle_ms(), responses=results)


@handles(CreatePartitionsRequest, CreatePartitionsResponse, 0, 3)
async def handle_create_partitions(ctx: RequestContext, req: CreatePartitionsRequest) -> CreatePartitionsResponse:
    state = ctx.broker
    counts = Counter(t.name for t in req.topics)
    results = []
    added = 0  # partitions this request adds so far (Kafka's bound is on records per operation)
    quota = _mutation_quota(ctx, 3)
    alterable = None
    if state.authorizer is not None:  # ALTER on each topic (Kafka's controller: no cluster-wide grant)
        alterable = authorized_names(ctx, acl.ALTER, acl.TOPIC, [t.name for t in req.topics])
    for t in req.topics:
        if alterable is not None and counts[t.name] == 1 and t.name not in alterable:
            results.append(CreatePartitionsResult(name=t.name, error_code=ke.TopicAuthorizationFailedError.errno,
                                                  error_message=None))
            continue
        if counts[t.name] > 1:
            results.append(CreatePartitionsResult(name=t.name, error_code=INVALID_REQUEST,
                                                  error_message="Duplicate topic in request."))
            continue

        def validate(info: TopicInfo, t=t) -> None:
            if t.assignments is not None:
                if len(t.assignments) != t.count - info.partitions:
                    raise InvalidReplicaAssignmentError(
                        f"Increasing the number of partitions by {t.count - info.partitions} but "
                        f"{len(t.assignments)} assignments provided.")
                for a in t.assignments:
                    if list(a.broker_ids) != [state.node_id]:
                        raise InvalidReplicaAssignmentError(f"replica assignment {list(a.broker_ids)} must be "
                                                            f"[{state.node_id}] on a single broker")
            state.catalog.check_batch(t.count - info.partitions, added)

        if quota.exceeded():
            results.append(CreatePartitionsResult(name=t.name, error_code=THROTTLED, error_message=THROTTLED_MESSAGE))
            continue
        if quota.bucket is not None:
            known = state.catalog.get(t.name)
            quota.record(max(t.count - known.partitions, 0) if known is not None else 0)
        if state.cluster is not None:
            code, message = await _create_partitions_on_cluster(ctx, t, req.validate_only)
            results.append(CreatePartitionsResult(name=t.name, error_code=code, error_message=message))
            continue
        try:
            info = state.catalog.check_add_partitions(t.name, t.count)
            new = t.count - info.partitions
            await state.catalog.add_partitions_async(t.name, t.count, validate, req.validate_only)
            added += new
            results.append(CreatePartitionsResult(name=t.name, error_code=0, error_message=None))
        except BatchTooLargeError as exc:
            results.append(CreatePartitionsResult(name=t.name, error_code=UNKNOWN_SERVER_ERROR,
                                                  error_message=str(exc)))
        except Exception as exc:
            code, message = _error(exc)
            results.append(CreatePartitionsResult(name=t.name, error_code=code, error_message=message))
    return CreatePartitionsResponse(throttle_time_ms=quota.throttle_ms(), results=results)
