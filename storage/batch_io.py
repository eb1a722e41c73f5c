"""Walking record batches stored in a segment file, by header only (no per-record work).

Readers only use `os.pread` below a caller-supplied limit (a committed size), so they are safe to run
in a worker thread while the owning thread appends to the same file.
"""
from __future__ import annotations

import os
from typing import Iterator

from minikafka.protocol.record_batch import (
    CURRENT_MAGIC,
    HEADER_SIZE,
    BatchHeader,
    compute_crc,
    parse_header,
)

HEADER_CHUNK = 16 * 1024
SCAN_CHUNK = 1024 * 1024
MAX_RELATIVE_OFFSET = 2**31 - 1


def iter_file_headers(fd: int, start: int, limit: int, chunk: int = HEADER_CHUNK) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each whole batch in [start, limit), no CRC check.

    Stops at the first header that is short, has an impossible length or would cross `limit`.
    """
    pos = start
    buf = b""
    buf_start = start
    while pos + HEADER_SIZE <= limit:
        off = pos - buf_start
        if off + HEADER_SIZE > len(buf):
            buf = os.pread(fd, min(chunk, limit - pos), pos)
            buf_start, off = pos, 0
            if len(buf) < HEADER_SIZE:
                return
        header = parse_header(buf, off)
        size = header.size
        if size < HEADER_SIZE or pos + size > limit:
            return
        yield pos, header
        pos += size


def scan_valid_batches(fd: int, start: int, end: int, base_offset: int,
                       min_offset: int) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of each *valid* batch from `start`; stops silently at the first invalid byte.

    Valid = whole within `end`, magic 2, CRC-32C matches, non-negative deltas, base offset >=
    `min_offset` and above the previous batch, last offset representable relative to `base_offset`.
    """
    pos = start
    expected = min_offset
    buf = b""
    buf_start = start
    while pos + HEADER_SIZE <= end:
        off = pos - buf_start
        if off + HEADER_SIZE > len(buf):
            buf = os.pread(fd, min(SCAN_CHUNK, end - pos), pos)
            buf_start, off = pos, 0
            if len(buf) < HEADER_SIZE:
                return
        header = parse_header(buf, off)
        size = header.size
        if (size < HEADER_SIZE or pos + size > end or header.magic != CURRENT_MAGIC
                or header.last_offset_delta < 0 or header.record_count < 0
                or header.base_offset < expected
                or header.last_offset - base_offset > MAX_RELATIVE_OFFSET):
            return
        if off + size > len(buf):
            buf = os.pread(fd, min(max(SCAN_CHUNK, size), end - pos), pos)
            buf_start, off = pos, 0
            if len(buf) < size:
                return
        if compute_crc(buf, off, size) != header.crc:
            return
        yield pos, header
        expected = header.last_offset + 1
        pos += size
