"""protocol/recompression.py: a batch re-coded in another codec keeps its records byte for byte and every
header field but the codec bits, length and CRC; a batch already in the codec is copied; the inflation
bound holds."""
from __future__ import annotations

import pytest
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from minikafka.protocol.record_batch import parse_header, validate_batches
from minikafka.protocol.record_validator import (GZIP, LZ4, UNCOMPRESSED, SNAPPY, ZSTD, UncompressedBatchTooLargeError,
                                                 decompress_records)
from minikafka.protocol.recompression import level_for, needs_recompression, recompress

CODECS = [UNCOMPRESSED, GZIP, SNAPPY, LZ4, ZSTD]


def batch(codec: int, n: int = 50, transactional: bool = True) -> bytes:
    b = DefaultRecordBatchBuilder(magic=2, compression_type=codec, is_transactional=transactional, producer_id=42,
                                  producer_epoch=3, base_sequence=7, batch_size=1 << 20)
    for i in range(n):
        b.append(i, timestamp=1_700_000_000_000 + i, key=f"k{i}".encode(), value=f"value-{i}".encode() * 30,
                 headers=[("h", b"x")])
    return bytes(b.build())


def records_of(data: bytes) -> list[tuple]:
    out = []
    for pos, header in validate_batches(data):
        for r in DefaultRecordBatch(data[pos:pos + header.size]):
            out.append((r.offset, r.timestamp, r.key, r.value, r.headers))
    return out


@pytest.mark.parametrize("source", CODECS)
@pytest.mark.parametrize("target", CODECS)
def test_recoded_batch_keeps_records_and_header(source, target):
    original = batch(source)
    recoded = recompress(original, target, level_for(target, 6, 9, 3), 64 << 20)
    (pos, header), = validate_batches(recoded)  # CRC and length checked here
    before = parse_header(original)
    assert header.compression == target
    assert header._replace(crc=0, batch_length=0, attributes=0) == before._replace(crc=0, batch_length=0, attributes=0)
    assert header.attributes & ~0x07 == before.attributes & ~0x07  # transactional bit, timestamp type kept
    assert records_of(recoded) == records_of(original)
    if source == target:
        assert recoded == original
    assert needs_recompression(original, target) == (source != target)
    assert not needs_recompression(original, None)


def test_several_batches_and_uncompressed_payload_equal_the_inflated_one():
    data = batch(LZ4) + batch(UNCOMPRESSED, 3, transactional=False) + batch(ZSTD, 7)
    recoded = recompress(data, UNCOMPRESSED, 0, 64 << 20)
    assert [h.compression for _p, h in validate_batches(recoded)] == [UNCOMPRESSED, UNCOMPRESSED, UNCOMPRESSED]
    assert records_of(recoded) == records_of(data)
    first = memoryview(data)[:parse_header(data).size]
    assert bytes(memoryview(recoded)[61:parse_header(recoded).size]) == decompress_records(first, LZ4, 1 << 30)


def test_the_inflation_bound_holds():
    bomb = batch(GZIP, 200)
    with pytest.raises(UncompressedBatchTooLargeError):
        recompress(bomb, ZSTD, 3, 1000)
    with pytest.raises(UncompressedBatchTooLargeError):
        recompress(batch(UNCOMPRESSED, 200), ZSTD, 3, 1000)
