"""PartitionLog.read_ranges: the byte ranges a Fetch sends straight from the segment files.

The reference is `PartitionLog.read` (which preads the bytes): for every offset, byte limit, max
offset and min_one, the ranges must cover exactly the bytes `read` returns, found from batch headers
and the offset index only.
"""
from __future__ import annotations

import os
import random
import types

import pytest

from minikafka.storage import OffsetOutOfRangeError
from minikafka.storage import batch_io
from tests.support.storage_helpers import build_batch, split_batches


def materialise(ranges) -> bytes:
    """pread each range through its own descriptor, then close it (what the connection does)."""
    out = bytearray()
    for r in ranges:
        try:
            out += os.pread(r.fd, r.size, r.position)
        finally:
            os.close(r.fd)
    return bytes(out)


def check_same(plog, offset, max_bytes, max_offset=None, min_one=True) -> bytes:
    expected = plog.read(offset, max_bytes, max_offset=max_offset, min_one=min_one)
    ranges = plog.read_ranges(offset, max_bytes, max_offset=max_offset, min_one=min_one)
    got = materialise(ranges)
    assert got == expected, (offset, max_bytes, max_offset, min_one)
    if ranges:
        (r,) = ranges
        batches = split_batches(got)
        assert r.first_offset == batches[0][1].base_offset
        assert r.last_offset == batches[-1][1].last_offset
        assert r.size == len(got)
    return got


def fill(plog, rng: random.Random, n: int) -> None:
    for _ in range(n):
        records = rng.choice([1, 1, 2, 5, 20])
        plog.append(build_batch(records, value_size=rng.choice([8, 100, 700, 3000])))


@pytest.mark.parametrize("index_interval", [0, 300, 4096])
@pytest.mark.parametrize("segment_bytes", [100_000, 1 << 20])
def test_ranges_match_read_everywhere(open_log, index_interval, segment_bytes):
    rng = random.Random(index_interval * 7 + segment_bytes)
    plog = open_log(index_interval_bytes=index_interval, segment_bytes=segment_bytes)
    fill(plog, rng, 120)
    leo = plog.log_end_offset
    if segment_bytes < 200_000:
        assert len(plog.segments) > 5
    for _ in range(400):
        offset = rng.randrange(0, leo + 1)
        max_bytes = rng.choice([1, 50, 500, 3_000, 10_000, 50_000, 1 << 20])
        max_offset = rng.choice([None, None, rng.randrange(0, leo + 2)])
        check_same(plog, offset, max_bytes, max_offset, rng.random() < 0.8)


def test_kip74_first_batch_whole_and_min_one(open_log):
    plog = open_log(index_interval_bytes=0)
    big = build_batch(3, value_size=5_000)
    plog.append(big)
    plog.append(build_batch(1))
    got = check_same(plog, 0, 10)  # over the limit but whole: the response is still empty
    assert len(got) == len(big)
    assert plog.read_ranges(0, 10, min_one=False) == []  # not the first partition of the response
    check_same(plog, 1, 10, min_one=False)


def test_max_offset_and_high_watermark(open_log):
    plog = open_log(index_interval_bytes=0)
    for _ in range(10):
        plog.append(build_batch(4, value_size=100))
    got = check_same(plog, 0, 1 << 20, max_offset=13)
    assert [h.base_offset for _, h in split_batches(got)] == [0, 4, 8, 12]
    assert plog.read_ranges(12, 1 << 20, max_offset=12) == []
    assert plog.read_ranges(40, 1 << 20) == []  # at the high watermark
    (r,) = plog.read_ranges(0, 1 << 20)
    os.close(r.fd)
    assert r.last_offset == 39
    with pytest.raises(OffsetOutOfRangeError):
        plog.read_ranges(41, 100)
    with pytest.raises(OffsetOutOfRangeError):
        plog.read_ranges(-1, 100)


def test_ranges_stay_in_one_segment_and_move_to_the_next(open_log):
    plog = open_log(segment_bytes=2_000, index_interval_bytes=0)
    for _ in range(12):
        plog.append(build_batch(2, value_size=300))
    segs = plog.segments
    assert len(segs) >= 3
    first_end = segs[1].base_offset
    got = check_same(plog, 0, 1 << 20)
    assert split_batches(got)[-1][1].last_offset == first_end - 1  # stops at the segment end
    got = check_same(plog, first_end, 1 << 20)
    assert split_batches(got)[0][1].base_offset == first_end


def test_walk_reads_headers_not_records(open_log, monkeypatch):
    """A 4 MB range is found by reading a few KB of headers (offset-index skip), not the records."""
    plog = open_log()  # default index interval 4096
    for _ in range(1000):
        plog.append(build_batch(4, value_size=1_000))
    read_bytes = []

    def counting_pread(fd, n, pos):
        data = os.pread(fd, n, pos)
        read_bytes.append(len(data))
        return data
    monkeypatch.setattr(batch_io, "os", types.SimpleNamespace(pread=counting_pread))
    ranges = plog.read_ranges(100, 4 << 20)
    monkeypatch.undo()
    (r,) = ranges
    os.close(r.fd)
    assert r.size > 3 << 20
    assert sum(read_bytes) < 64 << 10, sum(read_bytes)
    assert materialise(plog.read_ranges(100, 4 << 20)) == plog.read(100, 4 << 20)


def test_range_survives_segment_deletion(open_log, clock):
    """The dup'd descriptor keeps a deleted segment readable until the holder closes it."""
    plog = open_log(segment_bytes=2_000, index_interval_bytes=0, file_delete_delay_ms=0, retention_bytes=1)
    for _ in range(12):
        plog.append(build_batch(2, value_size=300))
    expected = plog.read(0, 1 << 20)
    ranges = plog.read_ranges(0, 1 << 20)
    assert plog.enforce_retention() > 0
    plog.enforce_retention()  # purges the graveyard: the segment's own descriptor is closed
    assert plog.log_start_offset > 0
    assert materialise(ranges) == expected
    with pytest.raises(OffsetOutOfRangeError):
        plog.read_ranges(0, 1 << 20)


def test_appends_during_reads_from_a_thread(open_log):
    """Ranges taken while another thread appends are always whole batches below the snapshot."""
    import threading
    plog = open_log(index_interval_bytes=500)
    plog.append(build_batch(2, value_size=200))
    stop = threading.Event()
    errors = []

    def reader():
        try:
            while not stop.is_set():
                ranges = plog.read_ranges(0, 1 << 20)
                data = materialise(ranges)
                batches = split_batches(data)
                assert batches[0][1].base_offset == 0
                assert ranges[0].last_offset == batches[-1][1].last_offset
        except Exception as exc:  # reported below
            errors.append(exc)
    t = threading.Thread(target=reader)
    t.start()
    try:
        for _ in range(300):
            plog.append(build_batch(3, value_size=150))
    finally:
        stop.set()
        t.join()
    assert not errors, errors[0]
