"""FetchResponse encoded *around* its records: every field by kafka-python's encoder, the records
of each partition as caller-supplied parts (e.g. slices of segment files) that are never copied.

The seam: in every Fetch version the records-carrying field is the last untagged field of its
struct (response -> `responses`, topic -> `partitions`, partition -> `records`), and a struct's
tagged fields (flexible versions) follow its untagged ones. So a struct whose last field is empty
(`[]` / `b""`) encodes, with kafka-python's own compiled encoder, as

    head + EMPTY + tail        (tail = the struct's tagged-field section, "" when not flexible)

where EMPTY is the empty array/bytes encoding. Cutting EMPTY out gives `head` and `tail`; the real
last field is spliced in between: its length prefix (INT32 for non-flexible versions; unsigned
varint length+1 for COMPACT arrays / COMPACT_RECORDS in flexible ones) then the elements. The cut is
checked against EMPTY, so a schema change that breaks the seam fails loudly rather than silently.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

from kafka.protocol.consumer import FetchResponse
from kafka.protocol.schemas.fields.codecs import EncodeBuffer, Int32, UnsignedVarInt32

_RESPONSE = FetchResponse._struct
_TOPIC = _RESPONSE.fields["responses"].array_of  # the element structs of the arrays
_PARTITION = _TOPIC.fields["partitions"].array_of


def _check_seam() -> None:
    for version in range(FetchResponse.min_version, FetchResponse.max_version + 1):
        for struct, name in ((_RESPONSE, "responses"), (_TOPIC, "partitions"), (_PARTITION, "records")):
            last = struct.untagged_fields(version)[-1]
            if last.name != name:
                raise RuntimeError(f"FetchResponse v{version}: {name} is not the last field of {struct.name}")


_check_seam()


def length_prefix(n: int, flexible: bool) -> bytes:
    """Length of an array (element count) or of records (bytes): INT32, or unsigned varint n+1."""
    return UnsignedVarInt32.encode(n + 1) if flexible else Int32.encode(n)


class _Parts:
    """Parts in order; adjacent bytes are coalesced, so a response is few large writes."""

    def __init__(self, flexible: bool) -> None:
        self.parts: list[Any] = []
        self.size = 0
        self._pending = bytearray()
        self._flexible = flexible
        self._empty = length_prefix(0, flexible)
        self._scratch = EncodeBuffer(256)

    def head(self, struct, item, version: int) -> bytes:
        """Append `item` encoded by kafka-python up to its (empty) last untagged field; return the
        tail (its tagged-field section) for the caller to append after the real last field."""
        flexible = self._flexible
        out = self._scratch
        out.pos = 0
        struct.compiled_encode_into(version, compact=flexible, tagged=flexible)(item, out)
        tail = struct.tagged_fields(version).encode(item, version=version) if flexible else b""
        empty = self._empty
        cut = out.pos - len(tail) - len(empty)
        view = memoryview(out.buf)
        if cut < 0 or view[cut:cut + len(empty)] != empty:
            raise ValueError(f"{struct.name} v{version}: last field is not empty")
        self._pending += view[:cut]
        return tail

    def bytes(self, data: bytes | bytearray) -> None:
        self._pending += data

    def opaque(self, part: Any, length: int) -> None:
        if not length:
            return
        self._flush()
        self.parts.append(part)
        self.size += length

    def _flush(self) -> None:
        if self._pending:
            self.parts.append(bytes(self._pending))
            self.size += len(self._pending)
            self._pending = bytearray()

    def done(self) -> tuple[list[Any], int]:
        self._flush()
        return self.parts, self.size


PartitionRecords = tuple[Any, int, Sequence[tuple[Any, int]]]
"""(PartitionData with records=b"", records size, [(part, length), ...]) — the parts are written in
order between the records length prefix and the partition's tagged fields."""

TopicRecords = tuple[Any, Iterable[PartitionRecords]]
"""(FetchableTopicResponse with partitions=[], its partitions)."""


def encode_fetch_response(response, topics: Sequence[TopicRecords], version: int) -> tuple[list[Any], int]:
    """The body of `response` (a FetchResponse with responses=[]) holding `topics`, as (parts,
    size): bytes parts from kafka-python's encoder, and each partition's record parts as given.
    `size` is the body length; a part's length is taken as given (records are not inspected)."""
    flexible = FetchResponse.flexible_version_q(version)
    out = _Parts(flexible)
    tail = out.head(_RESPONSE, response, version)
    out.bytes(length_prefix(len(topics), flexible))
    for topic, partitions in topics:
        partitions = list(partitions)
        t_tail = out.head(_TOPIC, topic, version)
        out.bytes(length_prefix(len(partitions), flexible))
        for pdata, size, parts in partitions:
            p_tail = out.head(_PARTITION, pdata, version)
            out.bytes(length_prefix(size, flexible))
            given = 0
            for part, length in parts:
                out.opaque(part, length)
                given += length
            if given != size:
                raise ValueError(f"records parts of partition {pdata.partition_index} hold {given} bytes, not {size}")
            out.bytes(p_tail)
        out.bytes(t_tail)
    out.bytes(tail)
    return out.done()
