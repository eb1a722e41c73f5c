"""broker/cluster/runtime.py's image-following (issue 16), with a fake quorum driver: committed
records become the image, the local partition logs exist before listeners are told, listeners get
the changed partitions and deleted topics in commit order, a late listener gets every partition."""
from __future__ import annotations

import asyncio
import uuid
from types import SimpleNamespace

from minikafka.broker.cluster.runtime import ClusterRuntime
from minikafka.broker.config.core import Listener
from minikafka.broker.topic_catalog import TopicCatalog
from minikafka.metadata import records as r
from minikafka.storage.log_config import LogConfig
from minikafka.storage.log_manager import LogManager


def fake_state(tmp_path, node_id: int = 2):
    catalog = TopicCatalog(LogManager([tmp_path], LogConfig()), LogConfig(), tmp_path)
    catalog.load()
    config = SimpleNamespace(listeners=[Listener("PLAINTEXT", "127.0.0.1", 1), Listener("CONTROLLER", "127.0.0.1", 2)],
                             controller_listener_names=("CONTROLLER",), props={},
                             get=lambda key: "")
    return SimpleNamespace(node_id=node_id, config=config, catalog=catalog)


def fake_driver():
    quorum = SimpleNamespace(request_timeout_ms=1000, retry_backoff_ms=20, voters={})
    return SimpleNamespace(quorum=quorum, on_commit=None, node=SimpleNamespace(leader=None))


def test_local_logs_exist_before_listeners_and_deletions_follow(tmp_path):
    async def run() -> None:
        state, driver = fake_state(tmp_path), fake_driver()
        runtime = ClusterRuntime(state, driver)
        assert runtime.inter_broker_listener == "PLAINTEXT"
        calls = []

        def listener(image, changed, deleted):
            calls.append((sorted(changed), list(deleted),
                          {p: state.catalog.partition_log(t, p) is not None for t, p in changed}))
        runtime.add_listener(listener)
        tid = str(uuid.uuid4())
        driver.on_commit([(0, r.register_broker(2, 0, "x", [("PLAINTEXT", "h", 1, "PLAINTEXT")], None)),
                          (1, r.topic("t", tid)), (2, r.partition(tid, 0, [1, 2], [1, 2], 1)),
                          (3, r.partition(tid, 1, [1, 3], [1, 3], 1))])
        await runtime._flush_task
        assert calls == [([("t", 0), ("t", 1)], [], {0: True, 1: False})]  # only partition 0 has a replica here
        assert runtime.image.partition("t", 0).leader == 1 and runtime.image.offset == 3
        late = []
        runtime.add_listener(lambda image, changed, deleted: late.append(sorted(changed)))
        driver.on_commit([(4, r.partition_change(tid, 0, leader=2))])
        await runtime._flush_task
        assert late[0] == [("t", 0), ("t", 1)] and calls[-1][0] == [("t", 0)]
        assert runtime.image.partition("t", 0).leader_epoch == 1
        driver.on_commit([(5, r.remove_topic(tid))])
        await runtime._flush_task
        assert calls[-1][1] == ["t"] and state.catalog.get("t") is None
        state.catalog.close()
    asyncio.run(run())


def test_controller_request_asks_a_new_quorum_leader_without_sitting_out_its_backoff(tmp_path):
    """A forwarded request whose controller died retries with a growing backoff (up to 0.5 s); once the
    quorum names another leader it is asked at once, as Kafka's controller channel does on a leader change."""
    from minikafka.protocol.peer_client import PeerError

    async def run() -> None:
        state, driver = fake_state(tmp_path), fake_driver()
        changed = asyncio.Event()

        async def wait_for_change(timeout_s: float) -> bool:
            try:
                await asyncio.wait_for(changed.wait(), timeout_s)
                return True
            except asyncio.TimeoutError:
                return False
        driver.wait_for_change = wait_for_change
        driver.node.leader = 1
        runtime = ClusterRuntime(state, driver)
        loop = asyncio.get_running_loop()
        asked: list[tuple[int, float]] = []

        class Client:
            def __init__(self, leader: int) -> None:
                self.leader = leader

            async def request(self, req, version, resp_cls):
                asked.append((self.leader, loop.time()))
                if self.leader == 1:
                    raise PeerError("connection refused")
                return SimpleNamespace(error_code=0)
        runtime._client = lambda leader, channel: Client(leader)

        async def elect() -> float:
            await asyncio.sleep(1.2)  # the backoff has grown to its 0.5 s cap by now
            driver.node.leader = 2
            changed.set()
            return loop.time()
        election = asyncio.ensure_future(elect())
        resp = await runtime.controller_request(object(), 0, object, timeout_s=10)
        elected_at = await election
        assert resp.error_code == 0
        assert [n for n, _ in asked].count(2) == 1 and asked[-1][0] == 2
        assert len([n for n, _ in asked if n == 1]) >= 5  # 0.02, 0.04, ... doubled while node 1 was dead
        assert asked[-1][1] - elected_at < 0.25  # not after the rest of a 0.5 s backoff
        state.catalog.close()
    asyncio.run(run())
