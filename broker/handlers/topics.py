"""CreateTopics, DeleteTopics, CreatePartitions against the topic catalog."""
from __future__ import annotations

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

from ..context import RequestContext
from ..errors import error_code, error_message
from ..registry import handles
from ..state import BrokerState
from ..topic_catalog import InvalidReplicaAssignmentError
from .common import ZERO_UUID
from .configs import describe_topic_configs

CreatableTopicResult = CreateTopicsResponse.CreatableTopicResult
DeletableTopicResult = DeleteTopicsResponse.DeletableTopicResult
CreatePartitionsResult = CreatePartitionsResponse.CreatePartitionsTopicResult
INVALID_REQUEST = ke.InvalidRequestError.errno


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


def _create_one(state: BrokerState, t, validate_only: bool) -> CreatableTopicResult:
    partitions = t.num_partitions if t.num_partitions != -1 else state.config.num_partitions
    rf = t.replication_factor if t.replication_factor != -1 else state.config.default_replication_factor
    try:
        if t.assignments:
            if t.num_partitions != -1 or t.replication_factor != -1:
                return CreatableTopicResult(name=t.name, topic_id=ZERO_UUID, error_code=INVALID_REQUEST,
                                            error_message="Both numPartitions or replicationFactor and "
                                                          "replicasAssignments were set. Both cannot be used at "
                                                          "the same time.")
            partitions, rf = _check_assignment(state, t.assignments), 1
        configs = {}
        for c in t.configs:
            if c.value is None:
                return CreatableTopicResult(name=t.name, topic_id=ZERO_UUID, error_code=INVALID_REQUEST,
                                            error_message=f"Null value not supported for topic configs: {c.name}")
            configs[c.name] = c.value
        if validate_only:
            state.catalog.check_create(t.name, partitions, rf, configs)
            topic_id = ZERO_UUID
            info_configs = configs
        else:
            info = state.catalog.create(t.name, partitions, rf, configs)
            topic_id, info_configs = info.topic_id, info.configs
    except Exception as exc:
        return CreatableTopicResult(name=t.name, topic_id=ZERO_UUID, error_code=error_code(exc),
                                    error_message=error_message(exc))
    described = [CreatableTopicResult.CreatableTopicConfigs(
        name=c.name, value=c.value, read_only=c.read_only, config_source=c.config_source, is_sensitive=False)
        for c in describe_topic_configs(state, info_configs, None, False)]
    return CreatableTopicResult(name=t.name, topic_id=topic_id, error_code=0, error_message=None,
                                num_partitions=partitions, replication_factor=rf, configs=described)


@handles(CreateTopicsRequest, CreateTopicsResponse, 2, 7)
async def handle_create_topics(ctx: RequestContext, req: CreateTopicsRequest) -> CreateTopicsResponse:
    counts = Counter(t.name for t in req.topics)
    results = []
    for t in req.topics:
        if counts[t.name] > 1:
            results.append(CreatableTopicResult(name=t.name, topic_id=ZERO_UUID, error_code=INVALID_REQUEST,
                                                error_message="Create topics request from client contains "
                                                              "duplicate topic name"))
            continue
        results.append(_create_one(ctx.broker, t, req.validate_only))
    return CreateTopicsResponse(throttle_time_ms=0, topics=results)


@handles(DeleteTopicsRequest, DeleteTopicsResponse, 1, 6)
async def handle_delete_topics(ctx: RequestContext, req: DeleteTopicsRequest) -> DeleteTopicsResponse:
    state = ctx.broker
    if ctx.api_version >= 6:
        targets = [(t.name, t.topic_id) for t in req.topics]
    else:
        targets = [(name, ZERO_UUID) for name in req.topic_names]
    results = []
    for name, topic_id in targets:
        if name is None:
            info = state.catalog.by_id.get(topic_id)
            if info is None:
                results.append(DeletableTopicResult(name=None, topic_id=topic_id,
                                                    error_code=ke.UnknownTopicIdError.errno, error_message=None))
                continue
            name = info.name
        if not state.config.delete_topic_enable:
            results.append(DeletableTopicResult(name=name, topic_id=topic_id,
                                                error_code=ke.TopicDeletionDisabledError.errno, error_message=None))
            continue
        try:
            info = state.catalog.delete(name)
            results.append(DeletableTopicResult(name=name, topic_id=info.topic_id, error_code=0, error_message=None))
        except Exception as exc:
            results.append(DeletableTopicResult(name=name, topic_id=topic_id, error_code=error_code(exc),
                                                error_message=error_message(exc)))
    return DeleteTopicsResponse(throttle_time_ms=0, responses=results)


@handles(CreatePartitionsRequest, CreatePartitionsResponse, 0, 3)
async def handle_create_partitions(ctx: RequestContext, req: CreatePartitionsRequest) -> CreatePartitionsResponse:
    state = ctx.broker
    counts = Counter(t.name for t in req.topics)
    results = []
    for t in req.topics:
        if counts[t.name] > 1:
            results.append(CreatePartitionsResult(name=t.name, error_code=INVALID_REQUEST,
                                                  error_message="Duplicate topic in request."))
            continue
        try:
            info = state.catalog.check_add_partitions(t.name, t.count)
            if t.assignments is not None:
                if len(t.assignments) != t.count - info.partitions:
                    raise InvalidReplicaAssignmentError(
                        f"Increasing the number of partitions by {t.count - info.partitions} but "
                        f"{len(t.assignments)} assignments provided.")
                for a in t.assignments:
                    if list(a.broker_ids) != [state.node_id]:
                        raise InvalidReplicaAssignmentError(f"replica assignment {list(a.broker_ids)} must be "
                                                            f"[{state.node_id}] on a single broker")
            if not req.validate_only:
                state.catalog.add_partitions(t.name, t.count)
            results.append(CreatePartitionsResult(name=t.name, error_code=0, error_message=None))
        except Exception as exc:
            results.append(CreatePartitionsResult(name=t.name, error_code=error_code(exc),
                                                  error_message=error_message(exc)))
    return CreatePartitionsResponse(throttle_time_ms=0, results=results)

