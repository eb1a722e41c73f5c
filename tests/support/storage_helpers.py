"""Helpers for storage tests: batches built by kafka-python, a fake clock, DumpLogSegments-style checks."""
from __future__ import annotations

import struct
from pathlib import Path
from typing import Sequence

from kafka.record.default_records import DefaultRecordBatch
from kafka.record.memory_records import MemoryRecordsBuilder

from minikafka.protocol import record_batch as rb
from minikafka.storage import PartitionLog


def build_batch(n: int = 1, *, timestamps: Sequence[int] | None = None, ts: int = 1_000,
                compression: int = 0, value_size: int = 16, magic: int = 2, tag: str = "v") -> bytes:
    """One batch of `n` records (base offset 0) built by kafka-python's MemoryRecordsBuilder."""
    builder = MemoryRecordsBuilder(magic=magic, compression_type=compression, batch_size=1 << 30)
    stamps = list(timestamps) if timestamps is not None else [ts + i for i in range(n)]
    for i, stamp in enumerate(stamps):
        value = (f"{tag}{i}-".encode() * value_size)[:value_size]
        assert builder.append(timestamp=stamp, key=f"k{i}".encode(), value=value) is not None
    builder.close()
    return bytes(builder.buffer())


def split_batches(data: bytes) -> list[tuple[int, rb.BatchHeader]]:
    """Headers of the whole batches in `data`, asserting there is no trailing partial batch."""
    out = list(rb.iter_headers(data))
    end = out[-1][0] + out[-1][1].size if out else 0
    assert end == len(data), "partial batch returned"
    return out


def record_offsets(data: bytes) -> list[int]:
    """Offsets of every record in `data`, checking each batch's CRC on the way."""
    offsets = []
    for pos, header in split_batches(data):
        assert rb.compute_crc(data, pos, header.size) == header.crc
        batch = DefaultRecordBatch(data[pos:pos + header.size])
        assert batch.validate_crc()
        offsets.extend(r.offset for r in batch)
    return offsets


def read_all(plog: PartitionLog, start: int | None = None, max_bytes: int = 1 << 20) -> bytes:
    """Fetch loop from `start` (default log start) to the LEO, like a consumer."""
    offset = plog.log_start_offset if start is None else start
    out = bytearray()
    while offset < plog.log_end_offset:
        chunk = plog.read(offset, max_bytes)
        assert chunk, f"empty read at {offset}"
        batches = split_batches(chunk)
        offset = batches[-1][1].last_offset + 1
        out += chunk
    return bytes(out)


def verify_segment_files(directory: Path) -> None:
    """DumpLogSegments-style checks: file sizes are whole entries, each offset index entry points at a
    batch whose last offset is the entry's offset, each time index entry names the last offset of a
    batch holding the entry's timestamp, which is the max timestamp so far."""
    for log_path in sorted(directory.glob("*.log")):
        base = int(log_path.stem)
        data = log_path.read_bytes()
        batches = split_batches(data)
        by_pos = {pos: h for pos, h in batches}
        by_last = {h.last_offset: h for _, h in batches}
        index = log_path.with_suffix(".index").read_bytes()
        tindex = log_path.with_suffix(".timeindex").read_bytes()
        assert len(index) % 8 == 0 and len(tindex) % 12 == 0
        for rel, pos in struct.iter_unpack(">ii", index):
            assert pos in by_pos and by_pos[pos].last_offset == base + rel
        prev_ts = None
        for ts, rel in struct.iter_unpack(">qi", tindex):
            header = by_last[base + rel]
            assert header.max_timestamp == ts
            assert ts == max(h.max_timestamp for _, h in batches if h.last_offset <= base + rel)
            assert prev_ts is None or ts > prev_ts
            prev_ts = ts
        for (_, a), (_, b) in zip(batches, batches[1:]):
            assert b.base_offset == a.last_offset + 1


class FakeClock:
    def __init__(self, now_ms: int = 1_700_000_000_000) -> None:
        self.now_ms = now_ms

    def __call__(self) -> float:
        return self.now_ms / 1000

    def advance(self, ms: int) -> None:
        self.now_ms += ms
