"""Durable state of a quorum voter in a directory (`__cluster_metadata-0/` in a node's metadata log dir):

* `quorum-state` — the epoch and the vote given in it (JSON, as Kafka's file of that name), replaced
  atomically (temp file, fsync, rename, directory fsync) before anything that depends on it is sent;
* `quorum.log` — the replicated entries, each framed as
  `length:u32 crc32c:u32 epoch:u32 payload` (crc over epoch and payload, payload = JSON).
  Appends are written and fsynced before `append` returns; a torn or corrupt tail (a crash mid-write)
  is cut off at the first frame that does not check on open — those entries were never acknowledged,
  since acknowledging follows the fsync.
"""
from __future__ import annotations

import json
import os
import struct
from pathlib import Path
from typing import Any

import crc32c

from ...storage.partition_metadata import atomic_write
from .log import LEADER_CHANGE, Entry, QuorumLog
from .raft import PersistentState

_FRAME = struct.Struct(">III")  # length (of crc + epoch + payload), crc32c, epoch
STATE_FILE = "quorum-state"
LOG_FILE = "quorum.log"


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
        entries, good_end = self._scan(path)
        super().__init__(entries)
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
                entry = Entry(epoch, _decode_payload(body[4:]))
            except ValueError:
                break
            if entries and epoch < entries[-1].epoch:
                break
            entries.append(entry)
            self._offsets.append(pos)
            pos = end
        return entries, pos

    def append(self, entry: Entry) -> int:
        offset = len(self.entries)
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
            body = struct.pack(">I", entry.epoch) + _encode_payload(entry.payload)
            frame = struct.pack(">II", len(body) + 4, crc32c.crc32c(body)) + body
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
        if offset >= len(self.entries):
            return
        super().truncate_to(offset)
        self._size = self._offsets[offset]
        del self._offsets[offset:]
        os.ftruncate(self._fd, self._size)
        os.fsync(self._fd)

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
        super().__init__(epoch, voted_for, FileQuorumLog(directory / LOG_FILE))

    def save(self, epoch: int, voted_for: int | None) -> None:
        if (epoch, voted_for) == (self.epoch, self.voted_for):
            return
        state = {"leaderEpoch": epoch, "votedId": -1 if voted_for is None else voted_for, "data_version": 1}
        atomic_write(self.directory / STATE_FILE, json.dumps(state).encode())
        self.epoch, self.voted_for = epoch, voted_for

    def close(self) -> None:
        self.log.close()  # type: ignore[attr-defined]


__all__ = ["FilePersistentState", "FileQuorumLog", "LEADER_CHANGE"]
