"""LogManager: every partition under a set of log directories, each opened on first use.

Lazy opening: `load()` only lists the `<topic>-<partition>` directories; each becomes an
`UnopenedLog` (directory + whether its last shutdown was clean). Its PartitionLog (segments,
indexes, producer state, recovery if unclean) is built on the first `get`, in the calling thread,
or ahead of that by `open_in_worker` in a worker thread (several partitions one after the other in
one task: a wake-up of the owner per task, not per partition). Either way the log is constructed
privately and only then registered, on the owner thread (`get`, `collect`), so the owner-thread
invariant of storage/partition_log.py holds: nobody sees a log before it is registered. A `get` of a
partition whose worker open has not started takes it over (cancels it); one already started is
waited for, so a directory is never opened twice. Retention, flush and close iterate opened logs only
(`logs()`); an unopened partition has nothing to flush.

Clean shutdown, per log dir: `close()` flushes and closes the opened logs, writes the list of
partitions still needing recovery to `.minikafka_recovery_pending` (or removes that file), then
writes `.kafka_cleanshutdown`. `load()` reads the marker and removes it, so a crash later in the run
is detected. A partition counts as clean when it is opened iff the marker was present and it is not
in the pending list; the list holds the partitions that were unclean at the start of the run and
never opened (never recovered) in it: a clean shutdown must not launder them. After a crash every
partition is recovered on open (those never opened in the crashed run needlessly, but safely).
Recovery after a clean shutdown reads no segment data beyond the tail check of the last segment.

Topic-level metadata (ids, configs, partition counts) belongs to the broker's catalog; storage only
writes partition.metadata.

Creating and deleting many partitions is split so the file work can run in a worker thread while the
owner (event-loop) thread keeps serving: `assign_dirs` (owner: picks and reserves a log dir per
partition), `build` (any thread: directory, segment files, partition.metadata; nothing registered),
`register` (owner), and for deletion `unregister` (owner) then `discard` (any thread: close, rename to
`-delete`, remove). Built but unregistered directories are invisible to the manager; the broker's
catalog decides on the next `load(keep=...)` whether such a directory belongs to a topic.
"""
from __future__ import annotations

import concurrent.futures
import json
import logging
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterable, Union

from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.log_config import LogConfig
from minikafka.storage.partition_metadata import (
    PARTITION_METADATA_FILE,
    atomic_write,
    fsync_dir,
    parse_partition_dir,
    topic_id_to_str,
    write_partition_metadata,
)

if TYPE_CHECKING:  # imported on first open: start-up lists directories only
    from minikafka.storage import replica_move
    from minikafka.storage.partition_log import PartitionLog

log = logging.getLogger(__name__)


def write_partition_metadata_fast(directory: Path, topic_id: bytes) -> None:
    """partition.metadata (same content as `write_partition_metadata`) without fsyncs: for partitions
    a later commit record makes exist (see `LogManager.build`)."""
    path = Path(directory) / PARTITION_METADATA_FILE
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(f"version: 0\ntopic_id: {topic_id_to_str(topic_id)}\n".encode("ascii"))
    os.replace(tmp, path)

CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
# per log dir, the high watermark of every replicated partition (Kafka's OffsetCheckpointFile format:
# "0", the count, then "<topic> <partition> <offset>" lines); read at load, handed to each log it opens
HW_CHECKPOINT_FILE = "replication-offset-checkpoint"
RECOVERY_PENDING_FILE = ".minikafka_recovery_pending"
DELETE_DIR_SUFFIX = "-delete"
STRAY_DIR_SUFFIX = "-stray"
# a replica being moved to another log dir (AlterReplicaLogDirs): `<topic>-<partition>.<uuid>-future`,
# as Kafka names it; the copy is complete once MOVE_COMPLETE_FILE is in it (see `move_replica`)
FUTURE_DIR_SUFFIX = "-future"
MOVE_COMPLETE_FILE = ".minikafka_move_complete"
MAX_PREFERRED_DIRS = 100_000  # prefer_dir entries kept for partitions not created yet
OPEN_WORKERS = 2

TopicPartition = tuple[str, int]


# the metadata quorum's log (raft/store.py, which creates quorum.log in it), as Kafka
# names it; not a partition log
METADATA_LOG_DIR = "__cluster_metadata-0"


def _partition_log_class() -> type["PartitionLog"]:
    from minikafka.storage.partition_log import PartitionLog
    return PartitionLog


class UnopenedLog:
    """A partition directory whose log is not open yet. `future` is its open by a worker (None if
    none was asked for) and `job` the worker task opening it (with others): both set by the owner
    thread. Whoever cancels `future` while it is pending (not started by the worker) takes the open
    over; a started one is waited for."""

    __slots__ = ("dir", "topic", "partition", "clean", "future", "job")

    def __init__(self, directory: Path, topic: str, partition: int, clean: bool) -> None:
        self.dir = directory
        self.topic = topic
        self.partition = partition
        self.clean = clean
        self.future: concurrent.futures.Future | None = None
        self.job: concurrent.futures.Future | None = None

    def opened_log(self) -> "PartitionLog | None":
        """The log a worker opened for it, waiting for an open in progress; None if none was (an open
        not started yet is cancelled)."""
        f = self.future
        if f is None or f.cancel():
            return None
        try:
            return f.result()
        except BaseException:  # failed or cancelled: still unopened
            return None

    def drain_writes(self) -> None:
        """Nothing was written through an unopened log."""

    def close(self) -> None:
        """Close what an open in a worker produced (an unregistered placeholder being discarded)."""
        plog = self.opened_log()
        if plog is not None:
            plog.close()

    def __repr__(self) -> str:
        return f"UnopenedLog({self.dir.name}, clean={self.clean})"


AnyLog = Union["PartitionLog", UnopenedLog]


class LogManager:
    def __init__(self, log_dirs: Iterable[Path], default_config: LogConfig,
                 clock: Callable[[], float] = time.time) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        # Kafka's CleanShutdownFile: the broker epoch a clean shutdown writes, read back at load (-1: none
        # or an unclean shutdown), sent as BrokerRegistration's previousBrokerEpoch (KIP-966)
        self.broker_epoch = -1
        self.previous_broker_epoch = -1
        if not self.log_dirs:
            raise ValueError("at least one log dir is required")
        self.default_config = default_config
        self._clock = clock
        self._logs: dict[TopicPartition, PartitionLog] = {}
        self._unopened: dict[TopicPartition, UnopenedLog] = {}
        # partitions per log dir, registered + unopened + reserved by assign_dirs (kept up to date:
        # counting on every creation made creating n partitions O(n^2))
        self._dir_counts: dict[Path, int] = {d: 0 for d in self.log_dirs}
        self._config_for: Callable[[str], LogConfig] = lambda _topic: self.default_config
        # called on the owner thread when a lazily opened log is registered (the broker's catalog
        # applies the topic's current config and hooks it up)
        self.on_open: Callable[[PartitionLog], None] = lambda _log: None
        self._opener: concurrent.futures.ThreadPoolExecutor | None = None
        self.loaded = False
        # high watermarks read from each log dir's replication-offset-checkpoint at load
        self._hw_checkpoints: dict[TopicPartition, int] = {}
        self._moves: dict[TopicPartition, "replica_move.Move"] = {}  # moves between log dirs
        self._preferred: dict[TopicPartition, Path] = {}  # prefer_dir: the log dir of a future partition
        # cordoned.log.dirs (KIP-1066): dirs a new partition avoids while another dir is left (set by the broker)
        self.cordoned_dirs: Callable[[], frozenset[Path]] = frozenset
        self._mover: concurrent.futures.ThreadPoolExecutor | None = None
        self._swapper: concurrent.futures.ThreadPoolExecutor | None = None

    def load(self, config_for: Callable[[str], LogConfig] | None = None,
             keep: Callable[[str, int], bool] | None = None, *, lazy: bool = False) -> list[PartitionLog]:
        """Find every `<topic>-<partition>` directory (its config: `config_for(topic)` or the default).

        With `lazy`, nothing is opened (see the module docstring) and [] is returned; else every log
        is opened now and returned. Leftover `-delete` directories are removed, `-stray` ones are left
        alone. With `keep`, a partition directory for which `keep(topic, partition)` is false (left by
        a creation or deletion that a crash interrupted) is removed without being opened.
        """
        self.loaded = True
        if config_for is not None:
            self._config_for = config_for
        found: list[TopicPartition] = []
        futures: list[tuple[Path, bool]] = []  # (-future directory, its log dir's last shutdown was clean)
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            self._hw_checkpoints.update(read_offset_checkpoint(log_dir / HW_CHECKPOINT_FILE))
            marker = log_dir / CLEAN_SHUTDOWN_FILE
            clean = marker.exists()
            pending = _read_pending(log_dir) if clean else None  # None: every partition unclean
            unwanted = 0
            with os.scandir(log_dir) as entries:
                names = sorted(e.name for e in entries if e.is_dir() and not e.name.startswith("."))
            for name in names:
                path = log_dir / name
                if name.endswith(DELETE_DIR_SUFFIX):
                    log.debug("removing deleted partition directory %s", path)
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                if name.endswith(STRAY_DIR_SUFFIX) or (name == METADATA_LOG_DIR and (path / "quorum.log").exists()):
                    continue
                if name.endswith(FUTURE_DIR_SUFFIX):
                    futures.append((path, clean))
                    continue
                try:
                    topic, partition = parse_partition_dir(name)
                except ValueError:
                    continue
                if keep is not None and not keep(topic, partition):
                    unwanted += 1
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                tp = (topic, partition)
                if tp in self._logs or tp in self._unopened:
                    raise KafkaStorageError(f"{topic}-{partition} exists in more than one log dir")
                was_clean = pending is not None and name not in pending
                self._unopened[tp] = UnopenedLog(path, topic, partition, was_clean)
                self._dir_counts[log_dir] = self._dir_counts.get(log_dir, 0) + 1
                found.append(tp)
            if unwanted:
                log.warning("removed %d partition directories of %s not in the topic catalog", unwanted, log_dir)
                fsync_dir(log_dir)
            if clean:
                self.previous_broker_epoch = max(self.previous_broker_epoch, _marker_epoch(marker))
                marker.unlink()
                fsync_dir(log_dir)
        for path, _clean in futures:
            found += self._settle_future(path, keep)
        if lazy:
            return []
        return [plog for tp in found if (plog := self.get(*tp)) is not None]

    def _settle_future(self, path: Path, keep: Callable[[str, int], bool] | None) -> list[TopicPartition]:
        """A move to another log dir that the last run left unfinished (load). Until the copy is
        complete (MOVE_COMPLETE_FILE) the partition's own directory is authoritative and the partial
        copy is removed; a complete copy whose original is gone (the crash came between the two
        renames of the swap) becomes the partition's directory. Returns the partition if it was adopted."""
        stem = path.name[:-len(FUTURE_DIR_SUFFIX)]
        name, _, _unique = stem.rpartition(".")
        try:
            topic, partition = parse_partition_dir(name)
        except ValueError:
            return []
        tp = (topic, partition)
        complete = (path / MOVE_COMPLETE_FILE).exists()
        if tp in self._logs or tp in self._unopened or not complete or (keep is not None and not keep(topic, partition)):
            log.info("removing the unfinished move of %s-%d to %s", topic, partition, path.parent)
            shutil.rmtree(path, ignore_errors=True)
            fsync_dir(path.parent)
            return []
        final = path.parent / name
        path.rename(final)
        (final / MOVE_COMPLETE_FILE).unlink(missing_ok=True)
        fsync_dir(path.parent)
        log.info("finished moving %s-%d to %s", topic, partition, path.parent)
        self._unopened[tp] = UnopenedLog(final, topic, partition, False)
        self._dir_counts[final.parent] = self._dir_counts.get(final.parent, 0) + 1
        return [tp]

    # -- moving a replica between log dirs (AlterReplicaLogDirs; storage/replica_move.py) -----------
    def log_dir_of(self, path: str) -> Path | None:
        """The configured log dir named by `path`, which must be absolute (Kafka compares it with each
        log dir's absolute path); None if there is none."""
        if not os.path.isabs(path):
            return None
        for d in self.log_dirs:
            if path in (os.path.abspath(d), str(d.resolve())):
                return d
        return None

    def prefer_dir(self, topic: str, partition: int, log_dir: Path) -> None:
        """Where the partition goes when it is created here later (Kafka maybeUpdatePreferredLogDir);
        not recorded if it is already there."""
        directory = self.directory(topic, partition)
        if directory is None or directory.parent != log_dir:
            if len(self._preferred) >= MAX_PREFERRED_DIRS:  # bounded: the oldest wish goes first
                del self._preferred[next(iter(self._preferred))]
            self._preferred[(topic, partition)] = log_dir

    def move_replica(self, topic: str, partition: int, log_dir: Path) -> "replica_move.Move | None":
        """Owner thread: start moving the partition's log to `log_dir` (another of this manager's log
        dirs) in the background; a move in progress to another dir is redirected. None if the
        partition is unknown, or already in `log_dir` with no move going on."""
        from minikafka.storage import replica_move
        plog = self.get(topic, partition)
        if plog is None:
            return None
        tp = (topic, partition)
        move = self._moves.get(tp)
        if move is not None and not move.done:
            move.redirect(log_dir)
            return move
        if plog.dir.parent == log_dir:
            return None
        move = replica_move.Move(self, plog, log_dir)
        self._moves[tp] = move
        move.start()
        return move

    def moving(self, topic: str, partition: int) -> "replica_move.Move | None":
        """The partition's move in progress, if any."""
        move = self._moves.get((topic, partition))
        return move if move is not None and not move.done else None

    def moved(self, move: "replica_move.Move", old_dir: Path) -> None:
        """Owner thread (replica_move): the move's log is now in its new directory."""
        if self._dir_counts.get(old_dir.parent, 0) > 0:
            self._dir_counts[old_dir.parent] -= 1
        self._dir_counts[move.plog.dir.parent] = self._dir_counts.get(move.plog.dir.parent, 0) + 1

    def forget_move(self, move: "replica_move.Move") -> None:
        tp = (move.plog.topic, move.plog.partition)
        if self._moves.get(tp) is move:
            del self._moves[tp]

    def mover(self) -> concurrent.futures.ThreadPoolExecutor:
        """The thread copying moving partitions (one move's round at a time)."""
        if self._mover is None:
            self._mover = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="log-move")
        return self._mover

    def swapper(self) -> concurrent.futures.ThreadPoolExecutor:
        """The thread of the swaps (short: never queued behind a copy)."""
        if self._swapper is None:
            self._swapper = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="log-swap")
        return self._swapper

    def is_registered(self, plog: PartitionLog) -> bool:
        return self._logs.get((plog.topic, plog.partition)) is plog

    # -- lookup and lazy opening (owner thread unless noted) ---------------------------------------
    def get(self, topic: str, partition: int) -> PartitionLog | None:
        """The partition's log, opened now (in this thread) if it is not yet, or waiting for a worker
        that already started opening it; None if the partition is unknown. An open that fails raises
        (KafkaStorageError, OSError) and leaves the partition unopened, so a later call tries again."""
        tp = (topic, partition)
        plog = self._logs.get(tp)
        if plog is not None:
            return plog
        u = self._unopened.get(tp)
        if u is None:
            return None
        f = u.future
        if f is not None and not f.cancel():  # a worker started (or finished) it: its result
            try:
                return self._register(u, f.result())
            except BaseException:
                pass  # failed: open here
        u.future = u.job = None
        return self._register(u, self._open(u, self._config_for(topic)))

    def opened(self, topic: str, partition: int) -> PartitionLog | None:
        """The partition's log if it is open (never opens it)."""
        return self._logs.get((topic, partition))

    def has(self, topic: str, partition: int) -> bool:
        """Whether the partition exists here, opened or not."""
        tp = (topic, partition)
        return tp in self._logs or tp in self._unopened

    def directory(self, topic: str, partition: int) -> Path | None:
        """The partition's directory, opened or not (never opens it); None if unknown here."""
        tp = (topic, partition)
        plog: AnyLog | None = self._logs.get(tp) or self._unopened.get(tp)
        return None if plog is None else plog.dir

    @property
    def has_unopened(self) -> bool:
        return bool(self._unopened)

    def unopened(self) -> list[TopicPartition]:
        """Partitions whose log is not open (in sorted order)."""
        return sorted(self._unopened)

    def open_in_worker(self, partitions: Iterable[TopicPartition]) -> list[concurrent.futures.Future]:
        """Start opening the given partitions' logs in a worker thread, one after the other in one task
        (a partition asked for earlier stays with its task). Returns the tasks to wait for; once they
        are done, `collect` (or `get`) registers each log. Unknown or open partitions are skipped."""
        todo: list[tuple[UnopenedLog, concurrent.futures.Future, LogConfig]] = []
        jobs: dict[int, concurrent.futures.Future] = {}
        for topic, partition in partitions:
            u = self._unopened.get((topic, partition))
            if u is None:
                continue
            if u.future is None:
                u.future = concurrent.futures.Future()
                todo.append((u, u.future, self._config_for(topic)))
            elif u.job is not None and not u.job.done():
                jobs[id(u.job)] = u.job
        if todo:
            if self._opener is None:
                self._opener = concurrent.futures.ThreadPoolExecutor(OPEN_WORKERS, thread_name_prefix="log-open")
            job = self._opener.submit(self._open_all, todo)
            for u, _f, _config in todo:
                u.job = job
            jobs[id(job)] = job
        return list(jobs.values())

    def _open_all(self, todo: list[tuple[UnopenedLog, concurrent.futures.Future, LogConfig]]) -> None:
        """Worker: open each log whose open nobody took over (cancelled) meanwhile."""
        for u, f, config in todo:
            if not f.set_running_or_notify_cancel():
                continue
            try:
                f.set_result(self._open(u, config))
            except BaseException as exc:
                f.set_exception(exc)

    def collect(self, topic: str, partition: int) -> PartitionLog | None:
        """Register the log a finished worker open built; None if the partition is not open (its open
        is still pending or running, or failed: then it is logged and a later open tries again)."""
        tp = (topic, partition)
        plog = self._logs.get(tp)
        if plog is not None:
            return plog
        u = self._unopened.get(tp)
        if u is None or u.future is None or not u.future.done():
            return None
        f = u.future
        u.future = u.job = None
        if f.cancelled():
            return None
        exc = f.exception()
        if exc is not None:
            log.error("opening %s failed: %r", u.dir, exc, extra={"topic": u.topic, "partition": u.partition})
            return None
        return self._register(u, f.result())

    def _open(self, u: UnopenedLog, config: LogConfig) -> PartitionLog:
        """Build the log of `u` (any thread; nothing is registered)."""
        t0 = time.monotonic()
        plog = _partition_log_class()(u.dir, config, clock=self._clock, clean_shutdown=u.clean,
                                      high_watermark=self._hw_checkpoints.get((u.topic, u.partition)))
        log.debug("opened %s (%s) in %.1f ms", u.dir.name, "clean" if u.clean else "recovered",
                  (time.monotonic() - t0) * 1000)
        return plog

    def _register(self, u: UnopenedLog, plog: PartitionLog) -> PartitionLog:
        tp = (u.topic, u.partition)
        if self._unopened.get(tp) is u:
            del self._unopened[tp]
            self._logs[tp] = plog
            self.on_open(plog)
        return plog

    def partitions(self) -> list[TopicPartition]:
        """Every partition, opened or not."""
        return sorted([*self._logs, *self._unopened])

    def logs(self) -> list[PartitionLog]:
        """The opened logs."""
        return list(self._logs.values())

    @property
    def partition_count(self) -> int:
        """Partitions registered (opened or not) or reserved by `assign_dirs` and not yet released."""
        return sum(self._dir_counts.values())

    def create(self, topic: str, partition: int, config: LogConfig | None = None,
               topic_id: bytes | None = None) -> PartitionLog:
        """Create (or return the existing) log in the log dir holding the fewest partitions, all in
        the calling thread (see the module docstring for the split version)."""
        existing = self.get(topic, partition)
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
        """The directory each new partition goes to (the log dir with the fewest partitions, a cordoned one
        only when every dir is), reserved until `register` or `release`. Owner thread; no file work."""
        out = []
        for partition in partitions:
            log_dir = self._preferred.pop((topic, partition), None)
            if log_dir is None:
                cordoned = self.cordoned_dirs()
                usable = [d for d in self.log_dirs if d not in cordoned] or self.log_dirs
                log_dir = min(usable, key=lambda d: self._dir_counts[d])
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
            plog = _partition_log_class()(directory, config or self.default_config, clock=self._clock,
                                          clean_shutdown=True)
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

    def unregister(self, topic: str, partition: int) -> AnyLog | None:
        """Forget the partition (owner thread); the caller closes and removes it with `discard`. An
        unopened one comes back as its `UnopenedLog` (no need to open what is being deleted)."""
        tp = (topic, partition)
        move = self._moves.pop(tp, None)
        if move is not None:
            move.stop()  # before it goes: a swap in progress finishes in the new directory
        plog: AnyLog | None = self._logs.pop(tp, None)
        if plog is None:
            plog = self._unopened.pop(tp, None)
        if plog is not None:
            plog.drain_writes()  # its writes are published here, not in the thread that discards it
            self.release([plog.dir])
        return plog

    @staticmethod
    def discard(plog: AnyLog, remove: bool = True) -> Path | None:
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

    def checkpoint_high_watermarks(self) -> int:
        """Write each log dir's replication-offset-checkpoint: the high watermark of every replicated
        log there (unopened ones keep the value read at load). Only log dirs with something to say,
        or an existing file, are written. Does file I/O with fsync: call it off the event loop (it
        only reads the logs' high watermarks). Returns how many entries were written."""
        per_dir: dict[Path, dict[TopicPartition, int]] = {d: {} for d in self.log_dirs}
        for tp, u in list(self._unopened.items()):
            hw = self._hw_checkpoints.get(tp)
            if hw is not None:
                per_dir.setdefault(u.dir.parent, {})[tp] = hw
        for tp, plog in list(self._logs.items()):
            if plog.replicated:
                per_dir.setdefault(plog.dir.parent, {})[tp] = plog.high_watermark
        written = 0
        for log_dir, entries in per_dir.items():
            path = log_dir / HW_CHECKPOINT_FILE
            if entries or path.exists():
                write_offset_checkpoint(path, entries)
                written += len(entries)
        return written

    def enforce_retention(self, now_ms: int | None = None) -> int:
        """Retention of the opened logs (an unopened one is checked once opened)."""
        now_ms = int(self._clock() * 1000) if now_ms is None else now_ms
        return sum(plog.enforce_retention(now_ms) for plog in list(self._logs.values()))

    def flush_all(self) -> None:
        for plog in self._logs.values():
            plog.flush()

    def close(self) -> None:
        """Flush and close every opened log (and those a worker is opening: waited for), then per log
        dir write the partitions still needing recovery and the clean-shutdown marker."""
        for move in list(self._moves.values()):
            move.stop()  # a copy in progress is given up, a swap in progress finished
        self._moves.clear()
        for pool in (self._mover, self._swapper):
            if pool is not None:
                pool.shutdown(wait=True)  # a stopped copy ends within a chunk; then its copy is removed
        self._mover = self._swapper = None
        if self._opener is not None:
            for u in self._unopened.values():
                if u.future is not None:
                    u.future.cancel()  # not started: stays unopened
            self._opener.shutdown(wait=True, cancel_futures=True)
            self._opener = None
        plogs = list(self._logs.values())
        still_unclean: dict[Path, list[str]] = {d: [] for d in self.log_dirs}
        for u in self._unopened.values():
            opened = u.opened_log()
            if opened is not None:
                plogs.append(opened)  # recovered by its open: clean once closed
            elif not u.clean:
                still_unclean.setdefault(u.dir.parent, []).append(u.dir.name)
        for plog in plogs:
            plog.flush()
        if any(plog.replicated for plog in plogs) or self._hw_checkpoints:
            self.checkpoint_high_watermarks()
        for plog in plogs:
            plog.close()
        self._logs.clear()
        self._unopened.clear()
        self._dir_counts = {d: 0 for d in self.log_dirs}
        for log_dir in self.log_dirs:
            log_dir.mkdir(parents=True, exist_ok=True)
            _write_pending(log_dir, sorted(still_unclean.get(log_dir, ())))
            atomic_write(log_dir / CLEAN_SHUTDOWN_FILE,
                         json.dumps({"version": 0, "brokerEpoch": self.broker_epoch}).encode())


def read_offset_checkpoint(path: Path) -> dict[TopicPartition, int]:
    """(topic, partition) -> offset of a Kafka offset checkpoint file; {} if missing or unreadable."""
    try:
        lines = path.read_text("utf-8").splitlines()
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        log.warning("ignoring unreadable %s: %s", path, exc)
        return {}
    out: dict[TopicPartition, int] = {}
    try:
        if not lines:
            return {}
        if int(lines[0]) != 0:
            raise ValueError(f"unrecognised version {lines[0]!r}")
        count = int(lines[1]) if len(lines) > 1 else 0
        for line in lines[2:]:
            topic, partition, offset = line.split()
            out[(topic, int(partition))] = int(offset)
        if len(out) != count:
            raise ValueError(f"expected {count} entries, found {len(out)}")
    except (ValueError, IndexError) as exc:
        log.warning("ignoring unreadable %s: %s", path, exc)
        return {}
    return out


def write_offset_checkpoint(path: Path, entries: dict[TopicPartition, int]) -> None:
    """Kafka's OffsetCheckpointFile: version 0, count, `topic partition offset` lines (atomic)."""
    lines = ["0", str(len(entries)), *(f"{t} {p} {o}" for (t, p), o in sorted(entries.items()))]
    atomic_write(path, ("\n".join(lines) + "\n").encode("utf-8"))


def _read_pending(log_dir: Path) -> set[str] | None:
    """Directory names `close` listed as still needing recovery; None (every partition of the dir
    is unclean) if the list is unreadable."""
    path = log_dir / RECOVERY_PENDING_FILE
    try:
        return set(json.loads(path.read_bytes())["partitions"])
    except FileNotFoundError:
        return set()
    except (ValueError, KeyError, TypeError):
        log.warning("unreadable %s: recovering every partition of %s", path, log_dir)
        return None


def _marker_epoch(marker: Path) -> int:
    """The brokerEpoch of a clean-shutdown marker (-1 when unreadable)."""
    try:
        return int(json.loads(marker.read_text()).get("brokerEpoch", -1))
    except (OSError, ValueError, TypeError, AttributeError):
        return -1


def _write_pending(log_dir: Path, names: list[str]) -> None:
    """Before the marker: the list `_read_pending` reads back, or no file if it is empty."""
    path = log_dir / RECOVERY_PENDING_FILE
    if names:
        atomic_write(path, json.dumps({"version": 0, "partitions": names}).encode())
    elif path.exists():
        path.unlink()
        fsync_dir(log_dir)
