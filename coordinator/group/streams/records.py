"""Records of streams groups (KIP-1071) in `__consumer_offsets`, in Kafka 4.3.1's coordinator record
schemas (protocol/schemas/StreamsGroup*.json, the classes in protocol/messages.py).

A key is an int16 record type followed by the key fields (non-flexible); a value is an int16 version
(0) followed by the flexible encoding of its schema. A null value is a tombstone.

  17 StreamsGroupMetadata                 key: group          value: epoch, metadata hash, validated topology epoch, assignment configs
  19 StreamsGroupMemberMetadata           key: group, member  value: instance/rack/client/topology epoch/process/endpoint/tags
  20 StreamsGroupTargetAssignmentMetadata key: group          value: assignment epoch, timestamp
  21 StreamsGroupTargetAssignmentMember   key: group, member  value: target active/standby/warm-up tasks
  22 StreamsGroupCurrentMemberAssignment  key: group, member  value: epochs, state, tasks (active with epochs), pending revocation
  23 StreamsGroupTopology                 key: group          value: the topology
"""
from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any, Union

from minikafka.protocol import messages as M
from minikafka.coordinator.group.streams.model import (
    ActiveEpochs,
    Endpoint,
    MemberState,
    StreamsMember,
    Tasks,
    TasksTuple,
    freeze,
)
from minikafka.coordinator.group.streams.topology import CopartitionGroup, StreamsTopology, Subtopology, TopicInfo

GROUP_METADATA = 17
MEMBER_METADATA = 19
TARGET_METADATA = 20
TARGET_MEMBER = 21
CURRENT_ASSIGNMENT = 22
TOPOLOGY = 23

_KEYS = {
    GROUP_METADATA: M.StreamsGroupMetadataKey,
    MEMBER_METADATA: M.StreamsGroupMemberMetadataKey,
    TARGET_METADATA: M.StreamsGroupTargetAssignmentMetadataKey,
    TARGET_MEMBER: M.StreamsGroupTargetAssignmentMemberKey,
    CURRENT_ASSIGNMENT: M.StreamsGroupCurrentMemberAssignmentKey,
    TOPOLOGY: M.StreamsGroupTopologyKey,
}
_VALUES = {
    GROUP_METADATA: M.StreamsGroupMetadataValue,
    MEMBER_METADATA: M.StreamsGroupMemberMetadataValue,
    TARGET_METADATA: M.StreamsGroupTargetAssignmentMetadataValue,
    TARGET_MEMBER: M.StreamsGroupTargetAssignmentMemberValue,
    CURRENT_ASSIGNMENT: M.StreamsGroupCurrentMemberAssignmentValue,
    TOPOLOGY: M.StreamsGroupTopologyValue,
}
_GROUP_KEYS = frozenset({GROUP_METADATA, TARGET_METADATA, TOPOLOGY})
RECORD_TYPES = frozenset(_KEYS)

Record = tuple[bytes, Union[bytes, None]]
_I16 = struct.Struct(">h")


@dataclass(frozen=True)
class StreamsRecordKey:
    record_type: int
    group_id: str
    member_id: str | None = None


def encode_key(record_type: int, group_id: str, member_id: str | None = None) -> bytes:
    fields: dict[str, Any] = {"group_id": group_id}
    if record_type not in _GROUP_KEYS:
        fields["member_id"] = member_id
    body = bytes(_KEYS[record_type](**fields).encode(version=0))[2:]  # without the data's version prefix
    return _I16.pack(record_type) + body


def decode_key(data: bytes) -> StreamsRecordKey | None:
    """The key of a streams-group record; None for other record types."""
    if len(data) < 2:
        return None
    record_type = _I16.unpack_from(data)[0]
    if record_type not in RECORD_TYPES:
        return None
    try:
        key = _KEYS[record_type].decode(b"\x00\x00" + bytes(data[2:]), version=0)
    except Exception as exc:  # untrusted bytes: the loader skips what does not decode
        raise ValueError(f"undecodable streams group record key: {exc!r}") from None
    return StreamsRecordKey(record_type, key.group_id, getattr(key, "member_id", None))


def _value(record_type: int, **fields: Any) -> bytes:
    return bytes(_VALUES[record_type](**fields).encode(version=0))


def decode_value(record_type: int, data: bytes) -> Any:
    try:
        return _VALUES[record_type].decode(bytes(data), version=0)
    except Exception as exc:
        raise ValueError(f"undecodable streams group record value: {exc!r}") from None


# ------------------------------------------------------------------------------------- task ids

def _task_ids(cls: Any, tasks: Tasks, epochs: ActiveEpochs | None = None) -> list:
    out = []
    for s in sorted(tasks):
        ps = sorted(tasks[s])
        if epochs is None:
            out.append(cls(subtopology_id=s, partitions=ps))
        else:
            out.append(cls(subtopology_id=s, partitions=ps, assignment_epochs=[epochs[s][p] for p in ps]))
    return out


def _active_ids(cls: Any, active: ActiveEpochs) -> list:
    tasks = {s: frozenset(ps) for s, ps in active.items() if ps}
    return _task_ids(cls, tasks, active)


def _read_tasks(items) -> dict[str, frozenset[int]]:
    return freeze({t.subtopology_id: set(t.partitions or ()) for t in items or ()})


def _read_active(items, default_epoch: int) -> dict[str, dict[int, int]]:
    out: dict[str, dict[int, int]] = {}
    for t in items or ():
        epochs = list(t.assignment_epochs or ())
        ps = list(t.partitions or ())
        if ps:
            out[t.subtopology_id] = {p: (epochs[i] if i < len(epochs) else default_epoch) for i, p in enumerate(ps)}
    return out


# ------------------------------------------------------------------------------------- records

def group_metadata(group_id: str, epoch: int | None, metadata_hash: int = 0, validated_topology_epoch: int = -1,
                   assignment_configs: dict[str, str] | None = None) -> Record:
    key = encode_key(GROUP_METADATA, group_id)
    if epoch is None:
        return key, None
    cls = M.StreamsGroupMetadataValue
    configs = [cls.LastAssignmentConfig(key=k, value=v) for k, v in sorted((assignment_configs or {}).items())]
    return key, _value(GROUP_METADATA, epoch=epoch, metadata_hash=metadata_hash,
                       validated_topology_epoch=validated_topology_epoch, last_assignment_configs=configs)


def member_metadata(group_id: str, member: StreamsMember | str) -> Record:
    """The member's metadata record, or its tombstone when given only a member id."""
    if isinstance(member, str):
        return encode_key(MEMBER_METADATA, group_id, member), None
    cls = M.StreamsGroupMemberMetadataValue
    endpoint = None if member.user_endpoint is None else cls.Endpoint(host=member.user_endpoint.host,
                                                                      port=member.user_endpoint.port)
    return encode_key(MEMBER_METADATA, group_id, member.member_id), _value(
        MEMBER_METADATA, instance_id=member.instance_id, rack_id=member.rack_id, client_id=member.client_id,
        client_host=member.client_host, rebalance_timeout_ms=member.rebalance_timeout_ms,
        topology_epoch=member.topology_epoch, process_id=member.process_id, user_endpoint=endpoint,
        client_tags=[cls.KeyValue(key=k, value=v) for k, v in member.client_tags])


def target_metadata(group_id: str, assignment_epoch: int | None, timestamp: int = 0) -> Record:
    key = encode_key(TARGET_METADATA, group_id)
    if assignment_epoch is None:
        return key, None
    return key, _value(TARGET_METADATA, assignment_epoch=assignment_epoch, assignment_timestamp=timestamp)


def target_member(group_id: str, member_id: str, target: TasksTuple | None) -> Record:
    key = encode_key(TARGET_MEMBER, group_id, member_id)
    if target is None:
        return key, None
    cls = M.StreamsGroupTargetAssignmentMemberValue.TaskIds
    return key, _value(TARGET_MEMBER, active_tasks=_task_ids(cls, target.active),
                       standby_tasks=_task_ids(cls, target.standby), warmup_tasks=_task_ids(cls, target.warmup))


def current_assignment(group_id: str, member: StreamsMember | str) -> Record:
    if isinstance(member, str):
        return encode_key(CURRENT_ASSIGNMENT, group_id, member), None
    cls = M.StreamsGroupCurrentMemberAssignmentValue.TaskIds
    return encode_key(CURRENT_ASSIGNMENT, group_id, member.member_id), _value(
        CURRENT_ASSIGNMENT, member_epoch=member.member_epoch, previous_member_epoch=member.previous_member_epoch,
        state=int(member.state), active_tasks=_active_ids(cls, member.active),
        standby_tasks=_task_ids(cls, member.standby), warmup_tasks=_task_ids(cls, member.warmup),
        active_tasks_pending_revocation=_active_ids(cls, member.pending_active),
        standby_tasks_pending_revocation=_task_ids(cls, member.pending_standby),
        warmup_tasks_pending_revocation=_task_ids(cls, member.pending_warmup))


def topology_record(group_id: str, topology: StreamsTopology | None) -> Record:
    key = encode_key(TOPOLOGY, group_id)
    if topology is None:
        return key, None
    S = M.StreamsGroupTopologyValue.Subtopology

    def info(t: TopicInfo):
        return S.TopicInfo(name=t.name, partitions=t.partitions, replication_factor=t.replication_factor,
                           topic_configs=[S.TopicInfo.TopicConfig(key=k, value=v) for k, v in t.configs])
    subs = [S(subtopology_id=s.subtopology_id, source_topics=list(s.source_topics),
              source_topic_regex=list(s.source_topic_regex),
              state_changelog_topics=[info(t) for t in s.state_changelog_topics],
              repartition_sink_topics=list(s.repartition_sink_topics),
              repartition_source_topics=[info(t) for t in s.repartition_source_topics],
              copartition_groups=[S.CopartitionGroup(source_topics=list(g.source_topics),
                                                     source_topic_regex=list(g.source_topic_regex),
                                                     repartition_source_topics=list(g.repartition_source_topics))
                                  for g in s.copartition_groups])
            for s in topology.subtopologies]
    return key, _value(TOPOLOGY, epoch=topology.epoch, subtopologies=subs)


# ------------------------------------------------------------------------------------- decoding helpers

def topology_from(value: Any) -> StreamsTopology:
    """A StreamsTopology from a record value or a heartbeat's Topology (same field names)."""
    def info(t) -> TopicInfo:
        configs = tuple((c.key, c.value) for c in (t.topic_configs or ()))
        return TopicInfo(t.name, t.partitions, t.replication_factor, configs)
    subs = []
    for s in value.subtopologies or ():
        subs.append(Subtopology(
            subtopology_id=s.subtopology_id, source_topics=tuple(s.source_topics or ()),
            source_topic_regex=tuple(s.source_topic_regex or ()),
            state_changelog_topics=tuple(info(t) for t in s.state_changelog_topics or ()),
            repartition_sink_topics=tuple(s.repartition_sink_topics or ()),
            repartition_source_topics=tuple(info(t) for t in s.repartition_source_topics or ()),
            copartition_groups=tuple(CopartitionGroup(tuple(g.source_topics or ()), tuple(g.source_topic_regex or ()),
                                                      tuple(g.repartition_source_topics or ()))
                                     for g in s.copartition_groups or ())))
    return StreamsTopology(value.epoch, tuple(sorted(subs, key=lambda s: s.subtopology_id)))


def apply_member_metadata(member: StreamsMember, value: Any) -> StreamsMember:
    ep = value.user_endpoint
    return member.replace(
        instance_id=value.instance_id, rack_id=value.rack_id, client_id=value.client_id or "",
        client_host=value.client_host or "", rebalance_timeout_ms=value.rebalance_timeout_ms,
        topology_epoch=value.topology_epoch, process_id=value.process_id or "",
        user_endpoint=Endpoint(ep.host, ep.port) if ep is not None else None,
        client_tags=tuple((kv.key, kv.value) for kv in value.client_tags or ()))


def apply_current_assignment(member: StreamsMember, value: Any) -> StreamsMember:
    try:
        state = MemberState(value.state)
    except ValueError:
        state = MemberState.UNKNOWN
    return member.replace(
        member_epoch=value.member_epoch, previous_member_epoch=value.previous_member_epoch, state=state,
        active=_read_active(value.active_tasks, value.member_epoch), standby=_read_tasks(value.standby_tasks),
        warmup=_read_tasks(value.warmup_tasks),
        pending_active=_read_active(value.active_tasks_pending_revocation, value.member_epoch),
        pending_standby=_read_tasks(value.standby_tasks_pending_revocation),
        pending_warmup=_read_tasks(value.warmup_tasks_pending_revocation))


def target_from(value: Any) -> TasksTuple:
    return TasksTuple(_read_tasks(value.active_tasks), _read_tasks(value.standby_tasks), _read_tasks(value.warmup_tasks))
