"""Metadata (v0-13): this broker, and topics with their partitions; auto-creates topics. The v13 top-level
error code (KIP-1102) is 0 unless the whole request fails, as Kafka 4.3.1 (which never sends REBOOTSTRAP_REQUIRED)."""
from __future__ import annotations

import kafka.errors as ke
from kafka.protocol.metadata import MetadataRequest, MetadataResponse

from minikafka.broker.security import acl
from minikafka.broker.security.authorized_operations import TOPIC_OPERATIONS
from minikafka.broker.security.authorizer import authorize, authorize_cluster, authorized_names, authorized_operations
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.broker.state import BrokerState
from minikafka.broker.topic_catalog import InvalidTopicNameError, TopicInfo, validate_topic_name
from minikafka.broker.handlers.common import LEADER_EPOCH, ZERO_UUID

Topic = MetadataResponse.MetadataResponseTopic
Partition = Topic.MetadataResponsePartition


def topic_entry(state: BrokerState, info: TopicInfo, listener: str = "") -> Topic:
    node = state.node_id
    if state.cluster is not None:  # a cluster: leaders, replicas, ISR from the metadata image
        from minikafka.broker.cluster.views import partition_view
        if info.name not in state.cluster.image.topics:  # a local leftover the metadata no longer has
            return error_entry(ke.UnknownTopicOrPartitionError.errno, info.name)
        parts = []
        for p in range(info.partitions):
            view = partition_view(state.cluster.image, info.name, p, listener)
            if view is not None:
                parts.append(Partition(error_code=view.error, partition_index=p, leader_id=view.leader,
                                       leader_epoch=view.leader_epoch, replica_nodes=view.replicas,
                                       isr_nodes=view.isr, offline_replicas=view.offline))
        return Topic(error_code=0, name=info.name, topic_id=info.topic_id, is_internal=info.internal,
                     partitions=parts)
    parts = [Partition(error_code=0, partition_index=p, leader_id=node, leader_epoch=LEADER_EPOCH,
                       replica_nodes=[node], isr_nodes=[node], offline_replicas=[])
             for p in range(info.partitions)]
    return Topic(error_code=0, name=info.name, topic_id=info.topic_id, is_internal=info.internal,
                 partitions=parts)


def error_entry(code: int, name: str | None, topic_id=ZERO_UUID) -> Topic:
    return Topic(error_code=code, name=name, topic_id=topic_id, is_internal=False, partitions=[])


async def resolve(state: BrokerState, name: str, auto_create: bool, listener: str = "") -> Topic:
    info = state.catalog.get(name)
    if info is None:
        try:
            validate_topic_name(name)
        except InvalidTopicNameError:
            return error_entry(ke.InvalidTopicError.errno, name)
        if auto_create:
            info = await state.auto_create_async(name)
        if info is None:
            return error_entry(ke.UnknownTopicOrPartitionError.errno, name)
    return topic_entry(state, info, listener)


def _may_create(ctx: RequestContext, name: str) -> bool:
    """Auto-creation needs CREATE on the cluster or on the topic."""
    return authorize_cluster(ctx, acl.CREATE) or authorize(ctx, acl.CREATE, acl.TOPIC, name)


@handles(MetadataRequest, MetadataResponse, 0, 13)
async def handle_metadata(ctx: RequestContext, req: MetadataRequest) -> MetadataResponse:
    state = ctx.broker
    v = ctx.api_version
    all_topics = req.topics is None or (v == 0 and not req.topics)
    auto_create = req.allow_auto_topic_creation if v >= 4 else True
    if not all_topics and v < 12 and any(t.name is None or t.topic_id is not None for t in req.topics):
        # Kafka (KafkaApis.handleTopicMetadataRequest): "Topic name can not be null" / "Topic IDs are not
        # supported" before v12 -> InvalidRequestException -> MetadataRequest.getErrorResponse: every topic
        # INVALID_REQUEST (a null name as ""), no brokers
        return MetadataResponse(throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=-1, topics=[
            Topic(error_code=ke.InvalidRequestError.errno, name=t.name or "", topic_id=t.topic_id,
                  is_internal=False, partitions=[]) for t in req.topics])
    requested = req.topics
    if not all_topics and v >= 12:
        # kafka-python decodes the zero uuid as None. As Kafka: once any topic is asked by id, only the
        # ids count (each once; names are ignored); a null name without an id, no id being asked, fails
        # the whole request (UNKNOWN_SERVER_ERROR for every topic, v13: as the top-level error too)
        ids = list(dict.fromkeys(t.topic_id for t in req.topics if t.topic_id not in (None, ZERO_UUID)))
        if ids:
            requested = [MetadataRequest.MetadataRequestTopic(name=None, topic_id=i) for i in ids]
        elif any(t.name is None for t in req.topics):
            return MetadataResponse(throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=-1,
                                    error_code=ke.UnknownError.errno, topics=[
                                        Topic(error_code=ke.UnknownError.errno, name=t.name or "", topic_id=None,
                                              is_internal=False, partitions=[]) for t in req.topics])
    auth = state.authorizer
    denied: list[Topic] = []  # after the others, without authorized operations (as Kafka)
    if all_topics:
        infos = list(state.catalog.topics.values())
        if state.cluster is not None:
            infos = [i for i in infos if i.name in state.cluster.image.topics]
        if auth is not None:  # topics the principal may not DESCRIBE are left out
            visible = authorized_names(ctx, acl.DESCRIBE, acl.TOPIC, [i.name for i in infos])
            infos = [i for i in infos if i.name in visible]
        topics = [topic_entry(state, info, ctx.listener) for info in infos]
    else:
        topics = []
        for t in requested:
            if t.name is None:  # v12+: lookup by id
                info = state.catalog.by_id.get(t.topic_id)
                if info is not None and not authorize(ctx, acl.DESCRIBE, acl.TOPIC, info.name):
                    # topic ids are not secret: Kafka answers TOPIC_AUTHORIZATION_FAILED with the id
                    denied.append(error_entry(ke.TopicAuthorizationFailedError.errno, None, t.topic_id))
                    continue
                topics.append(topic_entry(state, info, ctx.listener) if info is not None
                              else error_entry(ke.UnknownTopicIdError.errno, None, t.topic_id))
            elif not authorize(ctx, acl.DESCRIBE, acl.TOPIC, t.name):
                # the same answer whether the topic exists or not: its existence is not disclosed
                denied.append(error_entry(ke.TopicAuthorizationFailedError.errno, t.name))
            elif (auth is not None and auto_create and state.config.auto_create_topics
                  and state.catalog.get(t.name) is None and not _may_create(ctx, t.name)):
                denied.append(error_entry(ke.TopicAuthorizationFailedError.errno, t.name))
            else:
                topics.append(await resolve(state, t.name, auto_create, ctx.listener))
    if v >= 8 and req.include_topic_authorized_operations:
        for t in topics:  # every topic of the answer, errors included (as Kafka)
            if t.name is not None:
                t.authorized_operations = authorized_operations(ctx, acl.TOPIC, t.name)
            elif auth is None:
                t.authorized_operations = TOPIC_OPERATIONS
    cluster_ops = None
    if 8 <= v <= 10 and req.include_cluster_authorized_operations:
        cluster_ops = authorized_operations(ctx, acl.CLUSTER, acl.CLUSTER_NAME) \
            if authorize_cluster(ctx, acl.DESCRIBE) else frozenset()
    topics += denied
    adv = state.advertised_for(ctx.listener)
    brokers = [MetadataResponse.MetadataResponseBroker(node_id=state.node_id, host=adv.host, port=adv.port,
                                                        rack=None)]
    controller = state.node_id
    if state.cluster is not None:
        from minikafka.broker.cluster.views import brokers_for_clients, controller_id
        image = state.cluster.image
        brokers = [MetadataResponse.MetadataResponseBroker(node_id=i, host=h, port=p, rack=rack)
                   for i, h, p, rack in brokers_for_clients(image, ctx.listener, state.node_id, (adv.host, adv.port))]
        controller = controller_id(image, ctx.listener)
    return MetadataResponse(throttle_time_ms=0, brokers=brokers, cluster_id=state.cluster_id,
                            controller_id=controller, topics=topics, authorized_operations=cluster_ops,
                            error_code=0)
