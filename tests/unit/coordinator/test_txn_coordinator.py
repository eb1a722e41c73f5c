"""coordinator/txn/coordinator.py and txn_state_manager.py on real partition logs in a temp dir, with a
fake clock: epoch bumps and producer id rotation, KIP-360 resumption, the timeout reaper, transactional
id expiry, replay of __transaction_state, loading in the background, marker retries."""
from __future__ import annotations

import asyncio
import itertools

import pytest

from minikafka.broker.errors import error_code
from minikafka.broker.topic_catalog import TopicCatalog
from minikafka.coordinator.txn.coordinator import TransactionCoordinator, TxnConfig
from minikafka.coordinator.txn.state import TxnState
from minikafka.coordinator.txn.state_manager import TXN_TOPIC, CoordinatorUnavailable, TxnStateManager
from minikafka.storage.log_config import LogConfig
from minikafka.storage.log_manager import LogManager

CONCURRENT, FENCED, INVALID_STATE, NOT_FOUND, LOADING = 51, 90, 48, 105, 14


class Clock:
    def __init__(self) -> None:
        self.ms = 1_800_000_000_000

    def __call__(self) -> float:
        return self.ms / 1000


@pytest.fixture
def env(tmp_path):
    logs = LogManager([tmp_path], LogConfig())
    catalog = TopicCatalog(logs, LogConfig(), tmp_path)
    catalog.load()
    catalog.create("t", 3)
    clock = Clock()
    pids = itertools.count(100)

    def make(**cfg) -> TransactionCoordinator:
        config = TxnConfig(**{"num_partitions": 4, **cfg})
        return TransactionCoordinator(config, catalog, lambda: next(pids), error_code, clock=clock)

    yield make, catalog, clock
    logs.close()


def begin(coord, tid="tx", parts=(("t", 0),)) -> tuple[int, int]:
    code, pid, epoch = coord.init_producer_id(tid, 60000)
    assert code == 0
    assert coord.add_partitions(tid, pid, epoch, set(parts)) == 0
    return pid, epoch


def test_new_ids_bump_epochs_and_rotate_when_exhausted(env):
    make, _catalog, _clock = env
    c = make()
    assert c.init_producer_id("a", 60000) == (0, 100, 0)
    assert c.init_producer_id("a", 60000) == (0, 100, 1)
    meta = c.txns.get("a")
    meta.producer_epoch = 32766  # Short.MAX_VALUE - 1: exhausted
    assert c.init_producer_id("a", 60000) == (0, 101, 0)
    assert c.init_producer_id("a", 900001)[0] == 50


def test_kip360_resume_with_expected_epoch(env):
    make, _catalog, _clock = env
    c = make()
    _, pid, epoch = c.init_producer_id("r", 60000)
    assert c.init_producer_id("r", 60000, (pid, epoch)) == (0, pid, epoch + 1)
    assert c.init_producer_id("r", 60000, (pid, epoch)) == (0, pid, epoch + 1)  # retry of that bump
    assert c.init_producer_id("r", 60000, (pid, epoch + 5))[0] == FENCED
    assert c.init_producer_id("r", 60000, (pid + 1, 0))[0] == FENCED


def test_init_while_ongoing_fences_and_aborts(env):
    make, catalog, _clock = env
    c = make()
    pid, epoch = begin(c)
    plog = catalog.partition_log("t", 0)
    assert c.init_producer_id("tx", 60000)[0] == CONCURRENT
    meta = c.txns.get("tx")
    assert (meta.state, meta.producer_epoch) == (TxnState.COMPLETE_ABORT, epoch + 1)
    assert plog.log_end_offset == 1  # the abort marker (nothing was produced)
    assert c.init_producer_id("tx", 60000) == (0, pid, epoch + 2)


def test_reaper_aborts_timed_out_transactions_with_an_epoch_bump(env):
    make, catalog, clock = env
    c = make()
    code, pid, epoch = c.init_producer_id("slow", 1000)
    assert c.add_partitions("slow", pid, epoch, {("t", 1)}) == 0
    clock.ms += 999
    assert c.abort_timed_out_transactions() == 0
    clock.ms += 2
    assert c.abort_timed_out_transactions() == 1
    meta = c.txns.get("slow")
    assert (meta.state, meta.producer_epoch) == (TxnState.COMPLETE_ABORT, epoch + 1)
    assert c.end_txn("slow", pid, epoch, True) == FENCED
    assert catalog.partition_log("t", 1).log_end_offset == 1


def test_idle_ids_expire_with_a_tombstone(env):
    make, catalog, clock = env
    c = make(id_expiration_ms=10_000)
    pid, epoch = begin(c, "old")
    assert c.end_txn("old", pid, epoch, True) == 0
    begin(c, "open")
    clock.ms += 10_001
    assert c.expire_transactional_ids() == 1  # only the completed one; an open one never expires
    assert c.describe("old").error_code == NOT_FOUND and c.describe("open").state == "Ongoing"
    reloaded = TxnStateManager(catalog, 4, 1 << 20).load_partition(c.txns.partition_for("old"))
    assert "old" not in reloaded


def test_state_replays_from_the_log(env):
    make, catalog, _clock = env
    c = make()
    pid, epoch = begin(c, "x", (("t", 0), ("t", 2)))
    c2 = make()
    loaded = c2.txns.load_partition(c2.txns.partition_for("x"))
    meta = loaded["x"]
    assert (meta.producer_id, meta.producer_epoch, meta.state, meta.partitions) == (
        pid, epoch, TxnState.ONGOING, {("t", 0), ("t", 2)})
    assert meta.start_ms == c.txns.get("x").start_ms


def test_requests_wait_while_the_state_loads(env):
    make, _catalog, _clock = env
    make().init_producer_id("l", 60000)

    async def scenario():
        c = make()
        c.txns.start_loading(lambda p, metas: None)
        with pytest.raises(CoordinatorUnavailable) as exc:
            c.txns.get("l")
        assert exc.value.errno == LOADING
        assert c.init_producer_id("l", 60000)[0] == LOADING
        await c.txns.load_task
        assert c.init_producer_id("l", 60000) == (0, 100, 1)

    asyncio.run(scenario())


def test_prepared_transactions_are_completed_at_load(env):
    make, catalog, _clock = env
    c = make()
    pid, epoch = begin(c, "p", (("t", 0), ("t", 1)))
    meta = c.txns.get("p")
    c.txns.persist(meta, meta.prepare_abort_or_commit(TxnState.PREPARE_COMMIT, 5))  # then "crash"

    async def scenario():
        c2 = make()
        c2.start()
        await c2.txns.load_task
        await c2.stop()
        return c2

    c2 = asyncio.run(scenario())
    assert c2.describe("p").state == "CompleteCommit"
    for part in (0, 1):
        plog = catalog.partition_log("t", part)
        assert plog.last_stable_offset == plog.high_watermark == 1


def test_failed_markers_keep_the_transaction_prepared_until_retried(env):
    make, catalog, _clock = env
    c = make()
    pid, epoch = begin(c, "m", (("t", 0), ("t", 1)))
    real_write = c.markers.write
    c.markers.write = lambda topic, part, *a: 56 if part == 1 else real_write(topic, part, *a)
    assert c.end_txn("m", pid, epoch, True) == 0  # the outcome is decided once PrepareCommit is written
    assert c.describe("m").state == "PrepareCommit"
    assert c.end_txn("m", pid, epoch, True) == CONCURRENT
    assert c.init_producer_id("m", 60000)[0] == CONCURRENT
    c.markers.write = real_write
    c.retry_markers()
    assert c.describe("m").state == "CompleteCommit"
    assert catalog.partition_log("t", 1).log_end_offset == 1


def test_deleted_partition_does_not_block_completion(env):
    make, catalog, _clock = env
    catalog.create("gone", 1)
    c = make()
    pid, epoch = begin(c, "d", (("t", 0), ("gone", 0)))
    catalog.delete("gone")
    assert c.end_txn("d", pid, epoch, False) == 0
    assert c.describe("d").state == "CompleteAbort"
    assert TXN_TOPIC in catalog.topics
