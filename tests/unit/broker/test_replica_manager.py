"""broker/replication/replica_manager.py against a static fake of the cluster runtime (state.cluster):
leadership from the image, leader/min-ISR errors, acks=all waiters woken by HW advances, ISR changes
through AlterPartition, leadership listeners."""
from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest

from minikafka.broker.config.core import BrokerConfig
from minikafka.broker.security.peer_security import PeerFactory
from minikafka.broker.replication import replica_manager as rm
from minikafka.broker.replication.replica_manager import ReplicaManager
from minikafka.broker.state import BrokerState
from tests.unit.protocol.test_fetch_encoding import batch


@dataclass
class Partition:
    topic: str
    partition: int
    replicas: tuple
    isr: tuple
    leader: int
    leader_epoch: int
    partition_epoch: int
    topic_id: bytes = b"\x01" * 16


@dataclass
class Topic:
    name: str
    partitions: dict
    topic_id: bytes = b"\x01" * 16
    configs: dict = field(default_factory=dict)


@dataclass
class Broker:
    id: int
    epoch: int
    endpoints: dict
    fenced: bool = False
    in_controlled_shutdown: bool = False


class FakeImage:
    def __init__(self) -> None:
        self.topics: dict[str, Topic] = {}
        self.brokers = {n: Broker(n, 10 + n, {"PLAINTEXT": ("127.0.0.1", 1, "PLAINTEXT")}) for n in (1, 2, 3)}

    def partition(self, topic, p):
        t = self.topics.get(topic)
        return t.partitions.get(p) if t is not None else None


class FakeCluster:
    inter_broker_listener = "PLAINTEXT"
    peer_factory = PeerFactory()  # plain connections (broker/security/peer_security.py)

    def __init__(self) -> None:
        self.image = FakeImage()
        self.listeners = []

    def add_listener(self, fn) -> None:
        self.listeners.append(fn)

    def set(self, part: Partition) -> None:
        self.image.topics.setdefault(part.topic, Topic(part.topic, {})).partitions[part.partition] = part
        for fn in self.listeners:
            fn(self.image, [(part.topic, part.partition)], [])


@pytest.fixture
def node(tmp_path: Path, monkeypatch):
    config = BrokerConfig({"log.dirs": str(tmp_path / "d"), "listeners": "PLAINTEXT://127.0.0.1:9",
                           "node.id": "1", "replica.lag.time.max.ms": "200"})
    state = BrokerState(config)
    state.load()
    state.catalog.create("t", 1, 1)
    state.catalog.partition_log("t", 0).update_config(
        replace(state.catalog.partition_log("t", 0).config, min_insync_replicas=2))
    sent = []

    async def alter(manager, topic, p, leader_epoch, partition_epoch, isr):
        sent.append((topic, p, leader_epoch, partition_epoch, isr))
        return 0, isr, partition_epoch + 1, leader_epoch

    monkeypatch.setattr("minikafka.broker.replication.alter_partition.send_alter_partition", alter)
    yield state, FakeCluster(), sent
    state.close()


class NoFetcher:
    def __init__(self, *a) -> None:
        self.added = []
        self.task = None
        self.truncating = None

    def start(self):
        pass

    def add(self, tp):
        self.added.append(tp)

    def remove(self, tp):
        pass

    def close(self):
        pass


async def _manager(state, cluster, monkeypatch=None) -> ReplicaManager:
    m = ReplicaManager(state, cluster)
    state.replicas = m
    m.start()
    return m


def test_leader_errors_and_waiters(node, monkeypatch):
    state, cluster, sent = node
    monkeypatch.setattr("minikafka.broker.replication.fetcher.Fetcher", NoFetcher)

    async def scenario():
        m = await _manager(state, cluster)
        led, followed = [], []
        m.add_leadership_listener(lambda t, p, e: led.append((t, p, e)), lambda t, p: followed.append((t, p)))
        assert m.leader_error("t", 0) == rm.NOT_LEADER_OR_FOLLOWER  # not in the image yet
        cluster.set(Partition("t", 0, (1, 2, 3), (1, 2, 3), 1, 5, 7))
        assert led == [("t", 0, 5)]
        assert m.leader_error("t", 0) == 0 and m.leader_epoch("t", 0) == 5
        assert m.leader_error("t", 0, 4) == rm.FENCED_LEADER_EPOCH
        assert m.leader_error("t", 0, 6) == rm.UNKNOWN_LEADER_EPOCH
        assert m.min_isr_error("t", 0) == 0
        plog = state.catalog.partition_log("t", 0)
        plog.append(batch(3), leader_epoch=5)
        m.follower_fetched("t", 0, 2, 0)
        m.follower_fetched("t", 0, 3, 0)
        waiter = asyncio.ensure_future(m.wait_replicated("t", 0, 3, 5000))
        await asyncio.sleep(0.01)
        assert not waiter.done()
        m.follower_fetched("t", 0, 2, 3)
        await asyncio.sleep(0.01)
        assert not waiter.done()  # 3 still behind
        m.follower_fetched("t", 0, 3, 3)
        assert await asyncio.wait_for(waiter, 1) == 0
        assert m.parts[("t", 0)].high_watermark == 3
        assert await m.wait_replicated("t", 0, 4, 50) == rm.REQUEST_TIMED_OUT
        # a lagging follower leaves the ISR through AlterPartition; the waiter then completes with
        # NOT_ENOUGH_REPLICAS_AFTER_APPEND once the HW passes it with only the leader in sync
        plog.append(batch(1), leader_epoch=5)
        waiter = asyncio.ensure_future(m.wait_replicated("t", 0, 4, 5000))
        await asyncio.sleep(0.5)
        assert sent and sent[-1][4] == (1,)
        assert m.parts[("t", 0)].isr == (1,)
        assert await asyncio.wait_for(waiter, 1) == rm.NOT_ENOUGH_REPLICAS_AFTER_APPEND
        assert m.min_isr_error("t", 0) == rm.NOT_ENOUGH_REPLICAS
        # a follower that catches up joins again
        m.follower_fetched("t", 0, 2, 4)
        await asyncio.sleep(0.01)
        assert sent[-1][4] == (1, 2) and m.parts[("t", 0)].isr == (1, 2)
        # leadership moves away: waiters fail, the follower listeners hear of it, fetching starts
        waiter = asyncio.ensure_future(m.wait_replicated("t", 0, 99, 5000))
        await asyncio.sleep(0.01)
        cluster.set(Partition("t", 0, (1, 2, 3), (2, 3), 2, 6, 9))
        assert await asyncio.wait_for(waiter, 1) == rm.NOT_LEADER_OR_FOLLOWER
        assert followed == [("t", 0)]
        assert m.leader_error("t", 0) == rm.NOT_LEADER_OR_FOLLOWER
        assert m._fetchers[2].added == [("t", 0)]
        await m.stop()

    asyncio.run(scenario())


def _fetch(state, replica_id: int, offset: int, last_fetched_epoch: int = -1, leader_epoch: int = -1):
    from kafka.protocol.consumer import FetchRequest, FetchResponse

    from minikafka.broker.network.context import RequestContext
    from minikafka.broker.handlers.fetch import handle_fetch
    from tests.unit.protocol.test_fetch_encoding import materialise
    P = FetchRequest.FetchTopic.FetchPartition
    req = FetchRequest(replica_id=replica_id, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, isolation_level=0,
                       session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(topic="t", partitions=[
                           P(partition=0, current_leader_epoch=leader_epoch, fetch_offset=offset,
                             last_fetched_epoch=last_fetched_epoch, log_start_offset=0,
                             partition_max_bytes=1 << 20)])], forgotten_topics_data=[], rack_id="")

    async def call():
        body = await handle_fetch(RequestContext(state, 12, 1, "test", "127.0.0.1:1"), req)
        return body if isinstance(body, FetchResponse) else FetchResponse.decode(materialise(body), version=12)
    return call()


def test_fetch_handler_on_a_leader(node, monkeypatch):
    """Consumers read up to the HW only; a follower's fetch reads to the LEO and moves the HW; a
    follower whose last fetched epoch diverges gets the diverging epoch and no records; a fetch of a
    partition this node does not lead gets NOT_LEADER_OR_FOLLOWER."""
    state, cluster, _sent = node
    monkeypatch.setattr("minikafka.broker.replication.fetcher.Fetcher", NoFetcher)
    plog = state.catalog.partition_log("t", 0)
    diverging = {}
    monkeypatch.setattr(type(plog), "diverging_epoch",
                        lambda self, epoch, offset: diverging.get((epoch, offset)), raising=False)

    async def scenario():
        m = await _manager(state, cluster)
        cluster.set(Partition("t", 0, (1, 2), (1, 2), 1, 5, 7))
        plog.append(batch(3), leader_epoch=5)
        resp = await _fetch(state, -1, 0)
        p = resp.responses[0].partitions[0]
        assert p.error_code == 0 and not p.records  # HW still 0: nothing visible yet
        resp = await _fetch(state, 2, 0, last_fetched_epoch=-1)
        p = resp.responses[0].partitions[0]
        assert p.error_code == 0 and len(p.records) > 0  # a follower reads to the LEO
        assert m.parts[("t", 0)].high_watermark == 0
        await _fetch(state, 2, 3, last_fetched_epoch=5)  # the follower has it all: HW 3
        assert m.parts[("t", 0)].high_watermark == 3
        resp = await _fetch(state, -1, 0)
        assert resp.responses[0].partitions[0].records
        diverging[(4, 7)] = (4, 2)
        resp = await _fetch(state, 2, 7, last_fetched_epoch=4)
        p = resp.responses[0].partitions[0]
        assert p.error_code == 0 and not p.records
        assert (p.diverging_epoch.epoch, p.diverging_epoch.end_offset) == (4, 2)
        assert (await _fetch(state, -1, 0, leader_epoch=4)).responses[0].partitions[0].error_code == \
            rm.FENCED_LEADER_EPOCH
        cluster.set(Partition("t", 0, (1, 2), (1, 2), 2, 6, 8))
        assert (await _fetch(state, -1, 0)).responses[0].partitions[0].error_code == rm.NOT_LEADER_OR_FOLLOWER
        await m.stop()

    asyncio.run(scenario())


def test_follower_truncation_offset_for_a_diverging_epoch(tmp_path):
    """Kafka's getOffsetTruncationState: same epoch -> the smaller end offset; an epoch the follower
    does not have -> the end of its own largest epoch below it (the next fetch asks again)."""
    from minikafka.broker.replication.fetcher import truncation_offset
    from minikafka.storage.log_config import LogConfig
    from minikafka.storage.partition_log import PartitionLog
    plog = PartitionLog(tmp_path / "t-0", LogConfig())
    try:
        plog.append(batch(3), leader_epoch=0)
        plog.append(batch(3), leader_epoch=2)
        assert plog.log_end_offset == 6
        assert truncation_offset(plog, 2, 5) == 5
        assert truncation_offset(plog, 2, 9) == 6
        assert truncation_offset(plog, 1, 4) == 3
        assert truncation_offset(plog, 0, 2) == 2
    finally:
        plog.close()


def test_min_isr_is_capped_by_the_replica_count(node, monkeypatch):
    """Kafka's effectiveMinIsr: min.insync.replicas=2 on a one-replica partition takes acks=all (as the
    Kafka 4.3 oracle answers a single broker)."""
    state, cluster, _sent = node
    monkeypatch.setattr("minikafka.broker.replication.fetcher.Fetcher", NoFetcher)

    async def scenario():
        m = await _manager(state, cluster)
        cluster.set(Partition("t", 0, (1,), (1,), 1, 1, 1))
        assert m.min_isr_error("t", 0) == 0
        info = state.catalog.partition_log("t", 0).append(batch(1), leader_epoch=1)
        assert await m.wait_replicated("t", 0, info.last_offset + 1, 1000) == 0
        cluster.set(Partition("t", 0, (1, 2), (1,), 1, 1, 2))
        assert m.min_isr_error("t", 0) == rm.NOT_ENOUGH_REPLICAS
        await m.stop()

    asyncio.run(scenario())


@pytest.mark.parametrize("lost_first", [False, True])
def test_an_unclear_alter_partition_answer_keeps_the_joining_follower_in_the_hw(node, monkeypatch, lost_first):
    """The controller applies an ISR expansion in a new leader epoch (a reassignment completed by it), or
    the answer is lost: until the metadata says what happened, the HW stays at or below the joining
    follower's LEO, as Kafka's pending ISR state keeps it (else that follower, in the ISR, could lead
    without an acknowledged record)."""
    state, cluster, _sent = node
    monkeypatch.setattr("minikafka.broker.replication.fetcher.Fetcher", NoFetcher)
    answers = []

    async def alter(manager, topic, p, leader_epoch, partition_epoch, isr):
        answers.append(isr)
        if lost_first and len(answers) == 1:
            raise ConnectionError("no answer")  # the outcome is unknown: asked again
        return 0, isr, partition_epoch + 2, leader_epoch + 1  # applied, in a new leader epoch

    monkeypatch.setattr("minikafka.broker.replication.alter_partition.send_alter_partition", alter)
    monkeypatch.setattr(rm, "ALTER_PARTITION_RETRY_S", 0.01, raising=False)

    async def scenario():
        m = await _manager(state, cluster)
        cluster.set(Partition("t", 0, (1, 2, 3), (1, 2), 1, 5, 7))
        plog = state.catalog.partition_log("t", 0)
        plog.append(batch(3), leader_epoch=5)
        m.follower_fetched("t", 0, 2, 3)
        s = m.parts[("t", 0)]
        assert s.high_watermark == 3
        m.follower_fetched("t", 0, 3, 3)  # follower 3 caught up: the leader proposes (1, 2, 3)
        await asyncio.sleep(0.1)
        assert answers == [(1, 2, 3)] * (2 if lost_first else 1)
        assert s.pending_isr == (1, 2, 3) and s.isr == (1, 2)
        plog.append(batch(2), leader_epoch=5)
        m.follower_fetched("t", 0, 2, 5)  # the old ISR has everything, the joining follower not
        assert s.high_watermark == 3, "the HW passed a follower the controller may have put in the ISR"
        cluster.set(Partition("t", 0, (1, 2, 3), (1, 2, 3), 1, 6, 9))  # the metadata settles it
        assert s.pending_isr is None and s.isr == (1, 2, 3) and s.leader_epoch == 6
        await m.stop()

    asyncio.run(scenario())
