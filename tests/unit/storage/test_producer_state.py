"""Producer state: sequence/epoch rules, last-5 dedupe, snapshots, expiry, and its PartitionLog wiring."""
from __future__ import annotations

import logging
import struct

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder

from minikafka.protocol.record_batch import parse_header
from minikafka.storage import LogConfig, PartitionLog
from minikafka.storage.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
)
from minikafka.storage.producer_state import (
    INT32_MAX,
    AppendOrigin,
    BatchMetadata,
    ProducerStateEntry,
    ProducerStateManager,
    decode_snapshot,
    decrement_sequence,
    encode_snapshot,
    increment_sequence,
    snapshot_name,
)
from tests.support.storage_helpers import build_batch, read_all, record_offsets

NOW = 1_700_000_000_000  # FakeClock's default


def pbatch(pid: int, epoch: int, seq: int, n: int = 1, *, ts: int = NOW, transactional: bool = False,
           tag: bytes = b"v") -> bytes:
    """An idempotent (or transactional) batch of `n` records built by kafka-python."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional, producer_id=pid,
                                  producer_epoch=epoch, base_sequence=seq, batch_size=1 << 20)
    for i in range(n):
        assert b.append(i, timestamp=ts, key=None, value=tag + str(i).encode(), headers=[]) is not None
    return bytes(b.build())


class Partition:
    """A ProducerStateManager driven like PartitionLog drives it: offsets assigned in order."""

    def __init__(self, tmp_path, expiration_ms: int = 86_400_000) -> None:
        self.psm = ProducerStateManager(tmp_path, expiration_ms)
        self.leo = 0

    def append(self, *raw: bytes, origin: AppendOrigin = AppendOrigin.CLIENT) -> tuple[int, int] | BatchMetadata:
        """Validate all batches, then commit; returns (first, last) offsets or the duplicate found."""
        pending: dict = {}
        offset = self.leo
        for data in raw:
            header = parse_header(data)
            dup = self.psm.prepare(header, offset, header.max_timestamp, origin, pending)
            if dup is not None:
                return dup
            offset += header.last_offset_delta + 1
        for info in pending.values():
            self.psm.update(info)
        first, self.leo = self.leo, offset
        self.psm.update_map_end_offset(offset)
        return first, offset - 1


# ---------------------------------------------------------------- sequence arithmetic

def test_sequence_wraps_at_int32_max():
    assert increment_sequence(5, 3) == 8
    assert increment_sequence(INT32_MAX, 1) == 0
    assert increment_sequence(INT32_MAX - 1, 3) == 1
    assert decrement_sequence(1, 3) == INT32_MAX - 1
    assert decrement_sequence(10, 3) == 7
    assert BatchMetadata(last_seq=1, last_offset=12, offset_delta=2, timestamp=0).first_seq == INT32_MAX
    assert BatchMetadata(last_seq=1, last_offset=12, offset_delta=2, timestamp=0).first_offset == 10


# ---------------------------------------------------------------- validation rules

def test_unknown_producer_accepts_any_sequence_then_requires_the_next(tmp_path):
    p = Partition(tmp_path)
    assert p.append(pbatch(7, 0, 42, 3)) == (0, 2)
    assert p.psm.last_entry(7).last_seq == 44
    with pytest.raises(OutOfOrderSequenceError):
        p.append(pbatch(7, 0, 46))
    assert p.append(pbatch(7, 0, 45, 2)) == (3, 4)


def test_each_of_the_last_five_batches_is_a_duplicate_but_not_the_sixth(tmp_path):
    p = Partition(tmp_path)
    offsets = [p.append(pbatch(1, 0, 3 * i, 3)) for i in range(6)]
    assert offsets == [(3 * i, 3 * i + 2) for i in range(6)]
    for i in range(1, 6):
        dup = p.append(pbatch(1, 0, 3 * i, 3))
        assert isinstance(dup, BatchMetadata) and (dup.first_offset, dup.last_offset) == offsets[i]
    assert p.leo == 18  # nothing appended by the retries
    with pytest.raises(OutOfOrderSequenceError):  # Kafka: the 6th-oldest is out of order, not a dup
        p.append(pbatch(1, 0, 0, 3))
    with pytest.raises(OutOfOrderSequenceError):  # same first sequence, different last: not a dup
        p.append(pbatch(1, 0, 15, 2))


def test_epoch_rules(tmp_path):
    p = Partition(tmp_path)
    p.append(pbatch(1, 0, 0, 3))
    with pytest.raises(OutOfOrderSequenceError):  # a new epoch must start at 0
        p.append(pbatch(1, 1, 3))
    assert p.append(pbatch(1, 1, 0)) == (3, 3)  # KIP-360: bump locally, restart at 0
    entry = p.psm.last_entry(1)
    assert entry.producer_epoch == 1 and len(entry.batches) == 1
    with pytest.raises(InvalidProducerEpochError):
        p.append(pbatch(1, 0, 3))
    with pytest.raises(InvalidProducerEpochError):  # even a retry of an old-epoch batch is fenced
        p.append(pbatch(1, 0, 0, 3))
    assert p.append(pbatch(1, 5, 0)) == (4, 4)  # epochs may jump


def test_sequence_wrap_around(tmp_path):
    p = Partition(tmp_path)
    assert p.append(pbatch(3, 0, INT32_MAX - 1, 2)) == (0, 1)
    assert p.append(pbatch(3, 0, 0, 2)) == (2, 3)
    q = Partition(tmp_path)
    assert q.append(pbatch(4, 0, INT32_MAX - 1, 3)) == (0, 2)  # spans the wrap: 2^31-2, 2^31-1, 0
    assert q.psm.last_entry(4).last_seq == 0
    dup = q.append(pbatch(4, 0, INT32_MAX - 1, 3))
    assert isinstance(dup, BatchMetadata) and dup.first_offset == 0
    with pytest.raises(OutOfOrderSequenceError):
        q.append(pbatch(4, 0, 2))
    assert q.append(pbatch(4, 0, 1)) == (3, 3)


def test_validate_then_commit_leaves_state_alone_until_update(tmp_path):
    p = Partition(tmp_path)
    p.append(pbatch(1, 0, 0))
    pending: dict = {}
    data = pbatch(1, 0, 1)
    assert p.psm.prepare(parse_header(data), 1, NOW, AppendOrigin.CLIENT, pending) is None
    assert p.psm.last_entry(1).last_seq == 0  # the append "failed": state unchanged
    assert p.append(data) == (1, 1)


def test_several_batches_of_one_producer_in_one_append(tmp_path):
    p = Partition(tmp_path)
    assert p.append(pbatch(1, 0, 0, 2), pbatch(1, 0, 2, 2), pbatch(2, 0, 9)) == (0, 4)
    assert p.psm.last_entry(1).last_seq == 3 and len(p.psm.last_entry(1).batches) == 2
    with pytest.raises(OutOfOrderSequenceError):
        p.append(pbatch(1, 0, 4), pbatch(1, 0, 6))
    assert p.psm.last_entry(1).last_seq == 3


def test_coordinator_origin_checks_epoch_only(tmp_path):
    p = Partition(tmp_path)
    p.append(pbatch(1, 2, 0))
    assert p.append(pbatch(1, 2, 77), origin=AppendOrigin.COORDINATOR) == (1, 1)
    with pytest.raises(InvalidProducerEpochError):
        p.append(pbatch(1, 1, 0), origin=AppendOrigin.COORDINATOR)


def test_transactional_batch_starts_a_transaction(tmp_path):
    p = Partition(tmp_path)
    p.append(pbatch(9, 0, 0, 2))
    assert p.psm.last_entry(9).current_txn_first_offset == -1
    p.append(pbatch(9, 0, 2, 2, transactional=True))
    p.append(pbatch(9, 0, 4, 1, transactional=True))
    assert p.psm.last_entry(9).current_txn_first_offset == 2
    with pytest.raises(InvalidTxnStateError):
        p.append(pbatch(9, 0, 5))


# ---------------------------------------------------------------- snapshots and expiry

def test_snapshot_round_trip_in_kafka_format():
    entries = [ProducerStateEntry(1, 3, -1, NOW, -1, [BatchMetadata(9, 40, 2, NOW)]),
               ProducerStateEntry(2**40, 0, 7, NOW + 5, 12, [BatchMetadata(1, 50, 2, NOW + 5)]),
               ProducerStateEntry(5, 1, 2, NOW, -1, [])]
    data = encode_snapshot(entries)
    version, _crc, count = struct.unpack_from(">hIi", data)
    assert (version, count, len(data)) == (1, 3, 10 + 3 * 46)
    back = decode_snapshot(data)
    assert [(e.producer_id, e.producer_epoch, e.coordinator_epoch, e.last_timestamp, e.current_txn_first_offset,
             e.batches) for e in back] == [
        (1, 3, -1, NOW, -1, [BatchMetadata(9, 40, 2, NOW)]),
        (2**40, 0, 7, NOW + 5, 12, [BatchMetadata(1, 50, 2, NOW + 5)]),
        (5, 1, 2, NOW, -1, [])]
    assert back[0].first_seq == 7 and back[1].first_seq == INT32_MAX
    for bad in (data[:-1], data[:5], b"\x00\x02" + data[2:], data[:20] + bytes([data[20] ^ 1]) + data[21:]):
        with pytest.raises(CorruptSnapshotError):
            decode_snapshot(bad)


def test_corrupt_snapshot_is_skipped_for_an_older_one(tmp_path, caplog):
    p = Partition(tmp_path)
    p.append(pbatch(1, 0, 0))
    p.psm.take_snapshot()  # at 1
    p.append(pbatch(1, 0, 1))
    p.psm.take_snapshot()  # at 2
    (tmp_path / snapshot_name(2)).write_bytes(b"\x00\x01garbage")
    fresh = ProducerStateManager(tmp_path, 86_400_000)
    fresh.scan_snapshots()
    with caplog.at_level(logging.WARNING):
        assert fresh.load_latest_snapshot(0, 2, NOW) == 1
    assert "ignoring producer state snapshot" in caplog.text
    assert not (tmp_path / snapshot_name(2)).exists()
    assert fresh.last_entry(1).last_seq == 0 and fresh.last_map_offset == 1


def test_expiry(tmp_path):
    p = Partition(tmp_path, expiration_ms=1000)
    p.append(pbatch(1, 0, 0, ts=NOW))
    p.append(pbatch(2, 0, 0, ts=NOW + 500))
    p.append(pbatch(3, 0, 0, ts=NOW, transactional=True))  # an ongoing transaction never expires
    assert p.psm.remove_expired(NOW + 999) == 0
    p.psm.take_snapshot()
    assert p.psm.remove_expired(NOW + 1000) == 1
    assert sorted(e.producer_id for e in p.psm.active_producers()) == [2, 3]
    p.append(pbatch(1, 0, 77))  # state gone: any sequence is accepted again
    fresh = ProducerStateManager(tmp_path, 1000)  # loading filters expired entries too
    fresh.scan_snapshots()
    fresh.load_latest_snapshot(0, 3, NOW + 1500)
    assert sorted(fresh.producers) == [3]


# ---------------------------------------------------------------- PartitionLog integration

def test_log_dedupes_retries_and_reports_original_offsets(open_log):
    plog = open_log()
    plog.append(build_batch(2))
    first = plog.append(pbatch(11, 0, 0, 3))
    assert (first.first_offset, first.last_offset) == (2, 4)
    size = plog.size_bytes
    again = plog.append(pbatch(11, 0, 0, 3))
    assert (again.first_offset, again.last_offset, again.log_append_time_ms) == (2, 4, NOW)
    assert plog.size_bytes == size and plog.log_end_offset == 5
    with pytest.raises(OutOfOrderSequenceError):
        plog.append(pbatch(11, 0, 5))
    assert plog.size_bytes == size
    assert record_offsets(read_all(plog)) == [0, 1, 2, 3, 4]
    assert [(e.producer_id, e.last_seq) for e in plog.active_producers()] == [(11, 2)]


def test_roll_and_close_write_snapshots_and_reopen_uses_them(open_log):
    plog = open_log(segment_bytes=300)
    for i in range(12):
        plog.append(pbatch(1, 0, 2 * i, 2))
    bases = [seg.base_offset for seg in plog.segments]
    assert len(bases) > 2
    snaps = sorted(int(p.name[:20]) for p in plog.dir.glob("*.snapshot"))
    assert snaps == bases[1:]  # one per roll, at the new segment's base offset
    leo = plog.log_end_offset
    plog.close()
    assert (plog.dir / snapshot_name(leo)).exists()
    reopened = open_log(segment_bytes=300, clean=True)
    assert reopened.producer_state_replayed_batches == 0
    assert reopened.append(pbatch(1, 0, 22, 2)).first_offset == 22  # a retry of the last batch
    assert reopened.append(pbatch(1, 0, 24)).first_offset == leo


def test_crash_replays_only_the_batches_after_the_last_roll(open_log):
    plog = open_log(segment_bytes=300)
    for i in range(12):
        plog.append(pbatch(1, 0, 2 * i, 2))
    active = plog.segments[-1]
    after_roll = sum(1 for _ in active.iter_headers())
    plog.close()
    (plog.dir / snapshot_name(plog.log_end_offset)).unlink()  # as if killed before the clean close
    reopened = open_log(segment_bytes=300)
    assert reopened.producer_state_replayed_batches == after_roll < 12
    for i in range(12 - after_roll, 12):  # the whole retained window is back: every retry dedupes
        assert reopened.append(pbatch(1, 0, 2 * i, 2)).first_offset == 2 * i
    assert reopened.log_end_offset == 24


def test_corrupt_snapshot_rebuilds_from_the_log(open_log, caplog):
    plog = open_log(segment_bytes=300)
    for i in range(12):
        plog.append(pbatch(1, 0, 2 * i, 2))
    plog.close()
    for snap in plog.dir.glob("*.snapshot"):
        data = bytearray(snap.read_bytes())
        data[-1] ^= 0xFF
        snap.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING):
        reopened = open_log(segment_bytes=300, clean=True)
    assert "ignoring producer state snapshot" in caplog.text
    assert reopened.producer_state_replayed_batches == 12
    assert reopened.append(pbatch(1, 0, 20, 2)).first_offset == 20
    with pytest.raises(OutOfOrderSequenceError):
        reopened.append(pbatch(1, 0, 30))


def test_snapshots_go_with_their_segments_and_above_the_leo(open_log, clock):
    plog = open_log(segment_bytes=300)
    for i in range(12):
        plog.append(pbatch(1, 0, 2 * i, 2))
    bases = [seg.base_offset for seg in plog.segments]
    plog.delete_records_before(bases[2])
    plog.enforce_retention()
    assert sorted(int(p.name[:20]) for p in plog.dir.glob("*.snapshot")) == bases[2:]
    # Kafka keeps a producer's state when its batches are deleted (until producer.id.expiration.ms)
    assert plog.append(pbatch(1, 0, 22, 2)).first_offset == 22
    plog.close()
    (plog.dir / snapshot_name(10_000)).write_bytes(encode_snapshot([]))  # above the LEO: stale
    reopened = open_log(segment_bytes=300, clean=True)
    assert not (plog.dir / snapshot_name(10_000)).exists()
    assert reopened.producer_state_replayed_batches == 0


def test_expired_producers_are_dropped_by_the_retention_timer(open_log, clock):
    plog = open_log(producer_id_expiration_ms=60_000)
    plog.append(pbatch(1, 0, 5))
    clock.advance(59_999)
    plog.enforce_retention()
    assert [e.producer_id for e in plog.active_producers()] == [1]
    clock.advance(1)
    plog.enforce_retention()
    assert plog.active_producers() == []
    assert plog.append(pbatch(1, 0, 100)).first_offset == 1  # unknown again: any sequence


def test_broker_config_plumbs_producer_id_expiration():
    from minikafka.broker.config.core import BrokerConfig
    assert BrokerConfig({}).log_config.producer_id_expiration_ms == 86_400_000
    cfg = BrokerConfig({"producer.id.expiration.ms": "1234"}).log_config
    assert cfg.producer_id_expiration_ms == 1234
    assert "producer.id.expiration.ms" not in LogConfig().to_props()  # broker-level, not a topic config
    assert isinstance(PartitionLog, type)
