"""PartitionLog: append/read, segments, indexes, timestamps, limits."""
from __future__ import annotations

import struct
import threading

import pytest
from kafka.record.default_records import DefaultRecordBatch

from tests.support.storage_helpers import build_batch, read_all, record_offsets, split_batches, verify_segment_files
from minikafka.protocol import record_batch as rb
from minikafka.storage.index import UNWRITTEN_MAX
from minikafka.storage import (
    CorruptRecordError,
    InvalidRecordError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnsupportedMagicError,
)


def test_round_trip_patches_base_offsets_and_keeps_crc(open_log):
    plog = open_log()
    a, b = build_batch(3), build_batch(5, compression=1)
    assert plog.append(a)[:2] == (0, 2)
    info = plog.append(b + build_batch(2))  # two batches in one produce payload
    assert (info.first_offset, info.last_offset, info.log_append_time_ms, info.log_start_offset) == (3, 9, -1, 0)
    assert plog.log_end_offset == plog.high_watermark == 10
    data = plog.read(0, 1 << 20)
    assert [h.base_offset for _, h in split_batches(data)] == [0, 3, 8]
    assert record_offsets(data) == list(range(10))
    # bytes other than the base offset are exactly what the producer sent
    assert data[8:len(a)] == a[8:]


def test_read_positions_and_limits(open_log):
    plog = open_log(index_interval_bytes=0)
    batches = [build_batch(4, value_size=100) for _ in range(10)]
    for batch in batches:
        plog.append(batch)
    size = len(batches[0])
    # offset inside a batch -> whole batch containing it
    data = plog.read(6, size)
    assert [h.base_offset for _, h in split_batches(data)] == [4]
    # max_bytes that does not fit the second batch: only whole batches
    data = plog.read(0, 2 * size + size // 2)
    assert [h.base_offset for _, h in split_batches(data)] == [0, 4]
    # first batch larger than max_bytes: returned whole (KIP-74)
    assert plog.read(8, 1) == plog.read(8, size)
    assert len(plog.read(8, 1)) == size
    # max_offset stops before batches starting at/after it
    data = plog.read(0, 1 << 20, max_offset=13)
    assert [h.base_offset for _, h in split_batches(data)] == [0, 4, 8, 12]
    assert plog.read(12, 1 << 20, max_offset=12) == b""
    # LEO and out of range
    assert plog.read(40, 100) == b""
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(41, 100)
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(-1, 100)


def test_fetch_across_segment_boundaries(open_log):
    plog = open_log(segment_bytes=1000, index_interval_bytes=100)
    for i in range(30):
        plog.append(build_batch(1 + i % 3, value_size=50, tag=str(i)))
    segments = plog.segments
    assert len(segments) > 3
    assert all(s.size <= 1000 for s in segments)
    assert [s.base_offset for s in segments][0] == 0
    for prev, nxt in zip(segments, segments[1:]):
        assert prev.next_offset == nxt.base_offset
    # a read never crosses a segment boundary, and a fetch loop sees every offset once
    for seg in segments[:-1]:
        data = plog.read(seg.base_offset, 1 << 20)
        assert len(data) == seg.size
    assert record_offsets(read_all(plog)) == list(range(plog.log_end_offset))
    assert record_offsets(read_all(plog, max_bytes=1)) == list(range(plog.log_end_offset))
    names = sorted(p.name for p in plog.dir.glob("*.log"))
    assert names[0] == "00000000000000000000.log"
    assert names == [f"{s.base_offset:020d}.log" for s in segments]
    verify_segment_files(plog.dir)


def test_index_entries_follow_kafka_semantics(open_log):
    plog = open_log(index_interval_bytes=500)
    for i in range(40):
        plog.append(build_batch(2, ts=10_000 + 7 * i, value_size=80))
    seg = plog.segments[0]
    entries = seg.offset_index.entries()
    assert seg.offset_index.path.read_bytes() == b""  # held back until UNWRITTEN_MAX entries or a flush
    seg.write_index_entries()
    index_bytes = seg.offset_index.path.read_bytes()
    assert len(index_bytes) == 8 * len(entries) and len(entries) > 5
    assert len(seg.time_index.path.read_bytes()) == 12 * len(seg.time_index)
    verify_segment_files(plog.dir)
    # entries are at least index.interval.bytes apart
    positions = [p for _, p in entries]
    assert all(b - a > 500 for a, b in zip(positions, positions[1:]))
    # lookups through the index land on the batch containing the offset
    for offset in range(plog.log_end_offset):
        pos = seg.find_position(offset)
        header = rb.parse_header(seg.read(pos, rb.HEADER_SIZE))
        assert header.base_offset <= offset <= header.last_offset
    assert seg.find_position(plog.log_end_offset) is None
    assert seg.offset_index.lookup(entries[3][0]) == entries[3][1]
    assert seg.offset_index.lookup(entries[3][0] - 1) == entries[2][1]
    assert seg.offset_index.lookup(0) == 0


@pytest.mark.parametrize("clean", [False, True])
def test_index_entries_held_back_at_a_crash_are_walked_past_on_open(open_log, clean):
    """kill -9 shape: the index files hold only the entries written every UNWRITTEN_MAX; the log reopened
    without a close finds every offset, timestamp and the end, and goes on indexing. Unclean, the active
    segment is rebuilt; "clean" (the worst case: a short index taken as it is) walks past the last entry."""
    plog = open_log(index_interval_bytes=100)
    for i in range(UNWRITTEN_MAX + 30):
        plog.append(build_batch(2, ts=10_000 + i, value_size=80))
    seg = plog.segments[0]
    on_disk = len(seg.offset_index.path.read_bytes()) // 8
    assert 0 < on_disk < len(seg.offset_index) and seg.offset_index.unwritten > 0
    reopened = open_log(clean=clean, index_interval_bytes=100)  # the first one is never closed
    assert reopened.log_end_offset == plog.log_end_offset
    rseg = reopened.segments[0]
    assert len(rseg.offset_index) == (on_disk if clean else len(seg.offset_index))
    assert rseg.max_timestamp == seg.max_timestamp
    for offset in range(reopened.log_end_offset):
        header = rb.parse_header(rseg.read(rseg.find_position(offset), rb.HEADER_SIZE))
        assert header.base_offset <= offset <= header.last_offset
    reopened.append(build_batch(2, ts=20_000, value_size=80))
    reopened.close()
    verify_segment_files(reopened.dir)


def test_segment_ms_roll_uses_first_batch_timestamp(open_log):
    plog = open_log(segment_ms=1000)
    plog.append(build_batch(1, ts=5_000))
    plog.append(build_batch(1, ts=5_900))
    assert len(plog.segments) == 1
    plog.append(build_batch(1, ts=6_001))
    assert [s.base_offset for s in plog.segments] == [0, 2]


def test_record_too_large_and_payload_too_large(open_log):
    plog = open_log(max_message_bytes=300, segment_bytes=1000)
    plog.append(build_batch(1, value_size=100))
    with pytest.raises(RecordTooLargeError):
        plog.append(build_batch(1, value_size=400))
    with pytest.raises(RecordBatchTooLargeError):
        plog.append(b"".join(build_batch(1, value_size=200) for _ in range(5)))
    assert plog.log_end_offset == 1


def test_invalid_input_is_rejected(open_log):
    plog = open_log()
    with pytest.raises(UnsupportedMagicError):
        plog.append(build_batch(2, magic=1))
    bad = bytearray(build_batch(2))
    bad[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        plog.append(bytes(bad))
    with pytest.raises(CorruptRecordError):
        plog.append(build_batch(2)[:-3])
    with pytest.raises(InvalidRecordError):
        plog.append(b"")
    assert plog.log_end_offset == 0 and plog.size_bytes == 0


def test_log_append_time_patches_timestamp_and_crc(open_log, clock):
    plog = open_log(message_timestamp_type="LogAppendTime")
    info = plog.append(build_batch(3, ts=42, compression=1) + build_batch(2, ts=43))
    assert info.log_append_time_ms == clock.now_ms
    data = plog.read(0, 1 << 20)
    for pos, header in split_batches(data):
        assert header.log_append_time and header.max_timestamp == clock.now_ms
        assert rb.compute_crc(data, pos, header.size) == header.crc
    rb.validate_batches(data)
    batch = DefaultRecordBatch(data[: split_batches(data)[0][1].size])
    assert {r.timestamp for r in batch} == {clock.now_ms}
    assert plog.max_timestamp() == (0, clock.now_ms)


@pytest.mark.parametrize("codec", [1, 2, 3, 4], ids=["gzip", "snappy", "lz4", "zstd"])
def test_timestamps_with_compressed_batches(open_log, codec):
    plog = open_log(index_interval_bytes=0, segment_bytes=600)
    # non-monotonic timestamps inside and across compressed batches
    plog.append(build_batch(timestamps=[100, 300, 200], compression=codec))          # 0..2
    plog.append(build_batch(timestamps=[250, 260], compression=codec))               # 3..4
    plog.append(build_batch(timestamps=[500, 900, 700, 650], compression=codec))     # 5..8
    plog.append(build_batch(timestamps=[400, 900], compression=codec))               # 9..10
    plog.append(build_batch(timestamps=[1000], compression=codec, value_size=400))   # 11
    assert plog.offset_for_timestamp(0) == (0, 100)
    assert plog.offset_for_timestamp(150) == (1, 300)
    assert plog.offset_for_timestamp(300) == (1, 300)
    assert plog.offset_for_timestamp(301) == (5, 500)
    assert plog.offset_for_timestamp(660) == (6, 900)
    assert plog.offset_for_timestamp(901) == (11, 1000)
    assert plog.offset_for_timestamp(1001) is None
    assert plog.max_timestamp() == (11, 1000)
    plog.delete_records_before(7)
    assert plog.offset_for_timestamp(660) == (7, 700)
    assert plog.offset_for_timestamp(0) == (7, 700)


def test_max_timestamp_exact_record_offset(open_log):
    plog = open_log()
    assert plog.max_timestamp() == (-1, -1)
    plog.append(build_batch(timestamps=[10, 50, 20], compression=1))
    plog.append(build_batch(timestamps=[30, 40]))
    assert plog.max_timestamp() == (1, 50)
    plog.append(build_batch(timestamps=[60, 60, 5]))
    assert plog.max_timestamp() == (5, 60)


def test_append_listeners_and_flush_messages(open_log, monkeypatch):
    plog = open_log(flush_messages=5)
    calls = []
    plog.append_listeners.append(lambda: calls.append(plog.log_end_offset))
    synced = []
    real_fsync = __import__("os").fsync
    monkeypatch.setattr("os.fsync", lambda fd: (synced.append(fd), real_fsync(fd)))
    plog.append(build_batch(3))
    assert calls == [3] and synced == []
    plog.append(build_batch(3))
    assert calls == [3, 6] and synced  # 6 unflushed messages >= flush.messages


def test_reads_from_a_thread_while_appending(open_log):
    plog = open_log(segment_bytes=4000, index_interval_bytes=200)
    errors: list[BaseException] = []
    done = threading.Event()

    def reader() -> None:
        try:
            while not done.is_set():
                offset = 0
                while offset < plog.log_end_offset:
                    batches = split_batches(plog.read(offset, 700))
                    assert batches[0][1].base_offset <= offset <= batches[0][1].last_offset
                    offset = batches[-1][1].last_offset + 1
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    thread = threading.Thread(target=reader)
    thread.start()
    for i in range(300):
        plog.append(build_batch(1 + i % 4, value_size=60))
    done.set()
    thread.join()
    assert not errors
    assert record_offsets(read_all(plog)) == list(range(plog.log_end_offset))


def test_leader_epoch_patch(open_log):
    plog = open_log()
    plog.append(build_batch(2), leader_epoch=7)
    header = rb.parse_header(plog.read(0, 100))
    assert header.partition_leader_epoch == 7
    assert struct.unpack_from(">i", plog.read(0, 100), 12)[0] == 7


def test_a_full_offset_or_time_index_rolls_the_segment(open_log):
    """Kafka's shouldRoll: segment.index.bytes bounds each index (8-byte offset, 12-byte time entries)."""
    plog = open_log(index_interval_bytes=0, segment_index_bytes=24)  # 3 offset entries, 2 time entries
    for i in range(9):
        plog.append(build_batch(1, value_size=10, ts=1_000 + i))
    segments = plog.segments
    assert len(segments) > 1
    assert all(len(s.time_index) <= 2 and len(s.offset_index) <= 3 for s in segments)
    assert record_offsets(read_all(plog)) == list(range(9))
    roomy = open_log("t-1", index_interval_bytes=0)
    for i in range(9):
        roomy.append(build_batch(1, value_size=10, ts=1_000 + i))
    assert len(roomy.segments) == 1


def test_validation_follows_a_config_change_and_the_clock(open_log, clock):
    """The partition's validation settings are built once per config, not per batch: a new config
    (cleanup.policy, message.timestamp.*) applies to the next append, and the window moves with the clock."""
    import dataclasses

    from minikafka.protocol.record_validator import InvalidTimestampError

    plog = open_log(message_timestamp_before_max_ms=60_000)
    now = clock.now_ms
    assert plog.append(build_batch(1, ts=now - 1_000))[:2] == (0, 0)
    first = plog.validation_settings()
    assert (first.topic_partition, first.compacted, first.now_ms) == ("t-0", False, now)
    clock.advance(5_000)  # the same config: the same partition part, a new now
    assert plog.validation_settings() == first._replace(now_ms=now + 5_000)
    assert plog.validation_settings(now_ms=7) == first._replace(now_ms=7)
    with pytest.raises(InvalidTimestampError):  # 65 s before now: outside the 60 s window
        plog.append(build_batch(1, ts=now - 60_000))
    plog.update_config(dataclasses.replace(plog.config, message_timestamp_before_max_ms=3_600_000,
                                           cleanup_policy="compact"))
    assert plog.append(build_batch(1, ts=now - 60_000))[:2] == (1, 1)
    assert plog.validation_settings().compacted is True
