"""ProduceResponse fast path: a response whose partitions all succeeded, encoded without building
one kafka-python object per partition or running the generic encoder over them.

Every byte layout is taken from kafka-python's own encoder, never written down here:
- a partition's bytes are a *template*: kafka-python encodes a PartitionProduceResponse whose
  numeric fields hold distinct sentinel values, and the sentinels' positions in the output are where
  a real partition's index / base offset / append time / log start offset are packed in;
- a topic's bytes around its partition array, and the response's bytes after its topic array, are
  cut at the (empty) array with the same seam as protocol/fetch_encoding.py.
A template is checked by encoding a second, different partition both ways at build time, so a schema
or encoder change that moved a field fails loudly rather than encoding garbage. Any partition with an
error (record errors, messages, tagged fields) goes through the generic encoder instead.
"""
from __future__ import annotations

import struct
from functools import lru_cache
from typing import Any, NamedTuple, Sequence

from kafka.protocol.producer import ProduceResponse
from kafka.protocol.schemas.fields.codecs import EncodeBuffer

from minikafka.protocol.fetch_encoding import length_prefix

_RESPONSE = ProduceResponse._struct
_TOPIC = _RESPONSE.fields["responses"].array_of
_PARTITION = _TOPIC.fields["partition_responses"].array_of
_PartitionResponse = ProduceResponse.TopicProduceResponse.PartitionProduceResponse
_TopicResponse = ProduceResponse.TopicProduceResponse

# (field, struct format, sentinel): sentinels are byte patterns that cannot occur elsewhere in the
# encoding of a partition response (no other field carries a value this large)
_FIELDS = (
    ("index", ">i", 0x5A17_0A11),
    ("base_offset", ">q", 0x5B17_0B22_0B33_0B44),
    ("log_append_time_ms", ">q", 0x5C17_0C55_0C66_0C77),
    ("log_start_offset", ">q", 0x5D17_0D88_0D99_0DAA),
)


class Appended(NamedTuple):
    """One successful partition of a produce: what its response carries."""
    index: int
    base_offset: int
    log_append_time_ms: int
    log_start_offset: int
    last_offset: int = -1  # not encoded: acks=all on a cluster waits for the HW to pass it


def _encode_struct(struct_, item: Any, version: int, flexible: bool) -> bytes:
    out = EncodeBuffer(256)
    struct_.compiled_encode_into(version, compact=flexible, tagged=flexible)(item, out)
    return bytes(out.buf[:out.pos])


def _partition(version: int, values: Appended) -> Any:
    return _PartitionResponse(index=values.index, error_code=0, base_offset=values.base_offset,
                              log_append_time_ms=values.log_append_time_ms,
                              log_start_offset=values.log_start_offset, record_errors=[], error_message=None)


class _Template:
    """The bytes of one successful partition response of one version, with the slots to fill."""

    def __init__(self, version: int) -> None:
        flexible = ProduceResponse.flexible_version_q(version)
        sentinels = Appended(*(s for _, _, s in _FIELDS))
        raw = _encode_struct(_PARTITION, _partition(version, sentinels), version, flexible)
        slots = []
        for name, fmt, sentinel in _FIELDS:
            packed = struct.pack(fmt, sentinel)
            at = raw.find(packed)
            if at < 0:
                if any(f.name == name for f in _PARTITION.untagged_fields(version)):
                    raise RuntimeError(f"ProduceResponse v{version}: {name} not found in its encoding")
                continue  # a field this version does not have
            if raw.find(packed, at + 1) >= 0:
                raise RuntimeError(f"ProduceResponse v{version}: {name} sentinel occurs twice")
            slots.append((struct.Struct(fmt), at, name))
        self.raw = raw
        self.slots = tuple((s, at, Appended._fields.index(name)) for s, at, name in slots)
        self.flexible = flexible
        check = Appended(7, 1234567890123, -1, 42)
        if self.fill(bytearray(), check) != _encode_struct(_PARTITION, _partition(version, check), version, flexible):
            raise RuntimeError(f"ProduceResponse v{version}: partition template does not match the encoder")

    def fill(self, out: bytearray, values: Appended) -> bytearray:
        start = len(out)
        out += self.raw
        for packer, at, field in self.slots:
            packer.pack_into(out, start + at, values[field])
        return out


def _cut_empty_last(struct_, item: Any, version: int, flexible: bool) -> tuple[bytes, bytes]:
    """(head, tail) of `item` around its empty last untagged array (see fetch_encoding's seam)."""
    raw = _encode_struct(struct_, item, version, flexible)
    tail = struct_.tagged_fields(version).encode(item, version=version) if flexible else b""
    empty = length_prefix(0, flexible)
    cut = len(raw) - len(tail) - len(empty)
    if cut < 0 or raw[cut:cut + len(empty)] != empty:
        raise RuntimeError(f"{struct_.name} v{version}: last field is not the empty array")
    return raw[:cut], tail


class _VersionEncoder:
    def __init__(self, version: int) -> None:
        if [f.name for f in _TOPIC.untagged_fields(version)][-1] != "partition_responses":
            raise RuntimeError(f"ProduceResponse v{version}: partition_responses is not the topic's last field")
        if [f.name for f in _RESPONSE.untagged_fields(version)][0] != "responses":
            raise RuntimeError(f"ProduceResponse v{version}: responses is not the response's first field")
        self.version = version
        self.partition = _Template(version)
        self.flexible = self.partition.flexible
        raw = _encode_struct(_RESPONSE, ProduceResponse(responses=[], throttle_time_ms=0), version, self.flexible)
        empty = length_prefix(0, self.flexible)
        if not raw.startswith(empty):
            raise RuntimeError(f"ProduceResponse v{version}: does not start with its topic array")
        self.response_tail = raw[len(empty):]  # throttle_time_ms and the (empty) tagged fields

    @lru_cache(maxsize=256)
    def topic_ends(self, key: Any) -> tuple[bytes, bytes]:
        topic = (_TopicResponse(topic_id=key, partition_responses=[]) if self.version >= 13
                 else _TopicResponse(name=key, partition_responses=[]))
        return _cut_empty_last(_TOPIC, topic, self.version, self.flexible)

    def encode(self, topics: Sequence[tuple[Any, Sequence[Appended]]]) -> bytearray:
        flexible = self.flexible
        out = bytearray(length_prefix(len(topics), flexible))
        fill = self.partition.fill
        for key, partitions in topics:
            head, tail = self.topic_ends(key)
            out += head
            out += length_prefix(len(partitions), flexible)
            for values in partitions:
                fill(out, values)
            out += tail
        out += self.response_tail
        return out


@lru_cache(maxsize=None)
def _encoder(version: int) -> _VersionEncoder:
    return _VersionEncoder(version)


def encode_produce_success(version: int, topics: Sequence[tuple[Any, Sequence[Appended]]]) -> bytearray:
    """The body of a ProduceResponse (throttle 0) in which every partition succeeded; `topics` holds
    (topic name, or topic id from v13, [Appended, ...]) in request order."""
    return _encoder(version).encode(topics)
