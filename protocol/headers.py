"""Request header decode and response frame encode.

Request header v1 = api_key int16, api_version int16, correlation_id int32, client_id nullable
string (int16 length, never compact); v2 adds a tagged-field section. Response header v0 is the
correlation id; v1 adds an empty tagged-field section. ApiVersions responses always use v0.
"""
from __future__ import annotations

import struct
from typing import NamedTuple

_FIXED = struct.Struct(">hhih")
_SIZE_CORR = struct.Struct(">ii")
API_VERSIONS_KEY = 18


class HeaderError(ValueError):
    """The request header is malformed; the connection must be closed."""


class RequestHeader(NamedTuple):
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


def peek_header(frame: bytes | memoryview) -> RequestHeader:
    """Decode the fixed part of a header (enough to answer even unknown APIs/versions)."""
    if len(frame) < _FIXED.size:
        raise HeaderError("frame shorter than a request header")
    api_key, api_version, correlation_id, client_len = _FIXED.unpack_from(frame, 0)
    client_id = None
    if client_len >= 0:
        end = _FIXED.size + client_len
        if end > len(frame):
            raise HeaderError("client_id runs past the frame")
        client_id = bytes(frame[_FIXED.size:end]).decode("utf-8", "replace")
    elif client_len != -1:
        raise HeaderError("negative client_id length")
    return RequestHeader(api_key, api_version, correlation_id, client_id)


def _read_uvarint(buf: bytes | memoryview, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(buf):
            raise HeaderError("truncated varint")
        b = buf[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7
        if shift > 28:
            raise HeaderError("varint too long")


def body_offset(frame: bytes | memoryview, flexible: bool) -> int:
    """Byte offset where the request body starts (skips client_id and, if flexible, tagged fields)."""
    _, _, _, client_len = _FIXED.unpack_from(frame, 0)
    pos = _FIXED.size + max(client_len, 0)
    if flexible:
        count, pos = _read_uvarint(frame, pos)
        for _ in range(count):
            _tag, pos = _read_uvarint(frame, pos)
            size, pos = _read_uvarint(frame, pos)
            pos += size
            if pos > len(frame):
                raise HeaderError("tagged field runs past the frame")
    return pos


def encode_response_prefix(correlation_id: int, body_size: int, flexible_header: bool) -> bytes:
    """size int32 + response header, to be written just before a body of `body_size` bytes."""
    if flexible_header:
        return _SIZE_CORR.pack(body_size + 5, correlation_id) + b"\x00"
    return _SIZE_CORR.pack(body_size + 4, correlation_id)


def encode_response_frame(correlation_id: int, body: bytes | bytearray, flexible_header: bool) -> bytes:
    """size int32 + response header + body, as one bytes object."""
    if flexible_header:
        return _SIZE_CORR.pack(len(body) + 5, correlation_id) + b"\x00" + body
    return _SIZE_CORR.pack(len(body) + 4, correlation_id) + body
