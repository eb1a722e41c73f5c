"""Record-level validation of client batches (Kafka's LogValidator for AppendOrigin.CLIENT).

`validate_client_batch` decides whether one record batch v2 from a Produce request may be stored.
The 61-byte header has already passed `record_batch.validate_batches` (length, magic, CRC, count vs
lastOffsetDelta). Here:

* batch rules for clients: no control batches, producer id implies a base sequence
  (`record_batch.check_client_batch`);
* codec 0-4 and a payload that decompresses, BOUNDED by `minikafka.max.uncompressed.batch.bytes`
  (a deliberate limit Kafka does not have: a few KB of zstd must not inflate into gigabytes);
* record framing: the declared count equals the records present, every record's length and varints,
  key/value/header lengths consume exactly the record's bytes, no trailing bytes;
* compressed batches: offset deltas 0..n-1 (Kafka rebuilds such batches and fails; we refuse them);
* per record: compacted topics need keys; CreateTime timestamps within
  [now - message.timestamp.before.max.ms, now + message.timestamp.after.max.ms]; a client may not set
  the LogAppendTime bit on records without a timestamp (or on a LogAppendTime topic). Each of these is
  one function (`RECORD_RULES`); `_check_records` collects their refusals into one error.

Speed: when the C extension `minikafka.protocol._recordscan` is built (it is optional: skipped where no
C compiler exists), `validate_client_batch` scans the records natively with the GIL released (~0.1 ms
per MB) into a summary (timestamp and offset delta bounds, first keyless record, offsets 0..n-1) and
checks the per-record rules from it; when the scan refuses a batch or a rule fails, `_parse_exact`
re-parses it so that verdicts, messages and record indices are exactly those below.
MINIKAFKA_PURE_VALIDATOR=1 (read at import) disables the extension (tests).

Without the extension, framing is checked by aiokafka's Cython record parser (native speed, ~0.3 ms per MB of
1 KiB records); the per-record rules run as C-level map()/min()/max() passes over its records. Only
when the native parser refuses a batch does the pure-Python parser below (`_parse_exact`) run, to
give Kafka's exact verdict (which error, which record): it also accepts what the native parser gets
wrong (record attribute bytes >= 0x80, which aiokafka reads as a varint).

Error codes, as Apache Kafka 4.3.1 answers (tests/integration/clients/test_corrupt_batches.py):
unknown codec, undecodable payload, a record length prefix whose varint never ends, inner offsets of
a compressed batch that are not 0..n-1 -> UNKNOWN_SERVER_ERROR (-1) (`UndecodableBatchError`);
framing -> INVALID_RECORD (87); timestamps -> INVALID_TIMESTAMP (32) with record_errors; compacted
topic without key -> INVALID_RECORD with record_errors.
"""
from __future__ import annotations

import os
import struct
import zlib
from typing import NamedTuple
from functools import partial
from itertools import repeat
from operator import attrgetter, ne, sub

from minikafka.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    HEADER_SIZE,
    TIMESTAMP_TYPE_MASK,
    BatchHeader,
    InvalidRecordError,
    check_client_batch,
)

UNCOMPRESSED, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_NAMES = {UNCOMPRESSED: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}
DEFAULT_MAX_UNCOMPRESSED_BATCH_BYTES = 64 * 1024 * 1024
NO_TIMESTAMP = -1
LONG_MAX = 2**63 - 1


class RecordValidationError(InvalidRecordError):
    """One or more records were refused (Kafka RecordValidationException): carries record_errors."""

    def __init__(self, message: str, record_errors: list[tuple[int, str]]) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class InvalidTimestampError(RecordValidationError):
    """A record timestamp is out of the topic's bounds (Kafka INVALID_TIMESTAMP)."""


class UncompressedBatchTooLargeError(InvalidRecordError):
    """The batch inflates beyond minikafka.max.uncompressed.batch.bytes (INVALID_RECORD)."""


class UndecodableBatchError(Exception):
    """Kafka answers these with UNKNOWN_SERVER_ERROR: unknown codec, a payload that does not
    decompress, a record length varint that never ends, compressed inner offsets not 0..n-1."""


class ValidationSettings(NamedTuple):  # built per partition per Produce: a tuple is cheap to make
    topic_partition: str  # "<topic>-<partition>", as Kafka's messages name it
    compacted: bool = False
    log_append_time: bool = False  # the topic's message.timestamp.type
    timestamp_before_max_ms: int = LONG_MAX
    timestamp_after_max_ms: int = 3_600_000
    max_uncompressed_bytes: int = DEFAULT_MAX_UNCOMPRESSED_BATCH_BYTES
    now_ms: int = 0


def settings_for(config, topic_partition: str, now_ms: int) -> ValidationSettings:
    """Settings from a storage LogConfig (duck-typed so that protocol/ does not import storage/)."""
    return ValidationSettings(
        topic_partition=topic_partition, compacted=config.compact_enabled, log_append_time=config.log_append_time,
        timestamp_before_max_ms=config.message_timestamp_before_max_ms,
        timestamp_after_max_ms=config.message_timestamp_after_max_ms,
        max_uncompressed_bytes=config.max_uncompressed_batch_bytes, now_ms=now_ms)


# ----------------------------------------------------------------------------------- decompression

def _too_large(cap: int) -> UncompressedBatchTooLargeError:
    return UncompressedBatchTooLargeError(
        f"Record batch inflates to more than {cap} bytes (minikafka.max.uncompressed.batch.bytes)")


def _gunzip(data: memoryview, cap: int) -> bytes:
    out: list[bytes] = []
    size = 0
    rest: bytes | memoryview = data
    while True:
        d = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            chunk = d.decompress(rest, cap + 1 - size)
        except zlib.error as exc:
            raise UndecodableBatchError(f"gzip payload does not decompress: {exc}") from None
        size += len(chunk)
        out.append(chunk)
        if size > cap:
            raise _too_large(cap)
        if not d.eof:
            if d.unconsumed_tail:  # stopped at the cap with input left
                raise _too_large(cap)
            raise UndecodableBatchError("gzip payload is truncated")
        rest = d.unused_data
        if not rest:
            break
        if rest[:2] != b"\x1f\x8b":  # Java's GZIPInputStream ignores bytes after the last member
            break
    return out[0] if len(out) == 1 else b"".join(out)


def _unzstd(data: memoryview, cap: int) -> bytes:
    import zstandard
    try:
        size = zstandard.get_frame_parameters(data).content_size
    except zstandard.ZstdError as exc:
        raise UndecodableBatchError(f"zstd payload does not decompress: {exc}") from None
    if size != zstandard.CONTENTSIZE_UNKNOWN:
        if size > cap:
            raise _too_large(cap)
        try:  # one frame of declared size: one exact allocation
            return zstandard.ZstdDecompressor().decompress(data, allow_extra_data=False)
        except zstandard.ZstdError:
            pass  # several frames (Java's ZstdInputStream reads them all) or garbage: stream below
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(bytes(data), read_across_frames=True)
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = reader.read(min(1 << 20, cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > cap:
                raise _too_large(cap)
        return b"".join(chunks)
    except zstandard.ZstdError as exc:
        raise UndecodableBatchError(f"zstd payload does not decompress: {exc}") from None


def _unlz4(data: memoryview, cap: int) -> bytes:
    """One exact allocation when the frame declares its content size (librdkafka's do), else output
    in 1 MiB steps: never a cap-sized buffer per batch (above glibc's mmap threshold, that costs a
    fresh mapping and its page faults every time)."""
    import lz4.frame
    raw = bytes(data)
    try:
        declared = lz4.frame.get_frame_info(raw).get("content_size") or 0
    except RuntimeError as exc:
        raise UndecodableBatchError(f"lz4 payload does not decompress: {exc}") from None
    if declared > cap:
        raise _too_large(cap)
    d = lz4.frame.LZ4FrameDecompressor()
    chunks: list[bytes] = []
    total = 0
    try:
        while True:
            out = d.decompress(raw, max_length=declared or min(1 << 20, cap + 1 - total))
            raw = b""
            chunks.append(out)
            total += len(out)
            if total > cap:
                raise _too_large(cap)
            if d.eof:
                break
            if d.needs_input:
                raise UndecodableBatchError("lz4 payload is truncated")
            if declared and total >= declared:
                declared = 0  # more output than declared: continue in bounded steps
    except RuntimeError as exc:
        raise UndecodableBatchError(f"lz4 payload does not decompress: {exc}") from None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_INT32 = struct.Struct(">i")


def _unsnappy(data: memoryview, cap: int) -> bytes:
    """Kafka's Java client writes snappy in xerial framing (magic, two int32 versions, then int32-length
    prefixed raw blocks); without the magic the payload is one raw snappy block."""
    import cramjam
    blocks: list[memoryview] = []
    if bytes(data[:8]) == _XERIAL_MAGIC and len(data) >= 16:
        pos = 16
        while pos < len(data):
            if pos + 4 > len(data):
                raise UndecodableBatchError("snappy payload is truncated")
            (n,) = _INT32.unpack_from(data, pos)
            if n < 0 or pos + 4 + n > len(data):
                raise UndecodableBatchError("snappy block length out of range")
            blocks.append(data[pos + 4:pos + 4 + n])
            pos += 4 + n
    else:
        blocks.append(data)
    try:
        total = 0
        for b in blocks:
            total += cramjam.snappy.decompress_raw_len(b)
            if total > cap:
                raise _too_large(cap)
        out = [bytes(cramjam.snappy.decompress_raw(b)) for b in blocks]
    except cramjam.DecompressionError as exc:
        raise UndecodableBatchError(f"snappy payload does not decompress: {exc}") from None
    return out[0] if len(out) == 1 else b"".join(out)


_DECOMPRESS = {GZIP: _gunzip, SNAPPY: _unsnappy, LZ4: _unlz4, ZSTD: _unzstd}


def declared_inflated_size(batch: memoryview) -> int | None:
    """The inflated size a compressed batch declares in its frame header (zstd, lz4 frames carry it;
    librdkafka and the Java client write it), 0 for an uncompressed batch, None if unknown. A hint for
    where to validate (inline or in a worker thread), never trusted for the bound itself."""
    codec = batch[ATTRIBUTES_OFFSET + 1] & COMPRESSION_MASK
    if codec == UNCOMPRESSED:
        return 0
    payload = batch[HEADER_SIZE:]
    try:
        if codec == ZSTD:
            import zstandard
            size = zstandard.get_frame_parameters(payload).content_size
            return None if size == zstandard.CONTENTSIZE_UNKNOWN else size
        if codec == LZ4:
            import lz4.frame
            return lz4.frame.get_frame_info(bytes(payload[:32])).get("content_size") or None
    except Exception:  # noqa: BLE001 - garbage: let validation (in a worker) answer it
        return None
    return None


def decompress_records(batch: memoryview, codec: int, cap: int) -> bytes:
    """The inflated records of a compressed batch (at most `cap` bytes)."""
    fn = _DECOMPRESS.get(codec)
    if fn is None:
        raise UndecodableBatchError(f"Unknown compression type id: {codec}")
    return fn(batch[HEADER_SIZE:], cap)


# ----------------------------------------------------------------------------------------- parsing

class _Record:
    """What the per-record rules need (as aiokafka's DefaultRecord: timestamp -1 when absent)."""
    __slots__ = ("offset", "timestamp", "key", "value")

    def __init__(self, offset: int, timestamp: int, key: bytes | None, value: bytes | None) -> None:
        self.offset, self.timestamp, self.key, self.value = offset, timestamp, key, value


class _Underflow(Exception):
    pass


class _TooLong(Exception):
    pass


def _varint(buf, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """Kafka's ByteUtils.readVarint/readVarlong: zig-zag, at most 5 (int) / 10 (long) bytes."""
    value = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise _Underflow
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            if max_bytes == 5:
                value &= 0xFFFFFFFF
                out = (value >> 1) ^ -(value & 1)
                return (out - (1 << 32) if out >= 1 << 31 else out), pos
            return (value >> 1) ^ -(value & 1), pos
        shift += 7
    raise _TooLong


def _parse_exact(buf, pos: int, end: int, header: BatchHeader, compressed: bool) -> list[_Record]:
    """Kafka's record iterator (DefaultRecord.readFrom) in Python: slow, exact; used only when the
    native parser refuses a batch. Raises InvalidRecordError / UndecodableBatchError."""
    out: list[_Record] = []
    base_ts = header.base_timestamp
    log_append = header.attributes & TIMESTAMP_TYPE_MASK
    for _ in range(header.record_count):
        if pos >= end:
            raise InvalidRecordError("Incorrect declared batch size, premature EOF reached")
        try:
            size, pos = _varint(buf, pos, end, 5)
        except _Underflow:
            raise InvalidRecordError("Incorrect declared batch size, premature EOF reached") from None
        except _TooLong:
            raise UndecodableBatchError("Varint is too long, the most significant bit in the 5th byte is set") \
                from None
        if size < 0 or end - pos < size:
            raise InvalidRecordError(f"Invalid record size: expected {size} bytes in record payload, but "
                                     f"the record batch has only {end - pos} bytes left")
        rec_end = pos + size
        start = pos
        try:
            if pos >= rec_end:
                raise _Underflow
            pos += 1  # attributes: one byte, unused
            ts_delta, pos = _varint(buf, pos, rec_end, 10)
            offset_delta, pos = _varint(buf, pos, rec_end, 5)
            key_len, pos = _varint(buf, pos, rec_end, 5)
            key = None
            if key_len >= 0:
                if pos + key_len > rec_end:
                    raise _Underflow
                key = bytes(buf[pos:pos + key_len])
                pos += key_len
            value_len, pos = _varint(buf, pos, rec_end, 5)
            value = None
            if value_len >= 0:
                if pos + value_len > rec_end:
                    raise _Underflow
                value = bytes(buf[pos:pos + value_len])
                pos += value_len
            n_headers, pos = _varint(buf, pos, rec_end, 5)
            if n_headers < 0:
                raise InvalidRecordError(f"Found invalid number of record headers {n_headers}")
            for _h in range(n_headers):
                hk, pos = _varint(buf, pos, rec_end, 5)
                if hk < 0:
                    raise InvalidRecordError(f"Invalid negative header key size {hk}")
                if pos + hk > rec_end:
                    raise _Underflow
                pos += hk
                hv, pos = _varint(buf, pos, rec_end, 5)
                if hv >= 0:
                    if pos + hv > rec_end:
                        raise _Underflow
                    pos += hv
        except (_Underflow, _TooLong):
            raise InvalidRecordError("Found invalid record structure") from None
        if pos != rec_end:
            raise InvalidRecordError(f"Invalid record size: expected to read {size} bytes in record payload, "
                                     f"but instead read {pos - start}")
        if log_append:
            ts = header.max_timestamp
        else:
            ts = base_ts + ts_delta
        out.append(_Record(header.base_offset + offset_delta, ts, key, value))
    if pos != end:
        raise InvalidRecordError("Incorrect declared batch size, records still remaining in file")
    return out


def _parse_native(buf) -> list:
    from aiokafka.record._crecords.default_records import DefaultRecordBatch
    return list(DefaultRecordBatch(buf))


_INT32_RANGE = (-(2**31), 2**31 - 1)


def _may_hold_overlong_varint(buf, records: list, header: BatchHeader) -> bool:
    """False only if no varint of `buf` (an uncompressed batch the native parser accepted) can be
    longer than Kafka's 5-byte limit for 32-bit fields; True sends the batch to `_parse_exact`.

    The native parser reads every varint as 64-bit, so it accepts over-long encodings. Real clients
    write minimal varints, which this proves in C-level passes (~0.2 ms per 1,000 records): offset
    deltas within int32, and the records' minimal encoded size equals their actual size. (A scan for
    the bytes an over-long varint ends with would be cheaper in C, but CPython searches 2-byte needles
    at ~1 ns a byte, slower than this.)"""
    if not records:
        return False
    base = header.base_offset
    if min(map(_OFFSET, records)) - base < _INT32_RANGE[0] or max(map(_OFFSET, records)) - base > _INT32_RANGE[1]:
        return True
    from aiokafka.record._crecords import DefaultRecordBatchBuilder, size_of_varint_cython
    sizer = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                      producer_epoch=-1, base_sequence=-1, batch_size=1)
    n = len(records)
    minimal = sum(map(sizer.size_in_bytes, map(sub, map(_OFFSET, records), repeat(base)), repeat(0),
                      map(_KEY, records), map(_VALUE, records), map(_HEADERS, records)))
    # size_in_bytes counted a 1-byte timestamp delta; a larger delta may also grow the length varint,
    # which only makes `minimal` too small, i.e. sends a valid batch down the exact (slower) path
    minimal += sum(map(size_of_varint_cython, map(sub, map(_TIMESTAMP, records), repeat(header.base_timestamp)))) - n
    return minimal != len(buf) - HEADER_SIZE


def _load_scan():
    if os.environ.get("MINIKAFKA_PURE_VALIDATOR") == "1":
        return None
    try:
        from minikafka.protocol._recordscan import scan
    except ImportError:  # built without a C compiler: the aiokafka path below
        return None
    return scan


# scan(buf, start, count) -> (min_ts_delta, max_ts_delta, first_null_key_index, offsets_0_to_n_minus_1,
# min_offset_delta, max_offset_delta) | None (malformed or unusual: ask _parse_exact)
_scan = _load_scan()


def _inflated_records(batch: memoryview, header: BatchHeader, cap: int):
    """(buffer, start) of the records of `batch`: the batch itself, or its inflated payload (start 0)."""
    codec = header.attributes & COMPRESSION_MASK
    if codec == UNCOMPRESSED:
        if header.size > cap:
            raise _too_large(cap)
        return batch, HEADER_SIZE
    return decompress_records(batch, codec, cap), 0


def _summary_passes(summary: tuple, header: BatchHeader, s: ValidationSettings) -> bool:
    """True only if the rules of `_check_records` cannot refuse a batch with this scan summary (any
    doubt -> False, and the exact path decides)."""
    min_ts_delta, max_ts_delta, first_null_key, sequential, _min_off, _max_off = summary
    if header.record_count == 0:
        return True
    if header.compression and not sequential:
        return False
    if s.compacted and first_null_key >= 0:
        return False
    log_append_bit = header.attributes & TIMESTAMP_TYPE_MASK
    if s.log_append_time:
        return not log_append_bit
    lo = s.now_ms - s.timestamp_before_max_ms
    hi = s.now_ms + s.timestamp_after_max_ms
    if log_append_bit:  # every record carries the batch's max timestamp
        ts = header.max_timestamp
        return ts != NO_TIMESTAMP and lo <= ts <= hi
    base = header.base_timestamp
    return lo <= base + min_ts_delta and base + max_ts_delta <= hi


def parse_records(batch: memoryview, header: BatchHeader, cap: int) -> list:
    """Every record of `batch` (aiokafka DefaultRecord or _Record objects: offset, timestamp (-1 if
    none), key, value); raises InvalidRecordError / UndecodableBatchError / UncompressedBatchTooLargeError."""
    codec = header.attributes & COMPRESSION_MASK
    if codec == UNCOMPRESSED:
        if header.size > cap:
            raise _too_large(cap)
        buf = batch
        records_start = HEADER_SIZE
    else:
        inflated = decompress_records(batch, codec, cap)
        head = bytearray(batch[:HEADER_SIZE])
        head[ATTRIBUTES_OFFSET + 1] &= ~COMPRESSION_MASK & 0xFF  # an uncompressed view for the parser
        buf = bytes(head) + inflated
        records_start = HEADER_SIZE
    try:
        records = _parse_native(buf)
    except Exception:  # CorruptRecordException, or MemoryError/OverflowError on absurd lengths
        records = None
    if records is not None and not _may_hold_overlong_varint(buf, records, header):
        return records
    return _parse_exact(buf, records_start, len(buf), header, codec != UNCOMPRESSED)


# ------------------------------------------------------------------------------------------- rules

_OFFSET = attrgetter("offset")
_TIMESTAMP = attrgetter("timestamp")
_KEY = attrgetter("key")
_VALUE = attrgetter("value")
_HEADERS = attrgetter("headers")
_has_timestamp = partial(ne, NO_TIMESTAMP)


def _java_long(n: int) -> int:
    return ((n + 2**63) % 2**64) - 2**63


def _record_repr(rec, ts: int) -> str:
    klen = 0 if rec.key is None else len(rec.key)
    vlen = 0 if rec.value is None else len(rec.value)
    return f"DefaultRecord(offset={rec.offset}, timestamp={ts}, key={klen} bytes, value={vlen} bytes)"


def validate_client_batch(batch: memoryview, header: BatchHeader, s: ValidationSettings) -> None:
    """Raise if a client (AppendOrigin.CLIENT) batch must not be stored; see the module docstring."""
    check_client_batch(header)
    if _scan is not None:
        buf, start = _inflated_records(batch, header, s.max_uncompressed_bytes)
        summary = _scan(buf, start, header.record_count)
        if summary is not None and _summary_passes(summary, header, s):
            return
        records = _parse_exact(buf, start, len(buf), header, header.compression != UNCOMPRESSED)
    else:
        records = parse_records(batch, header, s.max_uncompressed_bytes)
    _check_records(records, header, s)


# One function per LogValidator rule. Each returns the records it refuses as (batch index, message, is a
# timestamp error); `_check_records` collects them. A record is reported once, for the first rule (in this
# order) that refuses it, as Kafka's validateRecord stops at a record's first error.
RecordError = tuple[int, str, bool]


def _consecutive_inner_offsets(records: list, header: BatchHeader, s: ValidationSettings) -> None:
    """A compressed batch's inner offsets are 0..n-1 from its base offset (Kafka rebuilds other batches and
    fails; minikafka refuses them whole, as UNKNOWN_SERVER_ERROR)."""
    if header.compression:
        first = header.base_offset
        if list(map(_OFFSET, records)) != list(range(first, first + len(records))):
            raise UndecodableBatchError("Inner offsets of a compressed record batch must be consecutive "
                                        "from the batch's base offset (minikafka does not rebuild batches)")


def _keys_on_compacted_topics(records: list, header: BatchHeader, s: ValidationSettings) -> list[RecordError]:
    """A compacted topic refuses records without a key (INVALID_RECORD)."""
    if not s.compacted or None not in map(_KEY, records):
        return []
    msg = f"Compacted topic cannot accept message without key in topic partition {s.topic_partition}."
    return [(i, msg, False) for i, k in enumerate(map(_KEY, records)) if k is None]


def _create_time_window(records: list, header: BatchHeader, s: ValidationSettings) -> list[RecordError]:
    """On a CreateTime topic a record's timestamp lies within [now - message.timestamp.before.max.ms,
    now + message.timestamp.after.max.ms] (INVALID_TIMESTAMP)."""
    if s.log_append_time:
        return []
    present = list(filter(_has_timestamp, map(_TIMESTAMP, records)))
    lo = s.now_ms - s.timestamp_before_max_ms
    hi = s.now_ms + s.timestamp_after_max_ms
    if not present or (min(present) >= lo and max(present) <= hi):
        return []
    return [(i, f"Timestamp {rec.timestamp} of message with offset {rec.offset} is out of range. "
                f"The timestamp should be within [{_java_long(lo)}, {_java_long(hi)}]", True)
            for i, rec in enumerate(records)
            if rec.timestamp != NO_TIMESTAMP and (s.now_ms - rec.timestamp > s.timestamp_before_max_ms
                                                 or rec.timestamp - s.now_ms > s.timestamp_after_max_ms)]


def _no_log_append_time_from_clients(records: list, header: BatchHeader,
                                     s: ValidationSettings) -> list[RecordError]:
    """A client sets the LogAppendTime bit neither on a LogAppendTime topic nor on records without a timestamp
    (INVALID_TIMESTAMP)."""
    if not header.attributes & TIMESTAMP_TYPE_MASK:
        return []
    if s.log_append_time:
        refused = list(enumerate(records))
    elif NO_TIMESTAMP in map(_TIMESTAMP, records):
        refused = [(i, rec) for i, rec in enumerate(records) if rec.timestamp == NO_TIMESTAMP]
    else:
        return []
    return [(i, f"Invalid timestamp type in message {_record_repr(rec, rec.timestamp)}. Producer "
                "should not set timestamp type to LogAppendTime.", True) for i, rec in refused]


RECORD_RULES = (_keys_on_compacted_topics, _create_time_window, _no_log_append_time_from_clients)


def _check_records(records: list, header: BatchHeader, s: ValidationSettings) -> None:
    """Every rule over parsed records; raises with Kafka's record_errors when any refuses a record."""
    _consecutive_inner_offsets(records, header, s)
    first_error: dict[int, RecordError] = {}
    for rule in RECORD_RULES:
        for error in rule(records, header, s):
            first_error.setdefault(error[0], error)
    if first_error:
        raise_record_errors(sorted(first_error.values()))


def raise_record_errors(errors: list[RecordError]) -> None:
    """The one error for a batch whose records were refused: INVALID_TIMESTAMP if any refusal is about a
    timestamp, else INVALID_RECORD (Kafka's processRecordErrors), both with the record_errors."""
    pairs = [(i, message) for i, message, _ in errors]
    if any(timestamp for _, _, timestamp in errors):
        raise InvalidTimestampError("One or more records have been rejected due to invalid timestamp", pairs)
    shown = ", ".join(f"RecordError(batchIndex={i}, message='{m}')" for i, m in pairs[:3])
    raise RecordValidationError(f"One or more records have been rejected due to {len(pairs)} record errors "
                                f"in total, and only showing the first three errors at most: [{shown}]", pairs)
