"""Durable state of a quorum voter in a directory (`__cluster_metadata-0/` in a node's metadata log dir):

* `quorum-state` — the epoch and the vote given in it (JSON, as Kafka's file of that name), replaced
  atomically (temp file, fsync, rename, directory fsync) before anything that depends on it is sent;
* `quorum.log` — the replicated entries, each framed as
  `length:u32 crc32c:u32 epoch:u32 payload` (crc over epoch and payload, payload = JSON).
  Appends are written and fsynced before `append` returns; a torn or corrupt tail (a crash mid-write)
  is cut off at the first frame that does not check on open — those entries were never acknowledged,
  since acknowledging follows the fsync. A log whose prefix was dropped (KIP-630) begins with a header
  frame (epoch 0xFFFFFFFF, payload `{"logStartOffset": S, "startEpoch": E}`);
* `%020d-%010d.checkpoint` (end offset, epoch) — snapshots of the committed state (Kafka's naming),
  `crc32c:u32 JSON`, written atomically. Crash safety: a snapshot is complete on disk before the log
  prefix it covers is removed (the log is rewritten to a temp file and renamed over the old one), and
  a follower's installed snapshot before its log is reset. On open the newest snapshot that checks is
  used; the log is cut to start at it (or reset to it when the log does not reach it or disagrees with
  its epoch — a crash mid-install); older snapshots and temp files are removed.
"""
from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

import crc32c

from minikafka.storage.partition_metadata import atomic_write
from minikafka.raft.log import LEADER_CHANGE, Entry, QuorumLog
from minikafka.raft.core import PersistentState

_FRAME = struct.Struct(">III")  # length (of crc + epoch + payload), crc32c, epoch
STATE_FILE = "quorum-state"
LOG_FILE = "quorum.log"
HEADER_EPOCH = 0xFFFFFFFF
SNAPSHOT_SUFFIX = ".checkpoint"


def snapshot_name(offset: int, epoch: int) -> str:
    return f"{offset:020d}-{epoch:010d}{SNAPSHOT_SUFFIX}"


def _frame(epoch: int, payload: Any) -> bytes:
    body = struct.pack(">I", epoch) + _encode_payload(payload)
    return struct.pack(">II", len(body) + 4, crc32c.crc32c(body)) + body


def write_snapshot(directory: Path, offset: int, epoch: int, state: Any) -> Path:
    """The snapshot file, complete and fsynced (temp file, rename, directory fsync) when this returns."""
    data = json.dumps(state, separators=(",", ":")).encode()
    path = directory / snapshot_name(offset, epoch)
    atomic_write(path, struct.pack(">I", crc32c.crc32c(data)) + data)
    return path


def read_snapshots(directory: Path) -> list[tuple[int, int, Path]]:
    """(offset, epoch, path) of the snapshot files by name, newest first (unchecked)."""
    found = []
    for path in directory.glob("*" + SNAPSHOT_SUFFIX):
        try:
            offset, epoch = (int(x) for x in path.name[:-len(SNAPSHOT_SUFFIX)].split("-"))
        except ValueError:
            continue
        found.append((offset, epoch, path))
    return sorted(found, reverse=True)


def load_snapshot(path: Path) -> Any:
    """The state in a snapshot file; ValueError if it does not check (torn or corrupt)."""
    data = path.read_bytes()
    if len(data) < 4 or struct.unpack_from(">I", data)[0] != crc32c.crc32c(data[4:]):
        raise ValueError(f"{path.name}: checksum mismatch")
    return json.loads(data[4:])


def _encode_payload(payload: Any) -> bytes:
    return json.dumps(list(payload) if isinstance(payload, tuple) else payload, separators=(",", ":")).encode()


def _decode_payload(data: bytes) -> Any:
    value = json.loads(data)
    return tuple(value) if isinstance(value, list) else value


class FileQuorumLog(QuorumLog):
    """A QuorumLog whose appends and truncations reach the disk before they return."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offsets: list[int] = []  # file position of each entry's frame
        self._header = (0, 0)
        entries, good_end = self._scan(path)
        super().__init__(entries, *self._header)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        if os.fstat(self._fd).st_size != good_end:
            os.ftruncate(self._fd, good_end)
            os.fsync(self._fd)
        self._size = good_end

    def _scan(self, path: Path) -> tuple[list[Entry], int]:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return [], 0
        entries, pos = [], 0
        while pos + _FRAME.size <= len(data):
            length, crc, epoch = _FRAME.unpack_from(data, pos)
            end = pos + 4 + length
            if length < 8 or end > len(data) or crc32c.crc32c(data[pos + 8:end]) != crc:
                break
            body = data[pos + 8:end]
            try:
                payload = _decode_payload(body[4:])
            except ValueError:
                break
            if epoch == HEADER_EPOCH:
                if pos != 0:
                    break
                self._header = (int(payload["logStartOffset"]), int(payload["startEpoch"]))
                pos = end
                continue
            entry = Entry(epoch, payload)
            if entries and epoch < entries[-1].epoch:
                break
            entries.append(entry)
            self._offsets.append(pos)
            pos = end
        return entries, pos

    def append(self, entry: Entry) -> int:
        offset = self.end_offset
        self.extend((entry,))
        return offset

    def extend(self, entries) -> None:
        """All frames in one write and one fsync; the entries are in memory only once it returned."""
        if not entries:
            return
        last = self.last_epoch
        frames, offsets, pos = [], [], self._size
        for entry in entries:
            if entry.epoch < last:
                raise ValueError(f"epoch {entry.epoch} after {last}")
            last = entry.epoch
            frame = _frame(entry.epoch, entry.payload)
            frames.append(frame)
            offsets.append(pos)
            pos += len(frame)
        data = b"".join(frames)
        written = 0
        while written < len(data):
            written += os.pwrite(self._fd, data[written:], self._size + written)
        os.fsync(self._fd)
        self.entries.extend(entries)
        self._offsets.extend(offsets)
        self._size = pos

    def truncate_to(self, offset: int) -> None:
        if offset >= self.end_offset:
            return
        super().truncate_to(offset)
        i = offset - self.start_offset
        self._size = self._offsets[i]
        del self._offsets[i:]
        os.ftruncate(self._fd, self._size)
        os.fsync(self._fd)

    def bytes_between(self, start: int, end: int) -> int:
        """Bytes the entries in [start, end) take in the file (the snapshot trigger)."""
        def pos(offset: int) -> int:
            i = offset - self.start_offset
            return self._offsets[i] if i < len(self._offsets) else self._size
        return pos(end) - pos(start)

    def drop_prefix(self, offset: int) -> None:
        """Rewrite the file as header + the entries from `offset` on (temp file, rename): a crash leaves
        either the old file or the new one. The caller wrote the snapshot at `offset` before."""
        if offset <= self.start_offset:
            return
        super().drop_prefix(offset)
        self._rewrite()

    def reset_to(self, offset: int, epoch: int) -> None:
        super().reset_to(offset, epoch)
        self._rewrite()

    def _rewrite(self) -> None:
        header = _frame(HEADER_EPOCH, {"logStartOffset": self.start_offset, "startEpoch": self.start_epoch})
        frames = [_frame(e.epoch, e.payload) for e in self.entries]
        offsets, pos = [], len(header)
        for frame in frames:
            offsets.append(pos)
            pos += len(frame)
        atomic_write(self.path, header + b"".join(frames))
        os.close(self._fd)
        self._fd = os.open(self.path, os.O_RDWR, 0o644)
        self._offsets, self._size = offsets, pos

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class FilePersistentState(PersistentState):
    """Epoch and vote in `quorum-state`, entries in `quorum.log`, both under `directory`."""

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        epoch, voted_for = 0, None
        try:
            state = json.loads((directory / STATE_FILE).read_text())
            epoch, voted_for = int(state["leaderEpoch"]), state.get("votedId")
            voted_for = None if voted_for in (None, -1) else int(voted_for)
        except FileNotFoundError:
            pass
        log = FileQuorumLog(directory / LOG_FILE)
        super().__init__(epoch, voted_for, log)
        for tmp in [*directory.glob("*.tmp"), *directory.glob("*.download")]:  # a crash mid-write / mid-download
            tmp.unlink()
        for offset, snap_epoch, path in read_snapshots(directory):
            if self.snapshot is not None:
                path.unlink()  # older than the one in use
                continue
            try:
                state = load_snapshot(path)
            except (ValueError, OSError):
                path.unlink()  # torn: written after the last one that checks, so that one covers the log
                continue
            self.snapshot = (offset, snap_epoch, state)
            self.recover()
        if self.snapshot is None and log.start_offset > 0:
            raise ValueError(f"{directory}: the log starts at {log.start_offset} but no snapshot checks")

    def save_snapshot(self, offset: int, epoch: int, state: Any, drop_prefix: bool = True) -> None:
        """(A file of that name already there was written by the caller — complete, as atomic_write.)"""
        previous = self.snapshot
        if not (self.directory / snapshot_name(offset, epoch)).exists():
            write_snapshot(self.directory, offset, epoch, state)
        super().save_snapshot(offset, epoch, state, drop_prefix)
        self._remove_older(previous, offset)

    def install_snapshot(self, offset: int, epoch: int, state: Any) -> None:
        previous = self.snapshot
        if not (self.directory / snapshot_name(offset, epoch)).exists():
            write_snapshot(self.directory, offset, epoch, state)
        super().install_snapshot(offset, epoch, state)
        self._remove_older(previous, offset)

    def _remove_older(self, previous: tuple[int, int, Any] | None, offset: int) -> None:
        if previous is not None and previous[0] != offset:
            (self.directory / snapshot_name(previous[0], previous[1])).unlink(missing_ok=True)

    def save(self, epoch: int, voted_for: int | None) -> None:
        if (epoch, voted_for) == (self.epoch, self.voted_for):
            return
        state = {"leaderEpoch": epoch, "votedId": -1 if voted_for is None else voted_for, "data_version": 1}
        atomic_write(self.directory / STATE_FILE, json.dumps(state).encode())
        self.epoch, self.voted_for = epoch, voted_for

    def close(self) -> None:
        self.log.close()  # type: ignore[attr-defined]


__all__ = ["FilePersistentState", "FileQuorumLog", "LEADER_CHANGE", "load_snapshot", "snapshot_name",
           "write_snapshot"]
