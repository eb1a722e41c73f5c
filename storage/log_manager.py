"""LogManager: every PartitionLog under a set of log directories.

Clean shutdown: `close()` writes `.kafka_cleanshutdown` in each log dir after flushing and closing
all logs; `load()` reads it (clean => cheap tail check of each last segment instead of a full
CRC scan) and removes it once loaded, so a later crash is detected. Topic-level metadata (ids,
configs, partition counts) belongs to the broker's catalog; storage only writes partition.metadata.

Creating and deleting many partitions is split so the file work can run in a worker thread while the
owner (event-loop) thread keeps serving: `assign_dirs` (owner: picks and reserves a log dir per
partition), `build` (any thread: directory, segment files, partition.metadata; nothing registered),
`register` (owner), and for deletion `unregister` (owner) then `discard` (any thread: close, rename to
`-delete`, remove). Built but unregistered directories are invisible to the manager; the broker's
catalog decides on the next `load(keep=...)` whether such a directory belongs to a topic.
"""
from __future__ import annotations

import json
import logging
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Callable, Iterable

from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.log_config import LogConfig
from minikafka.storage.partition_log import PartitionLog, parse_partition_dir
from minikafka.storage.partition_metadata import (
    PARTITION_METADATA_FILE,
    atomic_write,
    fsync_dir,
    topic_id_to_str,
    write_partition_metadata,
)

log = logging.getLogger(__name__)


def write_partition_metadata_fast(directory: Path, topic_id: bytes) -> None:
    """partition.metadata (same content as `write_partition_metadata`) without fsyncs: for partitions
    a later commit record makes exist (see `LogManager.build`)."""
    path = Path(directory) / PARTITION_METADATA_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(f"version: 0\ntopic_id: {topic_id_to_str(topic_id)}\n".encode("ascii"))
    os.replace(tmp, path)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
DELETE_DIR_SUFFIX = "-delete"
STRAY_DIR_SUFFIX = "-stray"

TopicPartition = tuple[str, int]


class LogManager:
    def __init__(self, log_dirs: Iterable[Path], default_config: LogConfig,
                 clock: Callable[[], float] = time.time) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        if not self.log_dirs:
            raise ValueError("at least one log dir is required")
        self.default_config = default_config
        self._clock = clock
        self._logs: dict[TopicPartition, PartitionLog] = {}
        # partitions per log dir, registered + reserved by assign_dirs (kept up to date: counting
        # on every creation made creating n partitions O(n^2))
        self._dir_counts: dict[Path, int] = {d: 0 for d in self.log_dirs}
        self.loaded = False

    def load(self, config_for: Callable[[str], LogConfig] | None = None,
             keep: Callable[[str, int], bool] | None = None) -> list[PartitionLog]:
        """Open every `<topic>-<partition>` directory (`config_for(topic)` or the default config).

        Leftover `-delete` directories are removed, `-stray` ones are left alone. With `keep`, a
        partition directory for which `keep(topic, partition)` is false (left by a creation or
        deletion that a crash interrupted) is removed without being opened.
        """
        loaded: list[PartitionLog] = []
        self.loaded = True
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            marker = log_dir / CLEAN_SHUTDOWN_FILE
            clean = marker.exists()
            unwanted = 0
            for path in sorted(log_dir.iterdir()):
                if not path.is_dir() or path.name.startswith("."):
                    continue
                if path.name.endswith(DELETE_DIR_SUFFIX):
                    log.debug("removing deleted partition directory %s", path)
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                if path.name.endswith(STRAY_DIR_SUFFIX):
                    continue
                try:
                    topic, partition = parse_partition_dir(path.name)
                except ValueError:
                    continue
                if keep is not None and not keep(topic, partition):
                    unwanted += 1
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                if (topic, partition) in self._logs:
                    raise KafkaStorageError(f"{topic}-{partition} exists in more than one log dir")
                config = config_for(topic) if config_for is not None else self.default_config
                plog = PartitionLog(path, config, clock=self._clock, clean_shutdown=clean)
                self._logs[(topic, partition)] = plog
                self._dir_counts[log_dir] = self._dir_counts.get(log_dir, 0) + 1
                loaded.append(plog)
            if unwanted:
                log.warning("removed %d partition directories of %s not in the topic catalog", unwanted, log_dir)
                fsync_dir(log_dir)
            if clean:
                marker.unlink()
                fsync_dir(log_dir)
        return loaded

    def get(self, topic: str, partition: int) -> PartitionLog | None:
        return self._logs.get((topic, partition))

    def partitions(self) -> list[TopicPartition]:
        return sorted(self._logs)

    def logs(self) -> list[PartitionLog]:
        return list(self._logs.values())

    @property
    def partition_count(self) -> int:
        """Partitions registered or reserved by `assign_dirs` and not yet released."""
        return sum(self._dir_counts.values())

    def create(self, topic: str, partition: int, config: LogConfig | None = None,
               topic_id: bytes | None = None) -> PartitionLog:
        """Create (or return the existing) log in the log dir holding the fewest partitions, all in
        the calling thread (see the module docstring for the split version)."""
        existing = self._logs.get((topic, partition))
        if existing is not None:
            return existing
        (directory,) = self.assign_dirs(topic, [partition])
        try:
            plog = self.build(directory, config, topic_id, durable=True)
        except BaseException:
            self.release([directory])
            raise
        fsync_dir(directory.parent)
        self.register(plog)
        return plog

    # -- creation in steps -----------------------------------------------------------------------
    def assign_dirs(self, topic: str, partitions: Iterable[int]) -> list[Path]:
        """The directory each new partition goes to (log dir with the fewest partitions), reserved
        until `register` or `release`. Owner thread; no file work."""
        out = []
        for partition in partitions:
            log_dir = min(self.log_dirs, key=lambda d: self._dir_counts[d])
            self._dir_counts[log_dir] += 1
            out.append(log_dir / f"{topic}-{partition}")
        return out

    def release(self, directories: Iterable[Path]) -> None:
        """Give back reservations of `assign_dirs` whose partitions were not registered."""
        for directory in directories:
            if self._dir_counts.get(directory.parent, 0) > 0:
                self._dir_counts[directory.parent] -= 1

    def build(self, directory: Path, config: LogConfig | None = None, topic_id: bytes | None = None, *,
              durable: bool = False) -> PartitionLog:
        """Create the partition's directory, empty segment files and partition.metadata, and open it;
        nothing is registered (any thread). Not `durable`: no fsync, the caller's commit record (the
        topic catalog) is what makes the partition exist, and the catalog's load re-creates what a
        power loss took (a missing directory, an unreadable partition.metadata)."""
        if directory.exists():  # a leftover the catalog does not know (load removes those): start empty
            shutil.rmtree(directory)
        try:
            plog = PartitionLog(directory, config or self.default_config, clock=self._clock, clean_shutdown=True)
        except BaseException:  # e.g. EMFILE halfway: leave no half-made directory behind
            shutil.rmtree(directory, ignore_errors=True)
            raise
        if topic_id is not None:
            try:
                if durable:
                    write_partition_metadata(directory, topic_id)
                else:
                    write_partition_metadata_fast(directory, topic_id)
            except BaseException:
                plog.close()
                shutil.rmtree(directory, ignore_errors=True)
                raise
            plog.topic_id = topic_id
        return plog

    def register(self, plog: PartitionLog) -> None:
        """Make a built log visible (owner thread); its directory was reserved by `assign_dirs`."""
        self._logs[(plog.topic, plog.partition)] = plog

    def unregister(self, topic: str, partition: int) -> PartitionLog | None:
        """Forget the log (owner thread); the caller closes and removes it with `discard`."""
        plog = self._logs.pop((topic, partition), None)
        if plog is not None:
            plog.drain_writes()  # its writes are published here, not in the thread that discards it
            self.release([plog.dir])
        return plog

    @staticmethod
    def discard(plog: PartitionLog, remove: bool = True) -> Path | None:
        """Close an unregistered log and rename its directory to `...-delete` (a crash afterwards
        leaves a directory `load()` removes); with `remove`, remove it too, else return the new
        name for `remove_dir`. Any thread."""
        plog.close()
        doomed = plog.dir.with_name(f"{plog.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        try:
            plog.dir.rename(doomed)
        except FileNotFoundError:
            return None
        if remove:
            shutil.rmtree(doomed, ignore_errors=True)
            return None
        return doomed

    @staticmethod
    def remove_dir(directory: Path) -> None:
        shutil.rmtree(directory, ignore_errors=True)

    def delete_partition(self, topic: str, partition: int) -> bool:
        """Close and remove the partition's directory (renamed to `-delete` first, so a crash halfway
        leaves a directory `load()` finishes removing). False if unknown."""
        plog = self.unregister(topic, partition)
        if plog is None:
            return False
        doomed = self.discard(plog, remove=False)
        if doomed is not None:
            fsync_dir(doomed.parent)
            self.remove_dir(doomed)
        return True

    def enforce_retention(self, now_ms: int | None = None) -> int:
        now_ms = int(self._clock() * 1000) if now_ms is None else now_ms
        return sum(plog.enforce_retention(now_ms) for plog in list(self._logs.values()))

    def flush_all(self) -> None:
        for plog in self._logs.values():
            plog.flush()

    def close(self) -> None:
        """Flush and close every log, then write the clean-shutdown marker in each log dir."""
        for plog in self._logs.values():
            plog.flush()
            plog.close()
        self._logs.clear()
        self._dir_counts = {d: 0 for d in self.log_dirs}
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            atomic_write(log_dir / CLEAN_SHUTDOWN_FILE, json.dumps({"version": 0, "brokerEpoch": -1}).encode())
