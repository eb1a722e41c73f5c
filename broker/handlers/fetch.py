"""Fetch: whole stored batches up to the byte limits, long-polling until min_bytes or max_wait.

Sessions: every request is served as a full (sessionless) fetch and answered with session id 0,
which Kafka clients treat as "no session was created" and keep sending full requests.
"""
from __future__ import annotations

import asyncio
import functools
import struct
from dataclasses import dataclass

import kafka.errors as ke
from kafka.protocol.consumer import FetchRequest, FetchResponse

from ...storage.partition_log import PartitionLog
from ..context import RequestContext
from ..errors import error_code
from ..registry import handles
from ..state import BrokerState
from .common import leader_epoch_error, topic_name_for_id

TopicData = FetchResponse.FetchableTopicResponse
PartitionData = TopicData.PartitionData
AbortedTransaction = PartitionData.AbortedTransaction
READ_COMMITTED = 1
THREAD_READ_THRESHOLD = 1 << 20  # reads that may exceed this go to a worker thread
FETCH_SESSION_ID_NOT_FOUND = 70


@dataclass(slots=True)
class Wanted:
    topic: str | None
    partition: int
    offset: int
    max_bytes: int
    current_leader_epoch: int


def _partition_error(p: int, code: int, plog: PartitionLog | None = None) -> PartitionData:
    hw = plog.high_watermark if plog is not None else -1
    lso = plog.last_stable_offset if plog is not None else -1
    start = plog.log_start_offset if plog is not None else -1
    return PartitionData(partition_index=p, error_code=code, high_watermark=hw, last_stable_offset=lso,
                         log_start_offset=start, aborted_transactions=None, preferred_read_replica=-1,
                         records=b"")


_BATCH_END = struct.Struct(">qi")  # base offset, batch length
_LAST_DELTA = struct.Struct(">i")


def _next_offset(records: bytes) -> int:
    """The offset after the last whole batch of fetched bytes."""
    pos, end, last = 0, len(records), -1
    while pos + 61 <= end:
        base, length = _BATCH_END.unpack_from(records, pos)
        if pos + 12 + length > end:
            break
        last = base + _LAST_DELTA.unpack_from(records, pos + 23)[0]
        pos += 12 + length
    return last + 1


def _aborted(plog: PartitionLog, offset: int, lso: int, records: bytes) -> list:
    """read_committed: the aborted transactions overlapping the returned batches (from the .txnindex
    files), so the consumer can drop their records."""
    if not records:
        return []
    found = plog.collect_aborted_txns(offset, lso)
    if not found:
        return []
    upper = _next_offset(records)
    return [AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
            for a in found if a.first_offset < upper]


async def _read(plog: PartitionLog, offset: int, max_bytes: int, max_offset: int | None, min_one: bool) -> bytes:
    read = functools.partial(plog.read, offset, max_bytes, max_offset=max_offset, min_one=min_one)
    if max_bytes > THREAD_READ_THRESHOLD:
        return await asyncio.get_running_loop().run_in_executor(None, read)
    return read()


async def _read_all(state: BrokerState, wanted: list[Wanted], max_bytes: int,
                    isolation: int) -> tuple[list[tuple[Wanted, PartitionData]], int, bool]:
    """One pass over all partitions: (results, bytes read, any partition errored)."""
    out = []
    total = 0
    errored = False
    for w in wanted:
        plog = state.catalog.partition_log(w.topic, w.partition) if w.topic is not None else None
        if plog is None:
            code = ke.UnknownTopicIdError.errno if w.topic is None else ke.UnknownTopicOrPartitionError.errno
            out.append((w, _partition_error(w.partition, code)))
            errored = True
            continue
        code = leader_epoch_error(w.current_leader_epoch)
        if code:
            out.append((w, _partition_error(w.partition, code, plog)))
            errored = True
            continue
        hw = plog.high_watermark
        lso = plog.last_stable_offset  # read_committed reads stop here
        limit = min(w.max_bytes, max_bytes - total)
        records = b""
        try:
            if limit > 0 or total == 0:
                # only while the response is still empty may one batch exceed the limits (KIP-74)
                records = await _read(plog, w.offset, max(limit, 1),
                                      lso if isolation == READ_COMMITTED else None, min_one=total == 0)
        except Exception as exc:
            out.append((w, _partition_error(w.partition, error_code(exc), plog)))
            errored = True
            continue
        total += len(records)
        out.append((w, PartitionData(partition_index=w.partition, error_code=0, high_watermark=hw,
                                     last_stable_offset=lso, log_start_offset=plog.log_start_offset,
                                     aborted_transactions=(_aborted(plog, w.offset, lso, records)
                                                           if isolation == READ_COMMITTED else None),
                                     preferred_read_replica=-1, records=records)))
    return out, total, errored


@handles(FetchRequest, FetchResponse, 4, 17)
async def handle_fetch(ctx: RequestContext, req: FetchRequest) -> FetchResponse:
    state = ctx.broker
    by_id = ctx.api_version >= 13
    if ctx.api_version >= 7 and req.session_id != 0:
        return FetchResponse(throttle_time_ms=0, error_code=FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[])
    wanted: list[Wanted] = []
    spans: list[tuple[object, int, int]] = []  # (request topic, first, end) indexes into `wanted`
    for t in req.topics:
        name = topic_name_for_id(state, t.topic_id) if by_id else t.topic
        first = len(wanted)
        for p in t.partitions:
            wanted.append(Wanted(name, p.partition, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch))
        spans.append((t, first, len(wanted)))
    max_bytes = req.max_bytes if req.max_bytes > 0 else 0x7FFFFFFF
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(req.max_wait_ms, 0) / 1000
    watch_keys = [(w.topic, w.partition) for w in wanted if w.topic is not None]
    while True:
        # Watch before reading so an append during a threaded read still wakes us.
        woken = state.notifier.watch(watch_keys)
        results, total, errored = await _read_all(state, wanted, max_bytes, req.isolation_level)
        remaining = deadline - loop.time()
        if total >= req.min_bytes or errored or remaining <= 0 or not wanted:
            woken.cancel()
            break
        try:
            await asyncio.wait_for(woken, remaining)
        except asyncio.TimeoutError:
            pass
    responses = []
    for t, first, end in spans:
        parts = [pdata for _w, pdata in results[first:end]]
        if by_id:
            responses.append(TopicData(topic_id=t.topic_id, partitions=parts))
        else:
            responses.append(TopicData(topic=t.topic, partitions=parts))
    return FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=responses)
