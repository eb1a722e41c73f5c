"""The replicated log of the metadata quorum, as the Raft core sees it: entries (epoch, payload) at
offsets 0.., with an epoch cache answering "where does epoch E end" (KRaft's
`endOffsetForEpoch`, Kafka's leader-epoch cache).

Invariants: epochs never decrease along the log; `truncate_to(offset)` removes exactly the entries at
and above `offset`. Durability is the caller's: `QuorumLog` is the in-memory view, a file-backed store
(later) replays into it.
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
    def __init__(self, entries: Sequence[Entry] = ()) -> None:
        self.entries: list[Entry] = list(entries)

    @property
    def end_offset(self) -> int:
        return len(self.entries)

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def append(self, entry: Entry) -> int:
        """The offset `entry` got."""
        if entry.epoch < self.last_epoch:
            raise ValueError(f"epoch {entry.epoch} after {self.last_epoch}")
        self.entries.append(entry)
        return len(self.entries) - 1

    def extend(self, entries: Sequence[Entry]) -> None:
        """Append `entries` in order, all or none (one durable write for all in a file-backed log)."""
        last = self.last_epoch
        for entry in entries:
            if entry.epoch < last:
                raise ValueError(f"epoch {entry.epoch} after {last}")
            last = entry.epoch
        self.entries.extend(entries)

    def read(self, offset: int, max_entries: int) -> list[Entry]:
        return self.entries[offset:offset + max_entries]

    def epoch_at(self, offset: int) -> int:
        """The epoch of the entry just before `offset` (0 before the first)."""
        return self.entries[offset - 1].epoch if offset > 0 else 0

    def truncate_to(self, offset: int) -> None:
        del self.entries[offset:]

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(E, end) where E is the largest epoch ≤ `epoch` in this log and `end` the offset after its last
        entry; (0, 0) when the log has no entry of an epoch ≤ `epoch`. For E = the last epoch, end = end_offset.
        Linear from the end: epochs are few and checks happen on divergence only."""
        for i in range(len(self.entries) - 1, -1, -1):
            e = self.entries[i].epoch
            if e <= epoch:
                return e, i + 1
        return 0, 0
