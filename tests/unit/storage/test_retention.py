"""Retention (time and size), DeleteRecords and the log start offset."""
from __future__ import annotations

import pytest

from minikafka.storage import OffsetOutOfRangeError
from tests.support.storage_helpers import build_batch, read_all, record_offsets


def fill_segments(plog, clock, batches: int, ts_step: int = 1000) -> None:
    for i in range(batches):
        plog.append(build_batch(2, ts=clock.now_ms - 10 * 3_600_000 + i * ts_step, value_size=100))


def test_retention_ms_deletes_whole_old_segments(open_log, clock):
    plog = open_log(segment_bytes=800, retention_ms=3_600_000)
    day = 86_400_000
    for i in range(12):  # timestamps: 6 batches two days old, then 6 recent
        ts = clock.now_ms - 2 * day + i if i < 6 else clock.now_ms - 1000 + i
        plog.append(build_batch(2, ts=ts, value_size=100))
    old = [s for s in plog.segments if clock.now_ms - s.max_timestamp > 3_600_000]
    assert old and len(old) < len(plog.segments)
    deleted = plog.enforce_retention(clock.now_ms)
    assert deleted == len(old)
    assert plog.log_start_offset == plog.segments[0].base_offset == old[-1].next_offset
    assert not any(s.log_path.exists() for s in old)
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(0, 100)
    assert record_offsets(read_all(plog)) == list(range(plog.log_start_offset, plog.log_end_offset))
    assert plog.enforce_retention(clock.now_ms) == 0


def test_retention_rolls_and_deletes_expired_active_segment(open_log, clock):
    plog = open_log(retention_ms=1000)
    plog.append(build_batch(3, ts=clock.now_ms))
    assert plog.enforce_retention(clock.now_ms) == 0
    clock.advance(5000)
    assert plog.enforce_retention(clock.now_ms) == 1
    assert plog.log_start_offset == plog.log_end_offset == 3
    assert [s.base_offset for s in plog.segments] == [3] and plog.size_bytes == 0
    assert plog.read(3, 100) == b""
    assert plog.append(build_batch(1, ts=clock.now_ms)).first_offset == 3
    # an empty active segment is never deleted
    clock.advance(5000)
    assert plog.enforce_retention(clock.now_ms) == 1
    assert plog.enforce_retention(clock.now_ms) == 0


def test_retention_bytes(open_log, clock):
    plog = open_log(segment_bytes=800, retention_bytes=1500, retention_ms=-1)
    for i in range(15):
        plog.append(build_batch(2, ts=clock.now_ms, value_size=100))
    total = plog.size_bytes
    sizes = [s.size for s in plog.segments]
    expected, excess = 0, total - 1500
    for size in sizes:
        if excess - size < 0:
            break
        excess -= size
        expected += 1
    assert expected > 0
    assert plog.enforce_retention(clock.now_ms) == expected
    assert plog.size_bytes >= 1500 and plog.size_bytes == sum(sizes[expected:])
    assert plog.log_start_offset == plog.segments[0].base_offset


def test_compact_only_topics_ignore_time_and_size_retention(open_log, clock):
    plog = open_log(segment_bytes=800, retention_ms=1, retention_bytes=0, cleanup_policy="compact")
    for _ in range(10):
        plog.append(build_batch(2, ts=0, value_size=100))
    assert plog.enforce_retention(clock.now_ms) == 0


def test_delete_records_before(open_log, clock):
    plog = open_log(segment_bytes=800, retention_ms=-1)
    for _ in range(12):
        plog.append(build_batch(2, ts=clock.now_ms, value_size=100))
    segs = plog.segments
    target = segs[2].base_offset + 1  # inside the third segment
    with pytest.raises(OffsetOutOfRangeError):
        plog.delete_records_before(plog.high_watermark + 1)
    assert plog.delete_records_before(target) == target
    assert plog.log_start_offset == target
    assert [s.base_offset for s in plog.segments] == [s.base_offset for s in segs[2:]]
    with pytest.raises(OffsetOutOfRangeError):
        plog.read(target - 1, 100)
    # the whole batch containing the log start offset is returned (as Kafka does)
    assert record_offsets(plog.read(target, 1 << 20))[0] == target - 1
    # never backwards
    assert plog.delete_records_before(1) == target
    plog.close()
    reopened = open_log(clean=True, segment_bytes=800, retention_ms=-1)
    assert reopened.log_start_offset == target
    assert reopened.delete_records_before(-1) == reopened.log_end_offset  # -1 = high watermark
    assert len(reopened.segments) == 1  # the active segment stays
