"""Raw-protocol checks of what admin clients read: authorized-operations fields (Metadata v8+,
DescribeCluster, DescribeGroups) as Kafka answers them with no authorizer, and DescribeTopicPartitions
(API 75) with its cursor paging and errors. Black-box: also runs with --broker=kafka.
"""
from __future__ import annotations

import time
import uuid

import kafka.errors as ke
import pytest
from confluent_kafka.admin import AdminClient, NewTopic
from kafka.protocol.admin import (
    DescribeClusterRequest,
    DescribeClusterResponse,
    DescribeGroupsRequest,
    DescribeGroupsResponse,
    DescribeTopicPartitionsRequest,
    DescribeTopicPartitionsResponse,
)
from kafka.protocol.metadata import FindCoordinatorRequest, FindCoordinatorResponse, MetadataRequest, MetadataResponse

from tests.support.helpers import RawClient, wait_broker_connections_closed, wait_topic_ready

TIMEOUT = 30
# AclOperation codes: what Kafka allows for each resource type when no authorizer is configured
TOPIC_OPS = {3, 4, 5, 6, 7, 8, 10, 11}  # READ WRITE CREATE DELETE ALTER DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS
CLUSTER_OPS = {5, 7, 8, 9, 10, 11, 12}  # CREATE ALTER DESCRIBE CLUSTER_ACTION DESCRIBE/ALTER_CONFIGS IDEMPOTENT_WRITE
GROUP_OPS = {3, 6, 8, 10, 11}  # READ DELETE DESCRIBE DESCRIBE_CONFIGS ALTER_CONFIGS
COORDINATOR_NOT_READY = {14, 15, 16}  # COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR


@pytest.fixture(scope="module", autouse=True)
def _quiet_before_shutdown(shared_broker):
    yield
    wait_broker_connections_closed(shared_broker)


@pytest.fixture(scope="module")
def topics(shared_broker):
    """Two topics, <p>-a with 3 partitions and <p>-b with 2, nothing else named <p>-*."""
    prefix = f"dtp-{uuid.uuid4().hex[:8]}"
    a, b = f"{prefix}-a", f"{prefix}-b"
    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    for f in admin.create_topics([NewTopic(a, 3, 1), NewTopic(b, 2, 1)]).values():
        f.result(timeout=TIMEOUT)
    wait_topic_ready(shared_broker.bootstrap, a, 3)
    wait_topic_ready(shared_broker.bootstrap, b, 2)
    return prefix, a, b


def ops(value) -> set[int] | None:
    return None if value is None else set(value)


# --- authorized operations ---------------------------------------------------------------------
@pytest.mark.parametrize("version", [8, 10])
def test_metadata_authorized_operations(shared_broker, topics, version):
    _, a, _ = topics
    with RawClient(shared_broker.bootstrap) as c:
        req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=a, topic_id=None)],
                              allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
                              include_topic_authorized_operations=True)
        r = c.request(req, version, MetadataResponse)
        assert ops(r.authorized_operations) == CLUSTER_OPS
        assert ops(r.topics[0].authorized_operations) == TOPIC_OPS
        req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=a, topic_id=None)],
                              allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                              include_topic_authorized_operations=False)
        r = c.request(req, version, MetadataResponse)
        assert r.authorized_operations is None and r.topics[0].authorized_operations is None


def test_metadata_v12_topic_operations_and_unknown_topic(shared_broker, topics):
    prefix, a, _ = topics
    missing = f"{prefix}-missing"
    with RawClient(shared_broker.bootstrap) as c:
        req = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=n, topic_id=None) for n in (a, missing)],
                              allow_auto_topic_creation=False, include_topic_authorized_operations=True)
        r = c.request(req, 12, MetadataResponse)
    by_name = {t.name: t for t in r.topics}
    assert ops(by_name[a].authorized_operations) == TOPIC_OPS
    assert by_name[missing].error_code == ke.UnknownTopicOrPartitionError.errno
    assert ops(by_name[missing].authorized_operations) == TOPIC_OPS


@pytest.mark.parametrize("include", [True, False])
def test_describe_cluster_authorized_operations(shared_broker, include):
    with RawClient(shared_broker.bootstrap) as c:
        r = c.request(DescribeClusterRequest(include_cluster_authorized_operations=include, endpoint_type=1,
                                             include_fenced_brokers=False), 1, DescribeClusterResponse)
    assert r.error_code == 0
    assert ops(r.authorized_operations) == (CLUSTER_OPS if include else None)


def test_describe_cluster_controllers_on_a_broker_listener_is_a_mismatch(shared_broker):
    with RawClient(shared_broker.bootstrap) as c:
        r = c.request(DescribeClusterRequest(include_cluster_authorized_operations=False, endpoint_type=2,
                                             include_fenced_brokers=False), 2, DescribeClusterResponse)
    assert (r.error_code, r.error_message) == (ke.MismatchedEndpointTypeError.errno, "The request was sent to an "
                                               "endpoint of type BROKER, but we wanted an endpoint of type CONTROLLER")
    assert (r.controller_id, r.brokers) == (-1, [])


@pytest.mark.parametrize("version", [5, 6])
def test_describe_groups_authorized_operations(shared_broker, version):
    """A group that does not exist: Dead with no error before v6 (operations filled in), an error
    from v6 on (operations left at the default)."""
    group = f"authz-{uuid.uuid4().hex[:8]}"
    with RawClient(shared_broker.bootstrap) as c:
        deadline = time.monotonic() + TIMEOUT
        while True:  # the coordinator (and __consumer_offsets) may not be ready yet
            c.request(FindCoordinatorRequest(key=group, key_type=0), 2, FindCoordinatorResponse)
            r = c.request(DescribeGroupsRequest(groups=[group], include_authorized_operations=True), version,
                          DescribeGroupsResponse)
            (g,) = r.groups
            if g.error_code not in COORDINATOR_NOT_READY or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        if version < 6:
            assert (g.error_code, g.group_state) == (0, "Dead")
            assert ops(g.authorized_operations) == GROUP_OPS
        else:
            assert g.error_code == ke.GroupIdNotFoundError.errno
            assert g.authorized_operations is None
        r = c.request(DescribeGroupsRequest(groups=[group], include_authorized_operations=False), version,
                      DescribeGroupsResponse)
        assert r.groups[0].authorized_operations is None


# --- DescribeTopicPartitions -------------------------------------------------------------------
def dtp(bootstrap: str, names: list[str], limit: int = 2000, cursor: tuple[str, int] | None = None):
    Q = DescribeTopicPartitionsRequest
    req = Q(topics=[Q.TopicRequest(name=n) for n in names], response_partition_limit=limit,
            cursor=Q.Cursor(topic_name=cursor[0], partition_index=cursor[1]) if cursor else None)
    with RawClient(bootstrap) as c:
        return c.request(req, 0, DescribeTopicPartitionsResponse)


def shape(resp) -> list[tuple[str, list[int]]]:
    return [(t.name, [p.partition_index for p in t.partitions]) for t in resp.topics]


def cursor_of(resp) -> tuple[str, int] | None:
    c = resp.next_cursor
    return None if c is None else (c.topic_name, c.partition_index)


def test_describe_topic_partitions_fields(shared_broker, topics):
    prefix, a, b = topics
    missing, bad = f"{prefix}-missing", "bad name!"
    r = dtp(shared_broker.bootstrap, [b, missing, a, bad, a])
    assert r.next_cursor is None
    # sorted by name, duplicates once; a missing topic with its error
    assert [t.name for t in r.topics] == sorted({a, b, missing, bad})
    by_name = {t.name: t for t in r.topics}
    t = by_name[a]
    assert (t.error_code, t.is_internal, len(t.partitions)) == (0, False, 3)
    assert t.topic_id is not None and t.topic_id.int != 0
    assert t.topic_authorized_operations == sum(1 << op for op in TOPIC_OPS)
    for i, p in enumerate(t.partitions):
        assert (p.error_code, p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes, p.offline_replicas) == (
            0, i, 1, [1], [1], [])
        assert p.leader_epoch >= 0
        assert p.eligible_leader_replicas == [] and p.last_known_elr == []
    m = by_name[missing]
    assert (m.error_code, m.partitions) == (ke.UnknownTopicOrPartitionError.errno, [])
    assert m.topic_id is None or m.topic_id.int == 0
    assert m.topic_authorized_operations == sum(1 << op for op in TOPIC_OPS)
    assert by_name[bad].error_code == ke.InvalidTopicError.errno


def test_describe_topic_partitions_paging(shared_broker, topics):
    _, a, b = topics
    bs = shared_broker.bootstrap
    r = dtp(bs, [a, b], limit=2)
    assert (shape(r), cursor_of(r)) == ([(a, [0, 1])], (a, 2))
    r = dtp(bs, [a, b], limit=2, cursor=(a, 2))
    assert (shape(r), cursor_of(r)) == ([(a, [2]), (b, [0])], (b, 1))
    r = dtp(bs, [a, b], limit=2, cursor=(b, 1))
    assert (shape(r), cursor_of(r)) == ([(b, [1])], None)
    # the limit used up exactly at the end of a topic: the cursor names the next topic, partition 0
    r = dtp(bs, [a, b], limit=3)
    assert (shape(r), cursor_of(r)) == ([(a, [0, 1, 2])], (b, 0))
    # a limit below 1 counts as 1
    r = dtp(bs, [a], limit=0)
    assert (shape(r), cursor_of(r)) == ([(a, [0])], (a, 1))


def test_describe_topic_partitions_all_topics_from_cursor(shared_broker, topics):
    _, a, b = topics
    r = dtp(shared_broker.bootstrap, [], limit=5, cursor=(a, 1))
    assert shape(r)[:2] == [(a, [1, 2]), (b, [0, 1])]
    nxt = cursor_of(r)
    assert nxt is None or nxt[0] > b


def test_describe_topic_partitions_invalid_cursor(shared_broker, topics):
    _, a, b = topics
    r = dtp(shared_broker.bootstrap, [a], cursor=(b, 0))  # the cursor's topic is not in the list
    assert [(t.name, t.error_code, t.partitions) for t in r.topics] == [(a, ke.InvalidRequestError.errno, [])]
    r = dtp(shared_broker.bootstrap, [a, b], cursor=(a, -1))
    assert [(t.name, t.error_code) for t in r.topics] == [(a, ke.InvalidRequestError.errno),
                                                           (b, ke.InvalidRequestError.errno)]
    # an empty name fails the whole request (Kafka: UNKNOWN_SERVER_ERROR)
    r = dtp(shared_broker.bootstrap, ["", a])
    assert [(t.name, t.error_code, t.partitions) for t in r.topics] == [("", -1, []), (a, -1, [])]
    # a cursor beyond the topic's partitions: the topic, with none of them
    r = dtp(shared_broker.bootstrap, [a], cursor=(a, 7))
    assert (shape(r), cursor_of(r)) == ([(a, [])], None)


# --- DescribeConfigs of topics: name errors ----------------------------------------------------
def test_describe_configs_topic_name_errors(shared_broker):
    from kafka.protocol.admin import DescribeConfigsRequest, DescribeConfigsResponse
    R = DescribeConfigsRequest.DescribeConfigsResource
    names = ["bad name!", "", f"no-such-{uuid.uuid4().hex[:8]}"]
    req = DescribeConfigsRequest(resources=[R(resource_type=2, resource_name=n, configuration_keys=None) for n in names],
                                 include_synonyms=False, include_documentation=False)
    with RawClient(shared_broker.bootstrap) as c:
        res = c.request(req, 4, DescribeConfigsResponse).results
    assert [(r.resource_name, r.error_code, r.error_message, r.configs) for r in res] == [
        ("bad name!", ke.InvalidTopicError.errno, "Topic name is invalid: 'bad name!' contains one or more characters "
                                                  "other than ASCII alphanumerics, '.', '_' and '-'", []),
        ("", ke.InvalidTopicError.errno, "Topic name is invalid: the empty string is not allowed", []),
        (names[2], ke.UnknownTopicOrPartitionError.errno, "", [])]
