"""LogManager's lazy opening: load lists partitions without opening them; a log opens on first use (in
the caller or a worker thread); the clean-shutdown state of partitions never opened survives a clean
shutdown and is dropped by a crash.

Whether a partition was opened as clean or unclean is observed through a corruption only a full
recovery finds: a flipped byte in the first batch of the last segment, below the last index entry
(index.interval.bytes=0 indexes every batch). An unclean open truncates the log there (LEO 0); a
clean one checks only the tail and keeps it."""
from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from minikafka.storage import LogConfig, LogManager
from minikafka.storage.log_manager import CLEAN_SHUTDOWN_FILE, RECOVERY_PENDING_FILE, UnopenedLog
from tests.support.storage_helpers import build_batch

CONFIG = LogConfig(index_interval_bytes=0)
BATCHES = 4
PER_BATCH = 3


def _fill(manager: LogManager, topic: str, partitions: int) -> None:
    for p in range(partitions):
        plog = manager.create(topic, p)
        for _ in range(BATCHES):
            plog.append(build_batch(PER_BATCH))


def _corrupt_first_batch(directory: Path) -> None:
    seg = sorted(directory.glob("*.log"))[-1]
    data = bytearray(seg.read_bytes())
    data[70] ^= 0x5A  # inside the first batch's records: covered by its CRC only
    seg.write_bytes(bytes(data))


def _manager(tmp_path: Path, clock) -> LogManager:
    return LogManager([tmp_path], CONFIG, clock=clock)


def test_load_lists_partitions_and_opens_each_on_first_get(tmp_path, clock):
    m = _manager(tmp_path, clock)
    m.load()
    _fill(m, "t", 3)
    m.close()

    m = _manager(tmp_path, clock)
    opened = []
    m.on_open = opened.append
    assert m.load(lazy=True) == []
    assert m.logs() == [] and m.partitions() == [("t", 0), ("t", 1), ("t", 2)]
    assert m.has("t", 1) and not m.has("t", 3) and m.has_unopened
    assert m.opened("t", 1) is None
    plog = m.get("t", 1)
    assert plog.log_end_offset == BATCHES * PER_BATCH and opened == [plog]
    assert m.get("t", 1) is plog and m.opened("t", 1) is plog and m.logs() == [plog]
    assert m.unopened() == [("t", 0), ("t", 2)]
    m.close()


def test_open_in_worker_then_collect(tmp_path, clock):
    m = _manager(tmp_path, clock)
    m.load()
    _fill(m, "t", 3)
    m.close()

    m = _manager(tmp_path, clock)
    m.load(lazy=True)
    (job,) = m.open_in_worker([("t", 0), ("t", 1), ("nope", 0)])  # one task for both
    assert m.open_in_worker([("t", 0)]) in ([job], [])  # asked again: the same task (or none if done)
    job.result(timeout=10)
    assert m.opened("t", 0) is None  # built, not registered until collected on the owner thread
    built = m.collect("t", 0)
    assert built is not None and m.opened("t", 0) is built and m.get("t", 0) is built
    assert m.open_in_worker([("t", 0)]) == []
    assert m.get("t", 1).log_end_offset == BATCHES * PER_BATCH  # get registers a finished open too
    assert m.collect("t", 2) is None and m.opened("t", 2) is None  # never asked for
    m.close()


def test_get_takes_over_an_open_not_started_yet(tmp_path, clock):
    m = _manager(tmp_path, clock)
    m.load()
    _fill(m, "t", 2)
    m.close()
    m = _manager(tmp_path, clock)
    m.load(lazy=True)
    gate = threading.Event()
    m.open_in_worker([("t", 1)])[0].result(timeout=10)  # the worker pool exists
    blocker = m._opener.submit(gate.wait)  # the workers are busy: the next task waits
    m._opener.submit(gate.wait)
    (job,) = m.open_in_worker([("t", 0)])
    plog = m.get("t", 0)  # not started by a worker: opened here at once
    assert plog.log_end_offset == BATCHES * PER_BATCH
    gate.set()
    blocker.result(timeout=10)
    job.result(timeout=10)
    assert m.get("t", 0) is plog
    m.close()


def test_crash_after_a_clean_start_recovers_partitions_never_opened(tmp_path, clock):
    m = _manager(tmp_path, clock)
    m.load()
    _fill(m, "t", 2)
    m.close()
    m = _manager(tmp_path, clock)
    m.load(lazy=True)  # clean start: the marker is consumed
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    m.get("t", 0).append(build_batch(1))
    # kill -9: no close. Partition 1 was never opened; it is recovered as unclean all the same.
    _corrupt_first_batch(tmp_path / "t-1")
    m = _manager(tmp_path, clock)
    m.load(lazy=True)
    assert m.get("t", 1).log_end_offset == 0
    assert m.get("t", 0).log_end_offset == BATCHES * PER_BATCH + 1
    m.close()


def test_clean_shutdown_keeps_unclean_partitions_that_were_never_opened(tmp_path, clock):
    m = _manager(tmp_path, clock)
    m.load()
    _fill(m, "t", 3)
    # a crash: no close, every partition is unclean
    m = _manager(tmp_path, clock)
    m.load(lazy=True)
    m.get("t", 0)  # recovered by its open
    m.close()  # t-1 and t-2 were never opened: still unclean
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert json.loads((tmp_path / RECOVERY_PENDING_FILE).read_text())["partitions"] == ["t-1", "t-2"]
    _corrupt_first_batch(tmp_path / "t-0")
    _corrupt_first_batch(tmp_path / "t-1")

    m = _manager(tmp_path, clock)
    m.load(lazy=True)
    assert m.get("t", 0).log_end_offset == BATCHES * PER_BATCH  # clean: only its tail is checked
    assert m.get("t", 1).log_end_offset == 0  # still unclean: fully recovered
    m.close()  # t-2 still never opened
    assert json.loads((tmp_path / RECOVERY_PENDING_FILE).read_text())["partitions"] == ["t-2"]

    m = _manager(tmp_path, clock)
    m.load()  # opens everything
    m.close()
    assert not (tmp_path / RECOVERY_PENDING_FILE).exists()


def test_unreadable_pending_list_recovers_every_partition(tmp_path, clock):
    m = _manager(tmp_path, clock)
    m.load()
    _fill(m, "t", 1)
    m.close()
    (tmp_path / RECOVERY_PENDING_FILE).write_text("{not json")
    _corrupt_first_batch(tmp_path / "t-0")
    m = _manager(tmp_path, clock)
    m.load(lazy=True)
    assert m.get("t", 0).log_end_offset == 0
    m.close()


def test_unopened_partition_is_deleted_without_opening(tmp_path, clock, monkeypatch):
    m = _manager(tmp_path, clock)
    m.load()
    _fill(m, "t", 2)
    m.close()
    m = _manager(tmp_path, clock)
    m.load(lazy=True)
    monkeypatch.setattr(m, "_open", lambda *_a: pytest.fail("opened a partition being deleted"))
    gone = m.unregister("t", 1)
    assert isinstance(gone, UnopenedLog)
    assert m.discard(gone, remove=True) is None
    assert not (tmp_path / "t-1").exists() and m.partitions() == [("t", 0)]
    assert m.delete_partition("t", 0) and m.partitions() == []
    m.close()


def test_close_waits_for_an_open_in_flight_and_counts_it_clean(tmp_path, clock):
    m = _manager(tmp_path, clock)
    m.load()
    _fill(m, "t", 2)  # then a crash: both unclean
    m = _manager(tmp_path, clock)
    m.load(lazy=True)
    m.open_in_worker([("t", 0)])[0].result(timeout=10)  # never collected
    m.close()
    assert json.loads((tmp_path / RECOVERY_PENDING_FILE).read_text())["partitions"] == ["t-1"]


def test_retention_and_flush_touch_only_opened_logs(tmp_path, clock):
    m = LogManager([tmp_path], LogConfig(retention_ms=1000, index_interval_bytes=0), clock=clock)
    m.load()
    _fill(m, "t", 2)
    m.close()
    m = LogManager([tmp_path], LogConfig(retention_ms=1000, index_interval_bytes=0), clock=clock)
    m.load(lazy=True)
    clock.advance(10_000)
    m.flush_all()
    assert m.enforce_retention() == 0 and m.logs() == []
    plog = m.get("t", 0)
    plog.roll()
    assert m.enforce_retention() == 1 and plog.log_start_offset == BATCHES * PER_BATCH
    m.close()
