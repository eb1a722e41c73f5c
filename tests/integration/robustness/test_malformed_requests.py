"""Requests that decode structurally but break a schema rule Kafka checks while parsing: Apache Kafka's
generated readers throw ("non-nullable field X was serialized as null", "Tried to allocate a
collection of size N ...", "illegal varint", "string field X had invalid length") and its network layer
closes the connection. What Kafka reads leniently is answered: malformed UTF-8 (replaced), any negative
length of a nullable array (null), trailing bytes after the body. Runs against the oracle too.
"""
from __future__ import annotations

import socket
import struct
import uuid

import pytest
from kafka.protocol.admin import DescribeGroupsResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest, MetadataResponse

from minikafka.protocol.codec import decode_body

from tests.support.helpers import RawClient, _addr

INVALID_REQUEST = 42


def frame(api_key: int, version: int, body: bytes, flexible: bool, correlation_id: int = 7) -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation_id, 5) + b"probe" + (b"\x00" if flexible else b"")
    return struct.pack(">i", len(header) + len(body)) + header + body


def exchange(bootstrap: str, data: bytes, timeout: float = 10.0) -> bytes | None:
    """The response frame (without size), or None when the broker closes the connection."""
    with socket.create_connection(_addr(bootstrap), timeout=timeout) as sock:
        sock.sendall(data)
        buf = b""
        while len(buf) < 4 or len(buf) < 4 + struct.unpack(">i", buf[:4])[0]:
            try:
                chunk = sock.recv(65536)
            except ConnectionResetError:
                return None
            if not chunk:
                assert not buf, f"closed mid-response after {len(buf)} bytes"
                return None
            buf += chunk
        return buf[4:]


CLOSED = [
    ("groups null", frame(15, 0, struct.pack(">i", -1), False)),
    ("groups length -5", frame(15, 0, struct.pack(">i", -5), False)),
    ("groups count past the frame", frame(15, 0, struct.pack(">i", 1000), False)),
    ("null group id element", frame(15, 0, struct.pack(">ih", 1, -1), False)),
    ("group id length -5", frame(15, 0, struct.pack(">ih", 1, -5), False)),
    ("compact string longer than 0x7fff", frame(15, 5, b"\x02\x81\x80\x02" + b"a" * 0x8000 + b"\x00\x00", True)),
    ("null client software name", frame(18, 3, b"\x00\x02b\x00", True)),
    ("metadata v0 topics null", frame(3, 0, struct.pack(">i", -1), False)),
    ("six-byte varint", frame(3, 9, b"\x80\x80\x80\x80\x80\x01\x00\x00\x00\x00", True)),
]


@pytest.mark.parametrize("name,data", CLOSED, ids=[c[0] for c in CLOSED])
def test_parse_errors_close_the_connection(shared_broker, name, data):
    assert exchange(shared_broker.bootstrap, data) is None, name


def test_lenient_reads_are_answered(shared_broker):
    bootstrap = shared_broker.bootstrap
    # malformed UTF-8 in a group id: replaced, as Java's String(bytes, UTF_8) does
    resp = exchange(bootstrap, frame(15, 0, struct.pack(">ih", 1, 2) + b"\xff\xfe", False))
    assert resp is not None and struct.unpack_from(">i", resp)[0] == 7
    groups = DescribeGroupsResponse.decode(resp[4:], version=0).groups
    assert [g.group_id for g in groups] == ["\ufffd\ufffd"]
    # trailing bytes after the body are ignored
    for version, body in ((0, b"garbage"), (3, b"\x02a\x021\x00junk")):
        resp = exchange(bootstrap, frame(18, version, body, version >= 3))
        assert resp is not None
        assert ApiVersionsResponse.decode(resp[4:], version=version).error_code == 0
    # a nullable array with length -5 is null (all topics), as is a compact length of 0xffffffff
    for version, body in ((1, struct.pack(">i", -5)), (9, b"\xff\xff\xff\xff\x0f\x00\x00\x00\x00")):
        resp = exchange(bootstrap, frame(3, version, body, version >= 9))
        assert resp is not None
        MetadataResponse.decode(resp[4 + (version >= 9):], version=version)


@pytest.mark.parametrize("name,version", [("a b", "1.0"), ("", "1"), ("ok-name", "-bad"), ("\u00e9", "1")])
def test_api_versions_invalid_client_software(shared_broker, name, version):
    """Kafka ApiVersionsRequest.isValid (v3+): INVALID_REQUEST and an empty api_keys list."""
    with RawClient(shared_broker.bootstrap) as client:
        corr = client.send(ApiVersionsRequest(client_software_name=name, client_software_version=version), 3)
        raw = client.recv_frame()
    assert struct.unpack_from(">i", raw)[0] == corr
    # (kafka-python's ApiVersionsResponse.decode re-reads error answers as v0, so decode it strictly here)
    resp = decode_body(ApiVersionsResponse, memoryview(raw)[4:], 3, exact=True)
    assert resp.error_code == INVALID_REQUEST
    assert not resp.api_keys


@pytest.mark.parametrize("version", [10, 11])
def test_metadata_topic_ids_before_v12(shared_broker, version):
    """Before v12 a null topic name or a topic id is an INVALID_REQUEST for the whole request (a null
    name comes back as "")."""
    T = MetadataRequest.MetadataRequestTopic
    topic_id = uuid.uuid4()
    with RawClient(shared_broker.bootstrap) as client:
        req = MetadataRequest(topics=[T(name=None, topic_id=None), T(name="mr-x", topic_id=topic_id)],
                              allow_auto_topic_creation=False, include_topic_authorized_operations=False)
        resp = client.request(req, version)
    assert [(t.error_code, t.name, t.topic_id) for t in resp.topics] == [
        (INVALID_REQUEST, "", None), (INVALID_REQUEST, "mr-x", topic_id)]
    assert resp.brokers == []
