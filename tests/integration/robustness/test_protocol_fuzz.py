"""Protocol fuzzer: schema-generated, then byte-mutated requests against a real broker process.

For every API key the broker registers (broker/network/registry.py HANDLERS, which ApiVersions advertises),
hypothesis draws requests at every served version from kafka-python's schemas
(tests/support/protocol_strategies.py): random values with ints at their edges, nulls where the schema
allows them and, in some examples, where it does not, empty and longer arrays, tagged fields, random
uuids, good and garbage record batches; half of the examples are then mutated byte by byte (flip,
insert, delete, length/varint bombs, truncation), a fifth of those in the request header too. Each
frame goes over a real socket, followed by a canary ApiVersions request on the same connection.

Properties:
- every reply is a well-formed response frame for that API/version with the request's correlation
  id (decoded strictly, with no trailing bytes), or the connection is closed; only Produce with
  acks=0 gets no reply (the canary's answer comes first);
- the broker stays up: the canary answers (on a fresh connection after a close or a slow request);
- the broker log (the whole file) has no "Traceback" and no "internal error" line.

Budget: CI runs CI_EXAMPLES examples per API key with a fixed seed (derandomize), well under 90 s.
`MINIKAFKA_FUZZ_EXAMPLES=N` (set by `make soak`) spreads N examples over the API keys with a random
seed; a failure prints the hypothesis seed / example to reproduce it.
"""
from __future__ import annotations

import os
import socket
import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import JoinGroupRequest, SyncGroupRequest
from kafka.protocol.metadata import ApiVersionsResponse, FindCoordinatorRequest
from kafka.protocol.producer import AddPartitionsToTxnRequest, InitProducerIdRequest

from minikafka.broker.handlers import load_all
from minikafka.broker.network.registry import HANDLERS
from minikafka.protocol.codec import DecodeError, decode_body
from minikafka.protocol.headers import HeaderError, body_offset, peek_header

from tests.conftest import BrokerProcess
from tests.support.helpers import RawClient
from tests.support.protocol_strategies import (
    KNOWN_GROUPS, KNOWN_MEMBER_IDS, KNOWN_PRODUCER_IDS, KNOWN_TOPICS, KNOWN_TXN_IDS, apply_mutations, encode_body,
    mutations, request_objects,
)

load_all()  # fills the dispatch table

pytestmark = pytest.mark.minikafka_only

SOAK_EXAMPLES = int(os.environ.get("MINIKAFKA_FUZZ_EXAMPLES", "0") or 0)
CI_EXAMPLES = 50
API_KEYS = sorted(HANDLERS)
EXAMPLES_PER_API = max(CI_EXAMPLES, SOAK_EXAMPLES // len(API_KEYS)) if SOAK_EXAMPLES else CI_EXAMPLES
REPLY_TIMEOUT = 3.0   # a request may legitimately wait (long poll, rebalance): then check liveness
CANARY_TIMEOUT = 10.0
CANARY_CORR_XOR = 0x3C3C3C3C

FUZZ_SETTINGS = settings(
    max_examples=EXAMPLES_PER_API,
    deadline=None,
    derandomize=not SOAK_EXAMPLES,
    database=None,
    print_blob=True,
    suppress_health_check=list(HealthCheck),
)


class FuzzConnection:
    """One socket reused across examples; reopened after the broker closes it."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.sock: socket.socket | None = None
        self.stats = {"answered": 0, "closed": 0, "closed_decodable": 0, "no_reply": 0, "slow": 0}

    def _connect(self) -> socket.socket:
        host, _, port = self.bootstrap.rpartition(":")
        sock = socket.create_connection((host, int(port)), timeout=CANARY_TIMEOUT)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock

    def reset(self) -> None:
        if self.sock is not None:
            self.sock.close()
        self.sock = None

    def socket(self) -> socket.socket:
        if self.sock is None:
            self.sock = self._connect()
        return self.sock

    def recv_frame(self, timeout: float) -> bytes | None:
        """One frame (without size), None on EOF/reset; socket.timeout propagates."""
        sock = self.socket()
        sock.settimeout(timeout)
        buf = bytearray()
        need = 4
        size = None
        while len(buf) < need:
            try:
                chunk = sock.recv(need - len(buf))
            except (ConnectionResetError, BrokenPipeError):
                return None
            if not chunk:
                assert not buf, f"connection closed mid-frame after {len(buf)} bytes"
                return None
            buf += chunk
            if size is None and len(buf) == 4:
                (size,) = struct.unpack(">i", buf)
                assert 0 <= size <= 1 << 30, f"bad response frame size {size}"
                need = 4 + size
        return bytes(buf[4:])


def canary_frame(correlation_id: int) -> bytes:
    body = struct.pack(">hhih", 18, 0, correlation_id, 6) + b"canary"
    return struct.pack(">i", len(body)) + body


def check_canary_reply(frame: bytes, correlation_id: int) -> None:
    (corr,) = struct.unpack_from(">i", frame, 0)
    assert corr == correlation_id, f"canary got correlation id {corr}, expected {correlation_id}"
    resp = decode_body(ApiVersionsResponse, memoryview(frame)[4:], 0, exact=True)
    assert resp.error_code == 0 and resp.api_keys


def assert_alive(bootstrap: str) -> None:
    """A fresh connection's ApiVersions is answered."""
    conn = FuzzConnection(bootstrap)
    try:
        conn.socket().sendall(canary_frame(424242))
        frame = conn.recv_frame(CANARY_TIMEOUT)
        assert frame is not None, "broker closed a fresh connection's ApiVersions"
        check_canary_reply(frame, 424242)
    finally:
        conn.reset()


def expected_reply(frame: bytes):
    """What the request in `frame` calls for: (response class, version, flexible header) for an
    answer; "none" for Produce acks=0; "close" for what cannot be answered. A decodable request may
    still be refused with a close by its handler (e.g. SASL), so "close" is always acceptable."""
    try:
        header = peek_header(frame)
    except HeaderError:
        return "close", None
    spec = HANDLERS.get(header.api_key)
    if spec is None:
        return "close", header
    if not spec.min_version <= header.api_version <= spec.max_version:
        if header.api_key == 18:
            return (ApiVersionsResponse, 0, False), header
        return "close", header
    flexible = spec.flexible(header.api_version)
    try:
        start = body_offset(frame, flexible)
        request = decode_body(spec.request_class, memoryview(frame)[start:], header.api_version)
    except (HeaderError, DecodeError, struct.error, IndexError):
        return "close", header
    if header.api_key == 0 and request.acks == 0:
        return "none", header
    return (spec.response_class, header.api_version, flexible and header.api_key != 18), header


def check_response(frame: bytes, expected, correlation_id: int) -> None:
    response_class, version, flexible_header = expected
    (corr,) = struct.unpack_from(">i", frame, 0)
    assert corr == correlation_id, f"response correlation id {corr}, expected {correlation_id}"
    pos = 4
    if flexible_header:
        assert frame[pos] == 0, f"response header tagged fields {frame[pos:pos + 8]!r}"
        pos += 1
    try:
        decode_body(response_class, memoryview(frame)[pos:], version, exact=True)
    except DecodeError as exc:
        raise AssertionError(f"malformed {response_class.__name__} v{version}: {exc}; frame {frame[:80]!r}")


def request_header(api_key: int, version: int, correlation_id: int, flexible: bool, client_id: bytes | None,
                   header_tags: bytes) -> bytes:
    if client_id is None:
        out = struct.pack(">hhih", api_key, version, correlation_id, -1)
    else:
        out = struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id
    if flexible:
        out += header_tags
    return out


def run_case(conn: FuzzConnection, frame: bytes) -> None:
    expected, header = expected_reply(frame)
    fuzz_corr = header.correlation_id if header is not None else 0
    canary_corr = fuzz_corr ^ CANARY_CORR_XOR
    sock = conn.socket()
    try:
        sock.sendall(struct.pack(">i", len(frame)) + frame + canary_frame(canary_corr))
    except (BrokenPipeError, ConnectionResetError):
        conn.reset()
        conn.stats["closed"] += 1
        return
    try:
        reply = conn.recv_frame(REPLY_TIMEOUT)
        if reply is None:
            conn.reset()
            conn.stats["closed" if expected == "close" else "closed_decodable"] += 1
            return
        (corr,) = struct.unpack_from(">i", reply, 0)
        if corr == canary_corr and expected == "none":
            check_canary_reply(reply, canary_corr)
            conn.stats["no_reply"] += 1
            return
        assert expected not in ("close", "none"), (
            f"expected {expected} for {frame[:48]!r}, got a reply with correlation id {corr}: {reply[:64]!r}")
        check_response(reply, expected, fuzz_corr)
        conn.stats["answered"] += 1
        canary = conn.recv_frame(CANARY_TIMEOUT)
        if canary is None:  # answered, then closed (e.g. a SASL exchange gone wrong)
            conn.reset()
            return
        check_canary_reply(canary, canary_corr)
    except socket.timeout:
        # a legitimately slow request (fetch long poll, join waiting for a rebalance, huge timeouts
        # after mutation): give up on this connection, but the broker must still answer others
        conn.reset()
        conn.stats["slow"] += 1
        assert_alive(conn.bootstrap)


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory):
    """One broker for the module (the fuzzer needs a short initial rebalance delay, so not
    shared_broker); the log is checked in full after each API key's run and at the end."""
    d = tmp_path_factory.mktemp("fuzz") / "data"
    d.mkdir()
    broker = BrokerProcess(d, {"group.initial.rebalance.delay.ms": "0"}).start()
    with RawClient(broker.bootstrap) as client:
        topics = [CreateTopicsRequest.CreatableTopic(name=name, num_partitions=2, replication_factor=1,
                                                     assignments=[], configs=[]) for name in KNOWN_TOPICS]
        client.request(CreateTopicsRequest(topics=topics, timeout_ms=5000, validate_only=False), 5)
        seed_known_ids(client)
    yield broker
    alive = broker.alive()
    if alive:
        broker.stop()
    assert alive, "broker died during the fuzz run"
    assert_clean_log(broker)


def seed_known_ids(client: RawClient) -> None:
    """A group member (joined and synced) and a transactional producer with a partition in its
    transaction, so that fuzzed requests naming them reach the coordinators' deeper paths."""
    P = JoinGroupRequest.JoinGroupRequestProtocol
    join = JoinGroupRequest(group_id=KNOWN_GROUPS[0], session_timeout_ms=6000, rebalance_timeout_ms=1000,
                            member_id="", group_instance_id=None, protocol_type="consumer",
                            protocols=[P(name="range", metadata=b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00")])
    resp = client.request(join, 5)
    if resp.member_id:
        join.member_id = resp.member_id
        resp = client.request(join, 5)
    if resp.error_code == 0:
        KNOWN_MEMBER_IDS.append(resp.member_id)
        client.request(SyncGroupRequest(group_id=KNOWN_GROUPS[0], generation_id=resp.generation_id,
                                        member_id=resp.member_id, group_instance_id=None, assignments=[
                                            SyncGroupRequest.SyncGroupRequestAssignment(
                                                member_id=resp.member_id, assignment=b"")]), 3)
    client.request(FindCoordinatorRequest(key=KNOWN_TXN_IDS[0], key_type=1), 1)
    init = client.request(InitProducerIdRequest(transactional_id=KNOWN_TXN_IDS[0], transaction_timeout_ms=60000), 1)
    if init.error_code == 0:
        KNOWN_PRODUCER_IDS.append(init.producer_id)
        T = AddPartitionsToTxnRequest.AddPartitionsToTxnTopic
        client.request(AddPartitionsToTxnRequest(
            v3_and_below_transactional_id=KNOWN_TXN_IDS[0], v3_and_below_producer_id=init.producer_id,
            v3_and_below_producer_epoch=init.producer_epoch,
            v3_and_below_topics=[T(name=KNOWN_TOPICS[0], partitions=[0, 1])]), 1)
    idem = client.request(InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000), 1)
    if idem.error_code == 0:
        KNOWN_PRODUCER_IDS.append(idem.producer_id)


def full_log(broker: BrokerProcess) -> str:
    return broker.log_path.read_text(errors="replace")


def assert_clean_log(broker: BrokerProcess) -> None:
    text = full_log(broker)
    bad = [i for i, line in enumerate(text.splitlines()) if "Traceback" in line or "internal error" in line]
    if bad:
        lines = text.splitlines()
        first = bad[0]
        excerpt = "\n".join(lines[max(0, first - 3):first + 40])
        pytest.fail(f"{len(bad)} Traceback/internal error lines in the broker log, first:\n{excerpt}")


def fuzz_frames(api_key: int):
    spec = HANDLERS[api_key]
    versions = list(range(spec.min_version, spec.max_version + 1))

    @st.composite
    def frames(draw):
        version = draw(st.sampled_from(versions))
        bad_nulls = draw(st.integers(0, 3)) == 0
        request = draw(request_objects(spec.request_class, version, bad_nulls))
        flexible = spec.flexible(version)
        client_id = draw(st.sampled_from([b"fuzz", b"", None, "\u00e9t\u00e9".encode()]))
        header_tags = draw(st.sampled_from([b"\x00", b"\x00", b"\x01\x00\x02ab", b"\x01\x07\x00"]))
        correlation_id = draw(st.integers(0, 2**31 - 1) | st.sampled_from([-1, -2**31, 0]))
        frame = request_header(api_key, version, correlation_id, flexible, client_id, header_tags) \
            + encode_body(request, version)
        if draw(st.booleans()):
            header_len = body_offset(frame, flexible)
            first = 0 if draw(st.integers(0, 4)) == 0 else header_len
            frame = apply_mutations(frame, draw(mutations()), first)
        return frame
    return frames()


@pytest.mark.parametrize("api_key", API_KEYS)
def test_fuzz_api(fuzz_broker, api_key):
    conn = FuzzConnection(fuzz_broker.bootstrap)
    log_before = len(full_log(fuzz_broker))

    @FUZZ_SETTINGS
    @given(frame=fuzz_frames(api_key))
    def fuzz(frame):
        run_case(conn, frame)

    try:
        fuzz()
    finally:
        conn.reset()
    assert fuzz_broker.alive(), f"broker died:\n{fuzz_broker.log_text()}"
    assert_alive(fuzz_broker.bootstrap)
    new_log = full_log(fuzz_broker)[log_before:]
    bad = [line for line in new_log.splitlines() if "Traceback" in line or "internal error" in line]
    assert not bad, f"API key {api_key}: {len(bad)} bad log lines; log since this test:\n{new_log[-8000:]}"
    print(f"API key {api_key}: {conn.stats}")


@pytest.mark.parametrize("size", [-1, -2**31, 2**31 - 1, 0, 3, 11])
def test_frame_size_lies(fuzz_broker, size):
    """A size prefix that is negative, huge, empty or shorter than a header: the connection is closed
    (or, for a size larger than what follows, the broker waits for the rest), never a traceback."""
    conn = FuzzConnection(fuzz_broker.bootstrap)
    try:
        payload = struct.pack(">hhih", 18, 0, 5, 4) + b"fuzz"
        conn.socket().sendall(struct.pack(">i", size) + payload[:max(0, min(size, len(payload)))])
        try:
            frame = conn.recv_frame(1.0)
            assert frame is None, f"size {size}: unexpected reply {frame[:32]!r}"
        except socket.timeout:
            pass
    finally:
        conn.reset()
    assert_alive(fuzz_broker.bootstrap)


def test_random_bytes_streams(fuzz_broker):
    """Raw random byte streams (no valid framing at all) on fresh connections."""
    @settings(FUZZ_SETTINGS, max_examples=max(20, EXAMPLES_PER_API // 2))
    @given(data=st.binary(min_size=1, max_size=200))
    def fuzz(data):
        conn = FuzzConnection(fuzz_broker.bootstrap)
        try:
            conn.socket().sendall(data)
            try:
                while conn.recv_frame(0.2) is not None:
                    pass
            except socket.timeout:
                pass
        finally:
            conn.reset()

    fuzz()
    assert_alive(fuzz_broker.bootstrap)
    assert_clean_log(fuzz_broker)
