"""The pure parts of streams groups (KIP-1071): topology configuration (internal topic partition counts,
copartitioning, Kafka's status messages), the sticky task assignor, reconciliation (revoke before assign,
unreleased tasks, assignment epochs) and the record round trip."""
from __future__ import annotations

import pytest

from minikafka.coordinator.group.streams import records as rec
from minikafka.coordinator.group.streams.assignor import MemberSpec, assign
from minikafka.coordinator.group.streams.model import (
    EMPTY_TASKS,
    Endpoint,
    MemberState,
    StreamsGroup,
    StreamsMember,
    TasksTuple,
    freeze,
)
from minikafka.coordinator.group.streams.reconciliation import reconcile
from minikafka.coordinator.group.streams.topology import (
    INCORRECTLY_PARTITIONED_TOPICS,
    MISSING_INTERNAL_TOPICS,
    MISSING_SOURCE_TOPICS,
    CopartitionGroup,
    InvalidTopology,
    StreamsTopology,
    Subtopology,
    TopicInfo,
    configure_topics,
    summarize_topics,
)


def app_topology(fixed_repartition: int = 0) -> StreamsTopology:
    return StreamsTopology(1, (
        Subtopology("0", source_topics=("in",), repartition_sink_topics=("app-rep",),
                    state_changelog_topics=(TopicInfo("app-s0-changelog", configs=(("cleanup.policy", "compact"),)),)),
        Subtopology("1", repartition_source_topics=(TopicInfo("app-rep", fixed_repartition),),
                    state_changelog_topics=(TopicInfo("app-s1-changelog"),)),
    ))


def test_configure_decides_internal_topics_from_the_sources():
    c = configure_topics(app_topology(), 7, {"in": 4}.get)
    assert c.status == (MISSING_INTERNAL_TOPICS,
                        "Internal topics are missing: app-s0-changelog, app-rep, app-s1-changelog")
    assert {n: t.partitions for n, t in c.internal_topics_to_create.items()} == \
        {"app-rep": 4, "app-s0-changelog": 4, "app-s1-changelog": 4}
    assert c.internal_topics_to_create["app-s0-changelog"].configs == (("cleanup.policy", "compact"),)
    assert c.internal_topics_to_create["app-rep"].replication_factor == -1
    assert not c.is_ready
    # once they exist the topology is ready; a fixed repartition count wins
    ready = configure_topics(app_topology(), 7, {"in": 4, "app-rep": 4, "app-s0-changelog": 4,
                                                 "app-s1-changelog": 4}.get)
    assert ready.is_ready and ready.subtopologies["1"].number_of_tasks == 4
    fixed = configure_topics(app_topology(2), 7, {"in": 4}.get)
    assert fixed.internal_topics_to_create["app-rep"].partitions == 2
    assert fixed.internal_topics_to_create["app-s1-changelog"].partitions == 2


def test_configure_statuses():
    c = configure_topics(app_topology(), 0, {}.get)
    assert c.status == (MISSING_SOURCE_TOPICS, "Source topics in are missing.") and c.subtopologies is None
    wrong = configure_topics(app_topology(), 0, {"in": 4, "app-s0-changelog": 3}.get)
    assert wrong.status == (INCORRECTLY_PARTITIONED_TOPICS, "Existing topic app-s0-changelog has different number "
                                                            "of partitions: expected 4, found 3")
    co = StreamsTopology(1, (Subtopology("0", source_topics=("a", "b"), copartition_groups=(CopartitionGroup((0, 1)),)),))
    bad = configure_topics(co, 0, {"a": 2, "b": 3}.get)
    assert bad.status == (INCORRECTLY_PARTITIONED_TOPICS,
                          "Following topics do not have the same number of partitions: [{a=2, b=3}]")
    never_written = StreamsTopology(1, (Subtopology("0", repartition_source_topics=(TopicInfo("r"),)),))
    with pytest.raises(InvalidTopology, match="never used as a sink topic"):
        configure_topics(never_written, 0, {}.get)
    assert summarize_topics(["d", "a", "c", "b", "e"]) == "a, b, c and 2 additional topics"


def spec(pid: str, active=None, standby=None) -> MemberSpec:
    return MemberSpec(pid, TasksTuple(freeze(active or {}), freeze(standby or {}), {}))


def test_assignor_balances_and_sticks():
    out = assign({"m1": spec("p1"), "m2": spec("p2")}, {"0": 4, "1": 2}, {"0"}, 0)
    counts = sorted(sum(len(ps) for ps in t.active.values()) for t in out.values())
    assert counts == [3, 3]
    every = sorted((s, p) for t in out.values() for s, ps in t.active.items() for p in ps)
    assert every == [("0", 0), ("0", 1), ("0", 2), ("0", 3), ("1", 0), ("1", 1)]
    # a third member takes tasks only from the fullest, the others keep theirs
    prev = {m: spec(f"p{m[-1]}", {s: set(ps) for s, ps in t.active.items()}) for m, t in out.items()}
    prev["m3"] = spec("p3")
    again = assign(prev, {"0": 4, "1": 2}, {"0"}, 0)
    for m in ("m1", "m2"):
        mine = {(s, p) for s, ps in again[m].active.items() for p in ps}
        before = {(s, p) for s, ps in out[m].active.items() for p in ps}
        assert mine <= before
    assert sum(len(ps) for ps in again["m3"].active.values()) == 2


def test_assignor_standbys_on_other_processes():
    out = assign({"m1": spec("p1"), "m2": spec("p2"), "m3": spec("p2")}, {"0": 2}, {"0"}, 1)
    for task in (("0", 0), ("0", 1)):
        holders = [(m, role) for m, t in out.items() for role in ("active", "standby")
                   if task[1] in getattr(t, role).get(task[0], ())]
        assert len(holders) == 2
        pids = {"m1": "p1", "m2": "p2", "m3": "p2"}
        assert len({pids[m] for m, _ in holders}) == 2  # never twice on one process
    # a stateless subtopology gets no standby; one process: no standby at all
    assert all(not t.standby for t in assign({"m1": spec("p1")}, {"0": 2}, {"0"}, 1).values())
    assert all(not t.standby for t in assign({"m1": spec("p1"), "m2": spec("p2")}, {"0": 2}, set(), 1).values())


def group_with(*members: StreamsMember) -> StreamsGroup:
    g = StreamsGroup("g")
    for m in members:
        g.update_member(m)
    return g


def test_reconcile_revokes_before_assigning():
    m1 = StreamsMember("m1", member_epoch=1, process_id="p1", active={"0": {0: 1, 1: 1}})
    m2 = StreamsMember("m2", member_epoch=1, process_id="p2")
    g = group_with(m1, m2)
    args = (g.current_active_process, g.current_standby_processes, g.current_warmup_processes)
    # target 2: m1 keeps task 0, m2 gets task 1 — m1 must revoke it first
    m1b = reconcile(m1, 2, TasksTuple(freeze({"0": {0}}), {}, {}), None, *args)
    assert m1b.state == MemberState.UNREVOKED_TASKS and m1b.member_epoch == 1
    assert m1b.active == {"0": {0: 1}} and m1b.pending_active == {"0": {1: 1}}
    g.update_member(m1b)
    m2b = reconcile(m2, 2, TasksTuple(freeze({"0": {1}}), {}, {}), TasksTuple(), *args)
    assert m2b.state == MemberState.UNRELEASED_TASKS and m2b.member_epoch == 2 and m2b.active == {}
    g.update_member(m2b)
    # m1 still reports task 1: it waits; then it reports it gone
    assert reconcile(m1b, 2, TasksTuple(freeze({"0": {0}}), {}, {}), TasksTuple(freeze({"0": {0, 1}})), *args) is m1b
    m1c = reconcile(m1b, 2, TasksTuple(freeze({"0": {0}}), {}, {}), TasksTuple(freeze({"0": {0}})), *args)
    assert m1c.state == MemberState.STABLE and m1c.member_epoch == 2 and m1c.previous_member_epoch == 1
    g.update_member(m1c)
    m2c = reconcile(m2b, 2, TasksTuple(freeze({"0": {1}}), {}, {}), TasksTuple(), *args)
    assert m2c.state == MemberState.STABLE and m2c.active == {"0": {1: 2}}  # assigned in epoch 2
    assert m2c.active_epoch("0", 1) == 2


def test_records_round_trip():
    m = StreamsMember("m1", member_epoch=3, previous_member_epoch=2, state=MemberState.UNREVOKED_TASKS,
                      process_id="p", active={"0": {1: 3, 2: 2}}, standby=freeze({"1": {0}}),
                      pending_active={"0": {5: 1}}, user_endpoint=Endpoint("h", 9), client_tags=(("a", "b"),),
                      rebalance_timeout_ms=300, topology_epoch=1, client_id="c", client_host="/1.2.3.4")
    k, v = rec.current_assignment("g", m)
    assert k[:2] == b"\x00\x16" and rec.decode_key(k) == rec.StreamsRecordKey(22, "g", "m1")
    back = rec.apply_current_assignment(StreamsMember("m1"), rec.decode_value(22, v))
    assert (back.active, back.standby, back.pending_active, back.state) == (m.active, m.standby, m.pending_active,
                                                                             m.state)
    k, v = rec.member_metadata("g", m)
    meta = rec.apply_member_metadata(StreamsMember("m1"), rec.decode_value(19, v))
    assert (meta.process_id, meta.user_endpoint, meta.client_tags, meta.rebalance_timeout_ms) == \
        ("p", Endpoint("h", 9), (("a", "b"),), 300)
    k, v = rec.topology_record("g", app_topology())
    assert rec.decode_key(k) == rec.StreamsRecordKey(23, "g") and rec.topology_from(rec.decode_value(23, v)) == \
        app_topology()
    k, v = rec.group_metadata("g", 4, 77, 1, {"num.standby.replicas": "1"})
    value = rec.decode_value(17, v)
    assert (value.epoch, value.metadata_hash, value.validated_topology_epoch) == (4, 77, 1)
    assert rec.group_metadata("g", None)[1] is None
    k, v = rec.target_member("g", "m1", TasksTuple(freeze({"0": {1}}), freeze({"1": {2}}), {}))
    assert rec.target_from(rec.decode_value(21, v)) == TasksTuple(freeze({"0": {1}}), freeze({"1": {2}}), {})
    assert rec.decode_key(b"\x00\x03\x00\x01g") is None  # a consumer group record is not ours
    assert EMPTY_TASKS.is_empty()


def test_missing_internal_topics_listed_in_java_hash_map_order():
    from minikafka.coordinator.group.streams.topology import java_hash_map_order
    names = ["sg-app-1a2b3c-store-changelog", "sg-app-1a2b3c-agg-repartition", "app-x-changelog",
             "app-y-repartition-0", "t1", "t2", "zz-topic-changelog"]
    # what java.util.HashMap's keySet() iterates (checked with Java 17)
    assert java_hash_map_order(names) == ["app-x-changelog", "sg-app-1a2b3c-store-changelog",
                                          "sg-app-1a2b3c-agg-repartition", "zz-topic-changelog",
                                          "app-y-repartition-0", "t1", "t2"]
