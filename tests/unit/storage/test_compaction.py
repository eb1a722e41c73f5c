"""Log compaction: latest record per key, tombstones after delete.retention.ms, offsets and producer
fields preserved, the active segment untouched, crash safety of the swap, checkpoint and dirty ratio."""
from __future__ import annotations

import shutil

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from minikafka.protocol import record_batch as rb
from minikafka.storage import PartitionLog
from minikafka.storage.compaction import CLEANED_SUFFIX, CleanerCheckpoint, build, clean_now, install, plan
from minikafka.storage.producer_state import AppendOrigin
from tests.support.storage_helpers import split_batches

DAY = 86_400_000


def keyed_batch(pairs, *, ts=1_000, compression=0, producer_id=-1, epoch=-1, seq=-1) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=False,
                                  producer_id=producer_id, producer_epoch=epoch, base_sequence=seq,
                                  batch_size=1 << 30)
    for i, (k, v) in enumerate(pairs):
        b.append(i, timestamp=ts + i, key=k, value=v, headers=[("h", b"x")])
    return bytes(b.build())


def records(plog: PartitionLog) -> list[tuple[int, bytes | None, bytes | None]]:
    out = []
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        chunk = plog.read(offset, 1 << 20)
        if not chunk:
            break
        for pos, h in split_batches(chunk):
            assert rb.compute_crc(chunk, pos, h.size) == h.crc
            out.extend((r.offset, r.key, r.value) for r in DefaultRecordBatch(chunk[pos:pos + h.size]))
            offset = h.last_offset + 1
    return out


def fill(plog: PartitionLog, rounds: int, keys: int = 5, ts: int = 1_000, compression: int = 0) -> None:
    for r in range(rounds):
        plog.append(keyed_batch([(b"k%d" % k, b"r%d-k%d" % (r, k)) for k in range(keys)], ts=ts + r * 10,
                                compression=compression))


def test_keeps_the_latest_record_per_key_with_original_offsets(open_log, tmp_path, clock):
    plog = open_log(segment_bytes=400, cleanup_policy="compact")
    fill(plog, 12)
    plog.roll()  # everything inactive
    before = {o: (k, v) for o, k, v in records(plog)}
    cp = CleanerCheckpoint(tmp_path)
    saved = clean_now(plog, cp, clock.now_ms)
    assert saved and saved > 0
    after = records(plog)
    assert [(k, v) for _, k, v in after] == [(b"k%d" % k, b"r11-k%d" % k) for k in range(5)]
    assert all(before[o] == (k, v) for o, k, v in after)  # same offsets as originally assigned
    assert cp.get(plog.topic, plog.partition) == plog.log_end_offset
    assert not list(plog.dir.glob("*" + CLEANED_SUFFIX))
    # what is on disk survives a reopen, with valid indexes
    plog.close()
    again = PartitionLog(plog.dir, plog.config, clock=clock, clean_shutdown=True)
    assert records(again) == after
    assert again.read(after[2][0], 1 << 20)  # index lookup inside a compacted segment
    again.close()


def test_active_segment_is_never_touched(open_log, tmp_path, clock):
    plog = open_log(segment_bytes=1 << 20, cleanup_policy="compact")
    fill(plog, 5)
    assert plan(plog, 0, clock.now_ms, force=True) is None  # one segment: the active one
    plog.roll()
    fill(plog, 3)
    active = plog.segments[-1]
    active_bytes = active.read(0, active.size)
    clean_now(plog, CleanerCheckpoint(tmp_path), clock.now_ms, force=True)
    assert plog.segments[-1] is active and active.read(0, active.size) == active_bytes
    assert len([r for r in records(plog) if r[0] < plog.segments[-1].base_offset]) == 5


def test_tombstones_are_dropped_after_delete_retention(open_log, tmp_path, clock):
    now = clock.now_ms
    plog = open_log(segment_bytes=300, cleanup_policy="compact", delete_retention_ms=DAY)
    plog.append(keyed_batch([(b"a", b"1"), (b"b", b"1")], ts=now))
    plog.append(keyed_batch([(b"a", None)], ts=now + 1))  # tombstone for a
    plog.roll()
    cp = CleanerCheckpoint(tmp_path)
    clean_now(plog, cp, now, force=True)
    assert [(k, v) for _, k, v in records(plog)] == [(b"b", b"1"), (b"a", None)]  # kept: too recent
    plog.append(keyed_batch([(b"c", b"1")], ts=now + 2))
    plog.roll()
    clean_now(plog, cp, now + DAY + 10, force=True)
    assert [(k, v) for _, k, v in records(plog)] == [(b"b", b"1"), (b"c", b"1")]


def test_compressed_batches_stay_compressed_and_valid(open_log, tmp_path, clock):
    plog = open_log(segment_bytes=600, cleanup_policy="compact")
    fill(plog, 6, compression=1)  # gzip
    plog.roll()
    clean_now(plog, CleanerCheckpoint(tmp_path), clock.now_ms, force=True)
    data = b"".join(seg.read(0, seg.size) for seg in plog.segments)
    headers = [h for _, h in split_batches(data)]
    assert headers and all(h.compression == 1 for h in headers)
    assert [v for _, _, v in records(plog)] == [b"r5-k%d" % k for k in range(5)]


def test_a_producers_last_batch_survives_empty(open_log, tmp_path, clock):
    plog = open_log(segment_bytes=1 << 20, cleanup_policy="compact")
    plog.append(keyed_batch([(b"a", b"old"), (b"b", b"old")], producer_id=7, epoch=0, seq=0))
    plog.append(keyed_batch([(b"a", b"new"), (b"b", b"new")]))
    plog.roll()
    clean_now(plog, CleanerCheckpoint(tmp_path), clock.now_ms, force=True)
    data = plog.segments[0].read(0, plog.segments[0].size)
    (first, second) = [h for _, h in split_batches(data)]
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (7, 0, 0)
    assert first.record_count == 0 and first.last_offset == 1  # header kept: producer 7's last sequence
    assert [v for _, _, v in records(plog)] == [b"new", b"new"]
    # the producer continues where it was after a reopen (its state is rebuilt from the log)
    plog.close()
    again = PartitionLog(plog.dir, plog.config, clock=clock, clean_shutdown=False)
    again.append(keyed_batch([(b"c", b"1")], producer_id=7, epoch=0, seq=2), origin=AppendOrigin.CLIENT)
    again.close()


def test_dirty_ratio_and_checkpoint(open_log, tmp_path, clock):
    plog = open_log(segment_bytes=400, cleanup_policy="compact", min_cleanable_dirty_ratio=0.5)
    fill(plog, 8)
    plog.roll()
    cp = CleanerCheckpoint(tmp_path)
    assert clean_now(plog, cp, clock.now_ms) is not None
    assert plan(plog, cp.get(plog.topic, plog.partition), clock.now_ms) is None  # all clean now
    fill(plog, 1)
    plog.roll()
    p = plan(plog, cp.get(plog.topic, plog.partition), clock.now_ms)
    assert p is None or p.dirty_ratio >= 0.5
    assert CleanerCheckpoint(tmp_path).get(plog.topic, plog.partition) == cp.get(plog.topic, plog.partition)
    delete_policy = open_log("d-0", segment_bytes=400)
    fill(delete_policy, 8)
    delete_policy.roll()
    assert plan(delete_policy, 0, clock.now_ms, force=True) is None  # cleanup.policy=delete


def test_crash_before_the_swap_keeps_the_old_segments(open_log, tmp_path, clock):
    plog = open_log(segment_bytes=400, cleanup_policy="compact")
    fill(plog, 10)
    plog.roll()
    before = records(plog)
    p = plan(plog, 0, clock.now_ms, force=True)
    cleaned = build(p)
    assert cleaned and all(c.directory.exists() for c in cleaned)
    plog.close()  # crash: nothing installed
    again = PartitionLog(plog.dir, plog.config, clock=clock, clean_shutdown=False)
    assert not list(again.dir.glob("*" + CLEANED_SUFFIX))  # stray output removed on load
    assert records(again) == before
    again.close()


def test_crash_in_the_middle_of_installing_rebuilds_indexes(open_log, tmp_path, clock):
    plog = open_log(segment_bytes=400, cleanup_policy="compact", index_interval_bytes=1)
    fill(plog, 10)
    plog.roll()
    p = plan(plog, 0, clock.now_ms, force=True)
    cleaned = build(p)
    c = cleaned[0]
    # the first installation steps only: old indexes gone, log replaced, new indexes not yet in place
    stem = c.old.log_path.with_suffix("")
    stem.with_suffix(".index").unlink()
    stem.with_suffix(".timeindex").unlink()
    shutil.move(str(c.directory / c.old.log_path.name), str(c.old.log_path))
    plog.close()
    again = PartitionLog(plog.dir, plog.config, clock=clock, clean_shutdown=True)
    got = records(again)
    assert got and len({k for _, k, _ in got}) == 5
    assert all(again.read(o, 1 << 20) for o, _, _ in got)
    again.close()


def test_install_skips_segments_deleted_meanwhile(open_log, tmp_path, clock):
    plog = open_log(segment_bytes=400, cleanup_policy="compact,delete")
    fill(plog, 10)
    plog.roll()
    cp = CleanerCheckpoint(tmp_path)
    p = plan(plog, 0, clock.now_ms, force=True)
    cleaned = build(p)
    plog.delete_records_before(plog.log_end_offset)  # DeleteRecords removed every old segment
    assert install(plog, p, cleaned, cp) == 0
    assert not list(plog.dir.glob("*" + CLEANED_SUFFIX))
