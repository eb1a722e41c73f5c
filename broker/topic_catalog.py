"""Topic catalog: names, ids, partition counts and config overrides of every topic.

Kafka keeps this in the KRaft metadata log; a single node keeps it in one JSON file in the first
log dir, replaced atomically (write temp, fsync, rename). The catalog is authoritative: a partition
directory without a catalog entry is a leftover of an interrupted delete and is removed on load.
"""
from __future__ import annotations

import json
import logging
import os
import re
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Mapping

from ..storage.log_config import LogConfig
from ..storage.log_manager import LogManager
from ..storage.partition_log import PartitionLog

log = logging.getLogger(__name__)

CATALOG_FILE = "__minikafka_topics.json"
MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")


class TopicError(Exception):
    """Base for catalog failures; handlers map subclasses to Kafka error codes."""


class UnknownTopicError(TopicError):
    pass


class TopicExistsError(TopicError):
    pass


class InvalidTopicNameError(TopicError):
    pass


class InvalidPartitionCountError(TopicError):
    pass


class InvalidReplicationFactorError(TopicError):
    pass


class InvalidReplicaAssignmentError(TopicError):
    pass


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False


def validate_topic_name(name: str | None) -> None:
    if not name:
        raise InvalidTopicNameError("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicNameError(f"topic name cannot be {name!r}")
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidTopicNameError(f"topic name is longer than {MAX_TOPIC_NAME} characters")
    if not _LEGAL.match(name):
        raise InvalidTopicNameError(f"topic name {name!r} has characters outside [a-zA-Z0-9._-]")


class TopicCatalog:
    """Owns topic metadata and creates/deletes the partition logs behind it."""

    def __init__(self, log_manager: LogManager, default_config: LogConfig, data_dir: Path,
                 on_log_open: Callable[[PartitionLog], None] = lambda _log: None):
        self._logs = log_manager
        self._default_config = default_config
        self._path = data_dir / CATALOG_FILE
        self._on_log_open = on_log_open
        self.topics: dict[str, TopicInfo] = {}
        self.by_id: dict[uuid.UUID, TopicInfo] = {}

    # -- persistence -------------------------------------------------------------------------
    def load(self) -> None:
        if self._path.exists():
            data = json.loads(self._path.read_text())
            for t in data["topics"]:
                info = TopicInfo(t["name"], uuid.UUID(t["id"]), int(t["partitions"]), dict(t["configs"]),
                                 bool(t.get("internal", False)))
                self._index(info)
        for plog in list(self._logs.logs()):
            info = self.topics.get(plog.topic)
            if info is None or plog.partition >= info.partitions:
                log.warning("removing partition dir %s-%d: not in the topic catalog", plog.topic, plog.partition)
                self._logs.delete_partition(plog.topic, plog.partition)
        for info in self.topics.values():
            config = self.log_config(info)
            for p in range(info.partitions):
                plog = self._logs.get(info.name, p)
                if plog is None:
                    plog = self._logs.create(info.name, p, config, info.topic_id.bytes)
                else:
                    plog.update_config(config)
                self._on_log_open(plog)

    def _save(self) -> None:
        data = {"topics": [{"name": t.name, "id": str(t.topic_id), "partitions": t.partitions,
                            "configs": t.configs, "internal": t.internal} for t in self.topics.values()]}
        tmp = self._path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._path)

    def _index(self, info: TopicInfo) -> None:
        self.topics[info.name] = info
        self.by_id[info.topic_id] = info

    # -- queries -----------------------------------------------------------------------------
    def get(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def log_config(self, info: TopicInfo) -> LogConfig:
        return LogConfig.from_props(info.configs, self._default_config)

    def partition_log(self, topic: str, partition: int) -> PartitionLog | None:
        info = self.topics.get(topic)
        if info is None or not 0 <= partition < info.partitions:
            return None
        return self._logs.get(topic, partition)

    # -- changes -----------------------------------------------------------------------------
    def check_create(self, name: str, partitions: int, replication_factor: int,
                     configs: Mapping[str, str]) -> LogConfig:
        """Validate a creation without applying it; returns the topic's effective LogConfig."""
        validate_topic_name(name)
        if name in self.topics:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        if partitions <= 0:
            raise InvalidPartitionCountError("Number of partitions must be larger than 0.")
        if replication_factor <= 0:
            raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
        if replication_factor > 1:
            raise InvalidReplicationFactorError(
                f"Unable to replicate the partition {replication_factor} time(s): "
                "The target replication factor of {replication_factor} cannot be reached because only 1 "
                "broker(s) are registered.".replace("{replication_factor}", str(replication_factor)))
        return LogConfig.from_props(dict(configs), self._default_config)

    def create(self, name: str, partitions: int, replication_factor: int = 1,
               configs: Mapping[str, str] | None = None, internal: bool = False) -> TopicInfo:
        configs = dict(configs or {})
        config = self.check_create(name, partitions, replication_factor, configs)
        info = TopicInfo(name, uuid.uuid4(), partitions, configs, internal)
        for p in range(partitions):
            self._on_log_open(self._logs.create(name, p, config, info.topic_id.bytes))
        self._index(info)
        self._save()
        log.info("created topic %s with %d partition(s)", name, partitions)
        return info

    def delete(self, name: str) -> TopicInfo:
        info = self.topics.get(name)
        if info is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        del self.topics[name]
        del self.by_id[info.topic_id]
        self._save()
        for p in range(info.partitions):
            self._logs.delete_partition(name, p)
        log.info("deleted topic %s", name)
        return info

    def check_add_partitions(self, name: str, count: int) -> TopicInfo:
        info = self.topics.get(name)
        if info is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        if count < info.partitions:
            raise InvalidPartitionCountError(
                f"Topic currently has {info.partitions} partitions, which is higher than the requested {count}.")
        if count == info.partitions:
            raise InvalidPartitionCountError(f"Topic already has {info.partitions} partitions.")
        return info

    def add_partitions(self, name: str, count: int) -> None:
        info = self.check_add_partitions(name, count)
        config = self.log_config(info)
        for p in range(info.partitions, count):
            self._on_log_open(self._logs.create(name, p, config, info.topic_id.bytes))
        info.partitions = count
        self._save()

    def set_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace a topic's overrides (validated first); running logs pick the new config up at once."""
        info = self.topics.get(name)
        if info is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        config = LogConfig.from_props(dict(configs), self._default_config)
        info.configs = dict(configs)
        self._save()
        for p in range(info.partitions):
            plog = self._logs.get(name, p)
            if plog is not None:
                plog.update_config(config)
