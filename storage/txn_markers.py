"""Transaction markers: the control batch that ends a transaction in a partition (KIP-98).

A marker batch has attributes transactional|control, the transaction's producer id and epoch, base
sequence -1 and exactly one record whose key is int16 version (0) + int16 type (0 ABORT, 1 COMMIT)
and whose value is int16 version (0) + int32 coordinator epoch. Only the broker writes them (clients
may not send control batches); they are never compressed.
"""
from __future__ import annotations

import struct

from minikafka.protocol.record_batch import HEADER_SIZE, compute_crc

ABORT = 0
COMMIT = 1
CONTROL_KEY_VERSION = 0
MARKER_VALUE_VERSION = 0

_HEADER = struct.Struct(">qiibIhiqqqhii")
_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")
_ATTRIBUTES = 0x10 | 0x20  # transactional | control
# record body: attributes, timestampDelta 0, offsetDelta 0, keyLen 4 (zigzag 8), key,
# valueLen 6 (zigzag 12), value, header count 0
_RECORD_LEN = 1 + 1 + 1 + 1 + _KEY.size + 1 + _VALUE.size + 1  # 16 -> zigzag varint 32


def build_marker_batch(producer_id: int, producer_epoch: int, coordinator_epoch: int, commit: bool,
                       timestamp_ms: int) -> bytes:
    """One control batch (base offset 0) holding a COMMIT or ABORT marker."""
    record = (bytes((_RECORD_LEN << 1, 0, 0, 0, _KEY.size << 1)) + _KEY.pack(CONTROL_KEY_VERSION, COMMIT if commit else ABORT)
              + bytes((_VALUE.size << 1,)) + _VALUE.pack(MARKER_VALUE_VERSION, coordinator_epoch) + b"\x00")
    size = HEADER_SIZE + len(record)
    buf = bytearray(_HEADER.pack(0, size - 12, -1, 2, 0, _ATTRIBUTES, 0, timestamp_ms, timestamp_ms,
                                 producer_id, producer_epoch, -1, 1))
    buf += record
    struct.pack_into(">I", buf, 17, compute_crc(buf, 0, size))
    return bytes(buf)


def _varint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    """(zigzag-decoded value, next position)."""
    shift = result = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def parse_marker(buf: bytes | bytearray | memoryview, pos: int = 0) -> tuple[bool, int] | None:
    """(commit?, coordinator epoch) of the control batch at `pos`, or None if its record is not a
    transaction marker (another control type, or malformed)."""
    try:
        p = pos + HEADER_SIZE
        _length, p = _varint(buf, p)
        p += 1  # attributes
        _ts, p = _varint(buf, p)
        _delta, p = _varint(buf, p)
        key_len, p = _varint(buf, p)
        if key_len < _KEY.size:
            return None
        _version, ctype = _KEY.unpack_from(buf, p)
        p += key_len
        if ctype not in (ABORT, COMMIT):
            return None
        value_len, p = _varint(buf, p)
        if value_len < _VALUE.size:
            return None
        _vversion, coordinator_epoch = _VALUE.unpack_from(buf, p)
        return ctype == COMMIT, coordinator_epoch
    except (IndexError, struct.error, ValueError):
        return None
