"""The quorum's durable state (raft/store.py): what a restart reads back, and a torn or
corrupt log tail cut off at the last whole entry."""
from __future__ import annotations

import json
import os

import pytest

from minikafka.raft.log import LEADER_CHANGE, Entry
from minikafka.raft.core import RaftConfig, RaftNode, VoteRequest
from minikafka.raft.store import LOG_FILE, STATE_FILE, FilePersistentState


def entries(n: int) -> list[Entry]:
    return [Entry(1, LEADER_CHANGE)] + [Entry(2, {"type": "topic", "name": f"t{i}"}) for i in range(n)]


def test_entries_epoch_and_vote_survive_a_restart(tmp_path):
    p = FilePersistentState(tmp_path)
    for e in entries(3):
        p.log.append(e)
    p.save(2, 3)
    p.close()
    again = FilePersistentState(tmp_path)
    assert again.log.entries == entries(3) and (again.epoch, again.voted_for) == (2, 3)
    assert json.loads((tmp_path / STATE_FILE).read_text())["votedId"] == 3
    again.close()


def test_truncation_is_durable(tmp_path):
    p = FilePersistentState(tmp_path)
    for e in entries(5):
        p.log.append(e)
    p.log.truncate_to(2)
    p.log.append(Entry(3, "after"))
    p.close()
    again = FilePersistentState(tmp_path)
    assert again.log.entries == entries(5)[:2] + [Entry(3, "after")]
    again.close()


def test_torn_and_corrupt_tails_are_cut_at_the_last_whole_entry(tmp_path):
    p = FilePersistentState(tmp_path)
    for e in entries(4):
        p.log.append(e)
    p.close()
    path = tmp_path / LOG_FILE
    whole = path.read_bytes()
    for cut in (len(whole) - 1, len(whole) - 7, len(whole) - 20):  # a crash mid-write of the last frame
        path.write_bytes(whole[:cut])
        again = FilePersistentState(tmp_path)
        assert again.log.entries == entries(4)[:-1]
        assert path.stat().st_size < cut or cut == len(whole)  # the partial frame is gone from the file
        again.log.append(Entry(5, "next"))  # appends continue right after the last whole entry
        again.close()
        assert FilePersistentState(tmp_path).log.entries == entries(4)[:-1] + [Entry(5, "next")]
    flipped = bytearray(whole)
    flipped[-3] ^= 0xFF  # a bit flip inside the last payload: its CRC fails
    path.write_bytes(bytes(flipped))
    assert FilePersistentState(tmp_path).log.entries == entries(4)[:-1]


def test_a_vote_given_before_a_crash_holds_after_it(tmp_path):
    config = RaftConfig()
    node = RaftNode(1, (1, 2, 3), FilePersistentState(tmp_path), config)
    (_, r), = node.receive(VoteRequest(4, 2, 0, 0), 0)
    assert r.granted
    node.p.close()
    restarted = RaftNode(1, (1, 2, 3), FilePersistentState(tmp_path), config)
    (_, r), = restarted.receive(VoteRequest(4, 3, 0, 0), 0)
    assert not r.granted and restarted.epoch == 4
    restarted.p.close()


def test_a_fetched_run_of_entries_is_one_write_and_one_fsync(tmp_path, monkeypatch):
    p = FilePersistentState(tmp_path)
    syncs = []
    real = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (syncs.append(fd), real(fd)))
    p.log.extend(entries(5))
    assert len(syncs) == 1 and p.log.entries == entries(5)
    with pytest.raises(ValueError):
        p.log.extend([Entry(9, "a"), Entry(3, "older epoch")])
    assert p.log.entries == entries(5)  # nothing of a refused run is kept
    p.close()
    assert FilePersistentState(tmp_path).log.entries == entries(5)


def test_meta_properties_wait_for_the_agreed_cluster_id(tmp_path):
    from minikafka.broker.meta_properties import ensure_meta, write_meta
    dirs = [tmp_path / "a", tmp_path / "b"]
    assert ensure_meta(dirs, 1, "", agreed=True) is None  # nothing configured or stored: the quorum decides
    assert not any((d / "meta.properties").exists() for d in dirs)
    write_meta(dirs, 1, "agreedId")
    assert ensure_meta(dirs, 1, "", agreed=True) == "agreedId" == ensure_meta(dirs, 1, "")
    assert ensure_meta([tmp_path / "c"], 1, "configured", agreed=True) == "configured"


# -- snapshots (KIP-630) -----------------------------------------------------------------------------------
from minikafka.raft.store import read_snapshots, snapshot_name  # noqa: E402


def test_snapshot_drops_the_prefix_and_a_restart_opens_snapshot_plus_suffix(tmp_path):
    p = FilePersistentState(tmp_path)
    p.log.extend(entries(6))  # offsets 0..6
    p.save_snapshot(4, 2, {"image": "up to 4"})
    assert (tmp_path / snapshot_name(4, 2)).exists() and snapshot_name(4, 2) == "00000000000000000004-0000000002.checkpoint"
    assert p.log.start_offset == 4 and p.log.entries == entries(6)[4:]
    p.log.append(Entry(3, "after"))
    p.close()
    again = FilePersistentState(tmp_path)
    assert again.snapshot == (4, 2, {"image": "up to 4"})
    assert (again.log.start_offset, again.log.start_epoch, again.log.end_offset) == (4, 2, 8)
    assert again.log.entries == entries(6)[4:] + [Entry(3, "after")]
    assert again.log.read(4, 10) == again.log.entries and again.log.epoch_at(4) == 2
    again.log.truncate_to(6)
    again.save_snapshot(6, 2, {"image": "up to 6"})
    assert [o for o, _e, _p in read_snapshots(tmp_path)] == [6]  # the older one is gone
    again.close()
    assert FilePersistentState(tmp_path).log.end_offset == 6


def test_crash_between_snapshot_and_prefix_removal(tmp_path, monkeypatch):
    """The snapshot is on disk, the log still has its prefix: the open cuts the prefix."""
    p = FilePersistentState(tmp_path)
    p.log.extend(entries(6))
    monkeypatch.setattr(type(p.log), "drop_prefix", lambda self, offset: None)  # crash right after the snapshot
    p.save_snapshot(5, 2, ["s"])
    monkeypatch.undo()
    p.close()
    assert (tmp_path / LOG_FILE).stat().st_size > 0
    again = FilePersistentState(tmp_path)
    assert again.snapshot == (5, 2, ["s"]) and again.log.start_offset == 5 and again.log.entries == entries(6)[5:]
    again.close()


def test_crash_mid_snapshot_write_keeps_the_old_state(tmp_path):
    """A torn temp file (the rename never happened) or a corrupt checkpoint is ignored and removed."""
    p = FilePersistentState(tmp_path)
    p.log.extend(entries(6))
    p.save_snapshot(3, 2, ["old"])
    p.close()
    (tmp_path / (snapshot_name(6, 2) + ".tmp")).write_bytes(b"\x00\x01torn")
    (tmp_path / snapshot_name(7, 2)).write_bytes(b"\x00\x00\x00\x00{}")  # bad crc
    again = FilePersistentState(tmp_path)
    assert again.snapshot == (3, 2, ["old"]) and again.log.start_offset == 3 and again.log.end_offset == 7
    assert sorted(f.name for f in tmp_path.iterdir()) == sorted([LOG_FILE, snapshot_name(3, 2)])
    again.close()


def test_crash_mid_install_resets_the_log_to_the_snapshot(tmp_path, monkeypatch):
    """A follower installs a leader's snapshot beyond its log: snapshot written, log not yet reset."""
    p = FilePersistentState(tmp_path)
    p.log.extend(entries(2))
    monkeypatch.setattr(type(p.log), "reset_to", lambda self, offset, epoch: None)
    p.install_snapshot(40, 5, ["leader's"])
    monkeypatch.undo()
    p.close()
    again = FilePersistentState(tmp_path)
    assert again.snapshot == (40, 5, ["leader's"])
    assert (again.log.start_offset, again.log.end_offset, again.log.last_epoch) == (40, 40, 5)
    again.log.append(Entry(6, "next"))
    again.close()
    assert FilePersistentState(tmp_path).log.entries == [Entry(6, "next")]


def test_a_restarted_node_with_a_snapshot_starts_its_high_watermark_there(tmp_path):
    p = FilePersistentState(tmp_path)
    p.log.extend(entries(6))
    p.save_snapshot(5, 2, ["s"])
    p.close()
    n = RaftNode(1, (1, 2, 3), FilePersistentState(tmp_path), RaftConfig())
    assert n.high_watermark == 5 and n.committed() == []
    n.p.close()


def test_append_after_a_snapshot_returns_the_absolute_offset(tmp_path):
    p = FilePersistentState(tmp_path)
    p.log.extend(entries(6))
    p.save_snapshot(5, 2, ["s"])
    assert p.log.append(Entry(3, "x")) == 7 and p.log.entry_at(7) == Entry(3, "x")
    p.close()
