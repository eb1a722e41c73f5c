"""Records of consumer groups (KIP-848) in `__consumer_offsets`, in Kafka's coordinator record schemas.

A key is an int16 record type followed by the key fields (non-flexible); a value is an int16 version
(0) followed by the flexible encoding of its schema. A null value is a tombstone.

  3 ConsumerGroupMetadata               key: group          value: epoch
  4 ConsumerGroupPartitionMetadata      key: group          value: subscribed topics (id, name, partitions)
  5 ConsumerGroupMemberMetadata         key: group, member  value: instance/rack/client/subscription/...
  6 ConsumerGroupTargetAssignmentMetadata key: group        value: assignment epoch
  7 ConsumerGroupTargetAssignmentMember key: group, member  value: target partitions
  8 ConsumerGroupCurrentMemberAssignment key: group, member value: epochs, state, assigned, pending revocation
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Union

from minikafka.coordinator.group.records import RecordFormatError, _Reader, _Writer
from minikafka.coordinator.group.consumer.model import Assignment, ClassicInfo, ConsumerMember, MemberState, freeze

GROUP_METADATA = 3
PARTITION_METADATA = 4
MEMBER_METADATA = 5
TARGET_METADATA = 6
TARGET_MEMBER = 7
CURRENT_ASSIGNMENT = 8
RECORD_TYPES = frozenset({GROUP_METADATA, PARTITION_METADATA, MEMBER_METADATA, TARGET_METADATA, TARGET_MEMBER,
                          CURRENT_ASSIGNMENT})
_GROUP_KEYS = frozenset({GROUP_METADATA, PARTITION_METADATA, TARGET_METADATA})

Record = tuple[bytes, Union[bytes, None]]


@dataclass(frozen=True)
class ConsumerRecordKey:
    record_type: int
    group_id: str
    member_id: str | None = None


def encode_key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    w = _Writer()
    w.i16(record_type)
    w.string(group_id)
    if record_type not in _GROUP_KEYS:
        w.string(member_id)
    return bytes(w.buf)


def decode_key(data: bytes) -> ConsumerRecordKey | None:
    """The key of a consumer-group record; None for other record types."""
    r = _Reader(data)
    record_type = r.i16()
    if record_type not in RECORD_TYPES:
        return None
    group_id = r.string()
    member_id = None if record_type in _GROUP_KEYS else r.string()
    return ConsumerRecordKey(record_type, group_id, member_id)


def _value_writer() -> _Writer:
    w = _Writer(flexible=True)
    w.i16(0)
    w.flexible = True
    return w


def _value_reader(data: bytes) -> _Reader:
    r = _Reader(data)
    version = r.i16()
    if version != 0:
        raise RecordFormatError(f"unknown consumer group record value version {version}")
    r.flexible = True
    return r


def _uuid(w: _Writer, u: uuid.UUID) -> None:
    w.buf += u.bytes


def _read_uuid(r: _Reader) -> uuid.UUID:
    return uuid.UUID(bytes=bytes(r._take(16)))


def _write_partitions(w: _Writer, assignment: Assignment) -> None:
    w.array_len(len(assignment))
    for t in sorted(assignment, key=str):
        _uuid(w, t)
        ps = sorted(assignment[t])
        w.array_len(len(ps))
        for p in ps:
            w.i32(p)
        w.no_tags()


def _read_partitions(r: _Reader) -> Assignment:
    out: dict[uuid.UUID, set[int]] = {}
    for _ in range(r.array_len()):
        t = _read_uuid(r)
        out[t] = {r.i32() for _ in range(r.array_len())}
        r.skip_tags()
    return freeze(out)


# ------------------------------------------------------------------------------------- records

def group_metadata(group_id: str, epoch: int | None) -> Record:
    if epoch is None:
        return encode_key(GROUP_METADATA, group_id), None
    w = _value_writer()
    w.i32(epoch)
    w.no_tags()
    return encode_key(GROUP_METADATA, group_id), bytes(w.buf)


def partition_metadata(group_id: str, topics: dict[str, tuple[uuid.UUID, int]] | None) -> Record:
    if topics is None:
        return encode_key(PARTITION_METADATA, group_id), None
    w = _value_writer()
    w.array_len(len(topics))
    for name in sorted(topics):
        tid, n = topics[name]
        _uuid(w, tid)
        w.string(name)
        w.i32(n)
        w.array_len(0)  # PartitionMetadata (racks): none on a single broker
        w.no_tags()
    w.no_tags()
    return encode_key(PARTITION_METADATA, group_id), bytes(w.buf)


def member_metadata(group_id: str, member: ConsumerMember | str) -> Record:
    """The member's metadata record, or its tombstone when given only a member id."""
    if isinstance(member, str):
        return encode_key(MEMBER_METADATA, group_id, member), None
    w = _value_writer()
    w.string(member.instance_id)
    w.string(member.rack_id)
    w.string(member.client_id)
    w.string(member.client_host)
    w.array_len(len(member.subscribed_topic_names))
    for name in member.subscribed_topic_names:
        w.string(name)
    w.string(member.subscribed_topic_regex)
    w.i32(member.rebalance_timeout_ms)
    w.string(member.server_assignor)
    if member.classic is None:
        w.no_tags()
    else:  # tagged field 0: ClassicMemberMetadata
        t = _Writer(flexible=True)
        t.i32(member.classic.session_timeout_ms)
        t.array_len(len(member.classic.protocols))
        for name, metadata in member.classic.protocols:
            t.string(name)
            t.bytes_(metadata)
            t.no_tags()
        t.no_tags()
        w.uvarint(1)
        w.uvarint(0)
        w.uvarint(len(t.buf))
        w.buf += t.buf
    return encode_key(MEMBER_METADATA, group_id, member.member_id), bytes(w.buf)


def target_metadata(group_id: str, assignment_epoch: int | None) -> Record:
    if assignment_epoch is None:
        return encode_key(TARGET_METADATA, group_id), None
    w = _value_writer()
    w.i32(assignment_epoch)
    w.no_tags()
    return encode_key(TARGET_METADATA, group_id), bytes(w.buf)


def target_member(group_id: str, member_id: str, assignment: Assignment | None) -> Record:
    if assignment is None:
        return encode_key(TARGET_MEMBER, group_id, member_id), None
    w = _value_writer()
    _write_partitions(w, assignment)
    w.no_tags()
    return encode_key(TARGET_MEMBER, group_id, member_id), bytes(w.buf)


def current_assignment(group_id: str, member: ConsumerMember | str) -> Record:
    if isinstance(member, str):
        return encode_key(CURRENT_ASSIGNMENT, group_id, member), None
    w = _value_writer()
    w.i32(member.member_epoch)
    w.i32(member.previous_member_epoch)
    w.buf.append(int(member.state) & 0xFF)
    _write_partitions(w, member.assigned)
    _write_partitions(w, member.pending_revocation)
    w.no_tags()
    return encode_key(CURRENT_ASSIGNMENT, group_id, member.member_id), bytes(w.buf)


# ------------------------------------------------------------------------------------- decoding

@dataclass(frozen=True)
class MemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    classic: ClassicInfo | None = None


@dataclass(frozen=True)
class CurrentAssignmentValue:
    member_epoch: int
    previous_member_epoch: int
    state: MemberState
    assigned: Assignment
    pending_revocation: Assignment


def decode_value(record_type: int, data: bytes):
    """The decoded value of a consumer-group record (type per `record_type`)."""
    r = _value_reader(data)
    if record_type in (GROUP_METADATA, TARGET_METADATA):
        out = r.i32()
    elif record_type == PARTITION_METADATA:
        topics = {}
        for _ in range(r.array_len()):
            tid = _read_uuid(r)
            name = r.string()
            n = r.i32()
            for _ in range(r.array_len()):  # partition racks
                r.i32()
                for _ in range(r.array_len()):
                    r.string()
                r.skip_tags()
            r.skip_tags()
            topics[name] = (tid, n)
        out = topics
    elif record_type == MEMBER_METADATA:
        instance_id = r.string(nullable=True)
        rack_id = r.string(nullable=True)
        client_id = r.string() or ""
        client_host = r.string() or ""
        names = tuple(r.string() for _ in range(r.array_len()))
        regex = r.string(nullable=True)
        rebalance_timeout = r.i32()
        assignor = r.string(nullable=True)
        classic = None
        for _ in range(r.uvarint()):  # tagged fields: 0 is ClassicMemberMetadata
            tag, size = r.uvarint(), r.uvarint()
            body = bytes(r._take(size))
            if tag == 0:
                t = _Reader(body, flexible=True)
                session = t.i32()
                protocols = []
                for _ in range(t.array_len()):
                    protocols.append((t.string(), t.bytes_() or b""))
                    t.skip_tags()
                classic = ClassicInfo(session, tuple(protocols))
        out = MemberMetadataValue(instance_id, rack_id, client_id, client_host, names, regex, rebalance_timeout,
                                  assignor, classic)
        return out
    elif record_type == TARGET_MEMBER:
        out = _read_partitions(r)
    elif record_type == CURRENT_ASSIGNMENT:
        epoch, previous = r.i32(), r.i32()
        state_byte = r._take(1)[0]
        try:
            state = MemberState(state_byte)
        except ValueError:
            state = MemberState.UNKNOWN
        out = CurrentAssignmentValue(epoch, previous, state, _read_partitions(r), _read_partitions(r))
    else:
        raise RecordFormatError(f"not a consumer group record type: {record_type}")
    r.skip_tags()
    return out
