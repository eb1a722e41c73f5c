"""A forge for record batches v2 with chosen defects, and the corpus of corrupt (and odd-but-valid)
client batches used by tests/unit/protocol/test_record_validator.py and tests/integration/clients/test_corrupt_batches.py.

Every batch gets a VALID CRC-32C: the defects are in the content, so only record-level validation
(Kafka's LogValidator and its record iterator) can catch them. Expected codes come from Apache Kafka
4.3.1 (`pytest tests/integration/clients/test_corrupt_batches.py --broker=kafka`).
"""
from __future__ import annotations

import gzip
import struct
from dataclasses import dataclass, field
from typing import Callable

import crc32c

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4

# Kafka error codes (kafka.errors names in comments)
OK = 0
CORRUPT_MESSAGE = 2  # CorruptRecordError
UNKNOWN_SERVER_ERROR = -1
INVALID_TIMESTAMP = 32  # InvalidTimestampError
INVALID_RECORD = 87  # InvalidRecordError
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
UNSUPPORTED_COMPRESSION_TYPE = 76
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53

_HEADER = struct.Struct(">qiibIhiqqqhii")


def uvarint(u: int) -> bytes:
    out = bytearray()
    while True:
        b = u & 0x7F
        u >>= 7
        if u:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varint(n: int) -> bytes:
    """Zig-zag varint (works for 32- and 64-bit values)."""
    return uvarint((n << 1) ^ (n >> 63) if n < 0 else n << 1)


def record_body(*, offset_delta: int = 0, ts_delta: int = 0, key: bytes | None = None,
                value: bytes | None = b"v", headers: list[tuple[bytes, bytes | None]] = (),
                attributes: int = 0) -> bytes:
    """A record without its length prefix."""
    out = bytearray([attributes & 0xFF])
    out += varint(ts_delta) + varint(offset_delta)
    out += varint(-1) if key is None else varint(len(key)) + key
    out += varint(-1) if value is None else varint(len(value)) + value
    out += varint(len(headers))
    for hk, hv in headers:
        out += varint(len(hk)) + hk
        out += varint(-1) if hv is None else varint(len(hv)) + hv
    return bytes(out)


def record(**kw) -> bytes:
    body = record_body(**kw)
    return varint(len(body)) + body


def records(n: int, value: bytes = b"v", **kw) -> bytes:
    return b"".join(record(offset_delta=i, ts_delta=i, value=value, **kw) for i in range(n))


def snappy_xerial(data: bytes, block: int = 32 * 1024) -> bytes:
    """Snappy in the xerial/java framing Kafka's Java client writes."""
    import cramjam
    out = bytearray(b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1))
    for i in range(0, max(len(data), 1), block):
        c = bytes(cramjam.snappy.compress_raw(data[i:i + block]))
        out += struct.pack(">i", len(c)) + c
    return bytes(out)


def compress(codec: int, data: bytes) -> bytes:
    if codec == GZIP:
        return gzip.compress(data)
    if codec == SNAPPY:
        return snappy_xerial(data)
    if codec == LZ4:
        import lz4.frame
        return lz4.frame.compress(data, store_size=False)
    if codec == ZSTD:
        import zstandard
        return zstandard.ZstdCompressor().compress(data)
    raise ValueError(codec)


def batch(payload: bytes, *, count: int, last_offset_delta: int | None = None, codec: int = NONE,
          compress_payload: bool = True, attributes: int = 0, base_ts: int = 0, max_ts: int | None = None,
          producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1, magic: int = 2,
          base_offset: int = 0) -> bytes:
    """A whole batch around `payload` (the records, uncompressed unless compress_payload=False) with a
    correct batchLength and CRC."""
    body = compress(codec, payload) if codec in (GZIP, SNAPPY, LZ4, ZSTD) and compress_payload else payload
    lod = count - 1 if last_offset_delta is None else last_offset_delta
    attrs = (attributes & ~0x07) | codec
    head = bytearray(_HEADER.pack(base_offset, 49 + len(body), -1, magic, 0, attrs, lod, base_ts,
                                  base_ts if max_ts is None else max_ts, producer_id, producer_epoch,
                                  base_sequence, count))
    out = head + body
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


# ------------------------------------------------------------------------------------------- corpus

@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[int], bytes]  # now_ms -> batch bytes
    code: int  # the error code Apache Kafka 4.3.1 answers (0 = accepted)
    topic_config: dict[str, str] = field(default_factory=dict)
    batch_index: int | None = None  # record_errors[0].batch_index Kafka reports, if any
    note: str = ""
    minikafka_code: int | None = None  # where minikafka deliberately (or for a known gap) differs
    unreadable_by: tuple[str, ...] = ()  # stock consumers that cannot read the batch once stored

    def expected(self, kafka: bool) -> int:
        return self.code if kafka or self.minikafka_code is None else self.minikafka_code


def _varint_too_long() -> bytes:
    # offsetDelta as a 6-byte varint: Kafka's 32-bit varint reader refuses a 5th byte with the MSB set
    body = bytes([0]) + varint(0) + b"\x80\x80\x80\x80\x80\x00" + varint(-1) + varint(1) + b"v" + varint(0)
    return varint(len(body)) + body


def _key_length_too_long() -> bytes:
    # keyLength -1 (null key) as a 7-byte varint that decodes to 1: over-long, value fits 32 bits
    body = bytes([0]) + varint(0) + varint(0) + b"\x82\x80\x80\x80\x80\x80\x00" + b"k" + varint(1) + b"v" + varint(0)
    return varint(len(body)) + body


def _offset_delta_huge() -> bytes:
    # offsetDelta as a 6-byte varint whose value does not fit 32 bits
    body = bytes([0]) + varint(0) + b"\xfe\xff\xff\xff\xff\x01" + varint(-1) + varint(1) + b"v" + varint(0)
    return varint(len(body)) + body


def _varint_non_minimal() -> bytes:
    # offsetDelta 0 and valueLength 1 in 3 and 5 bytes: not minimal, but within Kafka's 5-byte limit
    body = bytes([0]) + varint(0) + b"\x80\x80\x00" + varint(-1) + b"\x82\x80\x80\x80\x00" + b"v" + varint(0)
    return varint(len(body)) + body


def _varint_endless() -> bytes:
    # a record whose length varint never ends (11 continuation bytes) followed by filler
    return b"\xff" * 11 + b"\x01" + b"\x00" * 8


def _bad_header_count() -> bytes:
    body = bytes([0]) + varint(0) + varint(0) + varint(-1) + varint(1) + b"v" + varint(-1)
    return varint(len(body)) + body


def _negative_header_key() -> bytes:
    body = bytes([0]) + varint(0) + varint(0) + varint(-1) + varint(1) + b"v" + varint(1) + varint(-1) + varint(-1)
    return varint(len(body)) + body


def _length_too_short() -> bytes:
    body = record_body(value=b"hello")
    return varint(len(body) - 2) + body


def _length_too_long() -> bytes:
    body = record_body(value=b"hello")
    return varint(len(body) + 3) + body + b"\x00\x00\x00"


def _key_overruns() -> bytes:
    body = bytes([0]) + varint(0) + varint(0) + varint(50) + b"k" + varint(1) + b"v" + varint(0)
    return varint(len(body)) + body


def _negative_length() -> bytes:
    return varint(-5) + record_body()


def _keyed_then_keyless(n: int) -> bytes:
    return record(key=b"k", value=b"x" * 1000) + b"".join(
        record(offset_delta=i, ts_delta=i, value=b"x" * 1000) for i in range(1, n))


def _gap_deltas() -> bytes:
    return record(offset_delta=0) + record(offset_delta=5)


def _ts(delta_ms: int) -> Callable[[int], bytes]:
    return lambda now: batch(records(1), count=1, base_ts=now + delta_ms)


def corpus() -> list[Case]:
    r2 = records(2)
    return [
        # --- compression
        Case("codec-5", lambda now: batch(r2, count=2, codec=5, base_ts=now), UNKNOWN_SERVER_ERROR),
        Case("codec-6", lambda now: batch(r2, count=2, codec=6, base_ts=now), UNKNOWN_SERVER_ERROR),
        Case("codec-7", lambda now: batch(r2, count=2, codec=7, base_ts=now), UNKNOWN_SERVER_ERROR),
        Case("gzip-garbage", lambda now: batch(b"not gzip at all" * 4, count=2, codec=GZIP, compress_payload=False,
                                               base_ts=now), UNKNOWN_SERVER_ERROR),
        Case("gzip-truncated", lambda now: batch(compress(GZIP, records(50))[:-20], count=50, codec=GZIP,
                                                 compress_payload=False, base_ts=now), UNKNOWN_SERVER_ERROR),
        Case("snappy-garbage", lambda now: batch(b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" * 2 + b"\x00\x00\x00\x10"
                                                 + b"\xff" * 16, count=2, codec=SNAPPY, compress_payload=False,
                                                 base_ts=now), UNKNOWN_SERVER_ERROR),
        Case("lz4-garbage", lambda now: batch(b"\x04\x22\x4d\x18" + b"\xff" * 30, count=2, codec=LZ4,
                                              compress_payload=False, base_ts=now), UNKNOWN_SERVER_ERROR),
        Case("zstd-garbage", lambda now: batch(b"\x28\xb5\x2f\xfd" + b"\xff" * 30, count=2, codec=ZSTD,
                                               compress_payload=False, base_ts=now), UNKNOWN_SERVER_ERROR),
        # --- record count vs records present
        Case("count-too-high", lambda now: batch(r2, count=3, base_ts=now), INVALID_RECORD),
        Case("count-too-low", lambda now: batch(r2, count=1, base_ts=now), INVALID_RECORD),
        Case("count-int-max", lambda now: batch(records(1), count=2**31 - 1, base_ts=now), INVALID_RECORD),
        Case("count-zero", lambda now: batch(b"", count=0, last_offset_delta=0, base_ts=now), INVALID_RECORD),
        Case("count-vs-last-offset-delta", lambda now: batch(r2, count=2, last_offset_delta=5, base_ts=now),
             INVALID_RECORD),
        Case("gzip-count-too-high", lambda now: batch(r2, count=3, codec=GZIP, base_ts=now), INVALID_RECORD),
        Case("zstd-count-int-max", lambda now: batch(records(1), count=2**31 - 1, codec=ZSTD, base_ts=now),
             INVALID_RECORD),
        # --- record framing
        Case("trailing-bytes", lambda now: batch(r2 + b"\x00\x00\x00", count=2, base_ts=now), INVALID_RECORD),
        Case("lz4-trailing-bytes", lambda now: batch(r2 + b"\x00\x00\x00", count=2, codec=LZ4, base_ts=now),
             INVALID_RECORD),
        Case("record-length-short", lambda now: batch(_length_too_short(), count=1, base_ts=now), INVALID_RECORD),
        Case("record-length-long", lambda now: batch(_length_too_long(), count=1, base_ts=now), INVALID_RECORD),
        Case("record-length-negative", lambda now: batch(_negative_length(), count=1, base_ts=now),
             INVALID_RECORD),
        Case("record-past-batch-end", lambda now: batch(record(value=b"x" * 40)[:-10], count=1, base_ts=now),
             INVALID_RECORD),
        Case("key-overruns-record", lambda now: batch(_key_overruns(), count=1, base_ts=now), INVALID_RECORD),
        Case("header-count-negative", lambda now: batch(_bad_header_count(), count=1, base_ts=now),
             INVALID_RECORD),
        Case("header-key-negative", lambda now: batch(_negative_header_key(), count=1, base_ts=now),
             INVALID_RECORD),
        Case("varint-too-long", lambda now: batch(_varint_too_long(), count=1, base_ts=now), INVALID_RECORD),
        Case("key-length-varint-too-long", lambda now: batch(_key_length_too_long(), count=1, base_ts=now),
             INVALID_RECORD),
        Case("offset-delta-varint-huge", lambda now: batch(_offset_delta_huge(), count=1, base_ts=now),
             INVALID_RECORD),
        Case("gzip-varint-too-long", lambda now: batch(_varint_too_long(), count=1, codec=GZIP, base_ts=now),
             INVALID_RECORD),
        Case("ok-varint-non-minimal", lambda now: batch(_varint_non_minimal(), count=1, base_ts=now), OK),
        Case("varint-endless", lambda now: batch(_varint_endless(), count=1, base_ts=now), UNKNOWN_SERVER_ERROR),
        Case("gzip-record-length-short", lambda now: batch(_length_too_short(), count=1, codec=GZIP, base_ts=now),
             OK, minikafka_code=INVALID_RECORD, unreadable_by=("confluent-kafka", "kafka-python"),
             note="Kafka's in-place path for compressed batches skips the record size check and stores a batch "
                  "consumers stall on (confluent-kafka, verified); minikafka refuses it"),
        # --- batch-level rules for client batches
        Case("control-batch", lambda now: batch(r2, count=2, attributes=0x20, base_ts=now), INVALID_RECORD),
        Case("control-batch-transactional", lambda now: batch(r2, count=2, attributes=0x30, producer_id=1,
                                                              producer_epoch=0, base_ts=now),
             TRANSACTIONAL_ID_AUTHORIZATION_FAILED, note="the request has no transactional id"),
        Case("producer-id-without-sequence", lambda now: batch(r2, count=2, producer_id=7, producer_epoch=0,
                                                               base_sequence=-1, base_ts=now), INVALID_RECORD),
        Case("magic-1", lambda now: batch(r2, count=2, magic=1, base_ts=now), INVALID_RECORD),
        # --- timestamps
        Case("timestamp-too-new", _ts(2 * 3_600_000), INVALID_TIMESTAMP, batch_index=0),
        Case("timestamp-too-old-topic-bound", _ts(-3_600_000), INVALID_TIMESTAMP,
             topic_config={"message.timestamp.before.max.ms": "60000"}, batch_index=0),
        Case("timestamp-too-new-topic-bound", _ts(120_000), INVALID_TIMESTAMP,
             topic_config={"message.timestamp.after.max.ms": "60000"}, batch_index=0),
        # --- compacted topics
        Case("compacted-null-key", lambda now: batch(records(2), count=2, base_ts=now), INVALID_RECORD,
             topic_config={"cleanup.policy": "compact"}, batch_index=0),
        Case("compacted-null-key-second", lambda now: batch(record(key=b"k") + record(offset_delta=1, key=None),
                                                            count=2, base_ts=now), INVALID_RECORD,
             topic_config={"cleanup.policy": "compact"}, batch_index=1),
        # --- accepted by Kafka
        Case("ok-gap-offset-deltas", lambda now: batch(_gap_deltas(), count=2, base_ts=now), OK),
        Case("ok-max-timestamp-not-max", lambda now: batch(records(3), count=3, base_ts=now, max_ts=now - 50_000), OK),
        Case("ok-record-attributes-set", lambda now: batch(record(attributes=0x7f), count=1, base_ts=now), OK),
        Case("ok-record-attributes-high-bit", lambda now: batch(record(attributes=0x80), count=1, base_ts=now), OK,
             unreadable_by=("kafka-python",), note="kafka-python/aiokafka read the attribute byte as a varint"),
        Case("ok-log-append-time-bit-from-client", lambda now: batch(records(2), count=2, attributes=0x08,
                                                                     base_ts=now), OK),
        Case("log-append-time-bit-no-timestamp", lambda now: batch(records(2), count=2, attributes=0x08,
                                                                   base_ts=-1), INVALID_TIMESTAMP),
        Case("transactional-without-producer-id", lambda now: batch(records(2), count=2, attributes=0x10,
                                                                    base_ts=now),
             TRANSACTIONAL_ID_AUTHORIZATION_FAILED, note="the request has no transactional id"),
        Case("ok-null-value-and-header-value", lambda now: batch(record(value=None, headers=[(b"h", None)]),
                                                                 count=1, base_ts=now), OK),
        Case("ok-snappy", lambda now: batch(records(20), count=20, codec=SNAPPY, base_ts=now), OK),
        Case("ok-lz4", lambda now: batch(records(20), count=20, codec=LZ4, base_ts=now), OK),
        Case("ok-zstd", lambda now: batch(records(20), count=20, codec=ZSTD, base_ts=now), OK),
        Case("ok-gzip", lambda now: batch(records(20), count=20, codec=GZIP, base_ts=now), OK),
        Case("ok-no-timestamp", lambda now: batch(records(1), count=1, base_ts=-1), OK),
        Case("gzip-gap-offset-deltas", lambda now: batch(_gap_deltas(), count=2, codec=GZIP, base_ts=now),
             UNKNOWN_SERVER_ERROR, note="Kafka rebuilds compressed batches with non-consecutive inner offsets and fails"),
        # --- above the Produce handler's offload size (validated in a worker thread)
        Case("big-trailing-bytes", lambda now: batch(records(400, value=b"x" * 1000) + b"\x00", count=400,
                                                     base_ts=now), INVALID_RECORD),
        Case("big-compacted-null-key", lambda now: batch(_keyed_then_keyless(400), count=400, base_ts=now),
             INVALID_RECORD,
             topic_config={"cleanup.policy": "compact"}, batch_index=1),
        Case("ok-big-batch", lambda now: batch(records(400, value=b"x" * 1000), count=400, base_ts=now), OK),
        Case("ok-compacted-keys", lambda now: batch(record(key=b"a") + record(offset_delta=1, key=b"b"),
                                                    count=2, base_ts=now), OK,
             topic_config={"cleanup.policy": "compact"}),
    ]
