"""Share-group records in `__consumer_offsets`, in Kafka's coordinator record schemas (protocol/schemas): a key
is the int16 record type then the key fields; a value is the int16 version then its fields; None = tombstone.

  10 ShareGroupMemberMetadata          key: group, member  value: rack, client id/host, subscribed topics
  11 ShareGroupMetadata                key: group          value: group epoch, metadata hash
  15 ShareGroupStatePartitionMetadata  key: group          value: the share-partitions whose state exists
"""
from __future__ import annotations

import struct
import uuid
from typing import Any

from minikafka.protocol.messages import (
    ShareGroupMemberMetadataKey,
    ShareGroupMemberMetadataValue,
    ShareGroupMetadataKey,
    ShareGroupMetadataValue,
    ShareGroupStatePartitionMetadataKey,
    ShareGroupStatePartitionMetadataValue,
)

MEMBER_METADATA, GROUP_METADATA, STATE_PARTITION_METADATA = 10, 11, 15
RECORD_TYPES = frozenset({MEMBER_METADATA, GROUP_METADATA, STATE_PARTITION_METADATA, 12, 13, 14})
_KEYS = {MEMBER_METADATA: ShareGroupMemberMetadataKey, GROUP_METADATA: ShareGroupMetadataKey,
         STATE_PARTITION_METADATA: ShareGroupStatePartitionMetadataKey}
_VALUES = {MEMBER_METADATA: ShareGroupMemberMetadataValue, GROUP_METADATA: ShareGroupMetadataValue,
           STATE_PARTITION_METADATA: ShareGroupStatePartitionMetadataValue}
_TYPE = struct.Struct(">h")
Record = tuple[bytes, "bytes | None"]
TopicsInfo = ShareGroupStatePartitionMetadataValue._struct.fields["initialized_topics"].data_class


def _key(record_type: int, **fields: Any) -> bytes:
    return _TYPE.pack(record_type) + bytes(_KEYS[record_type](**fields).encode(version=0, header=False))


def _value(record_type: int, **fields: Any) -> bytes:
    return bytes(_VALUES[record_type](**fields).encode(version=0, header=True))


def group_metadata(group_id: str, epoch: int | None) -> Record:
    return (_key(GROUP_METADATA, group_id=group_id),
            None if epoch is None else _value(GROUP_METADATA, epoch=epoch, metadata_hash=0))


def member_metadata(group_id: str, member_id: str, rack_id: str | None = None, client_id: str = "",
                    client_host: str = "", topics: tuple[str, ...] = (), tombstone: bool = False) -> Record:
    key = _key(MEMBER_METADATA, group_id=group_id, member_id=member_id)
    if tombstone:
        return key, None
    return key, _value(MEMBER_METADATA, rack_id=rack_id, client_id=client_id, client_host=client_host,
                       subscribed_topic_names=list(topics))


def state_partitions(group_id: str, initialized: dict[uuid.UUID, tuple[str, frozenset[int]]] | None) -> Record:
    key = _key(STATE_PARTITION_METADATA, group_id=group_id)
    if initialized is None:
        return key, None
    topics = [TopicsInfo(topic_id=t, topic_name=name, partitions=sorted(ps))
              for t, (name, ps) in sorted(initialized.items(), key=lambda kv: str(kv[0]))]
    return key, _value(STATE_PARTITION_METADATA, initializing_topics=[], initialized_topics=topics, deleting_topics=[])


def decode_key(data: bytes) -> tuple[int, str, str | None] | None:
    """(record type, group id, member id) of a share-group record; None for other record types."""
    (record_type,) = _TYPE.unpack_from(data)
    if record_type not in RECORD_TYPES:
        return None
    if record_type not in _KEYS:  # target/current assignment records: recomputed, not replayed
        return record_type, "", None
    key = _KEYS[record_type].decode(data[2:], version=0, header=False)
    return record_type, key.group_id, getattr(key, "member_id", None)


def decode_value(record_type: int, data: bytes) -> Any:
    return _VALUES[record_type].decode(data, header=True)
