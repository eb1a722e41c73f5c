"""Log compaction (Kafka's LogCleaner) for partitions whose cleanup.policy contains `compact`.

A pass over one partition:
1. `plan` (owner thread): snapshot the inactive segments, find the dirty range [first dirty offset,
   first uncleanable offset) from `cleaner-offset-checkpoint` and min.compaction.lag.ms, and decide by
   min.cleanable.dirty.ratio (or max.compaction.lag.ms) whether cleaning is due.
2. `build` (worker thread, reads only below the snapshot's sizes): map every key of the dirty range
   to its last offset, then rewrite each snapshot segment keeping, per key, only the latest record;
   tombstones are dropped once their segment is older than delete.retention.ms. Batches keep their
   offsets (base offset and lastOffsetDelta), producer id/epoch/sequence, transactional flag and
   codec; a batch left without records survives as an empty batch when it is its producer's last
   one (so producer state can still be rebuilt); control batches are kept as they are. A rewritten
   segment, with its indexes, goes to `<base>.cleaned/` in the partition directory; unchanged
   segments are not rewritten.
3. `install` (owner thread): `PartitionLog.replace_segment` swaps each cleaned segment in (old
   indexes removed, log file replaced by one rename, new indexes moved in; a crash at any point
   leaves either the old or the new segment, with indexes rebuilt on load, and stray `.cleaned`
   directories are deleted on load), then the checkpoint moves to the end of the cleaned range.

The active segment is never touched. Segments are cleaned one for one (no merging of small ones).
Not yet: removal of aborted transactional records and of control batches whose transaction can be
dropped (Kafka does both; here they are kept).
"""
from __future__ import annotations

import logging
import os
import shutil
import struct
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from minikafka.protocol.record_batch import (
    CONTROL_MASK,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchHeader,
    compute_crc,
)
from minikafka.storage.partition_metadata import atomic_write
from minikafka.storage.segment import INDEX_SUFFIX, LOG_SUFFIX, TIME_INDEX_SUFFIX, BatchInfo, LogSegment, segment_name

log = logging.getLogger(__name__)

CHECKPOINT_FILE = "cleaner-offset-checkpoint"
CLEANED_SUFFIX = ".cleaned"

_Q = struct.Struct(">q")
_I = struct.Struct(">i")
_H = struct.Struct(">h")
_CRC = struct.Struct(">I")


class CleanerCancelled(Exception):
    """The broker is stopping: the pass is abandoned (its .cleaned output is removed)."""


# ------------------------------------------------------------------------------------ checkpoints

class CleanerCheckpoint:
    """`cleaner-offset-checkpoint` of one log dir, in Kafka's format: version 0, a count, then
    `topic partition offset` lines. Offsets below the checkpoint have been cleaned at least once."""

    def __init__(self, log_dir: Path) -> None:
        self.path = Path(log_dir) / CHECKPOINT_FILE
        self.offsets: dict[tuple[str, int], int] = {}
        try:
            lines = self.path.read_text("utf-8").splitlines()
            if lines and lines[0].strip() == "0":
                for line in lines[2:2 + int(lines[1])]:
                    topic, partition, offset = line.rsplit(" ", 2)
                    self.offsets[(topic, int(partition))] = int(offset)
        except FileNotFoundError:
            pass
        except (ValueError, IndexError, UnicodeDecodeError):
            log.warning("ignoring unreadable %s", self.path)
            self.offsets = {}

    def get(self, topic: str, partition: int) -> int:
        return self.offsets.get((topic, partition), 0)

    def set(self, topic: str, partition: int, offset: int) -> None:
        self.offsets[(topic, partition)] = offset
        self.save()

    def forget(self, keep: Callable[[tuple[str, int]], bool]) -> None:
        gone = [tp for tp in self.offsets if not keep(tp)]
        for tp in gone:
            del self.offsets[tp]
        if gone:
            self.save()

    def save(self) -> None:
        body = "".join(f"{t} {p} {o}\n" for (t, p), o in sorted(self.offsets.items()))
        atomic_write(self.path, f"0\n{len(self.offsets)}\n{body}".encode())


# ------------------------------------------------------------------------------------ planning

@dataclass
class CleanPlan:
    segments: list[LogSegment]  # snapshot: log start .. first uncleanable (all inactive)
    sizes: list[int]  # each segment's size at snapshot time (read only below it)
    first_dirty: int
    end_offset: int  # first uncleanable offset: the checkpoint after the pass
    dirty_ratio: float
    now_ms: int
    delete_retention_ms: int
    all_segments: list[tuple[LogSegment, int]]  # every segment (the active one too) and its size


def cleanable_range(plog, first_dirty: int, now_ms: int) -> tuple[list[LogSegment], int, int, int]:
    """(inactive segments up to the first uncleanable one, first uncleanable offset, clean bytes,
    dirty bytes). A segment is uncleanable if it is active or younger than min.compaction.lag.ms."""
    cfg = plog.config
    segments = plog.segments
    cleanable: list[LogSegment] = []
    end = segments[-1].base_offset
    for seg, nxt in zip(segments, segments[1:]):
        if cfg.min_compaction_lag_ms > 0 and seg.max_timestamp > now_ms - cfg.min_compaction_lag_ms:
            end = seg.base_offset
            break
        cleanable.append(seg)
        end = nxt.base_offset
    clean = sum(s.size for s in cleanable if s.next_offset <= first_dirty)
    dirty = sum(s.size for s in cleanable if s.next_offset > first_dirty)
    return cleanable, end, clean, dirty


def plan(plog, checkpoint: int, now_ms: int | None = None, *, force: bool = False) -> CleanPlan | None:
    """A pass for `plog` if its policy is compact and cleaning is due (owner thread)."""
    cfg = plog.config
    if not cfg.compact_enabled:
        return None
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    first_dirty = checkpoint
    if first_dirty < plog.log_start_offset or first_dirty > plog.log_end_offset:
        first_dirty = plog.log_start_offset  # the log was truncated or recreated: all dirty again
    segments, end, clean, dirty = cleanable_range(plog, first_dirty, now_ms)
    if dirty == 0 or end <= first_dirty:
        return None
    ratio = dirty / (clean + dirty)
    overdue = False
    if cfg.max_compaction_lag_ms < 2**63 - 1:
        first = next((s for s in segments if s.next_offset > first_dirty), None)
        if first is not None and first.rolling_timestamp is not None and first.rolling_timestamp >= 0:
            overdue = now_ms - first.rolling_timestamp > cfg.max_compaction_lag_ms
    if not (force or overdue or ratio >= cfg.min_cleanable_dirty_ratio):
        return None
    return CleanPlan(segments, [s.size for s in segments], first_dirty, end, ratio, now_ms,
                     cfg.delete_retention_ms, [(s, s.size) for s in plog.segments])


# ------------------------------------------------------------------------------------ building

@dataclass
class CleanedSegment:
    old: LogSegment
    directory: Path  # `<base>.cleaned/` holding `<base>.log/.index/.timeindex`
    old_size: int
    new_size: int


def _batches(seg: LogSegment, limit: int) -> Iterable[tuple[BatchHeader, bytes]]:
    for pos, header in seg.iter_headers(0, limit):
        yield header, seg.read(pos, header.size)


def build_offset_map(plan: CleanPlan, stop: Callable[[], bool] = lambda: False) -> dict[bytes, int]:
    """Key -> offset of its last record in the dirty range (Kafka's SkimpyOffsetMap, with whole keys)."""
    from kafka.record.default_records import DefaultRecordBatch

    offsets: dict[bytes, int] = {}
    for seg, size in zip(plan.segments, plan.sizes):
        if seg.next_offset <= plan.first_dirty:
            continue
        for header, data in _batches(seg, size):
            if stop():
                raise CleanerCancelled()
            if header.is_control or header.last_offset < plan.first_dirty:
                continue
            for rec in DefaultRecordBatch(data):
                if rec.key is not None and rec.offset >= plan.first_dirty:
                    offsets[rec.key] = rec.offset
    return offsets


def build(plan: CleanPlan, stop: Callable[[], bool] = lambda: False) -> list[CleanedSegment]:
    """Write the cleaned copies of the plan's segments that change (worker thread)."""
    offsets = build_offset_map(plan, stop)
    last_batch: dict[int, int] = {}  # producer id -> base offset of its last batch in the whole log
    for seg, size in plan.all_segments:
        for _pos, header in seg.iter_headers(0, size):
            if header.producer_id >= 0:
                last_batch[header.producer_id] = header.base_offset
    horizon = plan.now_ms - plan.delete_retention_ms
    out: list[CleanedSegment] = []
    try:
        for seg, size in zip(plan.segments, plan.sizes):
            drop_tombstones = seg.largest_timestamp < horizon
            batches: list[bytes] = []
            changed = False
            for header, data in _batches(seg, size):
                if stop():
                    raise CleanerCancelled()
                kept = _clean_batch(header, data, offsets, drop_tombstones, last_batch)
                if kept is not data:
                    changed = True
                if kept is not None:
                    batches.append(kept)
            if changed:
                out.append(_write_segment(seg, batches, size))
    except BaseException:
        for c in out:
            shutil.rmtree(c.directory, ignore_errors=True)
        raise
    return out


def _clean_batch(header: BatchHeader, data: bytes, offsets: dict[bytes, int], drop_tombstones: bool,
                 producer_last_batch: dict[int, int]) -> bytes | None:
    """`data` itself if every record stays, a rewritten batch, or None to drop the batch."""
    from kafka.record.default_records import DefaultRecordBatch

    if header.is_control:
        return data
    records = list(DefaultRecordBatch(data))
    kept = [r for r in records if _retain(r, offsets, drop_tombstones)]
    if len(kept) == len(records):
        return data
    if not kept:
        if header.producer_id >= 0 and producer_last_batch.get(header.producer_id) == header.base_offset:
            return rebuild_batch(header, [])  # the producer's last batch: keep its header for producer state
        return None
    return rebuild_batch(header, kept)


def _retain(rec, offsets: dict[bytes, int], drop_tombstones: bool) -> bool:
    if rec.key is None:
        return True  # Kafka refuses keyless records on compacted topics; older ones are kept
    latest = offsets.get(rec.key)
    if latest is not None and rec.offset < latest:
        return False  # superseded by a later record with the same key
    if rec.value is None and drop_tombstones:
        return False
    return True


def rebuild_batch(header: BatchHeader, records: list) -> bytes:
    """A v2 batch with `records` (kafka-python DefaultRecord) and the original batch's offsets,
    producer fields, flags and codec; lastOffsetDelta is kept even if the last record is gone."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=header.compression, is_transactional=header.is_transactional,
        producer_id=header.producer_id, producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence, batch_size=2**31 - 1)
    for r in records:
        builder.append(r.offset - header.base_offset, timestamp=r.timestamp, key=r.key, value=r.value,
                       headers=list(r.headers))
    buf = bytearray(builder.build())
    attributes = _H.unpack_from(buf, 21)[0]  # the codec the builder used (none if compression didn't pay)
    attributes |= header.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK)
    _Q.pack_into(buf, 0, header.base_offset)
    _I.pack_into(buf, 12, header.partition_leader_epoch)
    _H.pack_into(buf, 21, attributes)
    _I.pack_into(buf, 23, header.last_offset_delta)
    if not records:
        _Q.pack_into(buf, 27, header.base_timestamp)
        _Q.pack_into(buf, 35, header.max_timestamp)
    elif header.log_append_time:
        _Q.pack_into(buf, 35, header.max_timestamp)
    _CRC.pack_into(buf, 17, compute_crc(buf, 0, len(buf)))
    return bytes(buf)


def _write_segment(old: LogSegment, batches: list[bytes], old_size: int) -> CleanedSegment:
    from minikafka.protocol.record_batch import parse_header

    directory = old.directory / (segment_name(old.base_offset) + CLEANED_SUFFIX)
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir()
    seg = LogSegment(directory, old.base_offset, index_interval_bytes=old.index_interval_bytes,
                     now_ms=int(time.time() * 1000))
    try:
        for data in batches:
            header = parse_header(data)
            seg.append(data, [BatchInfo(0, len(data), header.last_offset, header.max_timestamp)])
        seg.on_become_inactive()
        seg.flush()
        new_size = seg.size
    finally:
        seg.close()
    return CleanedSegment(old, directory, old_size, new_size)


# ------------------------------------------------------------------------------------ installing

def install_files(old: LogSegment, directory: Path) -> None:
    """Move a cleaned segment's files over `old`'s (owner thread, `old` no longer published)."""
    name = segment_name(old.base_offset)
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        (old.directory / (name + suffix)).unlink(missing_ok=True)
    os.replace(directory / (name + LOG_SUFFIX), old.log_path)
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
        os.replace(directory / (name + suffix), old.directory / (name + suffix))
    shutil.rmtree(directory, ignore_errors=True)


def install(plog, plan: CleanPlan, cleaned: list[CleanedSegment], checkpoint: CleanerCheckpoint) -> int:
    """Swap the cleaned segments into `plog` (owner thread); returns bytes saved. Segments that were
    deleted or replaced meanwhile (retention, DeleteRecords) are skipped."""
    saved = 0
    for c in cleaned:
        if plog.replace_segment(c.old, lambda c=c: install_files(c.old, c.directory)):
            saved += c.old_size - c.new_size
        else:
            shutil.rmtree(c.directory, ignore_errors=True)
    checkpoint.set(plog.topic, plog.partition, max(plan.end_offset, checkpoint.get(plog.topic, plog.partition)))
    return saved


def clean_now(plog, checkpoint: CleanerCheckpoint, now_ms: int | None = None, force: bool = False) -> int | None:
    """One synchronous pass (tests, tools): plan, build and install; None if nothing was due."""
    p = plan(plog, checkpoint.get(plog.topic, plog.partition), now_ms, force=force)
    if p is None:
        return None
    return install(plog, p, build(p), checkpoint)
