"""The replicated log of the metadata quorum, as the Raft core sees it: entries (epoch, payload) at
offsets 0.., with an epoch cache answering "where does epoch E end" (KRaft's
`endOffsetForEpoch`, Kafka's leader-epoch cache).

Invariants: epochs never decrease along the log; `truncate_to(offset)` removes exactly the entries at
and above `offset`. Durability is the caller's: `QuorumLog` is the in-memory view, a file-backed store
(later) replays into it.

Snapshots (KIP-630): the log may start at `start_offset` > 0 — the entries before it are summarized by
a snapshot of the committed state at `start_offset` whose last entry had `start_epoch`; `entries` holds
only the entries from `start_offset` on (entry at offset o is `entries[o - start_offset]`). The prefix
is dropped only up to a snapshot (`drop_prefix`), and a follower that installs a leader's snapshot
replaces its whole log by an empty one starting there (`reset_to`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence


@dataclass(frozen=True, slots=True)
class Entry:
    epoch: int
    payload: Any  # a metadata record (or LEADER_CHANGE, the control entry a new leader starts its epoch with)


LEADER_CHANGE = ("leader_change",)


class QuorumLog:
    def __init__(self, entries: Sequence[Entry] = (), start_offset: int = 0, start_epoch: int = 0) -> None:
        self.entries: list[Entry] = list(entries)
        self.start_offset = start_offset
        self.start_epoch = start_epoch  # the epoch of the entry just before start_offset (the snapshot's)

    @property
    def end_offset(self) -> int:
        return self.start_offset + len(self.entries)

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else self.start_epoch

    def entry_at(self, offset: int) -> Entry:
        if offset < self.start_offset:
            raise IndexError(f"offset {offset} is before the log start {self.start_offset} (in a snapshot)")
        return self.entries[offset - self.start_offset]

    def drop_prefix(self, offset: int) -> None:
        """Forget the entries before `offset` (a snapshot at `offset` covers them)."""
        if offset <= self.start_offset:
            return
        if offset > self.end_offset:
            raise ValueError(f"prefix up to {offset} beyond the log end {self.end_offset}")
        epoch = self.epoch_at(offset)
        del self.entries[:offset - self.start_offset]
        self.start_offset, self.start_epoch = offset, epoch

    def reset_to(self, offset: int, epoch: int) -> None:
        """Install a snapshot ending at `offset` (its last entry of `epoch`): the log becomes empty there."""
        self.entries.clear()
        self.start_offset, self.start_epoch = offset, epoch

    def append(self, entry: Entry) -> int:
        """The offset `entry` got."""
        if entry.epoch < self.last_epoch:
            raise ValueError(f"epoch {entry.epoch} after {self.last_epoch}")
        self.entries.append(entry)
        return self.end_offset - 1

    def extend(self, entries: Sequence[Entry]) -> None:
        """Append `entries` in order, all or none (one durable write for all in a file-backed log)."""
        last = self.last_epoch
        for entry in entries:
            if entry.epoch < last:
                raise ValueError(f"epoch {entry.epoch} after {last}")
            last = entry.epoch
        self.entries.extend(entries)

    def read(self, offset: int, max_entries: int) -> list[Entry]:
        if offset < self.start_offset:
            raise IndexError(f"offset {offset} is before the log start {self.start_offset} (in a snapshot)")
        i = offset - self.start_offset
        return self.entries[i:i + max_entries]

    def epoch_at(self, offset: int) -> int:
        """The epoch of the entry just before `offset` (0 before the first, the snapshot's at the start)."""
        if offset <= self.start_offset:
            if offset == self.start_offset:
                return self.start_epoch
            raise IndexError(f"offset {offset} is before the log start {self.start_offset} (in a snapshot)")
        return self.entries[offset - 1 - self.start_offset].epoch

    def truncate_to(self, offset: int) -> None:
        if offset < self.start_offset:
            raise ValueError(f"truncation to {offset} below the log start {self.start_offset}")
        del self.entries[offset - self.start_offset:]

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(E, end) where E is the largest epoch ≤ `epoch` in this log and `end` the offset after its last
        entry; (0, 0) when the log has no entry of an epoch ≤ `epoch`. For E = the last epoch, end = end_offset.
        Linear from the end: epochs are few and checks happen on divergence only. Below the log start
        only the snapshot's (epoch, start offset) is known."""
        for i in range(len(self.entries) - 1, -1, -1):
            e = self.entries[i].epoch
            if e <= epoch:
                return e, self.start_offset + i + 1
        if self.start_offset > 0 and self.start_epoch <= epoch:
            return self.start_epoch, self.start_offset
        return 0, 0
