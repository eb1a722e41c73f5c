"""One log segment: `<base>.log` (batches exactly as on the wire) + `.index` + `.timeindex`.

Invariants:
- `size` counts only whole, validated batches; the file never holds bytes past `size` except
  transiently inside `append` (or after a crash: recovery truncates them).
- The file only grows while open (truncation happens in `recover`, before anyone reads).
- Writes are unbuffered `os.write`s of whole appends: once `write` returns, the bytes are in the
  kernel, so a kill -9 of the process loses nothing acknowledged (power loss needs `flush`). `write`
  may run in a writer thread (storage/append_writer.py); `publish` (owner thread) then makes the bytes
  visible, in file order.
- Readers use `os.pread` below a size snapshot taken at call start, so `read*`/`find_batch` may run
  in a worker thread while the owner thread appends.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterator, NamedTuple

from minikafka.protocol.record_batch import HEADER_SIZE, BatchHeader, parse_header, peek_size
from minikafka.storage.batch_io import iter_file_headers, scan_valid_batches
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.index import UNWRITTEN_MAX, OffsetIndex, TimeIndex
from minikafka.storage.txn_index import TXN_INDEX_SUFFIX, TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


def segment_name(base_offset: int) -> str:
    """Kafka's file name stem: the base offset zero-padded to 20 digits."""
    return f"{base_offset:020d}"


class BatchInfo(NamedTuple):
    """One batch of an append: position inside the appended buffer and its (assigned) offsets."""
    position: int
    size: int
    last_offset: int
    max_timestamp: int


class LogRange(NamedTuple):
    """Whole stored batches `[position, position + size)` of a segment file, read through `fd`: a
    duplicate of the segment's descriptor owned by the holder (os.close it), so the bytes stay
    readable even if the segment is deleted or replaced before they are sent."""
    fd: int
    position: int
    size: int
    first_offset: int  # base offset of the first batch
    last_offset: int  # last offset of the last batch


RANGE_WALK_CHUNK = 4096  # header reads between offset-index entries (index.interval.bytes apart)


class LogSegment:
    """A segment file and its indexes. Not thread-safe for writers; see module docstring for readers."""

    def __init__(self, directory: Path, base_offset: int, *, index_interval_bytes: int, now_ms: int,
                 roll_jitter_ms: int = 0) -> None:
        self.directory = Path(directory)
        self.base_offset = base_offset
        stem = self.directory / segment_name(base_offset)
        self.log_path = stem.with_suffix(LOG_SUFFIX)
        self._fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.offset_index = OffsetIndex(stem.with_suffix(INDEX_SUFFIX), base_offset)
        self.time_index = TimeIndex(stem.with_suffix(TIME_INDEX_SUFFIX), base_offset)
        self.txn_index = TransactionIndex(stem.with_suffix(TXN_INDEX_SUFFIX), base_offset)  # aborted txns
        self.size: int = os.fstat(self._fd).st_size
        self.next_offset: int = base_offset
        self.max_timestamp: int = -1
        self.offset_of_max_timestamp: int = -1  # last offset of the batch holding max_timestamp
        self.rolling_timestamp: int | None = None  # max timestamp of the first batch (Kafka segment.ms)
        self.created_ms = now_ms
        self.index_interval_bytes = index_interval_bytes
        self.roll_jitter_ms = roll_jitter_ms
        self.deleted = False
        self._bytes_since_index = 0

    def __repr__(self) -> str:
        return f"LogSegment({self.log_path}, next_offset={self.next_offset}, size={self.size})"

    # ---------------------------------------------------------------- loading and recovery

    def load(self, verify_tail: bool) -> str | None:
        """Adopt an existing segment cheaply: check the indexes and walk batch headers from the last
        index entry to the end (with CRC checks if `verify_tail`). Returns None when consistent, else
        a description of the problem (the caller then runs `recover`)."""
        problem = self.offset_index.sanity_check(self.size) or self.time_index.sanity_check()
        if problem:
            return problem
        if self.size and not (self.offset_index.existed and self.time_index.existed):
            return f"{self.log_path}: missing index file"
        start = self.offset_index.last_position
        max_ts, max_off = self.time_index.last_entry if len(self.time_index) else (-1, -1)
        if verify_tail:
            walk = scan_valid_batches(self._fd, start, self.size, self.base_offset, self.base_offset)
        else:
            walk = iter_file_headers(self._fd, start, self.size)
        end, last_offset = start, self.base_offset - 1
        for pos, header in walk:
            if pos == start and len(self.offset_index) and header.last_offset != self.offset_index.last_offset:
                return f"{self.log_path}: index entry does not match the batch at {pos}"
            if header.max_timestamp > max_ts:
                max_ts, max_off = header.max_timestamp, header.last_offset
            end, last_offset = pos + header.size, header.last_offset
        if end != self.size:
            return f"{self.log_path}: invalid or incomplete batch at position {end}"
        if self.time_index.last_entry[1] > last_offset and len(self.time_index):
            return f"{self.log_path}: time index points past the last offset"
        self.next_offset = last_offset + 1
        self.max_timestamp, self.offset_of_max_timestamp = max_ts, max_off
        self._bytes_since_index = self.size - start
        self._load_rolling_timestamp()
        return None

    def recover(self, on_batch: Callable[[BatchHeader], None] | None = None) -> int:
        """Validate every batch from position 0 (length, magic, CRC, offsets), truncate the file at the
        first invalid byte and rebuild both indexes; `on_batch` sees each valid batch's header (the
        leader epoch cache). Returns the number of bytes truncated."""
        self.offset_index.reset()
        self.time_index.reset()
        file_size = os.fstat(self._fd).st_size
        max_ts, max_off = -1, -1
        valid, since, next_offset = 0, 0, self.base_offset
        for pos, header in scan_valid_batches(self._fd, 0, file_size, self.base_offset, self.base_offset):
            if on_batch is not None:
                on_batch(header)
            if header.max_timestamp > max_ts:
                max_ts, max_off = header.max_timestamp, header.last_offset
            if since > self.index_interval_bytes:
                self.offset_index.append(header.last_offset, pos)
                self.time_index.maybe_append(max_ts, max_off)
                since = 0
            since += header.size
            valid, next_offset = pos + header.size, header.last_offset + 1
        if valid < file_size:
            os.ftruncate(self._fd, valid)
        self.size, self.next_offset = valid, next_offset
        self.max_timestamp, self.offset_of_max_timestamp = max_ts, max_off
        self._bytes_since_index = since
        if max_off >= 0:
            self.time_index.maybe_append(max_ts, max_off)
        self.write_index_entries()
        self._load_rolling_timestamp()
        return file_size - valid

    def _load_rolling_timestamp(self) -> None:
        if self.size >= HEADER_SIZE:
            self.rolling_timestamp = parse_header(os.pread(self._fd, HEADER_SIZE, 0)).max_timestamp
        else:
            self.rolling_timestamp = None

    # ---------------------------------------------------------------- writing

    def append(self, buf: bytes | bytearray | memoryview, batches: list[BatchInfo]) -> None:
        """Write `buf` (whole batches, offsets already assigned, described by `batches`) with one
        unbuffered write, then publish it (`publish`)."""
        if not batches:
            return
        start = self.size
        self.write(buf, start)
        self.publish(start, len(buf), batches)

    def write(self, buf: bytes | bytearray | memoryview, start: int) -> None:
        """Write `buf` at the end of the file, which must be at `start` (any thread, one writer per
        segment at a time; readers do not see the bytes until `publish`). On failure the file is cut
        back to `start` and KafkaStorageError raised."""
        view = memoryview(buf)
        written = 0
        try:
            while written < len(view):
                written += os.write(self._fd, view[written:])
        except OSError as exc:
            try:
                os.ftruncate(self._fd, start)
            except OSError:
                pass
            raise KafkaStorageError(f"append to {self.log_path} failed: {exc}") from exc

    def publish(self, start: int, size: int, batches: list[BatchInfo]) -> None:
        """Owner thread: make `size` written bytes at `start` (== `self.size`) visible and index them
        (Kafka: when more than index.interval.bytes were appended since the last entry, an entry for
        the batch's last offset at its position)."""
        if start == 0:
            self.rolling_timestamp = max(b.max_timestamp for b in batches)
        for b in batches:
            if b.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = b.max_timestamp, b.last_offset
        self.size = start + size  # publish: readers may now see these bytes
        self.next_offset = batches[-1].last_offset + 1
        for b in batches:
            if self._bytes_since_index > self.index_interval_bytes:
                self.offset_index.append(b.last_offset, start + b.position)
                self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
                self._bytes_since_index = 0
            self._bytes_since_index += b.size
        if self.offset_index.unwritten >= UNWRITTEN_MAX:
            self.write_index_entries()

    def write_index_entries(self) -> None:
        """Write the index entries held back (storage/index.py): the time index first, so that on disk it
        never lags behind the offset index (loading takes the max timestamp from the time index and
        walks batches only after the offset index's last entry)."""
        try:
            self.time_index.write_unwritten()
            self.offset_index.write_unwritten()
        except OSError as exc:
            raise KafkaStorageError(f"index append for {self.log_path} failed: {exc}") from exc

    def truncate_to(self, position: int, now_ms: int) -> int:
        """Owner thread: cut the segment at `position` (a batch boundary from `find_batch`): indexes
        first (entries at or past the new next offset), then the file; max timestamp, rolling
        timestamp and the index interval counter are re-derived (Kafka LogSegment.truncateTo).
        Returns the number of bytes removed. A crash in between leaves index entries past the end,
        which the recovery of the (last) segment on open rebuilds."""
        if position >= self.size:
            return 0
        entry = self.offset_index.floor_entry(2**62, position - 1) if position else None
        new_next = self.base_offset
        for _pos, header in iter_file_headers(self._fd, entry[1] if entry else 0, position):
            new_next = header.last_offset + 1  # of the last batch kept (a walk of one index interval)
        try:
            self.offset_index.truncate_to(new_next)
            self.time_index.truncate_to(new_next)
            self.txn_index.truncate_to(new_next)
            removed = self.size - position
            self.size = position
            os.ftruncate(self._fd, position)
        except OSError as exc:
            raise KafkaStorageError(f"truncating {self.log_path} failed: {exc}") from exc
        self.next_offset = new_next
        max_ts, max_off = self.time_index.last_entry if len(self.time_index) else (-1, -1)
        start = self.offset_index.last_position if len(self.offset_index) else 0
        for _pos, header in iter_file_headers(self._fd, start, position):
            if header.max_timestamp > max_ts:
                max_ts, max_off = header.max_timestamp, header.last_offset
        self.max_timestamp, self.offset_of_max_timestamp = max_ts, max_off
        self._bytes_since_index = position - start
        self._load_rolling_timestamp()
        if position == 0:
            self.created_ms = now_ms
        return removed

    def on_become_inactive(self) -> None:
        """Kafka appends the segment's max timestamp to the time index when it is rolled or closed."""
        if self.offset_of_max_timestamp >= 0 and not self.deleted:
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self.write_index_entries()

    # ---------------------------------------------------------------- reading (thread-safe)

    def read(self, position: int, size: int) -> bytes:
        return os.pread(self._fd, size, position)

    def iter_headers(self, start: int = 0, limit: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        return iter_file_headers(self._fd, start, self.size if limit is None else limit)

    def find_batch(self, offset: int, limit: int | None = None) -> tuple[int, BatchHeader] | None:
        """(position, header) of the first batch whose last offset >= `offset`, below `limit`."""
        limit = self.size if limit is None else limit
        for pos, header in iter_file_headers(self._fd, self.offset_index.lookup(offset, limit), limit):
            if header.last_offset >= offset:
                return pos, header
        return None

    def find_position(self, offset: int) -> int | None:
        found = self.find_batch(offset)
        return found[0] if found else None

    def read_batches(self, position: int, first_size: int, max_bytes: int, limit: int,
                     max_offset: int | None = None) -> bytes:
        """Whole batches from `position` (where a batch of `first_size` bytes starts) up to `max_bytes`
        and `limit`; the first batch is always returned whole (KIP-74). Stops before any batch whose
        base offset >= `max_offset`."""
        want = min(max(max_bytes, first_size), limit - position)
        buf = os.pread(self._fd, want, position)
        end, n = first_size, len(buf)
        while end < n:
            peek = peek_size(buf, end)
            if peek is None:
                break
            base, size, _magic = peek
            if end + size > n or (max_offset is not None and base >= max_offset):
                break
            end += size
        return buf if end == n else buf[:end]

    def batch_range(self, position: int, first: BatchHeader, max_bytes: int, limit: int,
                    max_offset: int | None = None) -> tuple[int, int]:
        """(size, last offset) of the bytes `read_batches` would return from `position` (where the
        batch `first` starts), from batch headers and the offset index only: whole batches up to
        `max_bytes` and `limit`, the first one whole even if larger (KIP-74), none whose base offset
        >= `max_offset`. The walk skips to the offset-index entry nearest the end, so it reads about
        two index intervals of headers however many bytes the range spans."""
        end, last = position + first.size, first.last_offset
        want_end = position + min(max(max_bytes, first.size), limit - position)
        if end >= want_end:
            return first.size, last
        # every batch at or before an entry with offset < max_offset is below max_offset
        top = (max_offset - 1) if max_offset is not None else 2**63
        start = end
        entry = self.offset_index.floor_entry(top, want_end)
        if entry is not None and entry[1] > end:
            stop = self._last_batch(entry[1], want_end, max_offset)
            if stop is not None:
                return stop[0] - position, stop[1]
            # the batch at the entry does not fit: the range ends where it starts, so find the
            # last offset of the batch before it, walking from the previous entry
            before = self.offset_index.floor_entry(top, entry[1] - 1)
            walk_from = before[1] if before is not None and before[1] > end else end
            if walk_from < entry[1]:
                stop = self._last_batch(walk_from, entry[1], None)
                if stop is not None:
                    last = stop[1]
            return entry[1] - position, last
        stop = self._last_batch(start, want_end, max_offset)
        return (stop[0] - position, stop[1]) if stop is not None else (first.size, last)

    def _last_batch(self, start: int, limit: int, max_offset: int | None) -> tuple[int, int] | None:
        """(end position, last offset) of the last whole batch in [start, limit) of the run starting
        at `start` whose base offsets stay below `max_offset`; None if the first does not qualify."""
        found = None
        for pos, header in iter_file_headers(self._fd, start, limit, RANGE_WALK_CHUNK):
            if max_offset is not None and header.base_offset >= max_offset:
                break
            found = (pos + header.size, header.last_offset)
        return found

    def open_range(self, position: int, size: int, first_offset: int, last_offset: int) -> LogRange:
        """A LogRange over a dup of this segment's descriptor (the caller owns and closes it)."""
        try:
            fd = os.dup(self._fd)
        except OSError as exc:
            raise KafkaStorageError(f"cannot read {self.log_path}: {exc}") from exc
        return LogRange(fd, position, size, first_offset, last_offset)

    def read_batch(self, position: int, header: BatchHeader) -> bytes:
        return os.pread(self._fd, header.size, position)

    def find_offset_by_timestamp(self, timestamp: int, min_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with offset >= `min_offset` and timestamp >= `timestamp`."""
        from kafka.record.default_records import DefaultRecordBatch  # decodes every codec; off the hot path
        limit = self.size
        start = max(min_offset, self.base_offset)
        before = self.time_index.offset_before(timestamp)
        if before is not None:
            start = max(start, before + 1)
        for pos, header in iter_file_headers(self._fd, self.offset_index.lookup(start, limit), limit):
            if header.last_offset < start or header.max_timestamp < timestamp:
                continue
            for record in DefaultRecordBatch(self.read_batch(pos, header)):
                if record.offset >= start and record.timestamp >= timestamp:
                    return record.offset, record.timestamp
        return None

    def exact_max_timestamp(self) -> tuple[int, int]:
        """(offset, timestamp) of the first record carrying the segment's max timestamp; (-1, -1) if none."""
        from kafka.record.default_records import DefaultRecordBatch
        if self.offset_of_max_timestamp < 0:
            return -1, -1
        found = self.find_batch(self.offset_of_max_timestamp)
        if found is not None:
            for record in DefaultRecordBatch(self.read_batch(*found)):
                if record.timestamp == self.max_timestamp:
                    return record.offset, record.timestamp
        return self.offset_of_max_timestamp, self.max_timestamp

    # ---------------------------------------------------------------- misc

    @property
    def largest_timestamp(self) -> int:
        """What retention.ms compares against: the max record timestamp, else the file mtime."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return os.stat(self.log_path).st_mtime_ns // 1_000_000 if not self.deleted else 0

    def time_waited_for_roll(self, now_ms: int, message_timestamp: int) -> int:
        """Kafka: message time minus the first batch's timestamp, else time since the segment was created."""
        if self.rolling_timestamp is not None and self.rolling_timestamp >= 0:
            return message_timestamp - self.rolling_timestamp
        return max(now_ms - self.created_ms, 0)

    def flush(self) -> None:
        if self.deleted:
            return
        os.fsync(self._fd)
        self.write_index_entries()
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        if self._fd >= 0:
            self.on_become_inactive()
            os.close(self._fd)
            self._fd = -1
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()

    def unlink(self) -> None:
        """Remove the files but keep the descriptors open, so in-flight reads still succeed."""
        self.deleted = True
        for path in (self.log_path, self.offset_index.path, self.time_index.path, self.txn_index.path):
            path.unlink(missing_ok=True)

    def delete(self) -> None:
        self.unlink()
        self.close()
