"""Produce: validate and append whole batches per partition; acks=0 gets no response (when a partition
failed, the connection is closed instead, as Kafka does, so that the producer notices).

Idempotent batches are checked by the partition's producer state (storage/producer_state.py): a retry
of one of the producer's last 5 batches is answered with no error and the original offsets (and, as
Kafka does, the original batch timestamp as log_append_time_ms); sequence/epoch failures carry the
log start offset, as Kafka's answers do.

Every client batch passes record-level validation (protocol/record_validator.py, Kafka's LogValidator)
before anything is stored. Uncompressed batches and compressed ones that declare a small inflated size
are validated inline (native scan, ~0.01 ms per MB, plus decompression); others (unknown or large
inflated size: gzip, snappy, would-be bombs) in a worker thread, then appended with `validated=True`.
A request yields to the event loop after every YIELD_EVERY_BYTES of partitions, so a 30 MB Produce
never holds the loop in one piece. The file writes run on the log dir's writer thread
(PartitionLog.begin_append): all partitions of a request are validated and given offsets first, then
the response waits for their writes; acks=0 too waits (it has no response, but keeps one request in
flight per connection). A refused batch
is answered with Kafka's error code, `error_message` and, for per-record rules, `record_errors`.
Produce never creates topics (Kafka auto-creates only on Metadata): unknown topic ->
UNKNOWN_TOPIC_OR_PARTITION."""
from __future__ import annotations

import asyncio
import logging
from typing import NamedTuple

import kafka.errors as ke
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from minikafka.protocol.produce_encoding import Appended, encode_produce_success
from minikafka.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    HEADER_SIZE,
    TRANSACTIONAL_MASK,
    check_produce_payload,
    parse_header,
    validate_batches,
)
from minikafka.protocol.record_validator import RecordValidationError, declared_inflated_size, validate_client_batch
from minikafka.protocol.recompression import TOPIC_CODECS, level_for, needs_recompression, recompress
from minikafka.storage import errors as se
from minikafka.storage.partition_log import AppendInfo
from minikafka.broker.security import acl
from minikafka.broker.security.authorizer import authorize, authorized_names
from minikafka.broker.network.connection import CloseConnection
from minikafka.broker.network.context import RequestContext
from minikafka.broker.errors import error_code, error_message
from minikafka.broker.network.registry import handles
from minikafka.broker.state import BrokerState
from minikafka.broker.handlers.common import ADMIN_CLIENT_ID, INTERNAL_TOPICS, INVALID_TOPIC, LEADER_EPOCH, topic_name_for_id
from minikafka.broker.handlers.txn_common import IMPLICIT_ADD_PRODUCE_VERSION as TV2_PRODUCE_VERSION
from minikafka.broker.handlers.txn_common import verify_transactional_produce

TopicResponse = ProduceResponse.TopicProduceResponse
PartitionResponse = TopicResponse.PartitionProduceResponse
VALID_ACKS = (-1, 0, 1)
# Append failures Kafka answers with the partition's log start offset (its generic append-error path)
PRODUCER_STATE_ERRORS = (se.OutOfOrderSequenceError, se.InvalidProducerEpochError, se.InvalidTxnStateError)
# Record-level validation of batches above this size runs in a worker thread (the loop stays responsive)
INLINE_INFLATED_BYTES = 4 << 20
YIELD_EVERY_BYTES = 1 << 20
BatchError = PartitionResponse.BatchIndexAndErrorMessage
TV2 = 2  # a transactional Produce v12+ comes from a transaction.version 2 client


def _error(index: int, code: int, message: str | None = None, log_start_offset: int = -1,
           record_errors: list[tuple[int, str]] = ()) -> PartitionResponse:
    return PartitionResponse(index=index, error_code=code, base_offset=-1, log_append_time_ms=-1,
                             log_start_offset=log_start_offset, error_message=message,
                             record_errors=[BatchError(batch_index=i, batch_index_error_message=m)
                                            for i, m in record_errors])


def _needs_worker(records: bytes | memoryview) -> bool:
    """Validate in a worker thread only a compressed batch whose inflated size is unknown or above
    INLINE_INFLATED_BYTES (gzip, snappy, frames without a declared size, would-be bombs); the rest
    inline, which also keeps its buffers in the main malloc arena (a worker thread's arena gives its
    memory back after every batch, and page faults cost more than the validation)."""
    if len(records) <= HEADER_SIZE or not records[ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK:
        return False
    size = declared_inflated_size(memoryview(records))
    return size is None or size > INLINE_INFLATED_BYTES or len(records) > INLINE_INFLATED_BYTES


def _validate(records: bytes, settings) -> None:
    view = memoryview(records)
    for pos, header in validate_batches(view):
        validate_client_batch(view[pos:pos + header.size], header, settings)


def _validate_and_recompress(records: bytes, settings, validated: bool, target: int, level: int) -> bytes:
    """Worker thread: the batches validated (unless they were), then re-coded in the topic's codec."""
    if not validated:
        _validate(records, settings)
    return recompress(records, target, level, settings.max_uncompressed_bytes)


def _topic_codec(config) -> tuple[int | None, int]:
    """(codec, level) the topic stores client batches in (compression.type); codec None: the producer's."""
    target = TOPIC_CODECS.get(config.compression_type)
    if target is None:
        return None, 0
    return target, level_for(target, config.compression_gzip_level, config.compression_lz4_level,
                             config.compression_zstd_level)


async def produce_partition(state: BrokerState, topic: str | None, index: int, records: bytes | None,
                            acks: int, version: int, transactional_id: str | None = None,
                            internal_allowed: bool = False) -> "PartitionResponse | Appended | _Writing":
    """Checks, validation and the offsets of one partition's records; their file write may still be
    going on (`_Writing`): the caller starts the other partitions before waiting for it."""
    if acks not in VALID_ACKS:
        return _error(index, ke.InvalidRequiredAcksError.errno)
    if topic is None:
        return _error(index, ke.UnknownTopicIdError.errno)
    plog = state.catalog.partition_log(topic, index)
    if plog is None:
        return _error(index, ke.UnknownTopicOrPartitionError.errno)
    if not records:
        return _error(index, ke.InvalidRecordError.errno, "empty record set")
    leader_epoch = LEADER_EPOCH
    replicas = state.replicas
    if replicas is not None:  # a cluster: only the leader appends, acks=all needs min.insync.replicas
        code = replicas.leader_error(topic, index)
        if not code and acks == -1:
            code = replicas.min_isr_error(topic, index)
        if code:
            return _error(index, code)
        leader_epoch = replicas.leader_epoch(topic, index)
    try:
        check_produce_payload(records, version)
        transactional = len(records) >= HEADER_SIZE and bool(records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_MASK)

        async def unverified() -> PartitionResponse | None:
            """KIP-890: only into a partition of the producer's open transaction."""
            header = parse_header(records)
            code, message = await verify_transactional_produce(state, transactional_id, header.producer_id,
                                                               header.producer_epoch, topic, index, version)
            # answered before the append: no log start offset, as Kafka does
            return _error(index, code, message) if code else None

        if transactional and (refused := await unverified()) is not None:
            return refused
        if topic in INTERNAL_TOPICS and not internal_allowed:  # Kafka's appendToLocalLog, for every principal
            return _error(index, INVALID_TOPIC)  # Kafka's answer carries no message
        validated = False
        target, level = _topic_codec(plog.config)
        recode = target is not None and needs_recompression(records, target)
        # too large: append refuses it before looking inside (Kafka checks sizes before content)
        if len(records) <= plog.config.max_message_bytes and (recode or _needs_worker(records)):
            loop = asyncio.get_running_loop()
            if recode:  # the topic's compression.type differs from the producer's codec (Kafka's LogValidator)
                records = await loop.run_in_executor(None, _validate_and_recompress, records,
                                                     plog.validation_settings(), False, target, level)
            else:
                await loop.run_in_executor(None, _validate, records, plog.validation_settings())
            validated = True
            # the world moved on while the thread validated: the partition may be gone, the
            # transaction may have ended (a late batch must not land after its marker)
            if state.catalog.partition_log(topic, index) is not plog:
                return _error(index, ke.UnknownTopicOrPartitionError.errno)
            if transactional and (refused := await unverified()) is not None:
                return refused
        if replicas is not None and (validated or transactional):
            # leadership may have moved while we awaited (Kafka appends under the partition's leader lock)
            if (code := replicas.leader_error(topic, index)) or replicas.leader_epoch(topic, index) != leader_epoch:
                return _error(index, code or ke.NotLeaderForPartitionError.errno)
        appended = plog.begin_append(records, leader_epoch=leader_epoch, validated=validated,
                                     transaction_version=TV2 if transactional and version >= TV2_PRODUCE_VERSION else 0)
    except RecordValidationError as exc:
        return _error(index, error_code(exc), error_message(exc), record_errors=exc.record_errors)
    except PRODUCER_STATE_ERRORS as exc:
        return _error(index, error_code(exc), error_message(exc), plog.log_start_offset)
    except Exception as exc:
        return _error(index, error_code(exc), error_message(exc))
    if isinstance(appended, AppendInfo):
        # metrics: one count per partition; client appends have one offset per record
        state.metrics.produced(topic, len(records), appended.last_offset - appended.first_offset + 1)
        return _answer(index, appended)
    return _Writing(index, appended, state, topic, len(records))


class _Writing(NamedTuple):
    """A partition whose append a writer thread is still writing."""
    index: int
    appended: "asyncio.Future[AppendInfo]"
    state: BrokerState
    topic: str
    nbytes: int

    async def response(self) -> PartitionResponse | Appended:
        try:
            info = await asyncio.shield(self.appended)  # a cancelled request does not cancel the write
        except Exception as exc:
            return _error(self.index, error_code(exc), error_message(exc))
        self.state.metrics.produced(self.topic, self.nbytes, info.last_offset - info.first_offset + 1)
        return _answer(self.index, info)


def _answer(index: int, info: AppendInfo) -> Appended:
    return Appended(index, info.first_offset, info.log_append_time_ms, info.log_start_offset, info.last_offset)


async def _wait_replicated(state: BrokerState, req: ProduceRequest, by_id: bool, responses: list) -> bool:
    """acks=all on a cluster: every appended partition waits (concurrently, up to the request's
    timeout) until the HW passes its last offset; a failure replaces its answer. True if none failed."""
    waits = []
    for key, done in responses:
        name = topic_name_for_id(state, key) if by_id else key
        for i, part in enumerate(done):
            if isinstance(part, Appended):
                waits.append((done, i, part, state.replicas.wait_replicated(name, part.index, part.last_offset + 1,
                                                                            req.timeout_ms)))
    if not waits:
        return True
    codes = await asyncio.gather(*(w[3] for w in waits))
    ok = True
    for (done, i, part, _w), code in zip(waits, codes):
        if code:  # as Kafka's DelayedProduce: the append's offsets stay, the error is set
            done[i] = PartitionResponse(index=part.index, error_code=code, base_offset=part.base_offset,
                                        log_append_time_ms=part.log_append_time_ms,
                                        log_start_offset=part.log_start_offset, error_message=None,
                                        record_errors=[])
            ok = False
    return ok


def _generic(part: PartitionResponse | Appended) -> PartitionResponse:
    if isinstance(part, Appended):
        return PartitionResponse(index=part.index, error_code=0, base_offset=part.base_offset,
                                 log_append_time_ms=part.log_append_time_ms, log_start_offset=part.log_start_offset,
                                 record_errors=[], error_message=None)
    return part


class AcksZeroFailed(CloseConnection):
    """As Kafka: an acks=0 Produce gets no response, so when any partition failed the connection is
    closed, which tells the producer that something went wrong (it refreshes its metadata)."""

    level = logging.INFO


def _failures(responses: list) -> str:
    return ", ".join(f"{topic}-{p.index}: {p.error_code}" for topic, parts in responses for p in parts
                     if isinstance(p, PartitionResponse) and p.error_code)


def _has_transactional_records(req: ProduceRequest) -> bool:
    """Kafka's RequestUtils.hasTransactionalRecords: the first batch of some partition is transactional."""
    for topic in req.topic_data:
        for p in topic.partition_data:
            records = p.records
            if records and len(records) > ATTRIBUTES_OFFSET + 1 and records[ATTRIBUTES_OFFSET + 1] & TRANSACTIONAL_MASK:
                return True
    return False


def _denied_topics(ctx: RequestContext, req: ProduceRequest, by_id: bool) -> set[str] | ProduceResponse | None:
    """As Kafka's handler: transactional batches need WRITE on the request's transactional id (else
    every partition gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED); each topic needs WRITE (checked once
    per topic; else TOPIC_AUTHORIZATION_FAILED for its partitions, before the topic's existence)."""
    if _has_transactional_records(req) and (
            req.transactional_id is None or not authorize(ctx, acl.WRITE, acl.TRANSACTIONAL_ID, req.transactional_id)):
        if req.acks == 0:
            raise AcksZeroFailed("TRANSACTIONAL_ID_AUTHORIZATION_FAILED")
        code = ke.TransactionalIdAuthorizationFailedError.errno
        return ProduceResponse(throttle_time_ms=0, responses=[
            TopicResponse(**({"topic_id": t.topic_id} if by_id else {"name": t.name}),
                          partition_responses=[_error(p.index, code) for p in t.partition_data])
            for t in req.topic_data])
    names = [topic_name_for_id(ctx.broker, t.topic_id) if by_id else t.name for t in req.topic_data]
    names = [n for n in names if n is not None]
    return set(names) - authorized_names(ctx, acl.WRITE, acl.TOPIC, names)


@handles(ProduceRequest, ProduceResponse, 3, 13)
async def handle_produce(ctx: RequestContext, req: ProduceRequest) -> ProduceResponse | bytearray | None:
    state = ctx.broker
    by_id = ctx.api_version >= 13
    denied: set[str] = set()
    if state.authorizer is not None:
        refused = _denied_topics(ctx, req, by_id)
        if refused is None or isinstance(refused, ProduceResponse):
            return refused
        denied = refused
    internal_allowed = ctx.client_id == ADMIN_CLIENT_ID
    responses = []
    since_yield = 0
    started: list[tuple[object, list[PartitionResponse | Appended | _Writing]]] = []
    for topic in req.topic_data:
        name = topic_name_for_id(state, topic.topic_id) if by_id else topic.name
        parts: list[PartitionResponse | Appended | _Writing] = []
        for p in topic.partition_data:
            if denied and name in denied:
                parts.append(_error(p.index, ke.TopicAuthorizationFailedError.errno))
                continue
            parts.append(await produce_partition(state, name, p.index, p.records, req.acks, ctx.api_version,
                                                 req.transactional_id, internal_allowed))
            since_yield += len(p.records or b"")
            if since_yield >= YIELD_EVERY_BYTES:  # let other connections in between big partitions
                since_yield = 0
                await asyncio.sleep(0)
        started.append((topic, parts))
    all_appended = True
    for topic, parts in started:  # acks only once every partition's bytes are written
        done = [await part.response() if isinstance(part, _Writing) else part for part in parts]
        all_appended = all_appended and all(isinstance(part, Appended) for part in done)
        responses.append((topic.topic_id if by_id else topic.name, done))
    if req.acks == -1 and state.replicas is not None:
        all_appended = await _wait_replicated(state, req, by_id, responses) and all_appended
    if not all_appended:
        for _key, done in responses:
            for part in done:
                if isinstance(part, PartitionResponse) and part.error_code:
                    state.metrics.partition_error("Produce", part.error_code)
    if req.acks == 0:
        if not all_appended:
            raise AcksZeroFailed(_failures(responses))
        return None
    if all_appended:  # the common case: no per-partition objects, no generic encoder
        return encode_produce_success(ctx.api_version, responses)
    if by_id:
        topics = [TopicResponse(topic_id=key, partition_responses=[_generic(p) for p in done])
                  for key, done in responses]
    else:
        topics = [TopicResponse(name=key, partition_responses=[_generic(p) for p in done]) for key, done in responses]
    return ProduceResponse(responses=topics, throttle_time_ms=0)
