"""Records of `__transaction_state` in Kafka's TransactionLog schemas, and the batch that carries them.

Key (TransactionLogKey, prefixed by the coordinator record type 0):
    int16 0 | string transactionalId (int16 length + UTF-8)
Value (TransactionLogValue), int16 version first:
    v0:  producerId int64 | producerEpoch int16 | transactionTimeoutMs int32 | transactionStatus int8 |
         transactionPartitions nullable array (int32 count) of {topic string, partitionIds [int32]} |
         transactionLastUpdateTimestampMs int64 | transactionStartTimestampMs int64
    v1:  the same fields in flexible encoding (compact strings/arrays, tagged fields: 0 PreviousProducerId,
         1 NextProducerId, 2 ClientTransactionVersion, 3 NextProducerEpoch).
Kafka 4.x writes v1 while transaction.version >= 1 is finalized (v0 below), with the tagged fields
that differ from their defaults: PreviousProducerId when known, NextProducerId while a TV2
transaction that exhausted its epochs completes, ClientTransactionVersion when not 0; so does this
broker. Both versions are read (NextProducerEpoch is not used by Kafka's coordinator either).
A null value is a tombstone (the id expired). Partitions are null in the Empty state, as Kafka
writes them.
"""
from __future__ import annotations

import struct
from typing import Iterator

from minikafka.protocol.record_batch import HEADER_SIZE, compute_crc

from minikafka.coordinator.txn.state import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, TxnState, TxnTransit

KEY_VERSION = 0  # CoordinatorRecordType TRANSACTION_LOG
VALUE_VERSION = 1  # what Kafka 4.x writes

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_V0_HEAD = struct.Struct(">hqhib")  # version, producerId, epoch, timeout, status
_TIMES = struct.Struct(">qq")
_BATCH_HEADER = struct.Struct(">qiibIhiqqqhii")


class TxnLogFormatError(ValueError):
    """A `__transaction_state` record that cannot be decoded."""


# ---------------------------------------------------------------------------------------- keys

def encode_key(transactional_id: str) -> bytes:
    raw = transactional_id.encode()
    return _I16.pack(KEY_VERSION) + _I16.pack(len(raw)) + raw


def decode_key(data: bytes) -> str | None:
    """The transactional id, or None for a key of another record type (skipped, as Kafka does)."""
    if len(data) < 4:
        raise TxnLogFormatError(f"transaction log key of {len(data)} bytes")
    (version,) = _I16.unpack_from(data, 0)
    if version != KEY_VERSION:
        return None
    (n,) = _I16.unpack_from(data, 2)
    if n < 0 or 4 + n > len(data):
        raise TxnLogFormatError("bad transactional id length")
    return data[4:4 + n].decode()


# ---------------------------------------------------------------------------------------- values

def _group_partitions(partitions: frozenset[tuple[str, int]]) -> list[tuple[str, list[int]]]:
    by_topic: dict[str, list[int]] = {}
    for topic, p in sorted(partitions):
        by_topic.setdefault(topic, []).append(p)
    return list(by_topic.items())


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while n & ~0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def encode_value(t: TxnTransit, version: int = VALUE_VERSION) -> bytes:
    """TransactionLogValue for a transit (Dead is never written: expiry writes a tombstone)."""
    if t.state is TxnState.EMPTY and t.partitions:
        raise ValueError(f"an Empty transaction cannot have partitions: {t}")
    flexible = version >= 1
    out = bytearray(_V0_HEAD.pack(version, t.producer_id, t.producer_epoch, t.timeout_ms, t.state.value))
    groups = None if t.state is TxnState.EMPTY else _group_partitions(t.partitions)
    if flexible:
        out += b"\x00" if groups is None else _uvarint(len(groups) + 1)
    else:
        out += _I32.pack(-1 if groups is None else len(groups))
    for topic, parts in groups or ():
        raw = topic.encode()
        if flexible:
            out += _uvarint(len(raw) + 1) + raw + _uvarint(len(parts) + 1)
        else:
            out += _I16.pack(len(raw)) + raw + _I32.pack(len(parts))
        out += struct.pack(f">{len(parts)}i", *parts)
        if flexible:
            out += b"\x00"
    out += _TIMES.pack(t.update_ms, t.start_ms)
    if flexible:  # tagged fields in tag order, written only when not at their default
        tags = []
        if t.last_producer_id >= 0:
            tags.append(b"\x00\x08" + struct.pack(">q", t.last_producer_id))  # 0: PreviousProducerId
        if t.next_producer_id >= 0:
            tags.append(b"\x01\x08" + struct.pack(">q", t.next_producer_id))  # 1: NextProducerId
        if t.client_tv != 0:
            tags.append(b"\x02\x02" + _I16.pack(t.client_tv))  # 2: ClientTransactionVersion
        out += _uvarint(len(tags)) + b"".join(tags)
    return bytes(out)


class _Reader:
    def __init__(self, data: bytes, pos: int) -> None:
        self.data = data
        self.pos = pos

    def take(self, fmt: struct.Struct):
        try:
            values = fmt.unpack_from(self.data, self.pos)
        except struct.error as exc:
            raise TxnLogFormatError(f"truncated transaction log value: {exc}") from None
        self.pos += fmt.size
        return values

    def i8(self) -> int:
        return self.take(struct.Struct(">b"))[0]

    def i16(self) -> int:
        return self.take(_I16)[0]

    def i32(self) -> int:
        return self.take(_I32)[0]

    def i64(self) -> int:
        return self.take(struct.Struct(">q"))[0]

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            if self.pos >= len(self.data):
                raise TxnLogFormatError("truncated varint")
            b = self.data[self.pos]
            self.pos += 1
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise TxnLogFormatError("varint too long")

    def raw(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.data):
            raise TxnLogFormatError("truncated transaction log value")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def string(self, flexible: bool) -> str:
        n = self.uvarint() - 1 if flexible else self.i16()
        return self.raw(n).decode()

    def array_len(self, flexible: bool) -> int:
        return self.uvarint() - 1 if flexible else self.i32()


def decode_value(data: bytes) -> TxnTransit:
    """A TransactionLogValue v0 or v1 as a transit (unknown tagged fields are skipped)."""
    r = _Reader(data, 0)
    version = r.i16()
    if version not in (0, 1):
        raise TxnLogFormatError(f"unknown transaction log value version {version}")
    flexible = version >= 1
    producer_id, epoch, timeout, status = r.i64(), r.i16(), r.i32(), r.i8()
    try:
        state = TxnState(status)
    except ValueError:
        raise TxnLogFormatError(f"unknown transaction status {status}") from None
    partitions: set[tuple[str, int]] = set()
    n_topics = r.array_len(flexible)
    for _ in range(max(n_topics, 0)):
        topic = r.string(flexible)
        for _ in range(max(r.array_len(flexible), 0)):
            partitions.add((topic, r.i32()))
        if flexible:
            _skip_tags(r)
    update_ms, start_ms = r.i64(), r.i64()
    last_producer_id = next_producer_id = NO_PRODUCER_ID
    client_tv = 0
    if flexible:
        for _ in range(r.uvarint()):
            tag, size = r.uvarint(), r.uvarint()
            body = r.raw(size)
            if tag == 0 and size == 8:
                last_producer_id = struct.unpack(">q", body)[0]
            elif tag == 1 and size == 8:
                next_producer_id = struct.unpack(">q", body)[0]
            elif tag == 2 and size == 2:
                client_tv = _I16.unpack(body)[0]
    if state is TxnState.EMPTY:
        partitions = set()
    return TxnTransit(producer_id, last_producer_id, epoch, NO_PRODUCER_EPOCH, timeout, state,
                      frozenset(partitions), start_ms, update_ms, next_producer_id, client_tv)


def _skip_tags(r: _Reader) -> None:
    for _ in range(r.uvarint()):
        r.uvarint()
        r.raw(r.uvarint())


# ---------------------------------------------------------------------------------------- batches

def _zigzag(n: int) -> bytes:
    v = (n << 1) ^ (n >> 63)
    out = bytearray()
    while v & ~0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def encode_batch(records: list[tuple[bytes, bytes | None]], timestamp_ms: int) -> bytes:
    """One uncompressed v2 batch (base offset 0, no producer id) of (key, value) records; a None value
    is a tombstone. Coordinator writes are small, so this is built directly rather than record by
    record through a general builder."""
    body = bytearray()
    for i, (key, value) in enumerate(records):
        rec = bytearray(b"\x00\x00")  # attributes, timestampDelta 0
        rec += _zigzag(i)
        rec += _zigzag(len(key)) + key
        rec += _zigzag(-1) if value is None else _zigzag(len(value)) + value
        rec += b"\x00"  # no headers
        body += _zigzag(len(rec)) + rec
    size = HEADER_SIZE + len(body)
    buf = bytearray(_BATCH_HEADER.pack(0, size - 12, -1, 2, 0, 0, len(records) - 1, timestamp_ms, timestamp_ms,
                                       -1, -1, -1, len(records)))
    buf += body
    struct.pack_into(">I", buf, 17, compute_crc(buf, 0, size))
    return bytes(buf)


def iter_records(batch: bytes) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record of a stored batch (any codec); control batches yield nothing."""
    from kafka.record.default_records import DefaultRecordBatch  # off the hot path: loading only

    b = DefaultRecordBatch(batch)
    if b.is_control_batch:
        return
    for rec in b:
        yield rec.offset, rec.key, rec.value
