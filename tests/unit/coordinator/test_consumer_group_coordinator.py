"""coordinator/group/consumer/coordinator.py driven directly on an event loop over real partition logs:
join, revoke-before-assign across members, leave, static replacement, heartbeat errors, and the
state rebuilt from `__consumer_offsets` after a restart."""
from __future__ import annotations

import asyncio
import dataclasses
import uuid
from pathlib import Path

import kafka.errors as ke
import pytest

from minikafka.broker.topic_catalog import TopicInfo
from minikafka.coordinator.group.consumer.config import ConsumerGroupSettings
from minikafka.coordinator.group.consumer.coordinator import HeartbeatRequestData
from minikafka.coordinator.group.consumer.model import ConsumerGroupState, MemberState
from minikafka.coordinator.group.coordinator import GroupConfig, GroupCoordinator
from minikafka.coordinator.group.loader import start_loading
from minikafka.storage import LogConfig, PartitionLog

T_ID = uuid.UUID(int=7)


class Catalog:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.topics: dict[str, TopicInfo] = {}
        self.by_id: dict[uuid.UUID, TopicInfo] = {}
        self.logs: dict[tuple[str, int], PartitionLog] = {}

    def get(self, name):
        return self.topics.get(name)

    def add_topic(self, name, partitions, topic_id=None, internal=False):
        info = TopicInfo(name, topic_id or uuid.uuid4(), partitions, internal=internal)
        self.topics[name] = info
        self.by_id[info.topic_id] = info
        return info

    def create(self, name, partitions, rf, configs, internal=False):
        self.add_topic(name, partitions, internal=internal)
        for p in range(partitions):
            self.logs[(name, p)] = PartitionLog(self.root / f"{name}-{p}", LogConfig(), clean_shutdown=True)

    def reopen(self) -> "Catalog":
        other = Catalog(self.root)
        for info in self.topics.values():
            other.add_topic(info.name, info.partitions, info.topic_id, info.internal)
        for (name, p), plog in self.logs.items():
            plog.close()
            other.logs[(name, p)] = PartitionLog(self.root / f"{name}-{p}", LogConfig(), clean_shutdown=True)
        return other

    def partition_log(self, name, p):
        return self.logs.get((name, p))

    def close(self):
        for plog in self.logs.values():
            plog.close()


@pytest.fixture
def catalog(tmp_path):
    c = Catalog(tmp_path)
    c.add_topic("t", 4, T_ID)
    yield c
    c.close()


def make(catalog, **settings) -> GroupCoordinator:
    settings.setdefault("assignment_interval_ms", 0)  # a new target at every change, unless a test batches
    cfg = GroupConfig(num_partitions=4, consumer=dataclasses.replace(ConsumerGroupSettings(), **settings))
    return GroupCoordinator(cfg, catalog, error_code=lambda exc: -1)


def hb(gc, member_id="", epoch=0, owned=None, topics=("t",), group="g", version=1, **kw):
    if epoch == 0 and owned is None:
        owned = {}
    req = HeartbeatRequestData(group_id=group, member_id=member_id, member_epoch=epoch,
                               rebalance_timeout_ms=kw.pop("rebalance_timeout_ms", 30000 if epoch == 0 else -1),
                               subscribed_topic_names=list(topics) if topics is not None else None, owned=owned,
                               client_id="c", client_host="/127.0.0.1", **kw)
    return gc.consumer.heartbeat(req, version)


def parts(result):
    return set(result.assignment.get(T_ID, ())) if result.assignment is not None else None


def run(coro_fn):
    asyncio.run(coro_fn())


def test_join_rebalance_leave(catalog):
    async def main():
        gc = make(catalog)
        a = hb(gc, "A")
        # Kafka 4.3: the new member's subscription and the new topic metadata are two epoch bumps
        assert (a.error, a.member_epoch, parts(a), a.heartbeat_interval_ms) == (0, 2, {0, 1, 2, 3}, 5000)
        b = hb(gc, "B")
        assert b.error == 0 and b.member_epoch == 3 and parts(b) == set()  # A still holds everything
        group = gc.consumer.groups["g"]
        assert group.state == ConsumerGroupState.RECONCILING
        # A learns it must give two partitions up; its epoch stays 2 until it does
        a = hb(gc, "A", 2, owned={T_ID: frozenset({0, 1, 2, 3})}, topics=None)
        assert a.member_epoch == 2 and len(parts(a)) == 2
        kept = parts(a)
        # B asks again: still nothing (not released)
        b = hb(gc, "B", 3, owned={}, topics=None)
        assert b.error == 0 and b.assignment is None
        # A confirms the revocation
        a = hb(gc, "A", 2, owned={T_ID: frozenset(kept)}, topics=None)
        assert a.member_epoch == 3
        b = hb(gc, "B", 3, owned={}, topics=None)
        assert parts(b) == {0, 1, 2, 3} - kept
        assert group.state == ConsumerGroupState.STABLE
        assert len(group.partition_owner) == 4
        # B leaves: group epoch 4, A gets everything at its next heartbeat
        left = hb(gc, "B", -1, topics=None)
        assert (left.error, left.member_epoch) == (0, -1)
        a = hb(gc, "A", 3, owned={T_ID: frozenset(kept)}, topics=None)
        assert a.member_epoch == 4 and parts(a) == {0, 1, 2, 3}
        gc.close()
    run(main)


def test_assignment_batching(catalog):
    async def main():
        gc = make(catalog, assignment_interval_ms=200)
        assert hb(gc, "A").member_epoch == 2
        b = hb(gc, "B")  # inside the interval: the target waits
        group = gc.consumer.groups["g"]
        assert (b.member_epoch, group.group_epoch, group.assignment_epoch) == (2, 3, 2)
        assert group.state == ConsumerGroupState.ASSIGNING
        await asyncio.sleep(0.35)
        assert group.assignment_epoch == 2  # assigned by the next heartbeat, not by a timer
        assert hb(gc, "B", 2, owned={}, topics=None).member_epoch == 3
        assert group.assignment_epoch == 3 and group.state == ConsumerGroupState.RECONCILING
        gc.close()
    run(main)


def test_heartbeat_errors(catalog):
    async def main():
        gc = make(catalog)
        assert hb(gc, "", version=1).error == ke.InvalidRequestError.errno
        v0 = hb(gc, "", version=0)
        assert v0.error == 0 and len(v0.member_id) == 22
        assert hb(gc, "X", 1, topics=None, owned={}).error == ke.UnknownMemberIdError.errno
        assert hb(gc, "X", 1, group="nope", topics=None).error == ke.GroupIdNotFoundError.errno
        r = hb(gc, v0.member_id, 5, topics=None)
        assert r.error == ke.FencedMemberEpochError.errno and "greater member epoch" in r.message
        assert hb(gc, "Y", rebalance_timeout_ms=-1).error == ke.InvalidRequestError.errno
        assert hb(gc, "Y", topics=None).error == ke.InvalidRequestError.errno
        assert hb(gc, "Y", topics=()).error == 0  # an empty subscription is allowed
        assert hb(gc, "Y", epoch=-3, topics=None).error == ke.InvalidRequestError.errno
        assert hb(gc, "Y", server_assignor="sticky").error == ke.UnsupportedAssignorError.errno
        assert hb(gc, "Y", topics=None, subscribed_topic_regex="(").error == 128
        r = hb(gc, "Y", 1, topics=None, instance_id="nobody")
        assert (r.error, r.message) == (ke.UnknownMemberIdError.errno, "Instance id nobody is unknown.")
        gc.close()
    run(main)


def test_static_member_replaced_without_rebalance(catalog):
    async def main():
        gc = make(catalog)
        a = hb(gc, "A", instance_id="i1")
        assert a.member_epoch == 2
        # the same instance id under another member id while A is active
        assert hb(gc, "A2", instance_id="i1").error == ke.UnreleasedInstanceIdError.errno
        left = hb(gc, "A", -2, instance_id="i1", topics=None)
        assert (left.error, left.member_epoch) == (0, -2)
        group = gc.consumer.groups["g"]
        epoch = group.group_epoch
        back = hb(gc, "A2", instance_id="i1")
        assert back.error == 0 and back.member_epoch == 2 and parts(back) == {0, 1, 2, 3}
        assert group.group_epoch == epoch and set(group.members) == {"A2"}
        gc.close()
    run(main)


def test_state_survives_restart(catalog):
    async def main():
        gc = make(catalog)
        hb(gc, "A")
        hb(gc, "B")
        a = hb(gc, "A", 2, owned={T_ID: frozenset({0, 1, 2, 3})}, topics=None)
        before = gc.consumer.groups["g"]
        gc.close()
        cat2 = catalog.reopen()
        gc2 = make(cat2)
        task = start_loading(gc2, cat2)
        await task
        after = gc2.consumer.groups["g"]
        assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
        assert after.members == before.members and after.target == before.target
        assert after.partition_owner == before.partition_owner
        assert after.members["A"].state == MemberState.UNREVOKED_PARTITIONS
        # the heartbeat protocol carries on where it stopped
        a = hb(gc2, "A", 2, owned={T_ID: frozenset(parts(a))}, topics=None)
        assert a.member_epoch == 3
        gc2.close()
        cat2.close()
    run(main)


def test_offsets_expire_and_empty_group_is_deleted(catalog):
    async def main():
        now = [1000.0]
        cfg = GroupConfig(num_partitions=4, offsets_retention_ms=60_000,
                          consumer=dataclasses.replace(ConsumerGroupSettings(), assignment_interval_ms=0))
        gc = GroupCoordinator(cfg, catalog, error_code=lambda exc: -1, clock=lambda: now[0])
        a = hb(gc, "A")
        commit = dict(group_id="g", generation_id=a.member_epoch, member_id="A", group_instance_id=None,
                      retention_time_ms=-1, api_version=9, partitions=[("t", 0, 5, -1, "")])
        assert gc.commit_offsets(**commit) == {("t", 0): 0}
        assert gc.commit_offsets(**{**commit, "generation_id": 1}) == {("t", 0): ke.StaleMemberEpochError.errno}
        now[0] += 120
        assert gc.expire_offsets() == 0  # the member still subscribes to t
        assert hb(gc, "A", -1, topics=None).error == 0
        assert gc.expire_offsets() == 1 and "g" not in gc.consumer.groups
        gc.close()
    run(main)
