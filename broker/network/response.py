"""Response bodies that a handler encodes itself, so large record bytes never pass through the
generic encoder or get concatenated into one buffer.

A handler may return an `EncodedBody` (or, for a small body it encoded itself, plain bytes) instead
of a kafka.protocol response object. The connection
writes the response prefix (size + header) and then `parts` in order: bytes-like parts as they are,
`FileSlice` parts straight from the file (os.sendfile where the transport allows it, else bounded
pread chunks). Invariant: `size` == the sum of the parts' lengths, and every FileSlice owns its
descriptor (a dup), which the connection closes once the slice is written or the connection dies.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Union


@dataclass(slots=True)
class FileSlice:
    """`length` bytes of an open file from `offset`; `fd` is owned by the slice (close() it)."""
    fd: int
    offset: int
    length: int

    @classmethod
    def dup_of(cls, fd: int, offset: int, length: int) -> "FileSlice":
        """A slice over a duplicate of `fd`: still readable if the segment is deleted meanwhile."""
        return cls(os.dup(fd), offset, length)

    def close(self) -> None:
        if self.fd >= 0:
            try:
                os.close(self.fd)
            finally:
                self.fd = -1


Part = Union[bytes, bytearray, memoryview, FileSlice]


@dataclass(slots=True)
class EncodedBody:
    """A response body as parts to write in order; `size` is the body length in bytes."""
    parts: list[Part] = field(default_factory=list)
    size: int = 0

    def add(self, part: Part) -> None:
        n = part.length if isinstance(part, FileSlice) else len(part)
        if n:
            self.parts.append(part)
            self.size += n

    def close(self) -> None:
        """Release the descriptors of unwritten slices (a dropped response must not leak fds)."""
        for part in self.parts:
            if isinstance(part, FileSlice):
                part.close()
