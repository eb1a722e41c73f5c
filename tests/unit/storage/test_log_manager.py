"""LogManager: load/create/delete, clean-shutdown marker, partition.metadata, retention."""
from __future__ import annotations

import uuid

from minikafka.storage import LogConfig, LogManager
from minikafka.storage.log_manager import CLEAN_SHUTDOWN_FILE
from minikafka.storage.partition_metadata import read_partition_metadata, topic_id_to_str
from tests.support.storage_helpers import build_batch


def test_create_load_and_clean_shutdown_marker(tmp_path, clock):
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    manager = LogManager(dirs, LogConfig(), clock=clock)
    assert manager.load() == []
    topic_id = uuid.uuid4().bytes
    logs = [manager.create("orders.v1-x", p, topic_id=topic_id) for p in range(4)]
    assert {log.dir.parent for log in logs} == set(dirs)  # spread over the dirs
    assert manager.create("orders.v1-x", 0) is logs[0]
    text = (logs[0].dir / "partition.metadata").read_text()
    assert text == f"version: 0\ntopic_id: {topic_id_to_str(topic_id)}\n"
    assert read_partition_metadata(logs[0].dir) == topic_id
    for log in logs:
        log.append(build_batch(log.partition + 1))
    manager.close()
    assert all((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)

    manager = LogManager(dirs, LogConfig(), clock=clock)
    loaded = manager.load()
    assert len(loaded) == 4
    assert not any((d / CLEAN_SHUTDOWN_FILE).exists() for d in dirs)
    assert manager.partitions() == [("orders.v1-x", p) for p in range(4)]
    log = manager.get("orders.v1-x", 3)
    assert log.topic == "orders.v1-x" and log.partition == 3
    assert log.log_end_offset == 4 and log.topic_id == topic_id
    assert manager.get("nope", 0) is None
    manager.flush_all()
    manager.close()


def test_load_skips_delete_and_stray_dirs(tmp_path, clock):
    (tmp_path / "t-0.abc-delete").mkdir()
    (tmp_path / "t-1.abc-stray").mkdir()
    (tmp_path / "not_a_partition").mkdir()
    (tmp_path / "meta.properties").write_text("x")
    manager = LogManager([tmp_path], LogConfig(), clock=clock)
    assert manager.load() == []
    assert not (tmp_path / "t-0.abc-delete").exists()
    assert (tmp_path / "t-1.abc-stray").exists()


def test_delete_partition_and_retention(tmp_path, clock):
    manager = LogManager([tmp_path], LogConfig(retention_ms=1000), clock=clock)
    manager.load()
    a = manager.create("a", 0, LogConfig(retention_ms=-1))
    b = manager.create("b", 0)
    a.append(build_batch(2, ts=clock.now_ms))
    b.append(build_batch(2, ts=clock.now_ms))
    clock.advance(10_000)
    assert manager.enforce_retention(clock.now_ms) == 1
    assert (a.log_start_offset, b.log_start_offset) == (0, 2)
    assert manager.delete_partition("a", 0)
    assert not manager.delete_partition("a", 0)
    assert not any(p.name.startswith("a-") for p in tmp_path.iterdir())
    assert manager.partitions() == [("b", 0)]
    manager.close()


def test_unclean_start_recovers(tmp_path, clock):
    manager = LogManager([tmp_path], LogConfig(), clock=clock)
    manager.load()
    log = manager.create("t", 0)
    log.append(build_batch(3))
    log.append(build_batch(2))
    # no close(): the marker is missing, so the last segment is fully recovered
    log_path = next((tmp_path / "t-0").glob("*.log"))
    with open(log_path, "ab") as f:
        f.write(build_batch(4)[:30])
    again = LogManager([tmp_path], LogConfig(), clock=clock)
    (reloaded,) = again.load()
    assert reloaded.log_end_offset == 5
    again.close()
