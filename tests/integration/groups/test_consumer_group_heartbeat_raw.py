"""ConsumerGroupHeartbeat / ConsumerGroupDescribe over raw sockets (KIP-848): the error cases a
client cannot provoke, answered with Kafka's error codes, and member epochs in OffsetCommit and
OffsetFetch. Runs against minikafka and Kafka (--broker=kafka)."""
from __future__ import annotations

import kafka.errors as ke
import pytest
from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest, ListGroupsRequest
from kafka.protocol.consumer import OffsetCommitRequest, OffsetFetchRequest

from minikafka.testing import minikafka_command, subprocess_env
from tests.support.consumer_protocol_helpers import describe, heartbeat, owned_of, ready_coordinator
from tests.support.group_helpers import create_topic, group_broker, unique  # noqa: F401  (fixture)
from tests.support.helpers import RawClient
from tests.support.txn_helpers import add_offsets, end_txn, find_txn_coordinator, init_producer_id, txn_offset_commit

INVALID_REQUEST = ke.InvalidRequestError.errno
UNKNOWN_MEMBER_ID = ke.UnknownMemberIdError.errno
FENCED_MEMBER_EPOCH = ke.FencedMemberEpochError.errno
UNRELEASED_INSTANCE_ID = ke.UnreleasedInstanceIdError.errno
UNSUPPORTED_ASSIGNOR = ke.UnsupportedAssignorError.errno
GROUP_ID_NOT_FOUND = ke.GroupIdNotFoundError.errno
STALE_MEMBER_EPOCH = ke.StaleMemberEpochError.errno
NON_EMPTY_GROUP = ke.NonEmptyGroupError.errno
INVALID_REGULAR_EXPRESSION = 128


def topic_id(client: RawClient, topic: str):
    from tests.support.helpers import metadata_raw
    md = metadata_raw(client, [topic], version=12)
    return md.topics[0].topic_id


def test_heartbeat_errors(group_broker):
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("cgp-raw"), 2)
    group = unique("cg-raw")
    with RawClient(bs) as c:
        ready_coordinator(c, group)
        # v1 wants a client-generated member id
        r = heartbeat(c, group, "", 0, topics=[topic])
        assert r.error_code == INVALID_REQUEST, r
        assert r.error_message == "MemberId can't be empty."
        # the first heartbeat must carry the rebalance timeout, a subscription and no owned partitions
        r = heartbeat(c, group, "m1", 0, topics=[topic], rebalance_timeout_ms=-1)
        assert (r.error_code, r.error_message) == (INVALID_REQUEST,
                                                   "RebalanceTimeoutMs must be provided in first request.")
        r = heartbeat(c, group, "m1", 0, topics=None)
        assert r.error_code == INVALID_REQUEST
        r = heartbeat(c, group, "m1", -3, topics=[topic])
        assert r.error_code == INVALID_REQUEST and r.error_message == "MemberEpoch is invalid."
        r = heartbeat(c, group, "m1", 0, topics=[topic], assignor="nope")
        assert r.error_code == UNSUPPORTED_ASSIGNOR, r
        r = heartbeat(c, group, "m1", 0, regex="[")
        assert (r.error_code, r.error_message) == (
            INVALID_REGULAR_EXPRESSION,
            "SubscribedTopicRegex `[` is not a valid regular expression: missing closing ]."), r
        # an epoch > 0 for a group that does not exist
        r = heartbeat(c, unique("cg-none"), "m1", 3)
        assert r.error_code == GROUP_ID_NOT_FOUND, r

        # a member joins: every partition, the broker's heartbeat interval; the epoch is 2 (Kafka 4.3
        # bumps the new group's epoch once for the member's subscription, once for the topic metadata)
        tid = topic_id(c, topic)
        r = heartbeat(c, group, "m1", 0, topics=[topic])
        assert r.error_code == 0 and r.member_id == "m1" and r.member_epoch == 2, r
        assert r.heartbeat_interval_ms > 0
        assert owned_of(r) == [(tid, [0, 1])]
        # unknown member, epoch from the future
        r = heartbeat(c, group, "m2", 1)
        assert (r.error_code, r.error_message) == (UNKNOWN_MEMBER_ID,
                                                   f"Member m2 is not a member of group {group}.")
        r = heartbeat(c, group, "m1", 3)
        assert r.error_code == FENCED_MEMBER_EPOCH, r
        assert r.error_message.startswith("The consumer group member has a greater member epoch (3)")
        r = heartbeat(c, group, "m1", 2, owned=[(tid, [0, 1])])
        assert r.error_code == 0 and r.member_epoch == 2 and r.assignment is None
        # a heartbeat with everything (rebalance timeout, subscription, owned partitions) gets the assignment
        r = heartbeat(c, group, "m1", 2, topics=[topic], owned=[(tid, [0, 1])], rebalance_timeout_ms=30000)
        assert r.error_code == 0 and owned_of(r) == [(tid, [0, 1])]
        # a static-member heartbeat naming an unknown instance id
        r = heartbeat(c, group, "m1", 2, instance_id="nobody")
        assert (r.error_code, r.error_message) == (UNKNOWN_MEMBER_ID, "Instance id nobody is unknown.")
        # the same member id joining again with epoch 0 gets its partitions back
        r = heartbeat(c, group, "m1", 0, topics=[topic])
        assert r.error_code == 0 and r.member_epoch == 2 and owned_of(r) == [(tid, [0, 1])]

        # ConsumerGroupDescribe
        d = describe(c, group, unique("cg-none"))
        g = d[group]
        assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == \
            (0, "Stable", 2, 2, "uniform")
        (m,) = g.members
        assert (m.member_id, m.member_epoch, m.subscribed_topic_names, m.subscribed_topic_regex, m.member_type) == \
            ("m1", 2, [topic], "", 1)
        assert (m.client_host, m.instance_id, m.rack_id) == ("/127.0.0.1", None, None)
        assert [(tp.topic_name, sorted(tp.partitions)) for tp in m.assignment.topic_partitions] == [(topic, [0, 1])]
        missing = [v for k, v in d.items() if k != group][0]
        assert (missing.error_code, missing.error_message) == (GROUP_ID_NOT_FOUND,
                                                               f"Group {missing.group_id} not found.")

        # leave: epoch -1 answered with -1; then the member is unknown
        r = heartbeat(c, group, "m1", -1)
        assert (r.error_code, r.member_epoch) == (0, -1)
        assert heartbeat(c, group, "m1", 2).error_code == UNKNOWN_MEMBER_ID
        assert describe(c, group)[group].group_state == "Empty"
        r = heartbeat(c, unique("cg-none"), "m1", -1)
        assert r.error_code == GROUP_ID_NOT_FOUND and r.error_message.endswith(" not found.")


def test_static_members(group_broker):
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("cgp-static"), 2)
    group = unique("cg-static")
    with RawClient(bs) as c:
        ready_coordinator(c, group)
        r = heartbeat(c, group, "a1", 0, topics=[topic], instance_id="inst")
        assert r.error_code == 0 and r.member_epoch == 2
        # the instance id is taken while a1 is active
        r = heartbeat(c, group, "a2", 0, topics=[topic], instance_id="inst")
        assert r.error_code == UNRELEASED_INSTANCE_ID, r
        # a temporary leave (-2) keeps the assignment for the instance
        r = heartbeat(c, group, "a1", -2, instance_id="inst")
        assert (r.error_code, r.member_epoch) == (0, -2)
        epoch = describe(c, group)[group].group_epoch
        r = heartbeat(c, group, "a2", 0, topics=[topic], instance_id="inst")
        assert r.error_code == 0 and r.member_epoch == 2 and r.member_id == "a2"
        assert sorted(owned_of(r)[0][1]) == [0, 1]
        g = describe(c, group)[group]
        assert g.group_epoch == epoch and [m.member_id for m in g.members] == ["a2"]
        # -2 without an instance id is refused
        r = heartbeat(c, group, "a2", -2)
        assert (r.error_code, r.error_message) == (INVALID_REQUEST, "InstanceId can't be null."), r
        r = heartbeat(c, group, "a9", 2, instance_id="inst")
        assert r.error_code == ke.FencedInstanceIdError.errno, r
        assert heartbeat(c, group, "a2", -1, instance_id="inst").error_code == 0


def test_member_epoch_in_offset_commit_and_fetch(group_broker):
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("cgp-commit"), 1)
    group = unique("cg-commit")
    Topic = OffsetCommitRequest.OffsetCommitRequestTopic
    Part = Topic.OffsetCommitRequestPartition

    def commit(member_id: str, epoch: int, version: int = 9) -> int:
        req = OffsetCommitRequest(group_id=group, generation_id_or_member_epoch=epoch, member_id=member_id,
                                  group_instance_id=None, retention_time_ms=-1,
                                  topics=[Topic(name=topic, partitions=[Part(partition_index=0, committed_offset=5,
                                                                             committed_leader_epoch=-1,
                                                                             committed_metadata="")])])
        return c.request(req, version).topics[0].partitions[0].error_code

    def fetch(member_id, epoch: int) -> int:
        G = OffsetFetchRequest.OffsetFetchRequestGroup
        req = OffsetFetchRequest(groups=[G(group_id=group, member_id=member_id, member_epoch=epoch, topics=None)],
                                 require_stable=False)
        return c.request(req, 9).groups[0].error_code

    with RawClient(bs) as c:
        ready_coordinator(c, group)
        r = heartbeat(c, group, "m1", 0, topics=[topic])
        assert r.member_epoch == 2
        assert commit("m1", 2) == 0
        assert commit("m1", 1) == STALE_MEMBER_EPOCH
        assert commit("m1", 3) == STALE_MEMBER_EPOCH
        assert commit("nobody", 1) == UNKNOWN_MEMBER_ID
        assert commit("", -1) == UNKNOWN_MEMBER_ID  # the group has members: an admin commit is refused
        assert fetch("m1", 2) == 0
        assert fetch("m1", 3) == STALE_MEMBER_EPOCH
        assert fetch("nobody", 1) == UNKNOWN_MEMBER_ID
        assert fetch(None, -1) == 0

        # TxnOffsetCommit checks the member epoch too (answering ILLEGAL_GENERATION, it has no STALE_MEMBER_EPOCH)
        txn_id = unique("txn-cgp")
        find_txn_coordinator(c, txn_id)
        init = init_producer_id(c, txn_id)
        pid, pepoch = init.producer_id, init.producer_epoch
        assert add_offsets(c, txn_id, pid, pepoch, group) == 0
        tp = (topic, 0)
        assert txn_offset_commit(c, txn_id, group, pid, pepoch, {tp: 7}, generation=2, member="m1")[tp] == 0
        assert txn_offset_commit(c, txn_id, group, pid, pepoch, {tp: 7}, generation=1,
                                 member="m1")[tp] == ke.IllegalGenerationError.errno
        assert txn_offset_commit(c, txn_id, group, pid, pepoch, {tp: 7}, generation=2,
                                 member="nobody")[tp] == UNKNOWN_MEMBER_ID
        assert txn_offset_commit(c, txn_id, group, pid, pepoch, {tp: 7})[tp] == 0  # no group metadata: accepted
        assert end_txn(c, txn_id, pid, pepoch, commit=False, retry_concurrent=True) == 0

        # ListGroups shows it as a consumer group; DescribeGroups (classic) does not know it
        listed = c.request(ListGroupsRequest(states_filter=[], types_filter=["consumer"]), 5).groups
        mine = [g for g in listed if g.group_id == group]
        assert [(g.protocol_type, g.group_state, g.group_type) for g in mine] == [("consumer", "Stable", "consumer")]
        classic = c.request(ListGroupsRequest(states_filter=[], types_filter=["classic"]), 5).groups
        assert group not in [g.group_id for g in classic]
        dg = c.request(DescribeGroupsRequest(groups=[group], include_authorized_operations=False), 6).groups[0]
        assert (dg.error_code, dg.error_message, dg.group_state) == \
            (GROUP_ID_NOT_FOUND, f"Group {group} is not a classic group.", "Dead"), dg
        dg = c.request(DescribeGroupsRequest(groups=[group], include_authorized_operations=False), 5).groups[0]
        assert (dg.error_code, dg.group_state, dg.members) == (0, "Dead", [])

        # DeleteGroups: not while it has a member
        assert c.request(DeleteGroupsRequest(groups_names=[group]), 2).results[0].error_code == NON_EMPTY_GROUP
        assert heartbeat(c, group, "m1", -1).error_code == 0
        assert commit("", -1) == 0  # empty now: an admin commit is fine
        assert c.request(DeleteGroupsRequest(groups_names=[group]), 2).results[0].error_code == 0
        assert describe(c, group)[group].error_code == GROUP_ID_NOT_FOUND


@pytest.mark.minikafka_only
def test_records_decode_with_kafka_dump_log(broker_factory):
    """The consumer-group records minikafka writes to __consumer_offsets are Kafka's: its own
    DumpLogSegments --offsets-decoder reads every one of them (types 3-8 and tombstones)."""
    import sys

    from minikafka.coordinator.partitioning import partition_for
    from tests.conftest import ROOT

    sys.path.insert(0, str(ROOT))
    from scripts import apache_kafka as lab

    broker = broker_factory()
    bs = broker.bootstrap
    topic = create_topic(bs, unique("cgp-dump"), 2)
    group = unique("cg-dump")
    with RawClient(bs) as c:
        ready_coordinator(c, group)
        assert heartbeat(c, group, "a", 0, topics=[topic], instance_id="ia").error_code == 0
        assert heartbeat(c, group, "b", 0, topics=[topic]).error_code == 0
        assert heartbeat(c, group, "b", -1).error_code == 0
    broker.stop()
    segment = broker.data_dir / f"__consumer_offsets-{partition_for(group, 50)}" / "00000000000000000000.log"
    lab.fetch()
    out = lab.run_tool("kafka-dump-log", ["--files", str(segment), "--offsets-decoder"], timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    text = out.stdout
    for record_type in (3, 4, 5, 6, 7, 8):
        assert f'"type":"{record_type}"' in text, (record_type, text[-3000:])
    assert '"instanceId":"ia"' in text and '"assignmentEpoch":2' in text and '"epoch":4' in text
    assert text.count("payload: <DELETE>") == 3  # b's assignment, target and metadata
    assert "Error" not in text and "Exception" not in text, text[-3000:]


def test_minikafka_cli_describes_consumer_group(group_broker):
    import subprocess

    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("cgp-cli"), 2)
    group = unique("cg-cli")
    with RawClient(bs) as c:
        ready_coordinator(c, group)
        assert heartbeat(c, group, "cli-member", 0, topics=[topic]).error_code == 0
        res = subprocess.run([*minikafka_command(), "groups", "describe", group,
                              "--bootstrap-server", bs], capture_output=True, text=True, timeout=60,
                             env=subprocess_env())
        assert heartbeat(c, group, "cli-member", -1).error_code == 0
    assert res.returncode == 0, res.stderr
    assert "state Stable, protocol consumer/uniform, 1 member(s)" in res.stdout, res.stdout
    assert sum(1 for line in res.stdout.splitlines() if line.startswith(group) and "cli-member" in line) == 2


def test_group_epochs_as_kafka(group_broker):
    """Group epoch, assignment epoch and member epoch through joins, regex resolution (after the
    heartbeat), assignment batching (group.consumer.assignment.interval.ms, 1 s) and a leave: the
    numbers Kafka 4.3 answers."""
    import time

    bs = group_broker.bootstrap
    prefix = unique("cgp-epochs")
    t1 = create_topic(bs, f"{prefix}-a", 2)
    t2 = create_topic(bs, f"{prefix}-b", 2)

    def epochs(c, g, r):
        d = describe(c, g)[g]
        return r.member_epoch, d.group_epoch, d.assignment_epoch

    with RawClient(bs) as c:
        for kw, expected in ((dict(regex=f"^{prefix}-.*"), (1, 2, 1)), (dict(regex="^no-such-topic-.*"), (1, 1, 1)),
                             (dict(topics=[]), (1, 1, 1)), (dict(topics=[t1]), (2, 2, 2))):
            g = unique("cg-epochs")
            ready_coordinator(c, g)
            r = heartbeat(c, g, "a", 0, **kw)
            assert r.error_code == 0
            time.sleep(0.1)  # the regex resolution runs right after the heartbeat
            assert epochs(c, g, r) == expected, kw
        g = unique("cg-epochs")
        ready_coordinator(c, g)
        assert heartbeat(c, g, "a", 0, topics=[t1]).member_epoch == 2
        time.sleep(1.2)
        r = heartbeat(c, g, "b", 0, topics=[t2])  # a new member with a new topic: one bump
        assert epochs(c, g, r) == (3, 3, 3)
        r = heartbeat(c, g, "c", 0, topics=[t2])  # inside the assignment interval: the target waits
        assert epochs(c, g, r) == (3, 4, 3)
        time.sleep(1.2)
        assert describe(c, g)[g].assignment_epoch == 3  # no heartbeat yet
        assert heartbeat(c, g, "a", 2).error_code == 0  # the first heartbeat after the interval assigns
        assert describe(c, g)[g].assignment_epoch == 4
        assert heartbeat(c, g, "c", -1).error_code == 0
        d = describe(c, g)[g]
        assert (d.group_epoch, d.assignment_epoch, d.group_state) == (5, 4, "Assigning")


def test_group_configs_reach_the_heartbeat(group_broker):
    """A GROUP config resource (IncrementalAlterConfigs) overrides the broker's heartbeat interval for
    that group only, from its next heartbeat; deleting the override restores the broker's value."""
    from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource,
                                       ResourceType)
    bs = group_broker.bootstrap
    topic = create_topic(bs, unique("cgp-cfg"), 1)
    group, other = unique("cg-cfg"), unique("cg-cfg-other")
    admin = AdminClient({"bootstrap.servers": bs})

    def alter(op) -> None:
        res = ConfigResource(ResourceType.GROUP, group, incremental_configs=[
            ConfigEntry("consumer.heartbeat.interval.ms", "7000", incremental_operation=op)])
        admin.incremental_alter_configs([res])[res].result(30)

    with RawClient(bs) as c:
        ready_coordinator(c, group)
        ready_coordinator(c, other)
        r = heartbeat(c, group, "m1", 0, topics=[topic])
        assert (r.error_code, r.heartbeat_interval_ms) == (0, 5000), r
        alter(AlterConfigOpType.SET)
        r = heartbeat(c, group, "m1", r.member_epoch)
        assert (r.error_code, r.heartbeat_interval_ms) == (0, 7000), r
        r2 = heartbeat(c, other, "m2", 0, topics=[topic])
        assert (r2.error_code, r2.heartbeat_interval_ms) == (0, 5000), r2
        alter(AlterConfigOpType.DELETE)
        r = heartbeat(c, group, "m1", r.member_epoch)
        assert (r.error_code, r.heartbeat_interval_ms) == (0, 5000), r


def _unsupported(bootstrap: str, group: str, topic: str) -> None:
    with RawClient(bootstrap) as c:
        r = heartbeat(c, group, "m1", 0, topics=[topic])
        assert r.error_code == ke.UnsupportedVersionError.errno, r
        g = describe(c, group)[group]
        assert g.error_code == ke.UnsupportedVersionError.errno, g


@pytest.mark.minikafka_only
def test_consumer_protocol_off_by_static_config(broker_factory):
    """group.coordinator.rebalance.protocols without `consumer`: both APIs answer UNSUPPORTED_VERSION
    (as Kafka's ConsumerGroupHeartbeatRequestTest expects); classic groups are unaffected."""
    b = broker_factory({"group.coordinator.rebalance.protocols": "classic"})
    topic = create_topic(b.bootstrap, unique("cgp-off"), 1)
    _unsupported(b.bootstrap, unique("cg-off"), topic)


@pytest.mark.minikafka_only
def test_consumer_protocol_follows_group_version(broker_factory):
    """group.version finalized at 0 turns the consumer protocol off, back at 1 on again."""
    from tests.integration.admin.test_features import SAFE_DOWNGRADE, UPGRADE, U, update
    b = broker_factory()
    topic = create_topic(b.bootstrap, unique("cgp-gv"), 1)
    group = unique("cg-gv")
    r = update(b.bootstrap, [U(feature="group.version", max_version_level=0, upgrade_type=SAFE_DOWNGRADE)])
    assert r.error_code == 0, r
    _unsupported(b.bootstrap, group, topic)
    r = update(b.bootstrap, [U(feature="group.version", max_version_level=1, upgrade_type=UPGRADE)])
    assert r.error_code == 0, r
    with RawClient(b.bootstrap) as c:
        ready_coordinator(c, group)
        r = heartbeat(c, group, "m1", 0, topics=[topic])
        assert r.error_code == 0 and r.member_epoch >= 1, r
