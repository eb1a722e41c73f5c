"""Checking an append against a partition before anything is written: the leader's (offsets assigned,
timestamps and epochs stamped, producer state checked, Kafka's LogValidator + analyzeAndValidateProducerState)
and the follower's (the leader's offsets and epochs kept, Kafka's appendAsFollower checks).

Invariant: these functions read the partition's state (next offset, latest epoch, producer state) and
touch none of it; the result (`Prepared`) says what the append will change, which the log applies
(`PartitionLog._reserve`) only once it writes the bytes.
"""
from __future__ import annotations

import struct
from pathlib import Path
from typing import Callable, NamedTuple

from minikafka.protocol.record_batch import (
    CONTROL_MASK,
    CURRENT_MAGIC,
    HEADER_SIZE,
    TIMESTAMP_TYPE_MASK,
    CorruptRecordError,
    compute_crc,
    iter_headers,
    patch_base_offset,
    peek_size,
    validate_batches,
)
from minikafka.protocol.record_validator import ValidationSettings, settings_for, validate_client_batch
from minikafka.storage.errors import RecordBatchTooLargeError, RecordTooLargeError, UnexpectedAppendOffsetError
from minikafka.storage.log_config import LogConfig
from minikafka.storage.producer_state import AppendOrigin, CompletedTxn, ProducerAppendInfo, ProducerStateManager
from minikafka.storage.segment import BatchInfo
from minikafka.storage.txn_markers import parse_marker

_EPOCH = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")
_TIMESTAMP = struct.Struct(">q")
_CRC = struct.Struct(">I")


class AppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless message.timestamp.type=LogAppendTime
    log_start_offset: int


class Prepared(NamedTuple):
    """A checked append with its offsets assigned, not yet written."""
    buf: bytearray | memoryview
    batches: list[BatchInfo]
    first_offset: int
    next_offset: int  # last offset + 1
    max_ts: int
    now_ms: int
    log_append_time_ms: int
    producers: dict[int, ProducerAppendInfo] | None
    completed_txns: list[CompletedTxn] | None
    epochs: list[tuple[int, int]] | None  # (leader epoch, start offset) newer than the epoch cache's latest


class PartitionValidation:
    """A partition's ValidationSettings: the topic's part is rebuilt only when the partition's config or
    directory object changes (both are replaced, never mutated), not for every batch."""
    __slots__ = ("_key", "_fields")

    def __init__(self) -> None:
        self._key: tuple[object, object] | None = None
        self._fields: tuple = ()

    def settings(self, cfg: LogConfig, directory: Path, now_ms: int) -> ValidationSettings:
        key = self._key
        if key is None or key[0] is not cfg or key[1] is not directory:
            self._key = (cfg, directory)
            self._fields = settings_for(cfg, directory.name, 0)[:-1]  # all but now_ms, the last field
        return ValidationSettings(*self._fields, now_ms)


def prepare_leader_append(records: bytes | bytearray | memoryview, cfg: LogConfig, *, next_offset: int,
                          latest_epoch: int, leader_epoch: int | None, producers_state: ProducerStateManager,
                          origin: AppendOrigin, validated: bool, transaction_version: int, now_ms: int,
                          log_start_offset: int, validation_settings: Callable[[int], object]
                          ) -> Prepared | AppendInfo:
    """Validate and assign offsets from `next_offset` (patching `records` if it is a writable view, else a
    copy); a duplicate of one of the producer's last batches -> its original AppendInfo. Client batches
    get record-level validation (protocol/record_validator.py) unless `validated`. Raises
    RecordTooLargeError (a batch over max.message.bytes, checked before content, as Kafka analyzes sizes
    first), RecordBatchTooLargeError (the payload over segment.bytes) and the validators' errors."""
    headers = validate_batches(records)
    settings = None
    for pos, header in headers:
        if header.size > cfg.max_message_bytes:
            raise RecordTooLargeError(
                f"batch of {header.size} bytes exceeds max.message.bytes {cfg.max_message_bytes}")
        if origin is AppendOrigin.CLIENT and not validated:
            if settings is None:
                settings = validation_settings(now_ms)
            validate_client_batch(memoryview(records)[pos:pos + header.size], header, settings)
    if len(records) > cfg.segment_bytes:
        raise RecordBatchTooLargeError(f"{len(records)} bytes exceed segment.bytes {cfg.segment_bytes}")
    # a writable view (the request frame, see protocol/codec.py) is patched in place; else a copy
    buf = records if isinstance(records, memoryview) and not records.readonly else bytearray(records)
    append_time = cfg.log_append_time
    first_offset = offset = next_offset
    batches: list[BatchInfo] = []
    max_ts = -1
    producers: dict[int, ProducerAppendInfo] | None = None
    completed_txns: list[CompletedTxn] | None = None
    epochs: list[tuple[int, int]] | None = None
    if leader_epoch is not None and leader_epoch > latest_epoch:
        epochs = [(leader_epoch, first_offset)]
    for pos, header in headers:
        if leader_epoch is None and header.partition_leader_epoch > latest_epoch:
            latest_epoch = header.partition_leader_epoch
            epochs = [*(epochs or ()), (latest_epoch, offset)]
        patch_base_offset(buf, pos, offset)
        if leader_epoch is not None:
            _EPOCH.pack_into(buf, pos + 12, leader_epoch)
        batch_ts = header.max_timestamp
        if append_time:
            batch_ts = now_ms
            _ATTRIBUTES.pack_into(buf, pos + 21, header.attributes | TIMESTAMP_TYPE_MASK)
            _TIMESTAMP.pack_into(buf, pos + 35, now_ms)
            _CRC.pack_into(buf, pos + 17, compute_crc(buf, pos, header.size))
        if header.producer_id >= 0:
            if producers is None:
                producers = {}
            if header.attributes & CONTROL_MASK:  # a transaction marker (only coordinators write these)
                marker = parse_marker(buf, pos)
                completed = None if marker is None else producers_state.prepare_marker(
                    header, offset, marker[0], marker[1], batch_ts, origin, producers, transaction_version)
                if completed is not None:
                    completed_txns = [*(completed_txns or ()), completed]
            else:
                duplicate = producers_state.prepare(header, offset, batch_ts, origin, producers, transaction_version)
                if duplicate is not None:  # a retry: answer with the original offsets, append nothing
                    return AppendInfo(duplicate.first_offset, duplicate.last_offset, duplicate.timestamp,
                                      log_start_offset)
        last = offset + header.last_offset_delta
        batches.append(BatchInfo(pos, header.size, last, batch_ts))
        max_ts = max(max_ts, batch_ts)
        offset = last + 1
    return Prepared(buf, batches, first_offset, offset, max_ts, now_ms, now_ms if append_time else -1,
                    producers, completed_txns, epochs)


def follower_parts(records: bytes | bytearray | memoryview, limit: int) -> list[memoryview]:
    """The whole batches of `records` (a trailing partial one dropped) in parts of at most `limit`
    (segment.bytes) each; a single larger batch is a part of its own."""
    view = memoryview(records)
    parts: list[memoryview] = []
    start = pos = 0
    end = len(view)
    while pos < end:
        peek = peek_size(view, pos)
        if peek is None or peek[1] < HEADER_SIZE or pos + peek[1] > end:
            break
        size = peek[1]
        if pos > start and pos + size - start > limit:
            parts.append(view[start:pos])
            start = pos
        pos += size
    if pos > start:
        parts.append(view[start:pos])
    return parts


def prepare_follower_append(view: memoryview, *, next_offset: int, latest_epoch: int,
                            producers_state: ProducerStateManager, now_ms: int, name: str) -> Prepared:
    """Check a part of a follower append (whole batches, as the leader wrote them): magic, CRC and counts
    (CorruptRecordError); offsets at or past `next_offset` and increasing (UnexpectedAppendOffsetError,
    gaps allowed: compaction makes them). Collects the producer state (origin REPLICATION, markers
    included) and the leader epochs newer than `latest_epoch`."""
    expected = next_offset
    producers: dict[int, ProducerAppendInfo] = {}
    completed_txns: list[CompletedTxn] | None = None
    batches: list[BatchInfo] = []
    epochs: list[tuple[int, int]] | None = None
    max_ts = -1
    first_offset = -1
    for pos, header in iter_headers(view):
        if header.magic != CURRENT_MAGIC:
            raise CorruptRecordError(f"record batch magic {header.magic} at offset {header.base_offset}")
        if compute_crc(view, pos, header.size) != header.crc:
            raise CorruptRecordError(f"record batch CRC mismatch at offset {header.base_offset} "
                                     f"in the append to {name}")
        if header.last_offset_delta < 0 or header.record_count < 0:
            raise CorruptRecordError(f"negative lastOffsetDelta or record count at offset {header.base_offset}")
        if header.base_offset < expected:
            what = "First offset" if not batches else "Offsets out of order:"
            raise UnexpectedAppendOffsetError(
                f"Unexpected offset in append to {name}. {what} {header.base_offset} is less than "
                f"the next offset {expected}.", header.base_offset, header.last_offset)
        if first_offset < 0:
            first_offset = header.base_offset
        epoch = header.partition_leader_epoch
        if epoch >= 0 and epoch != latest_epoch:
            epochs = [*(epochs or ()), (epoch, header.base_offset)]
            latest_epoch = epoch
        ts = header.max_timestamp
        if header.producer_id >= 0:
            if header.is_control:
                marker = parse_marker(view, pos)
                completed = None if marker is None else producers_state.prepare_marker(
                    header, header.base_offset, marker[0], marker[1], ts, AppendOrigin.REPLICATION, producers)
                if completed is not None:
                    completed_txns = [*(completed_txns or ()), completed]
            else:
                producers_state.prepare(header, header.base_offset, ts, AppendOrigin.REPLICATION, producers)
        batches.append(BatchInfo(pos, header.size, header.last_offset, ts))
        max_ts = max(max_ts, ts)
        expected = header.last_offset + 1
    if not batches:
        raise CorruptRecordError(f"no whole record batch in the append to {name}")
    return Prepared(view, batches, first_offset, expected, max_ts, now_ms, -1, producers or None,
                    completed_txns, epochs)
