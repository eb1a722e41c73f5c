"""Group coordinator state machine, driven directly on an event loop over real partition logs."""
from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import kafka.errors as ke
import pytest

from minikafka.coordinator.group.coordinator import GroupConfig, GroupCoordinator
from minikafka.coordinator.group.loader import start_loading
from minikafka.coordinator.group.metadata import ClassicGroup, GroupState, IllegalStateTransition
from minikafka.storage import LogConfig, PartitionLog

PROTOCOLS = [("range", b"\x00\x00\x00\x00\x00\x01\x00\x01t\xff\xff\xff\xff")]  # subscription v0: topic "t"


class FakeCatalog:
    """The slice of the broker's TopicCatalog the coordinator uses, over real partition logs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.topics: dict[str, int] = {}
        self.logs: dict[tuple[str, int], PartitionLog] = {}

    def get(self, name):
        return self.topics.get(name) and dataclasses.make_dataclass("Info", ["partitions"])(self.topics[name])

    def create(self, name, partitions, rf, configs, internal=False):
        self.topics[name] = partitions
        for p in range(partitions):
            self.logs[(name, p)] = PartitionLog(self.root / f"{name}-{p}", LogConfig(), clean_shutdown=True)

    def reopen(self) -> "FakeCatalog":
        other = FakeCatalog(self.root)
        other.topics = dict(self.topics)
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
    c = FakeCatalog(tmp_path)
    yield c
    c.close()


def coordinator(catalog, **overrides) -> GroupCoordinator:
    cfg = dataclasses.replace(GroupConfig(num_partitions=4, initial_rebalance_delay_ms=0,
                                          min_session_timeout_ms=10), **overrides)
    return GroupCoordinator(cfg, catalog, error_code=lambda exc: -1)


async def join(gc, group="g", member_id="", version=5, instance=None, session=10000, rebalance=5000,
               protocols=PROTOCOLS, client="c"):
    return await gc.join_group(group_id=group, member_id=member_id, group_instance_id=instance,
                               protocol_type="consumer", protocols=protocols, session_timeout_ms=session,
                               rebalance_timeout_ms=rebalance, client_id=client, client_host="/127.0.0.1",
                               api_version=version)


async def join_two_step(gc, **kw):
    first = await join(gc, **kw)
    assert first.error == ke.MemberIdRequiredError.errno and first.member_id.startswith("c-")
    return await join(gc, member_id=first.member_id, **kw)


def test_state_machine_rejects_illegal_transitions():
    g = ClassicGroup("g", now_ms=0)
    with pytest.raises(IllegalStateTransition):
        g.transition_to(GroupState.STABLE, 1)
    g.transition_to(GroupState.PREPARING_REBALANCE, 1)
    g.transition_to(GroupState.COMPLETING_REBALANCE, 2)
    g.transition_to(GroupState.STABLE, 3)
    g.transition_to(GroupState.DEAD, 4)


def test_two_members_join_sync_and_heartbeat(catalog):
    async def run():
        gc = coordinator(catalog)
        ra = await join_two_step(gc)
        assert ra.error == 0 and ra.generation_id == 1
        await gc.sync_group(group_id="g", generation_id=1, member_id=ra.member_id, group_instance_id=None,
                            protocol_type="consumer", protocol_name="range", assignments={})
        b = asyncio.ensure_future(join_two_step(gc))
        await asyncio.sleep(0.01)
        assert gc.groups["g"].state is GroupState.PREPARING_REBALANCE
        assert gc.heartbeat(group_id="g", generation_id=1, member_id=ra.member_id,
                            group_instance_id=None) == ke.RebalanceInProgressError.errno
        ra2 = await join(gc, member_id=ra.member_id)  # the known member rejoins: generation 2 completes
        rb = await b
        assert ra2.generation_id == rb.generation_id == 2
        assert ra2.leader == ra.member_id and {m[0] for m in ra2.members} == {ra.member_id, rb.member_id}
        assert rb.members == []
        follower = asyncio.ensure_future(gc.sync_group(group_id="g", generation_id=2, member_id=rb.member_id,
                                                       group_instance_id=None, protocol_type="consumer",
                                                       protocol_name="range", assignments={}))
        await asyncio.sleep(0)
        assert not follower.done()  # waits for the leader's assignment
        leader = await gc.sync_group(group_id="g", generation_id=2, member_id=ra.member_id, group_instance_id=None,
                                     protocol_type="consumer", protocol_name="range",
                                     assignments={ra.member_id: b"A", rb.member_id: b"B"})
        assert leader.assignment == b"A" and (await follower).assignment == b"B"
        assert gc.groups["g"].state is GroupState.STABLE
        assert gc.heartbeat(group_id="g", generation_id=2, member_id=rb.member_id, group_instance_id=None) == 0
        assert gc.heartbeat(group_id="g", generation_id=1, member_id=rb.member_id,
                            group_instance_id=None) == ke.IllegalGenerationError.errno
        assert gc.heartbeat(group_id="g", generation_id=2, member_id="nobody",
                            group_instance_id=None) == ke.UnknownMemberIdError.errno
        gc.close()
    asyncio.run(run())


def test_session_timeout_evicts_and_rebalances(catalog):
    async def run():
        gc = coordinator(catalog)
        r = await join_two_step(gc, session=50)
        await gc.sync_group(group_id="g", generation_id=1, member_id=r.member_id, group_instance_id=None,
                            protocol_type=None, protocol_name=None, assignments={})
        await asyncio.sleep(0.2)  # no heartbeats
        g = gc.groups["g"]
        assert g.state is GroupState.EMPTY and not g.members and g.generation_id == 2
        gc.close()
    asyncio.run(run())


def test_group_max_size(catalog):
    async def run():
        gc = coordinator(catalog, max_size=1)
        r = await join_two_step(gc)
        other = await join(gc, version=3)
        assert other.error == ke.GroupMaxSizeReachedError.errno and r.error == 0
        gc.close()
    asyncio.run(run())


def test_static_member_rejoins_without_rebalance(catalog):
    async def run():
        gc = coordinator(catalog)
        r = await join(gc, instance="i1", version=9)
        assert r.error == 0 and r.member_id.startswith("i1-")
        await gc.sync_group(group_id="g", generation_id=1, member_id=r.member_id, group_instance_id="i1",
                            protocol_type=None, protocol_name=None, assignments={r.member_id: b"X"})
        again = await join(gc, instance="i1", version=9)
        assert again.generation_id == 1 and again.member_id != r.member_id
        assert again.skip_assignment and again.leader == again.member_id  # KIP-814
        assert gc.heartbeat(group_id="g", generation_id=1, member_id=r.member_id,
                            group_instance_id="i1") == ke.FencedInstanceIdError.errno
        s = await gc.sync_group(group_id="g", generation_id=1, member_id=again.member_id, group_instance_id="i1",
                                protocol_type=None, protocol_name=None, assignments={})
        assert s.assignment == b"X"
        gc.close()
    asyncio.run(run())


def test_commit_validation(catalog):
    async def run():
        gc = coordinator(catalog)
        r = await join_two_step(gc)
        commit = dict(group_id="g", group_instance_id=None, retention_time_ms=-1, api_version=8,
                      partitions=[("t", 0, 10, -1, "")])
        assert gc.commit_offsets(generation_id=1, member_id=r.member_id, **commit) == {
            ("t", 0): ke.RebalanceInProgressError.errno}  # CompletingRebalance until SyncGroup
        await gc.sync_group(group_id="g", generation_id=1, member_id=r.member_id, group_instance_id=None,
                            protocol_type=None, protocol_name=None, assignments={})
        assert gc.commit_offsets(generation_id=1, member_id=r.member_id, **commit) == {("t", 0): 0}
        assert gc.commit_offsets(generation_id=0, member_id=r.member_id, **commit) == {
            ("t", 0): ke.IllegalGenerationError.errno}
        assert gc.commit_offsets(generation_id=1, member_id="x", **commit) == {("t", 0): ke.UnknownMemberIdError.errno}
        assert gc.commit_offsets(generation_id=-1, member_id="", **commit) == {("t", 0): ke.UnknownMemberIdError.errno}
        code, topics = gc.fetch_offsets("g", None, False)
        assert code == 0 and topics == [("t", [(0, 10, -1, "", 0)])]
        gc.close()
    asyncio.run(run())


def test_load_rebuilds_groups_and_offsets(catalog):
    async def run():
        gc = coordinator(catalog)
        r = await join_two_step(gc)
        await gc.sync_group(group_id="g", generation_id=1, member_id=r.member_id, group_instance_id=None,
                            protocol_type=None, protocol_name=None, assignments={r.member_id: b"A"})
        gc.commit_offsets(group_id="g", generation_id=1, member_id=r.member_id, group_instance_id=None,
                          retention_time_ms=-1, api_version=8, partitions=[("t", 0, 10, 3, "m")])
        gc.commit_offsets(group_id="simple", generation_id=-1, member_id="", group_instance_id=None,
                          retention_time_ms=-1, api_version=8, partitions=[("t", 1, 5, -1, "")])
        assert gc.delete_groups(["simple"]) == {"simple": 0}
        gc.commit_offsets(group_id="simple2", generation_id=-1, member_id="", group_instance_id=None,
                          retention_time_ms=-1, api_version=8, partitions=[("t", 1, 6, -1, "")])
        gc.close()

        reopened = catalog.reopen()
        gc2 = coordinator(reopened)
        task = start_loading(gc2, reopened)
        assert gc2.heartbeat(group_id="g", generation_id=1, member_id=r.member_id,
                             group_instance_id=None) == ke.CoordinatorLoadInProgressError.errno
        await task
        g = gc2.groups["g"]
        assert g.state is GroupState.STABLE and g.generation_id == 1 and g.members[r.member_id].assignment == b"A"
        assert gc2.heartbeat(group_id="g", generation_id=1, member_id=r.member_id, group_instance_id=None) == 0
        assert gc2.fetch_offsets("g", None, False) == (0, [("t", [(0, 10, 3, "m", 0)])])
        assert "simple" not in gc2.groups and gc2.fetch_offsets("simple2", None, False)[1] == [("t", [(1, 6, -1, "", 0)])]
        gc2.close()
        reopened.close()
    asyncio.run(run())


def test_pending_transactional_offsets_hook(catalog):
    async def run():
        gc = coordinator(catalog)
        gc.ensure_topic()
        gc.commit_offsets(group_id="g", generation_id=-1, member_id="", group_instance_id=None,
                          retention_time_ms=-1, api_version=8, partitions=[("t", 0, 1, -1, "")])
        assert gc.commit_transactional_offsets(group_id="g", producer_id=77, producer_epoch=0, generation_id=-1,
                                               member_id="", group_instance_id=None,
                                               partitions=[("t", 0, 9, -1, "")]) == {("t", 0): 0}
        assert gc.fetch_offsets("g", [("t", [0])], True) == (0, [("t", [(0, -1, -1, "", 88)])])
        assert gc.fetch_offsets("g", [("t", [0])], False) == (0, [("t", [(0, 1, -1, "", 0)])])
        gc.replay_marker(77, commit=True)
        assert gc.fetch_offsets("g", [("t", [0])], True) == (0, [("t", [(0, 9, -1, "", 0)])])
        assert gc.commit_transactional_offsets(group_id="g", producer_id=78, producer_epoch=0, generation_id=-1,
                                               member_id="", group_instance_id=None,
                                               partitions=[("t", 0, 20, -1, "")]) == {("t", 0): 0}
        gc.replay_marker(78, commit=False)  # aborted: the committed offset stays
        assert gc.fetch_offsets("g", [("t", [0])], True) == (0, [("t", [(0, 9, -1, "", 0)])])
        gc.close()
    asyncio.run(run())


def test_offsets_retention(catalog):
    async def run():
        now = [1000.0]
        gc = GroupCoordinator(GroupConfig(num_partitions=4, offsets_retention_ms=60000), catalog,
                              error_code=lambda e: -1, clock=lambda: now[0])
        gc.commit_offsets(group_id="s", generation_id=-1, member_id="", group_instance_id=None,
                          retention_time_ms=-1, api_version=8, partitions=[("t", 0, 1, -1, "")])
        gc.commit_offsets(group_id="r", generation_id=-1, member_id="", group_instance_id=None,
                          retention_time_ms=5000, api_version=2, partitions=[("t", 0, 1, -1, "")])
        assert gc.expire_offsets() == 0
        now[0] += 6
        assert gc.expire_offsets() == 1 and "r" not in gc.groups  # explicit retention_time_ms
        now[0] += 60
        assert gc.expire_offsets() == 1 and "s" not in gc.groups
        gc.close()
    asyncio.run(run())


def test_partition_count_comes_from_the_existing_topic(catalog):
    async def run():
        catalog.create("__consumer_offsets", 3, 1, {}, internal=True)
        gc = coordinator(catalog, num_partitions=7)
        await start_loading(gc, catalog)
        assert gc.config.num_partitions == 3 and all(0 <= gc.partition_for(f"g{i}") < 3 for i in range(50))
        gc.close()
    asyncio.run(run())


def test_offsets_topic_being_created_elsewhere_is_a_retriable_error(catalog):
    """A request that needs __consumer_offsets while the asynchronous creation (start-up warm-up,
    FindCoordinator) is still making it gets COORDINATOR_LOAD_IN_PROGRESS, not the catalog's
    TopicExistsError (which closed the client's connection), and the topic once it exists."""
    from minikafka.coordinator.group.metadata import GroupError

    async def main():
        gc = coordinator(catalog)
        catalog.is_creating = lambda name: True
        with pytest.raises(GroupError) as err:
            gc.runtime.check_partition("g", create=True)
        assert err.value.errno == ke.CoordinatorLoadInProgressError.errno
        assert catalog.get("__consumer_offsets") is None
        catalog.is_creating = lambda name: False
        gc.runtime.check_partition("g", create=True)
        assert catalog.get("__consumer_offsets").partitions == 4
    asyncio.run(main())
