"""LogManager: every PartitionLog under a set of log directories.

Clean shutdown: `close()` writes `.kafka_cleanshutdown` in each log dir after flushing and closing
all logs; `load()` reads it (clean => cheap tail check of each last segment instead of a full
CRC scan) and removes it once loaded, so a later crash is detected. Topic-level metadata (ids,
configs, partition counts) belongs to the broker's catalog; storage only writes partition.metadata.
"""
from __future__ import annotations

import json
import logging
import shutil
import time
import uuid
from pathlib import Path
from typing import Callable, Iterable

from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.log_config import LogConfig
from minikafka.storage.partition_log import PartitionLog, parse_partition_dir
from minikafka.storage.partition_metadata import atomic_write, fsync_dir, write_partition_metadata

log = logging.getLogger(__name__)

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

    def load(self, config_for: Callable[[str], LogConfig] | None = None) -> list[PartitionLog]:
        """Open every `<topic>-<partition>` directory (`config_for(topic)` or the default config).

        Leftover `-delete` directories are removed, `-stray` ones are left alone.
        """
        loaded: list[PartitionLog] = []
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            marker = log_dir / CLEAN_SHUTDOWN_FILE
            clean = marker.exists()
            for path in sorted(log_dir.iterdir()):
                if not path.is_dir() or path.name.startswith("."):
                    continue
                if path.name.endswith(DELETE_DIR_SUFFIX):
                    log.info("removing deleted partition directory %s", path)
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                if path.name.endswith(STRAY_DIR_SUFFIX):
                    continue
                try:
                    topic, partition = parse_partition_dir(path.name)
                except ValueError:
                    continue
                if (topic, partition) in self._logs:
                    raise KafkaStorageError(f"{topic}-{partition} exists in more than one log dir")
                config = config_for(topic) if config_for is not None else self.default_config
                plog = PartitionLog(path, config, clock=self._clock, clean_shutdown=clean)
                self._logs[(topic, partition)] = plog
                loaded.append(plog)
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

    def create(self, topic: str, partition: int, config: LogConfig | None = None,
               topic_id: bytes | None = None) -> PartitionLog:
        """Create (or return the existing) log in the log dir holding the fewest partitions."""
        existing = self._logs.get((topic, partition))
        if existing is not None:
            return existing
        counts = {d: 0 for d in self.log_dirs}
        for plog in self._logs.values():
            parent = plog.dir.parent
            if parent in counts:
                counts[parent] += 1
        log_dir = min(self.log_dirs, key=lambda d: counts[d])
        directory = log_dir / f"{topic}-{partition}"
        plog = PartitionLog(directory, config or self.default_config, clock=self._clock, clean_shutdown=True)
        if topic_id is not None:
            write_partition_metadata(directory, topic_id)
            plog.topic_id = topic_id
        fsync_dir(log_dir)
        self._logs[(topic, partition)] = plog
        return plog

    def delete_partition(self, topic: str, partition: int) -> bool:
        """Close and remove the partition's directory (renamed to `-delete` first, so a crash halfway
        leaves a directory `load()` finishes removing). False if unknown."""
        plog = self._logs.pop((topic, partition), None)
        if plog is None:
            return False
        plog.close()
        doomed = plog.dir.with_name(f"{plog.dir.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        plog.dir.rename(doomed)
        fsync_dir(doomed.parent)
        shutil.rmtree(doomed, ignore_errors=True)
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
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            atomic_write(log_dir / CLEAN_SHUTDOWN_FILE, json.dumps({"version": 0, "brokerEpoch": -1}).encode())
