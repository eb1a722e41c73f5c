"""storage/txn_index.py and the transactional side of the partition log: open transactions pin the
LSO, markers end them, aborted ones land in the marker segment's .txnindex (Kafka's format), and all of
it survives a clean restart, a kill -9 (no snapshot at the LEO) and a torn .txnindex."""
from __future__ import annotations

import struct

import pytest
from kafka.record.memory_records import MemoryRecordsBuilder

from minikafka.storage import LogConfig, PartitionLog
from minikafka.storage.errors import (
    InvalidProducerEpochError,
    InvalidTxnStateError,
    TransactionCoordinatorFencedError,
)
from minikafka.storage.producer_state import AppendOrigin
from minikafka.storage.txn_index import ENTRY_SIZE, AbortedTxn, TransactionIndex, decode_entries, encode_entry
from minikafka.storage.txn_markers import build_marker_batch, parse_marker


def txn_batch(pid: int, epoch: int, seq: int, n: int = 1, transactional: bool = True) -> bytes:
    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 30, transactional=transactional,
                             producer_id=pid, producer_epoch=epoch, base_sequence=seq)
    for i in range(n):
        b.append(timestamp=1_000 + i, key=None, value=b"v%d" % i, headers=[])
    b.close()
    return bytes(b.buffer())


def plain_batch(n: int = 1) -> bytes:
    b = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 30)
    for i in range(n):
        b.append(timestamp=1_000 + i, key=None, value=b"p%d" % i, headers=[])
    b.close()
    return bytes(b.buffer())


def marker(plog: PartitionLog, pid: int, epoch: int, commit: bool, coordinator_epoch: int = 0):
    return plog.append(build_marker_batch(pid, epoch, coordinator_epoch, commit, 2_000),
                       origin=AppendOrigin.COORDINATOR)


# ------------------------------------------------------------------------------- index file

def test_entry_format_is_kafkas_34_bytes():
    data = encode_entry(AbortedTxn(7, 10, 20, 21))
    assert len(data) == ENTRY_SIZE == 34
    assert struct.unpack(">hqqqq", data) == (0, 7, 10, 20, 21)
    assert decode_entries(data * 2 + data[:5]) == [AbortedTxn(7, 10, 20, 21)] * 2


def test_index_is_lazy_appends_in_order_collects_and_truncates(tmp_path):
    idx = TransactionIndex(tmp_path / "00000000000000000000.txnindex", 0)
    assert len(idx) == 0 and not idx.path.exists()  # created with the first entry, as Kafka does
    idx.append(AbortedTxn(1, 0, 5, 6))
    idx.append(AbortedTxn(2, 3, 9, 10))
    with pytest.raises(ValueError):
        idx.append(AbortedTxn(3, 4, 9, 10))
    assert idx.path.stat().st_size == 2 * ENTRY_SIZE
    assert idx.collect(6, 100) == ([AbortedTxn(2, 3, 9, 10)], False)
    assert idx.collect(0, 4) == ([AbortedTxn(1, 0, 5, 6), AbortedTxn(2, 3, 9, 10)][:1], True)
    assert idx.truncate_to(9) == 1
    idx.close()
    again = TransactionIndex(idx.path, 0)
    assert again.entries == (AbortedTxn(1, 0, 5, 6),)


def test_torn_index_tail_is_dropped(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(encode_entry(AbortedTxn(1, 0, 5, 6)) + b"\x00\x00\x00")
    idx = TransactionIndex(path, 0)
    assert idx.sanity_check() is not None
    assert idx.entries == (AbortedTxn(1, 0, 5, 6),)
    assert path.stat().st_size == ENTRY_SIZE


def test_marker_codec_roundtrip():
    assert parse_marker(build_marker_batch(5, 2, 9, True, 1)) == (True, 9)
    assert parse_marker(build_marker_batch(5, 2, -1, False, 1)) == (False, -1)


# ------------------------------------------------------------------------------- partition log

def test_open_transaction_pins_lso_until_commit(open_log):
    plog = open_log()
    plog.append(plain_batch(2))                      # 0-1
    assert plog.last_stable_offset == 2
    plog.append(txn_batch(1, 0, 0, 3))               # 2-4 open
    plog.append(plain_batch(1))                      # 5
    assert plog.high_watermark == 6 and plog.last_stable_offset == 2
    info = marker(plog, 1, 0, commit=True)           # 6
    assert info.first_offset == 6
    assert plog.last_stable_offset == 7
    assert plog.collect_aborted_txns(0, 7) == []


def test_abort_goes_to_txnindex_with_the_lso_it_leaves(open_log):
    plog = open_log()
    plog.append(txn_batch(1, 0, 0, 2))               # 0-1 pid 1
    plog.append(txn_batch(2, 0, 0, 1))               # 2 pid 2
    assert plog.last_stable_offset == 0
    marker(plog, 1, 0, commit=False)                 # 3 aborts pid 1; pid 2 still open at 2
    assert plog.last_stable_offset == 2
    marker(plog, 2, 0, commit=False)                 # 4
    assert plog.last_stable_offset == 5
    assert plog.collect_aborted_txns(0, 5) == [AbortedTxn(1, 0, 3, 2), AbortedTxn(2, 2, 4, 5)]
    assert plog.collect_aborted_txns(4, 5) == [AbortedTxn(2, 2, 4, 5)]
    assert plog.collect_aborted_txns(0, 2) == [AbortedTxn(1, 0, 3, 2)]
    assert (plog.dir / "00000000000000000000.txnindex").stat().st_size == 2 * ENTRY_SIZE


def test_aborted_txns_are_found_across_segments(open_log):
    plog = open_log()
    plog.append(txn_batch(1, 0, 0, 2))               # 0-1
    plog.roll()
    plog.append(plain_batch(1))                      # 2
    marker(plog, 1, 0, commit=False)                 # 3, in segment 2
    plog.roll()
    plog.append(plain_batch(1))                      # 4
    assert plog.collect_aborted_txns(0, 5) == [AbortedTxn(1, 0, 3, 4)]
    assert plog.collect_aborted_txns(4, 5) == []
    assert (plog.dir / "00000000000000000002.txnindex").exists()
    assert not (plog.dir / "00000000000000000000.txnindex").exists()


def test_marker_checks_epochs(open_log):
    plog = open_log()
    plog.append(txn_batch(1, 3, 0))
    with pytest.raises(InvalidProducerEpochError):
        marker(plog, 1, 2, commit=True)
    marker(plog, 1, 3, commit=True, coordinator_epoch=5)
    with pytest.raises(TransactionCoordinatorFencedError):
        marker(plog, 1, 3, commit=True, coordinator_epoch=4)
    marker(plog, 1, 4, commit=False, coordinator_epoch=5)  # fencing abort with a bumped epoch
    with pytest.raises(InvalidProducerEpochError):
        plog.append(txn_batch(1, 3, 1))
    with pytest.raises(InvalidTxnStateError):  # non-transactional write inside an open transaction
        plog.append(txn_batch(1, 4, 0))
        plog.append(txn_batch(1, 4, 1, transactional=False))


def test_clients_may_not_write_markers(open_log):
    from minikafka.protocol.record_batch import InvalidRecordError
    plog = open_log()
    with pytest.raises(InvalidRecordError):
        plog.append(build_marker_batch(1, 0, 0, True, 1))


@pytest.mark.parametrize("clean", [True, False])
def test_restart_restores_lso_and_aborted_index(tmp_path, clock, clean):
    plog = PartitionLog(tmp_path / "t-0", LogConfig(), clock=clock)
    plog.append(txn_batch(1, 0, 0, 2))               # 0-1 pid 1
    plog.append(txn_batch(2, 0, 0, 1))               # 2 pid 2
    marker(plog, 1, 0, commit=False)                 # 3
    plog.append(plain_batch(1))                      # 4
    if clean:
        plog.close()                                 # snapshot at the LEO captures pid 2's open txn
    else:
        for seg in plog.segments:                    # kill -9: no snapshot, just descriptors gone
            seg.close()
    again = PartitionLog(tmp_path / "t-0", LogConfig(), clock=clock, clean_shutdown=clean)
    assert again.last_stable_offset == 2
    assert again.collect_aborted_txns(0, 5) == [AbortedTxn(1, 0, 3, 2)]
    marker(again, 2, 0, commit=True)
    assert again.last_stable_offset == 6
    again.close()


def test_replay_restores_an_index_entry_lost_in_a_crash(tmp_path, clock):
    plog = PartitionLog(tmp_path / "t-0", LogConfig(), clock=clock)
    plog.append(txn_batch(1, 0, 0, 2))
    marker(plog, 1, 0, commit=False)
    for seg in plog.segments:
        seg.close()
    (tmp_path / "t-0" / "00000000000000000000.txnindex").unlink()  # killed before the index write
    again = PartitionLog(tmp_path / "t-0", LogConfig(), clock=clock)
    assert again.collect_aborted_txns(0, 3) == [AbortedTxn(1, 0, 2, 3)]
    assert again.last_stable_offset == 3
    again.close()


def test_deleted_segments_take_their_txnindex(open_log):
    plog = open_log()
    plog.append(txn_batch(1, 0, 0, 1))
    marker(plog, 1, 0, commit=False)
    plog.roll()
    plog.append(plain_batch(1))
    path = plog.dir / "00000000000000000000.txnindex"
    assert path.exists()
    plog.delete_records_before(2)
    assert not path.exists()
