"""ShareFetch (API 78) and ShareAcknowledge (API 79), v1-2: the share-group consumer's reads (KIP-932).

A request carries its share session's epoch (0 opens, -1 closes: broker/share/sessions.py), the partitions
it adds to or forgets from the session, and acknowledgements piggybacked per partition; they are applied
(and persisted) before anything is fetched. A fetch acquires records from every partition of the session
(broker/share/manager.py), long-polling until something is acquired or max_wait_ms passes. Records go out
as the stored batches around the acquired offsets; the client delivers only the acquired ones.
"""
from __future__ import annotations

import asyncio
import uuid
from typing import Any

import kafka.errors as ke

from minikafka.protocol.errors import INVALID_REQUEST, INVALID_SHARE_SESSION_EPOCH, UNKNOWN_TOPIC_ID
from minikafka.protocol.messages import (
    ShareAcknowledgeRequest,
    ShareAcknowledgeResponse,
    ShareFetchRequest,
    ShareFetchResponse,
)
from minikafka.broker.errors import error_code
from minikafka.broker.handlers.share_group import share_groups_enabled
from minikafka.broker.network.context import RequestContext
from minikafka.broker.network.registry import handles
from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize, authorized_names
from minikafka.broker.share.manager import FetchedPartition
from minikafka.broker.share.sessions import FINAL_EPOCH, INITIAL_EPOCH, ShareSessionError, next_epoch

FetchTopic = ShareFetchResponse.ShareFetchableTopicResponse
FetchPartition = FetchTopic.PartitionData
AcquiredRecords = FetchPartition.AcquiredRecords
FetchLeader = FetchPartition.LeaderIdAndEpoch
AckTopic = ShareAcknowledgeResponse.ShareAcknowledgeTopicResponse
AckPartition = AckTopic.PartitionData
AckLeader = AckPartition.LeaderIdAndEpoch
UNSUPPORTED_VERSION = ke.UnsupportedVersionError.errno
GROUP_AUTHORIZATION_FAILED = ke.GroupAuthorizationFailedError.errno
TOPIC_AUTHORIZATION_FAILED = ke.TopicAuthorizationFailedError.errno
RECORD_LIMIT_MODE = 1  # ShareAcquireMode (v2): acquire at most MaxRecords, even inside a batch
PartitionKey = tuple[uuid.UUID, int]


def _lock_ms(ctx: RequestContext, group_id: str) -> int:
    return int(ctx.broker.share_manager.setting(group_id, "share.record.lock.duration.ms"))


def _check_request(ctx: RequestContext, group_id: str | None, member_id: str | None) -> tuple[int, str | None]:
    if not share_groups_enabled(ctx):
        return UNSUPPORTED_VERSION, None
    if not group_id:
        return INVALID_REQUEST, "Group ID cannot be empty."
    if not member_id:
        return INVALID_REQUEST, "Member ID cannot be empty."
    if not authorize(ctx, acl.READ, acl.GROUP, group_id):
        return GROUP_AUTHORIZATION_FAILED, "Group authorization failed."
    return 0, None


class _Resolver:
    """Topic ids to names, and READ on each, once per request."""

    def __init__(self, ctx: RequestContext, topic_ids) -> None:
        self.names: dict[uuid.UUID, str | None] = {}
        for tid in topic_ids:
            info = ctx.broker.catalog.by_id.get(tid)
            self.names[tid] = info.name if info is not None and not info.internal else None
        known = [n for n in self.names.values() if n is not None]
        self.readable = authorized_names(ctx, acl.READ, acl.TOPIC, known) if known else set()

    def check(self, topic_id: uuid.UUID) -> tuple[int, str | None]:
        name = self.names.get(topic_id)
        if name is None:
            return UNKNOWN_TOPIC_ID, None
        if name not in self.readable:
            return TOPIC_AUTHORIZATION_FAILED, None
        return 0, name


def _leader(ctx: RequestContext, topic: str | None, partition: int) -> tuple[int, int]:
    """(leader id, leader epoch) as this broker knows them."""
    replicas = ctx.broker.replicas
    if replicas is None or topic is None:
        return ctx.broker.node_id, 0
    try:
        leader = ctx.broker.node_id if replicas.is_leader(topic, partition) else -1
        return leader, replicas.leader_epoch(topic, partition)
    except Exception:
        return -1, -1


async def _acknowledge(ctx: RequestContext, group_id: str, member_id: str, resolver: _Resolver,
                       acks: dict[PartitionKey, list[tuple[int, int, list[int]]]]
                       ) -> dict[PartitionKey, tuple[int, str | None]]:
    out: dict[PartitionKey, tuple[int, str | None]] = {}
    manager = ctx.broker.share_manager
    for (tid, p), batches in acks.items():
        code, topic = resolver.check(tid)
        if not code and ctx.broker.replicas is not None:
            code = ctx.broker.replicas.leader_error(topic, p)
        if code:
            out[(tid, p)] = (code, None)
            continue
        try:
            code, sp = await manager.get(group_id, topic, tid, p)
            out[(tid, p)] = (code, None) if code else await manager.acknowledge(group_id, member_id, topic, sp, batches)
        except Exception as exc:  # storage failure: Kafka's code for it
            out[(tid, p)] = (error_code(exc), None)
    return out


def _collect_acks(topics) -> dict[PartitionKey, list[tuple[int, int, list[int]]]]:
    acks: dict[PartitionKey, list[tuple[int, int, list[int]]]] = {}
    for t in topics or ():
        for p in t.partitions or ():
            batches = [(b.first_offset, b.last_offset, list(b.acknowledge_types or ()))
                       for b in p.acknowledgement_batches or ()]
            if batches:
                acks.setdefault((t.topic_id, p.partition_index), []).extend(batches)
    return acks


def _release_session(ctx: RequestContext, session: Any) -> None:
    ctx.broker.share_manager.release_member(session.group_id, session.member_id,
                                            [(None, t, p) for t, p in session.partitions])


async def _fetch_all(ctx: RequestContext, req: ShareFetchRequest, group_id: str, member_id: str,
                     keys: list[PartitionKey], resolver: _Resolver) -> dict[PartitionKey, FetchedPartition]:
    state = ctx.broker
    manager = state.share_manager
    read_committed = str(manager.setting(group_id, "share.isolation.level")).lower() == "read_committed"
    strict = ctx.api_version >= 2 and req.share_acquire_mode == RECORD_LIMIT_MODE
    max_records = req.max_records if req.max_records > 0 else 500
    max_bytes = min(req.max_bytes if req.max_bytes > 0 else 2**31 - 1, state.config.fetch_max_bytes)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + max(req.max_wait_ms, 0) / 1000
    out: dict[PartitionKey, FetchedPartition] = {}
    loaded: dict[PartitionKey, Any] = {}
    for key in keys:
        tid, p = key
        code, topic = resolver.check(tid)
        if not code and state.replicas is not None:
            code = state.replicas.leader_error(topic, p)
        if not code:
            try:
                code, sp = await manager.get(group_id, topic, tid, p)
            except Exception as exc:
                code = error_code(exc)
            if not code:
                loaded[key] = (topic, sp)
        if code:
            out[key] = FetchedPartition(code)
    while True:
        woken = state.notifier.watch([(topic, p) for (_t, p), (topic, _sp) in loaded.items()])
        records = size = 0
        for key, (topic, sp) in loaded.items():
            if records >= max_records or size >= max_bytes:
                break
            try:
                got = manager.acquire(group_id, member_id, topic, sp, max_records - records, max_bytes - size,
                                      read_committed, strict)
            except Exception as exc:
                got = FetchedPartition(error_code(exc))
            if got.error or got.acquired:
                out[key] = got
                records += sum(a.last_offset - a.first_offset + 1 for a in got.acquired)
                size += len(got.records)
        remaining = deadline - loop.time()
        if records or remaining <= 0 or not loaded or any(f.error for f in out.values()):
            woken.cancel()
            return out
        try:
            await asyncio.wait_for(woken, remaining)
        except asyncio.TimeoutError:
            pass


@handles(ShareFetchRequest, ShareFetchResponse, 1, 2)
async def handle_share_fetch(ctx: RequestContext, req: ShareFetchRequest) -> ShareFetchResponse:
    group_id, member_id, epoch = req.group_id, req.member_id, req.share_session_epoch

    def top(code: int, message: str | None = None) -> ShareFetchResponse:
        return ShareFetchResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                  acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[])
    code, message = _check_request(ctx, group_id, member_id)
    if code:
        return top(code, message)
    sessions = ctx.broker.share_sessions
    acks = _collect_acks(req.topics)
    try:
        if epoch == INITIAL_EPOCH:
            if acks:
                return top(INVALID_REQUEST, "Acknowledge data present on initial share fetch request.")
            session, old = sessions.open(group_id, member_id, ctx.peer)
            if old is not None:
                _release_session(ctx, old)
        else:
            session = sessions.get(group_id, member_id, epoch)
    except ShareSessionError as exc:
        return top(exc.errno, str(exc))
    if epoch != FINAL_EPOCH:
        for t in req.topics or ():
            for p in t.partitions or ():
                session.partitions[(t.topic_id, p.partition_index)] = None
        for f in req.forgotten_topics_data or ():
            for p in f.partitions or ():
                session.partitions.pop((f.topic_id, p), None)
        if epoch != INITIAL_EPOCH:
            session.epoch = next_epoch(epoch)
    wanted = list(session.partitions)
    resolver = _Resolver(ctx, {t for t, _p in wanted} | {t for t, _p in acks})
    ack_codes = await _acknowledge(ctx, group_id, member_id, resolver, acks)
    fetched: dict[PartitionKey, FetchedPartition] = {}
    if epoch == FINAL_EPOCH:
        sessions.close(group_id, member_id)
        _release_session(ctx, session)
    elif not (ctx.api_version >= 2 and req.is_renew_ack):
        fetched = await _fetch_all(ctx, req, group_id, member_id, wanted, resolver)
    requested = {(t.topic_id, p.partition_index) for t in req.topics or () for p in t.partitions or ()}
    by_topic: dict[uuid.UUID, list] = {}
    for key in [k for k in dict.fromkeys([*requested, *ack_codes, *fetched])]:
        tid, p = key
        f = fetched.get(key) or FetchedPartition()
        leader_id, leader_epoch = _leader(ctx, resolver.names.get(tid), p)
        by_topic.setdefault(tid, []).append(FetchPartition(
            partition_index=p, error_code=f.error, error_message=None,
            acknowledge_error_code=ack_codes.get(key, (0, None))[0],
            acknowledge_error_message=ack_codes.get(key, (0, None))[1],
            current_leader=FetchLeader(leader_id=leader_id, leader_epoch=leader_epoch),
            records=f.records,
            acquired_records=[AcquiredRecords(first_offset=a.first_offset, last_offset=a.last_offset,
                                              delivery_count=a.delivery_count) for a in f.acquired]))
    return ShareFetchResponse(
        throttle_time_ms=0, error_code=0, error_message=None, acquisition_lock_timeout_ms=_lock_ms(ctx, group_id),
        responses=[FetchTopic(topic_id=t, partitions=ps) for t, ps in by_topic.items()], node_endpoints=[])


@handles(ShareAcknowledgeRequest, ShareAcknowledgeResponse, 1, 2)
async def handle_share_acknowledge(ctx: RequestContext, req: ShareAcknowledgeRequest) -> ShareAcknowledgeResponse:
    group_id, member_id, epoch = req.group_id, req.member_id, req.share_session_epoch

    def top(code: int, message: str | None = None) -> ShareAcknowledgeResponse:
        return ShareAcknowledgeResponse(throttle_time_ms=0, error_code=code, error_message=message,
                                        acquisition_lock_timeout_ms=0, responses=[], node_endpoints=[])
    code, message = _check_request(ctx, group_id, member_id)
    if code:
        return top(code, message)
    if epoch == INITIAL_EPOCH:
        return top(INVALID_SHARE_SESSION_EPOCH, "A share session cannot be opened by ShareAcknowledge.")
    sessions = ctx.broker.share_sessions
    try:
        session = sessions.get(group_id, member_id, epoch)
    except ShareSessionError as exc:
        return top(exc.errno, str(exc))
    if epoch != FINAL_EPOCH:
        session.epoch = next_epoch(epoch)
    acks = _collect_acks(req.topics)
    resolver = _Resolver(ctx, {t for t, _p in acks})
    codes = await _acknowledge(ctx, group_id, member_id, resolver, acks)
    if epoch == FINAL_EPOCH:
        sessions.close(group_id, member_id)
        _release_session(ctx, session)
    by_topic: dict[uuid.UUID, list] = {}
    for (tid, p), (c, msg) in codes.items():
        leader_id, leader_epoch = _leader(ctx, resolver.names.get(tid), p)
        by_topic.setdefault(tid, []).append(AckPartition(
            partition_index=p, error_code=c, error_message=msg,
            current_leader=AckLeader(leader_id=leader_id, leader_epoch=leader_epoch)))
    return ShareAcknowledgeResponse(
        throttle_time_ms=0, error_code=0, error_message=None, acquisition_lock_timeout_ms=_lock_ms(ctx, group_id),
        responses=[AckTopic(topic_id=t, partitions=ps) for t, ps in by_topic.items()], node_endpoints=[])
