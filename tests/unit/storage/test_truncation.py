"""PartitionLog.truncate_to / truncate_fully_and_start_at (a follower truncating to its leader): the
result equals a log that only ever received the kept prefix (bytes, indexes, producer state,
aborted-txn index, epoch cache, high watermark), also after a crash in the middle and a reopen."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from minikafka.storage.leader_epoch_cache import EpochEntry as E
from minikafka.storage.partition_log import PartitionLog
from minikafka.storage.producer_state import AppendOrigin
from minikafka.storage.segment import LogSegment
from minikafka.storage.txn_markers import build_marker_batch
from tests.support.storage_helpers import build_batch, read_all, split_batches, verify_segment_files
from tests.unit.storage.test_follower_append import NOW, txn_batch

SEG = dict(segment_bytes=300, index_interval_bytes=100)


def fill(plog: PartitionLog) -> None:
    """Data over several segments and epochs: plain, idempotent, an aborted and an open transaction."""
    plog.append(build_batch(3), leader_epoch=0)                                    # 0-2
    plog.append(txn_batch(7, 0, 0, 2, transactional=False), leader_epoch=0)       # 3-4
    plog.append(txn_batch(9, 1, 0, 2), leader_epoch=1)                            # 5-6
    plog.append(build_batch(2), leader_epoch=1)                                   # 7-8
    plog.append(build_marker_batch(9, 1, 0, False, NOW), leader_epoch=1,
                origin=AppendOrigin.COORDINATOR)                                   # 9 abort
    plog.append(txn_batch(7, 0, 2, 2, transactional=False), leader_epoch=3)       # 10-11
    plog.append(txn_batch(9, 1, 2, 1), leader_epoch=3)                            # 12 (open txn)
    plog.append(build_batch(4), leader_epoch=4)                                   # 13-16
    plog.append(txn_batch(7, 0, 4, 1, transactional=False), leader_epoch=4)       # 17


def state(plog: PartitionLog) -> tuple:
    return (read_all(plog), plog.log_start_offset, plog.log_end_offset, plog.leader_epoch_cache.epoch_entries(),
            plog.last_stable_offset, plog.collect_aborted_txns(0, 1 << 40),
            [(p.producer_id, p.producer_epoch, p.last_seq, p.last_data_offset, p.current_txn_first_offset)
             for p in plog.active_producers()])


def reference(open_log, name: str, data: bytes, end: int) -> PartitionLog:
    """A log that only received the batches of `data` ending at or before `end`."""
    ref = open_log(name, **SEG)
    for pos, h in split_batches(data):
        if h.last_offset < end:  # one batch at a time, as the leader appended them (the LSO an aborted
            ref.append_as_follower(data[pos:pos + h.size])  # transaction's index entry records)
    return ref


@pytest.mark.parametrize("target", [0, 3, 4, 5, 9, 10, 12, 13, 17])
def test_truncate_to_equals_a_log_that_never_had_the_tail(open_log, target: int) -> None:
    plog = open_log("t-0", **SEG)
    fill(plog)
    assert len(plog.segments) >= 3
    data = read_all(plog)
    assert plog.truncate_to(target)
    ref = reference(open_log, "ref/t-0", data, target if target != 4 else 3)
    assert state(plog) == state(ref)
    verify_segment_files(plog.dir)
    # it goes on as a follower, and reopens (clean and after a crash) to the same state
    rest = b"".join(data[pos:pos + h.size] for pos, h in split_batches(data) if h.base_offset >= plog.log_end_offset)
    plog.append_as_follower(rest)
    assert state(plog)[:4] == (data, 0, 18, [E(0, 0), E(1, 5), E(3, 10), E(4, 13)])
    expected = state(plog)
    plog.close()
    assert state(open_log("t-0", clean=True, **SEG)) == expected
    assert state(open_log("t-0", clean=False, **SEG)) == expected


def test_truncate_mid_batch_cuts_the_whole_batch(open_log) -> None:
    plog = open_log(**SEG)
    fill(plog)
    assert plog.truncate_to(15)  # batch 13-16 goes whole
    assert plog.log_end_offset == 13
    assert plog.leader_epoch_cache.epoch_entries() == [E(0, 0), E(1, 5), E(3, 10)]


def test_truncate_at_or_past_the_end_only_trims_the_epoch_cache(open_log) -> None:
    plog = open_log(**SEG)
    fill(plog)
    plog.assign_epoch_start_offset(6)  # became leader of epoch 6 at 18, then lost it writing nothing
    assert plog.leader_epoch_cache.latest_epoch == 6
    assert not plog.truncate_to(18)
    assert plog.leader_epoch_cache.epoch_entries() == [E(0, 0), E(1, 5), E(3, 10), E(4, 13)]
    assert not plog.truncate_to(30)
    assert plog.log_end_offset == 18


def test_truncation_clamps_the_high_watermark_and_removes_later_snapshots(open_log) -> None:
    plog = open_log(**SEG)
    fill(plog)
    plog.replicated = True
    plog.update_high_watermark(17)
    snapshots_before = sorted(p.name for p in plog.dir.glob("*.snapshot"))
    assert snapshots_before
    plog.truncate_to(6)
    assert plog.high_watermark == 5  # the transactional batch 5-6 went whole
    assert all(int(p.name[:20]) <= 5 for p in plog.dir.glob("*.snapshot"))
    assert not plog.update_high_watermark(3)
    assert plog.high_watermark == 5


def test_truncate_below_the_first_segment_starts_over(open_log) -> None:
    plog = open_log(**SEG)
    fill(plog)
    plog.replicated = True
    plog.update_high_watermark(18)
    start = plog.segments[1].base_offset
    plog.delete_records_before(start)
    plog.enforce_retention()
    assert plog.segments[0].base_offset == start
    assert plog.truncate_to(start - 1)
    assert (plog.log_start_offset, plog.log_end_offset, plog.high_watermark) == (start - 1,) * 3
    assert plog.leader_epoch_cache.epoch_entries() == []
    assert plog.active_producers() == []


def test_truncate_fully_and_start_at(open_log) -> None:
    plog = open_log(**SEG)
    fill(plog)
    plog.truncate_fully_and_start_at(100)
    assert (plog.log_start_offset, plog.log_end_offset) == (100, 100)
    assert [s.base_offset for s in plog.segments] == [100]
    assert not list(plog.dir.glob("*.snapshot"))
    assert plog.leader_epoch_cache.epoch_entries() == [] and plog.active_producers() == []
    assert plog.last_stable_offset == 100
    batch = bytearray(build_batch(2))
    batch[0:8] = (100).to_bytes(8, "big")
    batch[12:16] = (7).to_bytes(4, "big")
    plog.append_as_follower(bytes(batch))
    plog.close()
    again = open_log(clean=False, **SEG)
    assert (again.log_start_offset, again.log_end_offset) == (100, 102)
    assert again.leader_epoch_cache.epoch_entries() == [E(7, 100)]
    assert read_all(again) == bytes(batch)


# ---------------------------------------------------------------- crashes in the middle


class Crash(BaseException):
    pass


def crashed_copy(src: Path, dst: Path) -> None:
    """What a kill -9 leaves: the files as they are (the kernel has every write made so far)."""
    dst.mkdir(parents=True)
    for p in src.iterdir():
        if p.is_file():
            (dst / p.name).write_bytes(p.read_bytes())


@pytest.mark.parametrize("step", ["segment", "log_file", "epochs", "producers"])
def test_crash_during_truncation_leaves_a_prefix_that_truncates_again(open_log, tmp_path, monkeypatch,
                                                                      step: str) -> None:
    plog = open_log("t-0", **SEG)
    fill(plog)
    data = read_all(plog)
    target = 6  # inside the first segments: later segments are unlinked, one is cut
    crash_dir = tmp_path / "crash" / "t-0"

    def crash(*_a, **_k):
        crashed_copy(plog.dir, crash_dir)
        raise Crash()

    if step == "segment":  # later segments unlinked, the cut segment untouched
        monkeypatch.setattr(LogSegment, "truncate_to", crash)
    elif step == "log_file":  # indexes cut, the .log file not yet
        real_ftruncate = os.ftruncate
        monkeypatch.setattr(os, "ftruncate", lambda fd, n: crash() if n > 0 else real_ftruncate(fd, n))
    elif step == "epochs":  # the log cut, the epoch checkpoint not yet
        monkeypatch.setattr(type(plog.leader_epoch_cache), "truncate_from_end", crash)
    else:  # everything but the producer state reload (snapshots past the end still there)
        monkeypatch.setattr(PartitionLog, "_reload_producer_state", crash)
    with pytest.raises(Crash):
        plog.truncate_to(target)
    monkeypatch.undo()

    again = open_log("crash/t-0", clean=False, **SEG)
    verify_segment_files(again.dir)
    got = read_all(again)
    assert data.startswith(got) and again.log_end_offset >= 5  # a prefix at least as long as the target
    ref = reference(open_log, f"ref-{step}/t-0", data, again.log_end_offset)
    assert state(again) == state(ref)
    again.truncate_to(target)
    ref = reference(open_log, f"ref2-{step}/t-0", data, 5)
    assert state(again) == state(ref)


def test_torn_truncation_of_the_log_file_is_recovered(open_log) -> None:
    """The .log cut at a batch boundary with its indexes still describing the old tail."""
    plog = open_log(index_interval_bytes=100)
    for i in range(12):
        plog.append(build_batch(1, value_size=60), leader_epoch=i // 4)
    plog.close()
    last = sorted(plog.dir.glob("*.log"))[-1]
    batches = split_batches(last.read_bytes())
    assert len(batches) > 2
    os.truncate(last, batches[6][0])
    again = open_log(clean=False, index_interval_bytes=100)
    verify_segment_files(again.dir)
    assert again.log_end_offset == batches[6][1].base_offset == 6
    assert again.leader_epoch_cache.epoch_entries() == [E(0, 0), E(1, 4)]
    assert all(e.start_offset < again.log_end_offset for e in again.leader_epoch_cache.epoch_entries())


@pytest.mark.parametrize("seed", range(8))
def test_random_logs_truncate_like_their_prefix(open_log, seed: int) -> None:
    """Random logs (sizes, epochs, idempotent and transactional producers, markers, segment sizes) cut at
    random offsets, twice in a row, equal a log that only ever had the prefix; also after a reopen."""
    import random
    rng = random.Random(seed)
    cfg = dict(segment_bytes=rng.choice([400, 1000, 100_000]), index_interval_bytes=rng.choice([1, 100, 4096]))
    plog = open_log("t-0", **cfg)
    epoch, seqs, open_txn = 0, {7: 0, 8: 0, 9: 0}, set()
    for _ in range(rng.randint(5, 30)):
        if rng.random() < 0.2:
            epoch += rng.randint(1, 2)
        kind = rng.random()
        if kind < 0.3:
            plog.append(build_batch(rng.randint(1, 4), value_size=rng.randint(1, 60)), leader_epoch=epoch)
        elif kind < 0.8:
            pid = rng.choice([7, 8, 9])
            n = rng.randint(1, 3)
            txn = pid != 7
            plog.append(txn_batch(pid, 0, seqs[pid], n, transactional=txn), leader_epoch=epoch)
            seqs[pid] += n
            if txn:
                open_txn.add(pid)
        elif open_txn:
            pid = rng.choice(sorted(open_txn))
            open_txn.discard(pid)
            plog.append(build_marker_batch(pid, 0, 0, rng.random() < 0.5, NOW), leader_epoch=epoch,
                        origin=AppendOrigin.COORDINATOR)
    data = read_all(plog)
    for round_ in range(2):
        target = rng.randint(0, plog.log_end_offset)
        plog.truncate_to(target)
        batches = split_batches(data)
        end = max([h.last_offset + 1 for _p, h in batches if h.last_offset < target], default=0)
        ref = reference(open_log, f"ref{round_}/t-0", data, end)
        ref_state = state(ref)
        assert state(plog) == ref_state, f"seed {seed} round {round_} target {target}"
        verify_segment_files(plog.dir)
        data = read_all(plog)
    plog.close()
    assert state(open_log("t-0", clean=False, **cfg)) == ref_state


def test_truncate_to_async_runs_in_a_worker_and_fences_writers(open_log, monkeypatch) -> None:
    import asyncio
    import threading

    from minikafka.storage import KafkaStorageError

    plog = open_log("t-0", **SEG)
    fill(plog)
    data = read_all(plog)
    plog.replicated = True
    plog.update_high_watermark(18)
    entered, release = threading.Event(), threading.Event()
    real = PartitionLog._reload_producer_state
    threads = []

    def slow_reload(self) -> None:
        threads.append(threading.current_thread())
        entered.set()
        release.wait(10)
        real(self)
    monkeypatch.setattr(PartitionLog, "_reload_producer_state", slow_reload)

    async def run() -> None:
        task = asyncio.create_task(plog.truncate_to_async(9))
        while not entered.is_set():
            await asyncio.sleep(0.01)
        with pytest.raises(KafkaStorageError):
            plog.append(build_batch(1), leader_epoch=9)
        with pytest.raises(KafkaStorageError):
            plog.append_as_follower(data)
        with pytest.raises(KafkaStorageError):
            plog.delete_records_before(2)
        assert plog.enforce_retention() == 0
        assert not plog.update_high_watermark(20)
        assert not await plog.truncate_to_async(3)  # one at a time
        assert read_all(plog, 0)  # reads go on
        release.set()
        assert await task
    asyncio.run(run())
    assert threads and threads[0] is not threading.main_thread()
    assert state(plog) == state(reference(open_log, "ref/t-0", data, 9))
    assert plog.high_watermark == 9
    plog.append(build_batch(1), leader_epoch=9)  # writable again
