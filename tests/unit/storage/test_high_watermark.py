"""The high watermark split (storage/partition_log.py) and replication-offset-checkpoint (LogManager):
a single broker's HW is the LEO; a replicated log's HW moves only by update_high_watermark, clamped
to [log start, LEO], never backwards, and survives a restart through Kafka's checkpoint file."""
from __future__ import annotations

from pathlib import Path

from minikafka.storage import LogConfig, LogManager
from minikafka.storage.log_manager import HW_CHECKPOINT_FILE, read_offset_checkpoint, write_offset_checkpoint
from minikafka.storage.producer_state import AppendOrigin
from tests.support.storage_helpers import build_batch


def test_single_broker_high_watermark_is_the_log_end(open_log) -> None:
    plog = open_log()
    assert not plog.replicated
    plog.append(build_batch(3), leader_epoch=0)
    assert plog.high_watermark == plog.log_end_offset == 3
    assert plog.last_stable_offset == 3


def test_replicated_high_watermark_moves_by_update_only(open_log) -> None:
    plog = open_log()
    plog.append(build_batch(3), leader_epoch=0)
    woken = []
    plog.append_listeners.append(lambda: woken.append(plog.high_watermark))
    plog.replicated = True
    assert plog.high_watermark == 0  # no checkpoint: starts at the log start
    plog.append(build_batch(2), leader_epoch=0)
    assert plog.high_watermark == 0 and plog.log_end_offset == 5
    assert plog.update_high_watermark(3)
    assert plog.high_watermark == 3
    assert not plog.update_high_watermark(2)  # never backwards
    assert plog.high_watermark == 3
    assert plog.update_high_watermark(99)  # clamped to the LEO
    assert plog.high_watermark == 5
    assert woken[-2:] == [3, 5]
    plog.replicated = False
    assert plog.high_watermark == 5


def test_lso_and_delete_records_stop_at_the_high_watermark(open_log) -> None:
    plog = open_log()
    plog.replicated = True
    plog.append(build_batch(4), leader_epoch=0)
    assert plog.last_stable_offset == 0
    plog.update_high_watermark(2)
    assert plog.last_stable_offset == 2
    assert plog.delete_records_before(-1) == 2  # HIGH_WATERMARK sentinel
    try:
        plog.delete_records_before(3)
    except Exception as exc:  # OffsetOutOfRange: past the high watermark
        assert "high watermark is 2" in str(exc)
    else:
        raise AssertionError("deleting past the high watermark must fail")


def test_retention_keeps_segments_above_the_high_watermark(open_log, clock) -> None:
    plog = open_log(segment_bytes=200, retention_ms=1)
    plog.replicated = True
    for _ in range(4):
        plog.append(build_batch(1, ts=clock.now_ms), leader_epoch=0)
    clock.advance(10_000)
    assert plog.enforce_retention() == 0  # HW 0: nothing is deletable
    plog.update_high_watermark(plog.log_end_offset)
    assert plog.enforce_retention() > 0


def test_offset_checkpoint_format(tmp_path: Path) -> None:
    path = tmp_path / HW_CHECKPOINT_FILE
    write_offset_checkpoint(path, {("b", 1): 7, ("a", 0): 3})
    assert path.read_text() == "0\n2\na 0 3\nb 1 7\n"
    assert read_offset_checkpoint(path) == {("a", 0): 3, ("b", 1): 7}
    path.write_text("0\n3\na 0 3\n")  # count mismatch: ignored as a whole
    assert read_offset_checkpoint(path) == {}
    assert read_offset_checkpoint(tmp_path / "missing") == {}


def test_high_watermark_survives_restart(tmp_path: Path) -> None:
    lm = LogManager([tmp_path], LogConfig())
    lm.load()
    plog = lm.create("t", 0)
    single = lm.create("s", 0)
    for _ in range(3):
        plog.append(build_batch(2), leader_epoch=1)
        single.append(build_batch(1), leader_epoch=0)
    plog.replicated = True
    plog.update_high_watermark(4)
    assert lm.checkpoint_high_watermarks() == 1
    assert read_offset_checkpoint(tmp_path / HW_CHECKPOINT_FILE) == {("t", 0): 4}
    lm.close()

    lm = LogManager([tmp_path], LogConfig())
    lm.load(lazy=True)
    # a checkpoint of an unopened log is kept when others are checkpointed
    assert lm.checkpoint_high_watermarks() == 1
    plog = lm.get("t", 0)
    assert plog.replicated and plog.high_watermark == 4 and plog.log_end_offset == 6
    assert not lm.get("s", 0).replicated
    lm.close()


def test_checkpointed_high_watermark_is_clamped_to_the_log_end(tmp_path: Path) -> None:
    lm = LogManager([tmp_path], LogConfig())
    lm.load()
    lm.create("t", 0).append(build_batch(2), leader_epoch=1, origin=AppendOrigin.CLIENT)
    lm.close()
    write_offset_checkpoint(tmp_path / HW_CHECKPOINT_FILE, {("t", 0): 10})
    lm = LogManager([tmp_path], LogConfig())
    lm.load()
    assert lm.get("t", 0).high_watermark == 2
    lm.close()
