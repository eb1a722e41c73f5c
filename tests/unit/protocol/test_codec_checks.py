"""protocol/codec.py: the request decoder agrees with kafka-python on every valid request, and refuses
what Apache Kafka's generated readers refuse (checked against Kafka 4.3.1, see
tests/integration/robustness/test_malformed_requests.py for the same frames over the wire)."""
from __future__ import annotations

import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.metadata import ApiVersionsRequest, MetadataRequest

from minikafka.broker.handlers import load_all
from minikafka.broker.network.registry import CONTROLLER_HANDLERS, HANDLERS
from minikafka.protocol.codec import DecodeError, decode_body

from tests.support.protocol_strategies import encode_body, request_objects

load_all()  # fills the dispatch table

SOAK = int(os.environ.get("MINIKAFKA_FUZZ_EXAMPLES", "0") or 0)
VERSIONS = [(s, v) for s in sorted([*HANDLERS.values(), *CONTROLLER_HANDLERS.values()], key=lambda s: s.api_key)
            for v in range(s.min_version, s.max_version + 1)]
CHECK_SETTINGS = settings(max_examples=max(300, SOAK // 4), deadline=None, derandomize=not SOAK, database=None,
                          suppress_health_check=list(HealthCheck))


@st.composite
def encoded_requests(draw, bad_nulls: bool):
    spec, version = draw(st.sampled_from(VERSIONS))
    request = draw(request_objects(spec.request_class, version, bad_nulls))
    return spec.request_class, version, encode_body(request, version)


def _nan_free(value):
    """`value` with every NaN float replaced by a marker (float64 fields may carry NaN, which equals nothing)."""
    if isinstance(value, float) and value != value:
        return "NaN"
    if isinstance(value, dict):
        return {k: _nan_free(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_nan_free(v) for v in value]
    return value


@CHECK_SETTINGS
@given(case=encoded_requests(bad_nulls=False))
def test_valid_requests_decode_as_kafka_python_does(case):
    request_class, version, body = case
    ours = decode_body(request_class, memoryview(body), version)
    theirs = request_class.decode(body, version=version)
    assert ours == theirs or _nan_free(ours.to_dict()) == _nan_free(theirs.to_dict())
    assert _nan_free(ours.to_dict()) == _nan_free(theirs.to_dict())
    assert ours.tags == theirs.tags


@CHECK_SETTINGS
@given(case=encoded_requests(bad_nulls=True))
def test_nulls_where_the_schema_forbids_them_are_decode_errors(case):
    """Either the request had no forbidden null (then it decodes as kafka-python decodes it) or it is
    refused with Kafka's message."""
    request_class, version, body = case
    try:
        ours = decode_body(request_class, memoryview(body), version)
    except DecodeError as exc:
        assert "non-nullable field" in str(exc) and "was serialized as null" in str(exc), exc
        return
    assert _nan_free(ours.to_dict()) == _nan_free(request_class.decode(body, version=version).to_dict())


def _body(request_class, version: int, raw: bytes):
    return decode_body(request_class, memoryview(raw), version)


# (request class, version, body bytes, expected error substring or None when it decodes)
KAFKA_PARSE_RULES = [
    (DescribeGroupsRequest, 0, struct.pack(">i", -1), "non-nullable field Groups was serialized as null"),
    (DescribeGroupsRequest, 0, struct.pack(">i", -5), "non-nullable field Groups was serialized as null"),
    (DescribeGroupsRequest, 0, struct.pack(">i", 1000), "Tried to allocate a collection of size 1000"),
    (DescribeGroupsRequest, 0, struct.pack(">ih", 1, -1), "non-nullable field Groups element"),
    (DescribeGroupsRequest, 0, struct.pack(">ih", 1, -5), "non-nullable field Groups element"),
    (DescribeGroupsRequest, 0, struct.pack(">ih", 1, 9) + b"abc", "Error reading string of 9 byte(s)"),
    (DescribeGroupsRequest, 5, b"\x02\x81\x80\x02" + b"a" * 0x8000 + b"\x00\x00", "had invalid length 32768"),
    (ApiVersionsRequest, 3, b"\x00\x02b\x00", "non-nullable field ClientSoftwareName"),
    (MetadataRequest, 0, struct.pack(">i", -1), "non-nullable field Topics"),
    (MetadataRequest, 9, b"\x80\x80\x80\x80\x80\x01\x00\x00\x00\x00", "illegal varint"),
    (MetadataRequest, 9, b"\x09\x00\x00", "Tried to allocate a collection of size 8, but there are only 2"),
]


@pytest.mark.parametrize("request_class,version,raw,error", KAFKA_PARSE_RULES,
                         ids=[f"{c.__name__}-v{v}-{i}" for i, (c, v, _, _) in enumerate(KAFKA_PARSE_RULES)])
def test_kafka_parse_errors(request_class, version, raw, error):
    with pytest.raises(DecodeError, match=error.replace("(", r"\(").replace(")", r"\)")):
        _body(request_class, version, raw)


def test_what_kafka_accepts():
    # malformed UTF-8 is replaced (Java's new String(bytes, UTF_8)), not an error
    req = _body(DescribeGroupsRequest, 0, struct.pack(">ih", 1, 2) + b"\xff\xfe")
    assert req.groups == ["\ufffd\ufffd"]
    # any negative length of a nullable array is null (kafka-python alone would say [])
    assert _body(MetadataRequest, 1, struct.pack(">i", -5)).topics is None
    # a compact length is a Java int: varint 0xffffffff is -1, minus 1 is null
    assert _body(MetadataRequest, 9, b"\xff\xff\xff\xff\x0f\x00\x00\x00\x00").topics is None
    # trailing bytes after the body are ignored (but refused with exact=True)
    assert _body(ApiVersionsRequest, 0, b"garbage") is not None
    with pytest.raises(DecodeError, match="trailing"):
        decode_body(ApiVersionsRequest, memoryview(b"garbage"), 0, exact=True)


def test_tagged_fields_known_and_unknown():
    """A flexible request with an unknown tag keeps its bytes; a tag running past the frame is an error."""
    base = bytes(ApiVersionsRequest(client_software_name="a", client_software_version="1").encode(version=3))
    assert base.endswith(b"\x00")
    with_unknown = base[:-1] + b"\x01\x63\x02xy"
    req = _body(ApiVersionsRequest, 3, with_unknown)
    assert req.unknown_tags == {"_99": b"xy"}
    with pytest.raises(DecodeError, match="tagged field"):
        _body(ApiVersionsRequest, 3, base[:-1] + b"\x01\x63\x09xy")
