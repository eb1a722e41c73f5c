"""The `_schemas` partition as the registry's store: appends of JSON key/value records, and a reader that
applies every record past the last one applied (Confluent's KafkaStoreReaderThread, done on demand: before
each request and after each append, so records appended by anyone else are seen too).

It gets the partition log (the ordinary partition-log interface: append, read, log start and end offsets)
from broker/server.py; it knows nothing else of the broker.
"""
from __future__ import annotations

import asyncio
import logging
from typing import Any

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from minikafka.protocol.record_batch import iter_headers
from minikafka.schema_registry import records as r
from minikafka.schema_registry.state import RegistryState
from minikafka.storage.producer_state import AppendOrigin

log = logging.getLogger(__name__)

TOPIC = "_schemas"
TOPIC_CONFIGS = {"cleanup.policy": "compact"}
READ_CHUNK = 1 << 20


def build_batch(records: list[tuple[bytes, bytes | None]], timestamp_ms: int) -> bytes:
    """One uncompressed v2 batch of (key, value) records; value None = tombstone."""
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False, producer_id=-1,
                                        producer_epoch=-1, base_sequence=-1, batch_size=2**31 - 1)
    for i, (key, value) in enumerate(records):
        builder.append(i, timestamp=timestamp_ms, key=key, value=value, headers=[])
    return bytes(builder.build())


class LogStore:
    def __init__(self, plog: Any, clock: Any = None) -> None:
        import time
        self.plog = plog
        self._clock = clock or time.time

    async def append(self, records: list[tuple[bytes, bytes | None]]) -> None:
        self.plog.append(build_batch(records, int(self._clock() * 1000)), origin=AppendOrigin.COORDINATOR)

    def catch_up(self, state: RegistryState, max_chunks: int | None = None) -> bool:
        """Apply the records from the state's `next_offset` to the log end; False if `max_chunks` stopped it
        first."""
        plog = self.plog
        offset = max(state.next_offset, plog.log_start_offset)
        end = plog.log_end_offset
        chunks = 0
        while offset < end:
            if max_chunks is not None and chunks >= max_chunks:
                state.next_offset = offset
                return False
            data = plog.read(offset, READ_CHUNK, max_offset=end)
            chunks += 1
            progressed = False
            for pos, header in iter_headers(data):
                if header.last_offset < offset:
                    continue
                batch = DefaultRecordBatch(bytes(data[pos:pos + header.size]))
                if not batch.is_control_batch:
                    for rec in batch:
                        if rec.offset >= offset:
                            _apply(state, rec.offset, rec.key, rec.value)
                offset = header.last_offset + 1
                progressed = True
            if not progressed:
                break
        state.next_offset = max(offset, state.next_offset)
        return True

    async def replay(self, state: RegistryState) -> None:
        """The start-up replay: the whole partition, yielding to the event loop between chunks."""
        while not self.catch_up(state, max_chunks=1):
            await asyncio.sleep(0)


def _apply(state: RegistryState, offset: int, key: bytes | None, value: bytes | None) -> None:
    try:
        state.apply(r.decode(key, value))
    except (r.RecordFormatError, KeyError, TypeError, ValueError) as exc:
        log.warning("_schemas offset %d: skipping a record this registry cannot read: %s", offset, exc)


class MemoryStore:
    """The store without a log (unit tests): records kept in a list, applied the same way."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []

    async def append(self, records: list[tuple[bytes, bytes | None]]) -> None:
        self.records += records

    def catch_up(self, state: RegistryState, max_chunks: int | None = None) -> bool:
        for offset in range(state.next_offset, len(self.records)):
            _apply(state, offset, *self.records[offset])
        state.next_offset = len(self.records)
        return True

    async def replay(self, state: RegistryState) -> None:
        self.catch_up(state)
