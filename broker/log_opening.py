"""Opening partition logs off the event loop (storage/log_manager.py opens them lazily).

A partition's log is opened (read, recovered if its last shutdown was unclean) by a worker thread of
the log manager: the first request naming the partition waits for that partition only, and the event
loop keeps serving meanwhile. Handlers stay synchronous about logs: for the APIs in
`PARTITION_FIELDS`, `opening_partitions` wraps the handler so that the logs its request names are open
before it runs; any other access to an unopened log (a coordinator writing markers, DeleteRecords of
a partition nobody used yet, ...) opens it in place, which is correct, only not off the loop.
`open_remaining` opens whatever is left, a few partitions at a time, once the broker has started, so that
retention, flush and compaction soon cover every partition again.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Iterable, Iterator, NamedTuple

if TYPE_CHECKING:
    from minikafka.storage.log_manager import LogManager
    from minikafka.broker.network.context import RequestContext
    from minikafka.broker.network.registry import Handler
    from minikafka.broker.state import BrokerState

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]
BACKGROUND_BATCH = 16


class PartitionFields(NamedTuple):
    """Where a request names partitions: `request.<topics>[].<name>` (or `.topic_id`) and
    `.<partitions>[]` (`.<index>` of each, or the entries themselves when `index` is None)."""
    topics: str
    name: str
    partitions: str
    index: str | None


PARTITION_FIELDS: dict[int, PartitionFields] = {
    0: PartitionFields("topic_data", "name", "partition_data", "index"),  # Produce
    1: PartitionFields("topics", "topic", "partitions", "partition"),  # Fetch
    2: PartitionFields("topics", "name", "partitions", "partition_index"),  # ListOffsets
    21: PartitionFields("topics", "name", "partitions", "partition_index"),  # DeleteRecords
    23: PartitionFields("topics", "topic", "partitions", "partition"),  # OffsetForLeaderEpoch
    61: PartitionFields("topics", "name", "partition_indexes", None),  # DescribeProducers
}


def requested_partitions(state: BrokerState, fields: PartitionFields, request: Any) -> Iterator[TopicPartition]:
    """The existing partitions `request` names (topics by name, or by id where the version has ids)."""
    catalog = state.catalog
    for t in getattr(request, fields.topics, None) or ():
        name = getattr(t, fields.name, None)
        if name is None:
            info = catalog.by_id.get(getattr(t, "topic_id", None))
            if info is None:
                continue
            name = info.name
        for p in getattr(t, fields.partitions, None) or ():
            index = p if fields.index is None else getattr(p, fields.index, None)
            if isinstance(index, int) and catalog.has_partition(name, index):
                yield name, index


def opening_partitions(api_key: int, fn: Handler) -> Handler:
    """`fn`, or for an API in PARTITION_FIELDS a handler that first opens the logs its request names."""
    fields = PARTITION_FIELDS.get(api_key)
    if fields is None:
        return fn

    async def handler(ctx: RequestContext, request: Any) -> Any:
        state = ctx.broker
        if state is not None and state.logs.has_unopened:
            try:
                partitions = list(requested_partitions(state, fields, request))
            except Exception:  # an odd request: the handler judges it (and opens what it uses)
                partitions = []
            await open_logs(state.logs, partitions)
        return await fn(ctx, request)

    handler.__wrapped__ = fn  # type: ignore[attr-defined]
    return handler


async def open_logs(logs: LogManager, partitions: Iterable[TopicPartition]) -> None:
    """Open the given partitions' logs in the log manager's worker threads and register them. A
    partition whose open fails stays unopened (logged; the caller's own access tries again). If the
    caller is cancelled the opens go on and are registered by the next access."""
    partitions = list(partitions)
    jobs = logs.open_in_worker(partitions)
    if jobs:
        await asyncio.shield(asyncio.gather(*(asyncio.wrap_future(j) for j in jobs), return_exceptions=True))
    for topic, partition in partitions:
        logs.collect(topic, partition)


async def open_remaining(logs: LogManager, *, progress_interval_s: float = 5.0, delay_s: float = 0.0) -> None:
    """Open every partition still unopened, BACKGROUND_BATCH at a time (one worker task each, so a
    request's partition waits for at most one batch; the other worker stays free for requests).
    Logs one progress line (partitions done / total, bytes) at most every `progress_interval_s`, so a
    slow recovery is never silent. `delay_s` (test-only) sleeps before each batch."""
    todo = logs.unopened()
    if not todo:
        return
    t0 = last = time.monotonic()
    done = nbytes = 0
    for i in range(0, len(todo), BACKGROUND_BATCH):
        if delay_s:
            await asyncio.sleep(delay_s)
        batch = todo[i:i + BACKGROUND_BATCH]
        await open_logs(logs, batch)
        done += len(batch)
        for topic, partition in batch:
            plog = logs.opened(topic, partition)
            nbytes += plog.size_bytes if plog is not None else 0
        now = time.monotonic()
        if now - last >= progress_interval_s and done < len(todo):
            last = now
            log.info("opening partition logs: %d/%d partitions, %d bytes, %.0f s", done, len(todo), nbytes,
                     now - t0, extra={"partitions_done": done, "partitions_total": len(todo), "bytes": nbytes})
    log.info("opened %d partition logs in the background in %.0f ms (%d bytes)", len(todo),
             (time.monotonic() - t0) * 1000, nbytes,
             extra={"partitions_done": done, "partitions_total": len(todo), "bytes": nbytes})
