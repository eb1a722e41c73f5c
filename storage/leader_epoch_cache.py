"""LeaderEpochCache: leader epoch -> start offset of one partition, kept in `leader-epoch-checkpoint`.

The file is Kafka's checkpoint format (LeaderEpochCheckpointFile): a version line `0`, a count line,
then one `epoch startOffset` line per entry, oldest first, so Kafka's tools read it.

Invariants:
- Entries are strictly increasing in both epoch and start offset.
- Every batch in the log with a partitionLeaderEpoch >= 0 is covered: an epoch's entry is assigned
  before (or, after a crash, recovered from) the first batch of that epoch. Entries past the log end
  offset may exist only transiently (truncate_from_end fixes them when the log is opened).
- The entry tuple is replaced, never mutated, so readers in other threads may look at it while the
  owner thread assigns or truncates.

Writes replace the file atomically (temp file + rename) without fsync; `flush` fsyncs it, and the
partition log calls that where it fsyncs its segments. A crash that loses an unflushed entry is
repaired when the log is opened: the recovered tail segment's batches are assigned again.

Semantics follow Kafka's LeaderEpochFileCache (assign, endOffsetFor, truncateFromEnd/Start).
"""
from __future__ import annotations

import logging
import os
from bisect import bisect_left, bisect_right
from pathlib import Path
from typing import NamedTuple

from minikafka.storage.partition_metadata import fsync_dir

log = logging.getLogger(__name__)

LEADER_EPOCH_CHECKPOINT_FILE = "leader-epoch-checkpoint"
CHECKPOINT_VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class EpochEntry(NamedTuple):
    epoch: int
    start_offset: int


def encode_checkpoint(entries: tuple[EpochEntry, ...] | list[EpochEntry]) -> bytes:
    lines = [str(CHECKPOINT_VERSION), str(len(entries)), *(f"{e.epoch} {e.start_offset}" for e in entries)]
    return ("\n".join(lines) + "\n").encode("ascii")


def decode_checkpoint(data: bytes) -> list[EpochEntry]:
    """Entries of a checkpoint file; ValueError if the version, count or a line is malformed (an
    empty file has no entries, as in Kafka)."""
    lines = data.decode("ascii").splitlines()
    if not lines:
        return []
    if int(lines[0]) != CHECKPOINT_VERSION:
        raise ValueError(f"unrecognised version {lines[0]!r}")
    if len(lines) == 1:
        return []
    count = int(lines[1])
    entries = []
    for line in lines[2:]:
        fields = line.split()
        if len(fields) != 2:
            raise ValueError(f"malformed line {line!r}")
        entries.append(EpochEntry(int(fields[0]), int(fields[1])))
    if len(entries) != count:
        raise ValueError(f"expected {count} entries, found {len(entries)}")
    return entries


class LeaderEpochCache:
    """Leader epoch -> start offset for one partition directory (see the module docstring)."""

    def __init__(self, directory: Path, entries: list[EpochEntry] | None = None) -> None:
        self.path = Path(directory) / LEADER_EPOCH_CHECKPOINT_FILE
        # (entries, their epochs for bisect): one tuple, replaced whole, so readers see a consistent pair
        self._state: tuple[tuple[EpochEntry, ...], tuple[int, ...]] = ((), ())
        self._dirty = False  # written since the last fsync
        if entries:
            self._set(_monotonic(entries))

    @classmethod
    def load(cls, directory: Path) -> "LeaderEpochCache | None":
        """The cache stored in `directory`, or None if there is no readable checkpoint file (the
        caller rebuilds it from the log)."""
        path = Path(directory) / LEADER_EPOCH_CHECKPOINT_FILE
        try:
            entries = decode_checkpoint(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            log.warning("ignoring unreadable %s: %s", path, exc)
            return None
        for e in entries:
            if e.epoch < 0 or e.start_offset < 0:
                log.warning("ignoring %s: invalid entry %s", path, e)
                return None
        return cls(directory, entries)

    # ---------------------------------------------------------------- queries (any thread)

    def epoch_entries(self) -> list[EpochEntry]:
        return list(self._entries)

    @property
    def latest_entry(self) -> EpochEntry | None:
        entries = self._entries
        return entries[-1] if entries else None

    @property
    def latest_epoch(self) -> int:
        """The newest epoch with an entry, UNDEFINED_EPOCH (-1) if none (on every append: kept cheap)."""
        entries = self._state[0]
        return entries[-1].epoch if entries else UNDEFINED_EPOCH

    @property
    def earliest_entry(self) -> EpochEntry | None:
        entries = self._entries
        return entries[0] if entries else None

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for a requested epoch (Kafka endOffsetFor): the largest known epoch <=
        `epoch` and the start offset of the first epoch after it, or the log end offset when `epoch`
        is the latest. (-1, -1) for an undefined epoch or one newer than every entry; an epoch older
        than every entry answers (epoch, start offset of the first entry)."""
        entries, epochs = self._state
        if epoch == UNDEFINED_EPOCH or not entries:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if entries[-1].epoch == epoch:
            return epoch, log_end_offset
        higher = bisect_right(epochs, epoch)
        if higher == len(entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            return epoch, entries[0].start_offset
        return entries[higher - 1].epoch, entries[higher].start_offset

    def epoch_for_offset(self, offset: int) -> int:
        """Epoch of the record at `offset` (the last entry starting at or before it), -1 if none."""
        entries = self._entries
        best = UNDEFINED_EPOCH
        for e in entries:
            if e.start_offset > offset:
                break
            best = e.epoch
        return best

    # ---------------------------------------------------------------- updates (owner thread)

    def assign(self, epoch: int, start_offset: int, *, replace_conflicts: bool = False) -> bool:
        """Record that `epoch` starts at `start_offset`; True if the cache changed (and was written).

        An epoch newer than the latest is appended. Anything else is ignored, unless
        `replace_conflicts` (the follower's append, as Kafka's assign): then an entry for the latest
        epoch with a smaller start offset, or an older epoch, replaces the entries it conflicts with
        (those with epoch >= it or start offset >= its)."""
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid leader epoch entry ({epoch}, {start_offset})")
        entries = self._entries
        if entries:
            latest = entries[-1]
            if epoch <= latest.epoch and not replace_conflicts:
                return False
            if epoch == latest.epoch and start_offset >= latest.start_offset:
                return False
            keep = len(entries)
            while keep and (entries[keep - 1].epoch >= epoch or entries[keep - 1].start_offset >= start_offset):
                keep -= 1
            if keep < len(entries) - 1 or (keep < len(entries) and entries[keep].start_offset != start_offset):
                log.warning("leader epoch entry (%d, %d) in %s replaces conflicting entries %s", epoch,
                            start_offset, self.path.parent.name, entries[keep:])
            entries = entries[:keep]
        self._set(entries + (EpochEntry(epoch, start_offset),))
        self.write()
        return True

    def truncate_from_end(self, end_offset: int) -> bool:
        """Drop entries starting at or after `end_offset` (the log was truncated there)."""
        entries = self._entries
        if end_offset < 0 or not entries or entries[-1].start_offset < end_offset:
            return False
        keep = bisect_left([e.start_offset for e in entries], end_offset)
        self._set(entries[:keep])
        self.write()
        return True

    def truncate_from_start(self, start_offset: int) -> bool:
        """The log now starts at `start_offset`: entries starting at or before it collapse into one
        entry of the newest of them, moved to `start_offset` (Kafka truncateFromStart)."""
        entries = self._entries
        if not entries or entries[0].start_offset >= start_offset:
            return False
        i = bisect_right([e.start_offset for e in entries], start_offset)
        new = (EpochEntry(entries[i - 1].epoch, start_offset),) + entries[i:]
        if new == entries:
            return False
        self._set(new)
        self.write()
        return True

    def clear(self) -> None:
        """Drop every entry (the log was emptied)."""
        self._set(())
        self.write()

    @property
    def _entries(self) -> tuple[EpochEntry, ...]:
        return self._state[0]

    def _set(self, entries: tuple[EpochEntry, ...]) -> None:
        self._state = (entries, tuple(e.epoch for e in entries))  # readers snapshot this one tuple

    # ---------------------------------------------------------------- files

    def write(self) -> None:
        """Replace the checkpoint file with the current entries (no fsync; see `flush`)."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        data = encode_checkpoint(self._entries)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        self._dirty = True

    def flush(self) -> None:
        """fsync the checkpoint file and its directory if it was written since the last flush."""
        if not self._dirty:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:  # the partition directory went away (deletion)
            self._dirty = False
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(self.path.parent)
        self._dirty = False

    def __repr__(self) -> str:
        return f"LeaderEpochCache({self.path.parent.name}, {list(self._entries)})"


def _monotonic(entries: list[EpochEntry]) -> tuple[EpochEntry, ...]:
    """`entries` in order, keeping only those that increase in both epoch and start offset (as the
    cache built by assigning them one after the other with conflicts replaced)."""
    out: list[EpochEntry] = []
    for e in entries:
        if out and out[-1].epoch == e.epoch and e.start_offset >= out[-1].start_offset:
            continue
        while out and (out[-1].epoch >= e.epoch or out[-1].start_offset >= e.start_offset):
            out.pop()
        out.append(e)
    return tuple(out)


__all__ = [
    "EpochEntry", "LeaderEpochCache", "LEADER_EPOCH_CHECKPOINT_FILE", "UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET",
    "decode_checkpoint", "encode_checkpoint",
]
