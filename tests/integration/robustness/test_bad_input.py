"""Malformed and hostile input over raw sockets.

Each case sends bad bytes on its own connection, checks the broker's reaction (an error code as Apache
Kafka gives it, or the connection closed), then checks that the broker process is alive, a SECOND
client on a fresh connection is served normally, and the broker logged no Traceback.
"""
from __future__ import annotations

import random
import socket
import struct

import crc32c
import psutil
import pytest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest

from tests.support.helpers import (
    RawClient,
    api_versions_raw,
    assert_broker_healthy,
    build_batch,
    fetch_all,
    list_offset,
    metadata_raw,
    produce_raw,
    produce_request,
    wait_broker_connections_closed,
    wait_until,
)

CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_REQUIRED_ACKS = 21
UNSUPPORTED_VERSION = 35
INVALID_RECORD = 87
UNSUPPORTED_COMPRESSION_TYPE = 76
DEFAULT_MAX_REQUEST = 104857600


def _survives(broker, topic: str = "bad-input-canary") -> None:
    """The broker is alive, a fresh client is served (ApiVersions, Metadata, produce + fetch), no Traceback."""
    assert broker.alive(), broker.log_text()
    assert_broker_healthy(broker.bootstrap)
    with RawClient(broker.bootstrap) as client:
        _ready(client, topic)  # Produce does not create topics (Kafka creates them on Metadata only)
        resp = produce_raw(client, topic, build_batch([b"still-alive"]))
        assert resp.error_code == 0, resp
        end = list_offset(client, topic, 0, -1)[1]
    assert fetch_all(broker.bootstrap, topic, start=end - 1) == [(end - 1, None, b"still-alive")]
    log_path = getattr(broker, "log_path", None)  # the whole log, not only its tail (minikafka)
    log = log_path.read_text(errors="replace") if log_path is not None else broker.log_text()
    assert "Traceback" not in log, log[max(log.find("Traceback") - 500, 0):][:4000]


def _ready(client: RawClient, topic: str) -> None:
    """Auto-create `topic` through Metadata and wait until its partition 0 serves ListOffsets (a real
    Kafka needs a moment to elect the leader)."""
    metadata_raw(client, [topic], auto_create=True)
    wait_until(lambda: list_offset(client, topic, 0, -1)[0] == 0, timeout=15, what=f"topic {topic} ready")


def _header(api_key: int, version: int, correlation_id: int = 7, client_id: bytes = b"bad") -> bytes:
    return struct.pack(">hhih", api_key, version, correlation_id, len(client_id)) + client_id


def _frame(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def _send_and_expect_close(broker, data: bytes) -> None:
    with RawClient(broker.bootstrap) as client:
        client.send_bytes(data)
        assert client.closed_by_peer(timeout=5), "broker kept the connection open"


@pytest.fixture(scope="module")
def bad_broker(shared_broker):
    """The module's shared broker with the canary topic created (teardown asserts no Traceback)."""
    with RawClient(shared_broker.bootstrap) as client:
        _ready(client, "bad-input-canary")
    yield shared_broker
    if getattr(shared_broker, "proc", None) is not None:
        # Let the broker see every client disconnect before shared_broker's clean stop is judged.
        wait_broker_connections_closed(shared_broker)


# ------------------------------------------------------------------------------------ framing

def test_truncated_frame_then_close(bad_broker):
    with RawClient(bad_broker.bootstrap) as client:
        client.send_bytes(struct.pack(">i", 100) + b"\x00\x12\x00\x00\x00\x00\x00\x01\x00\x00")
    _survives(bad_broker)


def test_truncated_size_prefix_then_close(bad_broker):
    with RawClient(bad_broker.bootstrap) as client:
        client.send_bytes(b"\x00\x00")
    _survives(bad_broker)


@pytest.mark.minikafka_only
@pytest.mark.parametrize("size", [DEFAULT_MAX_REQUEST + 1, 2**31 - 1])
def test_frame_larger_than_socket_request_max_bytes_is_refused(bad_broker, size):
    proc = psutil.Process(bad_broker.proc.pid)
    rss_before = proc.memory_info().rss
    with RawClient(bad_broker.bootstrap) as client:
        client.send_bytes(struct.pack(">i", size) + _header(18, 3))
        assert client.closed_by_peer(timeout=5)
    assert proc.memory_info().rss - rss_before < 50 * 1024 * 1024, "broker allocated the announced frame"
    _survives(bad_broker)


@pytest.mark.parametrize("size", [-1, -(2**31)])
def test_negative_frame_size_closes(bad_broker, size):
    _send_and_expect_close(bad_broker, struct.pack(">i", size) + _header(18, 3))
    _survives(bad_broker)


def test_socket_request_max_bytes_override(broker_factory):
    broker = broker_factory(overrides={"socket.request.max.bytes": "1000"})
    # A frame of exactly 1000 bytes is allowed (Kafka rejects only size > max).
    with RawClient(broker.bootstrap, client_id="c" * (1000 - 10)) as client:
        req = ApiVersionsRequest()
        frame = client.encode(req, 0)
        assert len(frame) == 1004
        client.send_bytes(frame)
        resp = client.recv(ApiVersionsResponse, 0)
        assert resp.error_code == 0 and resp.api_keys
    # 1001 bytes: closed without an answer, even for an otherwise valid request.
    with RawClient(broker.bootstrap, client_id="c" * (1001 - 10)) as client:
        client.send_bytes(client.encode(ApiVersionsRequest(), 0))
        assert client.closed_by_peer(timeout=5)
    # A produce request above the limit is refused the same way; nothing is appended.
    with RawClient(broker.bootstrap) as client:
        _ready(client, "small-requests")
        client.send(produce_request("small-requests", build_batch([b"x" * 1500])), 9)
        assert client.closed_by_peer(timeout=5)
    assert list_offset(broker.bootstrap, "small-requests", 0, -1) == (0, 0)
    _survives(broker)


# ------------------------------------------------------------------------------- header / API

@pytest.mark.parametrize("api_key", [9999, 200, -1])
def test_unknown_api_key_closes(bad_broker, api_key):
    _send_and_expect_close(bad_broker, _frame(_header(api_key, 0) + b"\x00" * 8))
    _survives(bad_broker)


@pytest.mark.parametrize("api_key,version", [(3, 99), (0, 2), (1, 99), (3, -1)])
def test_unsupported_version_of_known_api_closes(bad_broker, api_key, version):
    _send_and_expect_close(bad_broker, _frame(_header(api_key, version) + b"\x00" * 8))
    _survives(bad_broker)


def test_api_versions_unknown_version_gets_v0_shaped_error_and_list(bad_broker):
    with RawClient(bad_broker.bootstrap) as client:
        client.send_bytes(_frame(_header(18, 99, correlation_id=4242) + b"\x00" * 4))
        frame = client.recv_frame()
        (correlation_id,) = struct.unpack_from(">i", frame)
        assert correlation_id == 4242
        resp = ApiVersionsResponse.decode(frame[4:], version=0)  # header v0 = correlation id only
        assert resp.error_code == UNSUPPORTED_VERSION
        keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        # Kafka lists only ApiVersions itself here; listing more is allowed.
        assert 18 in keys and keys[18][0] == 0 and keys[18][1] >= 3
        # The connection stays usable: the client retries at a version the broker knows.
        assert api_versions_raw(client, version=keys[18][1]).error_code == 0
    _survives(bad_broker)


@pytest.mark.parametrize("payload", [
    b"\x00\x12\x00",                                    # shorter than a request header
    _header(18, 3)[:8] + struct.pack(">h", 50) + b"ab",  # client_id runs past the frame
    _header(18, 3)[:8] + struct.pack(">h", -7),          # negative client_id length other than -1
], ids=["short-header", "client-id-overrun", "negative-client-id"])
def test_malformed_request_header_closes(bad_broker, payload):
    _send_and_expect_close(bad_broker, _frame(payload))
    _survives(bad_broker)


def test_flexible_header_tagged_field_overrun_closes(bad_broker):
    # Metadata v9 uses request header v2: one tagged field claiming 100 bytes that are not there.
    payload = _header(3, 9) + b"\x01" + b"\x00" + b"\x64" + b"\x00" * 5
    _send_and_expect_close(bad_broker, _frame(payload))
    _survives(bad_broker)


def _truncate_body(frame: bytes, keep_body_fraction: float, header_len: int) -> bytes:
    body = frame[4 + header_len:]
    cut = frame[4:4 + header_len] + body[:int(len(body) * keep_body_fraction)]
    return _frame(cut)


def test_body_truncated_in_the_middle_closes(bad_broker):
    name = "truncated-body-topic-with-a-long-name"
    client_id = b"bad"
    hdr_len = 10 + len(client_id)
    with RawClient(bad_broker.bootstrap, client_id=client_id.decode()) as client:
        md = client.encode(MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                                           allow_auto_topic_creation=True,
                                           include_cluster_authorized_operations=False,
                                           include_topic_authorized_operations=False), 4)
        produce = client.encode(produce_request("bad-input-canary", build_batch([b"v" * 200] * 3)), 8)
        create = client.encode(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=5000, validate_only=False), 4)
    for frame in (md, produce, create):
        _send_and_expect_close(bad_broker, _truncate_body(frame, 0.5, hdr_len))
    with RawClient(bad_broker.bootstrap) as client:
        topics = metadata_raw(client, [name], auto_create=False).topics
    assert topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION, "a truncated request was executed"
    _survives(bad_broker)


def _answer_or_close(broker, payload: bytes, allow_silence: bool) -> None:
    """Send one frame on a fresh connection: the broker must answer with one well-formed frame for the
    same correlation id, or close the connection. Silence is only legitimate for an acks=0 Produce."""
    with RawClient(broker.bootstrap) as client:
        client.send_bytes(_frame(payload))
        client.sock.settimeout(2 if allow_silence else 5)
        try:
            head = client.sock.recv(4, socket.MSG_WAITALL)
        except ConnectionResetError:
            return
        except socket.timeout:
            assert allow_silence, f"no answer and no close for {payload[:48]!r}"
            return
        if head:
            assert len(head) == 4, "partial response size"
            (size,) = struct.unpack(">i", head)
            assert 4 <= size < 10_000_000
            frame = client._recv_exactly(size)
            assert frame[:4] == payload[4:8], "response for another correlation id"


# (api key, version, flexible request header) of APIs the broker serves
KNOWN = [(0, 9, True), (1, 11, False), (2, 7, True), (3, 9, True), (3, 4, False), (18, 3, True), (18, 0, False),
         (19, 4, False), (19, 5, True), (32, 4, True), (22, 4, True), (37, 2, True), (60, 1, True), (21, 2, True),
         (23, 4, True), (44, 1, True), (33, 2, True), (17, 1, False)]


@pytest.mark.parametrize("seed", [1, 2, 3, 4, 5])
def test_random_garbage_frames(bad_broker, seed):
    """Random frames (half with a valid header of a served API, then random body) get an answer or a
    close, never a crash."""
    rng = random.Random(seed)
    for i in range(40):
        body = rng.randbytes(rng.choice([0, 1, 3, 8, 20, 64, 300]))
        if i % 2:
            api_key, version, flexible = rng.choice(KNOWN)
            payload = _header(api_key, version, correlation_id=i) + (b"\x00" if flexible else b"") + body
            _answer_or_close(bad_broker, payload, allow_silence=api_key == 0)
        else:
            _answer_or_close(bad_broker, rng.randbytes(rng.choice([1, 6, 10, 12])) + body, allow_silence=False)
    # Many garbage frames back-to-back on one connection.
    with RawClient(bad_broker.bootstrap) as client:
        client.send_bytes(b"".join(_frame(rng.randbytes(rng.randrange(0, 100))) for _ in range(20)))
    _survives(bad_broker)


def _valid_requests() -> list[tuple[int, bytes]]:
    """(api key, framed request) of well-formed requests whose bodies the mutation test damages."""
    def encode(req, version: int) -> bytes:
        req.with_header(correlation_id=100 + version, client_id="mutant")
        return bytes(req.encode(version=version, header=True, framed=True))

    md = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="bad-input-canary")],
                         allow_auto_topic_creation=False, include_cluster_authorized_operations=False,
                         include_topic_authorized_operations=False)
    create = CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
        name="mutant-topic", num_partitions=2, replication_factor=1, assignments=[],
        configs=[CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(name="retention.ms", value="1000")])],
        timeout_ms=5000, validate_only=True)
    batch = build_batch([b"mutant-%d" % i for i in range(5)], keys=[b"k"] * 5, timestamp_ms=1_700_000_000_000)
    return [(3, encode(md, 9)), (3, encode(md, 1)), (19, encode(create, 4)),
            (19, encode(create, 7)), (0, encode(produce_request("bad-input-canary", batch), 9)),
            (0, encode(produce_request("bad-input-canary", batch), 3)),
            (18, encode(ApiVersionsRequest(client_software_name="x", client_software_version="1"), 3))]


@pytest.mark.parametrize("seed", [11, 12, 13])
def test_mutated_valid_frames(bad_broker, seed):
    """Valid requests with 1-3 random bytes of the body replaced: an answer or a close, never a crash."""
    rng = random.Random(seed)
    requests = _valid_requests()
    for _ in range(25):
        api_key, frame = rng.choice(requests)
        payload = bytearray(frame[4:])
        for _ in range(rng.randint(1, 3)):
            pos = rng.randrange(10, len(payload))  # keep api key / version / correlation id
            payload[pos] = rng.randrange(256)
        _answer_or_close(bad_broker, bytes(payload), allow_silence=api_key == 0)
    _survives(bad_broker)


# ------------------------------------------------------------------------------------ produce

def test_corrupt_crc_is_corrupt_message(bad_broker):
    batch = bytearray(build_batch([b"one", b"two", b"three"]))
    batch[-3] ^= 0xFF
    with RawClient(bad_broker.bootstrap) as client:
        _ready(client, "bad-crc")
        resp = produce_raw(client, "bad-crc", bytes(batch))
        assert resp.error_code == CORRUPT_MESSAGE, resp
        assert list_offset(client, "bad-crc", 0, -1) == (0, 0)
    _survives(bad_broker)


def test_wrong_last_offset_delta_is_invalid_record(bad_broker):
    batch = bytearray(build_batch([b"a", b"b", b"c"]))
    assert struct.unpack_from(">i", batch, 23)[0] == 2
    struct.pack_into(">i", batch, 23, 5)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    with RawClient(bad_broker.bootstrap) as client:
        _ready(client, "bad-delta")
        resp = produce_raw(client, "bad-delta", bytes(batch))
        assert resp.error_code == INVALID_RECORD, resp
        assert list_offset(client, "bad-delta", 0, -1) == (0, 0)
    _survives(bad_broker)


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_magic_is_invalid_record(bad_broker, magic):
    batch = build_batch([b"old", b"format"], magic=magic)
    assert batch[16] == magic
    with RawClient(bad_broker.bootstrap) as client:
        _ready(client, "bad-magic")
        resp = produce_raw(client, "bad-magic", batch, version=3)
        assert resp.error_code == INVALID_RECORD, resp
        resp = produce_raw(client, "bad-magic", batch, version=9)
        assert resp.error_code == INVALID_RECORD, resp
        assert list_offset(client, "bad-magic", 0, -1) == (0, 0)
    _survives(bad_broker)


def _recrc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def _expect_rejected(broker, topic: str, records: bytes, code: int, version: int = 9) -> None:
    with RawClient(broker.bootstrap) as client:
        _ready(client, topic)
        before = list_offset(client, topic, 0, -1)
        resp = produce_raw(client, topic, records, version=version)
        assert resp.error_code == code, resp
        assert list_offset(client, topic, 0, -1) == before, "a rejected batch was appended"
    _survives(broker)


def test_empty_record_set_is_invalid_record(bad_broker):
    # ProduceRequest.validateRecords: "must have at least one record batch per partition".
    _expect_rejected(bad_broker, "bad-empty", b"", INVALID_RECORD)


def test_two_batches_in_one_partition_is_invalid_record(bad_broker):
    # ProduceRequest.validateRecords (v3+): "only allowed to contain exactly one record batch per partition".
    _expect_rejected(bad_broker, "bad-two-batches", build_batch([b"a"]) + build_batch([b"b", b"c"]), INVALID_RECORD)


def test_compressed_batch_with_wrong_last_offset_delta_is_invalid_record(bad_broker):
    # LogValidator.validateBatch checks lastOffsetDelta + 1 == recordCount for every v2 batch from a
    # client, compressed or not ("Inconsistent batch offset range").
    batch = bytearray(build_batch([b"a" * 50, b"b" * 50, b"c" * 50], compression=1))
    assert batch[22] & 0x07 == 1 and struct.unpack_from(">i", batch, 23)[0] == 2
    struct.pack_into(">i", batch, 23, 99)
    _expect_rejected(bad_broker, "bad-delta-gzip", _recrc(batch), INVALID_RECORD)


def test_control_batch_from_client_is_invalid_record(bad_broker):
    # LogValidator.validateBatch: "Clients are not allowed to write control records" (Apache Kafka 4.3
    # answers 87). A forged marker: control attribute, one record with key (version 0, type COMMIT).
    # (With the transactional bit too and no transactional id, Kafka answers 53 before validating.)
    batch = bytearray(build_batch([b"\x00\x00\x00\x00\x00\x00"], keys=[b"\x00\x00\x00\x01"]))
    struct.pack_into(">h", batch, 21, 0x20)
    _expect_rejected(bad_broker, "bad-control", _recrc(batch), INVALID_RECORD)


def test_producer_id_with_negative_base_sequence_is_invalid_record(bad_broker):
    # LogValidator.validateBatch: "Invalid sequence number -1 in record batch with producerId ...".
    batch = bytearray(build_batch([b"idempotent?"]))
    struct.pack_into(">qhi", batch, 43, 4242, 0, -1)
    _expect_rejected(bad_broker, "bad-sequence", _recrc(batch), INVALID_RECORD)


@pytest.mark.parametrize("version", [3, 6])
def test_zstd_before_produce_v7_is_unsupported_compression_type(bad_broker, version):
    # ProduceRequest.validateRecords: "Produce requests with version < 7 are not allowed to use ZStandard".
    batch = build_batch([b"z" * 100, b"y" * 100], compression=4)
    assert batch[22] & 0x07 == 4
    _expect_rejected(bad_broker, f"bad-zstd-v{version}", batch, UNSUPPORTED_COMPRESSION_TYPE, version=version)


@pytest.mark.parametrize("acks", [5, -2, 2])
def test_invalid_acks(bad_broker, acks):
    with RawClient(bad_broker.bootstrap) as client:
        _ready(client, "bad-acks")
        resp = produce_raw(client, "bad-acks", build_batch([b"x"]), acks=acks)
        assert resp.error_code == INVALID_REQUIRED_ACKS, resp
        assert list_offset(client, "bad-acks", 0, -1) == (0, 0)
    _survives(bad_broker)


def test_produce_to_missing_topic_without_auto_create(broker_factory):
    broker = broker_factory(overrides={"auto.create.topics.enable": "false"})
    with RawClient(broker.bootstrap) as client:
        resp = produce_raw(client, "no-such-topic", build_batch([b"x"]))
        assert resp.error_code == UNKNOWN_TOPIC_OR_PARTITION, resp
        resp = produce_raw(client, "no-such-topic", build_batch([b"x"]), partition=3)
        assert resp.error_code == UNKNOWN_TOPIC_OR_PARTITION, resp
        md = metadata_raw(client, ["no-such-topic"], auto_create=True)
        assert md.topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
    assert not (broker.data_dir / "no-such-topic-0").exists()
    # The survival check produces to a topic that must exist first.
    with RawClient(broker.bootstrap) as client:
        client.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name="bad-input-canary", num_partitions=1, replication_factor=1, assignments=[], configs=[])],
            timeout_ms=5000, validate_only=False), 4)
    _survives(broker)


def test_batch_larger_than_topic_max_message_bytes(bad_broker):
    topic = "small-messages"
    with RawClient(bad_broker.bootstrap) as client:
        resp = client.request(CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name=topic, num_partitions=1, replication_factor=1, assignments=[],
            configs=[CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(name="max.message.bytes",
                                                                             value="1000")])],
            timeout_ms=5000, validate_only=False), 4)
        assert resp.topics[0].error_code == 0, resp
        wait_until(lambda: list_offset(client, topic, 0, -1)[0] == 0, timeout=15, what="topic ready")
        big = build_batch([b"z" * 1200])
        assert len(big) > 1000
        resp = produce_raw(client, topic, big)
        assert resp.error_code == MESSAGE_TOO_LARGE, resp
        small = build_batch([b"z" * 100])
        resp = produce_raw(client, topic, small)
        assert resp.error_code == 0 and resp.base_offset == 0, resp
        assert list_offset(client, topic, 0, -1) == (0, 1)
    _survives(bad_broker)


def test_stock_producer_works_after_bad_input(bad_broker):
    """After a burst of hostile connections a confluent-kafka producer is served normally."""
    from confluent_kafka import Producer

    for payload in (struct.pack(">i", -5), struct.pack(">i", 2**31 - 1), _frame(_header(9999, 0))):
        with RawClient(bad_broker.bootstrap) as client:
            client.send_bytes(payload)
    producer = Producer({"bootstrap.servers": bad_broker.bootstrap, "acks": "all"})
    results = []
    for i in range(20):
        producer.produce("bad-input-stock", value=f"m{i}".encode(),
                         on_delivery=lambda err, msg: results.append((err, msg.offset())))
    assert producer.flush(20) == 0
    del producer
    assert [e for e, _o in results] == [None] * 20
    assert sorted(o for _e, o in results) == list(range(20))
    _survives(bad_broker)


@pytest.mark.parametrize("compression", [0, 1])
def test_keyless_record_on_compacted_topic_is_invalid(bad_broker, compression):
    """Kafka's LogValidator: 'Compacted topic cannot accept message without key' -> INVALID_RECORD (87);
    keyed records are accepted."""
    from confluent_kafka.admin import AdminClient, NewTopic
    topic = f"bad-compacted-{compression}"
    admin = AdminClient({"bootstrap.servers": bad_broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "compact"})])[topic].result(30)
    with RawClient(bad_broker.bootstrap) as c:
        _ready(c, topic)
        keyless = build_batch([b"a", b"b"], keys=[b"k", None], compression=compression)
        assert produce_raw(c, topic, keyless).error_code == INVALID_RECORD
        keyed = build_batch([b"a", b"b"], keys=[b"k", b"j"], compression=compression)
        assert produce_raw(c, topic, keyed).error_code == 0
    _survives(bad_broker)
