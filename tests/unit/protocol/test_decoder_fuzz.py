"""Fuzz/property test of the request decode path a connection runs on untrusted bytes.

`dispatch_decode` mirrors `Connection.dispatch` up to the handler call: peek_header (which may only
raise HeaderError, the one exception dispatch catches there), the dispatch-table lookup and version
check, body_offset and the body decode. Random, mutated and length-bombed frames must either decode
or raise an ordinary Exception quickly: no hang, no MemoryError, nothing outside Exception.
Seeds are fixed, so a failure reproduces.
"""
from __future__ import annotations

import random
import signal
import struct
import time

import pytest
from kafka.protocol.admin import CreateTopicsRequest, DescribeConfigsRequest
from kafka.protocol.consumer import FetchRequest, ListOffsetsRequest
from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer import ProduceRequest
from kafka.record.memory_records import MemoryRecordsBuilder

from minikafka.broker.handlers import load_all
from minikafka.broker.network.registry import HANDLERS
from minikafka.protocol.codec import decode_body
from minikafka.protocol.headers import HeaderError, body_offset, peek_header

load_all()  # fills the dispatch table

SLOW_DECODE_S = 0.5
SPECS = sorted(HANDLERS.values(), key=lambda s: s.api_key)
VERSIONS = [(s, v) for s in SPECS for v in range(s.min_version, s.max_version + 1)]


class Hang(Exception):
    pass


@pytest.fixture(autouse=True)
def hang_guard():
    """Turn a decoder hang into a test failure after 20 s (instead of the suite timeout)."""
    def on_alarm(_signum, _frame):
        raise Hang("decoder did not return within 20 s")
    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, 20)
    yield
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, previous)


def dispatch_decode(frame: bytes):
    """What Connection.dispatch does before the handler: returns the request, or None when the
    connection would be closed / answered with UNSUPPORTED_VERSION. Exceptions escaping from here
    would escape dispatch's handling too (peek_header) or are caught there as a decode failure."""
    header = peek_header(frame)  # dispatch catches HeaderError only
    spec = HANDLERS.get(header.api_key)
    if spec is None or not spec.min_version <= header.api_version <= spec.max_version:
        return None
    try:
        start = body_offset(frame, spec.flexible(header.api_version))
        return decode_body(spec.request_class, memoryview(frame)[start:], header.api_version)
    except MemoryError:
        raise
    except Exception:
        return None  # dispatch: CloseConnection


def check(frame: bytes) -> None:
    t0 = time.perf_counter()
    try:
        dispatch_decode(frame)
    except HeaderError:
        pass
    except MemoryError:
        pytest.fail(f"MemoryError decoding {frame[:64]!r}")
    except Exception as exc:
        pytest.fail(f"peek_header raised {exc!r} (dispatch only handles HeaderError) for {frame[:64]!r}")
    elapsed = time.perf_counter() - t0
    assert elapsed < SLOW_DECODE_S, f"decode took {elapsed:.2f}s for {frame[:64]!r}"


def check_raw_decode(spec, version: int, body: bytes) -> None:
    """kafka-python's own RequestClass.decode on the same bytes: clean failure or a value."""
    t0 = time.perf_counter()
    try:
        spec.request_class.decode(body, version=version)
    except MemoryError:
        pytest.fail(f"MemoryError in {spec.request_class.__name__} v{version} for {body[:64]!r}")
    except Exception:
        pass
    assert time.perf_counter() - t0 < SLOW_DECODE_S


def header(api_key: int, version: int, flexible: bool, client_id: bytes | None = b"fuzz") -> bytes:
    if client_id is None:
        out = struct.pack(">hhih", api_key, version, 1, -1)
    else:
        out = struct.pack(">hhih", api_key, version, 1, len(client_id)) + client_id
    return out + (b"\x00" if flexible else b"")


def _batch(n: int, compression: int = 0) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=compression, batch_size=1 << 20)
    for i in range(n):
        builder.append(timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=b"v" * 20, headers=[("h", b"x")])
    builder.close()
    return bytes(builder.buffer())


def valid_frames() -> list[bytes]:
    """Header + body of populated requests at every served version, plus default-valued ones."""
    populated = {
        3: MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="t1"),
                                   MetadataRequest.MetadataRequestTopic(name="topic-two")],
                           allow_auto_topic_creation=True, include_cluster_authorized_operations=False,
                           include_topic_authorized_operations=False),
        0: ProduceRequest(acks=-1, timeout_ms=1000, transactional_id=None, topic_data=[
            ProduceRequest.TopicProduceData(name="t1", partition_data=[
                ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=_batch(3)),
                ProduceRequest.TopicProduceData.PartitionProduceData(index=1, records=_batch(2, 1))])]),
        1: FetchRequest(replica_id=-1, max_wait_ms=100, min_bytes=1, max_bytes=1 << 20, isolation_level=0,
                        session_id=0, session_epoch=-1, topics=[FetchRequest.FetchTopic(topic="t1", partitions=[
                            FetchRequest.FetchTopic.FetchPartition(partition=0, current_leader_epoch=-1,
                                                                   fetch_offset=5, log_start_offset=-1,
                                                                   partition_max_bytes=1000)])],
                        forgotten_topics_data=[], rack_id=""),
        2: ListOffsetsRequest(replica_id=-1, isolation_level=0, topics=[ListOffsetsRequest.ListOffsetsTopic(
            name="t1", partitions=[ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                partition_index=0, current_leader_epoch=-1, timestamp=-2)])]),
        19: CreateTopicsRequest(topics=[CreateTopicsRequest.CreatableTopic(
            name="new", num_partitions=3, replication_factor=1, assignments=[],
            configs=[CreateTopicsRequest.CreatableTopic.CreatableTopicConfig(name="retention.ms", value="5")])],
            timeout_ms=100, validate_only=False),
        32: DescribeConfigsRequest(resources=[DescribeConfigsRequest.DescribeConfigsResource(
            resource_type=2, resource_name="t1", configuration_keys=["retention.ms"])],
            include_synonyms=True, include_documentation=False),
    }
    frames = []
    for spec, version in VERSIONS:
        flexible = spec.flexible(version)
        for req in (populated.get(spec.api_key), spec.request_class()):
            if req is None:
                continue
            frames.append(header(spec.api_key, version, flexible) + bytes(req.encode(version=version)))
    return frames


FRAMES = valid_frames()


def test_valid_frames_decode():
    assert len(FRAMES) > len(VERSIONS) + 40
    for frame in FRAMES:
        assert dispatch_decode(frame) is not None, frame[:32]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_random_frames(seed):
    rng = random.Random(seed)
    for _ in range(3000):
        kind = rng.random()
        if kind < 0.3:
            frame = rng.randbytes(rng.randrange(0, 64))
        elif kind < 0.6:
            spec, version = rng.choice(VERSIONS)
            frame = header(spec.api_key, version, spec.flexible(version)) + rng.randbytes(rng.randrange(0, 200))
        else:
            spec, version = rng.choice(VERSIONS)
            # A random (possibly huge or negative) client_id length and tagged-field section.
            frame = struct.pack(">hhih", spec.api_key, version, 7, rng.randrange(-3, 300)) + rng.randbytes(
                rng.randrange(0, 100))
        check(frame)
        if len(frame) >= 10 and rng.random() < 0.3:
            spec, version = rng.choice(VERSIONS)
            check_raw_decode(spec, version, frame[10:])


def _mutate(rng: random.Random, frame: bytes) -> bytes:
    """1-4 random edits; most of the time the 15-byte header is left intact so the body decoder runs."""
    data = bytearray(frame)
    first = 15 if rng.random() < 0.75 else 0
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        if len(data) <= first:
            break
        pos = rng.randrange(first, len(data))
        if op < 0.35:
            data[pos] = rng.randrange(256)
        elif op < 0.5:
            data[pos] ^= 1 << rng.randrange(8)
        elif op < 0.65:
            del data[pos:pos + rng.randint(1, 8)]
        elif op < 0.75:
            data[pos:pos] = rng.randbytes(rng.randint(1, 8))
        elif op < 0.9:  # a length/count field turned into a bomb
            bomb = rng.choice([b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x80\x00\x00\x00",
                               b"\xff\xff\xff\xff\x07", b"\xff\xff\xff\xff\x0f", b"\x7f\xff"])
            data[pos:pos + len(bomb)] = bomb
        else:
            del data[pos:]
    return bytes(data)


@pytest.mark.parametrize("seed", [10, 11, 12])
def test_mutated_valid_frames(seed):
    rng = random.Random(seed)
    for _ in range(4000):
        frame = _mutate(rng, rng.choice(FRAMES))
        check(frame)


def test_length_bombs_in_every_body():
    """Every served API/version given bodies that are only huge lengths/counts: no big allocation."""
    bombs = [b"\x7f\xff\xff\xff" * 4, b"\xff\xff\xff\xff\x07" * 4, b"\x00\x00\x7f\xff\xff\xff" * 3,
             b"\xff" * 16, b"\x80" * 16, b"\x00\x01" + b"\x7f\xff\xff\xff" * 3]
    for spec, version in VERSIONS:
        for bomb in bombs:
            frame = header(spec.api_key, version, spec.flexible(version)) + bomb
            check(frame)
            check_raw_decode(spec, version, bomb)


def test_truncations_of_valid_frames_never_decode_as_something_else():
    """Every strict prefix of a valid body must fail to decode (length fields are checked against the
    frame), except prefixes that end exactly where the encoding ends."""
    rng = random.Random(5)
    for frame in rng.sample(FRAMES, 40):
        hdr = peek_header(frame)
        spec = HANDLERS[hdr.api_key]
        start = body_offset(frame, spec.flexible(hdr.api_version))
        full = decode_body(spec.request_class, memoryview(frame)[start:], hdr.api_version)
        for cut in range(start, len(frame)):
            try:
                partial = decode_body(spec.request_class, memoryview(frame)[start:cut], hdr.api_version)
            except Exception:
                continue
            # A prefix that decodes must have been a complete message already (e.g. trailing tags).
            assert partial.to_dict() == full.to_dict(), (spec.request_class.__name__, hdr.api_version, cut)
