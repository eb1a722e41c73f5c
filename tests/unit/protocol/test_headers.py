"""protocol/headers.py: request header peek, body offset (incl. tagged fields), response framing."""
from __future__ import annotations

import struct

import pytest
from kafka.protocol.consumer import FetchRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceRequest

from minikafka.protocol.headers import HeaderError, RequestHeader, body_offset, encode_response_frame, peek_header
from tests.support.corrupt_batches import uvarint


def _encoded(req, version: int, correlation_id: int = 77, client_id: str | None = "client-1") -> bytes:
    """Header + body (no size prefix), exactly as kafka-python sends it."""
    req.with_header(correlation_id=correlation_id, client_id=client_id)
    return bytes(req.encode(version=version, header=True))


def _metadata(topics=("a", "bb")) -> MetadataRequest:
    return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
                           allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                           include_topic_authorized_operations=False)


_uvarint = uvarint


# ------------------------------------------------------------------------------ peek_header

@pytest.mark.parametrize("req,version", [
    (ApiVersionsRequest(client_software_name="x", client_software_version="1"), 3),
    (ApiVersionsRequest(), 0),
    (_metadata(), 9),
    (_metadata(), 1),
    (ProduceRequest(acks=-1, timeout_ms=100, transactional_id=None, topic_data=[]), 9),
    (ProduceRequest(acks=1, timeout_ms=100, transactional_id=None, topic_data=[]), 3),
])
@pytest.mark.parametrize("client_id", ["client-1", "", "ünïcødé-id", None])
def test_peek_header_of_kafka_python_requests(req, version, client_id):
    frame = _encoded(req, version, correlation_id=123456, client_id=client_id)
    assert peek_header(frame) == RequestHeader(req.API_KEY, version, 123456, client_id)
    assert peek_header(memoryview(frame)) == RequestHeader(req.API_KEY, version, 123456, client_id)


def test_peek_header_reads_unknown_apis_and_versions():
    frame = struct.pack(">hhih", 9999, 99, -5, 2) + b"id" + b"\xff" * 10
    assert peek_header(frame) == RequestHeader(9999, 99, -5, "id")


def test_peek_header_null_client_id():
    assert peek_header(struct.pack(">hhih", 18, 0, 1, -1)) == RequestHeader(18, 0, 1, None)


def test_peek_header_invalid_utf8_client_id_is_replaced_not_fatal():
    header = peek_header(struct.pack(">hhih", 18, 0, 1, 2) + b"\xff\xfe")
    assert header.client_id == "\ufffd\ufffd"


@pytest.mark.parametrize("frame", [
    b"",
    b"\x00\x12",
    struct.pack(">hhi", 18, 0, 1),                    # no client_id length
    struct.pack(">hhih", 18, 0, 1, 1),                # client_id runs past the frame
    struct.pack(">hhih", 18, 0, 1, 100) + b"abc",
    struct.pack(">hhih", 18, 0, 1, -2),               # negative length other than -1
    struct.pack(">hhih", 18, 0, 1, -32768),
])
def test_peek_header_malformed_raises_header_error(frame):
    with pytest.raises(HeaderError):
        peek_header(frame)


# ------------------------------------------------------------------------------ body_offset

@pytest.mark.parametrize("req,version,req_class", [
    (_metadata(), 9, MetadataRequest), (_metadata(), 4, MetadataRequest),
    (ApiVersionsRequest(client_software_name="n", client_software_version="v"), 3, ApiVersionsRequest),
    (FetchRequest(replica_id=-1, max_wait_ms=5, min_bytes=1, max_bytes=100, isolation_level=0, session_id=0,
                  session_epoch=-1, topics=[], forgotten_topics_data=[], rack_id=""), 12, FetchRequest),
])
@pytest.mark.parametrize("client_id", ["cid", None, "x" * 300])
def test_body_offset_then_decode_round_trips(req, version, req_class, client_id):
    frame = _encoded(req, version, client_id=client_id)
    flexible = req_class.flexible_version_q(version)
    start = body_offset(frame, flexible)
    assert start == 10 + len((client_id or "").encode()) + (1 if flexible else 0)
    decoded = req_class.decode(memoryview(frame)[start:], version=version)
    expected = req_class.decode(bytes(req.encode(version=version)), version=version)
    assert decoded.to_dict() == expected.to_dict()


def test_body_offset_skips_tagged_fields():
    base = struct.pack(">hhih", 3, 9, 1, 3) + b"cid"
    tags = (_uvarint(3)
            + _uvarint(0) + _uvarint(4) + b"abcd"
            + _uvarint(7) + _uvarint(0)
            + _uvarint(300) + _uvarint(200) + b"\x01" * 200)  # multi-byte tag and size varints
    body = b"BODY"
    frame = base + tags + body
    assert body_offset(frame, flexible=True) == len(base) + len(tags)
    assert body_offset(frame, flexible=False) == len(base)
    assert body_offset(memoryview(frame), flexible=True) == len(base) + len(tags)


def test_body_offset_tagged_field_ending_exactly_at_frame_end():
    frame = struct.pack(">hhih", 3, 9, 1, -1) + b"\x01\x00\x02zz"
    assert body_offset(frame, flexible=True) == len(frame)


@pytest.mark.parametrize("tail", [
    b"",                                  # tagged-field count missing
    b"\x80",                              # count varint truncated
    b"\x01",                              # a field announced but absent
    b"\x01\x00",                          # size missing
    b"\x01\x00\x05abc",                   # field data runs past the frame
    b"\x02\x00\x00\x01\x09",              # second field runs past the frame
    b"\xff\xff\xff\xff\xff\x01",          # varint longer than 5 bytes
    b"\x01\x00\xff\xff\xff\xff\x0f",      # size 2**32-1
])
def test_body_offset_malformed_tagged_fields_raise_header_error(tail):
    frame = struct.pack(">hhih", 3, 9, 1, 2) + b"id" + tail
    with pytest.raises(HeaderError):
        body_offset(frame, flexible=True)


# ----------------------------------------------------------------------- encode_response_frame

def test_encode_response_frame_header_v0():
    frame = encode_response_frame(0x01020304, b"abc", flexible_header=False)
    assert frame == struct.pack(">ii", 7, 0x01020304) + b"abc"


def test_encode_response_frame_header_v1_has_empty_tag_section():
    frame = encode_response_frame(-1, b"", flexible_header=True)
    assert frame == struct.pack(">ii", 5, -1) + b"\x00"


def test_encoded_flexible_response_decodes_with_kafka_python():
    resp = MetadataResponse(throttle_time_ms=0, brokers=[MetadataResponse.MetadataResponseBroker(
        node_id=1, host="h", port=9092, rack=None)], cluster_id="c", controller_id=1, topics=[])
    body = bytes(resp.encode(version=9))
    frame = encode_response_frame(42, body, flexible_header=True)
    (size,) = struct.unpack_from(">i", frame)
    assert size == len(frame) - 4
    decoded = MetadataResponse.decode(frame[4:], version=9, header=True)
    assert decoded.header.correlation_id == 42
    assert decoded.cluster_id == "c" and decoded.brokers[0].port == 9092


def test_api_versions_response_uses_header_v0_even_when_flexible():
    resp = ApiVersionsResponse(error_code=0, api_keys=[ApiVersionsResponse.ApiVersion(
        api_key=18, min_version=0, max_version=4)], throttle_time_ms=0)
    frame = encode_response_frame(9, bytes(resp.encode(version=3)), flexible_header=False)
    decoded = ApiVersionsResponse.decode(frame[4:], version=3, header=True)
    assert decoded.header.correlation_id == 9
    assert [(k.api_key, k.max_version) for k in decoded.api_keys] == [(18, 4)]
