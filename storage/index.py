"""Sparse offset and time indexes in Kafka's file formats (not preallocated: length = entries * size).

Invariants (checked by `sanity_check`, restored by a segment rebuild when they fail):
- OffsetIndex: 8-byte entries (int32 relative offset, int32 position), both strictly increasing;
  an entry points at a batch whose *last* offset is the entry offset (what Kafka writes and what
  DumpLogSegments verifies); every position is < the segment size.
- TimeIndex: 12-byte entries (int64 timestamp, int32 relative offset), timestamps strictly
  increasing, offsets non-decreasing; an entry (t, o) means "the largest timestamp among records with
  offset <= o is t" and o is the last offset of the batch holding t.
Entries live in `array`s in memory, which answer every lookup; the file is their prefix. Appended
entries are held back and written together (`write_unwritten`, one `os.write` on an O_APPEND fd, which
the segment calls every UNWRITTEN_MAX entries, on roll, flush, truncation and close), so an append
costs no system call. A crash loses at most the entries held back: the file is then a shorter sparse
index, which is still valid (a lookup lands on an earlier batch and walks from there), and loading
walks batch headers from its last entry to the end of the segment. Appends only add entries, so a
reader thread can bisect concurrently (each array access holds the GIL).
"""
from __future__ import annotations

import os
import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from pathlib import Path

UNWRITTEN_MAX = 64  # entries an index holds back before the segment writes them
_OFFSET_ENTRY = struct.Struct(">ii")
_TIME_ENTRY = struct.Struct(">qi")
_LITTLE = sys.byteorder == "little"


def _open_append(path: Path) -> int:
    return os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)


def _read_all(fd: int) -> bytes:
    size = os.fstat(fd).st_size
    return os.pread(fd, size, 0) if size else b""


def _strictly_increasing(values: array) -> bool:
    return all(a < b for a, b in zip(values, values[1:]))


class _IndexFile:
    entry_size = 0

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = Path(path)
        self.base_offset = base_offset
        self.existed = self.path.exists()
        self._fd = _open_append(self.path)
        self._file_size = os.fstat(self._fd).st_size
        self._unwritten = bytearray()  # appended entries not in the file yet (write_unwritten)

    @property
    def unwritten(self) -> int:
        """Entries in memory that the file does not hold yet."""
        return len(self._unwritten) // self.entry_size

    def write_unwritten(self) -> None:
        """Append the entries held back with one write; on failure they stay held back (OSError)."""
        data = self._unwritten
        if not data:
            return
        written = os.write(self._fd, data)
        if written != len(data):  # regular files only short-write on error; keep whole entries
            os.ftruncate(self._fd, self._file_size)
            raise OSError(f"short write to {self.path}")
        self._file_size += written
        self._unwritten = bytearray()

    def _truncate_entries(self, entries: int) -> None:
        if entries:
            self.write_unwritten()
        self._unwritten = bytearray()
        self._file_size = entries * self.entry_size
        os.ftruncate(self._fd, self._file_size)

    def flush(self) -> None:
        self.write_unwritten()
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            try:
                self.write_unwritten()
            finally:
                os.close(self._fd)
                self._fd = -1

    def delete(self) -> None:
        self._unwritten = bytearray()
        self.close()
        self.path.unlink(missing_ok=True)


class OffsetIndex(_IndexFile):
    """Maps offsets to file positions of the batch whose last offset is the entry offset."""

    entry_size = 8

    def __init__(self, path: Path, base_offset: int) -> None:
        super().__init__(path, base_offset)
        data = _read_all(self._fd)
        self._torn = len(data) % self.entry_size
        flat = array("i")
        flat.frombytes(data[: len(data) - self._torn])
        if _LITTLE:
            flat.byteswap()
        self._rel: array = flat[0::2]
        self._pos: array = flat[1::2]

    def __len__(self) -> int:
        return len(self._rel)

    @property
    def last_offset(self) -> int:
        """Offset of the last entry, or base_offset when empty."""
        return self.base_offset + self._rel[-1] if self._rel else self.base_offset

    @property
    def last_position(self) -> int:
        return self._pos[-1] if self._pos else 0

    def entries(self) -> list[tuple[int, int]]:
        return [(self.base_offset + r, p) for r, p in zip(self._rel, self._pos)]

    def sanity_check(self, segment_size: int) -> str | None:
        """None if sane, else a description of the problem (the caller rebuilds the index)."""
        if self._torn:
            return f"{self.path}: size is not a multiple of {self.entry_size}"
        if self._rel and self._rel[0] < 0:
            return f"{self.path}: negative relative offset"
        if not _strictly_increasing(self._rel) or not _strictly_increasing(self._pos):
            return f"{self.path}: entries are not strictly increasing"
        if self._pos and (self._pos[0] < 0 or self._pos[-1] >= segment_size):
            return f"{self.path}: position {self._pos[-1]} beyond segment size {segment_size}"
        return None

    def lookup(self, offset: int, limit: int | None = None) -> int:
        """Position of the largest entry with offset <= `offset` (and position < `limit`), else 0."""
        i = bisect_right(self._rel, offset - self.base_offset) - 1
        if limit is not None:
            while i >= 0 and self._pos[i] >= limit:
                i -= 1
        return self._pos[i] if i >= 0 else 0

    def floor_entry(self, offset: int, position: int) -> tuple[int, int] | None:
        """(offset, position) of the last entry with offset <= `offset` and position <= `position`
        (both columns increase, so such entries form a prefix), else None."""
        i = min(bisect_right(self._rel, offset - self.base_offset), bisect_right(self._pos, position)) - 1
        return (self.base_offset + self._rel[i], self._pos[i]) if i >= 0 else None

    def append(self, offset: int, position: int) -> None:
        rel = offset - self.base_offset
        if self._rel and (rel <= self._rel[-1] or position <= self._pos[-1]):
            raise ValueError(f"index entry {offset}@{position} not after {self.last_offset}@{self._pos[-1]}")
        self._unwritten += _OFFSET_ENTRY.pack(rel, position)
        self._rel.append(rel)
        self._pos.append(position)

    def truncate_to(self, offset: int) -> None:
        """Drop every entry with offset >= `offset`."""
        keep = bisect_left(self._rel, offset - self.base_offset)
        del self._rel[keep:]
        del self._pos[keep:]
        self._truncate_entries(keep)

    def reset(self) -> None:
        del self._rel[:]
        del self._pos[:]
        self._torn = 0
        self._truncate_entries(0)


class TimeIndex(_IndexFile):
    """Maps max-timestamp-so-far to the (last) offset of the batch that holds it."""

    entry_size = 12

    def __init__(self, path: Path, base_offset: int) -> None:
        super().__init__(path, base_offset)
        data = _read_all(self._fd)
        self._torn = len(data) % self.entry_size
        self._ts = array("q")
        self._rel = array("i")
        for ts, rel in _TIME_ENTRY.iter_unpack(data[: len(data) - self._torn]):
            self._ts.append(ts)
            self._rel.append(rel)

    def __len__(self) -> int:
        return len(self._ts)

    @property
    def last_entry(self) -> tuple[int, int]:
        """(timestamp, offset) of the last entry, or (-1, base_offset) when empty (Kafka's convention)."""
        if not self._ts:
            return -1, self.base_offset
        return self._ts[-1], self.base_offset + self._rel[-1]

    def entries(self) -> list[tuple[int, int]]:
        return [(t, self.base_offset + r) for t, r in zip(self._ts, self._rel)]

    def sanity_check(self) -> str | None:
        if self._torn:
            return f"{self.path}: size is not a multiple of {self.entry_size}"
        if self._rel and self._rel[0] < 0:
            return f"{self.path}: negative relative offset"
        if not _strictly_increasing(self._ts):
            return f"{self.path}: timestamps are not strictly increasing"
        if any(a > b for a, b in zip(self._rel, self._rel[1:])):
            return f"{self.path}: offsets decrease"
        return None

    def maybe_append(self, timestamp: int, offset: int) -> bool:
        """Append (timestamp, offset) if timestamp is larger than the last entry's; True if appended."""
        if self._ts and timestamp <= self._ts[-1]:
            return False
        rel = offset - self.base_offset
        if self._rel and rel < self._rel[-1]:
            raise ValueError(f"time index offset {offset} before {self.last_entry[1]}")
        self._unwritten += _TIME_ENTRY.pack(timestamp, rel)
        self._ts.append(timestamp)
        self._rel.append(rel)
        return True

    def lookup(self, timestamp: int) -> tuple[int, int] | None:
        """Smallest entry with timestamp >= `timestamp` as (timestamp, offset), else None."""
        i = bisect_left(self._ts, timestamp)
        if i == len(self._ts):
            return None
        return self._ts[i], self.base_offset + self._rel[i]

    def offset_before(self, timestamp: int) -> int | None:
        """Offset of the largest entry with timestamp < `timestamp`: every record at or below it is
        older than `timestamp`, so a search may start just after it. None if there is no such entry."""
        i = bisect_left(self._ts, timestamp) - 1
        return self.base_offset + self._rel[i] if i >= 0 else None

    def truncate_to(self, offset: int) -> None:
        """Drop every entry with offset >= `offset`."""
        keep = bisect_left(self._rel, offset - self.base_offset)
        del self._ts[keep:]
        del self._rel[keep:]
        self._truncate_entries(keep)

    def reset(self) -> None:
        del self._ts[:]
        del self._rel[:]
        self._torn = 0
        self._truncate_entries(0)
