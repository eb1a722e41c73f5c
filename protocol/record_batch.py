"""Record batch v2 (magic 2) header view.

Only the 61-byte header is parsed; records stay opaque bytes. Offsets and the partition leader epoch
can be patched in place because the CRC covers bytes [21, end) only.
"""
from __future__ import annotations

import struct
from typing import Iterator, NamedTuple

import crc32c

HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset int64 + batchLength int32
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
CURRENT_MAGIC = 2

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20

NO_PRODUCER_ID = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_LENGTH_AND_MAGIC = struct.Struct(">qiib")


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Total bytes of the batch on the wire / on disk."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)


class InvalidRecordError(Exception):
    """A batch is structurally invalid (Kafka INVALID_RECORD)."""


class CorruptRecordError(Exception):
    """A batch fails its length or CRC check (Kafka CORRUPT_MESSAGE)."""


class UnsupportedMagicError(InvalidRecordError):
    """Magic 0/1 (legacy message sets) are not stored by this broker."""


class UnsupportedCompressionError(Exception):
    """A codec the request version cannot carry (Kafka UNSUPPORTED_COMPRESSION_TYPE)."""


ZSTD = 4
ZSTD_MIN_PRODUCE_VERSION = 7


def parse_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    return BatchHeader._make(_HEADER.unpack_from(buf, pos))


def peek_size(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int, int] | None:
    """(base_offset, total size, magic) of the batch at `pos`, or None if fewer than 17 bytes remain."""
    if len(buf) - pos < MAGIC_OFFSET + 1:
        return None
    base_offset, length, _epoch, magic = _LENGTH_AND_MAGIC.unpack_from(buf, pos)
    return base_offset, length + LOG_OVERHEAD, magic


def compute_crc(buf: bytes | bytearray | memoryview, pos: int, size: int) -> int:
    return crc32c.crc32c(memoryview(buf)[pos + ATTRIBUTES_OFFSET:pos + size])


def validate_batches(buf: bytes | bytearray | memoryview) -> list[tuple[int, BatchHeader]]:
    """Validate every batch of a produce payload; return (position, header) per batch.

    Checks, per batch: complete length, magic 2, CRC-32C, and lastOffsetDelta == recordCount - 1
    (clients always write dense batches; checked on the header, so compressed batches are not
    inflated). Raises CorruptRecordError / InvalidRecordError.
    """
    out: list[tuple[int, BatchHeader]] = []
    view = memoryview(buf)
    end = len(view)
    pos = 0
    if end == 0:
        raise InvalidRecordError("empty record set")
    while pos < end:
        peek = peek_size(view, pos)
        if peek is None:
            raise CorruptRecordError("truncated batch header")
        _, size, magic = peek
        if magic != CURRENT_MAGIC:
            raise UnsupportedMagicError(f"record batch magic {magic} is not supported (only magic 2)")
        if size < HEADER_SIZE or pos + size > end:
            raise CorruptRecordError(f"batch length {size} does not fit the payload")
        header = parse_header(view, pos)
        if compute_crc(view, pos, size) != header.crc:
            raise CorruptRecordError("record batch CRC mismatch")
        if header.record_count < 0 or header.last_offset_delta < 0:
            raise InvalidRecordError("negative record count or lastOffsetDelta")
        if header.last_offset_delta != header.record_count - 1:
            raise InvalidRecordError(
                f"lastOffsetDelta {header.last_offset_delta} does not match record count {header.record_count}")
        if header.record_count == 0 and not header.is_control:
            raise InvalidRecordError("batch without records")
        out.append((pos, header))
        pos += size
    return out


def patch_base_offset(buf: bytearray | memoryview, pos: int, base_offset: int) -> None:
    _BASE_OFFSET.pack_into(buf, pos, base_offset)


def iter_headers(buf: bytes | bytearray | memoryview, start: int = 0) -> Iterator[tuple[int, BatchHeader]]:
    """Walk whole batches already stored (no CRC check); stops at the first incomplete batch."""
    end = len(buf)
    pos = start
    while pos + HEADER_SIZE <= end:
        header = parse_header(buf, pos)
        size = header.size
        if size < HEADER_SIZE or pos + size > end:
            return
        yield pos, header
        pos += size


def check_produce_payload(buf: bytes | bytearray | memoryview, produce_version: int) -> None:
    """Kafka's ProduceRequest.validateRecords: exactly one v2 batch per partition, and no zstd before
    Produce v7. Only batch sizes and attributes are read; full validation happens at append."""
    view = memoryview(buf)
    peek = peek_size(view, 0)
    if peek is None:
        raise CorruptRecordError("truncated batch header")
    _, size, magic = peek
    if magic != CURRENT_MAGIC:
        raise UnsupportedMagicError(f"Produce requests with version {produce_version} are only allowed to "
                                    "contain record batches with magic version 2")
    if size < len(view):
        raise InvalidRecordError(f"Produce requests with version {produce_version} are only allowed to "
                                 "contain exactly one record batch per partition")
    if len(view) > ATTRIBUTES_OFFSET + 1:
        attributes = int.from_bytes(view[ATTRIBUTES_OFFSET:ATTRIBUTES_OFFSET + 2], "big")
        if attributes & COMPRESSION_MASK == ZSTD and produce_version < ZSTD_MIN_PRODUCE_VERSION:
            raise UnsupportedCompressionError(f"Produce requests with version {produce_version} are not "
                                              "allowed to use ZStandard compression")


def check_client_batch(header: BatchHeader) -> None:
    """What only the broker itself may write (Kafka's LogValidator for AppendOrigin.CLIENT)."""
    if header.is_control:
        raise InvalidRecordError("Clients are not allowed to write control records")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError(f"Invalid sequence number {header.base_sequence} in record batch with "
                                 f"producerId {header.producer_id}")
