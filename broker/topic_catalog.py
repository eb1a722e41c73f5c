"""Topic catalog: names, ids, partition counts and config overrides of every topic.

Kafka keeps this in the KRaft metadata log; a single node keeps it in one JSON file in the first
log dir, replaced atomically (write temp, fsync, rename). The catalog is authoritative: a partition
directory without a catalog entry is a leftover of an interrupted creation or delete and is removed
on load (without being opened); a listed partition whose directory is missing is re-created, a
missing partition.metadata is rewritten when the partition's log is opened. Loading reads no log:
partition logs open on first use (storage/log_manager.py, broker/log_opening.py).

Creation, partition addition and deletion at run time (`create_async`, `add_partitions_async`,
`delete_async`) never do file work on the event loop: partition directories are built and removed
in a worker thread, in time slices, while the loop keeps serving. The order makes a crash harmless:
- create: build every partition dir -> write the catalog -> make the topic visible. A topic is
  visible only when all its partitions exist; a crash before the catalog write leaves unlisted dirs.
- delete: hide the topic and write the catalog -> close and rename its dirs to `-delete` -> remove
  them in the background. A crash leaves unlisted or `-delete` dirs.
`close()` (shutdown) sets a stop flag the worker checks between partitions, so a 10,000-partition
creation stops within milliseconds; what it built is removed on the next start.

Bounds (Apache Kafka 4.3's controller refuses a CreateTopics with more than 10,000 partitions in
total, and any operation of more than 10,000 metadata records; it has no config key for either):
`minikafka.max.partitions.per.request` (default 10000) for both, and
`minikafka.max.partitions`, the partitions one broker holds (default: from the open-files limit).
The synchronous `create`/`add_partitions`/`delete` remain for tests and startup code.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import logging
import os
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, AsyncIterator, Callable, Mapping

from minikafka.protocol.uuids import random_uuid
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.log_config import LogConfig
from minikafka.storage.log_manager import LogManager
from minikafka.storage.partition_metadata import fsync_dir, write_partition_metadata

if TYPE_CHECKING:
    from minikafka.storage.partition_log import PartitionLog

log = logging.getLogger(__name__)

CATALOG_FILE = "__minikafka_topics.json"
MAX_TOPIC_NAME = 249
_LEGAL = re.compile(r"^[a-zA-Z0-9._-]+$")
DEFAULT_MAX_PARTITIONS_PER_REQUEST = 10_000  # Kafka: ReplicationControlManager / QuorumController limits
FDS_PER_PARTITION = 4  # .log, .index, .timeindex (+ .txnindex, snapshots, reads in flight)
FDS_RESERVED = 1024  # connections, other files
SLICE_SECONDS = 0.05  # worker thread time per slice: the queue of file work interleaves operations

# Kafka's messages (POLICY_VIOLATION for CreateTopics; CreatePartitions fails with UNKNOWN_SERVER_ERROR)
TOO_MANY_PARTITIONS = "Excessively large number of partitions per request."
TOO_MANY_RECORDS = "Unable to perform excessively large batch operation."


def _retrieved(future: asyncio.Future) -> None:
    """Mark the outcome seen: a shielded operation outlives a requester that went away."""
    if not future.cancelled():
        future.exception()


def default_max_partitions() -> int:
    """Partitions a broker may hold if `minikafka.max.partitions` is not set: what the open-files
    limit leaves room for (each partition keeps about FDS_PER_PARTITION descriptors open)."""
    try:
        import resource
        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return 100_000
    if soft == resource.RLIM_INFINITY or soft > 10_000_000:
        return 1_000_000
    return max((soft - FDS_RESERVED) // FDS_PER_PARTITION, 100)


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


ALL_CORDONED = "All brokers are currently fenced, or have all their log directories cordoned."


class InvalidReplicationFactorError(TopicError):
    pass


class InvalidReplicaAssignmentError(TopicError):
    pass


class PolicyViolationError(TopicError):
    """A bound refused the operation (Kafka: POLICY_VIOLATION); `handlers.topics` maps it."""


class BatchTooLargeError(TopicError):
    """More partitions in one operation than allowed (Kafka's BoundedListTooLongException)."""

    def __init__(self, message: str = TOO_MANY_RECORDS) -> None:
        super().__init__(message)


class CatalogStoppedError(TopicError):
    """The broker is shutting down; the operation was abandoned (the next start cleans up)."""


@dataclass
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False
    # on a cluster (issue 16): the partitions with a replica on this node; None = all of them (single node)
    local: frozenset[int] | None = None

    def is_local(self, partition: int) -> bool:
        return 0 <= partition < self.partitions and (self.local is None or partition in self.local)


def validate_topic_name(name: str | None) -> None:
    """Kafka's Topic.validate, with its messages."""
    if not name:
        raise InvalidTopicNameError("Topic name is invalid: the empty string is not allowed")
    if name in (".", ".."):
        raise InvalidTopicNameError(f"Topic name is invalid: '{name}' is not allowed")
    if len(name) > MAX_TOPIC_NAME:
        raise InvalidTopicNameError(f"Topic name is invalid: the length of '{name}' is longer than the max allowed "
                                    f"length {MAX_TOPIC_NAME}")
    if not _LEGAL.match(name):
        raise InvalidTopicNameError(f"Topic name is invalid: '{name}' contains one or more characters other than "
                                    "ASCII alphanumerics, '.', '_' and '-'")


class TopicCatalog:
    """Owns topic metadata and creates/deletes the partition logs behind it."""

    def __init__(self, log_manager: LogManager, default_config: LogConfig, data_dir: Path,
                 on_log_open: Callable[[PartitionLog], None] = lambda _log: None, *,
                 max_partitions_per_request: int = DEFAULT_MAX_PARTITIONS_PER_REQUEST,
                 max_partitions: int | None = None):
        self._logs = log_manager
        self._default_config = default_config
        self._path = data_dir / CATALOG_FILE
        self._on_log_open = on_log_open
        self.max_partitions_per_request = max_partitions_per_request
        self.max_partitions = max_partitions if max_partitions is not None else default_max_partitions()
        # every log dir cordoned (cordoned.log.dirs, KIP-1066): no new partition, as Kafka's placement refuses
        self.all_dirs_cordoned: Callable[[], bool] = lambda: False
        self.topics: dict[str, TopicInfo] = {}
        self.by_id: dict[uuid.UUID, TopicInfo] = {}
        # what the file must hold: visible topics plus those being committed, minus those deleted
        self._persist: dict[str, dict[str, Any]] = {}
        self._save_seq = 0
        self._written_seq = 0
        self._file_lock = threading.Lock()
        self._creating: dict[str, asyncio.Task] = {}
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}
        self._tasks: set[asyncio.Task] = set()
        self._stopping = threading.Event()
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None

    # -- persistence -------------------------------------------------------------------------
    def load(self) -> None:
        """Read the catalog, then have the log manager list the partitions it names (removing the
        directories it does not list) and re-create listed partitions whose directory is missing.
        Logs are opened lazily (storage/log_manager.py): on first use, `_adopt` applies the topic's
        config, repairs a missing partition.metadata and hooks the log up."""
        if self._path.exists():
            data = json.loads(self._path.read_text())
            for t in data["topics"]:
                local = t.get("local")
                info = TopicInfo(t["name"], uuid.UUID(t["id"]), int(t["partitions"]), dict(t["configs"]),
                                 bool(t.get("internal", False)), None if local is None else frozenset(local))
                self._index(info)
                self._persist[info.name] = self._record(info)
        self._logs.on_open = self._adopt
        if not self._logs.loaded:
            self._logs.load(self._topic_config, keep=self._listed, lazy=True)
        for topic, partition in self._logs.partitions():
            if not self._listed(topic, partition):
                log.warning("removing partition dir %s-%d: not in the topic catalog", topic, partition)
                self._logs.delete_partition(topic, partition)
        for plog in self._logs.logs():  # opened before the catalog was read (a log manager loaded eagerly)
            self._adopt(plog)
        for info in self.topics.values():
            for p in range(info.partitions):
                if info.is_local(p) and not self._logs.has(info.name, p):
                    self._on_log_open(self._logs.create(info.name, p, self.log_config(info), info.topic_id.bytes))

    def _topic_config(self, topic: str) -> LogConfig:
        info = self.topics.get(topic)
        return self.log_config(info) if info is not None else self._default_config

    def _adopt(self, plog: PartitionLog) -> None:
        """A partition listed at load was opened (owner thread)."""
        info = self.topics.get(plog.topic)
        if info is not None:
            plog.update_config(self.log_config(info))
            if plog.topic_id is None:  # not written before a power loss: the catalog knows it
                write_partition_metadata(plog.dir, info.topic_id.bytes)
                plog.topic_id = info.topic_id.bytes
        self._on_log_open(plog)

    def _listed(self, topic: str, partition: int) -> bool:
        info = self.topics.get(topic)
        return info is not None and info.is_local(partition)

    @staticmethod
    def _record(info: TopicInfo, partitions: int | None = None) -> dict[str, Any]:
        out = {"name": info.name, "id": str(info.topic_id),
               "partitions": info.partitions if partitions is None else partitions,
               "configs": dict(info.configs), "internal": info.internal}
        if info.local is not None:
            out["local"] = sorted(info.local)
        return out

    def _snapshot(self) -> tuple[int, bytes]:
        self._save_seq += 1
        return self._save_seq, json.dumps({"topics": list(self._persist.values())}, indent=1).encode()

    def _write(self, seq: int, data: bytes) -> None:
        """Atomically replace the file with snapshot `seq`, unless a newer one is already written
        (snapshots are taken on the event loop, written by it or by the worker thread)."""
        with self._file_lock:
            if seq <= self._written_seq:
                return
            tmp = self._path.with_suffix(".tmp")
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self._path)
            fsync_dir(self._path.parent)
            self._written_seq = seq

    def _save(self) -> None:
        self._write(*self._snapshot())

    async def _save_async(self) -> None:
        await self._run(self._write, *self._snapshot())

    def _index(self, info: TopicInfo) -> None:
        self.topics[info.name] = info
        self.by_id[info.topic_id] = info

    def _unindex(self, info: TopicInfo) -> None:
        self.topics.pop(info.name, None)
        self.by_id.pop(info.topic_id, None)

    # -- queries -----------------------------------------------------------------------------
    def get(self, name: str) -> TopicInfo | None:
        return self.topics.get(name)

    def is_creating(self, name: str) -> bool:
        return name in self._creating

    def log_config(self, info: TopicInfo) -> LogConfig:
        return LogConfig.from_props(info.configs, self._default_config)

    def partition_log(self, topic: str, partition: int) -> PartitionLog | None:
        """The partition's log, opened now if it is not open yet (see `has_partition`)."""
        info = self.topics.get(topic)
        if info is None or not 0 <= partition < info.partitions:
            return None
        return self._logs.get(topic, partition)

    def has_partition(self, topic: str, partition: int) -> bool:
        """Whether the partition exists and is visible, without opening its log."""
        info = self.topics.get(topic)
        return info is not None and 0 <= partition < info.partitions and self._logs.has(topic, partition)

    # -- validation --------------------------------------------------------------------------
    def check_create(self, name: str, partitions: int, replication_factor: int,
                     configs: Mapping[str, str]) -> LogConfig:
        """Validate a creation without applying it; returns the topic's effective LogConfig."""
        validate_topic_name(name)
        if name in self.topics or name in self._creating:
            raise TopicExistsError(f"Topic '{name}' already exists.")
        if partitions <= 0:
            raise InvalidPartitionCountError("Number of partitions must be larger than 0.")
        if replication_factor <= 0:
            raise InvalidReplicationFactorError("Replication factor must be larger than 0.")
        if replication_factor > 1:
            raise InvalidReplicationFactorError(
                f"Unable to replicate the partition {replication_factor} time(s): "
                "The target replication factor of {replication_factor} cannot be reached because only 1 "
                "broker(s) are registered or some brokers have all their log directories cordoned."
                .replace("{replication_factor}", str(replication_factor)))
        if self.all_dirs_cordoned():
            raise InvalidReplicationFactorError(f"Unable to replicate the partition {replication_factor} time(s): "
                                                f"{ALL_CORDONED}")
        return LogConfig.from_props(dict(configs), self._default_config)

    def check_batch(self, new_partitions: int, pending: int = 0) -> None:
        """`new_partitions` more, after `pending` in the same request, must fit in one operation."""
        if pending + new_partitions > self.max_partitions_per_request:
            raise BatchTooLargeError()

    def check_room(self, new_partitions: int) -> None:
        """`new_partitions` more must fit in the broker (those being created count)."""
        have = self._logs.partition_count
        if have + new_partitions > self.max_partitions:
            raise PolicyViolationError(
                f"Creating {new_partitions} partition(s) would exceed the {self.max_partitions} partitions this "
                f"broker may hold (minikafka.max.partitions; it holds {have}).")

    def check_add_partitions(self, name: str, count: int) -> TopicInfo:
        info = self.topics.get(name)
        if info is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        if count < info.partitions:
            raise InvalidPartitionCountError(
                f"The topic {name} currently has {info.partitions} partition(s); {count} would not be an increase.")
        if count == info.partitions:
            raise InvalidPartitionCountError(f"Topic already has {info.partitions} partition(s).")
        if self.all_dirs_cordoned():
            raise InvalidReplicationFactorError(ALL_CORDONED)
        return info

    # -- synchronous changes (tests, startup; everything in the calling thread) ----------------
    def create(self, name: str, partitions: int, replication_factor: int = 1,
               configs: Mapping[str, str] | None = None, internal: bool = False) -> TopicInfo:
        configs = dict(configs or {})
        config = self.check_create(name, partitions, replication_factor, configs)
        info = TopicInfo(name, random_uuid(), partitions, configs, internal)
        for p in range(partitions):
            self._on_log_open(self._logs.create(name, p, config, info.topic_id.bytes))
        self._index(info)
        self._persist[name] = self._record(info)
        self._save()
        log.info("created topic %s with %d partition(s)", name, partitions)
        return info

    def delete(self, name: str) -> TopicInfo:
        info = self.topics.get(name)
        if info is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        self._unindex(info)
        self._persist.pop(name, None)
        self._save()
        for p in range(info.partitions):
            self._logs.delete_partition(name, p)
        log.info("deleted topic %s", name)
        return info

    def add_partitions(self, name: str, count: int) -> None:
        info = self.check_add_partitions(name, count)
        config = self.log_config(info)
        for p in range(info.partitions, count):
            self._on_log_open(self._logs.create(name, p, config, info.topic_id.bytes))
        info.partitions = count
        self._persist[name] = self._record(info)
        self._save()

    def set_configs(self, name: str, configs: Mapping[str, str]) -> None:
        """Replace a topic's overrides (validated first); running logs pick the new config up at once."""
        info = self.topics.get(name)
        if info is None:
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        config = LogConfig.from_props(dict(configs), self._default_config)
        info.configs = dict(configs)
        self._persist[name] = self._record(info)
        self._save()
        for p in range(info.partitions):
            plog = self._logs.opened(name, p)  # an unopened one gets the config when opened (`_adopt`)
            if plog is not None:
                plog.update_config(config)

    def set_default_config(self, default_config: LogConfig) -> None:
        """New broker-level defaults (a dynamic broker config changed): every open log gets its
        topic's overrides over them at once; unopened ones get them when opened (`_adopt`). The
        work is one dataclass per open partition (no I/O)."""
        self._default_config = default_config
        configs: dict[str, LogConfig] = {}
        for plog in self._logs.logs():
            info = self.topics.get(plog.topic)
            if info is None:
                continue
            config = configs.get(info.name)
            if config is None:
                config = configs[info.name] = self.log_config(info)
            plog.update_config(config)

    # -- changes off the event loop ------------------------------------------------------------
    async def create_async(self, name: str, partitions: int, replication_factor: int = 1,
                           configs: Mapping[str, str] | None = None, internal: bool = False, *,
                           exist_ok: bool = False) -> TopicInfo:
        """Create a topic, its partition files made by the worker thread; the topic is visible once
        they all exist and the catalog file lists it. A concurrent creation of the same name gets
        TopicExistsError at once (as in Kafka), or with `exist_ok` waits for it and gets its result."""
        if exist_ok:
            info = self.topics.get(name)
            if info is not None:
                return info
            pending = self._creating.get(name)
            if pending is not None:
                return await asyncio.shield(pending)
        configs = dict(configs or {})
        config = self.check_create(name, partitions, replication_factor, configs)
        self.check_batch(partitions)
        self.check_room(partitions)
        self._check_running()
        task = asyncio.get_running_loop().create_task(
            self._run_create(name, partitions, configs, internal, config), name=f"create-topic-{name}")
        self._creating[name] = task
        self._track(task)
        task.add_done_callback(lambda _t: self._creating.pop(name, None))
        return await asyncio.shield(task)  # a client going away does not abandon the creation

    async def _run_create(self, name: str, partitions: int, configs: dict[str, str], internal: bool,
                          config: LogConfig) -> TopicInfo:
        t0 = time.monotonic()
        async with self._exclusive(name):  # a delete of the same name first moves its dirs away
            info = TopicInfo(name, random_uuid(), partitions, configs, internal)
            plogs = await self._build(name, range(partitions), config, info.topic_id.bytes)
            self._persist[name] = self._record(info)
            try:
                await self._save_async()
            except BaseException:
                self._persist.pop(name, None)
                await self._abandon(plogs)
                raise
            for plog in plogs:
                self._logs.register(plog)
                self._on_log_open(plog)
            self._index(info)
        log.info("created topic %s with %d partition(s) in %.0f ms", name, partitions, (time.monotonic() - t0) * 1000)
        return info

    async def add_partitions_async(self, name: str, count: int, validate: Callable[[TopicInfo], None] | None = None,
                                   validate_only: bool = False) -> TopicInfo:
        """Grow a topic to `count` partitions (new partition files made by the worker thread).
        Concurrent requests for one topic run one after the other, each validated against the count
        the previous one left; `validate(info)` (the caller's checks) runs then too."""
        self._check_running()
        task = asyncio.get_running_loop().create_task(self._run_add_partitions(name, count, validate, validate_only),
                                                      name=f"add-partitions-{name}")
        self._track(task)
        return await asyncio.shield(task)

    async def _run_add_partitions(self, name: str, count: int, validate: Callable[[TopicInfo], None] | None,
                                  validate_only: bool) -> TopicInfo:
        async with self._exclusive(name):
            info = self.check_add_partitions(name, count)
            if validate is not None:
                validate(info)
            if validate_only:
                return info
            self.check_room(count - info.partitions)
            first = info.partitions
            plogs = await self._build(name, range(first, count), self.log_config(info), info.topic_id.bytes)
            self._persist[name] = self._record(info, count)
            try:
                await self._save_async()
            except BaseException:
                self._persist[name] = self._record(info)
                await self._abandon(plogs)
                raise
            for plog in plogs:
                self._logs.register(plog)
                self._on_log_open(plog)
            info.partitions = count
        log.info("topic %s grown from %d to %d partition(s)", name, first, count)
        return info

    async def delete_async(self, name: str) -> TopicInfo:
        """Hide the topic and drop it from the catalog file, then close and rename its partition
        directories (worker thread); returns then, the directories are removed in the background."""
        if name not in self.topics:
            raise UnknownTopicError(f"Topic '{name}' does not exist.")
        self._check_running()
        renamed: asyncio.Future[TopicInfo] = asyncio.get_running_loop().create_future()
        renamed.add_done_callback(_retrieved)
        task = asyncio.get_running_loop().create_task(self._run_delete(name, renamed), name=f"delete-topic-{name}")
        self._track(task)
        return await asyncio.shield(renamed)

    async def _run_delete(self, name: str, renamed: asyncio.Future) -> None:
        doomed: list[Path] = []
        try:
            async with self._exclusive(name):
                info = self.topics.get(name)
                if info is None:
                    raise UnknownTopicError(f"Topic '{name}' does not exist.")
                self._unindex(info)
                self._persist.pop(name, None)
                plogs = [plog for p in range(info.partitions)
                         if (plog := self._logs.unregister(name, p)) is not None]
                try:
                    await self._save_async()
                except CatalogStoppedError:
                    raise
                except Exception:  # hidden already; the file still lists it: back on the next start
                    log.exception("writing the topic catalog after deleting %s failed", name)
                doomed = await self._in_slices(plogs, self._discard_slice)
            if not renamed.done():
                renamed.set_result(info)
        except BaseException as exc:
            if not renamed.done():
                renamed.set_exception(exc if isinstance(exc, Exception) else CatalogStoppedError("shutting down"))
            if not isinstance(exc, Exception):
                raise
            return
        try:
            await self._in_slices(doomed, self._remove_slice)
        except (CatalogStoppedError, asyncio.CancelledError):
            pass  # the next start removes the rest
        log.info("deleted topic %s (%d partition(s))", name, info.partitions)

    async def follow(self, name: str, topic_id: uuid.UUID, partitions: int, configs: Mapping[str, str],
                     local: frozenset[int], internal: bool = False) -> None:
        """A cluster node (issue 16): make the topic as the metadata image has it — this id, this many
        partitions, these configs, logs for the `local` partitions (created with the topic id off the
        event loop) and none for the others (a replica moved away by a reassignment: its log is
        removed, as Kafka's broker deletes a replica it no longer hosts). A local topic of that name
        with another id (deleted and re-created while this node was away) is deleted first.
        Idempotent; cheap when nothing changed."""
        info = self.topics.get(name)
        if info is not None and info.topic_id != topic_id:
            await self.delete_async(name)
            info = None
        if info is not None and info.partitions == partitions and info.local == local \
                and info.configs == dict(configs) and all(self._logs.has(name, p) for p in local):
            return
        self._check_running()
        doomed: list[Path] = []
        async with self._exclusive(name):
            info = self.topics.get(name)
            config = LogConfig.from_props(dict(configs), self._default_config)
            missing = sorted(p for p in local if not self._logs.has(name, p))
            plogs = await self._build(name, missing, config, topic_id.bytes) if missing else []
            new = TopicInfo(name, topic_id, partitions, dict(configs), internal, frozenset(local))
            self._persist[name] = self._record(new)
            try:
                await self._save_async()
            except BaseException:
                if info is not None:
                    self._persist[name] = self._record(info)
                else:
                    self._persist.pop(name, None)
                await self._abandon(plogs)
                raise
            for plog in plogs:
                self._logs.register(plog)
                self._on_log_open(plog)
            if info is not None and info.local is not None:  # no longer listed: a crash now leaves strays load() drops
                gone = [plog for p in sorted(info.local - local)
                        if (plog := self._logs.unregister(name, p)) is not None]
                doomed = await self._in_slices(gone, self._discard_slice) if gone else []
            if info is not None:
                info.partitions, info.local, info.internal = partitions, frozenset(local), internal
                if info.configs != dict(configs):
                    info.configs = dict(configs)
                    for p in local:
                        plog = self._logs.opened(name, p)
                        if plog is not None:
                            plog.update_config(config)
            else:
                self._index(new)
        if missing:
            log.info("topic %s: %d local partition(s) created from the cluster metadata", name, len(missing))
        if doomed:
            log.info("topic %s: %d local partition(s) removed: no longer a replica", name, len(doomed))
            await self._in_slices(doomed, self._remove_slice)

    def close(self) -> None:
        """Shutdown: stop the worker between two partitions and abandon queued file work; operations
        in flight fail (their clients get no answer), the next start removes what they left."""
        self._stopping.set()
        for task in list(self._tasks):
            task.cancel()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)

    # -- helpers -------------------------------------------------------------------------------
    def _check_running(self) -> None:
        if self._stopping.is_set():
            raise CatalogStoppedError("the broker is shutting down")

    def _track(self, task: asyncio.Task) -> None:
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        task.add_done_callback(_retrieved)  # its requester may be gone (shutdown, client closed)

    @contextlib.asynccontextmanager
    async def _exclusive(self, name: str) -> AsyncIterator[None]:
        """One structural change of a topic name at a time (creation waits for a delete's renames)."""
        lock, users = self._locks.get(name, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[name] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[name]
            if users <= 1:
                del self._locks[name]
            else:
                self._locks[name] = (lock, users - 1)

    async def _run(self, fn: Callable, *args: Any) -> Any:
        self._check_running()
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="topic-files")
        try:
            return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)
        except RuntimeError as exc:  # executor shut down under us
            if self._stopping.is_set():
                raise CatalogStoppedError("the broker is shutting down") from exc
            raise

    async def _in_slices(self, items: list, work: Callable[[list, int], tuple[int, list]]) -> list:
        """Run `work(items, start) -> (next start, results)` in the worker until every item is done;
        each call stops after SLICE_SECONDS so file work of several operations interleaves."""
        out: list = []
        start = 0
        while start < len(items):
            start, results = await self._run(work, items, start)
            out += results
            self._check_running()
        return out

    async def _build(self, name: str, partitions: range, config: LogConfig, topic_id: bytes) -> list[PartitionLog]:
        """Build the partitions' directories in slices; on failure (not shutdown) remove what was built."""
        dirs = self._logs.assign_dirs(name, partitions)
        built: list[PartitionLog] = []

        def work(items: list[Path], start: int) -> tuple[int, list[PartitionLog]]:
            return self._build_slice(items, start, config, topic_id)

        try:
            start = 0
            while start < len(dirs):
                start, results = await self._run(work, dirs, start)
                built += results
                self._check_running()
        except BaseException as exc:
            self._logs.release(dirs)
            if not self._stopping.is_set():
                if isinstance(exc, asyncio.CancelledError):
                    self._track(asyncio.get_running_loop().create_task(self._abandon(built, release=False)))
                else:
                    await self._abandon(built, release=False)
            if isinstance(exc, OSError):
                raise KafkaStorageError(f"creating partitions of {name} failed: {exc}") from exc
            raise
        return built

    async def _abandon(self, plogs: list[PartitionLog], release: bool = True) -> None:
        """Remove built, unregistered partitions (worker thread)."""
        if release:
            self._logs.release([plog.dir for plog in plogs])
        try:
            for doomed_slice in [plogs[i:i + 256] for i in range(0, len(plogs), 256)]:
                await self._run(self._discard_all, doomed_slice)
        except (CatalogStoppedError, asyncio.CancelledError):
            pass

    # -- worker-thread side ---------------------------------------------------------------------
    def _build_slice(self, dirs: list[Path], start: int, config: LogConfig,
                     topic_id: bytes) -> tuple[int, list[PartitionLog]]:
        deadline = time.monotonic() + SLICE_SECONDS
        built: list[PartitionLog] = []
        i = start
        try:
            while i < len(dirs) and not self._stopping.is_set():
                built.append(self._logs.build(dirs[i], config, topic_id))
                i += 1
                if time.monotonic() >= deadline:
                    break
            if built and not self._stopping.is_set():
                for parent in {d.parent for d in dirs[start:i]}:
                    fsync_dir(parent)
        except BaseException:
            if not self._stopping.is_set():
                self._discard_all(built)
            raise
        return i, built

    def _discard_all(self, plogs: list[PartitionLog]) -> None:
        for plog in plogs:
            if self._stopping.is_set():
                return
            try:
                self._logs.discard(plog)
            except OSError as exc:
                log.warning("removing %s failed: %s", plog.dir, exc)

    def _discard_slice(self, plogs: list[PartitionLog], start: int) -> tuple[int, list[Path]]:
        """Close and rename to `-delete` (the renames are what a new topic of the same name needs)."""
        deadline = time.monotonic() + SLICE_SECONDS
        doomed: list[Path] = []
        i = start
        while i < len(plogs) and not self._stopping.is_set():
            try:
                path = self._logs.discard(plogs[i], remove=False)
                if path is not None:
                    doomed.append(path)
            except OSError as exc:
                log.warning("closing %s failed: %s", plogs[i].dir, exc)
            i += 1
            if time.monotonic() >= deadline:
                break
        if doomed:
            for parent in {d.parent for d in doomed}:
                fsync_dir(parent)
        return i, doomed

    def _remove_slice(self, dirs: list[Path], start: int) -> tuple[int, list[None]]:
        deadline = time.monotonic() + SLICE_SECONDS
        i = start
        while i < len(dirs) and not self._stopping.is_set():
            self._logs.remove_dir(dirs[i])
            i += 1
            if time.monotonic() >= deadline:
                break
        return i, []
