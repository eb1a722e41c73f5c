"""Which segments retention deletes (Kafka's deletableSegments and its three breach rules).

Invariant: only a prefix of the log goes, never a segment holding offsets at or above the high watermark,
never an empty active segment; the caller (PartitionLog) rolls a non-empty active segment before it
deletes it, and moves the log start offset to the first segment kept.
"""
from __future__ import annotations

from typing import Callable, Iterator

from minikafka.storage.log_config import LogConfig
from minikafka.storage.segment import LogSegment

Breach = Callable[[LogSegment, "LogSegment | None"], bool]  # (segment, the next one or None) -> delete it


def deletable_prefix(segments: list[LogSegment], leo: int, high_watermark: int, breach: Breach) -> list[LogSegment]:
    """The longest prefix of `segments` whose every segment satisfies `breach` and lies below the high
    watermark; an empty active segment ends it."""
    doomed: list[LogSegment] = []
    for i, seg in enumerate(segments):
        nxt = segments[i + 1] if i + 1 < len(segments) else None
        upper = nxt.base_offset if nxt is not None else leo
        if nxt is None and seg.size == 0:
            break
        if high_watermark < upper or not breach(seg, nxt):
            break
        doomed.append(seg)
    return doomed


def below_log_start(log_start: Callable[[], int]) -> Breach:
    """A segment wholly below the log start offset (DeleteRecords moved it past)."""
    return lambda seg, nxt: nxt is not None and nxt.base_offset <= log_start()


def retention_breaches(cfg: LogConfig, now_ms: int, size_bytes: Callable[[], int]) -> Iterator[Breach]:
    """With cleanup.policy delete: retention.ms (the segment's largest timestamp too old), then
    retention.bytes (the oldest segments while the log stays at or above the limit without them; the
    size is taken when this rule's turn comes, after the first rule's deletions)."""
    if not cfg.delete_enabled:
        return
    if cfg.retention_ms >= 0:
        yield lambda seg, nxt: now_ms - seg.largest_timestamp > cfg.retention_ms
    if cfg.retention_bytes >= 0:
        excess = size_bytes() - cfg.retention_bytes

        def over_size(seg: LogSegment, nxt: LogSegment | None) -> bool:
            nonlocal excess
            if excess - seg.size >= 0:
                excess -= seg.size
                return True
            return False
        yield over_size
