"""Unit tests of protocol/record_validator.py (Kafka's LogValidator for client batches)."""
from __future__ import annotations

import time

import pytest

from minikafka.broker.errors import error_code
from minikafka.protocol.record_batch import InvalidRecordError, parse_header, validate_batches
from minikafka.protocol.record_validator import (
    LONG_MAX,
    InvalidTimestampError,
    RecordValidationError,
    UncompressedBatchTooLargeError,
    UndecodableBatchError,
    ValidationSettings,
    _parse_exact,
    decompress_records,
    parse_records,
    settings_for,
    validate_client_batch,
)
from minikafka.storage.log_config import LogConfig
from tests.support.corrupt_batches import (
    GZIP,
    LZ4,
    NONE,
    OK,
    SNAPPY,
    ZSTD,
    batch,
    compress,
    corpus,
    record,
    records,
)

NOW = 1_800_000_000_000


def settings(**kw) -> ValidationSettings:
    return ValidationSettings(**{"topic_partition": "t-0", "now_ms": NOW, **kw})


def validate(data: bytes, s: ValidationSettings | None = None) -> None:
    """What the append path does: header checks, then record-level validation."""
    ((pos, header),) = validate_batches(data)
    validate_client_batch(memoryview(data)[pos:pos + header.size], header, s or settings())


def code_of(data: bytes, s: ValidationSettings | None = None) -> int:
    try:
        validate(data, s)
    except Exception as exc:  # noqa: BLE001 - mapped like the broker maps it
        return error_code(exc)
    return OK


def _case_settings(case) -> ValidationSettings:
    cfg = case.topic_config
    return settings(compacted=cfg.get("cleanup.policy") == "compact",
                    timestamp_before_max_ms=int(cfg.get("message.timestamp.before.max.ms", LONG_MAX)),
                    timestamp_after_max_ms=int(cfg.get("message.timestamp.after.max.ms", 3_600_000)))


# transactional batches without a transactional id are refused by the Produce handler (KIP-890 check)
_HANDLER_CASES = {"control-batch-transactional", "transactional-without-producer-id"}


@pytest.mark.parametrize("case", [c for c in corpus() if c.name not in _HANDLER_CASES], ids=lambda c: c.name)
def test_corpus_case(case):
    assert code_of(case.build(NOW), _case_settings(case)) == case.expected(kafka=False)


@pytest.mark.parametrize("codec", [NONE, GZIP, SNAPPY, LZ4, ZSTD])
def test_valid_batches_of_every_codec_pass(codec):
    data = batch(records(500, value=b"x" * 100), count=500, codec=codec, base_ts=NOW)
    validate(data)
    recs = parse_records(memoryview(data), parse_header(data), 1 << 30)
    assert [r.offset for r in recs] == list(range(500))
    assert all(r.value == b"x" * 100 for r in recs)


@pytest.mark.parametrize("codec", [GZIP, SNAPPY, LZ4, ZSTD])
def test_decompression_is_bounded(codec):
    # 4 MiB of records that compress to a few KB; the cap is 1 MiB
    data = batch(records(4096, value=b"\x00" * 1000), count=4096, codec=codec, base_ts=NOW)
    assert len(data) < 300_000
    with pytest.raises(UncompressedBatchTooLargeError, match="minikafka.max.uncompressed.batch.bytes"):
        validate(data, settings(max_uncompressed_bytes=1 << 20))
    assert code_of(data, settings(max_uncompressed_bytes=1 << 20)) == 87
    validate(data, settings(max_uncompressed_bytes=8 << 20))


def test_zstd_bomb_without_content_size_is_bounded():
    import zstandard
    payload = b"\x00" * (32 << 20)
    cobj = zstandard.ZstdCompressor(write_content_size=False).compressobj()
    body = cobj.compress(payload) + cobj.flush()
    data = batch(body, count=1, codec=ZSTD, compress_payload=False, base_ts=NOW)
    with pytest.raises(UncompressedBatchTooLargeError):
        decompress_records(memoryview(data), ZSTD, 1 << 20)


def test_uncompressed_batch_over_cap():
    data = batch(records(100, value=b"x" * 1000), count=100, base_ts=NOW)
    with pytest.raises(UncompressedBatchTooLargeError):
        validate(data, settings(max_uncompressed_bytes=50_000))


def test_timestamp_errors_carry_kafka_messages():
    data = batch(records(3), count=3, base_ts=NOW + 3_600_000)  # record 0 on the bound, 1 and 2 beyond
    with pytest.raises(InvalidTimestampError) as info:
        validate(data)
    exc = info.value
    assert str(exc) == "One or more records have been rejected due to invalid timestamp"
    assert [i for i, _ in exc.record_errors] == [1, 2]
    i, msg = exc.record_errors[0]
    ts = NOW + 3_600_001
    lo = NOW - LONG_MAX
    assert msg == (f"Timestamp {ts} of message with offset 1 is out of range. The timestamp should be within "
                   f"[{lo}, {NOW + 3_600_000}]")
    assert error_code(exc) == 32


def test_after_bound_at_long_max_prints_java_overflow():
    data = batch(records(1), count=1, base_ts=0)
    with pytest.raises(InvalidTimestampError) as info:
        validate(data, settings(timestamp_before_max_ms=1000, timestamp_after_max_ms=LONG_MAX))
    hi = NOW + LONG_MAX - 2**64  # Java long arithmetic wraps
    assert info.value.record_errors[0][1].endswith(f"[{NOW - 1000}, {hi}]")


def test_no_timestamp_records_skip_range_check():
    body = record(offset_delta=0) + record(offset_delta=1)  # timestamp delta 0 on base -1: no timestamp
    validate(batch(body, count=2, base_ts=-1), settings(timestamp_before_max_ms=0, timestamp_after_max_ms=0))


def test_log_append_time_topic_refuses_client_log_append_bit():
    data = batch(records(2), count=2, attributes=0x08, base_ts=NOW)
    validate(data)  # CreateTime topic: fine, as Kafka
    with pytest.raises(InvalidTimestampError) as info:
        validate(data, settings(log_append_time=True))
    assert [i for i, _ in info.value.record_errors] == [0, 1]
    assert "Producer should not set timestamp type to LogAppendTime" in info.value.record_errors[0][1]
    validate(batch(records(2), count=2, base_ts=NOW - 10**12), settings(log_append_time=True))  # no range check


def test_compacted_topic_lists_every_keyless_record():
    data = batch(record(key=b"a") + record(offset_delta=1) + record(offset_delta=2), count=3, base_ts=NOW)
    with pytest.raises(RecordValidationError) as info:
        validate(data, settings(compacted=True, topic_partition="c-3"))
    exc = info.value
    assert not isinstance(exc, InvalidTimestampError)
    msg = "Compacted topic cannot accept message without key in topic partition c-3."
    assert exc.record_errors == [(1, msg), (2, msg)]
    assert str(exc).startswith("One or more records have been rejected due to 2 record errors in total")
    assert error_code(exc) == 87


def test_compressed_inner_offsets_must_be_consecutive():
    body = record(offset_delta=0) + record(offset_delta=2)
    with pytest.raises(UndecodableBatchError):
        validate(batch(body, count=2, codec=LZ4, base_ts=NOW))
    validate(batch(body, count=2, base_ts=NOW))  # uncompressed: Kafka stores it as is


def test_exact_parser_agrees_with_native_parser_on_valid_batches():
    body = b"".join(record(offset_delta=i, ts_delta=i * 7, key=None if i % 3 else b"k%d" % i,
                           value=None if i % 5 == 0 else b"v" * i, headers=[(b"h", b"x"), (b"n", None)] * (i % 2))
                    for i in range(50))
    data = batch(body, count=50, base_ts=NOW)
    header = parse_header(data)
    native = parse_records(memoryview(data), header, 1 << 30)
    exact = _parse_exact(data, 61, len(data), header, False)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in native] == \
           [(r.offset, r.timestamp, r.key, r.value) for r in exact]


def test_record_attribute_high_bit_is_accepted_like_kafka():
    # aiokafka reads the attribute byte as a varint and fails; the exact parser decides (Kafka accepts)
    validate(batch(record(attributes=0x80) + record(offset_delta=1, attributes=0xFF), count=2, base_ts=NOW))


def test_client_rules_control_and_sequence():
    with pytest.raises(InvalidRecordError, match="control"):
        validate(batch(records(1), count=1, attributes=0x20, base_ts=NOW))
    with pytest.raises(InvalidRecordError, match="sequence"):
        validate(batch(records(1), count=1, producer_id=5, producer_epoch=0, base_sequence=-1, base_ts=NOW))


def test_settings_from_log_config():
    cfg = LogConfig.from_props({"cleanup.policy": "compact", "message.timestamp.before.max.ms": "5",
                                "message.timestamp.type": "LogAppendTime"})
    s = settings_for(cfg, "x-1", 42)
    assert (s.compacted, s.log_append_time, s.timestamp_before_max_ms, s.timestamp_after_max_ms, s.now_ms) == \
           (True, True, 5, 3_600_000, 42)
    assert s.max_uncompressed_bytes == 64 * 1024 * 1024


def test_valid_batches_stay_on_the_native_path():
    """Minimal varints (what every client writes) never send a batch to the slow exact parser;
    speed itself is measured in bench/ (BENCHMARKS.md, "Validation cost")."""
    from minikafka.protocol import record_validator as rv
    for value, n in ((b"x" * 1024, 1000), (b"y" * 100, 5000), (b"", 300)):
        data = batch(records(n, value=value), count=n, base_ts=int(time.time() * 1000))
        ((pos, header),) = validate_batches(data)
        view = memoryview(data)
        assert not rv._may_hold_overlong_varint(view, rv._parse_native(view), header)


# ---- the rules one by one (pure functions over parsed records), and how their refusals are collected

def _header(attributes: int = 0, n: int = 2):
    from minikafka.protocol.record_batch import BatchHeader
    return BatchHeader(0, 0, 0, 2, 0, attributes, n - 1, NOW, NOW, -1, -1, -1, n)


def _records(*specs):
    from minikafka.protocol.record_validator import _Record
    return [_Record(i, ts, key, b"v") for i, (ts, key) in enumerate(specs)]


def test_each_rule_refuses_only_its_records():
    from minikafka.protocol import record_validator as rv
    recs = _records((NOW, None), (NOW - 10**12, b"k"), (-1, b"k"))
    compacted = settings(compacted=True, timestamp_before_max_ms=1000)
    assert [i for i, _, ts in rv._keys_on_compacted_topics(recs, _header(n=3), compacted) if not ts] == [0]
    assert [i for i, _, ts in rv._create_time_window(recs, _header(n=3), compacted) if ts] == [1]
    assert rv._no_log_append_time_from_clients(recs, _header(n=3), compacted) == []
    log_append_bit = _header(attributes=0x08, n=3)
    assert [i for i, *_ in rv._no_log_append_time_from_clients(recs, log_append_bit, settings())] == [2]
    assert len(rv._no_log_append_time_from_clients(recs, log_append_bit, settings(log_append_time=True))) == 3


def test_a_record_is_reported_once_for_its_first_rule():
    from minikafka.protocol import record_validator as rv
    recs = _records((NOW - 10**12, None), (NOW, b"k"))
    with pytest.raises(RecordValidationError) as info:  # keyless and too old: the key rule reports it
        rv._check_records(recs, _header(), settings(compacted=True, timestamp_before_max_ms=1000))
    assert [i for i, _ in info.value.record_errors] == [0] and "without key" in info.value.record_errors[0][1]
    recs = _records((NOW - 10**12, None), (NOW - 10**12, b"k"))
    with pytest.raises(InvalidTimestampError) as info:  # any timestamp refusal makes it INVALID_TIMESTAMP
        rv._check_records(recs, _header(), settings(compacted=True, timestamp_before_max_ms=1000))
    assert [i for i, _ in info.value.record_errors] == [0, 1]
