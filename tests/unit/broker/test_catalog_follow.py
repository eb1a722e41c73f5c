"""TopicCatalog.follow (issue 16): a cluster node's local topics follow the metadata image — logs for
the local replicas only, with the image's topic id, kept across a restart (load), re-created when the
topic id changes, configs applied; single-node topics are untouched by any of it."""
from __future__ import annotations

import asyncio
import uuid

from minikafka.broker.topic_catalog import TopicCatalog
from minikafka.storage.log_config import LogConfig
from minikafka.storage.log_manager import LogManager


def open_catalog(path) -> TopicCatalog:
    catalog = TopicCatalog(LogManager([path], LogConfig()), LogConfig(), path)
    catalog.load()
    return catalog


def test_follow_creates_only_local_partitions_and_survives_a_restart(tmp_path):
    tid = uuid.uuid4()

    async def run() -> TopicCatalog:
        catalog = open_catalog(tmp_path)
        await catalog.follow("t", tid, 4, {"retention.ms": "1000"}, frozenset({1, 3}))
        info = catalog.get("t")
        assert (info.partitions, info.local, info.topic_id) == (4, frozenset({1, 3}), tid)
        assert catalog.has_partition("t", 1) and not catalog.has_partition("t", 0)
        assert catalog.partition_log("t", 0) is None and catalog.partition_log("t", 3).topic_id == tid.bytes
        # idempotent, then grown by one local partition
        await catalog.follow("t", tid, 4, {"retention.ms": "1000"}, frozenset({1, 3}))
        await catalog.follow("t", tid, 5, {"retention.ms": "2000"}, frozenset({1, 3, 4}))
        assert catalog.partition_log("t", 4) is not None and catalog.get("t").configs == {"retention.ms": "2000"}
        assert catalog.partition_log("t", 1).config.retention_ms == 2000
        catalog.close()
        catalog._logs.close()
        return catalog
    asyncio.run(run())
    assert sorted(p.name for p in tmp_path.glob("t-*")) == ["t-1", "t-3", "t-4"]
    again = open_catalog(tmp_path)  # the next start neither re-creates remote partitions nor drops local ones
    assert again.get("t").local == frozenset({1, 3, 4})
    assert sorted(p.name for p in tmp_path.glob("t-*")) == ["t-1", "t-3", "t-4"]


def test_a_new_topic_id_replaces_the_local_topic(tmp_path):
    async def run() -> None:
        catalog = open_catalog(tmp_path)
        old = uuid.uuid4()
        await catalog.follow("t", old, 1, {}, frozenset({0}))
        catalog.partition_log("t", 0)
        new = uuid.uuid4()
        await catalog.follow("t", new, 2, {}, frozenset({0, 1}))
        assert catalog.get("t").topic_id == new
        assert catalog.partition_log("t", 0).topic_id == new.bytes and catalog.partition_log("t", 1) is not None
        catalog.close()
    asyncio.run(run())
