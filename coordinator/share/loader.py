"""Rebuild share-partition state from `__share_group_state` (Kafka's CoordinatorLoaderImpl for the share
coordinator): each partition is replayed from its log start to the log end seen when loading starts, a read
chunk at a time with the event loop given back in between. Undecodable records are skipped with a warning,
as are record types of other coordinators."""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any

from minikafka.coordinator.state_log import replay_partition
from minikafka.coordinator.group.records import ControlMarker, iter_batch_records
from minikafka.coordinator.share.config import SHARE_STATE_TOPIC
from minikafka.coordinator.share.records import RecordFormatError, decode_key, decode_value
from minikafka.coordinator.share.shard import ShareShard

if TYPE_CHECKING:
    from minikafka.coordinator.share.coordinator import ShareCoordinator

log = logging.getLogger(__name__)



def replay_batch(shard: ShareShard, batch: bytes, from_offset: int = 0) -> int:
    """Apply one stored batch's records at offsets >= `from_offset`; returns how many were applied."""
    applied = 0
    for rec in iter_batch_records(batch):
        if rec.offset < from_offset or isinstance(rec, ControlMarker) or rec.key is None:
            continue
        try:
            key = decode_key(rec.key)
            if key is None:
                continue
            value = None if rec.value is None else decode_value(key.record_type, rec.value)
        except (RecordFormatError, ValueError) as exc:
            log.warning("%s: undecodable record at offset %d skipped: %s", SHARE_STATE_TOPIC, rec.offset, exc)
            continue
        shard.replay(key, value, rec.offset)
        applied += 1
    return applied


async def load_partition(shard: ShareShard, plog: Any, partition: int) -> int:
    """Replay one partition into `shard`; returns the number of records applied."""
    t0 = time.monotonic()
    records = await replay_partition(plog, lambda batch, offset: replay_batch(shard, batch, offset))
    if records:
        log.info("loaded %s-%d: %d records, %d share-partitions in %.0f ms", SHARE_STATE_TOPIC, partition, records,
                 len(shard.states), (time.monotonic() - t0) * 1000)
    return records


async def load_all(coordinator: "ShareCoordinator") -> None:
    """Single node: load every partition of an existing `__share_group_state` (marked loading beforehand)."""
    for partition in range(coordinator.config.num_partitions):
        shard = coordinator.new_shard()
        plog = coordinator.catalog.partition_log(SHARE_STATE_TOPIC, partition)
        try:
            if plog is not None:
                await load_partition(shard, plog, partition)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed; its share-partitions start empty", SHARE_STATE_TOPIC, partition)
        coordinator.on_loaded(partition, shard)
        await asyncio.sleep(0)
