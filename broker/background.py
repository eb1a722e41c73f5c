"""Background work once the listeners are open: the group coordinator's loading of
`__consumer_offsets` and its offsets retention timer (started when the coordinator is built, see
broker/state.py), and the log cleaner (compaction) loop."""
from __future__ import annotations

import asyncio
import logging
import shutil
import threading
import time

from minikafka.broker.state import BrokerState

log = logging.getLogger(__name__)


def start_group_services(state: BrokerState) -> list[asyncio.Task]:
    """Loading of an existing `__consumer_offsets` and the offsets retention timer."""
    from minikafka.coordinator.group.loader import start_loading
    tasks = []
    loader = start_loading(state.groups, state.catalog)
    if loader is not None:
        tasks.append(loader)
    tasks.append(asyncio.create_task(_offsets_retention_loop(state)))
    return tasks


def start_log_cleaner(state: BrokerState) -> list[asyncio.Task]:
    """The compaction loop, if `log.cleaner.enable`."""
    if not state.config.get_bool("log.cleaner.enable"):
        return []
    return [asyncio.create_task(_log_cleaner_loop(state))]


async def _offsets_retention_loop(state: BrokerState) -> None:
    """offsets.retention.check.interval.ms: expire committed offsets (Kafka's cleanupGroupMetadata)."""
    interval = state.groups.config.offsets_retention_check_interval_ms / 1000
    while True:
        await asyncio.sleep(interval)
        try:
            state.groups.expire_offsets()
        except Exception:
            log.exception("offsets retention pass failed")


async def _log_cleaner_loop(state: BrokerState) -> None:
    """Kafka's LogCleaner: every log.cleaner.backoff.ms, clean the compacted partitions that are due,
    dirtiest first; the rewriting runs in a worker thread, the swap on the event loop."""
    checkpoints: dict = {}
    stopping = threading.Event()
    try:
        while True:
            # read each time: a dynamic broker config may change it
            await asyncio.sleep(int(state.config.get("log.cleaner.backoff.ms")) / 1000)
            try:
                if not checkpoints:  # the cleaner's code loads with its first pass, not at start-up
                    from minikafka.storage import compaction
                    checkpoints = {d: compaction.CleanerCheckpoint(d) for d in state.config.log_dirs}
                await _clean_due_logs(state, checkpoints, stopping)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("log cleaner pass failed")
    finally:
        stopping.set()  # a build still running in its thread gives up at its next batch


async def _clean_due_logs(state: BrokerState, checkpoints: dict, stopping: threading.Event) -> None:
    """Compacted partitions whose log is open (the background opener opens the others soon after start)."""
    from minikafka.storage import compaction
    plans = []
    for plog in state.logs.logs():
        cp = checkpoints.get(plog.dir.parent)
        if cp is None or not plog.config.compact_enabled:
            continue
        p = compaction.plan(plog, cp.get(plog.topic, plog.partition))
        if p is not None:
            plans.append((p.dirty_ratio, plog, cp))
    for _ratio, plog, cp in sorted(plans, key=lambda x: -x[0]):
        p = compaction.plan(plog, cp.get(plog.topic, plog.partition))  # again: the log may have moved on
        if p is None:
            continue
        t0 = time.monotonic()
        cleaned = await asyncio.to_thread(compaction.build, p, stopping.is_set)
        if state.logs.opened(plog.topic, plog.partition) is not plog:  # deleted meanwhile
            for c in cleaned:
                shutil.rmtree(c.directory, ignore_errors=True)
            continue
        saved = compaction.install(plog, p, cleaned, cp)
        log.info("cleaned %s up to offset %d (dirty ratio %.2f): %d segments rewritten, %d bytes freed in %.0f ms",
                 plog.dir.name, p.end_offset, p.dirty_ratio, len(cleaned), saved, (time.monotonic() - t0) * 1000)
    for cp in checkpoints.values():
        cp.forget(lambda tp: state.logs.has(*tp))
