"""protocol/record_batch.py against batches built by kafka-python's MemoryRecordsBuilder."""
from __future__ import annotations

import struct

import crc32c
import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from kafka.record.memory_records import MemoryRecordsBuilder

from minikafka.protocol import record_batch as rb

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
TS = 1_700_000_000_000


def build(n: int = 3, compression: int = 0, magic: int = 2, ts: int = TS, value_size: int = 30) -> bytes:
    builder = MemoryRecordsBuilder(magic=magic, compression_type=compression, batch_size=1 << 30)
    for i in range(n):
        extra = {"headers": [("h", f"{i}".encode())]} if magic == 2 else {}
        assert builder.append(timestamp=ts + i, key=f"k{i}".encode(),
                              value=(f"value-{i}-".encode() * value_size)[:value_size], **extra) is not None
    builder.close()
    return bytes(builder.buffer())


def build_idempotent(n: int, producer_id: int, epoch: int, base_sequence: int, transactional: bool) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional,
                                        producer_id=producer_id, producer_epoch=epoch,
                                        base_sequence=base_sequence, batch_size=1 << 30)
    for i in range(n):
        builder.append(i, timestamp=TS + i, key=None, value=b"v%d" % i, headers=[])
    return bytes(builder.build())


def recrc(batch: bytearray) -> bytes:
    struct.pack_into(">I", batch, rb.CRC_OFFSET, crc32c.crc32c(bytes(batch[rb.ATTRIBUTES_OFFSET:])))
    return bytes(batch)


# ---------------------------------------------------------------------------------- parse

def test_parse_header_matches_kafka_python():
    data = build(5)
    h = rb.parse_header(data)
    kp = DefaultRecordBatch(data)
    assert h.base_offset == 0 and h.magic == 2
    assert h.size == len(data) and h.batch_length == len(data) - rb.LOG_OVERHEAD
    assert h.record_count == 5 and h.last_offset_delta == 4 and h.last_offset == 4
    assert h.crc == kp.crc and h.attributes == 0 and h.compression == 0
    assert h.base_timestamp == TS and h.max_timestamp == TS + 4
    assert h.producer_id == rb.NO_PRODUCER_ID and h.producer_epoch == -1 and h.base_sequence == -1
    assert not h.is_transactional and not h.is_control and not h.log_append_time
    assert rb.peek_size(data, 0) == (0, len(data), 2)


def test_parse_header_of_idempotent_transactional_batch():
    h = rb.parse_header(build_idempotent(3, producer_id=777, epoch=4, base_sequence=10, transactional=True))
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (777, 4, 10)
    assert h.is_transactional and not h.is_control and h.record_count == 3


def test_peek_size_needs_17_bytes():
    data = build(1)
    assert rb.peek_size(data[:16], 0) is None
    assert rb.peek_size(data[:17], 0) == (0, len(data), 2)
    assert rb.peek_size(b"xx" + data, 2) == (0, len(data), 2)


# ------------------------------------------------------------------------------- validate

@pytest.mark.parametrize("codec", list(CODECS))
def test_every_codec_passes_validation(codec):
    data = build(20, compression=CODECS[codec])
    ((pos, h),) = rb.validate_batches(data)
    assert pos == 0 and h.compression == CODECS[codec]
    assert h.record_count == 20 and h.last_offset_delta == 19
    assert [r.value for r in DefaultRecordBatch(data)][3].startswith(b"value-3-")


def test_several_batches_are_validated_in_order():
    parts = [build(2), build(3, compression=1), build(1, compression=4)]
    data = b"".join(parts)
    out = rb.validate_batches(data)
    assert [pos for pos, _h in out] == [0, len(parts[0]), len(parts[0]) + len(parts[1])]
    assert [h.record_count for _p, h in out] == [2, 3, 1]


def test_validation_accepts_memoryview_and_bytearray():
    data = build(2)
    assert rb.validate_batches(memoryview(data))[0][1] == rb.validate_batches(bytearray(data))[0][1]


@pytest.mark.parametrize("where", ["attributes", "timestamp", "record", "last byte"])
def test_crc_mismatch_is_corrupt(where):
    data = bytearray(build(3))
    pos = {"attributes": 22, "timestamp": 30, "record": 70, "last byte": len(data) - 1}[where]
    data[pos] ^= 0x01
    with pytest.raises(rb.CorruptRecordError):
        rb.validate_batches(bytes(data))


def test_crc_field_itself_damaged_is_corrupt():
    data = bytearray(build(3))
    data[rb.CRC_OFFSET] ^= 0x80
    with pytest.raises(rb.CorruptRecordError):
        rb.validate_batches(bytes(data))


@pytest.mark.parametrize("cut", [1, 16, 17, 40, 61, -1])
def test_truncated_batch_is_corrupt(cut):
    data = build(3)
    with pytest.raises(rb.CorruptRecordError):
        rb.validate_batches(data[:cut])


def test_trailing_bytes_after_a_whole_batch_are_corrupt():
    data = build(2)
    with pytest.raises(rb.CorruptRecordError):
        rb.validate_batches(data + data[:20])


def test_length_smaller_than_header_is_corrupt():
    data = bytearray(build(2))
    struct.pack_into(">i", data, 8, 20)
    with pytest.raises(rb.CorruptRecordError):
        rb.validate_batches(bytes(data))


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_magic_is_unsupported_and_invalid(magic):
    data = build(2, magic=magic)
    with pytest.raises(rb.UnsupportedMagicError):
        rb.validate_batches(data)
    assert issubclass(rb.UnsupportedMagicError, rb.InvalidRecordError)


def test_empty_payload_is_invalid():
    with pytest.raises(rb.InvalidRecordError):
        rb.validate_batches(b"")


@pytest.mark.parametrize("delta", [0, 1, 3, 1000])
def test_wrong_last_offset_delta_uncompressed_is_invalid(delta):
    data = bytearray(build(3))
    struct.pack_into(">i", data, 23, delta)
    with pytest.raises(rb.InvalidRecordError):
        rb.validate_batches(recrc(data))


def test_negative_counts_are_invalid():
    data = bytearray(build(3))
    struct.pack_into(">i", data, 23, -1)
    with pytest.raises(rb.InvalidRecordError):
        rb.validate_batches(recrc(bytearray(data)))
    data = bytearray(build(3))
    struct.pack_into(">i", data, 57, -3)
    with pytest.raises(rb.InvalidRecordError):
        rb.validate_batches(recrc(data))


def test_zero_records_non_control_is_invalid():
    data = bytearray(build(1))
    struct.pack_into(">ii", data, 23, -1, 0)
    struct.pack_into(">i", data, 57, 0)
    with pytest.raises(rb.InvalidRecordError):
        rb.validate_batches(recrc(data))


def test_one_bad_batch_among_good_ones_fails_the_whole_payload():
    bad = bytearray(build(2))
    bad[-1] ^= 0xFF
    with pytest.raises(rb.CorruptRecordError):
        rb.validate_batches(build(1) + bytes(bad) + build(1))


# ---------------------------------------------------------------------------------- patch

@pytest.mark.parametrize("codec", list(CODECS))
@pytest.mark.parametrize("new_base", [1, 123456789, 2**40 + 7])
def test_patch_base_offset_keeps_crc_valid(codec, new_base):
    data = bytearray(build(4, compression=CODECS[codec]))
    rb.patch_base_offset(data, 0, new_base)
    h = rb.parse_header(data)
    assert h.base_offset == new_base and h.last_offset == new_base + 3
    assert rb.compute_crc(data, 0, h.size) == h.crc
    rb.validate_batches(bytes(data))
    kp = DefaultRecordBatch(bytes(data))
    assert kp.validate_crc()
    assert [r.offset for r in kp] == [new_base + i for i in range(4)]


def test_patch_inside_a_larger_buffer_only_touches_that_batch():
    first, second = build(2), build(3)
    buf = bytearray(first + second)
    rb.patch_base_offset(buf, len(first), 500)
    assert bytes(buf[:len(first)]) == first
    assert [(p, h.base_offset) for p, h in rb.iter_headers(buf)] == [(0, 0), (len(first), 500)]
    assert rb.validate_batches(bytes(buf))


def test_iter_headers_stops_at_partial_batch():
    a, b = build(2), build(3)
    assert [p for p, _h in rb.iter_headers(a + b)] == [0, len(a)]
    assert [p for p, _h in rb.iter_headers(a + b[:-1])] == [0]
    assert [p for p, _h in rb.iter_headers(a + b[:30])] == [0]
    assert list(rb.iter_headers(b"")) == []
    assert [p for p, _h in rb.iter_headers(b"junk" + a, start=4)] == [4]


def test_compute_crc_matches_kafka_python_for_every_codec():
    for codec in CODECS.values():
        data = build(3, compression=codec)
        assert rb.compute_crc(data, 0, len(data)) == DefaultRecordBatch(data).crc
