"""Records of `__share_group_state` in Kafka's coordinator-record format (ShareCoordinatorRecordSerde).

Key: int16 record type (0 ShareSnapshot, 1 ShareUpdate) + ShareSnapshotKey / ShareUpdateKey (same layout,
not flexible): int16-length group id, 16-byte topic id, int32 partition.
Value: int16 version (0) + ShareSnapshotValue / ShareUpdateValue v0, a flexible message (compact array of
batches, tagged fields; DeliveryCompleteCount is tag 0, written only when it is not -1). A tombstone (null
value) has a ShareSnapshot key. Kafka's `kafka-dump-log --share-group-state-decoder` reads these.
"""
from __future__ import annotations

import struct
import uuid
from dataclasses import dataclass, field

from minikafka.coordinator.share.persister import StateBatch

SHARE_SNAPSHOT = 0
SHARE_UPDATE = 1
VALUE_VERSION = 0

_H = struct.Struct(">h")
_SNAP_HEAD = struct.Struct(">iiiq")  # snapshot epoch, state epoch, leader epoch, start offset
_UPD_HEAD = struct.Struct(">iiq")  # snapshot epoch, leader epoch, start offset
_TIMES = struct.Struct(">qq")  # create, write timestamps
_BATCH = struct.Struct(">qqbh")  # first, last, delivery state, delivery count
_KEY_TAIL = struct.Struct(">16si")


class RecordFormatError(ValueError):
    """A key or value of `__share_group_state` that does not decode."""


@dataclass(frozen=True)
class ShareKey:
    record_type: int  # SHARE_SNAPSHOT or SHARE_UPDATE
    group_id: str
    topic_id: uuid.UUID
    partition: int


@dataclass(frozen=True)
class ShareSnapshotValue:
    snapshot_epoch: int
    state_epoch: int
    leader_epoch: int
    start_offset: int
    create_timestamp: int
    write_timestamp: int
    state_batches: tuple[StateBatch, ...] = ()
    delivery_complete_count: int = -1


@dataclass(frozen=True)
class ShareUpdateValue:
    snapshot_epoch: int
    leader_epoch: int
    start_offset: int
    state_batches: tuple[StateBatch, ...] = field(default_factory=tuple)
    delivery_complete_count: int = -1


# ------------------------------------------------------------------------------------------ keys

def encode_key(key: ShareKey) -> bytes:
    group = key.group_id.encode("utf-8")
    if len(group) > 0x7FFF:
        raise ValueError("group id too long")
    return _H.pack(key.record_type) + _H.pack(len(group)) + group + _KEY_TAIL.pack(key.topic_id.bytes, key.partition)


def decode_key(data: bytes) -> ShareKey | None:
    """The key, or None for a record type this coordinator does not know (skipped on replay)."""
    try:
        (record_type,) = _H.unpack_from(data, 0)
        if record_type not in (SHARE_SNAPSHOT, SHARE_UPDATE):
            return None
        (n,) = _H.unpack_from(data, 2)
        if n < 0:
            raise RecordFormatError("null group id")
        group = bytes(data[4:4 + n]).decode("utf-8")
        topic, partition = _KEY_TAIL.unpack_from(data, 4 + n)
    except (struct.error, UnicodeDecodeError) as exc:
        raise RecordFormatError(f"bad share key: {exc}") from None
    if 4 + n + _KEY_TAIL.size != len(data):
        raise RecordFormatError("trailing bytes after share key")
    return ShareKey(record_type, group, uuid.UUID(bytes=topic), partition)


# ------------------------------------------------------------------------------------------ values

def _uvarint(v: int) -> bytes:
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _read_uvarint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if pos >= len(data):
            raise RecordFormatError("truncated varint")
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise RecordFormatError("varint too long")


def _batches(batches: tuple[StateBatch, ...] | list[StateBatch]) -> bytes:
    parts = [_uvarint(len(batches) + 1)]
    for b in batches:
        parts.append(_BATCH.pack(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) + b"\x00")
    return b"".join(parts)


def _tags(delivery_complete_count: int) -> bytes:
    if delivery_complete_count == -1:
        return b"\x00"
    return b"\x01\x00\x04" + struct.pack(">i", delivery_complete_count)


def encode_value(value: ShareSnapshotValue | ShareUpdateValue) -> bytes:
    if isinstance(value, ShareSnapshotValue):
        head = _SNAP_HEAD.pack(value.snapshot_epoch, value.state_epoch, value.leader_epoch, value.start_offset) \
            + _TIMES.pack(value.create_timestamp, value.write_timestamp)
    else:
        head = _UPD_HEAD.pack(value.snapshot_epoch, value.leader_epoch, value.start_offset)
    return _H.pack(VALUE_VERSION) + head + _batches(value.state_batches) + _tags(value.delivery_complete_count)


def _read_batches(data: bytes, pos: int) -> tuple[tuple[StateBatch, ...], int]:
    n, pos = _read_uvarint(data, pos)
    if n == 0:
        raise RecordFormatError("null state batches")
    out = []
    for _ in range(n - 1):
        first, last, state, count = _BATCH.unpack_from(data, pos)
        pos = _skip_tags(data, pos + _BATCH.size)[1]
        out.append(StateBatch(first, last, state, count))
    return tuple(out), pos


def _skip_tags(data: bytes, pos: int) -> tuple[int, int]:
    """(delivery complete count or -1, position after the tagged fields)."""
    count, pos = _read_uvarint(data, pos)
    dcc = -1
    for _ in range(count):
        tag, pos = _read_uvarint(data, pos)
        size, pos = _read_uvarint(data, pos)
        if tag == 0 and size == 4:
            (dcc,) = struct.unpack_from(">i", data, pos)
        pos += size
    if pos > len(data):
        raise RecordFormatError("truncated tagged fields")
    return dcc, pos


def decode_value(record_type: int, data: bytes) -> ShareSnapshotValue | ShareUpdateValue:
    try:
        (version,) = _H.unpack_from(data, 0)
        if version != VALUE_VERSION:
            raise RecordFormatError(f"unknown value version {version} of record type {record_type}")
        if record_type == SHARE_SNAPSHOT:
            snap, state, leader, start = _SNAP_HEAD.unpack_from(data, 2)
            created, written = _TIMES.unpack_from(data, 2 + _SNAP_HEAD.size)
            batches, pos = _read_batches(data, 2 + _SNAP_HEAD.size + _TIMES.size)
            dcc, pos = _skip_tags(data, pos)
            value: ShareSnapshotValue | ShareUpdateValue = ShareSnapshotValue(
                snap, state, leader, start, created, written, batches, dcc)
        else:
            snap, leader, start = _UPD_HEAD.unpack_from(data, 2)
            batches, pos = _read_batches(data, 2 + _UPD_HEAD.size)
            dcc, pos = _skip_tags(data, pos)
            value = ShareUpdateValue(snap, leader, start, batches, dcc)
    except struct.error as exc:
        raise RecordFormatError(f"bad share value: {exc}") from None
    if pos != len(data):
        raise RecordFormatError("trailing bytes after share value")
    return value
