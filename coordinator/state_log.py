"""Reading a coordinator's state partition back (Kafka's CoordinatorLoaderImpl): whole stored batches from the
log start to the end offset seen when loading starts, in chunks, yielding to the event loop between chunks."""
from __future__ import annotations

import asyncio
from typing import Any, Callable

from minikafka.protocol.record_batch import iter_headers

READ_CHUNK = 1 << 20


async def replay_partition(plog: Any, replay_batch: Callable[[bytes, int], int]) -> int:
    """Call `replay_batch(batch, from_offset)` for every batch holding offsets not yet replayed; returns the sum
    of what it returned (records applied)."""
    offset, end = plog.log_start_offset, plog.log_end_offset
    records = 0
    while offset < end:
        data = plog.read(offset, READ_CHUNK, max_offset=end)
        if not data:
            break
        progressed = False
        for pos, header in iter_headers(data):
            if header.last_offset >= offset:
                records += replay_batch(bytes(data[pos:pos + header.size]), offset)
                offset = header.last_offset + 1
                progressed = True
        if not progressed:
            break
        await asyncio.sleep(0)
    return records
