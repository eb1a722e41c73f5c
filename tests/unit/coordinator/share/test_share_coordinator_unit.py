"""The share coordinator over real partition logs: Kafka 4.3.1's semantics of the five state RPCs (errors,
fencing, snapshot cadence, tombstones) and a restart that replays `__share_group_state`."""
from __future__ import annotations

import asyncio
import dataclasses
import uuid
from pathlib import Path

import pytest

from minikafka.coordinator.share.config import SHARE_STATE_TOPIC, ShareCoordinatorConfig
from minikafka.coordinator.share.coordinator import ShareCoordinator, kafka_uuid, parse_share_key, share_key
from minikafka.coordinator.share.persister import LocalSharePersister, StateBatch as B
from minikafka.coordinator.share.records import SHARE_SNAPSHOT, SHARE_UPDATE, decode_key
from minikafka.coordinator.group.records import iter_batch_records
from minikafka.protocol.errors import (
    COORDINATOR_LOAD_IN_PROGRESS,
    FENCED_LEADER_EPOCH,
    FENCED_STATE_EPOCH,
    INVALID_REQUEST,
    UNKNOWN_TOPIC_OR_PARTITION,
)
from minikafka.protocol.record_batch import iter_headers
from minikafka.storage import LogConfig, PartitionLog

TOPIC = uuid.UUID("0b7e3a52-8f7c-4d9e-a1b2-c3d4e5f60718")


@dataclasses.dataclass
class Info:
    partitions: int
    topic_id: uuid.UUID = TOPIC


class FakeCatalog:
    """The slice of the broker's TopicCatalog the share coordinator uses, over real partition logs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.topics: dict[str, Info] = {"t": Info(3)}
        self.by_id = {TOPIC: self.topics["t"]}
        self.logs: dict[tuple[str, int], PartitionLog] = {}

    def get(self, name):
        return self.topics.get(name)

    async def create_async(self, name, partitions, rf, configs, internal=False, exist_ok=False):
        self.topics[name] = Info(partitions, uuid.uuid4())
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


def make(catalog, **overrides) -> ShareCoordinator:
    return ShareCoordinator(dataclasses.replace(ShareCoordinatorConfig(num_partitions=3), **overrides), catalog,
                            error_code=lambda exc: -1)


def records_of(catalog, sc, group="g", partition=0):
    """(record type, tombstone?) of the key's records, in log order."""
    plog = catalog.partition_log(SHARE_STATE_TOPIC, sc.partition_for(group, TOPIC, partition))
    data = plog.read(0, 1 << 20, max_offset=plog.log_end_offset)
    out = []
    for pos, h in iter_headers(data):
        for rec in iter_batch_records(bytes(data[pos:pos + h.size])):
            key = decode_key(rec.key)
            if key.group_id == group and key.partition == partition:
                out.append((key.record_type, rec.value is None))
    return out


def test_keys_as_kafka():
    assert kafka_uuid(uuid.UUID(int=0)) == "AAAAAAAAAAAAAAAAAAAAAA"
    key = share_key("g:x", TOPIC, 7)
    assert parse_share_key(key) == ("g:x", TOPIC, 7)
    for bad in ("", "g:1", ":" + kafka_uuid(TOPIC) + ":1", "g:notauuid:1", f"g:{kafka_uuid(TOPIC)}:x"):
        with pytest.raises(ValueError):
            parse_share_key(bad)


def test_lifecycle(catalog):
    async def main():
        sc = make(catalog)
        p = LocalSharePersister(sc, backoff_ms=1)
        r = await p.read("g", TOPIC, 0, 0)
        assert (r.error_code, r.error_message) == (INVALID_REQUEST, "Read operation on uninitialized share partition "
                                                                   "not allowed.")
        r = await p.write("g", TOPIC, 0, 0, 0, 0, [])
        assert r.error_code == INVALID_REQUEST
        s = await p.read_summary("g", TOPIC, 0, 0)
        assert (s.error_code, s.start_offset, s.state_epoch, s.leader_epoch) == (0, -1, 0, 0)
        assert (await p.initialize("g", TOPIC, 0, 1, 10)).error_code == 0
        w = await p.write("g", TOPIC, 0, 1, 3, 12, [B(12, 19, 2, 1), B(20, 29, 0, 2)], 8)
        assert w.error_code == 0
        r = await p.read("g", TOPIC, 0, 3)
        assert (r.error_code, r.state_epoch, r.start_offset) == (0, 1, 12)
        assert r.state_batches == [B(12, 19, 2, 1), B(20, 29, 0, 2)]
        s = await p.read_summary("g", TOPIC, 0, 3)
        assert (s.start_offset, s.state_epoch, s.leader_epoch, s.delivery_complete_count) == (12, 1, 3, 8)
        # fencing: an older leader epoch / state epoch is refused
        assert (await p.write("g", TOPIC, 0, 1, 2, -1, [])).error_code == FENCED_LEADER_EPOCH
        assert (await p.read("g", TOPIC, 0, 2)).error_code == FENCED_LEADER_EPOCH
        assert (await p.write("g", TOPIC, 0, 0, 3, -1, [])).error_code == FENCED_STATE_EPOCH
        assert (await p.initialize("g", TOPIC, 0, 0, 5)).error_code == FENCED_STATE_EPOCH
        # start offset -1 keeps the start offset; batches merge with what is stored
        assert (await p.write("g", TOPIC, 0, 1, 3, -1, [B(20, 24, 2, 2)])).error_code == 0
        r = await p.read("g", TOPIC, 0, -1)
        assert (r.start_offset, r.state_batches) == (12, [B(12, 19, 2, 1), B(20, 24, 2, 2), B(25, 29, 0, 2)])
        # unknown topic or partition beyond it
        assert (await p.initialize("g", uuid.uuid4(), 0, 1, 0)).error_code == UNKNOWN_TOPIC_OR_PARTITION
        assert (await p.initialize("g", TOPIC, 3, 1, 0)).error_code == UNKNOWN_TOPIC_OR_PARTITION
        # delete: a tombstone, then uninitialized again; deleting again succeeds
        assert (await p.delete("g", TOPIC, 0)).error_code == 0
        assert (await p.read("g", TOPIC, 0, 3)).error_code == INVALID_REQUEST
        assert (await p.delete("g", TOPIC, 0)).error_code == 0
        # initialize, write, the read that brought leader epoch 3 (writes do not move it), write, delete
        assert records_of(catalog, sc) == [(SHARE_SNAPSHOT, False), (SHARE_UPDATE, False), (SHARE_UPDATE, False),
                                           (SHARE_UPDATE, False), (SHARE_SNAPSHOT, True)]
    asyncio.run(main())


def test_read_with_new_leader_epoch_writes_it(catalog):
    async def main():
        sc = make(catalog)
        await sc.initialize_state("g", TOPIC, 1, 0, 0)
        r = await sc.read_state("g", TOPIC, 1, 5)
        assert r.leader_epoch == 0  # the answer is the state before the read
        assert (await sc.read_state_summary("g", TOPIC, 1, -1)).leader_epoch == 5
        await sc.read_state("g", TOPIC, 1, 5)  # same epoch: nothing written
        # a write does not move the leader epoch
        await sc.write_state("g", TOPIC, 1, 0, 7, -1, [])
        assert (await sc.read_state_summary("g", TOPIC, 1, -1)).leader_epoch == 5
        assert records_of(catalog, sc, partition=1) == [(SHARE_SNAPSHOT, False), (SHARE_UPDATE, False),
                                                        (SHARE_UPDATE, False)]
    asyncio.run(main())


def test_snapshot_every_n_updates_and_restart(catalog):
    async def main():
        sc = make(catalog, records_per_snapshot=2)
        await sc.initialize_state("g", TOPIC, 2, 4, 0)
        for i in range(5):
            assert (await sc.write_state("g", TOPIC, 2, 4, 1, i * 10,
                                         [B(i * 10, i * 10 + 4, 2, 1)], i)).error_code == 0
        types = [t for t, _ in records_of(catalog, sc, partition=2)]
        assert types == [SHARE_SNAPSHOT, SHARE_UPDATE, SHARE_UPDATE, SHARE_SNAPSHOT, SHARE_UPDATE, SHARE_UPDATE]
        return await sc.read_state("g", TOPIC, 2, -1)
    before = asyncio.run(main())
    assert before.start_offset == 40 and before.state_batches == [B(40, 44, 2, 1)]

    async def restarted(cat):
        sc = make(cat)
        first = await sc.read_state("g", TOPIC, 2, -1)
        await sc._load_task
        return first, await sc.read_state("g", TOPIC, 2, -1)
    cat = catalog.reopen()
    try:
        first, after = asyncio.run(restarted(cat))
    finally:
        cat.close()
    assert first.error_code == COORDINATOR_LOAD_IN_PROGRESS
    assert (after.error_code, after.state_epoch, after.start_offset, after.state_batches) == (
        0, 4, 40, before.state_batches)


def test_persister_retries_retriable_errors(catalog):
    async def main():
        sc = make(catalog)
        p = LocalSharePersister(sc, backoff_ms=1, max_attempts=3)
        r = await p.initialize("g", uuid.uuid4(), 0, 1, 0)
        assert r.error_code == UNKNOWN_TOPIC_OR_PARTITION
        assert r.error_message == ("Error in initialize state RPC. Exhausted max retries to complete initialize "
                                   "state RPC without success.")
        new = uuid.uuid4()
        catalog.by_id[new] = Info(1, new)
        calls = []
        real = sc.initialize_state

        async def flaky(*args):
            calls.append(args)
            if len(calls) == 1:
                return dataclasses.replace(await sc.read_state_summary("g", new, 0, -1), error_code=14)
            return await real(*args)
        sc.initialize_state = flaky
        assert (await p.initialize("g", new, 0, 1, 0)).error_code == 0 and len(calls) == 2
    asyncio.run(main())


def test_cold_snapshots_and_pruning(catalog):
    async def main():
        now = [1_000_000.0]
        sc = ShareCoordinator(ShareCoordinatorConfig(num_partitions=1, records_per_snapshot=2,
                                                     cold_partition_snapshot_interval_ms=60_000),
                              catalog, error_code=lambda exc: -1, clock=lambda: now[0])
        await sc.initialize_state("a", TOPIC, 0, 0, 0)  # offset 0
        await sc.initialize_state("b", TOPIC, 0, 0, 0)  # offset 1
        for i in range(3):  # a: update, update, snapshot (offsets 2-4)
            await sc.write_state("a", TOPIC, 0, 0, 0, i, [B(i, i, 2, 1)])
        plog = catalog.partition_log(SHARE_STATE_TOPIC, 0)
        sc.prune()  # b's only snapshot is at offset 1
        assert plog.log_start_offset == 1
        sc.snapshot_cold_partitions()  # nothing is a minute old yet
        assert plog.log_end_offset == 5
        now[0] += 61
        sc.snapshot_cold_partitions()  # a fresh snapshot of both (offsets 5, 6)
        assert plog.log_end_offset == 7
        sc.prune()
        assert plog.log_start_offset == 5
        r = await sc.read_state("a", TOPIC, 0, -1)
        assert (r.start_offset, r.state_batches) == (2, [B(2, 2, 2, 1)])
        sc.snapshot_cold_partitions()  # every state was cold-snapshotted: nothing more
        assert plog.log_end_offset == 7
    asyncio.run(main())


def test_deleted_topics_are_tombstoned_before_pruning(catalog):
    async def main():
        other = uuid.uuid4()
        catalog.by_id[other] = Info(1, other)
        sc = make(catalog, num_partitions=1)
        await sc.initialize_state("g", other, 0, 0, 0)  # offset 0
        await sc.initialize_state("g", TOPIC, 0, 0, 0)  # offset 1
        await sc.write_state("g", TOPIC, 0, 0, 0, 5, [])  # offset 2
        sc.prune()
        plog = catalog.partition_log(SHARE_STATE_TOPIC, 0)
        assert plog.log_start_offset == 0  # `other`'s snapshot at 0 holds it
        del catalog.by_id[other]
        sc.prune()  # a tombstone for `other` (offset 3), then everything below TOPIC's snapshot goes
        assert plog.log_start_offset == 1 and plog.log_end_offset == 4
        assert (await sc.read_state("g", TOPIC, 0, -1)).start_offset == 5
    asyncio.run(main())
