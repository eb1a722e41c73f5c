"""Records of __share_group_state in Kafka's format: the bytes agree with the message schemas of Kafka 4.3.1
(protocol/messages.py), and decode back."""
from __future__ import annotations

import uuid

import pytest

from minikafka.coordinator.share.persister import StateBatch
from minikafka.coordinator.share.records import (
    SHARE_SNAPSHOT,
    SHARE_UPDATE,
    RecordFormatError,
    ShareKey,
    ShareSnapshotValue,
    ShareUpdateValue,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
)
from minikafka.protocol import messages

TOPIC = uuid.UUID("2f1c9a0e-51d4-4b7e-9d0f-52b7a3c4d5e6")
BATCHES = (StateBatch(10, 19, 2, 1), StateBatch(20, 25, 0, 3))


@pytest.mark.parametrize("record_type,cls", [(SHARE_SNAPSHOT, messages.ShareSnapshotKey),
                                             (SHARE_UPDATE, messages.ShareUpdateKey)])
def test_key_layout(record_type, cls):
    key = ShareKey(record_type, "gröup", TOPIC, 7)
    data = encode_key(key)
    assert data[:2] == record_type.to_bytes(2, "big")
    # kafka-python's ApiData.encode puts the int16 version first: Kafka's serde puts the record type there
    assert data[2:] == cls(group_id="gröup", topic_id=TOPIC, partition=7).encode(version=0)[2:]
    assert decode_key(data) == key


def test_unknown_key_type_is_skipped():
    assert decode_key(b"\x00\x05abc") is None
    with pytest.raises(RecordFormatError):
        decode_key(encode_key(ShareKey(SHARE_SNAPSHOT, "g", TOPIC, 1)) + b"x")


@pytest.mark.parametrize("dcc", [-1, 12])
def test_snapshot_value_layout(dcc):
    value = ShareSnapshotValue(3, 4, 5, 10, 1700000000000, 1700000000001, BATCHES, dcc)
    data = encode_value(value)
    S = messages.ShareSnapshotValue
    expected = S(snapshot_epoch=3, state_epoch=4, leader_epoch=5, start_offset=10, delivery_complete_count=dcc,
                 create_timestamp=1700000000000, write_timestamp=1700000000001,
                 state_batches=[S.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                             delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                                for b in BATCHES]).encode(version=0)
    assert data == expected  # int16 version 0 + the message
    assert decode_value(SHARE_SNAPSHOT, data) == value


@pytest.mark.parametrize("dcc", [-1, 0])
def test_update_value_layout(dcc):
    value = ShareUpdateValue(3, -1, -1, BATCHES, dcc)
    data = encode_value(value)
    U = messages.ShareUpdateValue
    expected = U(snapshot_epoch=3, leader_epoch=-1, start_offset=-1, delivery_complete_count=dcc,
                 state_batches=[U.StateBatch(first_offset=b.first_offset, last_offset=b.last_offset,
                                             delivery_state=b.delivery_state, delivery_count=b.delivery_count)
                                for b in BATCHES]).encode(version=0)
    assert data == expected  # int16 version 0 + the message
    assert decode_value(SHARE_UPDATE, data) == value


def test_bad_values_refused():
    good = encode_value(ShareUpdateValue(0, 1, 2, BATCHES))
    for bad in (good[:-3], good + b"\x00", b"\x00\x01" + good[2:]):
        with pytest.raises(RecordFormatError):
            decode_value(SHARE_UPDATE, bad)
