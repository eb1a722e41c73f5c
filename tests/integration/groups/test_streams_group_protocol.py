"""StreamsGroupHeartbeat / StreamsGroupDescribe over raw sockets (KIP-1071): join with a topology,
MISSING_INTERNAL_TOPICS until the broker has created the repartition and changelog topics, active tasks
spread over two members (a task moves only after its owner revoked it), standby tasks, leave, session
timeout, a restart that keeps the group, member epochs in OffsetCommit, and Kafka's error codes for bad
input. Runs against minikafka and Apache Kafka 4.3.1 (--broker=kafka) where noted."""
from __future__ import annotations

import time

import kafka.errors as ke
import pytest
from kafka.protocol.admin import ListGroupsRequest
from kafka.protocol.consumer import OffsetCommitRequest

from minikafka.protocol.messages import (
    StreamsGroupDescribeRequest,
    StreamsGroupHeartbeatRequest,
)
from tests.conftest import BrokerProcess, _other_broker, broker_kind
from tests.support.consumer_protocol_helpers import ready_coordinator
from tests.support.group_helpers import create_topic, unique
from tests.support.helpers import RawClient, metadata_raw, wait_until

INVALID_REQUEST = ke.InvalidRequestError.errno
UNKNOWN_MEMBER_ID = ke.UnknownMemberIdError.errno
FENCED_MEMBER_EPOCH = ke.FencedMemberEpochError.errno
GROUP_ID_NOT_FOUND = ke.GroupIdNotFoundError.errno
STALE_MEMBER_EPOCH = ke.StaleMemberEpochError.errno
STREAMS_INVALID_TOPOLOGY = 130
MISSING_SOURCE_TOPICS, MISSING_INTERNAL_TOPICS, ASSIGNMENT_DELAYED = 1, 3, 5

# minikafka: no initial rebalance delay, a 6 s session
STREAMS_BROKER = {
    "group.initial.rebalance.delay.ms": "0",
    "group.streams.initial.rebalance.delay.ms": "0",
    "group.streams.assignment.interval.ms": "0",
    "group.streams.heartbeat.interval.ms": "1000",
    "group.streams.min.heartbeat.interval.ms": "1000",
    "group.streams.session.timeout.ms": "6000",
    "group.streams.min.session.timeout.ms": "6000",
}


@pytest.fixture(scope="module")
def streams_broker(request, tmp_path_factory):
    if broker_kind(request.config) != "minikafka":
        yield _other_broker(request)
        return
    d = tmp_path_factory.mktemp("streams") / "data"
    d.mkdir()
    b = BrokerProcess(d, STREAMS_BROKER).start()
    yield b
    if b.alive():
        b.stop()
    assert "Traceback" not in b.log_text(), b.log_text()


def minikafka_only(request):
    if broker_kind(request.config) != "minikafka":
        pytest.skip("needs broker settings of its own")


def no_initial_delay(client: RawClient, group: str, **more: str) -> None:
    """streams.initial.rebalance.delay.ms=0 and streams.assignment.interval.ms=0 for the group (Kafka's
    defaults are 3 s and 1 s), plus `more` group configs."""
    from kafka.protocol.admin import IncrementalAlterConfigsRequest
    R = IncrementalAlterConfigsRequest.AlterConfigsResource
    configs = {"streams.initial.rebalance.delay.ms": "0", "streams.assignment.interval.ms": "0", **more}
    req = IncrementalAlterConfigsRequest(resources=[R(resource_type=32, resource_name=group, configs=[
        R.AlterableConfig(name=k, config_operation=0, value=v) for k, v in configs.items()])],
        validate_only=False)
    r = client.request(req, 1)
    assert r.responses[0].error_code == 0, r


def topology(source: str, app: str, epoch: int = 1, *, stateful: bool = True, repartition: bool = True):
    """Subtopology 0 reads `source`, (with a store) writes its changelog and the repartition topic
    that subtopology 1 reads."""
    T = StreamsGroupHeartbeatRequest.Topology
    S = T.Subtopology
    TI = S.TopicInfo
    KV = TI.KeyValue
    rep = f"{app}-agg-repartition"
    changelog = f"{app}-store-changelog"
    subs = [S(subtopology_id="0", source_topics=[source], source_topic_regex=[],
              state_changelog_topics=[TI(name=changelog, partitions=0, replication_factor=0,
                                         topic_configs=[KV(key="cleanup.policy", value="compact")])]
              if stateful else [],
              repartition_sink_topics=[rep] if repartition else [], repartition_source_topics=[],
              copartition_groups=[])]
    if repartition:
        subs.append(S(subtopology_id="1", source_topics=[], source_topic_regex=[], state_changelog_topics=[],
                      repartition_sink_topics=[],
                      repartition_source_topics=[TI(name=rep, partitions=0, replication_factor=0, topic_configs=[
                          KV(key="cleanup.policy", value="delete")])],
                      copartition_groups=[]))
    return T(epoch=epoch, subtopologies=subs)


def hb(client: RawClient, group: str, member: str, epoch: int, *, topo=None, active=None, standby=None,
       warmup=None, process: str | None = None, rebalance_timeout_ms: int | None = None, endpoint_epoch: int = 0,
       instance_id=None, task_offsets=None):
    R = StreamsGroupHeartbeatRequest
    if rebalance_timeout_ms is None:
        rebalance_timeout_ms = 30000 if epoch == 0 else -1

    def ids(tasks):
        return None if tasks is None else [R.TaskIds(subtopology_id=s, partitions=sorted(ps))
                                           for s, ps in sorted(tasks.items())]
    if epoch == 0 and active is None:
        active, standby, warmup = {}, {}, {}
    req = R(group_id=group, member_id=member, member_epoch=epoch, endpoint_information_epoch=endpoint_epoch,
            instance_id=instance_id, rack_id=None, rebalance_timeout_ms=rebalance_timeout_ms, topology=topo,
            active_tasks=ids(active), standby_tasks=ids(standby), warmup_tasks=ids(warmup),
            process_id=process if process is not None else (member + "-process" if epoch == 0 else None),
            user_endpoint=None, client_tags=[] if epoch == 0 else None, task_offsets=task_offsets,
            task_end_offsets=None, shutdown_application=False)
    return client.request(req, 0)


def tasks_of(items) -> dict[str, set[int]]:
    return {t.subtopology_id: set(t.partitions) for t in items or ()}


def statuses(r) -> dict[int, str]:
    return {s.status_code: s.status_detail for s in r.status or ()}


def describe(client: RawClient, group: str):
    return client.request(StreamsGroupDescribeRequest(group_ids=[group], include_authorized_operations=False),
                          0).groups[0]


def join_until_assigned(client, group, member, topo, timeout=30.0):
    """Join, then heartbeat (as a member that takes what it is given) until the member has an epoch > 0
    and no MISSING_INTERNAL_TOPICS / ASSIGNMENT_DELAYED status."""
    r = hb(client, group, member, 0, topo=topo)
    assert r.error_code == 0, r
    state = {"epoch": r.member_epoch, "active": tasks_of(r.active_tasks), "standby": tasks_of(r.standby_tasks),
             "last": r}
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r = state["last"]
        if state["epoch"] > 0 and not (set(statuses(r)) & {MISSING_INTERNAL_TOPICS, ASSIGNMENT_DELAYED}):
            return state
        time.sleep(0.3)
        if state["epoch"] == 0:
            r = hb(client, group, member, 0, topo=topo)
        else:
            r = hb(client, group, member, state["epoch"], active=state["active"], standby=state["standby"], warmup={})
        assert r.error_code == 0, r
        state["epoch"] = r.member_epoch
        if r.active_tasks is not None:
            state["active"], state["standby"] = tasks_of(r.active_tasks), tasks_of(r.standby_tasks)
        state["last"] = r
    raise AssertionError(f"not assigned in time: {state['last']}")


def test_join_creates_internal_topics_and_assigns_every_task(streams_broker):
    bs = streams_broker.bootstrap
    source = create_topic(bs, unique("sg-in"), 3)
    group = unique("sg-app")
    with RawClient(bs) as c:
        ready_coordinator(c, group)
        no_initial_delay(c, group)
        r = hb(c, group, "m1", 0, topo=topology(source, group))
        assert r.error_code == 0 and r.member_id == "m1", r
        assert r.heartbeat_interval_ms > 0
        # the internal topics do not exist yet: the broker reports them and creates them
        assert MISSING_INTERNAL_TOPICS in statuses(r), r
        assert statuses(r)[MISSING_INTERNAL_TOPICS].startswith("Internal topics are missing: ")
        wait_until(lambda: all(t.error_code == 0 for t in metadata_raw(
            c, [f"{group}-agg-repartition", f"{group}-store-changelog"], version=12).topics),
            timeout=30, interval=0.3, what="the internal topics")
        md = metadata_raw(c, [f"{group}-agg-repartition", f"{group}-store-changelog"], version=12)
        assert sorted(len(t.partitions) for t in md.topics) == [3, 3]  # as many partitions as the source
        state = join_until_assigned(c, group, "m1", topology(source, group))
        assert state["active"] == {"0": {0, 1, 2}, "1": {0, 1, 2}}
        d = describe(c, group)
        assert d.error_code == 0 and d.group_state == "Stable", d
        assert d.topology.epoch == 1 and [s.subtopology_id for s in d.topology.subtopologies] == ["0", "1"]
        assert [m.member_id for m in d.members] == ["m1"]
        # ListGroups shows the group as a streams group
        lg = c.request(ListGroupsRequest(states_filter=[], types_filter=["streams"]), 5)
        listed = {g.group_id: g for g in lg.groups}
        assert listed[group].group_type == "streams" and listed[group].group_state == "Stable"


def test_two_members_share_tasks_after_revocation(streams_broker):
    bs = streams_broker.bootstrap
    source = create_topic(bs, unique("sg-in"), 4)
    group = unique("sg-app")
    topo = topology(source, group, repartition=False)
    with RawClient(bs) as c:
        ready_coordinator(c, group)
        no_initial_delay(c, group)
        one = join_until_assigned(c, group, "m1", topo)
        assert one["active"] == {"0": {0, 1, 2, 3}}
        r = hb(c, group, "m2", 0, topo=topo)
        assert r.error_code == 0, r
        # m2 gets nothing while m1 still owns every task
        assert tasks_of(r.active_tasks) == {}
        m2_epoch = r.member_epoch
        # m1 is asked to give two tasks up; it keeps its epoch until it reports them revoked
        r = hb(c, group, "m1", one["epoch"], active=one["active"], standby={}, warmup={})
        assert r.error_code == 0 and r.member_epoch == one["epoch"], r
        kept = tasks_of(r.active_tasks)
        assert len(kept["0"]) == 2, r
        r = hb(c, group, "m1", one["epoch"], active=kept, standby={}, warmup={})
        assert r.error_code == 0 and r.member_epoch > one["epoch"], r
        # now the revoked tasks are free for m2
        r = hb(c, group, "m2", m2_epoch, active={}, standby={}, warmup={})
        assert r.error_code == 0, r
        got = tasks_of(r.active_tasks)
        assert got["0"] == {0, 1, 2, 3} - kept["0"]
        d = describe(c, group)
        assert sorted(m.member_id for m in d.members) == ["m1", "m2"]


def test_standby_tasks(streams_broker):
    bs = streams_broker.bootstrap
    source = create_topic(bs, unique("sg-in"), 2)
    group = unique("sg-app")
    topo = topology(source, group, repartition=False)
    with RawClient(bs) as c:
        ready_coordinator(c, group)
        no_initial_delay(c, group, **{"streams.num.standby.replicas": "1"})
        one = join_until_assigned(c, group, "m1", topo)
        two = join_until_assigned(c, group, "m2", topo)
        # settle: each member heartbeats with what it owns until both are stable
        members = {"m1": one, "m2": two}
        for _ in range(20):
            for mid, st in members.items():
                r = hb(c, group, mid, st["epoch"], active=st["active"], standby=st["standby"], warmup={})
                assert r.error_code == 0, r
                st["epoch"] = r.member_epoch
                if r.active_tasks is not None:
                    st["active"], st["standby"] = tasks_of(r.active_tasks), tasks_of(r.standby_tasks)
            if describe(c, group).group_state == "Stable":
                break
            time.sleep(0.2)
        d = describe(c, group)
        assert d.group_state == "Stable", d
        actives = [members[m]["active"].get("0", set()) for m in ("m1", "m2")]
        standbys = [members[m]["standby"].get("0", set()) for m in ("m1", "m2")]
        assert actives[0] | actives[1] == {0, 1} and not actives[0] & actives[1]
        # every task has a standby on the other process
        assert standbys[0] == actives[1] and standbys[1] == actives[0], (actives, standbys)


def test_leave_and_errors(streams_broker):
    bs = streams_broker.bootstrap
    source = create_topic(bs, unique("sg-in"), 1)
    group = unique("sg-app")
    topo = topology(source, group, stateful=False, repartition=False)
    with RawClient(bs) as c:
        ready_coordinator(c, group)
        no_initial_delay(c, group)
        r = hb(c, group, "", 0, topo=topo)
        assert (r.error_code, r.error_message) == (INVALID_REQUEST, "MemberId can't be empty."), r
        r = hb(c, group, "m1", 0, topo=topo, rebalance_timeout_ms=-1)
        assert (r.error_code, r.error_message) == (INVALID_REQUEST,
                                                   "RebalanceTimeoutMs must be provided in first request."), r
        r = hb(c, group, "m1", 0, topo=None)
        assert (r.error_code, r.error_message) == (INVALID_REQUEST, "Topology must be non-null when (re-)joining."), r
        r = hb(c, group, "m1", 0, topo=topo, instance_id="i1")
        assert (r.error_code, r.error_message) == (INVALID_REQUEST, "Static membership is not yet supported."), r
        r = hb(c, group, "m1", -3, topo=None)
        assert r.error_code == INVALID_REQUEST, r
        r = hb(c, unique("sg-none"), "m1", 3)
        assert r.error_code == GROUP_ID_NOT_FOUND, r
        st = join_until_assigned(c, group, "m1", topo)
        r = hb(c, group, "m2", 1, active={}, standby={}, warmup={})
        assert (r.error_code, r.error_message) == (UNKNOWN_MEMBER_ID, f"Member m2 is not a member of group {group}."), r
        r = hb(c, group, "m1", st["epoch"] + 1, active={}, standby={}, warmup={})
        assert r.error_code == FENCED_MEMBER_EPOCH, r
        assert r.error_message.startswith("The streams group member has a greater member epoch"), r
        r = hb(c, group, "m1", st["epoch"], topo=topo, active=st["active"], standby={}, warmup={})
        assert (r.error_code, r.error_message) == (INVALID_REQUEST,
                                                   "Topology can only be provided when (re-)joining."), r
        # OffsetCommit v9 with the member epoch; a newer epoch is stale
        OC = OffsetCommitRequest
        T = OC.OffsetCommitRequestTopic
        P = T.OffsetCommitRequestPartition

        def commit(epoch: int):
            return c.request(OC(group_id=group, generation_id_or_member_epoch=epoch, member_id="m1",
                                group_instance_id=None, topics=[T(name=source, partitions=[
                                    P(partition_index=0, committed_offset=5, committed_leader_epoch=-1,
                                      committed_metadata="")])]), 9).topics[0].partitions[0].error_code
        assert commit(st["epoch"]) == 0
        assert commit(st["epoch"] + 1) == STALE_MEMBER_EPOCH
        # leave
        r = hb(c, group, "m1", -1)
        assert r.error_code == 0 and r.member_epoch == -1, r
        d = describe(c, group)
        assert d.group_state == "Empty" and d.members == [], d
        r = hb(c, group, "m1", -1)
        assert r.error_code == UNKNOWN_MEMBER_ID, r


def test_missing_source_topic_and_invalid_changelog(streams_broker):
    bs = streams_broker.bootstrap
    group = unique("sg-app")
    with RawClient(bs) as c:
        ready_coordinator(c, group)
        no_initial_delay(c, group)
        missing = unique("sg-missing")
        r = hb(c, group, "m1", 0, topo=topology(missing, group, repartition=False))
        assert r.error_code == 0, r
        assert statuses(r) .get(MISSING_SOURCE_TOPICS) == f"Source topics {missing} are missing.", r
        assert r.member_epoch >= 0
        topo = topology(missing, unique("sg-other"), repartition=False)
        topo.subtopologies[0].state_changelog_topics[0].partitions = 3
        r = hb(c, unique("sg-app"), "m1", 0, topo=topo)
        assert r.error_code == STREAMS_INVALID_TOPOLOGY, r
        # a repartition topic nobody writes: the heartbeat fails (STREAMS_INVALID_TOPOLOGY)
        other = unique("sg-app")
        no_initial_delay(c, other)
        source = create_topic(bs, unique("sg-in"), 2)
        topo = topology(source, other)
        topo.subtopologies[0].repartition_sink_topics = []
        r = hb(c, other, "m1", 0, topo=topo)
        assert (r.error_code, r.error_message) == (
            STREAMS_INVALID_TOPOLOGY, "Failed to compute number of partitions for all repartition topics, because a "
                                      "repartition source topic is never used as a sink topic."), r
        # copartitioned source topics with different partition counts: a status, the member stays
        a, b = create_topic(bs, unique("sg-a"), 2), create_topic(bs, unique("sg-b"), 3)
        topo = topology(a, other, stateful=False, repartition=False)
        sub = topo.subtopologies[0]
        sub.source_topics = [a, b]
        sub.copartition_groups = [type(topo).Subtopology.CopartitionGroup(
            source_topics=[0, 1], source_topic_regex=[], repartition_source_topics=[])]
        r = hb(c, other, "m1", 0, topo=topo)
        assert r.error_code == 0, r
        assert statuses(r) == {2: f"Following topics do not have the same number of partitions: [{{{a}=2, {b}=3}}]"}, r


def test_session_timeout_and_restart(streams_broker, request, tmp_path):
    minikafka_only(request)
    bs = streams_broker.bootstrap
    source = create_topic(bs, unique("sg-in"), 2)
    group = unique("sg-app")
    topo = topology(source, group, repartition=False)
    with RawClient(bs) as c:
        ready_coordinator(c, group)
        st = join_until_assigned(c, group, "m1", topo)
        join_until_assigned(c, group, "m2", topo)
        # m2 stops heartbeating: after the 6 s session it is gone
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            r = hb(c, group, "m1", st["epoch"], active=st["active"], standby={}, warmup={})
            assert r.error_code == 0, r
            st["epoch"] = r.member_epoch
            if r.active_tasks is not None:
                st["active"] = tasks_of(r.active_tasks)
            if [m.member_id for m in describe(c, group).members] == ["m1"]:
                break
            time.sleep(1)
        assert [m.member_id for m in describe(c, group).members] == ["m1"]
        before = describe(c, group)
    # a restart keeps the group, its topology, members and epochs
    streams_broker.stop()
    streams_broker.start()
    with RawClient(bs) as c:
        ready_coordinator(c, group)
        after = describe(c, group)
        assert after.error_code == 0, after
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
        assert after.topology.epoch == 1
        assert [(m.member_id, m.member_epoch) for m in after.members] == \
            [(m.member_id, m.member_epoch) for m in before.members]
        r = hb(c, group, "m1", st["epoch"], active=st["active"], standby={}, warmup={})
        assert r.error_code == 0 and r.member_epoch == st["epoch"], r


def test_initial_rebalance_delay(streams_broker):
    bs = streams_broker.bootstrap
    source = create_topic(bs, unique("sg-in"), 2)
    group = unique("sg-app")
    topo = topology(source, group, stateful=False, repartition=False)
    with RawClient(bs) as c:
        ready_coordinator(c, group)
        no_initial_delay(c, group, **{"streams.initial.rebalance.delay.ms": "1500"})
        r = hb(c, group, "m1", 0, topo=topo)
        assert r.error_code == 0, r
        assert statuses(r) == {ASSIGNMENT_DELAYED: "Assignment delayed due to the configured initial rebalance "
                                                   "delay."}, r
        # Kafka 4.3.1: the new group is at epoch 2, its member at the (empty) target epoch 1 meanwhile
        assert tasks_of(r.active_tasks) == {} and r.member_epoch == 1, r
        d = describe(c, group)
        assert (d.group_state, d.group_epoch, d.assignment_epoch) == ("Assigning", 2, 1), d
        r = hb(c, group, "m1", 1, active={}, standby={}, warmup={})
        assert r.error_code == 0 and statuses(r) == {ASSIGNMENT_DELAYED: "Assignment delayed due to the configured "
                                                                         "initial rebalance delay."}, r
        time.sleep(2.5)
        d = describe(c, group)
        assert (d.group_state, d.group_epoch, d.assignment_epoch) == ("Reconciling", 2, 2), d
        r = hb(c, group, "m1", 1, active={}, standby={}, warmup={})
        assert r.error_code == 0 and r.status == [] and r.member_epoch == 2, r
        assert tasks_of(r.active_tasks) == {"0": {0, 1}}
        # a second member and a leave: the group epoch moves on, the target waits for a heartbeat
        r = hb(c, group, "m2", 0, topo=topo)
        assert r.error_code == 0 and r.member_epoch == 3 and r.status == [], r
        r = hb(c, group, "m2", -1)
        assert r.error_code == 0 and r.member_epoch == -1 and r.status == [], r
        d = describe(c, group)
        assert (d.group_state, d.group_epoch, d.assignment_epoch) == ("Assigning", 4, 3), d


def test_offsets_and_delete(streams_broker):
    from kafka.protocol.admin import DeleteGroupsRequest, DescribeGroupsRequest
    from kafka.protocol.consumer import OffsetFetchRequest
    bs = streams_broker.bootstrap
    source = create_topic(bs, unique("sg-in"), 2)
    group = unique("sg-app")
    topo = topology(source, group, stateful=False, repartition=False)
    with RawClient(bs) as c:
        ready_coordinator(c, group)
        no_initial_delay(c, group)
        st = join_until_assigned(c, group, "m1", topo)
        OC = OffsetCommitRequest
        T = OC.OffsetCommitRequestTopic
        P = T.OffsetCommitRequestPartition
        r = c.request(OC(group_id=group, generation_id_or_member_epoch=st["epoch"], member_id="m1",
                         group_instance_id=None, topics=[T(name=source, partitions=[
                             P(partition_index=p, committed_offset=7, committed_leader_epoch=-1,
                               committed_metadata="") for p in (0, 1)])]), 9)
        assert [p.error_code for p in r.topics[0].partitions] == [0, 0]
        # OffsetFetch v9 names the member: its epoch must be the current one
        F = OffsetFetchRequest
        fetch = F(groups=[F.OffsetFetchRequestGroup(group_id=group, member_id="m1", member_epoch=st["epoch"],
                                                    topics=None)], require_stable=False)
        g = c.request(fetch, 9).groups[0]
        assert g.error_code == 0 and [p.committed_offset for p in g.topics[0].partitions] == [7, 7], g
        stale = F(groups=[F.OffsetFetchRequestGroup(group_id=group, member_id="m1", member_epoch=st["epoch"] + 5,
                                                    topics=None)], require_stable=False)
        assert c.request(stale, 9).groups[0].error_code == STALE_MEMBER_EPOCH
        # DescribeGroups (the classic API) does not describe a streams group
        dg = c.request(DescribeGroupsRequest(groups=[group], include_authorized_operations=False), 6).groups[0]
        assert dg.error_code == GROUP_ID_NOT_FOUND, dg
        # a group with members is not deleted; an empty one is, with its offsets
        r = c.request(DeleteGroupsRequest(groups_names=[group]), 2)
        assert r.results[0].error_code == ke.NonEmptyGroupError.errno, r
        assert hb(c, group, "m1", -1).error_code == 0
        r = c.request(DeleteGroupsRequest(groups_names=[group]), 2)
        assert r.results[0].error_code == 0, r
        d = describe(c, group)
        assert d.error_code == GROUP_ID_NOT_FOUND, d


def test_user_endpoints(streams_broker):
    """Interactive queries: members with an application.server endpoint learn which source partitions each
    endpoint serves, whenever the endpoint information epoch they report is behind."""
    R = StreamsGroupHeartbeatRequest
    bs = streams_broker.bootstrap
    source = create_topic(bs, unique("sg-in"), 2)
    group = unique("sg-app")
    topo = topology(source, group, stateful=False, repartition=False)

    def hb_ep(c, member, epoch, port, endpoint_epoch, active=None):
        ids = (lambda t: None if t is None else [R.TaskIds(subtopology_id=s, partitions=sorted(ps))
                                                 for s, ps in sorted(t.items())])
        joining = epoch == 0
        owned = {} if joining else active
        req = R(group_id=group, member_id=member, member_epoch=epoch, endpoint_information_epoch=endpoint_epoch,
                instance_id=None, rack_id=None, rebalance_timeout_ms=30000 if joining else -1,
                topology=topo if joining else None, active_tasks=ids(owned),
                standby_tasks=ids({} if owned is not None else None), warmup_tasks=ids({} if owned is not None else None),
                process_id=member + "-p" if joining else None,
                user_endpoint=R.Endpoint(host="localhost", port=port) if joining else None,
                client_tags=[] if joining else None, task_offsets=None, task_end_offsets=None,
                shutdown_application=False)
        r = c.request(req, 0)
        assert r.error_code == 0, r
        return r

    def served(r):
        return [(e.user_endpoint.port, [(t.topic, list(t.partitions)) for t in e.active_partitions])
                for e in r.partitions_by_user_endpoint]
    with RawClient(bs) as c:
        ready_coordinator(c, group)
        no_initial_delay(c, group)
        r = hb_ep(c, "m1", 0, 7001, 0)
        # the group created by this heartbeat answers endpoint information epoch 0 (as Kafka)
        assert (r.member_epoch, r.endpoint_information_epoch) == (2, 0), r
        assert served(r) == [(7001, [(source, [0, 1])])]
        r = hb_ep(c, "m1", 2, 7001, 0, active={"0": {0, 1}})
        assert r.partitions_by_user_endpoint is None, r
        r = hb_ep(c, "m2", 0, 7002, 0)
        assert (r.member_epoch, r.endpoint_information_epoch) == (3, 1), r
        assert served(r) == [(7001, [(source, [0, 1])]), (7002, [])]
        r = hb_ep(c, "m1", 2, 7001, 0, active={"0": {0, 1}})
        assert r.endpoint_information_epoch == 2 and served(r) == [(7002, []), (7001, [(source, [0])])], r


def test_sticky_assignment_with_standbys(streams_broker):
    """Kafka 4.3.1's StickyTaskAssignor, task for task: a member alone has every task; a second one takes
    half (the first keeps the lowest partitions); a third takes from both; standbys go to other processes."""
    bs = streams_broker.bootstrap
    source = create_topic(bs, unique("sg-in"), 6)
    group = unique("sg-app")
    topo = topology(source, group)
    with RawClient(bs) as c:
        ready_coordinator(c, group)
        no_initial_delay(c, group, **{"streams.num.standby.replicas": "1"})
        st = join_until_assigned(c, group, "m1", topo)
        assert st["active"] == {"0": set(range(6)), "1": set(range(6))}

        def targets():
            d = describe(c, group)
            return {m.member_id: ({t.subtopology_id: sorted(t.partitions) for t in m.target_assignment.active_tasks},
                                  {t.subtopology_id: sorted(t.partitions) for t in m.target_assignment.standby_tasks})
                    for m in d.members}
        assert hb(c, group, "m2", 0, topo=topo, process="p1").error_code == 0
        assert targets() == {"m1": ({"0": [0, 1, 2], "1": [0, 1, 2]}, {"0": [3, 4, 5]}),
                             "m2": ({"0": [3, 4, 5], "1": [3, 4, 5]}, {"0": [0, 1, 2]})}
        assert hb(c, group, "m3", 0, topo=topo, process="p2").error_code == 0
        assert targets() == {"m1": ({"0": [0, 1], "1": [0, 1]}, {"0": [3, 4]}),
                             "m2": ({"0": [3, 4], "1": [3, 4]}, {"0": [2, 5]}),
                             "m3": ({"0": [2, 5], "1": [2, 5]}, {"0": [0, 1]})}


def test_topology_names_checked(streams_broker):
    bs = streams_broker.bootstrap
    group = unique("sg-app")
    source = create_topic(bs, unique("sg-in"), 1)
    with RawClient(bs) as c:
        ready_coordinator(c, group)
        topo = topology(source, group, stateful=False, repartition=False)
        topo.subtopologies[0].source_topics = [source, "__consumer_offsets"]
        r = hb(c, group, "m1", 0, topo=topo)
        assert (r.error_code, r.error_message) == (
            STREAMS_INVALID_TOPOLOGY, "Use of Kafka internal topics __consumer_offsets in a Kafka Streams topology is "
                                      "prohibited."), r
        topo.subtopologies[0].source_topics = [source, "bad topic", "ok"]
        r = hb(c, group, "m1", 0, topo=topo)
        assert (r.error_code, r.error_message) == (STREAMS_INVALID_TOPOLOGY,
                                                   "Topic names bad topic are not valid topic names."), r


def test_internal_topic_creation_failure_reported(streams_broker):
    """An internal topic the broker cannot create (replication factor 3 on one broker): the next heartbeats
    say why in the MISSING_INTERNAL_TOPICS status."""
    bs = streams_broker.bootstrap
    group = unique("sg-app")
    source = create_topic(bs, unique("sg-in"), 1)
    with RawClient(bs) as c:
        ready_coordinator(c, group)
        no_initial_delay(c, group)
        topo = topology(source, group, repartition=False)
        topo.subtopologies[0].state_changelog_topics[0].replication_factor = 3
        r = hb(c, group, "m1", 0, topo=topo)
        assert r.error_code == 0 and MISSING_INTERNAL_TOPICS in statuses(r), r
        changelog = f"{group}-store-changelog"

        def reported():
            r = hb(c, group, "m1", 0, topo=topo)
            return "; Creation failed: " in statuses(r).get(MISSING_INTERNAL_TOPICS, "") and r
        r = wait_until(reported, timeout=20, interval=0.5, what="the creation error in the status")
        detail = statuses(r)[MISSING_INTERNAL_TOPICS]
        assert detail.startswith(f"Internal topics are missing: {changelog}; Creation failed: {changelog} ("), detail

