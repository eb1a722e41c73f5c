"""PartitionLog: the ordered segments of one `<topic>-<partition>` directory (Kafka's UnifiedLog). It owns
the partition's state (segments, log start and end, high watermark, epoch cache, producer state) and
applies changes to it; the jobs around that state are beside it: opening and recovery in log_loader.py,
checking an append before it is written in append_preparation.py, the writer-thread pipeline in
pending_writes.py, reads from a snapshot in log_reads.py, the choice of what retention deletes in
retention.py.

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
import random
import shutil
import time
from pathlib import Path
from typing import Callable

from minikafka.storage import log_loader, log_reads
from minikafka.storage.append_preparation import (
    AppendInfo,
    PartitionValidation,
    Prepared,
    ValidationSettings,
    follower_parts,
    prepare_follower_append,
    prepare_leader_append,
)
from minikafka.storage.batch_io import MAX_RELATIVE_OFFSET
from minikafka.storage.errors import KafkaStorageError, OffsetOutOfRangeError
from minikafka.storage.index import OffsetIndex, TimeIndex
from minikafka.storage.leader_epoch_cache import LeaderEpochCache
from minikafka.storage.log_config import LogConfig
from minikafka.storage.partition_metadata import fsync_dir, parse_partition_dir, read_partition_metadata
from minikafka.storage.pending_writes import PendingAppend, PendingWrites
from minikafka.storage.producer_state import AppendOrigin, CompletedTxn, ProducerStateEntry, ProducerStateManager
from minikafka.storage.retention import Breach, below_log_start, deletable_prefix, retention_breaches
from minikafka.storage.segment import LogRange, LogSegment
from minikafka.storage.txn_index import AbortedTxn

log = logging.getLogger(__name__)

HIGH_WATERMARK = -1  # DeleteRecords sentinel: delete up to the high watermark
# begin_append writes appends up to this size inline when nothing is pending: the hop to the writer
# thread and back (~50 us) costs more than copying them into the page cache
INLINE_WRITE_BYTES = 64 * 1024


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
        self._validation = PartitionValidation()
        self.append_listeners: list[Callable[[], None]] = []
        self._graveyard: list[tuple[int, LogSegment]] = []
        self._unflushed: list[LogSegment] = []
        self._unflushed_messages = 0
        self._last_flush_ms = self._now_ms()
        self._view: tuple[tuple[LogSegment, ...], tuple[int, ...]] = ((), ())
        self._log_start_offset = 0
        self._leo = 0  # published log end offset (readers); `_next_offset` is the next one to assign
        # appends whose bytes a writer thread is writing (begin_append), oldest first
        self._pending = PendingWrites(self.dir, lambda p: self._published(p.prepared, p.segment, p.start),
                                      self._rewind)
        self._rewinding = False
        self._truncating = False  # truncate_to_async: a worker owns the log; writers are refused
        loaded = LeaderEpochCache.load(self.dir)
        self._epochs = loaded if loaded is not None else LeaderEpochCache(self.dir)
        segments, self._leo, self._log_start_offset = log_loader.load_segments(
            self.dir, clean_shutdown, self._new_segment, loaded, self._now_ms(), self._log_fields)
        self._publish(segments)
        self._next_offset = self._leo
        # no checkpoint: the cache is rebuilt from every batch header
        log_loader.settle_epoch_cache(self._epochs, loaded is None, self._view[0], self._log_start_offset,
                                      self._leo, self.dir.name, self._log_fields)
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

    def validation_settings(self, now_ms: int | None = None) -> ValidationSettings:
        """What record-level validation of a client batch needs from this partition, as of `now_ms` (default now)."""
        return self._validation.settings(self._config, self.dir, self._now_ms() if now_ms is None else now_ms)

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

    # ---------------------------------------------------------------- loading (storage/log_loader.py)

    def _write_log_start_offset(self) -> None:
        log_loader.write_log_start_offset(self.dir, self.topic, self.partition, self._log_start_offset)

    def _load_producer_state(self) -> None:
        self.producer_state_replayed_batches = log_loader.replay_producer_state(
            self._producers, self._view[0], self._log_start_offset, self._leo, self._now_ms(),
            lambda seg, completed: self._complete_txn(seg, completed, replay=True), self.dir.name,
            self._log_fields)

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
        sequence 0 where its producer has no batches yet."""
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
        and rewinds the partition to what was published (its producer state reloaded)."""
        loop = asyncio.get_running_loop()
        if self._rewinding:
            raise KafkaStorageError(f"{self.dir.name}: an earlier write failed")
        prepared = self._prepare(records, leader_epoch, origin, validated, transaction_version)
        if isinstance(prepared, AppendInfo):  # a retry: answered once the original is published
            return self._pending.answer_after_last(prepared, loop) if self._pending else prepared
        if prepared.completed_txns:  # markers come from coordinators through `append`
            raise KafkaStorageError("transaction markers are appended synchronously")
        return self._start_write(prepared, loop, prepared.first_offset)

    def _start_write(self, prepared: Prepared, loop: asyncio.AbstractEventLoop, next_offset: int,
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
        start = segment.size + self._pending.bytes
        self._reserve(prepared, segment)
        return self._pending.submit(prepared, segment, start, loop)

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
        return follower_parts(records, self._config.segment_bytes)

    def _prepare_follower(self, view: memoryview) -> Prepared:
        if self._truncating:
            raise KafkaStorageError(f"{self.dir.name} is being truncated")
        return prepare_follower_append(view, next_offset=self._next_offset, latest_epoch=self._epochs.latest_epoch,
                                       producers_state=self._producers, now_ms=self._now_ms(), name=self.dir.name)

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

    def drain_writes(self) -> None:
        """Owner thread: wait for every pending write of this log and publish it (used before anything
        that needs the whole log)."""
        self._pending.drain()

    def _rewind(self, doomed: list[PendingAppend], exc: BaseException) -> None:
        """Owner thread: a write failed (the file is cut back to where it began, the published size) and
        dooms these appends. Fail them, forget their offsets and reload the producer state from the
        published log, so the partition goes on where it was published."""
        self._rewinding = True
        try:
            error = exc if isinstance(exc, KafkaStorageError) else KafkaStorageError(str(exc))
            log.error("append to %s failed, %d pending appends refused: %s", self.dir.name, len(doomed), exc,
                      extra=self._log_fields)
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
                 validated: bool, transaction_version: int = 0) -> Prepared | AppendInfo:
        if self._truncating:
            raise KafkaStorageError(f"{self.dir.name} is being truncated")
        return prepare_leader_append(
            records, self._config, next_offset=self._next_offset, latest_epoch=self._epochs.latest_epoch,
            leader_epoch=leader_epoch, producers_state=self._producers, origin=origin, validated=validated,
            transaction_version=transaction_version, now_ms=self._now_ms(),
            log_start_offset=self._log_start_offset, validation_settings=self.validation_settings)

    def _assign_epochs(self, epochs: list[tuple[int, int]], replace_conflicts: bool = False) -> None:
        """Owner thread, before the batches are written: their new leader epochs go to the cache (and
        its checkpoint file), so the file never lacks the epoch of a batch in the log."""
        for epoch, start in epochs:
            self._epochs.assign(epoch, start, replace_conflicts=replace_conflicts)

    def _reserve(self, prepared: Prepared, segment: LogSegment) -> None:
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

    def _published(self, prepared: Prepared, segment: LogSegment, start: int | None = None) -> AppendInfo:
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
        """Aborted transactions overlapping [start_offset, upper_bound) (storage/log_reads.py)."""
        segments, bases = self._view
        return log_reads.collect_aborted_txns(segments, bases, start_offset, upper_bound)

    def _maybe_roll(self, size: int, max_ts: int, last_offset: int, now_ms: int) -> LogSegment:
        """Kafka's shouldRoll, incl. an offset or time index that holds segment.index.bytes (8-byte and
        12-byte entries); a segment is never rolled while empty."""
        seg = self._active
        cfg = self._config
        used = seg.size + self._pending.bytes
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

    # ---------------------------------------------------------------- reads (thread-safe, storage/log_reads.py)

    def snapshot(self) -> log_reads.LogSnapshot:
        """What readers see now: the LEO first, then the log start, then the segments (the threading
        invariant above)."""
        leo = self._leo
        start = self._log_start_offset
        segments, bases = self._view
        return log_reads.LogSnapshot(self.dir.name, start, leo, segments, bases)

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one: bool = True) -> bytes:
        """Whole batches from the one containing `offset`, from one segment, up to `max_bytes` (the
        first whole even if larger, unless not `min_one`) and before `max_offset`."""
        return log_reads.read(self.snapshot(), offset, max_bytes, max_offset, min_one)

    def read_ranges(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
                    min_one: bool = True) -> list[LogRange]:
        """Where the bytes `read` would return live, as LogRanges over dup'ed descriptors the caller
        closes (zero-copy fetch)."""
        return log_reads.read_ranges(self.snapshot(), offset, max_bytes, max_offset, min_one)

    def offset_for_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the earliest record at/after the log start with timestamp >= `timestamp`."""
        return log_reads.offset_for_timestamp(self.snapshot(), timestamp)

    def max_timestamp(self) -> tuple[int, int]:
        """(offset, timestamp) of the first record carrying the largest timestamp; (-1, -1) if none."""
        return log_reads.max_timestamp(self._view[0])

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
        self._delete_oldest(below_log_start(lambda: self._log_start_offset))
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
        deleted = 0
        for breach in retention_breaches(self._config, now_ms, lambda: self.size_bytes):
            deleted += self._delete_oldest(breach, now_ms)
        deleted += self._delete_oldest(below_log_start(lambda: self._log_start_offset), now_ms)
        self._producers.remove_expired(now_ms)  # producer.id.expiration.ms, checked on the same timer
        return deleted

    def _delete_oldest(self, breach: Breach, now_ms: int | None = None) -> int:
        """Delete the segments retention.deletable_prefix picks (a non-empty active one rolled first)."""
        now_ms = self._now_ms() if now_ms is None else now_ms
        segments = list(self._view[0])
        doomed = deletable_prefix(segments, self._leo, self.high_watermark, breach)
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

    def quiesce(self) -> bool:
        """A move's swap (replica_move.py): as `truncate_to_async`, writes refused till `_truncating` resets."""
        if self._truncating:
            return False
        self.drain_writes()
        self._truncating = True
        self._producers.take_snapshot()
        self._epochs.flush()
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
