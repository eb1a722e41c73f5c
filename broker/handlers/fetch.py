"""Fetch: whole stored batches up to the byte limits, long-polling until min_bytes or max_wait.

Zero copy: the response is an `EncodedBody` — every field encoded by kafka-python's encoder around
each partition's records (protocol/fetch_encoding.py), the records themselves `FileSlice`s over
dups of the segment descriptors (`PartitionLog.read_ranges` finds them from batch headers and the
offset index), which the connection sends with os.sendfile. No record byte is read into Python,
except when the process has no descriptor to spare (EMFILE/ENFILE on the dup): then that
partition's records are copied into the response as before, rather than failing it.

Limits: the response's records are capped by min(request max_bytes, broker `fetch.max.bytes`) and
each partition's by its partition_max_bytes; only while the response is still empty may one whole
batch exceed them (KIP-74).

Sessions: every request is served as a full (sessionless) fetch and answered with session id 0,
which Kafka clients treat as "no session was created" and keep sending full requests.
"""
from __future__ import annotations

import asyncio
import errno
import os
from dataclasses import dataclass, field

import kafka.errors as ke
from kafka.protocol.consumer import FetchRequest, FetchResponse

from minikafka.protocol.fetch_encoding import encode_fetch_response
from minikafka.protocol.record_batch import iter_headers
from minikafka.storage.errors import KafkaStorageError
from minikafka.storage.partition_log import PartitionLog
from minikafka.storage.segment import LogRange
from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize_cluster, authorized_names
from minikafka.broker.network.context import RequestContext
from minikafka.broker.errors import error_code
from minikafka.broker.network.registry import handles
from minikafka.broker.network.response import EncodedBody, FileSlice
from minikafka.broker.state import BrokerState
from minikafka.broker.handlers.common import leader_epoch_error, topic_name_for_id
from minikafka.protocol.errors import FETCH_SESSION_ID_NOT_FOUND

TopicData = FetchResponse.FetchableTopicResponse
PartitionData = TopicData.PartitionData
AbortedTransaction = PartitionData.AbortedTransaction
READ_COMMITTED = 1
NO_LIMIT = 0x7FFFFFFF
# The partition's tagged fields (v12+), given explicitly so encoding reads slots instead of taking
# kafka-python's per-attribute default lookup (it matters with many partitions); None = absent.
NO_TAGS = {"diverging_epoch": None, "current_leader": None, "snapshot_id": None}


@dataclass(slots=True)
class Wanted:
    topic: str | None
    partition: int
    offset: int
    max_bytes: int
    current_leader_epoch: int
    denied: bool = False  # the principal may not READ the topic: TOPIC_AUTHORIZATION_FAILED
    last_fetched_epoch: int = -1  # a follower's (v12+)
    diverging: tuple[int, int] | None = None  # (epoch, end offset) a follower must truncate to (KIP-320)
    error: int = 0  # found before reading (a follower's last fetched epoch the leader cannot place)


@dataclass(slots=True)
class Answer:
    """One partition's answer: its fields (records=b"" placeholder) and where its records are:
    `ranges` of segment files, or (only when the process is out of descriptors) `inline` bytes."""
    data: PartitionData
    ranges: list[LogRange] = field(default_factory=list)
    size: int = 0
    inline: bytes = b""

    def close(self) -> None:
        ranges, self.ranges = self.ranges, []
        for r in ranges:
            os.close(r.fd)


def _close_all(answers: list[Answer] | None) -> None:
    for a in answers or ():
        a.close()


def _partition_error(p: int, code: int, plog: PartitionLog | None = None) -> Answer:
    hw = plog.high_watermark if plog is not None else -1
    lso = plog.last_stable_offset if plog is not None else -1
    start = plog.log_start_offset if plog is not None else -1
    return Answer(PartitionData(partition_index=p, error_code=code, high_watermark=hw, last_stable_offset=lso,
                                log_start_offset=start, aborted_transactions=None, preferred_read_replica=-1,
                                records=b"", **NO_TAGS))


def _out_of_descriptors(exc: Exception) -> bool:
    cause = exc.__cause__
    return isinstance(cause, OSError) and cause.errno in (errno.EMFILE, errno.ENFILE)


def _aborted(plog: PartitionLog, offset: int, lso: int, last_offset: int | None) -> list:
    """read_committed: the aborted transactions overlapping the returned batches (from the .txnindex
    files), so the consumer can drop their records. The upper bound is the offset after the last
    returned batch, known from its header."""
    if last_offset is None:
        return []
    found = plog.collect_aborted_txns(offset, lso)
    if not found:
        return []
    upper = last_offset + 1
    return [AbortedTransaction(producer_id=a.producer_id, first_offset=a.first_offset)
            for a in found if a.first_offset < upper]


def _read_all(state: BrokerState, wanted: list[Wanted], max_bytes: int,
              isolation: int, replica_id: int = -1) -> tuple[list[Answer], int, bool]:
    """One pass over all partitions: (answers, record bytes, any partition errored). Reads only batch
    headers and index entries, so it runs on the event loop; the answers own descriptors (close)."""
    out: list[Answer] = []
    total = 0
    errored = False
    try:
        for w in wanted:
            if w.denied:
                out.append(_partition_error(w.partition, ke.TopicAuthorizationFailedError.errno))
                errored = True
                continue
            plog = state.catalog.partition_log(w.topic, w.partition) if w.topic is not None else None
            if plog is None:
                code = ke.UnknownTopicIdError.errno if w.topic is None else ke.UnknownTopicOrPartitionError.errno
                out.append(_partition_error(w.partition, code))
                errored = True
                continue
            replicas = state.replicas
            if replicas is None:
                code = leader_epoch_error(w.current_leader_epoch)
            else:  # a cluster: only the leader answers, consumers up to the HW, followers up to the LEO
                code = replicas.leader_error(w.topic, w.partition, w.current_leader_epoch)
            if code or w.error:
                out.append(_partition_error(w.partition, code or w.error, plog))
                errored = True
                continue
            hw = plog.high_watermark
            lso = plog.last_stable_offset  # read_committed reads stop here
            if w.diverging is not None:  # the follower truncates first: no records
                data = _partition_error(w.partition, 0, plog).data
                data.diverging_epoch = PartitionData.EpochEndOffset(epoch=w.diverging[0], end_offset=w.diverging[1])
                out.append(Answer(data))
                errored = True  # answered at once
                continue
            limit = min(w.max_bytes, max_bytes - total)
            ranges: list[LogRange] = []
            inline = b""
            last_offset = None
            # a follower outside the ISR of a throttled partition gets nothing while the rate is exceeded
            throttle = replica_id >= 0 and replicas is not None and replicas.leader_throttled(w.topic, w.partition,
                                                                                              replica_id)
            try:
                if (limit > 0 or total == 0) and not (throttle and replicas.leader_quota.exceeded()):
                    # only while the response is still empty may one batch exceed the limits (KIP-74)
                    args = (w.offset, max(limit, 1))
                    kw = {"max_offset": lso if isolation == READ_COMMITTED else (
                        hw if replicas is not None and replica_id < 0 else None), "min_one": total == 0}
                    try:
                        ranges = plog.read_ranges(*args, **kw)
                    except KafkaStorageError as exc:
                        if not _out_of_descriptors(exc):
                            raise
                        inline = plog.read(*args, **kw)  # no descriptor to spare: copy, as before
                        if inline:
                            last_offset = list(iter_headers(inline))[-1][1].last_offset
                if ranges:
                    last_offset = ranges[-1].last_offset
                aborted = _aborted(plog, w.offset, lso, last_offset) if isolation == READ_COMMITTED else None
            except Exception as exc:
                for r in ranges:
                    os.close(r.fd)
                out.append(_partition_error(w.partition, error_code(exc), plog))
                errored = True
                continue
            size = sum(r.size for r in ranges) + len(inline)
            total += size
            if throttle and size:
                replicas.leader_quota.record(size)
            if last_offset is not None:  # metrics: offsets the returned batches span (batch headers)
                first = ranges[0].first_offset if ranges else next(iter_headers(inline))[1].base_offset
                state.metrics.fetched(w.topic, size, last_offset - first + 1)
            out.append(Answer(PartitionData(partition_index=w.partition, error_code=0, high_watermark=hw,
                                            last_stable_offset=lso, log_start_offset=plog.log_start_offset,
                                            aborted_transactions=aborted, preferred_read_replica=-1,
                                            records=b"", **NO_TAGS), ranges, size, inline))
    except BaseException:
        _close_all(out)
        raise
    return out, total, errored


def _encode(version: int, by_id: bool, spans: list[tuple[object, int, int]], answers: list[Answer]) -> EncodedBody:
    """The response body; the answers' descriptors move into its FileSlices."""
    topics = []
    for t, first, end in spans:
        topic = TopicData(topic_id=t.topic_id, partitions=[]) if by_id else TopicData(topic=t.topic, partitions=[])
        topics.append((topic, [(a.data, a.size, [(FileSlice(r.fd, r.position, r.size), r.size) for r in a.ranges]
                                + ([(a.inline, len(a.inline))] if a.inline else []))
                               for a in answers[first:end]]))
    for a in answers:
        a.ranges = []  # owned by the slices now
    body = EncodedBody()
    try:
        parts, size = encode_fetch_response(FetchResponse(throttle_time_ms=0, error_code=0, session_id=0, responses=[]),
                                            topics, version)
        for part in parts:
            body.add(part)
        assert body.size == size, (body.size, size)
    except BaseException:
        for _topic, partitions in topics:
            for _data, _size, slices in partitions:
                for s, _n in slices:
                    if isinstance(s, FileSlice):
                        s.close()
        raise
    return body


def _replica_id(version: int, req: FetchRequest) -> int:
    """The fetching follower's id (v15+: ReplicaState), -1 for a consumer."""
    if version >= 15:
        state = getattr(req, "replica_state", None)
        return state.replica_id if state is not None else -1
    return req.replica_id


def _follower_positions(state: BrokerState, replica_id: int, wanted: list[Wanted]) -> None:
    """A follower's fetch: where its log diverges from ours (last fetched epoch, KIP-320), else its
    position moves the HW and its ISR membership (once per request, before any long-poll)."""
    replicas = state.replicas
    for w in wanted:
        if w.topic is None or w.denied or replicas.leader_error(w.topic, w.partition, w.current_leader_epoch):
            continue
        plog = state.catalog.partition_log(w.topic, w.partition)
        if plog is None:
            continue
        if w.last_fetched_epoch >= 0:
            try:
                diverging = plog.diverging_epoch(w.last_fetched_epoch, w.offset)
            except Exception as exc:  # OFFSET_OUT_OF_RANGE: the follower asks for the log start / end
                w.error = error_code(exc)
                continue
            if diverging is not None:
                w.diverging = (int(diverging[0]), int(diverging[1]))
                continue
        replicas.follower_fetched(w.topic, w.partition, replica_id, w.offset)


def _readable(ctx: RequestContext, req: FetchRequest, names: list[str | None]) -> set[str]:
    """The topics this fetch may read, as Kafka's handler: a follower (replica id >= 0) needs
    CLUSTER_ACTION on the cluster for all of them, a consumer READ on each topic (checked once)."""
    replica_id = _replica_id(ctx.api_version, req)
    known = [n for n in names if n is not None]
    if replica_id >= 0:
        return set(known) if authorize_cluster(ctx, acl.CLUSTER_ACTION) else set()
    return authorized_names(ctx, acl.READ, acl.TOPIC, known)


@handles(FetchRequest, FetchResponse, 4, 18)
async def handle_fetch(ctx: RequestContext, req: FetchRequest) -> FetchResponse | EncodedBody:
    state = ctx.broker
    by_id = ctx.api_version >= 13
    if ctx.api_version >= 7 and req.session_id != 0:
        return FetchResponse(throttle_time_ms=0, error_code=FETCH_SESSION_ID_NOT_FOUND, session_id=0, responses=[])
    wanted: list[Wanted] = []
    spans: list[tuple[object, int, int]] = []  # (request topic, first, end) indexes into `wanted`
    names = [topic_name_for_id(state, t.topic_id) if by_id else t.topic for t in req.topics]
    readable = _readable(ctx, req, names) if state.authorizer is not None else None
    for t, name in zip(req.topics, names):
        first = len(wanted)
        denied = readable is not None and name is not None and name not in readable
        for p in t.partitions:
            wanted.append(Wanted(name, p.partition, p.fetch_offset, p.partition_max_bytes, p.current_leader_epoch,
                                 denied, p.last_fetched_epoch if ctx.api_version >= 12 else -1))
        spans.append((t, first, len(wanted)))
    replica_id = -1
    if state.replicas is not None:
        replica_id = _replica_id(ctx.api_version, req)
        if replica_id >= 0:
            _follower_positions(state, replica_id, wanted)
    max_bytes = min(req.max_bytes if req.max_bytes > 0 else NO_LIMIT, state.config.fetch_max_bytes)
    if state.quotas.active and replica_id < 0:  # a consumer under consumer_byte_rate (broker/quota/)
        bound = state.quotas.max_fetch_bytes(ctx.principal, ctx.client_id)
        if bound is not None:
            max_bytes = min(max_bytes, bound)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(req.max_wait_ms, 0) / 1000
    watch_keys = [(w.topic, w.partition) for w in wanted if w.topic is not None]
    while True:
        # Watch before reading so an append right after the read still wakes us.
        woken = state.notifier.watch(watch_keys)
        answers, total, errored = _read_all(state, wanted, max_bytes, req.isolation_level, replica_id)
        remaining = deadline - loop.time()
        if total >= req.min_bytes or errored or remaining <= 0 or not wanted:
            woken.cancel()
            if errored:
                for a in answers:
                    if a.data.error_code:
                        state.metrics.partition_error("Fetch", a.data.error_code)
            break
        _close_all(answers)  # not enough yet: read again when woken (holding nothing meanwhile)
        try:
            await asyncio.wait_for(woken, remaining)
        except asyncio.TimeoutError:
            pass
    try:
        return _encode(ctx.api_version, by_id, spans, answers)
    finally:
        _close_all(answers)  # only left if encoding failed
