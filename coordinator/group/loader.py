"""Rebuild the group coordinator's state from `__consumer_offsets` on start.

Runs as a background task after the listeners are open: partitions are replayed one at a time, the
event loop gets control back after every read chunk, and requests for groups whose partition is not
loaded yet are answered COORDINATOR_LOAD_IN_PROGRESS by the coordinator. Transactional offset
commits are staged per producer id until their COMMIT/ABORT marker (or stay pending if the
transaction is still open when loading ends).
"""
from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from typing import Any

from minikafka.coordinator.state_log import replay_partition
from minikafka.coordinator.group.consumer import records as consumer_records
from minikafka.coordinator.group.streams import records as streams_records
from minikafka.coordinator.group.share import records as share_records
from minikafka.coordinator.group.coordinator import OFFSETS_TOPIC, GroupCoordinator
from minikafka.coordinator.group.records import (
    ControlMarker,
    GroupMetadataKey,
    OffsetCommitKey,
    RecordFormatError,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    iter_batch_records,
)

log = logging.getLogger(__name__)



def replay_batch(coordinator: GroupCoordinator, batch: bytes, from_offset: int = 0) -> int:
    """Apply one stored batch's records at offsets >= `from_offset`; returns how many were applied."""
    applied = 0
    for rec in iter_batch_records(batch):
        if rec.offset < from_offset:
            continue
        if isinstance(rec, ControlMarker):
            coordinator.replay_marker(rec.producer_id, rec.commit)
            applied += 1
            continue
        if rec.key is None:
            log.warning("%s: record at offset %d has no key, skipped", OFFSETS_TOPIC, rec.offset)
            continue
        try:
            key = decode_key(rec.key)
            if isinstance(key, OffsetCommitKey):
                value = decode_offset_commit_value(rec.value) if rec.value is not None else None
                coordinator.replay_offset_commit(key, value, rec.offset, rec.producer_id, rec.transactional)
            elif isinstance(key, GroupMetadataKey):
                value = decode_group_metadata_value(rec.value) if rec.value is not None else None
                coordinator.replay_group_metadata(key, value)
            elif (ckey := consumer_records.decode_key(rec.key)) is not None:
                value = consumer_records.decode_value(ckey.record_type, rec.value) if rec.value is not None else None
                coordinator.consumer.replay(ckey, value)
            elif (stkey := streams_records.decode_key(rec.key)) is not None:
                value = streams_records.decode_value(stkey.record_type, rec.value) if rec.value is not None else None
                coordinator.streams.replay(stkey, value)
            elif (skey := share_records.decode_key(rec.key)) is not None:
                record_type, group_id, member_id = skey
                if group_id:
                    value = share_records.decode_value(record_type, rec.value) if rec.value is not None else None
                    coordinator.replay_share(record_type, group_id, member_id, value)
            else:
                continue  # record types of other group protocols
        except (RecordFormatError, ValueError) as exc:
            log.warning("%s: undecodable record at offset %d skipped: %s", OFFSETS_TOPIC, rec.offset, exc)
            continue
        applied += 1
    return applied


async def load_partition(coordinator: GroupCoordinator, plog: Any, partition: int) -> int:
    """Replay one partition from its log start to the log end offset seen when loading starts."""
    t0 = time.monotonic()
    records = await replay_partition(plog, lambda batch, offset: replay_batch(coordinator, batch, offset))
    coordinator.on_partition_loaded(partition)
    if records:
        log.info("loaded %s-%d: %d records in %.0f ms", OFFSETS_TOPIC, partition, records,
                 (time.monotonic() - t0) * 1000)
    return records


async def load_all(coordinator: GroupCoordinator, catalog: Any) -> None:
    """Load every partition of an existing __consumer_offsets (marked loading beforehand)."""
    t0 = time.monotonic()
    total = 0
    for partition in range(coordinator.config.num_partitions):
        plog = catalog.partition_log(OFFSETS_TOPIC, partition)
        try:
            if plog is not None:
                total += await load_partition(coordinator, plog, partition)
            else:
                coordinator.mark_loaded(partition)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading %s-%d failed; its groups start empty", OFFSETS_TOPIC, partition)
            coordinator.mark_loaded(partition)
        await asyncio.sleep(0)
    log.info("group coordinator loaded %d groups (%d records) in %.0f ms", len(coordinator.groups), total,
             (time.monotonic() - t0) * 1000)


def start_loading(coordinator: GroupCoordinator, catalog: Any) -> asyncio.Task | None:
    """If __consumer_offsets exists, mark all its partitions loading and replay them in the background
    (single node; on a cluster each partition is loaded when this node becomes its leader)."""
    info = catalog.get(OFFSETS_TOPIC)
    if info is None or coordinator.owned is not None:
        return None
    if info.partitions != coordinator.config.num_partitions:
        # groups map onto the partitions the topic has (offsets.topic.num.partitions only applies at creation)
        log.info("%s has %d partitions (offsets.topic.num.partitions=%d): using the topic's count", OFFSETS_TOPIC,
                 info.partitions, coordinator.config.num_partitions)
        coordinator.config = dataclasses.replace(coordinator.config, num_partitions=info.partitions)
    coordinator.mark_loading(range(coordinator.config.num_partitions))
    return asyncio.create_task(load_all(coordinator, catalog))
