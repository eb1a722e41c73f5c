"""LeaderEpochCache (storage/leader_epoch_cache.py) and its upkeep by PartitionLog: Kafka's checkpoint
format, Kafka's endOffsetFor / truncateFromEnd / truncateFromStart semantics, rebuild and recovery."""
from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import pytest

from minikafka.storage.leader_epoch_cache import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    EpochEntry,
    LeaderEpochCache,
    decode_checkpoint,
    encode_checkpoint,
)
from tests.support.storage_helpers import build_batch

E = EpochEntry


def epoch_batch(epoch: int, n: int = 1, tag: str = "v") -> bytes:
    """A client batch whose partitionLeaderEpoch is `epoch` (the field is outside the CRC)."""
    data = bytearray(build_batch(n, tag=tag))
    struct.pack_into(">i", data, 12, epoch)
    return bytes(data)


def cache_with(tmp_path: Path, *entries: tuple[int, int]) -> LeaderEpochCache:
    cache = LeaderEpochCache(tmp_path)
    for epoch, start in entries:
        assert cache.assign(epoch, start)
    return cache


# ---------------------------------------------------------------- file format


def test_checkpoint_file_is_kafkas_format(tmp_path: Path) -> None:
    cache_with(tmp_path, (0, 0), (2, 10), (5, 42))
    assert (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).read_text() == "0\n3\n0 0\n2 10\n5 42\n"
    assert LeaderEpochCache.load(tmp_path).epoch_entries() == [E(0, 0), E(2, 10), E(5, 42)]


def test_checkpoint_written_by_kafka_is_read() -> None:
    # as Kafka's CheckpointFile writes it (BufferedWriter.newLine) and as its reader accepts it
    assert decode_checkpoint(b"0\n2\n0  1\n1 2\n") == [E(0, 1), E(1, 2)]
    assert decode_checkpoint(b"") == []
    assert decode_checkpoint(b"0\n0\n") == []
    assert encode_checkpoint([]) == b"0\n0\n"


@pytest.mark.parametrize("data", [b"1\n0\n", b"0\n2\n0 1\n", b"0\n1\n0 1 2\n", b"0\nx\n", b"\xff"])
def test_unreadable_checkpoint_is_ignored(tmp_path: Path, data: bytes) -> None:
    (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).write_bytes(data)
    assert LeaderEpochCache.load(tmp_path) is None


def test_missing_checkpoint_loads_as_none(tmp_path: Path) -> None:
    assert LeaderEpochCache.load(tmp_path) is None


def test_flush_fsyncs_only_when_written(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 0))
    cache.flush()
    assert not cache._dirty
    cache.flush()  # nothing to do
    assert not cache.assign(1, 5)
    assert not cache._dirty


# ---------------------------------------------------------------- assign


def test_assign_appends_newer_epochs_and_ignores_the_rest(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 0), (3, 10))
    assert not cache.assign(3, 20)  # same epoch, later offset: already covered
    assert not cache.assign(2, 30)  # older epoch: ignored on the leader's path
    assert not cache.assign(3, 5)
    assert cache.latest_epoch == 3
    assert cache.epoch_entries() == [E(1, 0), E(3, 10)]
    with pytest.raises(ValueError):
        cache.assign(-1, 0)


def test_assign_replacing_conflicts_as_kafka(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (1, 0), (3, 10), (4, 20))
    assert cache.assign(3, 15, replace_conflicts=True)  # epoch 3 again later: 3 and 4 conflict
    assert cache.epoch_entries() == [E(1, 0), E(3, 15)]
    assert cache.assign(3, 12, replace_conflicts=True)  # same epoch, earlier start
    assert cache.epoch_entries() == [E(1, 0), E(3, 12)]
    assert not cache.assign(3, 14, replace_conflicts=True)
    assert LeaderEpochCache.load(tmp_path).epoch_entries() == [E(1, 0), E(3, 12)]


def test_empty_cache(tmp_path: Path) -> None:
    cache = LeaderEpochCache(tmp_path)
    assert cache.latest_epoch == -1 and cache.latest_entry is None and cache.earliest_entry is None
    assert cache.end_offset_for(0, 10) == (-1, -1)
    assert cache.epoch_for_offset(3) == -1


# ---------------------------------------------------------------- end_offset_for (Kafka endOffsetFor)


def test_end_offset_for(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (2, 6), (4, 10), (6, 20))
    leo = 30
    assert cache.end_offset_for(-1, leo) == (-1, -1)  # UNDEFINED_EPOCH
    assert cache.end_offset_for(6, leo) == (6, 30)  # the latest epoch ends at the LEO
    assert cache.end_offset_for(7, leo) == (-1, -1)  # newer than any known
    assert cache.end_offset_for(4, leo) == (4, 20)
    assert cache.end_offset_for(5, leo) == (4, 20)  # unknown: the largest epoch below it
    assert cache.end_offset_for(3, leo) == (2, 10)
    assert cache.end_offset_for(2, leo) == (2, 10)
    assert cache.end_offset_for(1, leo) == (1, 6)  # older than every entry: start of the first
    assert cache.end_offset_for(0, leo) == (0, 6)


def test_epoch_for_offset(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (2, 6), (4, 10))
    assert [cache.epoch_for_offset(o) for o in (0, 5, 6, 9, 10, 100)] == [-1, -1, 2, 2, 4, 4]


# ---------------------------------------------------------------- truncation


def test_truncate_from_end(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (2, 6), (4, 10), (6, 20))
    assert not cache.truncate_from_end(21)
    assert not cache.truncate_from_end(-1)
    assert cache.truncate_from_end(10)  # entries starting at or after 10 go
    assert cache.epoch_entries() == [E(2, 6)]
    assert LeaderEpochCache.load(tmp_path).epoch_entries() == [E(2, 6)]
    assert cache.truncate_from_end(0)
    assert cache.epoch_entries() == []


def test_truncate_from_start(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (2, 6), (4, 10), (6, 20))
    assert not cache.truncate_from_start(6)  # exclusive: an entry at the start offset stays
    assert not cache.truncate_from_start(3)
    assert cache.truncate_from_start(12)
    assert cache.epoch_entries() == [E(4, 12), E(6, 20)]
    assert cache.truncate_from_start(20)
    assert cache.epoch_entries() == [E(6, 20)]
    assert cache.truncate_from_start(25)
    assert cache.epoch_entries() == [E(6, 25)]
    assert LeaderEpochCache.load(tmp_path).epoch_entries() == [E(6, 25)]


def test_clear(tmp_path: Path) -> None:
    cache = cache_with(tmp_path, (2, 6))
    cache.clear()
    assert LeaderEpochCache.load(tmp_path).epoch_entries() == []


def test_load_keeps_only_monotonic_entries(tmp_path: Path) -> None:
    (tmp_path / LEADER_EPOCH_CHECKPOINT_FILE).write_text("0\n4\n1 0\n3 10\n2 12\n3 15\n")
    assert LeaderEpochCache.load(tmp_path).epoch_entries() == [E(1, 0), E(2, 12), E(3, 15)]


# ---------------------------------------------------------------- upkeep by PartitionLog


def test_appends_assign_new_epochs_only(open_log) -> None:
    plog = open_log()
    assert plog.latest_epoch == -1
    plog.append(build_batch(3), leader_epoch=0)
    plog.append(build_batch(2), leader_epoch=0)
    plog.append(build_batch(1), leader_epoch=2)
    plog.append(build_batch(1), leader_epoch=1)  # a stale writer's epoch: not an entry
    assert plog.leader_epoch_cache.epoch_entries() == [E(0, 0), E(2, 5)]
    assert plog.end_offset_for_epoch(0) == (0, 5)
    assert plog.end_offset_for_epoch(2) == (2, 7)
    # without leader_epoch the batch's own epoch counts (coordinators, followers)
    plog.append(epoch_batch(4, 2))
    plog.append(epoch_batch(-1, 1))
    assert plog.leader_epoch_cache.epoch_entries() == [E(0, 0), E(2, 5), E(4, 7)]
    assert LeaderEpochCache.load(plog.dir).epoch_entries() == [E(0, 0), E(2, 5), E(4, 7)]


def test_begin_append_assigns_before_the_write(open_log) -> None:
    plog = open_log()
    big = build_batch(50, value_size=2000)  # past INLINE_WRITE_BYTES: written by the writer thread

    async def run() -> None:
        fut = plog.begin_append(big, leader_epoch=3)
        assert plog.leader_epoch_cache.epoch_entries() == [E(3, 0)]
        assert LeaderEpochCache.load(plog.dir).epoch_entries() == [E(3, 0)]
        await fut
    asyncio.run(run())
    assert plog.log_end_offset == 50


def test_become_leader_assigns_at_the_log_end(open_log) -> None:
    plog = open_log()
    plog.append(build_batch(4), leader_epoch=1)
    assert plog.assign_epoch_start_offset(5)
    assert not plog.assign_epoch_start_offset(5)
    assert plog.leader_epoch_cache.epoch_entries() == [E(1, 0), E(5, 4)]
    assert plog.end_offset_for_epoch(1) == (1, 4)
    assert plog.end_offset_for_epoch(5) == (5, 4)


def test_reopen_reads_checkpoint(open_log) -> None:
    plog = open_log()
    plog.append(build_batch(2), leader_epoch=1)
    plog.append(build_batch(2), leader_epoch=3)
    plog.flush()
    plog.close()
    again = open_log(clean=True)
    assert again.leader_epoch_cache.epoch_entries() == [E(1, 0), E(3, 2)]
    assert again.producer_state_replayed_batches == 0


def test_missing_checkpoint_is_rebuilt_from_the_log(open_log) -> None:
    plog = open_log(segment_bytes=300)
    for epoch in (0, 0, 2, 2, 2, 5):
        plog.append(build_batch(2), leader_epoch=epoch)
    assert len(plog.segments) > 2
    plog.close()
    (plog.dir / LEADER_EPOCH_CHECKPOINT_FILE).unlink()
    again = open_log(clean=True, segment_bytes=300)
    assert again.leader_epoch_cache.epoch_entries() == [E(0, 0), E(2, 4), E(5, 10)]
    assert LeaderEpochCache.load(again.dir).epoch_entries() == [E(0, 0), E(2, 4), E(5, 10)]


def test_log_without_epochs_writes_an_empty_checkpoint_once(open_log) -> None:
    plog = open_log()
    plog.append(epoch_batch(-1, 2))
    plog.close()
    assert not (plog.dir / LEADER_EPOCH_CHECKPOINT_FILE).exists()
    again = open_log(clean=True)
    assert (plog.dir / LEADER_EPOCH_CHECKPOINT_FILE).read_text() == "0\n0\n"
    assert again.latest_epoch == -1


def test_entries_past_the_log_end_are_dropped_on_open(open_log) -> None:
    plog = open_log()
    plog.append(build_batch(3), leader_epoch=1)
    plog.close()
    (plog.dir / LEADER_EPOCH_CHECKPOINT_FILE).write_text("0\n3\n1 0\n4 3\n6 9\n")  # a crash after assign
    again = open_log(clean=True)
    assert again.leader_epoch_cache.epoch_entries() == [E(1, 0)]


def test_recovery_restores_an_entry_a_crash_lost(open_log) -> None:
    plog = open_log()
    plog.append(build_batch(3), leader_epoch=1)
    plog.append(build_batch(3), leader_epoch=2)
    plog.close()
    # the checkpoint lost the newest entry and has a stale one (power loss before it was flushed)
    (plog.dir / LEADER_EPOCH_CHECKPOINT_FILE).write_text("0\n2\n1 0\n7 4\n")
    again = open_log(clean=False)  # unclean: the tail segment is recovered
    assert again.leader_epoch_cache.epoch_entries() == [E(1, 0), E(2, 3)]


def test_log_start_moves_truncate_from_start(open_log, clock) -> None:
    plog = open_log()
    plog.append(build_batch(3), leader_epoch=1)
    plog.append(build_batch(3), leader_epoch=2)
    assert plog.delete_records_before(4) == 4
    assert plog.leader_epoch_cache.epoch_entries() == [E(2, 4)]
    plog.close()
    assert open_log(clean=True).leader_epoch_cache.epoch_entries() == [E(2, 4)]
