"""The native record scanner (protocol/_recordscan.c) against the exact Python parser
(`record_validator._parse_exact`, Kafka's DefaultRecord.readFrom): whenever the scanner says a batch is
well-formed, the exact parser must accept it with the same record count, and the scanner's summary must
equal the values computed from the exact parser's records. The scanner may refuse (None) what the exact
parser accepts only for unusual encodings (negative lengths other than -1, varlongs beyond 64 bits).

The validator's fast path (scan summary + rules) must answer exactly as the exact path does."""
from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from minikafka.protocol import record_validator as rv
from minikafka.protocol.record_batch import HEADER_SIZE, InvalidRecordError, parse_header, validate_batches
from minikafka.protocol.record_validator import (
    LONG_MAX,
    UndecodableBatchError,
    ValidationSettings,
    _parse_exact,
    decompress_records,
)
from tests.support.corrupt_batches import GZIP, LZ4, NONE, SNAPPY, ZSTD, batch, corpus, record, records, uvarint, varint

# The project's set-up builds the extension wherever a C compiler exists (CI, dev machines): a missing
# module here is a failed build, not a reason to skip (without a compiler the validator uses aiokafka).
from minikafka.protocol import _recordscan  # noqa: E402

scan = _recordscan.scan

NOW = 1_800_000_000_000


def _records_buffer(data: bytes):
    header = parse_header(data)
    codec = header.attributes & 0x07
    if codec == NONE:
        return data, HEADER_SIZE, header
    return decompress_records(memoryview(data), codec, 1 << 30), 0, header


def _exact(buf, start, header):
    try:
        return _parse_exact(buf, start, len(buf), header, False)
    except (InvalidRecordError, UndecodableBatchError):
        return None


def _expected_summary(recs, header) -> tuple:
    """What scan() must answer for records the exact parser returned (CreateTime batches)."""
    ts = [r.timestamp - header.base_timestamp for r in recs]
    offs = [r.offset - header.base_offset for r in recs]
    keyless = [i for i, r in enumerate(recs) if r.key is None]
    if not recs:
        return (0, 0, -1, True, 0, 0)
    return (min(ts), max(ts), keyless[0] if keyless else -1, offs == list(range(len(recs))), min(offs), max(offs))


def _check_agrees(data: bytes, *, exact_verdict: bool = True) -> tuple | None:
    """scan vs _parse_exact on one whole batch; exact_verdict: both verdicts must be equal (else only
    'scan ok => exact ok')."""
    buf, start, header = _records_buffer(data)
    summary = scan(buf, start, header.record_count)
    recs = _exact(buf, start, header)
    if exact_verdict:
        assert (summary is not None) == (recs is not None), (summary, recs)
    if summary is not None:
        assert recs is not None
        assert len(recs) == header.record_count
        if not header.attributes & 0x08:
            assert summary == _expected_summary(recs, header)
        else:
            assert summary[2:] == _expected_summary(recs, header)[2:]
    return summary


# ----------------------------------------------------------------------------------- the corpus

def _decodable(case) -> bytes | None:
    data = case.build(NOW)
    try:
        _records_buffer(data)
    except Exception:  # noqa: BLE001 - codec errors: no records to scan
        return None
    return data


@pytest.mark.parametrize("case", [c for c in corpus() if _decodable(c) is not None], ids=lambda c: c.name)
def test_corpus_case_agrees_with_exact_parser(case):
    """Every corpus case whose payload decompresses (the others have no records to scan)."""
    _check_agrees(_decodable(case))


def test_corpus_framing_verdicts():
    """The scanner refuses every framing defect of the corpus and accepts the odd-but-valid batches."""
    refused = {c.name for c in corpus() if (d := _decodable(c)) is not None and scan(*_records_buffer(d)[:2],
                                                                                        parse_header(d).record_count) is None}
    for name in ("count-too-high", "count-too-low", "count-int-max", "trailing-bytes", "record-length-short",
                 "record-length-long", "record-length-negative", "record-past-batch-end", "key-overruns-record",
                 "header-count-negative", "header-key-negative", "varint-too-long", "key-length-varint-too-long",
                 "offset-delta-varint-huge", "gzip-varint-too-long", "varint-endless", "big-trailing-bytes",
                 "lz4-trailing-bytes", "gzip-record-length-short"):
        assert name in refused, name
    for name in ("ok-varint-non-minimal", "ok-record-attributes-high-bit", "ok-null-value-and-header-value",
                 "ok-big-batch", "ok-gap-offset-deltas", "ok-no-timestamp", "ok-gzip", "ok-zstd"):
        assert name not in refused, name


# ------------------------------------------------------------------------------ valid shapes

def _shapes():
    big = b"B" * 300_000
    yield "keys", b"".join(record(offset_delta=i, ts_delta=i, key=b"k%d" % i, value=b"v") for i in range(20)), 20
    yield "null-keys-values", b"".join(record(offset_delta=i, key=None, value=None) for i in range(7)), 7
    yield "headers", b"".join(record(offset_delta=i, key=b"k", headers=[(b"h%d" % j, b"x" * j) for j in range(i)]
                                     + [(b"n", None), (b"", b"")]) for i in range(12)), 12
    yield "large-values", record(value=big) + record(offset_delta=1, key=b"k" * 70_000, value=big), 2
    yield "small-records", records(5000, value=b""), 5000
    yield "empty-key", record(key=b"", value=b""), 1
    yield "negative-ts-deltas", b"".join(record(offset_delta=i, ts_delta=-i * 1000) for i in range(5)), 5
    yield "huge-ts-deltas", record(ts_delta=2**62) + record(offset_delta=1, ts_delta=-(2**63)), 2
    yield "offset-gaps", record(offset_delta=3) + record(offset_delta=-7) + record(offset_delta=2**31 - 1), 3
    yield "one-record", record(), 1
    yield "mixed", b"".join(record(offset_delta=i, ts_delta=i * 7, key=None if i % 3 else b"k%d" % i,
                                   value=None if i % 5 == 0 else b"v" * i,
                                   headers=[(b"h", b"x"), (b"n", None)] * (i % 2)) for i in range(50)), 50


@pytest.mark.parametrize("name,payload,count", list(_shapes()), ids=[s[0] for s in _shapes()])
@pytest.mark.parametrize("codec", [NONE, GZIP, ZSTD])
def test_valid_shapes(name, payload, count, codec):
    data = batch(payload, count=count, codec=codec, base_ts=NOW)
    summary = _check_agrees(data)
    assert summary is not None


def test_empty_batch_and_buffers():
    assert scan(b"", 0, 0) == (0, 0, -1, True, 0, 0)
    assert scan(b"\x00", 0, 0) is None  # trailing byte
    payload = records(3)
    expected = scan(payload, 0, 3)
    assert expected == (0, 2, 0, True, 0, 2)
    assert scan(bytearray(payload), 0, 3) == expected
    assert scan(memoryview(payload), 0, 3) == expected
    assert scan(memoryview(bytearray(payload)).toreadonly(), 0, 3) == expected
    assert scan(b"xyz" + payload, 3, 3) == expected
    assert scan(memoryview(b"xyz" + payload)[3:], 0, 3) == expected
    assert scan(payload, 0, -1) is None
    assert scan(payload, 0, 2**31 - 1) is None
    with pytest.raises(ValueError):
        scan(payload, len(payload) + 1, 1)
    with pytest.raises(ValueError):
        scan(payload, -1, 1)
    with pytest.raises(TypeError):
        scan("text", 0, 0)


def test_varint_limits():
    body = bytes([0]) + varint(0) + b"\x80\x80\x80\x80\x80\x00" + varint(-1) + varint(1) + b"v" + varint(0)
    assert scan(varint(len(body)) + body, 0, 1) is None  # 5th byte with the MSB set
    body = bytes([0]) + varint(0) + b"\x80\x80\x80\x80\x0f" + varint(-1) + varint(1) + b"v" + varint(0)
    assert scan(varint(len(body)) + body, 0, 1) is not None  # 5 bytes: allowed (bits beyond 32 dropped)
    # timestampDelta as a 10-byte varlong: allowed; an 11th byte is not
    ts10 = b"\x80" * 9 + b"\x01"
    body = bytes([0]) + ts10 + varint(0) + varint(-1) + varint(1) + b"v" + varint(0)
    data = varint(len(body)) + body
    assert scan(data, 0, 1) == (2**62, 2**62, 0, True, 0, 0)
    body = bytes([0]) + b"\xff" * 9 + b"\x01" + varint(0) + varint(-1) + varint(1) + b"v" + varint(0)
    assert scan(varint(len(body)) + body, 0, 1) == (-(2**63), -(2**63), 0, True, 0, 0)
    body = bytes([0]) + b"\xff" * 9 + b"\x03" + varint(0) + varint(-1) + varint(1) + b"v" + varint(0)
    assert scan(varint(len(body)) + body, 0, 1) is None  # a 10th byte with bits beyond 64
    body = bytes([0]) + b"\x80" * 10 + b"\x01" + varint(0) + varint(-1) + varint(1) + b"v" + varint(0)
    assert scan(varint(len(body)) + body, 0, 1) is None
    # unusual lengths (-2: Kafka reads a null key, the exact parser decides)
    body = bytes([0]) + varint(0) + varint(0) + varint(-2) + varint(1) + b"v" + varint(0)
    assert scan(varint(len(body)) + body, 0, 1) is None
    # a record length bomb
    assert scan(uvarint(2**31 - 2) + b"\x00" * 10, 0, 1) is None


# ------------------------------------------------------------------------- property: mutations

_record_spec = st.fixed_dictionaries({
    "ts_delta": st.one_of(st.integers(-1000, 1000), st.integers(-(2**63), 2**63 - 1)),
    "offset_delta": st.one_of(st.integers(0, 50), st.integers(-(2**31), 2**31 - 1)),
    "key": st.one_of(st.none(), st.binary(max_size=20)),
    "value": st.one_of(st.none(), st.binary(max_size=200)),
    "headers": st.lists(st.tuples(st.binary(max_size=5), st.one_of(st.none(), st.binary(max_size=5))), max_size=3),
    "attributes": st.integers(0, 255),
})

_mutation = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(1, 255)),
    st.tuples(st.just("insert"), st.integers(0, 10**6), st.binary(min_size=1, max_size=4)),
    st.tuples(st.just("delete"), st.integers(0, 10**6), st.integers(1, 4)),
    st.tuples(st.just("bomb"), st.integers(0, 10**6), st.integers(5, 12)),
    st.tuples(st.just("set"), st.integers(0, 10**6), st.sampled_from([0x00, 0x01, 0x7F, 0x80, 0xFF, 0xFE])),
)


def _mutate(payload: bytes, ops) -> bytes:
    b = bytearray(payload)
    for op, pos, arg in ops:
        pos = pos % (len(b) + 1)
        if op == "flip" and pos < len(b):
            b[pos] ^= arg
        elif op == "set" and pos < len(b):
            b[pos] = arg
        elif op == "insert":
            b[pos:pos] = arg
        elif op == "delete":
            del b[pos:pos + arg]
        elif op == "bomb":  # an over-long varint in place of one byte
            b[pos:pos + 1] = b"\xff" * arg + b"\x01"
    return bytes(b)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(specs=st.lists(_record_spec, min_size=0, max_size=8), ops=st.lists(_mutation, max_size=3),
       count_shift=st.sampled_from([0, 0, 0, -1, 1]))
def test_mutated_batches(specs, ops, count_shift):
    payload = b"".join(record(**spec) for spec in specs)
    # unmutated: the scanner accepts (only -1 null lengths are written)
    _check_agrees(batch(payload, count=len(specs), base_ts=NOW, last_offset_delta=0))
    mutated = _mutate(payload, ops)
    count = max(0, len(specs) + count_shift)
    data = batch(mutated, count=count, base_ts=NOW, last_offset_delta=0)
    _check_agrees(data, exact_verdict=False)


# ------------------------------------------------------------------ the validator's fast path

def _outcome(data: bytes, s: ValidationSettings):
    ((pos, header),) = validate_batches(data)
    try:
        rv.validate_client_batch(memoryview(data)[pos:pos + header.size], header, s)
    except Exception as exc:  # noqa: BLE001 - compared as type, message and record_errors
        return type(exc), str(exc), getattr(exc, "record_errors", None)
    return None


def _both_paths(monkeypatch, data: bytes, s: ValidationSettings):
    monkeypatch.setattr(rv, "_scan", scan)
    fast = _outcome(data, s)
    monkeypatch.setattr(rv, "_scan", None)
    pure = _outcome(data, s)
    monkeypatch.setattr(rv, "_scan", scan)
    return fast, pure


def _case_settings(case) -> ValidationSettings:
    cfg = case.topic_config
    return ValidationSettings(topic_partition="t-0", now_ms=NOW, compacted=cfg.get("cleanup.policy") == "compact",
                              timestamp_before_max_ms=int(cfg.get("message.timestamp.before.max.ms", LONG_MAX)),
                              timestamp_after_max_ms=int(cfg.get("message.timestamp.after.max.ms", 3_600_000)))


def _header_valid(case) -> bool:
    try:
        validate_batches(case.build(NOW))
        return True
    except Exception:  # noqa: BLE001 - refused by the header checks, before record validation
        return False


@pytest.mark.parametrize("case", [c for c in corpus() if _header_valid(c)], ids=lambda c: c.name)
def test_fast_path_answers_like_pure_path(monkeypatch, case):
    """Every corpus case that reaches record validation (the others are refused by header checks)."""
    data = case.build(NOW)
    fast, pure = _both_paths(monkeypatch, data, _case_settings(case))
    assert fast == pure


@settings(max_examples=400, deadline=None)
@given(ts_deltas=st.lists(st.integers(-5_000_000, 5_000_000), min_size=1, max_size=6),
       keyless=st.lists(st.booleans(), min_size=6, max_size=6),
       base_ts=st.sampled_from([NOW, NOW - 4_000_000, NOW + 4_000_000, -1, 0]),
       max_ts_shift=st.sampled_from([None, 0, -10_000_000]),
       attributes=st.sampled_from([0, 0x08]),
       codec=st.sampled_from([NONE, LZ4]),
       gap=st.booleans(),
       compacted=st.booleans(), log_append_time=st.booleans(),
       before=st.sampled_from([LONG_MAX, 3_600_000, 10]), after=st.sampled_from([3_600_000, 10, LONG_MAX]))
def test_fast_path_rules_property(ts_deltas, keyless, base_ts, max_ts_shift, attributes, codec, gap, compacted,
                                  log_append_time, before, after):
    n = len(ts_deltas)
    payload = b"".join(record(offset_delta=i + (1 if gap and i == n - 1 and n > 1 else 0), ts_delta=d,
                              key=None if keyless[i] else b"k") for i, d in enumerate(ts_deltas))
    max_ts = None if max_ts_shift is None else base_ts + max_ts_shift
    data = batch(payload, count=n, codec=codec, base_ts=base_ts, max_ts=max_ts, attributes=attributes,
                 last_offset_delta=n - 1)
    s = ValidationSettings(topic_partition="t-0", now_ms=NOW, compacted=compacted, log_append_time=log_append_time,
                           timestamp_before_max_ms=before, timestamp_after_max_ms=after)
    mp = pytest.MonkeyPatch()
    try:
        fast, pure = _both_paths(mp, data, s)
    finally:
        mp.undo()
    assert fast == pure


def test_valid_batches_skip_the_exact_parser(monkeypatch):
    def boom(*a, **k):
        raise AssertionError("exact parser called")
    monkeypatch.setattr(rv, "_scan", scan)
    monkeypatch.setattr(rv, "_parse_exact", boom)
    s = ValidationSettings(topic_partition="t-0", now_ms=NOW)
    for codec in (NONE, GZIP, SNAPPY, LZ4, ZSTD):
        data = batch(records(300, value=b"x" * 100), count=300, codec=codec, base_ts=NOW)
        assert _outcome(data, s) is None


def test_pure_validator_env():
    if os.environ.get("MINIKAFKA_PURE_VALIDATOR") == "1":
        assert rv._scan is None
    else:
        assert rv._scan is scan
