"""Streams groups under ACLs (KIP-1071), as Kafka 4.3.1's KafkaApis checks them: READ on the group for
StreamsGroupHeartbeat, DESCRIBE on every topic the topology names, CREATE (cluster or topic) for the internal
topics the broker would create (refused ones are named in the MISSING_INTERNAL_TOPICS status), and DESCRIBE on
the topics of a group StreamsGroupDescribe shows. Runs against minikafka and, with --broker=kafka, Apache Kafka."""
from __future__ import annotations

import pytest

from minikafka.broker.security import acl as A
from tests.conftest import BrokerProcess, broker_kind
from tests.integration.groups.test_streams_group_protocol import (
    MISSING_INTERNAL_TOPICS,
    describe,
    hb,
    no_initial_delay,
    statuses,
    topology,
)
from tests.support.authz_helpers import STANDARD_AUTHORIZER, binding, bootstrap_admin, secured_broker
from tests.support.consumer_protocol_helpers import ready_coordinator
from tests.support.group_helpers import unique
from tests.support.helpers import RawClient

GROUP_DENIED, TOPIC_DENIED = 30, 29


@pytest.fixture(scope="module")
def secured(request, tmp_path_factory):
    if broker_kind(request.config) != "minikafka":
        yield from secured_broker(request, tmp_path_factory)
        return
    d = tmp_path_factory.mktemp("acl") / "data"
    d.mkdir()
    b = BrokerProcess(d, {"authorizer.class.name": STANDARD_AUTHORIZER, "allow.everyone.if.no.acl.found": "true"}).start()
    try:
        yield b.bootstrap
    finally:
        b.stop()


def test_streams_group_acls(secured):
    admin = bootstrap_admin(secured)
    try:
        source, group = unique("sga-in"), unique("sga-app")
        admin.create_topic(source, 1, records=0)
        changelog = f"{group}-store-changelog"
        topo = topology(source, group, repartition=False)
        ready_coordinator(admin.client, group)
        no_initial_delay(admin.client, group)
        # the client (CLIENT_HOST) gets exactly these: the group, DESCRIBE on the topology's topics; no CREATE
        grants = [binding(A.GROUP, group, A.READ), binding(A.GROUP, group, A.DESCRIBE),
                  binding(A.TOPIC, source, A.DESCRIBE), binding(A.TOPIC, changelog, A.DESCRIBE)]
        admin.grant(*grants)
        with RawClient(secured) as c:
            r = hb(c, group, "m1", 0, topo=topo)
            assert r.error_code == 0, r
            assert statuses(r)[MISSING_INTERNAL_TOPICS] == (f"Internal topics are missing: {changelog}; "
                                                            f"Unauthorized to CREATE on topics {changelog}."), r
            # with CREATE on the topic the broker creates it
            create = binding(A.TOPIC, changelog, A.CREATE)
            admin.grant(create)
            r = hb(c, group, "m1", 0, topo=topo)
            assert r.error_code == 0 and statuses(r)[MISSING_INTERNAL_TOPICS] == \
                f"Internal topics are missing: {changelog}", r
            # no DESCRIBE on a topic of the topology
            admin.revoke(grants[2])
            r = hb(c, group, "m2", 0, topo=topo)
            assert (r.error_code, r.error_message) == (TOPIC_DENIED, None), r
            # StreamsGroupDescribe hides a group whose topics the caller may not describe
            d = describe(c, group)
            assert (d.error_code, d.error_message, d.members) == (
                TOPIC_DENIED, "The described group uses topics that the client is not authorized to describe.", []), d
            admin.grant(grants[2])
            assert describe(c, group).error_code == 0
            # no READ on the group
            admin.revoke(grants[0])
            r = hb(c, group, "m1", 0, topo=topo)
            assert r.error_code == GROUP_DENIED, r
    finally:
        admin.close()
