"""Moving a partition's log to another log dir of this broker (AlterReplicaLogDirs, JBOD).

Kafka creates a future log in the destination dir, fills it from the current log with its
ReplicaAlterLogDirsThread, and swaps the two once the future log has caught up. Here the "future log"
is a copy of the partition's directory, `<topic>-<partition>.<uuid>-future` in the destination dir:

1. Copy rounds (the move thread; the log stays fully live): the owner thread rolls the log, so every
   batch written so far is in closed segments, and the move thread copies the directory's files except
   the new active segment's (files already copied with the same size and mtime are skipped, files no
   longer in the source removed: retention and compaction go on meanwhile). Each copied file is
   fsynced. A round ends with the active segment holding only what was appended while it ran; another
   round follows while that tail is above TAIL_BYTES (at most MAX_ROUNDS).
2. The swap (a worker thread, the log quiesced: appends are refused with KAFKA_STORAGE_ERROR, which
   producers retry; reads go on): the producer state is snapshotted at the log end and the epoch cache
   written (PartitionLog.quiesce), the log fsynced, the directory copied once more (the short tail and
   the small metadata files), MOVE_COMPLETE_FILE written and fsynced, the old directory renamed to
   `-delete`, the copy renamed to `<topic>-<partition>`, the copy opened as a log (a clean open) and the
   old directory removed. The owner thread then makes the partition's PartitionLog object go on in the
   new files (PartitionLog.adopt): everyone holding the log keeps it.

A crash (kill -9) at any point leaves one authoritative directory, which LogManager.load finds: before
MOVE_COMPLETE_FILE the old directory, and the partial copy is removed (the move is not resumed: it is
asked for again); after it, the old directory if it is still there (the copy is removed), else the copy
(the `-delete` directory is removed as any other).
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import shutil
import threading
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from minikafka.storage.log_loader import STRAY_SUFFIXES
from minikafka.storage.partition_metadata import atomic_write, fsync_dir
from minikafka.storage.segment import SEGMENT_SUFFIXES, segment_name

if TYPE_CHECKING:
    from minikafka.storage.log_manager import LogManager
    from minikafka.storage.partition_log import PartitionLog

log = logging.getLogger(__name__)

TAIL_BYTES = 1 << 20  # the swap copies at most about this much of the active segment (plus what is new)
MAX_ROUNDS = 4
CHUNK = 1 << 20


class Stopped(Exception):
    """The move was given up (the partition deleted, the broker closing)."""


def _copy_file(src: Path, dst: Path, cancel: threading.Event | None) -> None:
    """Copy `src` over `dst` (through a temporary name), fsynced, with src's mtime."""
    tmp = dst.with_name(dst.name + ".tmp")
    with open(src, "rb") as fin:
        st = os.fstat(fin.fileno())
        with open(tmp, "wb") as fout:
            while True:
                if cancel is not None and cancel.is_set():
                    raise Stopped()
                chunk = fin.read(CHUNK)
                if not chunk:
                    break
                fout.write(chunk)
            fout.flush()
            os.fsync(fout.fileno())
    os.utime(tmp, ns=(st.st_atime_ns, st.st_mtime_ns))
    os.replace(tmp, dst)


def _is_segment_file(name: str) -> bool:
    return name.endswith(SEGMENT_SUFFIXES) and name[:20].isdigit()


def sync_dir(src: Path, dst: Path, skip: frozenset[str] = frozenset(), *, final: bool = False,
             cancel: threading.Event | None = None) -> int:
    """Make `dst` hold `src`'s files (not those in `skip`, hidden or temporary ones): copy those missing
    or differing in size or mtime (with `final`, every file that is not a segment file too: checkpoints
    and snapshots are small), remove those `src` no longer has. Returns the bytes copied."""
    copied = 0
    names = set()
    for name in os.listdir(src):
        if name in skip or name.startswith(".") or name.endswith(STRAY_SUFFIXES):
            continue
        s = src / name
        try:
            st = os.stat(s)
        except FileNotFoundError:  # deleted meanwhile (retention)
            continue
        if not os.path.isfile(s):
            continue
        names.add(name)
        d = dst / name
        try:
            dt = os.stat(d)
            same = dt.st_size == st.st_size and dt.st_mtime_ns == st.st_mtime_ns
        except FileNotFoundError:
            same = False
        if same and not (final and not _is_segment_file(name)):
            continue
        try:
            _copy_file(s, d, cancel)
        except FileNotFoundError:
            names.discard(name)
            continue
        copied += st.st_size
    for name in os.listdir(dst):
        if name not in names and not name.startswith("."):
            (dst / name).unlink(missing_ok=True)
    return copied


def adopt(plog: "PartitionLog", moved: "PartitionLog") -> None:
    """Owner thread, `plog` quiesced: `plog` goes on in `moved`'s files (`moved`: the copy of its
    directory opened privately, never registered). `plog` stays the partition's log for everyone holding
    it. Its old segments keep their descriptors for file.delete.delay.ms (reads in flight), then close.
    Ends the quiescence."""
    from minikafka.storage.pending_writes import PendingWrites
    old = list(plog._view[0])
    now_ms = plog._now_ms()
    plog.dir = moved.dir
    plog._epochs = moved._epochs
    plog._producers = moved._producers
    plog._producers.producer_id_expiration_ms = plog.config.producer_id_expiration_ms
    plog._pending = PendingWrites(plog.dir, lambda p: plog._published(p.prepared, p.segment, p.start), plog._rewind)
    plog._unflushed = []
    plog._unflushed_messages = 0
    plog._log_start_offset = moved._log_start_offset
    plog._publish(list(moved._view[0]))
    plog._leo = plog._next_offset = moved._leo
    plog.segments[-1].index_interval_bytes = plog.config.index_interval_bytes
    if plog._hw is not None:
        plog._hw = plog._clamp_hw(plog._hw)
    deadline = now_ms + plog.config.file_delete_delay_ms
    for seg in old:
        seg.deleted = True  # its paths are gone: closing it must not write to them
        plog._graveyard.append((deadline, seg))
    plog._truncating = False


class Move:
    """One partition's move to `dest` (a log dir), driven by a task on the owner thread's event loop."""

    def __init__(self, manager: "LogManager", plog: "PartitionLog", dest: Path) -> None:
        self.manager = manager
        self.plog = plog
        self.dest = dest
        self.future_dir: Path | None = None
        self.copied_offset = plog.log_start_offset  # what the future copy holds below (offset lag)
        self.done = False
        self.error: BaseException | None = None
        self._cancel = threading.Event()
        self._task: asyncio.Task | None = None
        self._swap: concurrent.futures.Future | None = None
        self._swapped = False  # adopted (by the task or by `stop`)
        self.finished = asyncio.get_running_loop().create_future()

    @property
    def offset_lag(self) -> int:
        return max(0, self.plog.log_end_offset - self.copied_offset)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"move-{self.plog.dir.name}")

    def redirect(self, dest: Path) -> None:
        """A new destination while the copy runs (Kafka: the future replica is removed and made again)."""
        self.dest = dest

    def _check(self) -> None:
        if self._cancel.is_set() or not self.manager.is_registered(self.plog):
            raise Stopped()

    async def _run(self) -> None:
        plog = self.plog
        loop = asyncio.get_running_loop()
        mover = self.manager.mover()
        try:
            while True:
                dest = self.dest
                if dest == plog.dir.parent:  # redirected back to where it is: nothing to move
                    return
                future = dest / f"{plog.dir.name}.{uuid.uuid4().hex}-future"
                self.future_dir = future
                self.copied_offset = plog.log_start_offset
                await loop.run_in_executor(mover, self._make, future)
                for _round in range(MAX_ROUNDS):
                    self._check()
                    if dest != self.dest:
                        break
                    while plog._truncating:  # a follower truncation owns the log for a moment
                        await asyncio.sleep(0.01)
                        self._check()
                    active = plog.roll()
                    skip = frozenset(segment_name(active.base_offset) + s for s in SEGMENT_SUFFIXES)
                    await loop.run_in_executor(mover, self._copy, plog.dir, future, skip)
                    self.copied_offset = active.base_offset
                    if plog.segments[-1].size <= TAIL_BYTES:
                        break
                self._check()
                if dest != self.dest:
                    await loop.run_in_executor(mover, shutil.rmtree, future, True)
                    continue
                while not plog.quiesce():
                    await asyncio.sleep(0.01)
                    self._check()
                old_dir = plog.dir
                self._swap = self.manager.swapper().submit(self._swap_files, future)
                try:
                    moved = await asyncio.wrap_future(self._swap)
                except BaseException:
                    if not self._swapped:
                        plog._truncating = False
                    raise
                self._adopt(moved, old_dir)
                return
        except Stopped:
            log.info("moving %s to %s stopped", plog.dir.name, self.dest)
            self._discard_future()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self.error = exc
            log.error("moving %s to %s failed: %r", plog.dir.name, self.dest, exc)
            self._discard_future()
        finally:
            self.done = True
            self.manager.forget_move(self)
            if not self.finished.done():
                self.finished.set_result(self._swapped)

    def _discard_future(self) -> None:
        """Remove the copy on the move thread, after whatever it is doing for this move (one thread)."""
        if self.future_dir is not None and not self._swapped:
            self.manager.mover().submit(shutil.rmtree, self.future_dir, True)

    def _make(self, future: Path) -> None:
        future.mkdir(parents=True)
        fsync_dir(future.parent)

    def _copy(self, src: Path, future: Path, skip: frozenset[str]) -> None:
        try:
            sync_dir(src, future, skip, cancel=self._cancel)
        except BaseException:
            shutil.rmtree(future, ignore_errors=True)
            raise

    def _swap_files(self, future: Path) -> "PartitionLog":
        """Worker thread, the log quiesced: the last copy and the swap (the module docstring)."""
        from minikafka.storage.log_manager import DELETE_DIR_SUFFIX, MOVE_COMPLETE_FILE
        from minikafka.storage.partition_log import PartitionLog
        plog = self.plog
        try:
            plog._fsync()  # quiesced: nobody else writes or flushes
            sync_dir(plog.dir, future, final=True)
            atomic_write(future / MOVE_COMPLETE_FILE, b"")
            fsync_dir(future)
        except BaseException:
            shutil.rmtree(future, ignore_errors=True)
            raise
        src = plog.dir
        final = future.parent / src.name
        doomed = src.with_name(f"{src.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        src.rename(doomed)
        fsync_dir(src.parent)
        try:
            future.rename(final)
            fsync_dir(final.parent)
            (final / MOVE_COMPLETE_FILE).unlink()
            moved = PartitionLog(final, plog.config, clock=plog._clock, clean_shutdown=True)
        except BaseException:  # back to the old directory
            if final.exists():
                final.rename(future)
            doomed.rename(src)
            shutil.rmtree(future, ignore_errors=True)
            raise
        shutil.rmtree(doomed, ignore_errors=True)
        fsync_dir(src.parent)
        return moved

    def _adopt(self, moved: "PartitionLog", old_dir: Path) -> None:
        if self._swapped:
            return
        self._swapped = True
        adopt(self.plog, moved)
        self.manager.moved(self, old_dir)
        log.info("moved %s from %s to %s", self.plog.dir.name, old_dir.parent, self.plog.dir.parent)

    def stop(self) -> None:
        """Owner thread (the partition being deleted, the broker closing): give the copy up; a swap in
        progress is finished (waited for: it is short)."""
        self._cancel.set()
        swap = self._swap
        if swap is not None and not self._swapped:
            old_dir = self.plog.dir
            try:
                moved = swap.result()
            except BaseException:
                self.plog._truncating = False
            else:
                self._adopt(moved, old_dir)
        if self._task is not None and not self._task.done():
            self._task.cancel()
            self._discard_future()
        self.done = True
