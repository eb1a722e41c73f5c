"""Records of `__consumer_offsets` in Kafka's key/value schemas (group-coordinator JSON messages).

Every key and value starts with an int16 schema version. Keys: OffsetCommitKey (versions 0 and 1,
same layout: group, topic, partition) and GroupMetadataKey (version 2: group). Values:
OffsetCommitValue v0-v4 and GroupMetadataValue v0-v4 (v4 is the flexible encoding: compact strings
and tagged fields). We write OffsetCommitKey v1 + OffsetCommitValue v3 (v1 when the commit carries
an explicit expire timestamp) and GroupMetadataKey v2 + GroupMetadataValue v3, as Kafka 3.x/4.x
brokers do, so `kafka-dump-log --offsets-decoder` and Kafka's own loader can read them. A null
value is a tombstone. Records of other types (KIP-848 consumer/share/streams groups) are skipped
when loading.
"""
from __future__ import annotations

import struct
import time
from dataclasses import dataclass, field
from typing import Iterator

OFFSET_COMMIT_KEY_VERSION = 1
GROUP_METADATA_KEY_VERSION = 2
OFFSET_COMMIT_VALUE_VERSION = 3
OFFSET_COMMIT_VALUE_VERSION_EXPIRE = 1
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class RecordFormatError(ValueError):
    """A key or value does not decode with its declared schema version."""


# ------------------------------------------------------------------------------------- data

@dataclass(frozen=True)
class OffsetCommitKey:
    group: str
    topic: str
    partition: int


@dataclass(frozen=True)
class OffsetCommitValue:
    offset: int
    metadata: str = ""
    commit_timestamp: int = -1
    leader_epoch: int = -1
    expire_timestamp: int = -1  # only in version 1


@dataclass(frozen=True)
class GroupMetadataKey:
    group: str


@dataclass
class MemberMetadata:
    member_id: str
    client_id: str
    client_host: str
    rebalance_timeout: int
    session_timeout: int
    subscription: bytes
    assignment: bytes
    group_instance_id: str | None = None


@dataclass
class GroupMetadataValue:
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int = -1
    members: list[MemberMetadata] = field(default_factory=list)


# ------------------------------------------------------------------------------------- writer

class _Writer:
    def __init__(self, flexible: bool = False) -> None:
        self.buf = bytearray()
        self.flexible = flexible

    def i16(self, v: int) -> None:
        self.buf += _I16.pack(v)

    def i32(self, v: int) -> None:
        self.buf += _I32.pack(v)

    def i64(self, v: int) -> None:
        self.buf += _I64.pack(v)

    def uvarint(self, v: int) -> None:
        while v >= 0x80:
            self.buf.append((v & 0x7F) | 0x80)
            v >>= 7
        self.buf.append(v)

    def string(self, s: str | None) -> None:
        if s is None:
            if self.flexible:
                self.uvarint(0)
            else:
                self.i16(-1)
            return
        data = s.encode("utf-8")
        if self.flexible:
            self.uvarint(len(data) + 1)
        else:
            self.i16(len(data))
        self.buf += data

    def bytes_(self, b: bytes | None) -> None:
        if b is None:
            if self.flexible:
                self.uvarint(0)
            else:
                self.i32(-1)
            return
        if self.flexible:
            self.uvarint(len(b) + 1)
        else:
            self.i32(len(b))
        self.buf += b

    def array_len(self, n: int) -> None:
        if self.flexible:
            self.uvarint(n + 1)
        else:
            self.i32(n)

    def no_tags(self) -> None:
        if self.flexible:
            self.uvarint(0)


class _Reader:
    def __init__(self, data: bytes, pos: int = 0, flexible: bool = False) -> None:
        self.data = memoryview(data)
        self.pos = pos
        self.flexible = flexible

    def _take(self, n: int) -> memoryview:
        if n < 0 or self.pos + n > len(self.data):
            raise RecordFormatError(f"truncated: need {n} bytes at {self.pos} of {len(self.data)}")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def i16(self) -> int:
        return _I16.unpack(self._take(2))[0]

    def i32(self) -> int:
        return _I32.unpack(self._take(4))[0]

    def i64(self) -> int:
        return _I64.unpack(self._take(8))[0]

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 63:
                raise RecordFormatError("varint too long")

    def string(self, nullable: bool = False) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.i16()
        if n < 0:
            if not nullable:
                raise RecordFormatError("null in a non-nullable string")
            return None
        try:
            return bytes(self._take(n)).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise RecordFormatError(str(exc)) from None

    def bytes_(self) -> bytes | None:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        return None if n < 0 else bytes(self._take(n))

    def array_len(self) -> int:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        if n < 0:
            raise RecordFormatError("null array")
        return n

    def skip_tags(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()  # tag
                self._take(self.uvarint())

    def done(self) -> bool:
        return self.pos == len(self.data)


# ------------------------------------------------------------------------------------- keys

def encode_offset_commit_key(key: OffsetCommitKey) -> bytes:
    w = _Writer()
    w.i16(OFFSET_COMMIT_KEY_VERSION)
    w.string(key.group)
    w.string(key.topic)
    w.i32(key.partition)
    return bytes(w.buf)


def encode_group_metadata_key(key: GroupMetadataKey) -> bytes:
    w = _Writer()
    w.i16(GROUP_METADATA_KEY_VERSION)
    w.string(key.group)
    return bytes(w.buf)


def decode_key(data: bytes) -> OffsetCommitKey | GroupMetadataKey | None:
    """The key of a record; None for record types this coordinator does not handle."""
    r = _Reader(data)
    version = r.i16()
    if version in (0, 1):
        return OffsetCommitKey(r.string(), r.string(), r.i32())
    if version == 2:
        return GroupMetadataKey(r.string())
    return None


# ------------------------------------------------------------------------------------- values

def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    version = OFFSET_COMMIT_VALUE_VERSION_EXPIRE if value.expire_timestamp >= 0 else OFFSET_COMMIT_VALUE_VERSION
    w = _Writer()
    w.i16(version)
    w.i64(value.offset)
    if version >= 3:
        w.i32(value.leader_epoch)
    w.string(value.metadata)
    w.i64(value.commit_timestamp)
    if version == 1:
        w.i64(value.expire_timestamp)
    return bytes(w.buf)


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    r = _Reader(data)
    version = r.i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown OffsetCommitValue version {version}")
    r.flexible = version >= 4
    offset = r.i64()
    leader_epoch = r.i32() if version >= 3 else -1
    metadata = r.string()
    commit_ts = r.i64()
    expire_ts = r.i64() if version == 1 else -1
    r.skip_tags()
    return OffsetCommitValue(offset, metadata or "", commit_ts, leader_epoch, expire_ts)


def encode_group_metadata_value(value: GroupMetadataValue, version: int = GROUP_METADATA_VALUE_VERSION) -> bytes:
    w = _Writer(flexible=version >= 4)
    w.i16(version)
    w.string(value.protocol_type)
    w.i32(value.generation)
    w.string(value.protocol)
    w.string(value.leader)
    if version >= 2:
        w.i64(value.current_state_timestamp)
    w.array_len(len(value.members))
    for m in value.members:
        w.string(m.member_id)
        if version >= 3:
            w.string(m.group_instance_id)
        w.string(m.client_id)
        w.string(m.client_host)
        if version >= 1:
            w.i32(m.rebalance_timeout)
        w.i32(m.session_timeout)
        w.bytes_(m.subscription)
        w.bytes_(m.assignment)
        w.no_tags()
    w.no_tags()
    return bytes(w.buf)


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    r = _Reader(data)
    version = r.i16()
    if not 0 <= version <= 4:
        raise RecordFormatError(f"unknown GroupMetadataValue version {version}")
    r.flexible = version >= 4
    protocol_type = r.string() or ""
    generation = r.i32()
    protocol = r.string(nullable=True)
    leader = r.string(nullable=True)
    state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.array_len()):
        member_id = r.string()
        instance_id = r.string(nullable=True) if version >= 3 else None
        client_id = r.string()
        client_host = r.string()
        rebalance_timeout = r.i32() if version >= 1 else None
        session_timeout = r.i32()
        if rebalance_timeout is None:
            rebalance_timeout = session_timeout
        subscription = r.bytes_() or b""
        assignment = r.bytes_() or b""
        r.skip_tags()
        members.append(MemberMetadata(member_id, client_id, client_host, rebalance_timeout, session_timeout,
                                      subscription, assignment, instance_id))
    r.skip_tags()
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, members)


# ------------------------------------------------------------------------------------- batches

def build_batch(records: list[tuple[bytes, bytes | None]], timestamp_ms: int | None = None, *,
                producer_id: int = -1, producer_epoch: int = -1, transactional: bool = False) -> bytes:
    """One uncompressed v2 batch (base offset 0) of (key, value) records; value None = tombstone."""
    from kafka.record.default_records import DefaultRecordBatchBuilder

    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional,
                                        producer_id=producer_id, producer_epoch=producer_epoch,
                                        base_sequence=-1, batch_size=2**31 - 1)
    for i, (key, value) in enumerate(records):
        builder.append(i, timestamp=ts, key=key, value=value, headers=[])
    return bytes(builder.build())


@dataclass(frozen=True)
class LoadedRecord:
    offset: int
    key: bytes | None
    value: bytes | None
    producer_id: int
    transactional: bool


@dataclass(frozen=True)
class ControlMarker:
    offset: int
    producer_id: int
    commit: bool


def iter_batch_records(batch: bytes) -> Iterator[LoadedRecord | ControlMarker]:
    """Records of one stored batch (any codec); control batches yield one ControlMarker."""
    from kafka.record.default_records import DefaultRecordBatch

    b = DefaultRecordBatch(batch)
    pid = b.producer_id
    if b.is_control_batch:
        for rec in b:
            key = rec.key or b""
            if len(key) >= 4:
                ctype = _I16.unpack_from(key, 2)[0]
                yield ControlMarker(rec.offset, pid, ctype == 1)
        return
    transactional = b.is_transactional
    for rec in b:
        yield LoadedRecord(rec.offset, rec.key, rec.value, pid, transactional)
