"""__consumer_offsets record schemas: byte layouts Kafka tooling decodes, round trips, old versions."""
from __future__ import annotations

import struct

import pytest

from minikafka.coordinator.group.records import (
    ControlMarker,
    GroupMetadataKey,
    GroupMetadataValue,
    LoadedRecord,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    RecordFormatError,
    build_batch,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_group_metadata_key,
    encode_group_metadata_value,
    encode_offset_commit_key,
    encode_offset_commit_value,
    iter_batch_records,
)


def test_offset_commit_key_layout():
    data = encode_offset_commit_key(OffsetCommitKey("g", "tp", 3))
    assert data == struct.pack(">hh1sh2si", 1, 1, b"g", 2, b"tp", 3)
    assert decode_key(data) == OffsetCommitKey("g", "tp", 3)


def test_group_metadata_key_layout():
    data = encode_group_metadata_key(GroupMetadataKey("grp"))
    assert data == struct.pack(">hh3s", 2, 3, b"grp")
    assert decode_key(data) == GroupMetadataKey("grp")


def test_unknown_key_versions_are_skipped():
    assert decode_key(struct.pack(">hh1s", 3, 1, b"g")) is None  # KIP-848 consumer group records


def test_offset_commit_value_v3_layout():
    value = OffsetCommitValue(42, "meta", 1700000000000, 5)
    data = encode_offset_commit_value(value)
    assert data == struct.pack(">hqih4sq", 3, 42, 5, 4, b"meta", 1700000000000)
    assert decode_offset_commit_value(data) == value


def test_offset_commit_value_v1_with_expire_timestamp():
    value = OffsetCommitValue(7, "", 1000, -1, 5000)
    data = encode_offset_commit_value(value)
    assert data == struct.pack(">hqhqq", 1, 7, 0, 1000, 5000)
    assert decode_offset_commit_value(data) == value


def test_offset_commit_value_old_and_flexible_versions():
    v0 = struct.pack(">hqh1sq", 0, 9, 1, b"m", 77)
    assert decode_offset_commit_value(v0) == OffsetCommitValue(9, "m", 77, -1, -1)
    v2 = struct.pack(">hqh1sq", 2, 9, 1, b"m", 77)
    assert decode_offset_commit_value(v2) == OffsetCommitValue(9, "m", 77, -1, -1)
    # v4: compact string (length + 1 as uvarint) and an empty tagged-field section
    v4 = struct.pack(">hqi", 4, 9, 3) + bytes([2]) + b"m" + struct.pack(">q", 77) + bytes([0])
    assert decode_offset_commit_value(v4) == OffsetCommitValue(9, "m", 77, 3, -1)


def _group_value() -> GroupMetadataValue:
    return GroupMetadataValue("consumer", 4, "range", "m1", 1234, [
        MemberMetadata("m1", "client", "/127.0.0.1", 30000, 10000, b"sub1", b"asg1", None),
        MemberMetadata("m2", "client2", "/10.0.0.1", 30000, 10000, b"sub2", b"", "static-2"),
    ])


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_metadata_value_round_trip(version):
    value = _group_value()
    decoded = decode_group_metadata_value(encode_group_metadata_value(value, version))
    assert decoded.protocol_type == "consumer" and decoded.generation == 4
    assert decoded.protocol == "range" and decoded.leader == "m1"
    assert decoded.current_state_timestamp == (1234 if version >= 2 else -1)
    assert [m.member_id for m in decoded.members] == ["m1", "m2"]
    assert decoded.members[1].group_instance_id == ("static-2" if version >= 3 else None)
    assert decoded.members[0].subscription == b"sub1" and decoded.members[0].assignment == b"asg1"
    # v0 has no rebalance timeout: the session timeout stands in for it
    assert decoded.members[0].rebalance_timeout == (30000 if version >= 1 else 10000)


def test_group_metadata_value_v3_layout_of_an_empty_group():
    data = encode_group_metadata_value(GroupMetadataValue("", 0, None, None, 99, []))
    assert data == struct.pack(">hhihhqi", 3, 0, 0, -1, -1, 99, 0)


def test_truncated_value_is_an_error():
    data = encode_offset_commit_value(OffsetCommitValue(1, "abc", 5))
    with pytest.raises(RecordFormatError):
        decode_offset_commit_value(data[:-3])


def test_batch_round_trip_with_tombstone():
    key = encode_offset_commit_key(OffsetCommitKey("g", "t", 0))
    batch = build_batch([(key, encode_offset_commit_value(OffsetCommitValue(1, "", 5))), (key, None)], 5)
    recs = list(iter_batch_records(batch))
    assert [r.offset for r in recs] == [0, 1]
    assert all(isinstance(r, LoadedRecord) and not r.transactional for r in recs)
    assert recs[1].value is None


def test_control_batch_yields_a_marker():
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True, producer_id=9,
                                        producer_epoch=1, base_sequence=-1, batch_size=1 << 20)
    builder.append(0, timestamp=1, key=struct.pack(">hh", 0, 1), value=struct.pack(">hi", 0, 0), headers=[])
    data = bytearray(builder.build())
    data[22] |= 0x20  # control attribute (the builder only writes client batches)
    import crc32c
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))
    (marker,) = list(iter_batch_records(bytes(data)))
    assert marker == ControlMarker(0, 9, True)
