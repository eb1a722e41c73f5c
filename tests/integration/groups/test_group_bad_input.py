"""Group and offset requests that must fail, with the error code Apache Kafka returns (verified
against Kafka 4.3 with --broker=kafka): stale generations, unknown members, missing topics and
groups, fenced static members, inconsistent protocols, out-of-range session timeouts."""
from __future__ import annotations

import uuid

import kafka.errors as ke
from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import (
    HeartbeatRequest,
    JoinGroupRequest,
    LeaveGroupRequest,
    OffsetCommitRequest,
    OffsetDeleteRequest,
    OffsetFetchRequest,
    SyncGroupRequest,
)

from tests.support.group_helpers import FAST_GROUPS, RawMember, create_topic, group_broker, unique  # noqa: F401
from tests.support.helpers import RawClient, metadata_raw

ILLEGAL_GENERATION = ke.IllegalGenerationError.errno  # 22
UNKNOWN_MEMBER_ID = ke.UnknownMemberIdError.errno  # 25
UNKNOWN_TOPIC_OR_PARTITION = ke.UnknownTopicOrPartitionError.errno  # 3
GROUP_ID_NOT_FOUND = ke.GroupIdNotFoundError.errno  # 69


def stable_member(bs: str, topic: str, **kw) -> RawMember:
    m = RawMember(bs, unique("g-bad"), topic, **kw)
    m.find_coordinator()
    assert m.join().error_code == 0
    assert m.sync({m.member_id: b""}).error_code == 0
    return m


def test_offset_commit_generation_and_member_checks(group_broker):
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("grp-bad"), 2)
    m = stable_member(bs, topic)
    try:
        assert m.commit({0: 5}) == {0: 0}
        assert m.commit({0: 5}, generation=m.generation + 1) == {0: ILLEGAL_GENERATION}
        assert m.commit({0: 5}, generation=m.generation - 1) == {0: ILLEGAL_GENERATION}
        assert m.commit({0: 5}, member_id="not-a-member") == {0: UNKNOWN_MEMBER_ID}
        # a "simple" commit (generation -1, no member) is only accepted while the group is empty
        assert m.commit({0: 5}, generation=-1, member_id="") == {0: UNKNOWN_MEMBER_ID}
        assert m.commit({0: 5}, generation=-1) == {0: ILLEGAL_GENERATION}
        # metadata longer than offset.metadata.max.bytes (4096)
        T = OffsetCommitRequest.OffsetCommitRequestTopic
        big = OffsetCommitRequest(group_id=m.group, generation_id_or_member_epoch=m.generation,
                                  member_id=m.member_id, group_instance_id=None, topics=[T(name=topic, partitions=[
                                      T.OffsetCommitRequestPartition(partition_index=1, committed_offset=1,
                                                                     committed_leader_epoch=-1,
                                                                     committed_metadata="x" * 5000)])])
        (p,) = m.client.request(big, 8).topics[0].partitions
        assert p.error_code == ke.OffsetMetadataTooLargeError.errno
        assert m.fetch([0, 1]) == {0: (5, 0), 1: (-1, 0)}
    finally:
        m.close()


def test_offsets_for_missing_topics_and_partitions(group_broker):
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("grp-bad"), 2)
    m = RawMember(bs, unique("g-simple"), topic)
    m.find_coordinator()
    try:
        missing = unique("no-such-topic")
        # Kafka answers for unknown topics before the group coordinator: no group is created
        assert m.commit({0: 1}, generation=-1, member_id="", topic=missing) == {0: UNKNOWN_TOPIC_OR_PARTITION}
        assert m.commit({7: 1}, generation=-1, member_id="") == {7: UNKNOWN_TOPIC_OR_PARTITION}
        d = m.client.request(DescribeGroupsRequest(groups=[m.group], include_authorized_operations=False), 6)
        assert d.groups[0].error_code == GROUP_ID_NOT_FOUND and d.groups[0].group_state == "Dead"
        # fetching offsets of a missing topic is not an error: nothing committed
        req = OffsetFetchRequest(group_id=m.group, topics=[OffsetFetchRequest.OffsetFetchRequestTopic(
            name=missing, partition_indexes=[0, 1])], require_stable=True)
        resp = m.client.request(req, 7)
        assert resp.error_code == 0
        assert [(p.partition_index, p.committed_offset, p.error_code) for p in resp.topics[0].partitions] == [
            (0, -1, 0), (1, -1, 0)]
        # a standalone commit creates an Empty "simple" group without a protocol type
        assert m.commit({0: 3}, generation=-1, member_id="") == {0: 0}
        listed = m.client.request(ListGroupsRequest(states_filter=[], types_filter=[]), 5)
        (g,) = [g for g in listed.groups if g.group_id == m.group]
        assert (g.protocol_type, g.group_state, g.group_type) == ("", "Empty", "classic")
        # v9+: committing with a generation to a group that does not exist
        other = RawMember(bs, unique("g-none"), topic)
        try:
            assert other.commit({0: 1}, generation=3, member_id="m", version=9) == {0: GROUP_ID_NOT_FOUND}
            assert other.commit({0: 1}, generation=3, member_id="m", version=8) == {0: ILLEGAL_GENERATION}
        finally:
            other.close()
    finally:
        m.close()


def test_offset_commit_and_fetch_by_topic_id(group_broker):
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("grp-bad"), 2)
    with RawClient(bs) as c:
        topic_id = metadata_raw(c, [topic], version=12).topics[0].topic_id
        m = RawMember(bs, unique("g-ids"), topic)
        m.find_coordinator()
        T = OffsetCommitRequest.OffsetCommitRequestTopic
        P = T.OffsetCommitRequestPartition
        unknown_id = uuid.uuid4()
        resp = m.client.request(OffsetCommitRequest(
            group_id=m.group, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None, topics=[
                T(name="", topic_id=topic_id, partitions=[P(partition_index=0, committed_offset=4,
                                                            committed_leader_epoch=-1, committed_metadata="")]),
                T(name="", topic_id=unknown_id, partitions=[P(partition_index=0, committed_offset=4,
                                                              committed_leader_epoch=-1, committed_metadata="")])]),
            10)
        got = {(t.topic_id, p.partition_index): p.error_code for t in resp.topics for p in t.partitions}
        assert got == {(topic_id, 0): 0, (unknown_id, 0): ke.UnknownTopicIdError.errno}
        G = OffsetFetchRequest.OffsetFetchRequestGroup
        resp = m.client.request(OffsetFetchRequest(groups=[G(group_id=m.group, member_id=None, member_epoch=-1, topics=[
            G.OffsetFetchRequestTopics(topic_id=topic_id, partition_indexes=[0, 1]),
            G.OffsetFetchRequestTopics(topic_id=unknown_id, partition_indexes=[0])])], require_stable=False), 10)
        got = {(t.topic_id, p.partition_index): (p.committed_offset, p.error_code)
               for t in resp.groups[0].topics for p in t.partitions}
        assert got == {(topic_id, 0): (4, 0), (topic_id, 1): (-1, 0), (unknown_id, 0): (-1, ke.UnknownTopicIdError.errno)}
        m.close()


def test_membership_errors(group_broker):
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("grp-bad"), 1)
    m = stable_member(bs, topic)
    try:
        c = m.client
        # heartbeats: stale generation, unknown member, unknown group, empty group id
        assert m.heartbeat(generation=m.generation + 1) == ILLEGAL_GENERATION
        assert m.heartbeat(member_id="nobody") == UNKNOWN_MEMBER_ID
        hb = HeartbeatRequest(group_id=unique("g-unknown"), generation_id=1, member_id="m", group_instance_id=None)
        assert c.request(hb, 4).error_code == UNKNOWN_MEMBER_ID
        hb = HeartbeatRequest(group_id="", generation_id=1, member_id="m", group_instance_id=None)
        assert c.request(hb, 4).error_code == ke.InvalidGroupIdError.errno
        # SyncGroup with a stale generation / another protocol name
        sync = SyncGroupRequest(group_id=m.group, generation_id=m.generation + 1, member_id=m.member_id,
                                group_instance_id=None, protocol_type="consumer", protocol_name="range", assignments=[])
        assert c.request(sync, 5).error_code == ILLEGAL_GENERATION
        sync.generation_id, sync.protocol_name = m.generation, "roundrobin"
        assert c.request(sync, 5).error_code == ke.InconsistentGroupProtocolError.errno
        # JoinGroup: session timeout outside [group.min, group.max].session.timeout.ms
        short = RawMember(bs, m.group, topic, session_timeout_ms=1000)
        r = short.join()
        assert (r.error_code, r.member_id, r.generation_id) == (ke.InvalidSessionTimeoutError.errno, "", -1)
        short.close()
        # JoinGroup v4+: the first join of a dynamic member gets MEMBER_ID_REQUIRED with its id
        join = JoinGroupRequest(group_id=m.group, session_timeout_ms=10000, rebalance_timeout_ms=10000, member_id="",
                                group_instance_id=None, protocol_type="consumer", protocols=[
                                    JoinGroupRequest.JoinGroupRequestProtocol(name="range", metadata=b"")], reason=None)
        r = c.request(join, 4)
        assert r.error_code == ke.MemberIdRequiredError.errno and r.member_id.startswith("raw-member-")
        # a protocol the members don't share / another protocol type
        join.member_id, join.protocols = "", [JoinGroupRequest.JoinGroupRequestProtocol(name="other", metadata=b"")]
        assert c.request(join, 3).error_code == ke.InconsistentGroupProtocolError.errno
        # LeaveGroup: per-member errors (v3+), folded into the top level before v3
        leave = LeaveGroupRequest(group_id=m.group, members=[
            LeaveGroupRequest.MemberIdentity(member_id="nobody", group_instance_id=None, reason=None),
            LeaveGroupRequest.MemberIdentity(member_id="", group_instance_id="no-such-instance", reason=None)])
        r = c.request(leave, 5)
        assert r.error_code == 0 and [x.error_code for x in r.members] == [UNKNOWN_MEMBER_ID, UNKNOWN_MEMBER_ID]
        assert c.request(LeaveGroupRequest(group_id=m.group, member_id="nobody"), 2).error_code == UNKNOWN_MEMBER_ID
        # the group cannot be deleted, nor its offsets of subscribed topics, while it has members
        unknown = unique("g-unknown")
        r = c.request(DeleteGroupsRequest(groups_names=[m.group, unknown]), 2)
        assert {x.group_id: x.error_code for x in r.results} == {m.group: ke.NonEmptyGroupError.errno,
                                                                 unknown: GROUP_ID_NOT_FOUND}
        od = OffsetDeleteRequest(group_id=m.group, topics=[OffsetDeleteRequest.OffsetDeleteRequestTopic(
            name=topic, partitions=[OffsetDeleteRequest.OffsetDeleteRequestTopic.OffsetDeleteRequestPartition(
                partition_index=0)])])
        r = c.request(od, 0)
        assert r.error_code == 0 and r.topics[0].partitions[0].error_code == ke.GroupSubscribedToTopicError.errno
        od.group_id = unique("g-unknown")
        assert c.request(od, 0).error_code == GROUP_ID_NOT_FOUND
        # DescribeGroups of an unknown group: Dead without error before v6, GROUP_ID_NOT_FOUND from v6
        unknown = unique("g-unknown")
        r5 = c.request(DescribeGroupsRequest(groups=[unknown], include_authorized_operations=False), 5).groups[0]
        r6 = c.request(DescribeGroupsRequest(groups=[unknown], include_authorized_operations=False), 6).groups[0]
        assert (r5.error_code, r5.group_state) == (0, "Dead")
        assert (r6.error_code, r6.group_state, r6.error_message) == (GROUP_ID_NOT_FOUND, "Dead",
                                                                     f"Group {unknown} not found.")
    finally:
        m.close()


def test_static_member_fencing(group_broker):
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("grp-bad"), 1)
    m = stable_member(bs, topic, instance_id="instance-1")
    try:
        old_id = m.member_id
        again = RawMember(bs, m.group, topic, instance_id="instance-1")
        r = again.join()
        assert r.error_code == 0 and again.member_id != old_id and again.generation == m.generation
        # the old member id of the instance is fenced
        assert m.heartbeat() == ke.FencedInstanceIdError.errno
        assert m.commit({0: 1}) == {0: ke.FencedInstanceIdError.errno}
        assert again.heartbeat() == 0
        again.close()
    finally:
        m.close()


def test_group_max_size(broker_factory):
    bs = broker_factory({**FAST_GROUPS, "group.max.size": "1"}).bootstrap
    topic = create_topic(bs, unique("grp-bad"), 1)
    m = stable_member(bs, topic)
    other = RawMember(bs, m.group, topic)
    try:
        r = other.join()
        assert r.error_code == ke.GroupMaxSizeReachedError.errno
    finally:
        other.close()
        m.close()
