"""Reads of a partition log, from a snapshot (any thread).

Invariant: a `LogSnapshot` is taken in the order the threading rule of storage/partition_log.py needs
(log end offset first, then the published segment tuple), and each segment read stops at the segment's
size as committed when it is looked at, so nothing here sees bytes that are not published. Nothing
here writes.
"""
from __future__ import annotations

from bisect import bisect_right
from typing import NamedTuple

from minikafka.protocol.record_batch import BatchHeader
from minikafka.storage.errors import OffsetOutOfRangeError
from minikafka.storage.segment import LogRange, LogSegment
from minikafka.storage.txn_index import AbortedTxn


class LogSnapshot(NamedTuple):
    name: str  # `<topic>-<partition>`, for messages
    log_start_offset: int
    log_end_offset: int
    segments: tuple[LogSegment, ...]
    bases: tuple[int, ...]  # the segments' base offsets


class Located(NamedTuple):
    segment: LogSegment
    position: int
    header: BatchHeader  # of the first batch whose last offset >= the offset asked for
    limit: int  # the segment's committed size when it was looked at


def locate(snap: LogSnapshot, offset: int) -> Located | None:
    """The first batch whose last offset >= `offset`; None at the log end. Raises OffsetOutOfRangeError
    outside [log start, log end]."""
    start, leo = snap.log_start_offset, snap.log_end_offset
    if offset < start or offset > leo:
        raise OffsetOutOfRangeError(f"offset {offset} not in [{start}, {leo}] for {snap.name}")
    if offset == leo:
        return None
    i = bisect_right(snap.bases, offset) - 1
    if i < 0:
        raise OffsetOutOfRangeError(f"offset {offset} was deleted from {snap.name}")
    for seg in snap.segments[i:]:
        limit = seg.size
        found = seg.find_batch(offset, limit)
        if found is not None:
            return Located(seg, found[0], found[1], limit)
    return None


def read(snap: LogSnapshot, offset: int, max_bytes: int, max_offset: int | None, min_one: bool) -> bytes:
    """Whole batches starting with the one containing `offset`, from one segment only, up to `max_bytes`
    (the first batch whole even if larger, unless not `min_one`: KIP-74 lets only the first partition of
    a response exceed the limit) and before `max_offset`."""
    found = locate(snap, offset)
    if found is None:
        return b""
    seg, pos, header, limit = found
    if max_offset is not None and header.base_offset >= max_offset:
        return b""
    if not min_one and header.size > max_bytes:
        return b""
    return seg.read_batches(pos, header.size, max_bytes, limit, max_offset)


def read_ranges(snap: LogSnapshot, offset: int, max_bytes: int, max_offset: int | None,
                min_one: bool) -> list[LogRange]:
    """Where the bytes `read` would return live, without reading them: one LogRange per segment touched
    (at most one, as Kafka returns batches from one segment), each over its own dup of the segment's
    descriptor, which the caller closes. Same rules as `read`, and nothing at or past the log end. Only
    batch headers and the offset index are read."""
    found = locate(snap, offset)
    if found is None:
        return []
    seg, pos, header, limit = found
    leo = snap.log_end_offset
    stop = leo if max_offset is None else min(max_offset, leo)
    if header.base_offset >= stop:
        return []
    if not min_one and header.size > max_bytes:
        return []
    size, last = seg.batch_range(pos, header, max_bytes, limit, stop)
    return [seg.open_range(pos, size, header.base_offset, last)]


def offset_for_timestamp(snap: LogSnapshot, timestamp: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the earliest record at/after the log start with timestamp >= `timestamp`."""
    start = snap.log_start_offset
    for seg in snap.segments:
        if seg.next_offset <= start or seg.max_timestamp < timestamp:
            continue
        found = seg.find_offset_by_timestamp(timestamp, start)
        if found is not None:
            return found
    return None


def max_timestamp(segments: tuple[LogSegment, ...]) -> tuple[int, int]:
    """(offset, timestamp) of the first record carrying the largest timestamp; (-1, -1) if none."""
    best: LogSegment | None = None
    for seg in segments:
        if seg.max_timestamp >= 0 and (best is None or seg.max_timestamp > best.max_timestamp):
            best = seg
    return best.exact_max_timestamp() if best is not None else (-1, -1)


def collect_aborted_txns(segments: tuple[LogSegment, ...], bases: tuple[int, ...], start_offset: int,
                         upper_bound: int) -> list[AbortedTxn]:
    """Aborted transactions overlapping [start_offset, upper_bound), from the .txnindex of the segment
    holding `start_offset` onwards (Kafka collectAbortedTransactions)."""
    out: list[AbortedTxn] = []
    for seg in segments[max(bisect_right(bases, start_offset) - 1, 0):]:
        found, complete = seg.txn_index.collect(start_offset, upper_bound)
        out.extend(found)
        if complete:
            break
    return out
