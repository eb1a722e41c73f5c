"""The follower fetcher against a real leader over a socket: two brokers in one event loop (each
`broker.server.Broker` with its own data dir), their replica managers fed the same fake metadata image.
The follower copies the leader's batches with the leader's offsets and epochs, learns the HW, and the
leader's acks=all waiter completes; after a leader change, the old leader's records nobody else has
are truncated away (diverging epoch)."""
from __future__ import annotations

import asyncio


from minikafka.broker.config.core import BrokerConfig
from minikafka.broker.replication.replica_manager import ReplicaManager
from minikafka.broker.server import Broker
from tests.unit.protocol.test_fetch_encoding import batch
from tests.unit.broker.test_replica_manager import FakeCluster, Partition



async def _brokers(tmp_path, n=2):
    cluster = FakeCluster()
    brokers = []
    for i in range(1, n + 1):
        b = Broker(BrokerConfig({"log.dirs": str(tmp_path / f"n{i}"), "listeners": "PLAINTEXT://127.0.0.1:0",
                                 "node.id": str(i), "replica.fetch.wait.max.ms": "100",
                                 "replica.fetch.backoff.ms": "50", "replica.lag.time.max.ms": "10000"}))
        await b.start()
        cluster.image.brokers[i].endpoints["PLAINTEXT"] = ("127.0.0.1", b.bound_ports[0], "PLAINTEXT")
        b.state.catalog.create("t", 1, 1)
        brokers.append(b)
    for b in brokers:
        own = FakeCluster()
        own.image = cluster.image
        own.listeners = cluster.listeners
        b.state.replicas = ReplicaManager(b.state, own)
        b.state.replicas.start()
    return cluster, brokers


async def _stop(brokers):
    for b in brokers:
        await b.stop()


def test_follower_copies_and_truncates(tmp_path):
    async def scenario():
        cluster, (one, two) = await _brokers(tmp_path)
        try:
            l1, l2 = one.state.catalog.partition_log("t", 0), two.state.catalog.partition_log("t", 0)
            cluster.set(Partition("t", 0, (1, 2), (1, 2), 1, 1, 1))
            info = l1.append(batch(3), leader_epoch=1)
            assert await asyncio.wait_for(one.state.replicas.wait_replicated("t", 0, info.last_offset + 1, 5000),
                                          5) == 0
            assert l2.log_end_offset == 3 and l2.latest_epoch == 1
            for _ in range(50):  # the follower learns the HW with its next fetch
                if l2.high_watermark == 3:
                    break
                await asyncio.sleep(0.05)
            assert l2.high_watermark == 3
            # node 1 appends alone (acks=1) and loses leadership; node 2 leads epoch 2
            cluster.set(Partition("t", 0, (1, 2), (1,), 1, 1, 2))
            await asyncio.sleep(0.2)
            l1.append(batch(2), leader_epoch=1)
            cluster.set(Partition("t", 0, (1, 2), (2,), 2, 2, 3))
            l2.append(batch(4), leader_epoch=2)
            for _ in range(100):
                if l1.log_end_offset == 7 and l1.latest_epoch == 2:
                    break
                await asyncio.sleep(0.05)
            assert (l1.log_end_offset, l1.latest_epoch) == (7, 2)
            assert l1.read(0, 1 << 20) == l2.read(0, 1 << 20)  # the same bytes: offsets, epochs, CRCs
            assert [e for e in l1.leader_epoch_cache.epoch_entries()] == \
                [e for e in l2.leader_epoch_cache.epoch_entries()]
        finally:
            await _stop([one, two])

    asyncio.run(scenario())
