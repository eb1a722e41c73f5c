"""Opening a partition directory (Kafka's LogLoader): its segments recovered, its log start offset, its
leader epoch cache brought in line with the log, and its producer state rebuilt.

Invariant: what these functions leave on disk is a prefix of what they found (strays and orphan indexes
go, a torn tail is truncated, segments after a truncated one are deleted), so a crash while loading
leaves a log the next load recovers the same way. They run before the log serves anything: no locking.
"""
from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path
from typing import Callable, NamedTuple

from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.leader_epoch_cache import LeaderEpochCache
from minikafka.storage.partition_metadata import atomic_write
from minikafka.storage.producer_state import CompletedTxn, ProducerStateManager
from minikafka.storage.segment import SEGMENT_SUFFIXES, LogSegment, segment_name
from minikafka.storage.txn_markers import parse_marker

log = logging.getLogger(__name__)

LOG_START_OFFSET_FILE = "log-start-offset-checkpoint"
STRAY_SUFFIXES = (".cleaned", ".swap", ".deleted", ".tmp")


class LoadedSegments(NamedTuple):
    segments: list[LogSegment]  # never empty: an empty log has one empty segment at its start offset
    log_end_offset: int
    log_start_offset: int  # max(checkpoint, first segment's base offset), at most the log end offset


def load_segments(directory: Path, clean_shutdown: bool, new_segment: Callable[[int, int], LogSegment],
                  epochs: LeaderEpochCache | None, now_ms: int, log_fields: dict) -> LoadedSegments:
    """The segments of `directory`, in offset order. Without a clean shutdown the last segment is recovered
    (batches checked, a torn tail cut), as is any segment whose files do not check out; a segment cut short
    ends the log (later ones are deleted). `epochs` (None while it is to be rebuilt from the log) re-derives
    the entries of a recovered segment from its batches."""
    directory.mkdir(parents=True, exist_ok=True)
    names = os.listdir(directory)  # one listing for segments, orphan indexes and strays
    bases: list[int] = []
    for name in names:
        if name.endswith(STRAY_SUFFIXES):
            path = directory / name
            log.info("deleting stray file %s", path)
            shutil.rmtree(path) if path.is_dir() else path.unlink()
        elif name.endswith(".log") and len(name) == 24 and name[:20].isdigit():
            bases.append(int(name[:20]))
    bases.sort()
    known = {segment_name(b) for b in bases}
    for name in names:
        for suffix in SEGMENT_SUFFIXES[1:]:
            if name.endswith(suffix) and not name.startswith(".") and name[:-len(suffix)] not in known:
                log.info("deleting orphan index %s", directory / name)
                (directory / name).unlink()
    segments: list[LogSegment] = []
    for i, base in enumerate(bases):
        seg = new_segment(base, now_ms)
        last = i == len(bases) - 1
        problem = "no clean shutdown" if last and not clean_shutdown else seg.load(verify_tail=last)
        if segments and base < segments[-1].next_offset:
            raise KafkaStorageError(f"{seg.log_path} overlaps the previous segment")
        segments.append(seg)
        if problem:
            runs: list[tuple[int, int]] = []  # (epoch, base offset) where the batches' epoch changes
            truncated = seg.recover(lambda h: (not runs or runs[-1][0] != h.partition_leader_epoch)
                                    and runs.append((h.partition_leader_epoch, h.base_offset)))
            if (last or truncated) and epochs is not None:
                _reassign_epochs(epochs, seg.base_offset, runs)
            if problem != "no clean shutdown" or truncated:
                log.warning("recovered %s (%s): truncated %d bytes", seg.log_path, problem, truncated,
                            extra=log_fields)
            if truncated and not last:
                for later in bases[i + 1:]:
                    log.warning("deleting %s after a truncated segment", segment_name(later))
                    new_segment(later, now_ms).delete()
                break
    checkpoint = read_log_start_offset(directory)
    if not segments:
        segments.append(new_segment(checkpoint, now_ms))
    leo = segments[-1].next_offset
    return LoadedSegments(segments, leo, min(max(checkpoint, segments[0].base_offset), leo))


def _reassign_epochs(cache: LeaderEpochCache, base_offset: int, runs: list[tuple[int, int]]) -> None:
    """A recovered segment (from `base_offset`) re-derives the epoch entries from its batches: an entry a
    crash kept from the disk comes back, entries past its end go."""
    cache.truncate_from_end(base_offset)
    for epoch, start in runs:
        if epoch > cache.latest_epoch:
            cache.assign(epoch, start)


def settle_epoch_cache(cache: LeaderEpochCache, rebuild: bool, segments: tuple[LogSegment, ...],
                       log_start: int, leo: int, name: str, log_fields: dict) -> None:
    """Bring the leader epoch cache in line with the loaded log: with `rebuild` (no checkpoint file),
    rebuild it from the batch headers (the file is written even if no batch has an epoch); then drop
    entries past the log end and before the log start."""
    if rebuild and leo > log_start:
        t0 = time.monotonic()
        for seg in segments:
            if seg.next_offset <= log_start:
                continue
            for _pos, header in seg.iter_headers():
                if header.last_offset >= log_start and header.partition_leader_epoch > cache.latest_epoch:
                    cache.assign(header.partition_leader_epoch, max(header.base_offset, log_start))
        if not cache.epoch_entries():
            cache.write()
        log.info("rebuilt the leader epoch cache of %s from the log in %.0f ms: %s", name,
                 (time.monotonic() - t0) * 1000, cache.epoch_entries(), extra=log_fields)
    cache.truncate_from_end(leo)
    cache.truncate_from_start(log_start)


def replay_producer_state(ps: ProducerStateManager, segments: tuple[LogSegment, ...], log_start: int, leo: int,
                          now_ms: int, complete_txn: Callable[[LogSegment, CompletedTxn], None],
                          name: str, log_fields: dict) -> int:
    """Producer state from the newest valid snapshot at or below the log end, then the batch headers
    after it (Kafka loadProducerState); without a usable snapshot, from the log start. `complete_txn`
    gets each transaction a replayed marker ends. Returns how many batches were replayed."""
    t0 = time.monotonic()
    ps.scan_snapshots()
    snapshot = ps.load_latest_snapshot(log_start, leo, now_ms)
    start = ps.last_map_offset
    replayed = 0
    segments[-1].txn_index.truncate_to(leo)  # entries of markers lost to a torn tail
    for seg in segments:
        if seg.next_offset <= start:
            continue
        found = seg.find_batch(start) if start > seg.base_offset else None
        for pos, header in seg.iter_headers(found[0] if found else 0):
            if header.last_offset >= start:
                marker = parse_marker(seg.read_batch(pos, header)) if header.is_control else None
                completed = ps.replay(header, marker)
                if completed is not None:
                    complete_txn(seg, completed)
                replayed += 1
    ps.update_map_end_offset(leo)
    if snapshot is not None or replayed:
        log.info("producer state of %s: %s, replayed %d batches from offset %d in %.0f ms (%d producer ids)",
                 name, f"snapshot at offset {snapshot}" if snapshot is not None else "no snapshot",
                 replayed, start, (time.monotonic() - t0) * 1000, len(ps.producers), extra=log_fields)
    return replayed


def read_log_start_offset(directory: Path) -> int:
    """The log start offset checkpointed by DeleteRecords (Kafka's checkpoint format, one entry); 0 if
    there is none or it cannot be read."""
    path = directory / LOG_START_OFFSET_FILE
    try:
        lines = path.read_text("ascii").split("\n")
        if lines[0].strip() == "0" and int(lines[1]) == 1:
            return max(int(lines[2].split()[-1]), 0)
    except FileNotFoundError:
        return 0
    except (ValueError, IndexError, UnicodeDecodeError):
        pass
    log.warning("ignoring unreadable %s", path)
    return 0


def write_log_start_offset(directory: Path, topic: str, partition: int, offset: int) -> None:
    atomic_write(directory / LOG_START_OFFSET_FILE, f"0\n1\n{topic} {partition} {offset}\n".encode())
