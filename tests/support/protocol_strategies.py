"""Hypothesis strategies for Kafka request bodies, built from kafka-python's message schemas.

`request_bodies(request_class, version, nulls=...)` draws the encoded body of a structurally valid
request with random values: integers at their edges, random and well-known strings, empty and
larger arrays, tagged fields, random uuids, record batches (valid or garbage) and nulls where the
schema allows them; with `bad_nulls=True` also nulls where it does not (the encoder writes length -1
regardless, which is what a buggy client would send). `mutations()` draws byte-level edits of an
encoded frame (flip, insert, delete, length/varint bombs, truncation) as a list so hypothesis can
shrink it. Used by tests/integration/robustness/test_protocol_fuzz.py and tests/unit/protocol/test_codec_checks.py.
"""
from __future__ import annotations

import time
import uuid

from hypothesis import strategies as st
from kafka.protocol.schemas.fields.array import ArrayField
from kafka.protocol.schemas.fields.codecs.types import (
    BitField, Boolean, Bytes, Float64, Int8, Int16, Int32, Int64, String, UnsignedInt16, UUID,
)
from kafka.protocol.schemas.fields.simple import SimpleField
from kafka.protocol.schemas.fields.struct import StructField
from kafka.protocol.schemas.fields.struct_array import StructArrayField
from kafka.record.memory_records import MemoryRecordsBuilder

# names the fuzz test creates up front, so that some requests reach the deeper handler paths
KNOWN_TOPICS = ["fuzz-a", "fuzz-b"]
KNOWN_GROUPS = ["fuzz-g"]
KNOWN_TXN_IDS = ["fuzz-tx"]
# filled by the fuzz test's setup with what the broker handed out (before strategies are built)
KNOWN_MEMBER_IDS: list[str] = ["fuzz-member"]
KNOWN_PRODUCER_IDS: list[int] = [0]

CONFIG_NAMES = ["retention.ms", "retention.bytes", "segment.bytes", "segment.ms", "cleanup.policy",
                "compression.type", "max.message.bytes", "min.insync.replicas", "message.timestamp.type",
                "segment.index.bytes", "delete.retention.ms", "min.compaction.lag.ms", "unknown.config",
                "log.retention.ms", "num.partitions", "message.timestamp.difference.max.ms"]
CONFIG_VALUES = ["-1", "0", "1", "-2", "100", "9223372036854775807", "9223372036854775808", "1e3", "abc", "",
                 " ", "compact", "delete", "compact,delete", "lz4", "zstd", "producer", "CreateTime",
                 "LogAppendTime", "2147483648", "-9999999999999999999999"]

_RANGES = {Int8: (-2**7, 2**7 - 1), Int16: (-2**15, 2**15 - 1), UnsignedInt16: (0, 2**16 - 1),
           Int32: (-2**31, 2**31 - 1), Int64: (-2**63, 2**63 - 1)}
# fields that make the broker wait (long poll, rebalance, txn timeout): mostly short, rarely edges
_WAIT_WORDS = ("timeout", "wait", "delay", "interval", "backoff", "retention_time")
# fields that make the broker allocate (partitions to create)
_COUNT_NAMES = {"num_partitions", "count", "replication_factor"}


def _batch(n: int, *, compression: int = 0, producer_id: int = -1, epoch: int = -1, seq: int = -1,
           transactional: bool = False) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=compression, batch_size=1 << 20,
                                   transactional=transactional, producer_id=producer_id,
                                   producer_epoch=epoch, base_sequence=seq)
    now = int(time.time() * 1000)
    for i in range(n):
        builder.append(timestamp=now + i, key=b"k%d" % i, value=b"v" * (i + 1), headers=[("h", b"x")])
    builder.close()
    return bytes(builder.buffer())


_BATCHES = [_batch(1), _batch(3), _batch(2, compression=1), _batch(2, producer_id=1, epoch=0, seq=0),
            _batch(1, producer_id=1, epoch=0, seq=0, transactional=True)]


def _int_strategy(codec, name: str):
    lo, hi = _RANGES[codec]
    edges = sorted({lo, hi, -1, 0, 1, min(hi, 2), max(lo, -2)} & set(range(lo, hi + 1)) if hi < 2**20
                   else {lo, hi, -1, 0, 1, 2, -2, lo + 1, hi - 1})
    full = st.sampled_from(edges) | st.integers(lo, hi)
    if any(w in name for w in _WAIT_WORDS):
        # mostly short; an edge now and then (a huge wait only costs the fuzzer its reply timeout)
        short = st.integers(0, 300)
        return st.one_of(short, short, short, short, st.sampled_from([-1, lo, hi]))
    if name == "acks":
        return st.sampled_from([-1, 0, 1]) | full
    if name in _COUNT_NAMES:
        return st.integers(-2, 8) | st.sampled_from([lo, hi, -1, 0])
    if name in ("partition", "partition_index", "index", "partitions"):
        return st.integers(-1, 4) | st.sampled_from([lo, hi])
    if name.endswith("producer_id"):
        return st.sampled_from(KNOWN_PRODUCER_IDS) | st.integers(-1, 4) | full
    if name.endswith(("producer_epoch", "generation_id", "leader_epoch", "member_epoch")):
        return st.integers(-1, 4) | full   # collide with ids/epochs the broker handed out
    if "offset" in name or "timestamp" in name:
        return st.integers(-5, 10) | full
    return full


def _string_strategy(name: str):
    known: list[str] = []
    if "topic" in name or name == "name" or name == "resource_name":
        known = KNOWN_TOPICS
    if "group" in name:
        known = KNOWN_GROUPS + known
    if "transactional" in name:
        known = KNOWN_TXN_IDS
    if name in ("name", "config_name", "configuration_keys", "key"):
        known = known + CONFIG_NAMES
    if "member_id" in name or name == "group_instance_id":
        known = KNOWN_MEMBER_IDS
    if name == "value":
        known = CONFIG_VALUES
    if name in ("protocol_type", "protocol_name", "name") or name.startswith("protocol"):
        known = known + ["consumer", "range", "roundrobin", "cooperative-sticky", "connect"]
    text = st.text(max_size=12) | st.text(alphabet="abcxyz-._", min_size=1, max_size=8) | \
        st.sampled_from(["", " ", ".", "..", "a" * 300, "\u00e9\u4e2d\U0001f600", "retention.ms",
                         "cleanup.policy", "__consumer_offsets", "__transaction_state", "consumer", "range"])
    return (st.sampled_from(known) | text) if known else text


def _simple_strategy(field: SimpleField, name: str):
    codec = field._type
    if codec in _RANGES:
        return _int_strategy(codec, name)
    if codec is Boolean:
        return st.booleans()
    if codec is Float64:
        return st.floats(allow_nan=True, allow_infinity=True)
    if codec is UUID:
        return st.sampled_from([None, uuid.UUID(int=1)]) | st.uuids()
    if codec is BitField:
        return st.sets(st.integers(0, 30), max_size=4)
    if isinstance(codec, String):
        return _string_strategy(name)
    if codec is Bytes:
        if field.type_str == "records":
            return st.sampled_from(_BATCHES) | st.binary(max_size=80) | \
                st.lists(st.sampled_from(_BATCHES), min_size=2, max_size=3).map(b"".join)
        return st.binary(max_size=40)
    raise TypeError(f"no strategy for {field!r}")


def _maybe_null(strategy, field, version: int, bad_nulls: bool):
    if field.nullable_for_version_q(version):
        return st.none() | strategy
    if bad_nulls:
        # a null where the schema forbids it: rare enough that other fields still vary
        return st.one_of(strategy, strategy, strategy, st.none())
    return strategy


def field_strategy(field, version: int, bad_nulls: bool = False):
    name = field.name
    if isinstance(field, StructArrayField):
        inner = struct_strategy(field.array_of, version, bad_nulls)
        lists = st.lists(inner, max_size=3) | st.lists(inner, min_size=4, max_size=12)
        return _maybe_null(lists, field, version, bad_nulls)
    if isinstance(field, ArrayField):
        inner = _simple_strategy(field.array_of, name)
        lists = st.lists(inner, max_size=3) | st.lists(inner, min_size=4, max_size=12)
        return _maybe_null(lists, field, version, bad_nulls)
    if isinstance(field, StructField):
        inner = struct_strategy(field, version, bad_nulls)
        return st.none() | inner if field.nullable_for_version_q(version) else inner
    strategy = _simple_strategy(field, name)
    if isinstance(field._type, String) or field._type is Bytes:
        return _maybe_null(strategy, field, version, bad_nulls)
    return strategy


def struct_strategy(struct: StructField, version: int, bad_nulls: bool = False):
    """A data-class instance of `struct` at `version` (untagged fields always, tagged ones sometimes)."""
    fields = {f.name: field_strategy(f, version, bad_nulls) for f in struct.untagged_fields(version)}
    tagged = {f.name: field_strategy(f, version, False) for f in struct.tagged_fields(version)._fields}
    data_class = struct.data_class

    @st.composite
    def build(draw):
        values = {name: draw(s) for name, s in fields.items()}
        for name, s in tagged.items():
            if draw(st.booleans()):
                values[name] = draw(s)
        return data_class(version=version, **values)
    return build()


_CACHE: dict = {}


def request_objects(request_class: type, version: int, bad_nulls: bool = False):
    key = (request_class, version, bad_nulls)
    if key not in _CACHE:
        struct = request_class._struct
        fields = {f.name: field_strategy(f, version, bad_nulls) for f in struct.untagged_fields(version)}
        tagged = {f.name: field_strategy(f, version, False) for f in struct.tagged_fields(version)._fields}

        @st.composite
        def build(draw):
            values = {name: draw(s) for name, s in fields.items()}
            for name, s in tagged.items():
                if draw(st.booleans()):
                    values[name] = draw(s)
            return request_class(**values)
        _CACHE[key] = build()
    return _CACHE[key]


def encode_body(request, version: int) -> bytes:
    return bytes(request.encode(version=version))


# ------------------------------------------------------------------------------------------------
# byte-level mutations

_BOMBS = [b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x80\x00\x00\x00", b"\xff\xff\xff\xfb",
          b"\xff\xff\xff\xff\x0f", b"\xff\xff\xff\xff\x07", b"\x80\x80\x80\x80\x80\x01", b"\x7f\xff", b"\xff\xfe",
          b"\x00", b"\x01", b"\xff"]

mutation = st.one_of(
    st.tuples(st.just("set"), st.integers(0, 10**6), st.integers(0, 255)),
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(0, 7)),
    st.tuples(st.just("delete"), st.integers(0, 10**6), st.integers(1, 8)),
    st.tuples(st.just("insert"), st.integers(0, 10**6), st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("bomb"), st.integers(0, 10**6), st.sampled_from(_BOMBS)),
    st.tuples(st.just("truncate"), st.integers(0, 10**6), st.just(0)),
)


def mutations(max_size: int = 4):
    return st.lists(mutation, min_size=1, max_size=max_size)


def apply_mutations(data: bytes, edits, first: int = 0) -> bytes:
    """Apply `edits` to data[first:] (positions are taken modulo the mutable length)."""
    out = bytearray(data)
    for op, pos, arg in edits:
        if len(out) <= first:
            break
        pos = first + pos % (len(out) - first)
        if op == "set":
            out[pos] = arg
        elif op == "flip":
            out[pos] ^= 1 << arg
        elif op == "delete":
            del out[pos:pos + arg]
        elif op == "insert":
            out[pos:pos] = arg
        elif op == "bomb":
            out[pos:pos + len(arg)] = arg
        else:
            del out[pos:]
    return bytes(out)
