"""PartitionLog: the ordered segments of one `<topic>-<partition>` directory.

Threading invariant: one owner thread (the event loop) calls every mutating method (append,
begin_append, retention, delete_records_before, update_config, flush, close). `begin_append` hands
only the file write to the log dir's writer thread (storage/append_writer.py): offsets and producer
state advance at once in the owner thread, the bytes are published (segment size, indexes, LEO) by
the owner thread in offset order once written; everything that needs the whole log (append, roll,
retention, flush, close) first waits for those writes (`drain_writes`). `read`, `read_ranges`,
`offset_for_timestamp` and `max_timestamp` may run concurrently in worker threads: they snapshot the
log end offset, then the published (segments, base offsets) tuple, then each segment's committed
size, and only `pread` below that size. The owner publishes in the opposite order (bytes written ->
segment size -> LEO; log start offset -> segment list), files only grow while open, and deleted
segments keep their descriptors open for `file.delete.delay.ms` so in-flight reads still succeed
(`read_ranges` hands out dups of them, which keep the bytes readable until their holder closes them).

The log start offset is persisted per partition in `<dir>/log-start-offset-checkpoint` (Kafka's
checkpoint format with one entry) when DeleteRecords moves it inside a segment; on load it is
max(checkpoint, first segment base offset).
"""
from __future__ import annotations

import asyncio
import logging
import os
import random
import shutil
import struct
import time
from bisect import bisect_right
from collections import deque
from concurrent.futures import Future
from pathlib import Path
from typing import Callable, NamedTuple

from minikafka.protocol.record_batch import (
    CONTROL_MASK,
    CURRENT_MAGIC,
    HEADER_SIZE,
    BatchHeader,
    CorruptRecordError,
    TIMESTAMP_TYPE_MASK,
    compute_crc,
    iter_headers,
    patch_base_offset,
    peek_size,
    validate_batches,
)
from minikafka.protocol.record_validator import settings_for, validate_client_batch
from minikafka.storage import append_writer
from minikafka.storage.batch_io import MAX_RELATIVE_OFFSET
from minikafka.storage.index import OffsetIndex, TimeIndex
from minikafka.storage.leader_epoch_cache import LeaderEpochCache
from minikafka.storage.errors import (
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordBatchTooLargeError,
    RecordTooLargeError,
    UnexpectedAppendOffsetError,
)
from minikafka.storage.log_config import LogConfig
from minikafka.storage.partition_metadata import atomic_write, fsync_dir, read_partition_metadata
from minikafka.storage.producer_state import (
    AppendOrigin,
    CompletedTxn,
    ProducerAppendInfo,
    ProducerStateEntry,
    ProducerStateManager,
)
from minikafka.storage.segment import SEGMENT_SUFFIXES, BatchInfo, LogRange, LogSegment, segment_name
from minikafka.storage.txn_index import AbortedTxn
from minikafka.storage.txn_markers import parse_marker

log = logging.getLogger(__name__)

LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
STRAY_SUFFIXES = (".cleaned", ".swap", ".deleted", ".tmp")
HIGH_WATERMARK = -1  # DeleteRecords sentinel: delete up to the high watermark
# begin_append writes appends up to this size inline when nothing is pending: the hop to the writer
# thread and back (~50 us) costs more than copying them into the page cache
INLINE_WRITE_BYTES = 64 * 1024

_EPOCH = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")
_TIMESTAMP = struct.Struct(">q")
_CRC = struct.Struct(">I")


class AppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless message.timestamp.type=LogAppendTime
    log_start_offset: int


class _Prepared(NamedTuple):
    """A validated append with its offsets assigned, not yet written."""
    buf: bytearray | memoryview
    batches: list[BatchInfo]
    first_offset: int
    next_offset: int  # last offset + 1
    max_ts: int
    now_ms: int
    log_append_time_ms: int
    producers: dict[int, ProducerAppendInfo] | None
    completed_txns: list[CompletedTxn] | None
    epochs: list[tuple[int, int]] | None  # (leader epoch, start offset) newer than the epoch cache's latest


class _PendingAppend(NamedTuple):
    """An append being written by the writer thread at `start` of `segment`, published in order."""
    prepared: _Prepared
    segment: LogSegment
    start: int
    published: "asyncio.Future[AppendInfo]"
    write: Future


def parse_partition_dir(name: str) -> tuple[str, int]:
    """`<topic>-<partition>` -> (topic, partition); ValueError if the name does not fit."""
    topic, sep, part = name.rpartition("-")
    if not sep or not topic or not part.isdigit():
        raise ValueError(f"not a partition directory name: {name!r}")
    return topic, int(part)


class PartitionLog:
    def __init__(self, directory: Path, config: LogConfig, *, clock: Callable[[], float] = time.time,
                 clean_shutdown: bool = False, high_watermark: int | None = None) -> None:
        """Open (recovering unless `clean_shutdown`) the log in `directory`. `high_watermark` is the
        one checkpointed in the log dir's replication-offset-checkpoint (LogManager): given, the log
        starts replicated with it (clamped to [log start, log end])."""
        self.dir = Path(directory)
        self.topic, self.partition = parse_partition_dir(self.dir.name)
        self._log_fields = {"topic": self.topic, "partition": self.partition}  # fields of JSON log lines
        self._config = config
        self._clock = clock
        self.append_listeners: list[Callable[[], None]] = []
        self._graveyard: list[tuple[int, LogSegment]] = []
        self._unflushed: list[LogSegment] = []
        self._unflushed_messages = 0
        self._last_flush_ms = self._now_ms()
        self._view: tuple[tuple[LogSegment, ...], tuple[int, ...]] = ((), ())
        self._log_start_offset = 0
        self._leo = 0  # published log end offset (readers); `_next_offset` is the next one to assign
        # appends whose bytes a writer thread is writing (begin_append), oldest first
        self._pending: deque[_PendingAppend] = deque()
        self._pending_bytes = 0  # their bytes, all in the active segment (a roll drains them first)
        self._write_failed = False  # set by the writer thread; the pending writes after it are skipped
        self._rewinding = False
        self._truncating = False  # truncate_to_async: a worker owns the log; writers are refused
        loaded = LeaderEpochCache.load(self.dir)
        self._epochs = loaded if loaded is not None else LeaderEpochCache(self.dir)
        self._rebuild_epochs = loaded is None  # no checkpoint: rebuilt from every batch header below
        self._load(clean_shutdown)
        self._next_offset = self._leo
        self._load_epoch_cache()
        # None: the high watermark is the log end offset (a single broker); else the replica manager's
        self._hw: int | None = None if high_watermark is None else self._clamp_hw(high_watermark)
        self.topic_id: bytes | None = read_partition_metadata(self.dir)
        self._producers = ProducerStateManager(self.dir, config.producer_id_expiration_ms)
        self.producer_state_replayed_batches = 0  # batches read to rebuild producer state on open
        self._load_producer_state()

    # ---------------------------------------------------------------- properties

    @property
    def config(self) -> LogConfig:
        return self._config

    def update_config(self, config: LogConfig) -> None:
        self._config = config
        self._producers.producer_id_expiration_ms = config.producer_id_expiration_ms
        self._active.index_interval_bytes = config.index_interval_bytes

    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    def validation_settings(self):
        """What record-level validation of a client batch needs from this partition, as of now."""
        return settings_for(self._config, self.dir.name, self._now_ms())

    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def high_watermark(self) -> int:
        """The log end offset on a single broker (everything appended counts as replicated); once
        `replicated`, the offset the replica manager moved it to (Kafka's high watermark)."""
        hw = self._hw
        return self._leo if hw is None else hw

    @property
    def replicated(self) -> bool:
        """Whether the high watermark is tracked apart from the log end offset (set by the replica
        manager; a log opened with a checkpointed high watermark starts replicated)."""
        return self._hw is not None

    @replicated.setter
    def replicated(self, value: bool) -> None:
        if not value:
            self._hw = None
        elif self._hw is None:
            self._hw = self._log_start_offset  # Kafka: a log without a checkpoint starts at its start

    def update_high_watermark(self, offset: int) -> bool:
        """Owner thread: move the high watermark to `offset` clamped to [log start, log end offset];
        it never moves back (only truncation lowers it). Makes the log `replicated`. True if it
        advanced; then the append listeners are told (fetches waiting for it)."""
        if self._truncating:
            return False
        new = self._clamp_hw(offset)
        old = self._hw
        if old is not None and new <= old:
            return False
        self._hw = new
        if old is not None:
            for listener in self.append_listeners:
                listener()
        return True

    def _clamp_hw(self, offset: int) -> int:
        return min(max(offset, self._log_start_offset), self._leo)

    @property
    def leader_epoch_cache(self) -> LeaderEpochCache:
        """Leader epoch -> start offset of this log (storage/leader_epoch_cache.py); the replica manager
        assigns a new leader's epoch with `assign_epoch_start_offset`."""
        return self._epochs

    @property
    def latest_epoch(self) -> int:
        """The newest leader epoch in the epoch cache, -1 if none."""
        return self._epochs.latest_epoch

    def assign_epoch_start_offset(self, epoch: int, start_offset: int | None = None) -> bool:
        """Owner thread: `epoch` starts at `start_offset` (default: the next offset to assign), as a new
        leader does (Kafka maybeAssignEpochStartOffset). Ignored unless newer than the latest epoch."""
        return self._epochs.assign(epoch, self._next_offset if start_offset is None else start_offset)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(epoch, end offset) of the largest epoch <= `epoch` from the epoch cache (Kafka
        endOffsetForEpoch, the answer of OffsetsForLeaderEpoch); (-1, -1) if undefined."""
        return self._epochs.end_offset_for(epoch, self._leo)

    @property
    def last_stable_offset(self) -> int:
        """LSO: first offset of the earliest open transaction, else the high watermark."""
        first = self._producers.first_unstable_offset
        hw = self.high_watermark
        return hw if first is None or first > hw else first

    @property
    def segments(self) -> list[LogSegment]:
        return list(self._view[0])

    @property
    def size_bytes(self) -> int:
        return sum(seg.size for seg in self._view[0])

    @property
    def _active(self) -> LogSegment:
        return self._view[0][-1]

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _publish(self, segments: list[LogSegment]) -> None:
        self._view = (tuple(segments), tuple(seg.base_offset for seg in segments))

    def _new_segment(self, base_offset: int, now_ms: int) -> LogSegment:
        cfg = self._config
        jitter = random.randrange(min(cfg.segment_jitter_ms, cfg.segment_ms)) if cfg.segment_jitter_ms else 0
        return LogSegment(self.dir, base_offset, index_interval_bytes=cfg.index_interval_bytes,
                          now_ms=now_ms, roll_jitter_ms=jitter)

    # ---------------------------------------------------------------- loading / recovery

    def _load(self, clean_shutdown: bool) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        names = os.listdir(self.dir)  # one listing for segments, orphan indexes and strays
        bases: list[int] = []
        for name in names:
            if name.endswith(STRAY_SUFFIXES):
                path = self.dir / name
                log.info("deleting stray file %s", path)
                shutil.rmtree(path) if path.is_dir() else path.unlink()
            elif name.endswith(".log") and len(name) == 24 and name[:20].isdigit():
                bases.append(int(name[:20]))
        bases.sort()
        known = {segment_name(b) for b in bases}
        for name in names:
            for suffix in SEGMENT_SUFFIXES[1:]:
                if name.endswith(suffix) and not name.startswith(".") and name[:-len(suffix)] not in known:
                    log.info("deleting orphan index %s", self.dir / name)
                    (self.dir / name).unlink()
        now = self._now_ms()
        segments: list[LogSegment] = []
        for i, base in enumerate(bases):
            seg = self._new_segment(base, now)
            last = i == len(bases) - 1
            problem = "no clean shutdown" if last and not clean_shutdown else seg.load(verify_tail=last)
            if segments and base < segments[-1].next_offset:
                raise KafkaStorageError(f"{seg.log_path} overlaps the previous segment")
            segments.append(seg)
            if problem:
                runs: list[tuple[int, int]] = []  # (epoch, base offset) where the batches' epoch changes
                truncated = seg.recover(lambda h: (not runs or runs[-1][0] != h.partition_leader_epoch)
                                        and runs.append((h.partition_leader_epoch, h.base_offset)))
                if (last or truncated) and not self._rebuild_epochs:
                    self._reassign_epochs(seg.base_offset, runs)
                if problem != "no clean shutdown" or truncated:
                    log.warning("recovered %s (%s): truncated %d bytes", seg.log_path, problem, truncated,
                                extra=self._log_fields)
                if truncated and not last:
                    for later in bases[i + 1:]:
                        log.warning("deleting %s after a truncated segment", segment_name(later))
                        doomed = self._new_segment(later, now)
                        doomed.delete()
                    break
        checkpoint = self._read_log_start_offset()
        if not segments:
            segments.append(self._new_segment(checkpoint, now))
        self._publish(segments)
        self._leo = segments[-1].next_offset
        self._log_start_offset = min(max(checkpoint, segments[0].base_offset), self._leo)

    def _reassign_epochs(self, base_offset: int, runs: list[tuple[int, int]]) -> None:
        """The recovered last segment (from `base_offset`) re-derives the epoch entries from its
        batches: an entry a crash kept from the disk comes back, entries past its end go."""
        cache = self._epochs
        cache.truncate_from_end(base_offset)
        for epoch, start in runs:
            if epoch > cache.latest_epoch:
                cache.assign(epoch, start)

    def _load_epoch_cache(self) -> None:
        """Bring the leader epoch cache in line with the loaded log: without a checkpoint file, rebuild
        it from the batch headers (once: the file is written even if no batch has an epoch); then drop
        entries past the log end and before the log start (Kafka LogLoader)."""
        cache = self._epochs
        if self._rebuild_epochs:
            self._rebuild_epochs = False
            if self._leo > self._log_start_offset:
                t0 = time.monotonic()
                start = self._log_start_offset
                for seg in self._view[0]:
                    if seg.next_offset <= start:
                        continue
                    for _pos, header in seg.iter_headers():
                        if header.last_offset >= start and header.partition_leader_epoch > cache.latest_epoch:
                            cache.assign(header.partition_leader_epoch, max(header.base_offset, start))
                if not cache.epoch_entries():
                    cache.write()
                log.info("rebuilt the leader epoch cache of %s from the log in %.0f ms: %s", self.dir.name,
                         (time.monotonic() - t0) * 1000, cache.epoch_entries(), extra=self._log_fields)
        cache.truncate_from_end(self._leo)
        cache.truncate_from_start(self._log_start_offset)

    def _read_log_start_offset(self) -> int:
        path = self.dir / LOG_START_OFFSET_FILE
        try:
            lines = path.read_text("ascii").split("\n")
            if lines[0].strip() == "0" and int(lines[1]) == 1:
                return max(int(lines[2].split()[-1]), 0)
        except FileNotFoundError:
            return 0
        except (ValueError, IndexError, UnicodeDecodeError):
            pass
        log.warning("ignoring unreadable %s", path)
        return 0

    def _write_log_start_offset(self) -> None:
        text = f"0\n1\n{self.topic} {self.partition} {self._log_start_offset}\n"
        atomic_write(self.dir / LOG_START_OFFSET_FILE, text.encode())

    def _load_producer_state(self) -> None:
        """Newest valid snapshot at or below the LEO, then the batch headers after it (Kafka
        loadProducerState); without a usable snapshot, the headers from the log start."""
        t0 = time.monotonic()
        ps = self._producers
        ps.scan_snapshots()
        snapshot = ps.load_latest_snapshot(self._log_start_offset, self._leo, self._now_ms())
        start = ps.last_map_offset
        replayed = 0
        self._active.txn_index.truncate_to(self._leo)  # entries of markers lost to a torn tail
        for seg in self._view[0]:
            if seg.next_offset <= start:
                continue
            found = seg.find_batch(start) if start > seg.base_offset else None
            for pos, header in seg.iter_headers(found[0] if found else 0):
                if header.last_offset >= start:
                    marker = parse_marker(seg.read_batch(pos, header)) if header.is_control else None
                    completed = ps.replay(header, marker)
                    if completed is not None:
                        self._complete_txn(seg, completed, replay=True)
                    replayed += 1
        ps.update_map_end_offset(self._leo)
        self.producer_state_replayed_batches = replayed
        if snapshot is not None or replayed:
            log.info("producer state of %s: %s, replayed %d batches from offset %d in %.0f ms (%d producer ids)",
                     self.dir.name, f"snapshot at offset {snapshot}" if snapshot is not None else "no snapshot",
                     replayed, start, (time.monotonic() - t0) * 1000, len(ps.producers), extra=self._log_fields)

    # ---------------------------------------------------------------- append

    def append(self, records: bytes | bytearray | memoryview, *, leader_epoch: int | None = None,
               origin: AppendOrigin = AppendOrigin.CLIENT, validated: bool = False,
               transaction_version: int = 0) -> AppendInfo:
        """Validate, assign offsets (per batch, patching the copy), roll if needed, write, index, all
        in the calling (owner) thread; appends still being written by `begin_append` are waited for
        first, so once this returns the bytes are in the file and visible.

        Client batches go through record-level validation (protocol/record_validator.py) unless the
        caller already ran it (`validated=True`, e.g. the Produce handler in a worker thread).

        Raises CorruptRecordError / InvalidRecordError / UnsupportedMagicError from validation,
        RecordTooLargeError if a batch exceeds max.message.bytes, RecordBatchTooLargeError if the
        whole payload exceeds segment.bytes, KafkaStorageError on I/O failure. `transaction_version`
        is that of the transaction the batches belong to: 2 makes a marker (WriteTxnMarkers v2,
        KIP-1228) need a producer epoch newer than the data's, and a transactional batch start at
        sequence 0 where its producer has no batches yet.
        """
        self.drain_writes()
        prepared = self._prepare(records, leader_epoch, origin, validated, transaction_version)
        if isinstance(prepared, AppendInfo):
            return prepared
        segment = self._maybe_roll(len(prepared.buf), prepared.max_ts, prepared.next_offset - 1, prepared.now_ms)
        if prepared.epochs:
            self._assign_epochs(prepared.epochs)
        segment.append(prepared.buf, prepared.batches)
        self._reserve(prepared, segment)
        return self._published(prepared, segment)

    def begin_append(self, records: bytes | bytearray | memoryview, *, leader_epoch: int | None = None,
                     origin: AppendOrigin = AppendOrigin.CLIENT, validated: bool = False,
                     transaction_version: int = 0) -> "AppendInfo | asyncio.Future[AppendInfo]":
        """`append` with the file write on the log dir's writer thread (storage/append_writer.py);
        appends of at most INLINE_WRITE_BYTES with nothing pending are written at once (-> AppendInfo).

        Validation, offsets and producer state happen now, in the owner thread (the next batch of a
        pipelining idempotent producer is checked against this one); the returned future resolves on
        the owner thread's event loop once the bytes are written and published, in offset order. A
        duplicate of a batch still being written resolves when that one is published. Errors of
        validation raise here; a failed write fails this append and every later one still pending,
        and rewinds the partition to what was published (its producer state reloaded).
        """
        loop = asyncio.get_running_loop()
        if self._rewinding:
            raise KafkaStorageError(f"{self.dir.name}: an earlier write failed")
        prepared = self._prepare(records, leader_epoch, origin, validated, transaction_version)
        if isinstance(prepared, AppendInfo):  # a retry: answered once the original is published
            if not self._pending:
                return prepared
            done: asyncio.Future[AppendInfo] = loop.create_future()
            self._pending[-1].published.add_done_callback(
                lambda f: done.cancelled() or (done.set_exception(f.exception()) if f.exception() is not None
                                               else done.set_result(prepared)))
            return done
        if prepared.completed_txns:  # markers come from coordinators through `append`
            raise KafkaStorageError("transaction markers are appended synchronously")
        return self._start_write(prepared, loop, prepared.first_offset)

    def _start_write(self, prepared: _Prepared, loop: asyncio.AbstractEventLoop, next_offset: int,
                     replace_conflicts: bool = False) -> "AppendInfo | asyncio.Future[AppendInfo]":
        """begin_append's second half: roll if needed, assign new epochs, then write inline or hand the
        write to the writer thread. `next_offset` is the next offset `prepared` was checked against."""
        segment = self._maybe_roll(len(prepared.buf), prepared.max_ts, prepared.next_offset - 1, prepared.now_ms)
        if next_offset != self._next_offset:  # the roll found a failed write and rewound
            raise KafkaStorageError(f"{self.dir.name}: an earlier write failed")
        if prepared.epochs:
            self._assign_epochs(prepared.epochs, replace_conflicts)
        if not self._pending and len(prepared.buf) <= INLINE_WRITE_BYTES:  # a thread hop costs more
            segment.append(prepared.buf, prepared.batches)
            self._reserve(prepared, segment)
            return self._published(prepared, segment)
        start = segment.size + self._pending_bytes
        self._reserve(prepared, segment)
        self._pending_bytes += len(prepared.buf)
        pending = _PendingAppend(prepared, segment, start, loop.create_future(),
                                 append_writer.submit(self.dir.parent, self._write, segment, prepared.buf, start))

        def written(_f: object) -> None:
            try:
                loop.call_soon_threadsafe(self._publish_written)
            except RuntimeError:  # the loop is closed: close() drains and publishes instead
                pass
        pending.write.add_done_callback(written)
        self._pending.append(pending)
        return pending.published

    # ---------------------------------------------------------------- follower appends

    def append_as_follower(self, records: bytes | bytearray | memoryview) -> AppendInfo | None:
        """Append batches fetched from the partition leader, with the offsets and epochs it assigned
        (Kafka appendAsFollower): each batch is checked for length, magic and CRC (CorruptRecordError),
        the first must start at or after the log end offset and each after the previous one
        (UnexpectedAppendOffsetError; gaps are allowed, compaction makes them); no size or
        client-level checks. Producer state follows with origin REPLICATION (markers included), the
        epoch cache from the batches' partitionLeaderEpoch (a conflicting older entry is replaced,
        as Kafka). A trailing partial batch is ignored. Returns None if there was no whole batch.

        Threading: like `append`, in the owner thread (or whichever single thread the replica
        manager runs this log's follower work in). A payload larger than segment.bytes is split
        at batch boundaries so that each part can fit one segment."""
        self.drain_writes()
        info: AppendInfo | None = None
        for part in self._follower_parts(records):
            prepared = self._prepare_follower(part)
            segment = self._maybe_roll(len(prepared.buf), prepared.max_ts, prepared.next_offset - 1, prepared.now_ms)
            if prepared.epochs:
                self._assign_epochs(prepared.epochs, replace_conflicts=True)
            segment.append(prepared.buf, prepared.batches)
            self._reserve(prepared, segment)
            done = self._published(prepared, segment)
            info = done if info is None else info._replace(last_offset=done.last_offset)
        return info

    def begin_append_as_follower(self, records: bytes | bytearray | memoryview
                                 ) -> "AppendInfo | asyncio.Future[AppendInfo] | None":
        """`append_as_follower` with the file write on the log dir's writer thread, as `begin_append`
        (on the owner thread's running event loop). Payloads holding transaction markers or larger than
        segment.bytes are appended synchronously (-> AppendInfo)."""
        loop = asyncio.get_running_loop()
        if self._rewinding:
            raise KafkaStorageError(f"{self.dir.name}: an earlier write failed")
        parts = self._follower_parts(records)
        if len(parts) != 1:
            return self.append_as_follower(records)
        expected = self._next_offset
        prepared = self._prepare_follower(parts[0])
        if prepared.completed_txns:
            self.drain_writes()
            if self._next_offset != expected:
                raise KafkaStorageError(f"{self.dir.name}: an earlier write failed")
            return self.append_as_follower(parts[0])
        return self._start_write(prepared, loop, expected, replace_conflicts=True)

    def _follower_parts(self, records: bytes | bytearray | memoryview) -> list[memoryview]:
        """The whole batches of `records` (a trailing partial one dropped) in parts of at most
        segment.bytes each (a single larger batch is a part of its own)."""
        view = memoryview(records)
        limit = self._config.segment_bytes
        parts: list[memoryview] = []
        start = pos = 0
        end = len(view)
        while pos < end:
            peek = peek_size(view, pos)
            if peek is None or peek[1] < HEADER_SIZE or pos + peek[1] > end:
                break
            size = peek[1]
            if pos > start and pos + size - start > limit:
                parts.append(view[start:pos])
                start = pos
            pos += size
        if pos > start:
            parts.append(view[start:pos])
        return parts

    def _prepare_follower(self, view: memoryview) -> _Prepared:
        """Check a part of a follower append (whole batches) against the log and collect its producer
        state and new epochs; touches no state."""
        if self._truncating:
            raise KafkaStorageError(f"{self.dir.name} is being truncated")
        expected = self._next_offset
        producers: dict[int, ProducerAppendInfo] = {}
        completed_txns: list[CompletedTxn] | None = None
        batches: list[BatchInfo] = []
        epochs: list[tuple[int, int]] | None = None
        latest_epoch = self._epochs.latest_epoch
        max_ts = -1
        first_offset = -1
        for pos, header in iter_headers(view):
            if header.magic != CURRENT_MAGIC:
                raise CorruptRecordError(f"record batch magic {header.magic} at offset {header.base_offset}")
            if compute_crc(view, pos, header.size) != header.crc:
                raise CorruptRecordError(f"record batch CRC mismatch at offset {header.base_offset} "
                                         f"in the append to {self.dir.name}")
            if header.last_offset_delta < 0 or header.record_count < 0:
                raise CorruptRecordError(f"negative lastOffsetDelta or record count at offset {header.base_offset}")
            if header.base_offset < expected:
                what = "First offset" if not batches else "Offsets out of order:"
                raise UnexpectedAppendOffsetError(
                    f"Unexpected offset in append to {self.dir.name}. {what} {header.base_offset} is less than "
                    f"the next offset {expected}.", header.base_offset, header.last_offset)
            if first_offset < 0:
                first_offset = header.base_offset
            epoch = header.partition_leader_epoch
            if epoch >= 0 and epoch != latest_epoch:
                epochs = [*(epochs or ()), (epoch, header.base_offset)]
                latest_epoch = epoch
            ts = header.max_timestamp
            if header.producer_id >= 0:
                if header.is_control:
                    marker = parse_marker(view, pos)
                    completed = None if marker is None else self._producers.prepare_marker(
                        header, header.base_offset, marker[0], marker[1], ts, AppendOrigin.REPLICATION, producers)
                    if completed is not None:
                        completed_txns = [*(completed_txns or ()), completed]
                else:
                    self._producers.prepare(header, header.base_offset, ts, AppendOrigin.REPLICATION, producers)
            batches.append(BatchInfo(pos, header.size, header.last_offset, ts))
            max_ts = max(max_ts, ts)
            expected = header.last_offset + 1
        if not batches:
            raise CorruptRecordError(f"no whole record batch in the append to {self.dir.name}")
        now_ms = self._now_ms()
        return _Prepared(view, batches, first_offset, expected, max_ts, now_ms, -1, producers or None,
                         completed_txns, epochs)

    # ---------------------------------------------------------------- truncation (followers)

    def truncate_to(self, offset: int) -> bool:
        """Remove every batch at or past `offset`, so the log ends at the last batch boundary <=
        `offset` (a batch holding `offset` goes whole); False if the log already ends there. Kafka's
        UnifiedLog.truncateTo: whole segments above go (newest first), the segment holding `offset` is
        cut (indexes, then the file), producer state is rebuilt from the newest snapshot at or below
        the new end plus the batches after it, the aborted-txn index, epoch cache and high watermark
        follow. A target below the first segment empties the log (`truncate_fully_and_start_at`).

        Crash safety: every intermediate state on disk is a prefix of the old log at least as long
        as the target (later segments are unlinked before earlier ones are cut; the epoch checkpoint
        is cut after the log, and entries past the end are dropped on open; snapshots past the end
        are deleted on open), so a crash leaves a log the replica manager truncates again.

        Threading: grows with the replayed batches, so the replica manager runs it in a worker while
        nothing else writes this log (it is a follower: no produce, its fetcher paused); readers
        racing it may see the old tail or OffsetOutOfRangeError."""
        if offset < 0:
            raise ValueError(f"cannot truncate {self.dir.name} to a negative offset ({offset})")
        self.drain_writes()
        if offset >= self._leo:
            # a conflicting entry at the end (a leader that wrote nothing in its epoch) goes too
            self._epochs.truncate_from_end(self._leo)
            return False
        segments = list(self._view[0])
        if segments[0].base_offset > offset:
            self.truncate_fully_and_start_at(offset)
            return True
        now_ms = self._now_ms()
        keep = [seg for seg in segments if seg.base_offset <= offset]
        doomed = segments[len(keep):]
        active = keep[-1]
        found = active.find_batch(offset)
        cut = found[0] if found is not None else active.size
        log.info("truncating %s to offset %d (log end offset %d)", self.dir.name, offset, self._leo,
                 extra=self._log_fields)
        self._leo = self._next_offset = min(self._leo, offset)  # readers first see the lower end
        self._publish(keep)
        for seg in reversed(doomed):
            self._discard_segment(seg, now_ms)
        if cut < active.size:
            active.truncate_to(cut, now_ms)
        self._leo = self._next_offset = active.next_offset
        self._fsync_truncation(active)
        self._epochs.truncate_from_end(self._leo)
        self._epochs.flush()
        if self._log_start_offset > self._leo:
            self._log_start_offset = self._leo
            self._write_log_start_offset()
        self._reload_producer_state()
        if self._hw is not None and self._hw > self._leo:
            self._hw = self._leo
        return True

    async def truncate_to_async(self, offset: int) -> bool:
        """Owner thread: `truncate_to` in a worker thread (it replays producer state, which grows with
        the log), pending writes drained first. Until it is done the log refuses appends, follower
        appends and DeleteRecords (KafkaStorageError), and skips retention, flush.ms, compaction
        installs and high watermark updates; reads go on. The caller (the replica manager) keeps
        other truncations and `close` away meanwhile (a second call while one runs returns False)."""
        if self._truncating:
            return False
        self.drain_writes()
        if offset >= self._leo:
            return self.truncate_to(offset)  # no data to remove: only the epoch cache's end
        self._truncating = True
        try:
            return await asyncio.to_thread(self.truncate_to, offset)
        finally:
            self._truncating = False

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every batch and start the log empty at `offset` (log start = log end = `offset`):
        the follower of a leader whose log starts past this one's end (Kafka truncateFullyAndStartAt).
        The log start checkpoint is written first and the segments unlinked newest first, so a crash
        leaves a prefix of the old log or an empty log at `offset`. Threading as `truncate_to`."""
        if offset < 0:
            raise ValueError(f"cannot start {self.dir.name} at a negative offset ({offset})")
        self.drain_writes()
        log.info("truncating %s fully, starting at offset %d (log end offset %d)", self.dir.name, offset,
                 self._leo, extra=self._log_fields)
        now_ms = self._now_ms()
        self._log_start_offset = offset
        self._write_log_start_offset()
        self._leo = self._next_offset = offset
        doomed = list(self._view[0])
        for seg in reversed(doomed):
            self._discard_segment(seg, now_ms)
        ps = self._producers
        ps.scan_snapshots()
        for snap in list(ps.snapshots):
            ps.delete_snapshot(snap)
        new = self._new_segment(offset, now_ms)
        self._publish([new])
        fsync_dir(self.dir)
        self._epochs.clear()
        self._epochs.flush()
        self._reload_producer_state()
        if self._hw is not None:
            self._hw = offset

    def _discard_segment(self, seg: LogSegment, now_ms: int) -> None:
        """Unlink a segment truncation removed; its descriptors stay open for file.delete.delay.ms."""
        seg.unlink()
        if seg in self._unflushed:
            self._unflushed.remove(seg)
        self._graveyard.append((now_ms + self._config.file_delete_delay_ms, seg))

    def _fsync_truncation(self, active: LogSegment) -> None:
        try:
            active.flush()
            fsync_dir(self.dir)
        except OSError as exc:
            raise KafkaStorageError(f"flushing the truncation of {self.dir.name} failed: {exc}") from exc

    def _reload_producer_state(self) -> None:
        """Producer state from the newest snapshot at or below the log end plus the batches after it
        (snapshots past the end are deleted); the active segment's aborted-txn index is cut too."""
        self._producers = ProducerStateManager(self.dir, self._config.producer_id_expiration_ms)
        self._load_producer_state()

    def diverging_epoch(self, last_fetched_epoch: int, fetch_offset: int) -> tuple[int, int] | None:
        """The leader's check of a follower's Fetch v12+ (KIP-320, Kafka Partition.readRecords): None
        if the follower's log matches this one up to `fetch_offset` as far as epochs tell (or it sent
        no last fetched epoch, -1), else (epoch, end offset) of the largest epoch <= its last fetched
        one here, which the follower truncates to. OffsetOutOfRangeError if the epoch's end offset is
        unknown or `fetch_offset` is below the log start. Thread-safe (reads snapshots)."""
        if last_fetched_epoch < 0:
            return None
        epoch, end = self.end_offset_for_epoch(last_fetched_epoch)
        if epoch < 0 or end < 0:
            raise OffsetOutOfRangeError(
                f"Could not determine the end offset of the last fetched epoch {last_fetched_epoch} "
                f"for {self.dir.name}")
        if fetch_offset < self._log_start_offset:
            raise OffsetOutOfRangeError(
                f"Received request for offset {fetch_offset} for partition {self.dir.name}, but we only have "
                f"log segments in the range {self._log_start_offset} to {self._leo}.")
        if epoch < last_fetched_epoch or end < fetch_offset:
            return epoch, end
        return None

    def _write(self, segment: LogSegment, buf: memoryview | bytearray, start: int) -> None:
        """Writer thread: one pending append's bytes; skipped once an earlier one of this log failed."""
        if self._write_failed:
            raise KafkaStorageError(f"{self.dir.name}: an earlier write failed")
        try:
            segment.write(buf, start)
        except BaseException:
            self._write_failed = True
            raise

    def _publish_written(self) -> None:
        """Owner thread: publish pending appends whose write finished, oldest first, up to the first
        still being written; a failed write fails it and everything after it (`_rewind`)."""
        while self._pending and self._pending[0].write.done():
            pending = self._pending.popleft()
            exc = pending.write.exception()
            if exc is not None:
                self._rewind(pending, exc)
                return
            self._pending_bytes -= len(pending.prepared.buf)
            try:
                info = self._published(pending.prepared, pending.segment, pending.start)
            except Exception as exc:  # an index write failed: the bytes are in the file, say so
                if not pending.published.done():
                    pending.published.set_exception(exc)
                continue
            if not pending.published.done():
                pending.published.set_result(info)

    def drain_writes(self) -> None:
        """Owner thread: wait for every pending write of this log and publish it (blocks for at most
        the writes queued on this log dir's writer; used before anything that needs the whole log)."""
        if not self._pending:
            return
        for pending in list(self._pending):
            try:
                pending.write.result()
            except Exception:
                pass
        self._publish_written()

    def _rewind(self, failed: _PendingAppend, exc: BaseException) -> None:
        """Owner thread: `failed`'s write failed (the file is cut back to where it began, which is the
        published size). Fail it and every later pending append, forget their offsets and reload the
        producer state from the published log, so the partition goes on where it was published."""
        self._rewinding = True
        try:
            doomed = [failed, *self._pending]
            self._pending.clear()
            for pending in doomed[1:]:
                try:
                    pending.write.result()
                except Exception:
                    pass
            error = exc if isinstance(exc, KafkaStorageError) else KafkaStorageError(str(exc))
            log.error("append to %s failed, %d pending appends refused: %s", self.dir.name, len(doomed), exc,
                      extra=self._log_fields)
            self._write_failed = False
            self._pending_bytes = 0
            self._next_offset = self._leo
            self._epochs.truncate_from_end(self._leo + 1)  # epochs of the refused appends
            self._producers = ProducerStateManager(self.dir, self._config.producer_id_expiration_ms)
            self._load_producer_state()
            for pending in doomed:
                if not pending.published.done():
                    pending.published.set_exception(error)
        finally:
            self._rewinding = False

    def _prepare(self, records: bytes | bytearray | memoryview, leader_epoch: int | None, origin: AppendOrigin,
                 validated: bool, transaction_version: int = 0) -> "_Prepared | AppendInfo":
        """Validate and assign offsets from the next free one (patching `records` or a copy); a
        duplicate of one of the producer's last batches -> its original AppendInfo. Touches no state."""
        if self._truncating:
            raise KafkaStorageError(f"{self.dir.name} is being truncated")
        cfg = self._config
        headers = validate_batches(records)
        for pos, header in headers:
            if header.size > cfg.max_message_bytes:  # before content checks, as Kafka analyzes sizes first
                raise RecordTooLargeError(
                    f"batch of {header.size} bytes exceeds max.message.bytes {cfg.max_message_bytes}")
            if origin is AppendOrigin.CLIENT and not validated:
                validate_client_batch(memoryview(records)[pos:pos + header.size], header,
                                      self.validation_settings())
        if len(records) > cfg.segment_bytes:
            raise RecordBatchTooLargeError(
                f"{len(records)} bytes exceed segment.bytes {cfg.segment_bytes}")
        # a writable view (the request frame, see protocol/codec.py) is patched in place; else a copy
        buf = records if isinstance(records, memoryview) and not records.readonly else bytearray(records)
        now_ms = self._now_ms()
        append_time = cfg.log_append_time
        first_offset = offset = self._next_offset
        batches: list[BatchInfo] = []
        max_ts = -1
        producers: dict[int, ProducerAppendInfo] | None = None
        completed_txns: list[CompletedTxn] | None = None
        latest_epoch = self._epochs.latest_epoch
        epochs: list[tuple[int, int]] | None = None
        if leader_epoch is not None and leader_epoch > latest_epoch:
            epochs = [(leader_epoch, first_offset)]
        for pos, header in headers:
            if leader_epoch is None and header.partition_leader_epoch > latest_epoch:
                latest_epoch = header.partition_leader_epoch
                epochs = [*(epochs or ()), (latest_epoch, offset)]
            patch_base_offset(buf, pos, offset)
            if leader_epoch is not None:
                _EPOCH.pack_into(buf, pos + 12, leader_epoch)
            batch_ts = header.max_timestamp
            if append_time:
                batch_ts = now_ms
                _ATTRIBUTES.pack_into(buf, pos + 21, header.attributes | TIMESTAMP_TYPE_MASK)
                _TIMESTAMP.pack_into(buf, pos + 35, now_ms)
                _CRC.pack_into(buf, pos + 17, compute_crc(buf, pos, header.size))
            if header.producer_id >= 0:
                if producers is None:
                    producers = {}
                if header.attributes & CONTROL_MASK:  # a transaction marker (only coordinators write these)
                    marker = parse_marker(buf, pos)
                    completed = None if marker is None else self._producers.prepare_marker(
                        header, offset, marker[0], marker[1], batch_ts, origin, producers, transaction_version)
                    if completed is not None:
                        completed_txns = [*(completed_txns or ()), completed]
                else:
                    duplicate = self._producers.prepare(header, offset, batch_ts, origin, producers,
                                                        transaction_version)
                    if duplicate is not None:  # a retry: answer with the original offsets, append nothing
                        return AppendInfo(duplicate.first_offset, duplicate.last_offset, duplicate.timestamp,
                                          self._log_start_offset)
            last = offset + header.last_offset_delta
            batches.append(BatchInfo(pos, header.size, last, batch_ts))
            max_ts = max(max_ts, batch_ts)
            offset = last + 1
        return _Prepared(buf, batches, first_offset, offset, max_ts, now_ms, now_ms if append_time else -1,
                         producers, completed_txns, epochs)

    def _assign_epochs(self, epochs: list[tuple[int, int]], replace_conflicts: bool = False) -> None:
        """Owner thread, before the batches are written: their new leader epochs go to the cache (and
        its checkpoint file), so the file never lacks the epoch of a batch in the log."""
        for epoch, start in epochs:
            self._epochs.assign(epoch, start, replace_conflicts=replace_conflicts)

    def _reserve(self, prepared: _Prepared, segment: LogSegment) -> None:
        """Owner thread: the prepared append takes its offsets; producer state moves on (so the next
        batch is checked against this one) and transactions it ends complete."""
        self._next_offset = prepared.next_offset
        if prepared.producers:
            for info in prepared.producers.values():
                self._producers.update(info)
        if prepared.completed_txns:
            for completed in prepared.completed_txns:
                self._complete_txn(segment, completed)
        self._producers.last_map_offset = prepared.next_offset

    def _published(self, prepared: _Prepared, segment: LogSegment, start: int | None = None) -> AppendInfo:
        """Owner thread: the append's bytes are in the file (written at `start` by a writer thread, or
        already published by `segment.append`): make them visible, apply flush.ms / flush.messages,
        wake fetchers."""
        if start is not None:
            segment.publish(start, len(prepared.buf), prepared.batches)
        self._leo = prepared.next_offset
        if not self._unflushed or self._unflushed[-1] is not segment:
            self._unflushed.append(segment)
        self._unflushed_messages += prepared.next_offset - prepared.first_offset
        cfg = self._config
        if (self._unflushed_messages >= cfg.flush_messages
                or prepared.now_ms - self._last_flush_ms >= cfg.flush_ms):
            self._fsync()
        for listener in self.append_listeners:
            listener()
        return AppendInfo(prepared.first_offset, prepared.next_offset - 1, prepared.log_append_time_ms,
                          self._log_start_offset)

    def _complete_txn(self, segment: LogSegment, completed: CompletedTxn, replay: bool = False) -> None:
        """A marker ended `completed`: an aborted one goes to the marker segment's .txnindex with the
        LSO it leaves (Kafka updateTxnIndex); replay re-adds entries a crash lost."""
        ps = self._producers
        if completed.is_aborted and not (replay and segment.txn_index.last_offset >= completed.last_offset):
            segment.txn_index.append(AbortedTxn(completed.producer_id, completed.first_offset,
                                                completed.last_offset, ps.last_stable_offset(completed)))
        ps.complete_txn(completed)

    def collect_aborted_txns(self, start_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_bound), from the .txnindex of the segment
        holding `start_offset` onwards (Kafka collectAbortedTransactions)."""
        segments, bases = self._view
        out: list[AbortedTxn] = []
        for seg in segments[max(bisect_right(bases, start_offset) - 1, 0):]:
            found, complete = seg.txn_index.collect(start_offset, upper_bound)
            out.extend(found)
            if complete:
                break
        return out

    def _maybe_roll(self, size: int, max_ts: int, last_offset: int, now_ms: int) -> LogSegment:
        """Kafka's shouldRoll, incl. an offset or time index that holds segment.index.bytes (8-byte and
        12-byte entries); a segment is never rolled while empty."""
        seg = self._active
        cfg = self._config
        used = seg.size + self._pending_bytes
        if used > 0 and (
                used > cfg.segment_bytes - size
                or seg.time_waited_for_roll(now_ms, max_ts) > cfg.segment_ms - seg.roll_jitter_ms
                or last_offset - seg.base_offset > MAX_RELATIVE_OFFSET
                or len(seg.offset_index) >= cfg.segment_index_bytes // OffsetIndex.entry_size
                or len(seg.time_index) >= cfg.segment_index_bytes // TimeIndex.entry_size):
            return self.roll(now_ms)
        return seg

    def roll(self, now_ms: int | None = None) -> LogSegment:
        """Start a new active segment at the log end offset (no-op if the active one is empty)."""
        self.drain_writes()
        old = self._active
        if old.size == 0:
            return old
        old.on_become_inactive()
        self._producers.take_snapshot()  # at the new segment's base offset (the LEO)
        new = self._new_segment(self._leo, self._now_ms() if now_ms is None else now_ms)
        self._publish([*self._view[0], new])
        return new

    def maybe_flush(self, now_ms: int | None = None) -> None:
        """flush.ms check for a periodic timer (appends check it too)."""
        if self._truncating:
            return
        now_ms = self._now_ms() if now_ms is None else now_ms
        if self._unflushed and now_ms - self._last_flush_ms >= self._config.flush_ms:
            self._fsync()

    def flush(self) -> None:
        """fsync every segment written since the last flush, and the directory (pending writes first)."""
        self.drain_writes()
        self._fsync()

    def _fsync(self) -> None:
        self._epochs.flush()
        for seg in self._unflushed:
            seg.flush()
        if self._unflushed:
            fsync_dir(self.dir)
        self._unflushed = []
        self._unflushed_messages = 0
        self._last_flush_ms = self._now_ms()

    # ---------------------------------------------------------------- reads (thread-safe)

    def _locate(self, offset: int) -> tuple[int, LogSegment, int, BatchHeader, int] | None:
        """(log end offset, segment, position, header, committed segment size) of the first batch whose
        last offset >= `offset`; None at the log end. The LEO is read before the segment view, per the
        threading invariant above. Raises OffsetOutOfRangeError."""
        leo = self._leo
        if offset < self._log_start_offset or offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {offset} not in [{self._log_start_offset}, {leo}] for {self.dir.name}")
        if offset == leo:
            return None
        segments, bases = self._view
        i = bisect_right(bases, offset) - 1
        if i < 0:
            raise OffsetOutOfRangeError(f"offset {offset} was deleted from {self.dir.name}")
        for seg in segments[i:]:
            limit = seg.size
            found = seg.find_batch(offset, limit)
            if found is not None:
                return leo, seg, found[0], found[1], limit
        return None

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one: bool = True) -> bytes:
        """Whole batches starting with the one containing `offset`, from one segment only, up to
        `max_bytes` (the first batch is returned whole even if larger) and before `max_offset`."""
        found = self._locate(offset)
        if found is None:
            return b""
        _leo, seg, pos, header, limit = found
        if max_offset is not None and header.base_offset >= max_offset:
            return b""
        if not min_one and header.size > max_bytes:
            return b""  # only the first partition of a response may exceed the limit (KIP-74)
        return seg.read_batches(pos, header.size, max_bytes, limit, max_offset)

    def read_ranges(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
                    min_one: bool = True) -> list[LogRange]:
        """Where the bytes `read` would return live, without reading them: one LogRange per segment
        touched (today at most one, as `read` and Kafka return batches from one segment), each over
        its own dup of the segment descriptor, which the caller must close. Same rules as `read`:
        whole batches starting with the one containing `offset`, up to `max_bytes` (the first one
        whole even if larger, unless `min_one` is false), none at or past `max_offset` or the high
        watermark. Only batch headers and the offset index are read; thread-safe like `read`."""
        found = self._locate(offset)
        if found is None:
            return []
        leo, seg, pos, header, limit = found
        stop = leo if max_offset is None else min(max_offset, leo)
        if header.base_offset >= stop:
            return []
        if not min_one and header.size > max_bytes:
            return []  # only the first partition of a response may exceed the limit (KIP-74)
        size, last = seg.batch_range(pos, header, max_bytes, limit, stop)
        return [seg.open_range(pos, size, header.base_offset, last)]

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the earliest record at/after the log start with timestamp >= `timestamp`."""
        start = self._log_start_offset
        for seg in self._view[0]:
            if seg.next_offset <= start or seg.max_timestamp < timestamp:
                continue
            found = seg.find_offset_by_timestamp(timestamp, start)
            if found is not None:
                return found
        return None

    def max_timestamp(self) -> tuple[int, int]:
        """(offset, timestamp) of the first record carrying the largest timestamp; (-1, -1) if none."""
        best: LogSegment | None = None
        for seg in self._view[0]:
            if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
                best = seg
        return best.exact_max_timestamp() if best is not None else (-1, -1)

    def active_producers(self) -> list[ProducerStateEntry]:
        """Producer ids with state in this partition, by id (DescribeProducers)."""
        return self._producers.active_producers()

    # ---------------------------------------------------------------- deletion

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: advance the log start offset to `offset` (HIGH_WATERMARK = -1 means the high
        watermark), delete segments wholly below it, return the new log start offset."""
        if self._truncating:
            raise KafkaStorageError(f"{self.dir.name} is being truncated")
        self.drain_writes()
        if offset == HIGH_WATERMARK:
            offset = self.high_watermark
        if offset < 0 or offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot delete before {offset}: high watermark is {self.high_watermark}")
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            self._write_log_start_offset()
            self._epochs.truncate_from_start(offset)
        self._purge_graveyard(self._now_ms())
        self._delete_oldest(lambda seg, nxt: nxt is not None and nxt.base_offset <= self._log_start_offset)
        return self._log_start_offset

    def enforce_retention(self, now_ms: int | None = None) -> int:
        """Delete whole oldest segments breaching retention.ms / retention.bytes (cleanup.policy
        delete) or the log start offset; returns how many segments were deleted (none while a
        truncation runs in a worker)."""
        if self._truncating:
            return 0
        self.drain_writes()
        now_ms = self._now_ms() if now_ms is None else now_ms
        self._purge_graveyard(now_ms)
        cfg = self._config
        deleted = 0
        if cfg.delete_enabled and cfg.retention_ms >= 0:
            deleted += self._delete_oldest(
                lambda seg, nxt: now_ms - seg.largest_timestamp > cfg.retention_ms, now_ms)
        if cfg.delete_enabled and cfg.retention_bytes >= 0:
            excess = self.size_bytes - cfg.retention_bytes

            def over_size(seg: LogSegment, nxt: LogSegment | None) -> bool:
                nonlocal excess
                if excess - seg.size >= 0:
                    excess -= seg.size
                    return True
                return False

            deleted += self._delete_oldest(over_size, now_ms)
        deleted += self._delete_oldest(
            lambda seg, nxt: nxt is not None and nxt.base_offset <= self._log_start_offset, now_ms)
        self._producers.remove_expired(now_ms)  # producer.id.expiration.ms, checked on the same timer
        return deleted

    def _delete_oldest(self, predicate: Callable[[LogSegment, LogSegment | None], bool],
                       now_ms: int | None = None) -> int:
        """Delete the longest prefix of segments satisfying `predicate` (Kafka deletableSegments):
        never an empty active segment; a non-empty active one is rolled first, then deleted."""
        now_ms = self._now_ms() if now_ms is None else now_ms
        segments = list(self._view[0])
        doomed: list[LogSegment] = []
        for i, seg in enumerate(segments):
            nxt = segments[i + 1] if i + 1 < len(segments) else None
            upper = nxt.base_offset if nxt is not None else self._leo
            if nxt is None and seg.size == 0:
                break
            if self.high_watermark < upper or not predicate(seg, nxt):
                break
            doomed.append(seg)
        if not doomed:
            return 0
        if len(doomed) == len(segments):
            self.roll(now_ms)
            segments = list(self._view[0])
        remaining = segments[len(doomed):]
        if remaining[0].base_offset > self._log_start_offset:
            self._log_start_offset = remaining[0].base_offset
            self._epochs.truncate_from_start(self._log_start_offset)
            if self._hw is not None and self._hw < self._log_start_offset:
                self._hw = self._log_start_offset
        self._publish(remaining)
        self._producers.delete_snapshots_before(remaining[0].base_offset)
        delay = self._config.file_delete_delay_ms
        for seg in doomed:
            log.info("deleting segment %s", seg.log_path)
            seg.unlink()
            if seg in self._unflushed:
                self._unflushed.remove(seg)
            self._graveyard.append((now_ms + delay, seg))
        return len(doomed)

    def _purge_graveyard(self, now_ms: int) -> None:
        """Close descriptors of deleted segments once file.delete.delay.ms has passed."""
        keep = []
        for deadline, seg in self._graveyard:
            if deadline <= now_ms:
                seg.close()
            else:
                keep.append((deadline, seg))
        self._graveyard = keep

    def replace_segment(self, old: LogSegment, install: Callable[[], None]) -> bool:
        """Log compaction (storage/compaction.py): swap the inactive segment `old` for its cleaned
        copy with the same base offset. `install` moves the cleaned files over old's paths; readers
        holding `old` keep its open descriptors until file.delete.delay.ms. Returns False, doing
        nothing, if `old` is no longer an inactive segment of this log (or a truncation is running)."""
        if self._truncating:
            return False
        self.drain_writes()
        segments = list(self._view[0])
        if old.deleted or not any(seg is old for seg in segments[:-1]):
            return False
        install()
        now_ms = self._now_ms()
        new = self._new_segment(old.base_offset, now_ms)
        if new.load(verify_tail=False):
            new.recover()
        segments = [new if seg is old else seg for seg in segments]
        self._publish(segments)
        old.deleted = True  # its paths now belong to `new`: closing `old` must not write to them
        if old in self._unflushed:
            self._unflushed.remove(old)
        fsync_dir(self.dir)
        self._graveyard.append((now_ms + self._config.file_delete_delay_ms, old))
        return True

    # ---------------------------------------------------------------- lifecycle

    def close(self) -> None:
        """Snapshot the producer state at the LEO, close every file (no fsync of segments: call
        flush() first for durability against power loss)."""
        self.drain_writes()  # owner thread, or after the owner unregistered this log (LogManager)
        if self._view[0] and not self._active.deleted:
            self._producers.take_snapshot()
            try:
                self._epochs.flush()
            except OSError as exc:
                log.warning("could not flush %s: %s", self._epochs.path, exc)
        for seg in self._view[0]:
            seg.close()
        for _deadline, seg in self._graveyard:
            seg.close()
        self._graveyard = []

    def delete(self) -> None:
        """Close and remove the whole partition directory."""
        self.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __repr__(self) -> str:
        return (f"PartitionLog({self.dir.name}, start={self._log_start_offset}, leo={self._leo}, "
                f"segments={len(self._view[0])})")
