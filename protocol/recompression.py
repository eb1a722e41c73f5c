"""A topic's `compression.type` applied to client batches, as Kafka's LogValidator does when the topic's codec
is not `producer` and differs from the batch's: the records are stored compressed with the topic's codec
(at the topic's `compression.<codec>.level`), or uncompressed for `uncompressed`.

Per batch, never per record: the records section of a v2 batch is the same bytes whether compressed or
not, so a batch is re-coded by inflating its payload (bounded, as validation does), compressing it with the
target codec, and writing a new header (codec bits, batch length, CRC-32C). Offsets, timestamps, producer
id/epoch/sequence and the transactional bit are kept. The output framings are the ones Kafka's own
compressors write and every client reads: gzip members, xerial-framed snappy, LZ4 frames of independent
64 KiB blocks, zstd frames with their content size.
"""
from __future__ import annotations

import struct
import zlib

from minikafka.protocol.record_batch import (
    ATTRIBUTES_OFFSET,
    COMPRESSION_MASK,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    compute_crc,
    iter_headers,
)
from minikafka.protocol.record_validator import GZIP, LZ4, UNCOMPRESSED, SNAPPY, ZSTD, decompress_records, _too_large

# compression.type values -> codec id (None: keep the producer's)
TOPIC_CODECS: dict[str, int | None] = {"producer": None, "uncompressed": UNCOMPRESSED, "gzip": GZIP, "snappy": SNAPPY,
                                       "lz4": LZ4, "zstd": ZSTD}
# Kafka's defaults and bounds of compression.gzip.level / compression.lz4.level / compression.zstd.level
GZIP_LEVEL_DEFAULT, LZ4_LEVEL_DEFAULT, ZSTD_LEVEL_DEFAULT = -1, 9, 3
GZIP_LEVELS = (1, 9)  # or -1: zlib's default
LZ4_LEVELS = (1, 17)
ZSTD_LEVELS = (-131072, 22)

_LENGTH = struct.Struct(">i")
_CRC = struct.Struct(">I")
_ATTRIBUTES = struct.Struct(">h")
_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024  # snappy-java's default block size


def _gzip(data: bytes, level: int) -> bytes:
    c = zlib.compressobj(level, zlib.DEFLATED, 16 + zlib.MAX_WBITS)
    return c.compress(data) + c.flush()


def _snappy(data: bytes, _level: int) -> bytes:
    import cramjam
    out = [_XERIAL_HEADER]
    for i in range(0, len(data), _XERIAL_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[i:i + _XERIAL_BLOCK]))
        out += [_LENGTH.pack(len(block)), block]
    return b"".join(out)


def _lz4(data: bytes, level: int) -> bytes:
    import lz4.frame
    return lz4.frame.compress(data, compression_level=level, block_size=lz4.frame.BLOCKSIZE_MAX64KB,
                              block_linked=False, content_checksum=False, store_size=True)


def _zstd(data: bytes, level: int) -> bytes:
    import zstandard
    return zstandard.ZstdCompressor(level=level, write_content_size=True).compress(data)


_COMPRESS = {GZIP: _gzip, SNAPPY: _snappy, LZ4: _lz4, ZSTD: _zstd}


def needs_recompression(records: bytes | bytearray | memoryview, target: int | None) -> bool:
    """Whether any batch of `records` (already structurally valid) is not in the `target` codec."""
    if target is None:
        return False
    return any(header.compression != target for _pos, header in iter_headers(records))


def recompress(records: bytes | bytearray | memoryview, target: int, level: int, cap: int) -> bytes:
    """`records` (valid client batches) with every batch in codec `target` at `level`; a batch already in
    it is copied as it is. `cap` bounds each batch's inflated size (minikafka.max.uncompressed.batch.bytes)."""
    view = memoryview(records)
    out: list[bytes | memoryview] = []
    for pos, header in iter_headers(view):
        batch = view[pos:pos + header.size]
        if header.compression == target:
            out.append(batch)
            continue
        if header.compression == UNCOMPRESSED:
            if header.size - HEADER_SIZE > cap:
                raise _too_large(cap)
            payload = bytes(batch[HEADER_SIZE:])
        else:
            payload = decompress_records(batch, header.compression, cap)
        if target != UNCOMPRESSED:
            payload = _COMPRESS[target](payload, level)
        rebuilt = bytearray(batch[:HEADER_SIZE])
        rebuilt += payload
        _LENGTH.pack_into(rebuilt, 8, len(rebuilt) - LOG_OVERHEAD)
        _ATTRIBUTES.pack_into(rebuilt, ATTRIBUTES_OFFSET, (header.attributes & ~COMPRESSION_MASK) | target)
        _CRC.pack_into(rebuilt, CRC_OFFSET, compute_crc(rebuilt, 0, len(rebuilt)))
        out.append(rebuilt)
    return b"".join(out)


def level_for(target: int, gzip_level: int, lz4_level: int, zstd_level: int) -> int:
    """The topic's level for `target` (zlib's default for gzip -1; snappy has none)."""
    if target == GZIP:
        return gzip_level
    if target == LZ4:
        return lz4_level
    if target == ZSTD:
        return zstd_level
    return 0
