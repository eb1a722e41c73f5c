"""PartitionLog.begin_append: writes on the log dir's writer thread, published in offset order.

The writer thread is held with a blocking task so that appends are provably pending while the tests
look at the log; a real file write then happens when it is released.
"""
from __future__ import annotations

import asyncio
import threading

import pytest

from minikafka.storage import PartitionLog, append_writer, partition_log
from minikafka.storage.errors import KafkaStorageError, OutOfOrderSequenceError
from minikafka.storage.segment import LogSegment
from tests.support.storage_helpers import build_batch, read_all, record_offsets
from tests.unit.storage.test_producer_state import pbatch


@pytest.fixture(autouse=True)
def every_write_on_the_writer(monkeypatch):
    """These small batches would be written inline; send them to the writer thread like big ones."""
    monkeypatch.setattr(partition_log, "INLINE_WRITE_BYTES", -1)


def test_small_append_with_nothing_pending_is_written_inline(open_log, monkeypatch):
    monkeypatch.setattr(partition_log, "INLINE_WRITE_BYTES", 64 * 1024)
    plog = open_log()

    async def run() -> None:
        held = HeldWriter(plog)
        info = plog.begin_append(build_batch(2))  # not a future: written although the writer is held
        assert (info.first_offset, plog.log_end_offset) == (0, 2)
        held.release()
    asyncio.run(run())


class HeldWriter:
    """Blocks `plog`'s writer thread until `release()`."""

    def __init__(self, plog: PartitionLog) -> None:
        self.gate = threading.Event()
        self.started = threading.Event()

        def hold() -> None:
            self.started.set()
            self.gate.wait(10)
        append_writer.submit(plog.dir.parent, hold)
        assert self.started.wait(5)

    def release(self) -> None:
        self.gate.set()


def test_pipelined_idempotent_batches_publish_in_order(open_log):
    plog = open_log()

    async def run() -> None:
        held = HeldWriter(plog)
        first = plog.begin_append(pbatch(7, 0, 0, 3))
        second = plog.begin_append(pbatch(7, 0, 3, 2))  # checked against the pending first one
        assert plog.log_end_offset == 0 and read_all(plog) == b""
        await asyncio.sleep(0.05)
        assert not first.done() and not second.done()
        held.release()
        a, b = await first, await second
        assert (a.first_offset, a.last_offset, b.first_offset, b.last_offset) == (0, 2, 3, 4)
    asyncio.run(run())
    assert plog.log_end_offset == 5
    assert record_offsets(read_all(plog)) == [0, 1, 2, 3, 4]
    with pytest.raises(OutOfOrderSequenceError):
        plog.append(pbatch(7, 0, 9))


def test_a_retry_of_a_pending_batch_waits_for_the_original(open_log):
    plog = open_log()

    async def run() -> None:
        held = HeldWriter(plog)
        original = plog.begin_append(pbatch(8, 0, 0, 2))
        retry = plog.begin_append(pbatch(8, 0, 0, 2))
        await asyncio.sleep(0.05)
        assert not retry.done()
        held.release()
        info = await retry
        assert original.done() and (info.first_offset, info.last_offset) == (0, 1)
    asyncio.run(run())
    assert plog.log_end_offset == 2 and record_offsets(read_all(plog)) == [0, 1]


def test_synchronous_append_waits_for_pending_writes(open_log):
    plog = open_log()

    async def run() -> None:
        held = HeldWriter(plog)
        pending = plog.begin_append(build_batch(3))
        threading.Timer(0.1, held.release).start()
        info = plog.append(build_batch(2))  # blocks until the pending write is done, then goes after it
        assert pending.done() and (await pending).first_offset == 0
        assert (info.first_offset, info.last_offset) == (3, 4)
    asyncio.run(run())
    assert record_offsets(read_all(plog)) == list(range(5))


def test_roll_with_pending_writes_keeps_offsets_and_segments_dense(open_log):
    batch = build_batch(10, value_size=100)
    plog = open_log(segment_bytes=3 * len(batch))

    async def run() -> None:
        held = HeldWriter(plog)
        threading.Timer(0.1, held.release).start()
        futures = [plog.begin_append(build_batch(10, value_size=100)) for _ in range(7)]
        infos = [await f for f in futures]
        assert [i.first_offset for i in infos] == list(range(0, 70, 10))
    asyncio.run(run())
    assert len(plog.segments) >= 3
    assert record_offsets(read_all(plog)) == list(range(70))


def test_failed_write_fails_later_pending_appends_and_rewinds(open_log, monkeypatch):
    plog = open_log()
    plog.append(pbatch(9, 0, 0, 2))
    real_write = LogSegment.write
    calls = []

    def failing_write(self, buf, start):
        calls.append(start)
        if len(calls) == 1:
            raise KafkaStorageError("No space left on device")
        return real_write(self, buf, start)
    monkeypatch.setattr(LogSegment, "write", failing_write)

    async def run() -> None:
        held = HeldWriter(plog)
        doomed = [plog.begin_append(pbatch(9, 0, 2, 2)), plog.begin_append(pbatch(9, 0, 4, 2))]
        held.release()
        for f in doomed:
            with pytest.raises(KafkaStorageError):
                await f
        assert len(calls) == 1  # the write after the failed one was skipped
        assert plog.log_end_offset == 2
        # the producer state is what was published: the retry of sequence 2 is accepted
        again = await plog.begin_append(pbatch(9, 0, 2, 2))
        assert (again.first_offset, again.last_offset) == (2, 3)
    asyncio.run(run())
    assert record_offsets(read_all(plog)) == [0, 1, 2, 3]
    size = plog.size_bytes
    plog.close()
    reopened = PartitionLog(plog.dir, plog.config, clean_shutdown=False)
    try:
        assert reopened.log_end_offset == 4 and reopened.size_bytes == size
    finally:
        reopened.close()


def test_close_finishes_pending_writes(open_log, tmp_path):
    plog = open_log()

    async def run() -> None:
        held = HeldWriter(plog)
        fut = plog.begin_append(build_batch(4))
        threading.Timer(0.1, held.release).start()
        plog.close()
        assert fut.done() and (await fut).last_offset == 3
    asyncio.run(run())
    reopened = PartitionLog(plog.dir, plog.config, clean_shutdown=True)
    try:
        assert reopened.log_end_offset == 4
    finally:
        reopened.close()
