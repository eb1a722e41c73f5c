"""PartitionLog.append_as_follower / begin_append_as_follower / diverging_epoch: a follower copies the
leader's batches byte for byte (offsets and epochs as assigned there), its producer state, aborted-txn
index and epoch cache follow, and the leader answers a follower's last fetched epoch as KIP-320 says."""
from __future__ import annotations

import asyncio
import struct

import pytest
from kafka.record.memory_records import MemoryRecordsBuilder

from minikafka.storage import CorruptRecordError, OffsetOutOfRangeError, UnexpectedAppendOffsetError
from minikafka.storage.leader_epoch_cache import EpochEntry as E
from minikafka.storage.producer_state import AppendOrigin
from minikafka.storage.txn_markers import build_marker_batch
from tests.support.storage_helpers import build_batch, read_all, verify_segment_files


NOW = 1_700_000_000_000  # FakeClock's default: producers are not expired when a log is reopened


def txn_batch(pid: int, epoch: int, seq: int, n: int = 1, transactional: bool = True) -> bytes:
    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 30, transactional=transactional,
                             producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    for i in range(n):
        b.append(timestamp=NOW + i, key=None, value=b"v%d" % i, headers=[])
    b.close()
    return bytes(b.buffer())


def fill_leader(leader) -> None:
    """Plain, idempotent and transactional data over three leader epochs, one aborted transaction."""
    leader.append(build_batch(3), leader_epoch=0)
    leader.append(txn_batch(7, 0, 0, 2, transactional=False), leader_epoch=0)
    leader.append(txn_batch(9, 1, 0, 2), leader_epoch=2)
    leader.append(build_marker_batch(9, 1, 0, False, NOW), leader_epoch=2, origin=AppendOrigin.COORDINATOR)
    leader.append(txn_batch(9, 1, 2, 1), leader_epoch=5)
    leader.append(txn_batch(7, 0, 2, 1, transactional=False), leader_epoch=5)


def test_follower_copies_the_leader(open_log) -> None:
    leader = open_log("t-0")
    fill_leader(leader)
    follower = open_log("f/t-0")
    info = follower.append_as_follower(read_all(leader))
    assert (info.first_offset, info.last_offset) == (0, leader.log_end_offset - 1)
    assert read_all(follower) == read_all(leader)
    assert follower.log_end_offset == leader.log_end_offset
    assert follower.leader_epoch_cache.epoch_entries() == [E(0, 0), E(2, 5), E(5, 8)]
    # producer state: the open transaction pins the LSO; the aborted one is in the txn index
    assert follower.last_stable_offset == leader.last_stable_offset == 8
    assert follower.collect_aborted_txns(0, 100) == leader.collect_aborted_txns(0, 100)
    assert {p.producer_id: p.last_seq for p in follower.active_producers()} == {7: 2, 9: 2}
    verify_segment_files(follower.dir)


def test_follower_append_in_pieces_and_reopen(open_log) -> None:
    leader = open_log("t-0", segment_bytes=400)
    fill_leader(leader)
    data = read_all(leader)
    follower = open_log("f/t-0", segment_bytes=400)
    follower.append_as_follower(data)  # larger than segment.bytes: split, rolled
    assert len(follower.segments) > 1
    assert read_all(follower) == data
    follower.close()
    again = open_log("f/t-0", segment_bytes=400)  # unclean reopen: recovery, state replayed
    assert read_all(again) == data
    assert again.leader_epoch_cache.epoch_entries() == [E(0, 0), E(2, 5), E(5, 8)]
    assert again.last_stable_offset == 8


def test_follower_rejects_what_does_not_continue_its_log(open_log) -> None:
    leader = open_log("t-0")
    leader.append(build_batch(3), leader_epoch=1)
    leader.append(build_batch(2), leader_epoch=1)
    data = read_all(leader)
    follower = open_log("f/t-0")
    follower.append_as_follower(data)
    with pytest.raises(UnexpectedAppendOffsetError) as exc:
        follower.append_as_follower(data)  # starts at 0 < LEO 5
    assert exc.value.first_offset == 0
    corrupt = bytearray(read_all(leader, 3))
    corrupt[-1] ^= 1
    other = open_log("g/t-0")
    other.append_as_follower(data[:len(data) - len(corrupt)])
    with pytest.raises(CorruptRecordError):
        other.append_as_follower(bytes(corrupt))
    assert other.log_end_offset == 3
    assert other.append_as_follower(data[:10]) is None or True  # a partial batch alone
    assert other.log_end_offset == 3


def test_follower_accepts_gaps_and_ignores_a_trailing_partial_batch(open_log) -> None:
    batch = bytearray(build_batch(2))
    struct.pack_into(">q", batch, 0, 10)  # the leader compacted 0..9 away
    struct.pack_into(">i", batch, 12, 4)
    follower = open_log("f/t-0")
    info = follower.append_as_follower(bytes(batch) + bytes(batch[:30]))
    assert (info.first_offset, info.last_offset) == (10, 11)
    assert follower.log_end_offset == 12
    assert follower.read(10, 1 << 20) == bytes(batch)
    assert follower.leader_epoch_cache.epoch_entries() == [E(4, 10)]


def test_begin_append_as_follower_on_the_writer_thread(open_log) -> None:
    leader = open_log("t-0")
    for _ in range(3):
        leader.append(build_batch(40, value_size=2000), leader_epoch=3)
    leader.append(build_batch(1), leader_epoch=4)
    chunks = [leader.read(o, 1) for o in (0, 40, 80, 120)]  # one batch each
    follower = open_log("f/t-0")

    async def run() -> None:
        futures = [follower.begin_append_as_follower(c) for c in chunks]
        assert follower.leader_epoch_cache.epoch_entries() == [E(3, 0), E(4, 120)]
        infos = [await f if asyncio.isfuture(f) else f for f in futures]
        assert [i.first_offset for i in infos] == [0, 40, 80, 120]
    asyncio.run(run())
    assert read_all(follower) == read_all(leader)


def test_follower_epoch_conflicts_replace_entries(open_log) -> None:
    follower = open_log("f/t-0")
    follower.assign_epoch_start_offset(6, 0)  # e.g. it led epoch 6 briefly, writing nothing
    batch = bytearray(build_batch(2))
    struct.pack_into(">i", batch, 12, 5)
    follower.append_as_follower(bytes(batch))
    assert follower.leader_epoch_cache.epoch_entries() == [E(5, 0)]


# ---------------------------------------------------------------- diverging epoch (KIP-320)


def test_diverging_epoch(open_log) -> None:
    leader = open_log("t-0")
    leader.append(build_batch(5), leader_epoch=1)  # epoch 1: [0, 5)
    leader.append(build_batch(5), leader_epoch=3)  # epoch 3: [5, 10)
    assert leader.diverging_epoch(-1, 7) is None  # no last fetched epoch: no check
    assert leader.diverging_epoch(3, 10) is None  # in sync
    assert leader.diverging_epoch(3, 8) is None
    assert leader.diverging_epoch(1, 5) is None  # epoch 1 ends at 5 here too
    assert leader.diverging_epoch(1, 7) == (1, 5)  # its epoch 1 ran longer: truncate to 5
    assert leader.diverging_epoch(2, 7) == (1, 5)  # epoch 2 unknown here: epoch 1 ended at 5
    assert leader.diverging_epoch(0, 3) == (0, 0)  # older than anything here
    assert leader.diverging_epoch(3, 12) == (3, 10)  # ahead of the leader's LEO
    with pytest.raises(OffsetOutOfRangeError):
        leader.diverging_epoch(4, 10)  # newer than any epoch here
    leader.delete_records_before(6)
    with pytest.raises(OffsetOutOfRangeError):
        leader.diverging_epoch(3, 4)  # below the log start
