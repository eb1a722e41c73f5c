"""Coordinators on a cluster, without sockets: per-partition ownership of `__consumer_offsets` /
`__transaction_state` (load as leader, unload as follower), the coordinator epoch (= leader epoch)
in markers, answers that wait for replication, markers routed to partition leaders (local append or
a remote sender), and a new coordinator completing a PREPARE_COMMIT. The replica manager and the
remote broker are fakes; the partition logs are real."""
from __future__ import annotations

import asyncio
import itertools

import kafka.errors as ke
import pytest

from minikafka.broker.errors import error_code
from minikafka.broker.topic_catalog import TopicCatalog
from minikafka.coordinator.group.coordinator import OFFSETS_TOPIC, GroupConfig, GroupCoordinator
from minikafka.coordinator.txn.coordinator import TransactionCoordinator, TxnConfig
from minikafka.coordinator.txn.state import TxnState
from minikafka.coordinator.txn.state_manager import TXN_TOPIC
from minikafka.storage.log_config import LogConfig
from minikafka.storage.log_manager import LogManager
from minikafka.storage.txn_markers import parse_marker

NOT_COORDINATOR = ke.NotCoordinatorError.errno
LOADING = ke.CoordinatorLoadInProgressError.errno


class Replication:
    """Fake `replicas.wait_replicated`: records the waits, answers `code`."""

    def __init__(self) -> None:
        self.waits: list[tuple[str, int, int]] = []
        self.code = 0

    async def __call__(self, topic: str, partition: int, end_offset: int) -> int:
        self.waits.append((topic, partition, end_offset))
        return self.code


@pytest.fixture
def catalog(tmp_path):
    logs = LogManager([tmp_path], LogConfig())
    c = TopicCatalog(logs, LogConfig(), tmp_path)
    c.load()
    c.create("t", 2)
    yield c
    logs.close()


def groups(catalog, replication) -> GroupCoordinator:
    gc = GroupCoordinator(GroupConfig(num_partitions=2, initial_rebalance_delay_ms=0, min_session_timeout_ms=10),
                          catalog, error_code)
    gc.ensure_topic()  # the controller's creation, here
    gc.enable_partition_ownership(replication)
    return gc


def commit(gc, group, offset):
    return gc.commit_offsets(group_id=group, generation_id=-1, member_id="", group_instance_id=None,
                             retention_time_ms=-1, api_version=8, partitions=[("t", 0, offset, -1, "")])


def test_group_partitions_follow_leadership(catalog):
    async def run():
        repl = Replication()
        gc = groups(catalog, repl)
        p = gc.partition_for("g")
        assert commit(gc, "g", 5) == {("t", 0): NOT_COORDINATOR}  # not the leader of its partition yet
        await gc.load_partition(p, 3)
        assert gc.coordinator_epoch(p) == 3
        assert commit(gc, "g", 5) == {("t", 0): 0}
        assert await gc.durable("g") == 0
        plog = catalog.partition_log(OFFSETS_TOPIC, p)
        assert repl.waits == [(OFFSETS_TOPIC, p, plog.log_end_offset)]
        assert plog.read(0, 1 << 20)[12:16] == (3).to_bytes(4, "big")  # stamped with the leader epoch
        repl.code = ke.NotLeaderForPartitionError.errno
        assert await gc.durable("g") == NOT_COORDINATOR
        repl.code = ke.RequestTimedOutError.errno
        assert await gc.durable("g") == ke.CoordinatorNotAvailableError.errno
        gc.unload_partition(p)
        assert gc.fetch_offsets("g", None, False)[0] == NOT_COORDINATOR and "g" not in gc.groups
        await gc.load_partition(p, 4)  # leader again (e.g. after a failover back): the log has it
        assert gc.fetch_offsets("g", None, False) == (0, [("t", [(0, 5, -1, "", 0)])])
        gc.close()
    asyncio.run(run())


def test_unload_answers_waiting_joins_not_coordinator(catalog):
    async def run():
        gc = groups(catalog, Replication())
        p = gc.partition_for("g")
        await gc.load_partition(p, 0)
        first = await gc.join_group(group_id="g", member_id="", group_instance_id=None, protocol_type="consumer",
                                    protocols=[("range", b"")], session_timeout_ms=10000, rebalance_timeout_ms=5000,
                                    client_id="c", client_host="/h", api_version=5)
        joined = await gc.join_group(group_id="g", member_id=first.member_id, group_instance_id=None,
                                     protocol_type="consumer", protocols=[("range", b"")], session_timeout_ms=10000,
                                     rebalance_timeout_ms=5000, client_id="c", client_host="/h", api_version=5)
        sync = asyncio.ensure_future(gc.sync_group(group_id="g", generation_id=joined.generation_id,
                                                   member_id="other", group_instance_id=None, protocol_type=None,
                                                   protocol_name=None, assignments={}))
        await asyncio.sleep(0)
        # a follower's SyncGroup parks until the leader's; here the member is unknown: answered at once
        assert sync.done()
        waiting = asyncio.ensure_future(gc.sync_group(group_id="g", generation_id=joined.generation_id,
                                                      member_id=joined.member_id, group_instance_id=None,
                                                      protocol_type=None, protocol_name=None, assignments={}))
        await asyncio.sleep(0)
        gc.unload_partition(p)
        result = await asyncio.wait_for(waiting, 1)
        assert result.error in (0, NOT_COORDINATOR)
        assert gc.heartbeat(group_id="g", generation_id=1, member_id=joined.member_id,
                            group_instance_id=None) == NOT_COORDINATOR
        gc.close()
    asyncio.run(run())


class Remote:
    """Fake inter-broker WriteTxnMarkers: records the markers, answers every partition 0."""

    def __init__(self) -> None:
        self.sent: list[tuple[int, object]] = []

    async def __call__(self, node, markers):
        self.sent += [(node, m) for m in markers]
        return {tp: 0 for m in markers for tp in m.partitions}


def txn_coordinator(catalog, repl, remote, leaders) -> TransactionCoordinator:
    pids = itertools.count(100)
    c = TransactionCoordinator(TxnConfig(num_partitions=2), catalog, lambda: next(pids), error_code)
    c.txns.ensure_topic()  # the controller's creation, here
    c.txns.enable_partition_ownership(repl)
    c.markers.enable_routing(lambda t, p: leaders.get((t, p)), remote, repl, lambda t, p: 7)
    return c


def test_txn_partitions_follow_leadership_and_markers_go_to_leaders(catalog):
    async def run():
        repl, remote = Replication(), Remote()
        leaders = {("t", 1): 2}  # t-0 is led here (None), t-1 by node 2
        c = txn_coordinator(catalog, repl, remote, leaders)
        p = c.txns.partition_for("tx")
        assert c.init_producer_id("tx", 60000)[0] == NOT_COORDINATOR
        c.on_leader(p, 5)
        code, pid, epoch = c.init_producer_id("tx", 60000)
        assert code == 0 and await c.txns.durable("tx") == 0
        assert c.add_partitions("tx", pid, epoch, {("t", 0), ("t", 1)}) == 0
        assert c.end_txn("tx", pid, epoch, True) == 0
        for _ in range(50):
            await asyncio.sleep(0.01)
            if c.txns.get("tx").state is TxnState.COMPLETE_COMMIT:
                break
        assert c.txns.get("tx").state is TxnState.COMPLETE_COMMIT
        (node, marker), = remote.sent
        assert node == 2 and marker.partitions == (("t", 1),) and marker.commit and marker.coordinator_epoch == 5
        local = catalog.partition_log("t", 0)
        data = local.read(0, 1 << 20)
        assert parse_marker(memoryview(data)) == (True, 5)  # COMMIT with coordinator epoch 5
        assert data[12:16] == (7).to_bytes(4, "big")  # the partition's leader epoch
        assert ("t", 0, local.log_end_offset) in repl.waits  # the local marker waited for replication
        c.on_follower(p)
        assert c.init_producer_id("tx", 60000)[0] == NOT_COORDINATOR
        await c.stop()
    asyncio.run(run())


def test_new_coordinator_completes_prepared_commit(catalog):
    async def run():
        repl, remote = Replication(), Remote()
        leaders: dict = {("t", 0): 3}  # the data partition is led by node 3
        old = txn_coordinator(catalog, repl, remote, leaders)
        p = old.txns.partition_for("tx")
        old.on_leader(p, 1)
        _, pid, epoch = old.init_producer_id("tx", 60000)
        assert old.add_partitions("tx", pid, epoch, {("t", 0)}) == 0
        remote_down = Remote()

        async def unreachable(node, markers):
            raise OSError("connection refused")
        old.markers.remote = unreachable  # the old coordinator dies before its markers get out
        assert old.end_txn("tx", pid, epoch, True) == 0
        await asyncio.sleep(0.05)
        assert old.txns.get("tx").state is TxnState.PREPARE_COMMIT
        old.on_follower(p)
        await old.stop()
        new = txn_coordinator(catalog, repl, remote_down, leaders)  # replays the same __transaction_state
        new.on_leader(p, 2)
        for _ in range(50):
            await asyncio.sleep(0.01)
            if new.txns.get("tx").state is TxnState.COMPLETE_COMMIT:
                break
        assert new.txns.get("tx").state is TxnState.COMPLETE_COMMIT
        (node, marker), = remote_down.sent
        assert node == 3 and marker.commit and marker.coordinator_epoch == 2 and marker.producer_id == pid
        await new.stop()
    asyncio.run(run())


def test_single_node_coordinates_everything_in_epoch_zero(catalog):
    gc = GroupCoordinator(GroupConfig(num_partitions=2), catalog, error_code)
    gc.ensure_topic()
    assert gc.owned is None and gc.coordinator_epoch(1) == 0
    assert commit(gc, "g", 1) == {("t", 0): 0}
    c = TransactionCoordinator(TxnConfig(num_partitions=2), catalog, lambda: 1, error_code)
    assert not c.clustered and c.coordinator_epoch_of("x") == 0 and c.markers.route is None
    gc.close()


def test_no_append_below_min_isr(catalog):
    """Kafka checks min.insync.replicas before a coordinator append (acks=all): nothing is written and
    the state does not move; the client retries with COORDINATOR_NOT_AVAILABLE."""
    async def run():
        repl, remote = Replication(), Remote()
        c = txn_coordinator(catalog, repl, remote, {})
        p = c.txns.partition_for("tx")
        c.on_leader(p, 0)
        _, pid, epoch = c.init_producer_id("tx", 60000)
        c.txns.append_check = lambda t, part: ke.NotEnoughReplicasError.errno
        end = catalog.partition_log(TXN_TOPIC, p).log_end_offset
        assert c.init_producer_id("tx", 60000)[0] == ke.CoordinatorNotAvailableError.errno
        assert c.txns.get("tx").producer_epoch == epoch and catalog.partition_log(TXN_TOPIC, p).log_end_offset == end
        gc = groups(catalog, repl)
        await gc.load_partition(gc.partition_for("g"), 0)
        gc.runtime.append_check = lambda t, part: ke.NotLeaderForPartitionError.errno
        assert commit(gc, "g", 1) == {("t", 0): NOT_COORDINATOR}
        gc.close()
        await c.stop()
    asyncio.run(run())


def test_find_coordinator_names_the_state_partitions_leader():
    """broker/coordinator_lookup.py over a fake metadata image: the leader's endpoint on the asking
    listener; COORDINATOR_NOT_AVAILABLE without a leader or for a fenced leader."""
    from types import SimpleNamespace

    from minikafka.broker.coordinator_lookup import GROUP, TRANSACTION, find
    from minikafka.coordinator.partitioning import partition_for

    leaders = {("__consumer_offsets", partition_for("g", 3)): 2, ("__transaction_state", partition_for("t", 3)): -1}
    image = SimpleNamespace(
        partition=lambda topic, p: SimpleNamespace(leader=leaders.get((topic, p), 1)),
        brokers={1: SimpleNamespace(fenced=False, endpoints={"PLAINTEXT": ("h1", 9001, "PLAINTEXT")}),
                 2: SimpleNamespace(fenced=False, endpoints={"PLAINTEXT": ("h2", 9002, "PLAINTEXT")})})
    state = SimpleNamespace(cluster=SimpleNamespace(image=image), node_id=1,
                            advertised_for=lambda listener: SimpleNamespace(host="me", port=1),
                            groups=SimpleNamespace(partition_for=lambda k: partition_for(k, 3)),
                            txns=SimpleNamespace(txns=SimpleNamespace(partition_for=lambda k: partition_for(k, 3))))
    assert find(state, GROUP, "g", "PLAINTEXT") == (0, 2, "h2", 9002)
    assert find(state, GROUP, "g", "OTHER") == (ke.CoordinatorNotAvailableError.errno, -1, "", -1)
    assert find(state, TRANSACTION, "t", "PLAINTEXT") == (ke.CoordinatorNotAvailableError.errno, -1, "", -1)
    image.brokers[2].fenced = True
    assert find(state, GROUP, "g", "PLAINTEXT")[0] == ke.CoordinatorNotAvailableError.errno
