"""Per-partition producer state: epochs, sequence numbers and the last batches of every producer id.

Modelled on Kafka's `ProducerStateManager` / `ProducerAppendInfo` / `ProducerStateEntry`:

- **Validate, then commit.** `ProducerStateManager.prepare` checks one batch against the producer's
  current entry and records the outcome in a `ProducerAppendInfo` (a pending copy); the partition log
  appends the bytes and only then calls `update`, so a failed write never changes the state.
- **Where an append comes from decides what is checked** (`AppendOrigin`): client batches get epoch and
  sequence checks; coordinator writes (offset commits of transactional producers) get the epoch
  check only; replay while loading the log checks nothing.
- A retry of one of a producer's last `NUM_BATCHES_TO_RETAIN` batches (same epoch, same first and last
  sequence) is a *duplicate*: the caller answers with the original offsets and appends nothing.
- A producer id without state (never seen, or expired) is accepted at any sequence, as Kafka does
  (`ProducerAppendInfo.checkSequence`); a new epoch must start at sequence 0; an older epoch is fenced.

Snapshots use Kafka's file format, so `kafka-dump-log` can print them: `<20-digit offset>.snapshot`
holding int16 version (1), uint32 CRC-32C of everything after it, and an int32-counted array of
(producerId int64, epoch int16, lastSequence int32, lastOffset int64, offsetDelta int32,
timestamp int64, coordinatorEpoch int32, currentTxnFirstOffset int64). Only a producer's last batch is
kept in a snapshot (as in Kafka); replaying the log after the snapshot restores the rest.
"""
from __future__ import annotations

import logging
import struct
from enum import Enum
from pathlib import Path
from typing import Iterable, NamedTuple

import crc32c

from minikafka.protocol.record_batch import TRANSACTIONAL_MASK, BatchHeader
from minikafka.storage.errors import (
    CorruptSnapshotError,
    InvalidProducerEpochError,
    InvalidTxnStateError,
    OutOfOrderSequenceError,
    TransactionCoordinatorFencedError,
)
from minikafka.storage.partition_metadata import atomic_write

log = logging.getLogger(__name__)

NUM_BATCHES_TO_RETAIN = 5
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_TIMESTAMP = -1
INT32_MAX = 2**31 - 1
SHORT_MAX = 2**15 - 1
TV2 = 2  # transaction.version whose markers carry an epoch bumped past the transaction's data

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
_SNAPSHOT_HEAD = struct.Struct(">hIi")  # version, crc, entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")
_CRC_START = 6  # the CRC covers the bytes after version + crc


class AppendOrigin(Enum):
    """Who writes decides what is checked (Kafka's AppendOrigin): clients may not write control
    batches or idempotent batches without a sequence and get full producer-state validation; the
    broker's own writers (markers, coordinator state) get the epoch check only; REPLICATION is the
    replay of already-validated batches while loading the log."""
    CLIENT = "client"
    COORDINATOR = "coordinator"
    REPLICATION = "replication"


def increment_sequence(seq: int, increment: int) -> int:
    """Kafka's DefaultRecordBatch.incrementSequence: int32 sequences wrap from 2^31-1 to 0."""
    if seq > INT32_MAX - increment:
        return increment - (INT32_MAX - seq) - 1
    return seq + increment


def decrement_sequence(seq: int, decrement: int) -> int:
    if seq < decrement:
        return INT32_MAX - (decrement - seq) + 1
    return seq - decrement


def snapshot_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


class BatchMetadata(NamedTuple):
    """One appended batch of a producer (Kafka's BatchMetadata)."""
    last_seq: int
    last_offset: int
    offset_delta: int
    timestamp: int

    @property
    def first_seq(self) -> int:
        return decrement_sequence(self.last_seq, self.offset_delta)

    @property
    def first_offset(self) -> int:
        return self.last_offset - self.offset_delta


class CompletedTxn(NamedTuple):
    """A transaction ended by a COMMIT/ABORT marker at `last_offset` (Kafka's CompletedTxn)."""
    producer_id: int
    first_offset: int
    last_offset: int
    is_aborted: bool


class ProducerStateEntry:
    """State of one producer id in one partition; `batches` holds the last 5, oldest first."""

    __slots__ = ("producer_id", "producer_epoch", "coordinator_epoch", "last_timestamp",
                 "current_txn_first_offset", "batches")

    def __init__(self, producer_id: int, producer_epoch: int = NO_PRODUCER_EPOCH, coordinator_epoch: int = -1,
                 last_timestamp: int = NO_TIMESTAMP, current_txn_first_offset: int = -1,
                 batches: list[BatchMetadata] | None = None) -> None:
        self.producer_id = producer_id
        self.producer_epoch = producer_epoch
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = last_timestamp
        self.current_txn_first_offset = current_txn_first_offset  # -1: no ongoing transaction
        self.batches: list[BatchMetadata] = batches if batches is not None else []

    def __repr__(self) -> str:
        return (f"ProducerStateEntry(pid={self.producer_id}, epoch={self.producer_epoch}, "
                f"coordinator_epoch={self.coordinator_epoch}, last_ts={self.last_timestamp}, "
                f"txn_first={self.current_txn_first_offset}, batches={self.batches})")

    @property
    def is_empty(self) -> bool:
        return not self.batches

    @property
    def first_seq(self) -> int:
        return self.batches[0].first_seq if self.batches else NO_SEQUENCE

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    @property
    def last_offset_delta(self) -> int:
        return self.batches[-1].offset_delta if self.batches else 0


class ProducerAppendInfo:
    """Validation of the batches one append brings for one producer id (Kafka's ProducerAppendInfo).

    `current` is the committed entry (never modified here); the other fields start as a copy of it,
    without batches, and collect this append's outcome. `ProducerStateManager.update` commits it.
    """

    __slots__ = ("producer_id", "current", "origin", "epoch", "coordinator_epoch", "last_timestamp",
                 "txn_first_offset", "batches", "started_txn_first_offset")

    def __init__(self, producer_id: int, current: ProducerStateEntry, origin: AppendOrigin) -> None:
        self.producer_id = producer_id
        self.current = current
        self.origin = origin
        self.epoch = current.producer_epoch
        self.coordinator_epoch = current.coordinator_epoch
        self.last_timestamp = current.last_timestamp
        self.txn_first_offset = current.current_txn_first_offset
        self.batches: list[BatchMetadata] = []
        self.started_txn_first_offset = -1

    def append_data_batch(self, epoch: int, first_seq: int, last_seq: int, timestamp: int,
                          first_offset: int, last_offset: int, is_transactional: bool) -> None:
        """Validate one data batch against the state so far (Kafka checkProducerEpoch, then for client
        appends checkSequence) and record it. The hot path: a handful of comparisons per batch."""
        origin = self.origin
        if origin is not AppendOrigin.REPLICATION:
            current_epoch = self.epoch
            if epoch < current_epoch:
                raise InvalidProducerEpochError(
                    f"Epoch of producer {self.producer_id} at offset {first_offset} is {epoch}, which is smaller "
                    f"than the last seen epoch {current_epoch}")
            if origin is AppendOrigin.CLIENT:
                if epoch != current_epoch:
                    if first_seq != 0 and current_epoch != NO_PRODUCER_EPOCH:
                        raise OutOfOrderSequenceError(
                            f"Invalid sequence number for new epoch of producer {self.producer_id} at offset "
                            f"{first_offset}: {epoch} (request epoch), {first_seq} (seq. number), "
                            f"{current_epoch} (current producer epoch)")
                else:
                    current = self.current
                    if self.batches:
                        last = self.batches[-1].last_seq
                    elif epoch == current.producer_epoch and current.batches:
                        last = current.batches[-1].last_seq
                    else:
                        last = NO_SEQUENCE
                    # No epoch at all (state expired or never seen): any sequence is accepted.
                    if (current.producer_epoch != NO_PRODUCER_EPOCH and first_seq != last + 1
                            and not (first_seq == 0 and last == INT32_MAX)):
                        raise OutOfOrderSequenceError(
                            f"Out of order sequence number for producer {self.producer_id} at offset "
                            f"{first_offset}: {first_seq} (incoming seq. number), {last} (current end sequence "
                            "number)")
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch
        self.batches.append(BatchMetadata(last_seq, last_offset, last_offset - first_offset, timestamp))
        self.last_timestamp = timestamp
        if self.txn_first_offset >= 0:
            if not is_transactional and origin is not AppendOrigin.REPLICATION:
                raise InvalidTxnStateError(
                    f"Expected transactional write from producer {self.producer_id} at offset {first_offset}")
        elif is_transactional:
            self.txn_first_offset = first_offset
            self.started_txn_first_offset = first_offset

    def append_end_txn_marker(self, epoch: int, coordinator_epoch: int, commit: bool, offset: int,
                              timestamp: int, transaction_version: int = 0) -> CompletedTxn | None:
        """A COMMIT/ABORT marker at `offset` ends the producer's transaction (Kafka appendEndTxnMarker).
        Outside replay, the marker's producer epoch may not be older than the producer's
        (InvalidProducerEpochError) nor its coordinator epoch older than the last marker's
        (TransactionCoordinatorFencedError). A TV2 marker carries the epoch the coordinator bumped
        when the transaction ended, so it must be newer than the producer's epoch here; the same epoch
        passes only as a retry of a marker already written (no transaction open) or at epoch
        Short.MAX_VALUE. Returns the completed transaction, None if none was open."""
        if self.origin is not AppendOrigin.REPLICATION:
            current = self.epoch
            tv2 = transaction_version >= TV2
            if (epoch <= current if tv2 else epoch < current) and not (
                    tv2 and epoch == current and (self.txn_first_offset < 0 or epoch == SHORT_MAX)):
                raise InvalidProducerEpochError(
                    f"Epoch of producer {self.producer_id} at offset {offset} is {epoch}, which is "
                    f"{'<=' if tv2 else '<'} the last seen epoch {current} (TV{transaction_version})")
            if self.coordinator_epoch > coordinator_epoch:
                raise TransactionCoordinatorFencedError(
                    f"Invalid coordinator epoch for producer {self.producer_id} at offset {offset}: "
                    f"{coordinator_epoch} (zombie), {self.coordinator_epoch} (current)")
        if epoch != self.epoch:
            self.batches.clear()
            self.epoch = epoch
        completed = None
        if self.txn_first_offset >= 0:
            completed = CompletedTxn(self.producer_id, self.txn_first_offset, offset, not commit)
        self.coordinator_epoch = coordinator_epoch
        self.last_timestamp = timestamp
        self.txn_first_offset = -1
        return completed


class ProducerStateManager:
    """Producer entries of one partition, plus its snapshot files (Kafka's ProducerStateManager)."""

    def __init__(self, directory: Path, producer_id_expiration_ms: int) -> None:
        self.dir = Path(directory)
        self.producer_id_expiration_ms = producer_id_expiration_ms
        self.producers: dict[int, ProducerStateEntry] = {}
        self.snapshots: dict[int, Path] = {}
        self.last_map_offset = 0  # the state reflects every batch below this offset
        self.last_snap_offset = 0
        # first offset -> producer id of every open transaction (Kafka's ongoingTxns): the LSO's source
        self.ongoing_txns: dict[int, int] = {}

    # ---------------------------------------------------------------- validation / update

    def prepare(self, header: BatchHeader, first_offset: int, timestamp: int, origin: AppendOrigin,
                pending: dict[int, ProducerAppendInfo], transaction_version: int = 0) -> BatchMetadata | None:
        """Check one batch (offsets already assigned) of producer `header.producer_id`.

        Returns the original batch's metadata if the batch is a client retry of one of the producer's
        last batches (append nothing), else None after recording the batch in `pending` (commit with
        `update` once the bytes are written). Raises OutOfOrderSequenceError, InvalidProducerEpochError,
        InvalidTxnStateError. `transaction_version` 2: a transactional batch of a TV2 client (its epoch
        moves on with every transaction), which must start at sequence 0 where the producer has no
        batches (Kafka's check for TV2 verified appends), unlike KIP-360's "any sequence".
        """
        pid = header.producer_id
        epoch = header.producer_epoch
        first_seq = header.base_sequence
        delta = header.last_offset_delta
        if first_seq < 0:
            last_seq = NO_SEQUENCE
        elif first_seq > INT32_MAX - delta:
            last_seq = delta - (INT32_MAX - first_seq) - 1
        else:
            last_seq = first_seq + delta
        current = self.producers.get(pid)
        if current is not None and origin is AppendOrigin.CLIENT and epoch == current.producer_epoch:
            for batch in current.batches:
                if batch.last_seq == last_seq and batch.first_seq == first_seq:
                    return batch  # a retry: the caller answers with these offsets
        info = pending.get(pid)
        if info is None:
            if (transaction_version >= TV2 and first_seq != 0 and origin is AppendOrigin.CLIENT
                    and (current is None or not current.batches)):
                raise OutOfOrderSequenceError(
                    f"Invalid sequence number for producer {pid} at offset {first_offset}: {first_seq} (incoming "
                    "seq. number). Expected sequence 0 for transactions v2 idempotent producer with no existing "
                    "state.")
            info = pending[pid] = ProducerAppendInfo(
                pid, current if current is not None else ProducerStateEntry(pid), origin)
        info.append_data_batch(epoch, first_seq, last_seq, timestamp, first_offset, first_offset + delta,
                               bool(header.attributes & TRANSACTIONAL_MASK))
        return None

    def prepare_marker(self, header: BatchHeader, offset: int, commit: bool, coordinator_epoch: int,
                       timestamp: int, origin: AppendOrigin, pending: dict[int, ProducerAppendInfo],
                       transaction_version: int = 0) -> CompletedTxn | None:
        """Check a transaction marker (control batch) at `offset`; returns the transaction it completes
        (commit with `update`, then `complete_txn`). Raises InvalidProducerEpochError,
        TransactionCoordinatorFencedError."""
        pid = header.producer_id
        info = pending.get(pid)
        if info is None:
            current = self.producers.get(pid)
            info = pending[pid] = ProducerAppendInfo(
                pid, current if current is not None else ProducerStateEntry(pid), origin)
        return info.append_end_txn_marker(header.producer_epoch, coordinator_epoch, commit, offset, timestamp,
                                          transaction_version)

    def update(self, info: ProducerAppendInfo) -> None:
        """Commit a validated append (Kafka's ProducerStateEntry.update)."""
        if info.started_txn_first_offset >= 0:
            self.ongoing_txns[info.started_txn_first_offset] = info.producer_id
        entry = self.producers.get(info.producer_id)
        if entry is None:
            self.producers[info.producer_id] = ProducerStateEntry(
                info.producer_id, info.epoch, info.coordinator_epoch, info.last_timestamp, info.txn_first_offset,
                info.batches[-NUM_BATCHES_TO_RETAIN:])
            return
        batches = entry.batches
        if info.epoch != entry.producer_epoch:
            batches.clear()
            entry.producer_epoch = info.epoch
        batches += info.batches
        if len(batches) > NUM_BATCHES_TO_RETAIN:
            del batches[:-NUM_BATCHES_TO_RETAIN]
        entry.coordinator_epoch = info.coordinator_epoch
        entry.current_txn_first_offset = info.txn_first_offset
        entry.last_timestamp = info.last_timestamp

    @property
    def first_unstable_offset(self) -> int | None:
        """First offset of the earliest open transaction, None if there is none."""
        return min(self.ongoing_txns) if self.ongoing_txns else None

    def last_stable_offset(self, completed: CompletedTxn) -> int:
        """The LSO once `completed` is done (Kafka lastStableOffset(completedTxn)): the first offset of
        another producer's open transaction, else the offset after the marker."""
        others = [first for first, pid in self.ongoing_txns.items() if pid != completed.producer_id]
        return min(others) if others else completed.last_offset + 1

    def complete_txn(self, completed: CompletedTxn) -> None:
        self.ongoing_txns.pop(completed.first_offset, None)

    def update_map_end_offset(self, offset: int) -> None:
        self.last_map_offset = offset

    def replay(self, header: BatchHeader, marker: tuple[bool, int] | None = None) -> CompletedTxn | None:
        """Load one stored batch (no checks, header only). A control batch needs `marker` = (commit,
        coordinator epoch) from its record: it ends the producer's transaction, which is returned (the
        caller restores the aborted-transaction index from it, then calls `complete_txn`)."""
        pid = header.producer_id
        completed = None
        if pid >= 0 and header.is_control and marker is not None:
            info = ProducerAppendInfo(pid, self.producers.get(pid) or ProducerStateEntry(pid), AppendOrigin.REPLICATION)
            completed = info.append_end_txn_marker(header.producer_epoch, marker[1], marker[0],
                                                   header.base_offset, header.max_timestamp)
            self.update(info)
        elif pid >= 0 and not header.is_control:
            info = ProducerAppendInfo(pid, self.producers.get(pid) or ProducerStateEntry(pid), AppendOrigin.REPLICATION)
            first_seq = header.base_sequence
            last_seq = NO_SEQUENCE if first_seq < 0 else increment_sequence(first_seq, header.last_offset_delta)
            info.append_data_batch(header.producer_epoch, first_seq, last_seq, header.max_timestamp,
                                   header.base_offset, header.last_offset, header.is_transactional)
            self.update(info)
        self.last_map_offset = header.last_offset + 1
        return completed

    # ---------------------------------------------------------------- queries / expiry

    def last_entry(self, producer_id: int) -> ProducerStateEntry | None:
        return self.producers.get(producer_id)

    def active_producers(self) -> list[ProducerStateEntry]:
        return [self.producers[pid] for pid in sorted(self.producers)]

    def is_expired(self, entry: ProducerStateEntry, now_ms: int) -> bool:
        return entry.current_txn_first_offset < 0 and now_ms - entry.last_timestamp >= self.producer_id_expiration_ms

    def remove_expired(self, now_ms: int) -> int:
        expired = [pid for pid, entry in self.producers.items() if self.is_expired(entry, now_ms)]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    # ---------------------------------------------------------------- snapshots

    def scan_snapshots(self) -> None:
        """Index the snapshot files of the directory."""
        self.snapshots = {}
        for path in self.dir.glob("*" + SNAPSHOT_SUFFIX):
            stem = path.name[:-len(SNAPSHOT_SUFFIX)]
            if len(stem) == 20 and stem.isdigit():
                self.snapshots[int(stem)] = path

    def take_snapshot(self) -> Path | None:
        """Write a snapshot at the map end offset if the state moved past the last one (Kafka
        takeSnapshot). Expired producers are written too; loading filters them out."""
        if self.last_map_offset <= self.last_snap_offset:
            return None
        path = self.dir / snapshot_name(self.last_map_offset)
        try:
            atomic_write(path, encode_snapshot(self.producers.values()))
        except OSError as exc:  # a snapshot only saves replay time: never fail the caller for it
            log.warning("could not write producer state snapshot %s: %s", path, exc)
            return None
        self.snapshots[self.last_map_offset] = path
        self.last_snap_offset = self.last_map_offset
        return path

    def load_latest_snapshot(self, log_start_offset: int, log_end_offset: int, now_ms: int) -> int | None:
        """Delete snapshots outside [log start, log end], load the newest valid one (corrupt ones are
        deleted with a warning) and return its offset, or None (state starts empty at the log start)."""
        self.producers = {}
        self.ongoing_txns = {}
        for offset in sorted(self.snapshots):
            if offset > log_end_offset or offset < log_start_offset:
                self.delete_snapshot(offset)
        for offset in sorted(self.snapshots, reverse=True):
            path = self.snapshots[offset]
            try:
                entries = decode_snapshot(path.read_bytes())
            except (OSError, CorruptSnapshotError) as exc:
                log.warning("ignoring producer state snapshot %s: %s", path, exc)
                self.delete_snapshot(offset)
                continue
            self.producers = {e.producer_id: e for e in entries if not self.is_expired(e, now_ms)}
            self.ongoing_txns = {e.current_txn_first_offset: e.producer_id
                                 for e in self.producers.values() if e.current_txn_first_offset >= 0}
            self.last_map_offset = self.last_snap_offset = offset
            return offset
        self.last_map_offset = self.last_snap_offset = log_start_offset
        return None

    def delete_snapshot(self, offset: int) -> None:
        path = self.snapshots.pop(offset, None)
        if path is not None:
            path.unlink(missing_ok=True)

    def delete_snapshots_before(self, offset: int) -> None:
        for snap in [o for o in self.snapshots if o < offset]:
            self.delete_snapshot(snap)

    def latest_snapshot_offset(self) -> int | None:
        return max(self.snapshots) if self.snapshots else None


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    entries = list(entries)
    body = bytearray(_SNAPSHOT_HEAD.pack(SNAPSHOT_VERSION, 0, len(entries)))
    pack = _SNAPSHOT_ENTRY.pack
    for e in entries:
        body += pack(e.producer_id, e.producer_epoch, e.last_seq, e.last_data_offset, e.last_offset_delta,
                     e.last_timestamp, e.coordinator_epoch, e.current_txn_first_offset)
    struct.pack_into(">I", body, 2, crc32c.crc32c(memoryview(body)[_CRC_START:]))
    return bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """Parse a snapshot file; CorruptSnapshotError unless version, CRC and length all check out."""
    if len(data) < _SNAPSHOT_HEAD.size:
        raise CorruptSnapshotError(f"snapshot of {len(data)} bytes is truncated")
    version, crc, count = _SNAPSHOT_HEAD.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"unknown snapshot version {version}")
    computed = crc32c.crc32c(memoryview(data)[_CRC_START:])
    if crc != computed:
        raise CorruptSnapshotError(f"snapshot CRC mismatch: stored {crc}, computed {computed}")
    if count < 0 or len(data) != _SNAPSHOT_HEAD.size + count * _SNAPSHOT_ENTRY.size:
        raise CorruptSnapshotError(f"snapshot length {len(data)} does not fit {count} entries")
    entries = []
    for pid, epoch, last_seq, last_offset, delta, ts, coord_epoch, txn_first in _SNAPSHOT_ENTRY.iter_unpack(
            memoryview(data)[_SNAPSHOT_HEAD.size:]):
        batches = [BatchMetadata(last_seq, last_offset, delta, ts)] if last_offset >= 0 else []
        entries.append(ProducerStateEntry(pid, epoch, coord_epoch, ts, txn_first if txn_first >= 0 else -1, batches))
    return entries


__all__ = [
    "AppendOrigin", "BatchMetadata", "CompletedTxn", "ProducerAppendInfo", "ProducerStateEntry", "ProducerStateManager",
    "NUM_BATCHES_TO_RETAIN", "decode_snapshot", "encode_snapshot", "increment_sequence", "decrement_sequence",
    "snapshot_name",
]
