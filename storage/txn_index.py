"""The aborted-transaction index of one segment: `<base offset>.txnindex`, in Kafka's format.

Each entry (Kafka's `AbortedTxn`) is 34 bytes: version int16 (0), producerId int64, firstOffset int64,
lastOffset int64 (the offset of the ABORT marker) and lastStableOffset int64 (the partition's LSO once
this transaction completed). An entry is appended to the segment that receives the ABORT marker, so
entries are ordered by lastOffset. Like Kafka, the file is only created when the first entry is
appended; most segments never have one.

read_committed fetches ask `collect(fetch_offset, upper_bound)` for the aborted transactions that
overlap [fetch_offset, upper_bound); the search of later segments can stop once an entry's
lastStableOffset reaches the upper bound (nothing after it can start below the bound).

Entries are kept in memory (loaded on first use); the file is written with unbuffered appends, so a
kill -9 loses nothing already appended. Threading: the owner thread appends/truncates; `collect` takes
a snapshot of the entry tuple and is safe from other threads.
"""
from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

from minikafka.storage.errors import KafkaStorageError

TXN_INDEX_SUFFIX = ".txnindex"
ENTRY_VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size  # 34


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def encode_entry(txn: AbortedTxn) -> bytes:
    return _ENTRY.pack(ENTRY_VERSION, txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset)


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """Whole entries of a .txnindex file; a torn trailing entry is ignored, a bad version is corrupt."""
    out = []
    for pos in range(0, len(data) - len(data) % ENTRY_SIZE, ENTRY_SIZE):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != ENTRY_VERSION:
            raise KafkaStorageError(f"unexpected aborted transaction entry version {version} at byte {pos}")
        out.append(AbortedTxn(pid, first, last, lso))
    return out


class TransactionIndex:
    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self._entries: tuple[AbortedTxn, ...] | None = None  # None: not loaded yet
        self._fd = -1
        self._dirty = False

    # ---------------------------------------------------------------- reading

    @property
    def entries(self) -> tuple[AbortedTxn, ...]:
        entries = self._entries
        if entries is None:
            try:
                data = self.path.read_bytes()
            except FileNotFoundError:
                data = b""
            except OSError as exc:
                raise KafkaStorageError(f"cannot read {self.path}: {exc}") from exc
            entries = self._entries = tuple(decode_entries(data))
            if len(data) % ENTRY_SIZE:  # torn tail of a crashed append: drop it
                self._rewrite(entries)
        return entries

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def last_offset(self) -> int:
        """lastOffset of the newest entry, -1 if none."""
        entries = self.entries
        return entries[-1].last_offset if entries else -1

    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """(aborted transactions overlapping [fetch_offset, upper_bound), search complete?)."""
        found = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper_bound:
                found.append(txn)
            if txn.last_stable_offset >= upper_bound:
                return found, True
        return found, False

    def sanity_check(self) -> str | None:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return None
        if size % ENTRY_SIZE:
            return f"{self.path}: size {size} is not a multiple of {ENTRY_SIZE}"
        return None

    # ---------------------------------------------------------------- writing (owner thread)

    def _open(self) -> int:
        if self._fd < 0:
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
            except OSError as exc:
                raise KafkaStorageError(f"cannot open {self.path}: {exc}") from exc
        return self._fd

    def append(self, txn: AbortedTxn) -> None:
        entries = self.entries
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(f"aborted transaction ending at {txn.last_offset} is not after the last entry "
                             f"ending at {entries[-1].last_offset} in {self.path}")
        try:
            os.write(self._open(), encode_entry(txn))
        except OSError as exc:
            raise KafkaStorageError(f"append to {self.path} failed: {exc}") from exc
        self._entries = entries + (txn,)
        self._dirty = True

    def truncate_to(self, offset: int) -> int:
        """Drop entries whose marker is at or after `offset` (the log was truncated there); returns how many."""
        entries = self.entries
        keep = tuple(e for e in entries if e.last_offset < offset)
        if len(keep) != len(entries):
            self._rewrite(keep)
        return len(entries) - len(keep)

    def _rewrite(self, entries: tuple[AbortedTxn, ...]) -> None:
        self._entries = entries
        if not entries and not self.path.exists():
            return
        try:
            fd = self._open()
            os.ftruncate(fd, 0)
            if entries:
                os.write(fd, b"".join(encode_entry(e) for e in entries))
            os.fsync(fd)
        except OSError as exc:
            raise KafkaStorageError(f"rewrite of {self.path} failed: {exc}") from exc

    def reset(self) -> None:
        self._rewrite(())

    def flush(self) -> None:
        if self._fd >= 0 and self._dirty:
            os.fsync(self._fd)
            self._dirty = False

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def unlink(self) -> None:
        self.path.unlink(missing_ok=True)
