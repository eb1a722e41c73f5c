"""The `_schemas` partition as the registry's store: appends of JSON key/value records, and a reader that
applies every record past the last one applied (Confluent's KafkaStoreReaderThread, done on demand: before
each request and after each append, so records appended by anyone else are seen too).

It gets the partition log (the ordinary partition-log interface: append, read, log start and end offsets,
high watermark) from broker/schema_registry_listener.py; it knows nothing else of the broker, nor of HTTP.

Invariant: only records below the partition's high watermark are applied (committed ones: on a single node
that is the log end), so what a node serves is never something a failover could take back.

ReplicatedLogStore is the store of a node of a multi-node cluster: it writes only while the node leads
partition 0 (`Leadership`, the broker's replica manager), a write is acknowledged once committed (acks=all:
the high watermark past it), and before deciding a write the leader has applied its whole log, committed
first, so ids and versions chosen after a failover never repeat. Anywhere else a write raises NotLeader.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Callable, Protocol

from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from minikafka.protocol import errors as kafka_errors
from minikafka.protocol.record_batch import iter_headers
from minikafka.schema_registry import errors
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
        self.plog = plog
        self._clock = clock or time.time

    async def wait_ready(self, timeout_s: float) -> None:
        """Returns once the store can serve (at once: the partition is given at construction)."""

    async def prepare_write(self, state: RegistryState) -> None:
        """Before a write is decided (under the registry's lock): everything the store holds applied."""
        self.catch_up(state)

    async def append(self, records: list[tuple[bytes, bytes | None]]) -> None:
        self.plog.append(build_batch(records, int(self._clock() * 1000)), origin=AppendOrigin.COORDINATOR)

    def local_end(self) -> int:
        """The end of what the local copy holds, committed or not yet known to be."""
        return self.plog.log_end_offset

    async def wait_applied(self, state: RegistryState, offset: int, timeout_s: float) -> bool:
        """Apply up to at least `offset` (a write another node made and reported), waiting at most `timeout_s`
        for the local copy to have it committed; False if it did not come in time."""
        deadline = time.monotonic() + timeout_s
        while True:
            self.catch_up(state)
            if state.next_offset >= offset:
                return True
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(0.01)

    def catch_up(self, state: RegistryState, max_chunks: int | None = None) -> bool:
        """Apply the records from the state's `next_offset` to the high watermark; False if `max_chunks` stopped
        it first."""
        plog = self.plog
        offset = max(state.next_offset, plog.log_start_offset)
        end = plog.high_watermark
        chunks = 0
        while offset < end:
            if max_chunks is not None and chunks >= max_chunks:
                state.next_offset = offset
                return False
            data = plog.read(offset, READ_CHUNK, max_offset=end)
            chunks += 1
            if not data:  # no batch in [offset, end): compacted away
                offset = end
                break
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
    """One record applied, or skipped with a warning whatever it holds: anyone may write to `_schemas`, and a
    record that raised here would stop the catch-up at its offset for good (every request a 500)."""
    try:
        state.apply(r.decode(key, value))
    except (r.RecordFormatError, KeyError, TypeError, ValueError) as exc:
        log.warning("_schemas offset %d: skipping a record this registry cannot read: %s", offset, exc)
    except Exception as exc:  # noqa: BLE001 - see above
        log.warning("_schemas offset %d: skipping a record this registry cannot read: %r", offset, exc)


class Leadership(Protocol):
    """What the store needs of the broker about `_schemas` partition 0 (its replica manager)."""

    def leader_error(self) -> int:
        """0 while this node leads the partition and the ISR is at least min.insync.replicas, else Kafka's error
        code (NOT_LEADER_OR_FOLLOWER 6, NOT_ENOUGH_REPLICAS 19)."""

    def leader_epoch(self) -> int: ...

    async def wait_committed(self, end_offset: int, timeout_s: float) -> int:
        """0 once the high watermark reached `end_offset`, else Kafka's error code (6: leadership lost,
        7: timed out, 20: ISR below min.insync.replicas)."""


WRITE_TIMEOUT_S = 10.0  # a write not committed by then is answered 50002 (its outcome is then unknown)


class ReplicatedLogStore(LogStore):
    """`_schemas` partition 0 on a node of a multi-node cluster. The partition log is looked up through
    `partition` (None until the topic exists here); `ready` is set by the broker once it was replayed."""

    def __init__(self, partition: Callable[[], Any], leadership: Leadership, clock: Any = None) -> None:
        super().__init__(None, clock)
        self._partition = partition
        self.leadership = leadership
        self.ready = asyncio.Event()
        self.failure: str | None = None  # why the store cannot serve (set by the broker's start-up task)

    async def wait_ready(self, timeout_s: float) -> None:
        if not self.ready.is_set():
            try:
                await asyncio.wait_for(self.ready.wait(), timeout_s)
            except asyncio.TimeoutError:
                pass
        if self.failure is not None:
            raise errors.store_error(self.failure)
        if not self.ready.is_set():
            raise errors.operation_timed_out("The schema registry is still loading the _schemas topic")
        plog = self._partition()
        if plog is None:
            raise errors.store_error("this node holds no replica of _schemas partition 0")
        self.plog = plog  # the topic may have been deleted and created again

    def _code_error(self, code: int, what: str) -> errors.RegistryError:
        if code == kafka_errors.NOT_LEADER_OR_FOLLOWER:
            return errors.NotLeader()
        if code == kafka_errors.REQUEST_TIMED_OUT:
            return errors.operation_timed_out(f"{what} timed out")
        if code in (kafka_errors.NOT_ENOUGH_REPLICAS, kafka_errors.NOT_ENOUGH_REPLICAS_AFTER_APPEND):
            return errors.store_error("the _schemas partition has fewer in-sync replicas than min.insync.replicas")
        return errors.store_error(f"Kafka error {code}")

    async def prepare_write(self, state: RegistryState) -> None:
        """Leader only (NotLeader otherwise): its whole log committed and applied before anything is decided,
        records of an earlier leader included."""
        if (code := self.leadership.leader_error()):
            raise self._code_error(code, "Operation")
        end = self.plog.log_end_offset
        if self.plog.high_watermark < end:
            if (code := await self.leadership.wait_committed(end, WRITE_TIMEOUT_S)):
                raise self._code_error(code, "Operation")
        self.catch_up(state)

    async def append(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Appended as the leader in its epoch, returned once committed; NotLeader before the append, 50002
        after it when it is not known to be committed (leadership lost or timed out)."""
        if (code := self.leadership.leader_error()):
            raise self._code_error(code, "Operation")
        info = self.plog.append(build_batch(records, int(self._clock() * 1000)),
                                leader_epoch=self.leadership.leader_epoch(), origin=AppendOrigin.COORDINATOR)
        code = await self.leadership.wait_committed(info.last_offset + 1, WRITE_TIMEOUT_S)
        if code == kafka_errors.NOT_LEADER_OR_FOLLOWER:
            raise errors.operation_timed_out("Operation timed out: leadership of _schemas moved before the write "
                                             "was committed")
        if code:
            raise self._code_error(code, "Operation")


class MemoryStore:
    """The store without a log (unit tests): records kept in a list, applied the same way."""

    def __init__(self) -> None:
        self.records: list[tuple[bytes, bytes | None]] = []

    async def wait_ready(self, timeout_s: float) -> None:
        pass

    async def prepare_write(self, state: RegistryState) -> None:
        self.catch_up(state)

    async def wait_applied(self, state: RegistryState, offset: int, timeout_s: float) -> bool:
        self.catch_up(state)
        return True

    def local_end(self) -> int:
        return len(self.records)

    async def append(self, records: list[tuple[bytes, bytes | None]]) -> None:
        self.records += records

    def catch_up(self, state: RegistryState, max_chunks: int | None = None) -> bool:
        for offset in range(state.next_offset, len(self.records)):
            _apply(state, offset, *self.records[offset])
        state.next_offset = len(self.records)
        return True

    async def replay(self, state: RegistryState) -> None:
        self.catch_up(state)
