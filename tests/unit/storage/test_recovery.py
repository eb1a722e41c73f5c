"""Recovery on open: clean reopen, torn tails, corrupt indexes, CRC corruption, stray files."""
from __future__ import annotations

import os
import random
import shutil

import pytest

from minikafka.protocol import record_batch as rb
from tests.support.storage_helpers import build_batch, read_all, record_offsets, split_batches, verify_segment_files


def fill(plog, count: int, seed: int = 0) -> None:
    rnd = random.Random(seed)
    for i in range(count):
        plog.append(build_batch(rnd.randint(1, 4), value_size=rnd.randint(10, 120),
                                compression=rnd.choice([0, 1]), ts=1000 + i, tag=str(i)))


def index_state(plog):
    return [(s.base_offset, s.size, s.next_offset, s.offset_index.entries(), s.time_index.entries())
            for s in plog.segments]


@pytest.mark.parametrize("clean", [True, False])
def test_reopen_keeps_state_and_appends_continue(open_log, clean):
    plog = open_log(segment_bytes=2000, index_interval_bytes=150)
    fill(plog, 60)
    leo, before = plog.log_end_offset, read_all(plog)
    plog.close()
    reopened = open_log(clean=clean, segment_bytes=2000, index_interval_bytes=150)
    assert reopened.log_end_offset == leo and len(reopened.segments) > 2
    assert read_all(reopened) == before
    assert reopened.append(build_batch(2)).first_offset == leo
    assert record_offsets(read_all(reopened)) == list(range(leo + 2))
    verify_segment_files(reopened.dir)


def test_abandoned_log_without_close_is_recovered(open_log):
    plog = open_log(index_interval_bytes=100)
    fill(plog, 20)
    leo = plog.log_end_offset  # no close(): like kill -9, only what os.write put in the kernel
    reopened = open_log(index_interval_bytes=100)
    assert reopened.log_end_offset == leo
    verify_segment_files(reopened.dir)


@pytest.mark.parametrize("clean", [False, True])
def test_torn_tail_is_truncated_to_last_whole_batch(open_log, tmp_path, clean):
    plog = open_log("src-0", segment_bytes=3000, index_interval_bytes=120)
    fill(plog, 50, seed=1)
    plog.close()
    last_log = sorted((tmp_path / "src-0").glob("*.log"))[-1]
    batches = split_batches(last_log.read_bytes())
    rnd = random.Random(7)
    for trial in range(12):
        name = f"torn{trial}-0"
        shutil.copytree(tmp_path / "src-0", tmp_path / name)
        log_path = tmp_path / name / last_log.name
        cut = rnd.randrange(1, log_path.stat().st_size)
        os.truncate(log_path, cut)
        whole = [h for pos, h in batches if pos + h.size <= cut]
        expected_leo = whole[-1].last_offset + 1 if whole else int(last_log.stem)
        recovered = open_log(name, clean=clean, segment_bytes=3000, index_interval_bytes=120)
        assert recovered.log_end_offset == expected_leo, (trial, cut)
        assert log_path.stat().st_size == sum(h.size for h in whole)
        verify_segment_files(recovered.dir)
        assert recovered.append(build_batch(3)).first_offset == expected_leo
        assert record_offsets(read_all(recovered)) == list(range(expected_leo + 3))
        recovered.close()


@pytest.mark.parametrize("damage", ["garbage", "torn", "past-end", "missing", "time-garbage"])
def test_corrupt_or_missing_index_is_rebuilt(open_log, damage):
    plog = open_log(segment_bytes=3000, index_interval_bytes=100)
    fill(plog, 40, seed=2)
    expected = index_state(plog)
    plog.close()
    seg_index = sorted(plog.dir.glob("*.index"))[0]  # a non-active segment
    if damage == "garbage":
        seg_index.write_bytes(bytes(range(64)) * 2)
    elif damage == "torn":
        seg_index.write_bytes(seg_index.read_bytes()[:-3])
    elif damage == "past-end":
        seg_index.write_bytes(seg_index.read_bytes() + b"\x00\x00\x7f\x00\x7f\x00\x00\x00")
    elif damage == "missing":
        seg_index.unlink()
        seg_index.with_suffix(".timeindex").unlink()
    else:
        seg_index.with_suffix(".timeindex").write_bytes(b"\xff" * 24)
    reopened = open_log(clean=True, segment_bytes=3000, index_interval_bytes=100)
    assert index_state(reopened) == expected
    verify_segment_files(reopened.dir)


@pytest.mark.parametrize("clean", [False, True])
def test_crc_corruption_of_last_batch_truncates_it(open_log, clean):
    plog = open_log(index_interval_bytes=100)
    fill(plog, 10, seed=3)
    last_size = split_batches(plog.read(plog.log_end_offset - 1, 1 << 20))[-1][1]
    leo = plog.log_end_offset
    plog.close()
    log_path = sorted(plog.dir.glob("*.log"))[-1]
    data = bytearray(log_path.read_bytes())
    data[-5] ^= 0x5A
    log_path.write_bytes(bytes(data))
    reopened = open_log(clean=clean, index_interval_bytes=100)
    assert reopened.log_end_offset == leo - (last_size.last_offset_delta + 1)
    assert log_path.stat().st_size == len(data) - last_size.size
    verify_segment_files(reopened.dir)


def test_crc_corruption_mid_segment_truncates_from_there(open_log):
    plog = open_log(index_interval_bytes=100)
    fill(plog, 10, seed=4)
    plog.close()
    log_path = sorted(plog.dir.glob("*.log"))[-1]
    data = bytearray(log_path.read_bytes())
    batches = split_batches(bytes(data))
    pos, header = batches[4]
    data[pos + rb.HEADER_SIZE + 2] ^= 0x01
    log_path.write_bytes(bytes(data))
    reopened = open_log(index_interval_bytes=100)
    assert reopened.log_end_offset == header.base_offset
    assert reopened.append(build_batch(1)).first_offset == header.base_offset


def test_stray_and_orphan_files_are_deleted(open_log, tmp_path):
    directory = tmp_path / "t-0"
    directory.mkdir()
    for name in ("00000000000000000000.log.deleted", "00000000000000000000.index.swap",
                 "00000000000000000005.log.cleaned", "00000000000000000009.index",
                 "00000000000000000009.timeindex"):
        (directory / name).write_bytes(b"x")
    plog = open_log()
    assert sorted(p.name for p in directory.iterdir()) == [
        "00000000000000000000.index", "00000000000000000000.log", "00000000000000000000.timeindex"]
    assert plog.log_end_offset == 0 and len(plog.segments) == 1


def test_zero_filled_tail_is_truncated(open_log):
    plog = open_log()
    fill(plog, 5, seed=5)
    leo, size = plog.log_end_offset, plog.size_bytes
    plog.close()
    log_path = sorted(plog.dir.glob("*.log"))[-1]
    with open(log_path, "ab") as f:
        f.write(b"\x00" * 4096)
    reopened = open_log()
    assert (reopened.log_end_offset, reopened.size_bytes) == (leo, size)
