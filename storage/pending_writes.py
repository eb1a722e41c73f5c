"""The appends of one partition whose bytes a writer thread (storage/append_writer.py) is writing.

Invariant: appends are published in offset order, each only once its own write and every earlier one
have finished. Once a write fails, the later writes of this partition are skipped (they would land past
a hole) and every append still pending fails with it; the log then rewinds to what was published.
Everything but `_write` runs on the owner thread.
"""
from __future__ import annotations

import asyncio
from collections import deque
from concurrent.futures import Future
from pathlib import Path
from typing import Callable, NamedTuple

from minikafka.storage import append_writer
from minikafka.storage.append_preparation import AppendInfo, Prepared
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.segment import LogSegment


class PendingAppend(NamedTuple):
    """An append being written at `start` of `segment`."""
    prepared: Prepared
    segment: LogSegment
    start: int
    published: "asyncio.Future[AppendInfo]"
    write: Future


class PendingWrites:
    def __init__(self, directory: Path, publish: Callable[[PendingAppend], AppendInfo],
                 rewind: Callable[[list[PendingAppend], BaseException], None]) -> None:
        """`publish` makes a written append visible; `rewind` gets the appends a failed write dooms (the
        failed one first, their writes finished) and the error."""
        self._name = directory.name
        self._log_dir = directory.parent  # whose writer thread writes this partition
        self._publish = publish
        self._rewind = rewind
        self._queue: deque[PendingAppend] = deque()
        self.bytes = 0  # their bytes, all in the active segment (a roll drains them first)
        self._failed = False  # set by the writer thread; the writes after it are skipped

    def __bool__(self) -> bool:
        return bool(self._queue)

    def answer_after_last(self, info: AppendInfo, loop: asyncio.AbstractEventLoop) -> "asyncio.Future[AppendInfo]":
        """`info` (a retry's original answer), once the newest pending append is published (or its error)."""
        done: asyncio.Future[AppendInfo] = loop.create_future()
        self._queue[-1].published.add_done_callback(
            lambda f: done.cancelled() or (done.set_exception(f.exception()) if f.exception() is not None
                                           else done.set_result(info)))
        return done

    def submit(self, prepared: Prepared, segment: LogSegment, start: int,
               loop: asyncio.AbstractEventLoop) -> "asyncio.Future[AppendInfo]":
        """Hand `prepared`'s bytes (offsets already reserved) to the log dir's writer thread, to go at
        `start` of `segment`; the future resolves on `loop` once they are published."""
        self.bytes += len(prepared.buf)
        pending = PendingAppend(prepared, segment, start, loop.create_future(),
                                append_writer.submit(self._log_dir, self._write, segment, prepared.buf, start))

        def written(_f: object) -> None:
            try:
                loop.call_soon_threadsafe(self.publish_written)
            except RuntimeError:  # the loop is closed: close() drains and publishes instead
                pass
        pending.write.add_done_callback(written)
        self._queue.append(pending)
        return pending.published

    def _write(self, segment: LogSegment, buf: memoryview | bytearray, start: int) -> None:
        """Writer thread: one pending append's bytes; skipped once an earlier one failed."""
        if self._failed:
            raise KafkaStorageError(f"{self._name}: an earlier write failed")
        try:
            segment.write(buf, start)
        except BaseException:
            self._failed = True
            raise

    def publish_written(self) -> None:
        """Publish the appends whose write finished, oldest first, up to the first still being written; a
        failed write dooms it and everything after it."""
        queue = self._queue
        while queue and queue[0].write.done():
            pending = queue.popleft()
            exc = pending.write.exception()
            if exc is not None:
                doomed = [pending, *queue]
                queue.clear()
                for later in doomed[1:]:
                    try:
                        later.write.result()
                    except Exception:
                        pass
                self._failed = False
                self.bytes = 0
                self._rewind(doomed, exc)
                return
            self.bytes -= len(pending.prepared.buf)
            try:
                info = self._publish(pending)
            except Exception as exc:  # an index write failed: the bytes are in the file, say so
                if not pending.published.done():
                    pending.published.set_exception(exc)
                continue
            if not pending.published.done():
                pending.published.set_result(info)

    def drain(self) -> None:
        """Wait for every pending write and publish it (blocks for at most the writes queued on this log
        dir's writer)."""
        if not self._queue:
            return
        for pending in list(self._queue):
            try:
                pending.write.result()
            except Exception:
                pass
        self.publish_written()

