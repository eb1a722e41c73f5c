"""protocol/schemas: the share-group / streams-group APIs (keys 76-79, 83-92) and the share/streams coordinator
records of Kafka 4.3.1, loaded by kafka-python's ApiMessage / ApiData machinery (protocol/messages.py).

Every message and record is built with realistic values at each valid version (every field of that version set,
nullable ones both set and null), encoded, decoded and compared; ShareFetchRequest v1 is also checked against
bytes assembled by hand from the schema (flexible version: compact strings/arrays, tagged-field buffers)."""
from __future__ import annotations

import io
import struct
import uuid

import pytest

from minikafka.protocol import messages as m

# (class, 4.3.1 validVersions) -- checked against LOWEST/HIGHEST_SUPPORTED_VERSION of kafka-clients-4.3.1.jar
APIS = {
    76: ("ShareGroupHeartbeat", 1, 1),
    77: ("ShareGroupDescribe", 1, 1),
    78: ("ShareFetch", 1, 2),
    79: ("ShareAcknowledge", 1, 2),
    83: ("InitializeShareGroupState", 0, 0),
    84: ("ReadShareGroupState", 0, 0),
    85: ("WriteShareGroupState", 0, 1),
    86: ("DeleteShareGroupState", 0, 0),
    87: ("ReadShareGroupStateSummary", 0, 1),
    88: ("StreamsGroupHeartbeat", 0, 0),
    89: ("StreamsGroupDescribe", 0, 0),
    90: ("DescribeShareGroupOffsets", 0, 1),
    91: ("AlterShareGroupOffsets", 0, 0),
    92: ("DeleteShareGroupOffsets", 0, 0),
}
MESSAGES = [(getattr(m, name + kind), lo, hi) for name, lo, hi in APIS.values() for kind in ("Request", "Response")]
MESSAGE_CASES = [pytest.param(cls, v, id="%s-v%d" % (cls.__name__, v))
                 for cls, lo, hi in MESSAGES for v in sorted({lo, hi})]

# record type ids: keys of __share_group_state (share coordinator) and __consumer_offsets (group coordinator)
RECORDS = {
    "ShareSnapshot": 0, "ShareUpdate": 1,
    "ShareGroupMemberMetadata": 10, "ShareGroupMetadata": 11, "ShareGroupTargetAssignmentMetadata": 12,
    "ShareGroupTargetAssignmentMember": 13, "ShareGroupCurrentMemberAssignment": 14,
    "ShareGroupStatePartitionMetadata": 15, "StreamsGroupMetadata": 17, "StreamsGroupMemberMetadata": 19,
    "StreamsGroupTargetAssignmentMetadata": 20, "StreamsGroupTargetAssignmentMember": 21,
    "StreamsGroupCurrentMemberAssignment": 22, "StreamsGroupTopology": 23,
}
RECORD_CASES = [pytest.param(getattr(m, name + kind), id=name + kind) for name in RECORDS for kind in ("Key", "Value")]

TOPIC_ORDERS = uuid.UUID("5f0c3c5e-8a3b-4d1e-9a51-2f6b8e0d7c11")
TOPIC_PAYMENTS = uuid.UUID("c2d8a1f4-17e9-4b0a-8f3e-6a4b9d2e5f30")
RECORD_BATCH = bytes.fromhex("0000000000000000" "0000003c" "00000000" "02" "1a2b3c4d") + b"\x00" * 48


# ------------------------------------------------------------------------------ realistic values from the schema

def _string(name: str, i: int) -> str:
    table = {
        "group_id": "orders-share-group", "member_id": "Zq3VJ0bUQ4mYkq0Xb9z1pA", "instance_id": "instance-%d" % i,
        "rack_id": "rack-a", "rack": "rack-b", "client_id": "consumer-orders-%d" % i, "client_host": "/10.0.3.%d" % (7 + i),
        "host": "broker-%d.kafka.internal" % i, "error_message": None, "acknowledge_error_message": None,
        "topic_name": ("orders", "payments")[i % 2], "topic": ("orders", "payments")[i % 2],
        "name": ("orders-changelog", "orders-repartition")[i % 2], "subtopology_id": str(i),
        "process_id": "9d6f0e52-4a1c-4c0e-b7c1-0f7bd1b2f3aa", "group_state": "Stable", "assignor_name": "simple",
        "key": ("cleanup.policy", "region")[i % 2], "value": ("compact", "eu-west-1")[i % 2],
        "state": "stable", "status_detail": "missing source topic 'clicks'", "regex": "clicks-.*",
    }
    return table.get(name, "%s-%d" % (name.replace("_", "-"), i))


def _int(name: str, type_str: str, i: int) -> int:
    if "error_code" in name:
        return 0 if i == 0 else 15                      # NONE / COORDINATOR_NOT_AVAILABLE
    for key, val in (("epoch", 7 + i), ("partition", 3 + i), ("port", 9092 + i), ("offset", 41_000 + 250 * i),
                     ("timeout", 30_000), ("interval", 5_000), ("_ms", 250), ("lag", 12 + i), ("count", 2 + i),
                     ("replication_factor", 3), ("node_id", 1 + i), ("leader_id", 2 + i), ("bytes", 1_048_576),
                     ("records", 500), ("batch_size", 500), ("hash", 0x1F2E3D4C5B6A7988), ("timestamp", 1_767_225_600_000),
                     ("operations", 0x0CF8), ("status_code", 1), ("state", 2), ("member_type", 1), ("mode", 1)):
        if key in name:
            break
    else:
        val = 1 + i
    limit = {"int8": 127, "int16": 32767, "uint16": 65535, "int32": 2 ** 31 - 1}.get(type_str)
    return val % (limit + 1) if limit else val


def _array(field, i: int):
    inner = field.array_of._type_str
    if inner == "int8":
        return [1, 1, 2, 0, 3][: 3 + i]                 # acknowledge types: accept, accept, release(, gap, reject)
    if inner in ("int16", "int32"):
        return [0, 1, 2 + i]
    if inner == "int64":
        return [100, 200 + i]
    if inner == "string":
        return ["orders", "payments-%d" % i]
    if inner == "uuid":
        return [TOPIC_ORDERS, TOPIC_PAYMENTS]
    raise AssertionError(inner)


def _value(field, version: int, i: int, nulls: bool):
    if nulls and field.nullable_for_version_q(version):
        return None
    name = field.name
    if field.is_struct_array():
        return [build(field.data_class, field, version, j, nulls) for j in range(2)]
    if field.is_struct():
        return build(field.data_class, field, version, i, nulls)
    if field.is_array():
        return _array(field, i)
    t = field.type_str
    if t == "uuid":
        return (TOPIC_ORDERS, TOPIC_PAYMENTS)[i % 2]
    if t == "string":
        s = _string(name, i)
        return s if s is not None else ("The coordinator is loading" if i else "")
    if t in ("records", "bytes"):
        return RECORD_BATCH
    if t == "bool":
        return True
    return _int(name, t, i)


def build(cls, struct, version: int, i: int = 0, nulls: bool = False):
    """A `cls` instance with every field of `version` set (tagged ones to non-default values)."""
    fields = struct.array_of._fields if struct.is_struct_array() else struct._fields
    vals = {f.name: _value(f, version, i, nulls) for f in fields if f.for_version_q(version)}
    return cls(version=version, **vals)


def roundtrip_message(obj, cls, version: int):
    flexible = cls.flexible_version_q(version)
    data = bytes(obj.encode(version=version))
    # the compiled encoder and the generic (field-by-field) encoder agree
    assert data == cls._struct.encode(obj, version=version, compact=flexible, tagged=flexible)
    back = cls.decode(data, version=version)
    assert back == obj
    assert back.to_dict() == obj.to_dict()
    # (a message decoded without header has no _header slot, so kafka-python's encode() of it raises
    # AttributeError: re-encode through the struct instead)
    assert cls._struct.encode(back, version=version, compact=flexible, tagged=flexible) == data
    # the generic decoder reads the same thing
    generic = cls._struct.decode(io.BytesIO(data), version=version, compact=flexible, tagged=flexible,
                                 data_class=cls[None])
    assert generic.to_dict() == obj.to_dict()
    return data


# ------------------------------------------------------------------------------ messages

def test_api_keys_versions_and_flexibility():
    for key, (name, lo, hi) in APIS.items():
        for kind in ("Request", "Response"):
            cls = getattr(m, name + kind)
            assert cls.API_KEY == key
            assert cls.valid_versions == (lo, hi)
            assert cls.type == kind.lower()
            assert all(cls.flexible_version_q(v) for v in range(lo, hi + 1))
            assert name + kind in m.__all__


@pytest.mark.parametrize("cls,version", MESSAGE_CASES)
@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
def test_message_roundtrip(cls, version, nulls):
    obj = build(cls, cls._struct, version, 0, nulls)
    roundtrip_message(obj, cls, version)


@pytest.mark.parametrize("cls,version", MESSAGE_CASES)
def test_message_roundtrip_with_header_and_frame(cls, version):
    obj = build(cls, cls._struct, version, 1)
    obj.with_header(correlation_id=4242, client_id="minikafka-test")
    # obj already carries its version; kafka-python's encode(version=...) would set request_api_version on the
    # header, which a ResponseHeader lacks (AttributeError), so responses are encoded without version=
    data = bytes(obj.encode(header=True, framed=True))
    assert struct.unpack(">i", data[:4])[0] == len(data) - 4
    back = cls.decode(data, version=version, header=True, framed=True)
    assert back == obj
    assert back.header.correlation_id == 4242
    if cls.is_request():
        assert (back.header.request_api_key, back.header.request_api_version) == (cls.API_KEY, version)


def test_version_specific_fields():
    """Fields that only exist in some versions are (not) on the wire accordingly."""
    req = m.ShareFetchRequest
    v1 = build(req, req._struct, 1)
    v2 = build(req, req._struct, 2)
    # v2 adds ShareAcquireMode (int8) and IsRenewAck (bool): exactly 2 bytes more
    assert len(v2.encode(version=2)) == len(v1.encode(version=1)) + 2
    assert req.decode(v2.encode(version=2), version=2).is_renew_ack is True
    ack = m.ShareAcknowledgeRequest
    assert len(build(ack, ack._struct, 2).encode(version=2)) == len(build(ack, ack._struct, 1).encode(version=1)) + 1
    # WriteShareGroupState v1 adds the per-partition DeliveryCompleteCount (int32), one partition per topic entry
    w = m.WriteShareGroupStateRequest
    w0 = w(version=0, group_id="g", topics=[w.WriteStateData(version=0, topic_id=TOPIC_ORDERS, partitions=[
        w.WriteStateData.PartitionData(version=0, partition=0, state_epoch=1, leader_epoch=2, start_offset=10,
                                       state_batches=[])])])
    w1 = w(version=1, group_id="g", topics=[w.WriteStateData(version=1, topic_id=TOPIC_ORDERS, partitions=[
        w.WriteStateData.PartitionData(version=1, partition=0, state_epoch=1, leader_epoch=2, start_offset=10,
                                       delivery_complete_count=5, state_batches=[])])])
    assert len(w1.encode(version=1)) == len(w0.encode(version=0)) + 4
    assert w.decode(w1.encode(version=1), version=1).topics[0].partitions[0].delivery_complete_count == 5


def test_share_group_heartbeat_response_nullable_assignment():
    """Assignment is a nullable struct: -1 (0xff) for null, 1 then the struct when present."""
    resp = m.ShareGroupHeartbeatResponse
    tp = resp.Assignment.TopicPartitions
    present = resp(version=1, throttle_time_ms=0, error_code=0, error_message=None, member_id="m-1",
                   member_epoch=3, heartbeat_interval_ms=5000,
                   assignment=resp.Assignment(version=1, topic_partitions=[
                       tp(version=1, topic_id=TOPIC_ORDERS, partitions=[0, 1, 2])]))
    absent = resp(version=1, throttle_time_ms=0, error_code=0, error_message=None, member_id="m-1",
                  member_epoch=3, heartbeat_interval_ms=5000, assignment=None)
    d_present, d_absent = roundtrip_message(present, resp, 1), roundtrip_message(absent, resp, 1)
    assert d_absent.endswith(b"\xff\x00")               # null marker, then the top-level tagged-field buffer
    assignment = b"\x01" + b"\x02" + TOPIC_ORDERS.bytes + b"\x04" + struct.pack(">3i", 0, 1, 2) + b"\x00" + b"\x00"
    assert d_present == d_absent[:-2] + assignment + b"\x00"


def test_streams_heartbeat_request_common_structs_and_uint16():
    req = m.StreamsGroupHeartbeatRequest
    obj = build(req, req._struct, 0)
    data = roundtrip_message(obj, req, 0)
    back = req.decode(data, version=0)
    assert back.user_endpoint.port == 9092 and back.user_endpoint.host == "broker-0.kafka.internal"
    obj.user_endpoint.port = 65535                      # uint16: the full unsigned range
    assert req.decode(obj.encode(version=0), version=0).user_endpoint.port == 65535
    assert back.topology.subtopologies[1].state_changelog_topics[0].topic_configs[1].key == "region"


def test_common_struct_used_by_several_fields_shares_wire_format():
    """Each field of a commonStructs type gets its own generated class (the class attribute names only one of
    them), so build with the field's own class if you compare objects; the bytes do not depend on it."""
    req = m.StreamsGroupHeartbeatRequest
    standby_cls = req._struct.fields["standby_tasks"].data_class
    common_cls = req.TaskIds
    base = dict(group_id="app", member_id="m", member_epoch=1, endpoint_information_epoch=0)
    a = req(version=0, standby_tasks=[standby_cls(version=0, subtopology_id="0", partitions=[1])], **base)
    b = req(version=0, standby_tasks=[common_cls(version=0, subtopology_id="0", partitions=[1])], **base)
    assert a.encode(version=0) == b.encode(version=0)
    assert req.decode(b.encode(version=0), version=0).to_dict() == b.to_dict()


# ------------------------------------------------------------------------------ ShareFetchRequest v1 by hand

def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _cstr(s: str | None) -> bytes:                     # COMPACT_(NULLABLE_)STRING
    if s is None:
        return b"\x00"
    raw = s.encode()
    return _uvarint(len(raw) + 1) + raw


def _carr(items: list[bytes]) -> bytes:                # COMPACT_ARRAY of already-encoded elements
    return _uvarint(len(items) + 1) + b"".join(items)


TAGS0 = b"\x00"                                         # empty tagged-field buffer


def test_share_fetch_request_v1_wire_layout_by_hand():
    req = m.ShareFetchRequest
    topic_cls = req.FetchTopic
    part_cls = topic_cls.FetchPartition
    batch_cls = part_cls.AcknowledgementBatch
    forgotten_cls = req.ForgottenTopic
    obj = req(version=1, group_id="orders-share-group", member_id="Zq3VJ0bUQ4mYkq0Xb9z1pA", share_session_epoch=3,
              max_wait_ms=500, min_bytes=1, max_bytes=52_428_800, max_records=500, batch_size=500,
              topics=[topic_cls(version=1, topic_id=TOPIC_ORDERS, partitions=[
                  part_cls(version=1, partition_index=0, acknowledgement_batches=[
                      batch_cls(version=1, first_offset=100, last_offset=102, acknowledge_types=[1, 0, 2])]),
                  part_cls(version=1, partition_index=7, acknowledgement_batches=[])])],
              forgotten_topics_data=[forgotten_cls(version=1, topic_id=TOPIC_PAYMENTS, partitions=[4, 5])])

    batch = struct.pack(">qq", 100, 102) + _carr([b"\x01", b"\x00", b"\x02"]) + TAGS0
    part0 = struct.pack(">i", 0) + _carr([batch]) + TAGS0          # PartitionMaxBytes is v0 only: absent
    part7 = struct.pack(">i", 7) + _carr([]) + TAGS0
    topic = TOPIC_ORDERS.bytes + _carr([part0, part7]) + TAGS0
    forgotten = TOPIC_PAYMENTS.bytes + _carr([struct.pack(">i", 4), struct.pack(">i", 5)]) + TAGS0
    body = (_cstr("orders-share-group") + _cstr("Zq3VJ0bUQ4mYkq0Xb9z1pA")
            + struct.pack(">iiiiii", 3, 500, 1, 52_428_800, 500, 500)   # epoch, wait, min, max, records, batch
            + _carr([topic]) + _carr([forgotten]) + TAGS0)
    assert bytes(obj.encode(version=1)) == body
    assert req.decode(body, version=1) == obj

    # request header v2 (flexible): api key, version, correlation id, INT16-length client id, tagged fields
    obj.with_header(correlation_id=99, client_id="share-consumer")
    header = struct.pack(">hhih", 78, 1, 99, len("share-consumer")) + b"share-consumer" + TAGS0
    framed = bytes(obj.encode(version=1, header=True, framed=True))
    assert framed == struct.pack(">i", len(header) + len(body)) + header + body

    # null group id / member id (both nullable in every version) are the single byte 0x00
    obj.group_id = None
    obj.member_id = None
    assert bytes(obj.encode(version=1)) == b"\x00\x00" + body[len(_cstr("orders-share-group")
                                                                + _cstr("Zq3VJ0bUQ4mYkq0Xb9z1pA")):]


# ------------------------------------------------------------------------------ coordinator records

def test_record_types_and_versions():
    for name, record_type in RECORDS.items():
        key, value = getattr(m, name + "Key"), getattr(m, name + "Value")
        assert key.json["apiKey"] == value.json["apiKey"] == record_type
        assert key.type == value.type == "data"
        assert key.valid_versions == value.valid_versions == (0, 0)
        assert not key.flexible_version_q(0)             # keys: "flexibleVersions": "none"
        assert value.flexible_version_q(0)


@pytest.mark.parametrize("cls", RECORD_CASES)
@pytest.mark.parametrize("nulls", [False, True], ids=["values", "nulls"])
def test_record_roundtrip(cls, nulls):
    obj = build(cls, cls._struct, 0, 0, nulls)
    data = obj.encode(version=0)                        # int16 version prefix + fields
    assert data[:2] == b"\x00\x00"
    assert data[2:] == obj.encode(version=0, header=False)
    back = cls.decode(data)
    assert back == obj
    assert back.to_dict() == obj.to_dict()
    assert back.encode(version=0) == data
    assert cls.decode(data[2:], version=0, header=False) == obj


def test_share_snapshot_key_layout():
    """Keys are non-flexible: INT16-length string, uuid, int32; the coordinator prefixes the record type."""
    key = m.ShareSnapshotKey(version=0, group_id="g1", topic_id=TOPIC_ORDERS, partition=4)
    body = key.encode(version=0, header=False)
    assert body == b"\x00\x02g1" + TOPIC_ORDERS.bytes + struct.pack(">i", 4)
    record_key = struct.pack(">h", RECORDS["ShareSnapshot"]) + body
    assert m.ShareSnapshotKey.decode(record_key[2:], version=0, header=False) == key


def test_tagged_fields_in_record_values():
    """Tagged fields are written only when they differ from their default, with tag, size and value."""
    v = m.ShareSnapshotValue
    base = dict(snapshot_epoch=1, state_epoch=2, leader_epoch=3, start_offset=100, create_timestamp=10,
                write_timestamp=20, state_batches=[])
    default = v(version=0, **base)                      # DeliveryCompleteCount default -1: not on the wire
    tagged = v(version=0, delivery_complete_count=42, **base)
    d_default, d_tagged = default.encode(version=0), tagged.encode(version=0)
    assert d_default.endswith(b"\x01\x00")               # empty StateBatches, empty tagged buffer
    assert d_tagged == d_default[:-1] + b"\x01" + b"\x00" + b"\x04" + struct.pack(">i", 42)
    assert v.decode(d_default).delivery_complete_count == -1
    assert v.decode(d_tagged).delivery_complete_count == 42

    meta = m.StreamsGroupMetadataValue
    cfg = meta.LastAssignmentConfig
    obj = meta(version=0, epoch=4, metadata_hash=77, validated_topology_epoch=2,
               last_assignment_configs=[cfg(version=0, key="num.standby.replicas", value="1")])
    data = obj.encode(version=0)
    back = meta.decode(data)
    assert back == obj and back.last_assignment_configs[0].value == "1"
    plain = meta(version=0, epoch=4, metadata_hash=77).encode(version=0)
    assert plain == struct.pack(">hiq", 0, 4, 77) + b"\x00"
    # JSON `"default": null` (not the string "null") means an empty list, in Kafka's generated class too
    assert meta.decode(plain).validated_topology_epoch == -1 and meta.decode(plain).last_assignment_configs == []

    assign = m.StreamsGroupCurrentMemberAssignmentValue
    task = assign.TaskIds                                # AssignmentEpochs: tagged (tag 0) nullable []int32
    with_epochs = task(version=0, subtopology_id="0", partitions=[0, 1], assignment_epochs=[3, 3])
    obj = assign(version=0, member_epoch=5, previous_member_epoch=4, state=0, active_tasks=[with_epochs],
                 standby_tasks=[], warmup_tasks=[], active_tasks_pending_revocation=[],
                 standby_tasks_pending_revocation=[], warmup_tasks_pending_revocation=[])
    assert assign.decode(obj.encode(version=0)).active_tasks[0].assignment_epochs == [3, 3]
