"""Where Kafka 4.3's handlers put an authorization check relative to the others, and what a denied request
learns: ConsumerGroupDescribe hides a group whose assignments name a topic the caller may not DESCRIBE
(TOPIC_AUTHORIZATION_FAILED); DescribeGroups answers denied groups first; DescribeProducers validates the
topic name before authorizing; BROKER_LOGGER and CLIENT_METRICS config resources are authorized on the
cluster before their names are validated. Runs on minikafka and on the Apache Kafka oracle
(`--broker=kafka`), configured as tests/support/authz_helpers.py describes."""
from __future__ import annotations

import uuid

import pytest
from kafka.protocol.admin import (DescribeConfigsRequest, DescribeGroupsRequest, DescribeProducersRequest,
                                  IncrementalAlterConfigsRequest)

from minikafka.broker.security import acl as A
from tests.support.authz_helpers import (CLUSTER_DENIED, GROUP_DENIED, TOPIC_DENIED, binding, bootstrap_admin, secured_broker)
from tests.support.consumer_protocol_helpers import describe, heartbeat, ready_coordinator
from tests.support.helpers import RawClient, wait_until

BROKER_LOGGER, CLIENT_METRICS = 8, 16
INVALID_TOPIC, INVALID_REQUEST = 17, 42


@pytest.fixture(scope="module")
def secured(request, tmp_path_factory):
    yield from secured_broker(request, tmp_path_factory)


@pytest.fixture(scope="module")
def admin(secured):
    a = bootstrap_admin(secured)
    yield a
    a.close()


def tag() -> str:
    return uuid.uuid4().hex[:8]


def test_consumer_group_describe_hides_groups_assigned_topics_the_caller_cannot_describe(secured, admin):
    topic, group = f"cgd-t-{tag()}", f"cgd-g-{tag()}"
    admin.create_topic(topic, partitions=2)
    ready_coordinator(admin.client, group)
    member = str(uuid.uuid4())
    resp = heartbeat(admin.client, group, member, 0, topics=[topic])
    assert resp.error_code == 0, resp
    epoch = [resp.member_epoch]

    def assigned() -> bool:  # heartbeats until the member's assignment names the topic (as the admin sees it)
        r = heartbeat(admin.client, group, member, epoch[0])
        if r.error_code == 0:
            epoch[0] = r.member_epoch
        return any(m.assignment.topic_partitions or m.target_assignment.topic_partitions
                   for m in describe(admin.client, group)[group].members)
    wait_until(assigned, timeout=20, interval=0.3, what="an assignment")
    grants = [binding(A.GROUP, group, A.DESCRIBE)]
    admin.grant(*grants)
    try:
        with RawClient(secured) as c:
            g = describe(c, group)[group]
            assert (g.error_code, g.error_message, g.members) == (
                TOPIC_DENIED, "The group has described topic(s) that the client is not authorized to describe.", []), g
            admin.grant(binding(A.TOPIC, topic, A.DESCRIBE))
            g = describe(c, group)[group]
            assert g.error_code == 0 and g.members, g
            admin.revoke(binding(A.TOPIC, topic, A.DESCRIBE))
    finally:
        admin.revoke(*grants)


def test_describe_groups_lists_denied_groups_first(secured, admin):
    allowed, denied = f"dg-ok-{tag()}", f"dg-no-{tag()}"
    admin.grant(binding(A.GROUP, allowed, A.DESCRIBE))
    try:
        with RawClient(secured) as c:
            ready_coordinator(admin.client, allowed)
            resp = c.request(DescribeGroupsRequest(groups=[allowed, denied], include_authorized_operations=False), 5)
        assert [(g.group_id, g.error_code) for g in resp.groups] == [(denied, GROUP_DENIED), (allowed, 0)]
    finally:
        admin.revoke(binding(A.GROUP, allowed, A.DESCRIBE))


def test_describe_producers_validates_the_topic_name_before_authorizing(secured, admin):
    T = DescribeProducersRequest.TopicRequest
    with RawClient(secured) as c:
        resp = c.request(DescribeProducersRequest(topics=[T(name="bad name!", partition_indexes=[0]),
                                                          T(name=f"dp-{tag()}", partition_indexes=[0])]), 0)
    assert [(t.partitions[0].error_code, t.partitions[0].error_message) for t in resp.topics] == [
        (INVALID_TOPIC, "Topic name is invalid: 'bad name!' contains one or more characters other than ASCII "
                        "alphanumerics, '.', '_' and '-'"), (TOPIC_DENIED, "Topic authorization failed.")]


@pytest.mark.parametrize("rtype, name", [(BROKER_LOGGER, "99"), (BROKER_LOGGER, ""), (CLIENT_METRICS, "")])
def test_logger_and_client_metrics_resources_are_authorized_first(secured, admin, rtype, name):
    """Without ALTER_CONFIGS / DESCRIBE_CONFIGS on the cluster: CLUSTER_AUTHORIZATION_FAILED, not the
    INVALID_REQUEST their names would get."""
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    with RawClient(secured) as c:
        alter = c.request(IncrementalAlterConfigsRequest(validate_only=True, resources=[R(
            resource_type=rtype, resource_name=name, configs=[R.AlterableConfig(
                name="kafka.server" if rtype == BROKER_LOGGER else "interval.ms", config_operation=0,
                value="DEBUG" if rtype == BROKER_LOGGER else "1000")])]), 1)
        described = c.request(DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=rtype, resource_name=name, configuration_keys=None)], include_synonyms=False,
            include_documentation=False), 4)
    assert alter.responses[0].error_code == CLUSTER_DENIED, alter
    assert described.results[0].error_code == CLUSTER_DENIED, described
