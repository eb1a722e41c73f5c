"""`__transaction_state`: the partitions holding every transactional id's metadata, and the cache
rebuilt from them (Kafka's TransactionStateManager).

- The topic is internal and compacted, `transaction.state.log.num.partitions` partitions (50), created
  lazily the first time a client uses transactions, so an idle broker starts without it.
- A transactional id lives in partition `Utils.abs(javaHashCode(id)) % N`.
- On start, existing partitions are replayed in the background (the listener is already open):
  requests for an id whose partition is still loading get COORDINATOR_LOAD_IN_PROGRESS.
- `persist` writes one transition (key = id, value = TransactionLogValue, or a tombstone for an
  expired id) with AppendOrigin.COORDINATOR and only then applies it to the cached metadata: a state
  change is durable before any answer depends on it.
"""
from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Awaitable, Callable, Iterator

import kafka.errors as ke

from minikafka.protocol.record_batch import iter_headers
from minikafka.storage.producer_state import AppendOrigin

from minikafka.coordinator.partitioning import partition_for
from minikafka.coordinator.txn.log import (
    VALUE_VERSION,
    TxnLogFormatError,
    decode_key,
    decode_value,
    encode_batch,
    encode_key,
    encode_value,
    iter_records,
)
from minikafka.coordinator.txn.state import TxnMetadata, TxnState, TxnTransit

log = logging.getLogger(__name__)

TXN_TOPIC = "__transaction_state"
LOAD_READ_BYTES = 5 * 1024 * 1024  # transaction.state.log.load.buffer.size
COORDINATOR_LEADER_EPOCH = 0  # one broker leads every partition, forever, in epoch 0


class CoordinatorUnavailable(Exception):
    """The coordinator cannot serve this id now: `errno` is COORDINATOR_NOT_AVAILABLE,
    COORDINATOR_LOAD_IN_PROGRESS or NOT_COORDINATOR."""

    def __init__(self, errno: int, message: str = "") -> None:
        super().__init__(message or ke.for_code(errno).__name__)
        self.errno = errno


class TxnStateManager:
    def __init__(self, catalog: Any, num_partitions: int, segment_bytes: int, min_isr: int = 1,
                 clock: Callable[[], float] = time.time,
                 value_version: Callable[[], int] = lambda: VALUE_VERSION) -> None:
        self.catalog = catalog
        self.configured_partitions = num_partitions
        self.segment_bytes = segment_bytes
        self.min_isr = min_isr
        self.clock = clock
        self.value_version = value_version  # TransactionLogValue version to write (by transaction.version)
        self.coordinator_epoch = COORDINATOR_LEADER_EPOCH
        self.cache: dict[int, dict[str, TxnMetadata]] = {}
        # On a cluster (`enable_partition_ownership`): partition -> coordinator epoch (its leader epoch) of
        # the partitions this node leads; None on a single node (every partition, epoch 0).
        self.owned: dict[int, int] | None = None
        # async (topic, partition, end_offset) -> error code, waits until an append is replicated; None
        # on a single node
        self.replication: Callable[[str, int, int], Awaitable[int]] | None = None
        self.append_end: dict[int, int] = {}  # partition -> end offset of this node's last append
        self.id_end: dict[str, int] = {}  # transactional id -> end of its last append not yet seen replicated
        self.append_check: Callable[[str, int], int] = lambda _t, _p: 0
        self.loading: set[int] = set()
        self.load_task: asyncio.Task | None = None

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    # ---------------------------------------------------------------- topic

    @property
    def num_partitions(self) -> int:
        info = self.catalog.get(TXN_TOPIC)
        return info.partitions if info is not None else self.configured_partitions

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def topic_exists(self) -> bool:
        return self.catalog.get(TXN_TOPIC) is not None

    def _topic_configs(self) -> dict[str, str]:
        return {"cleanup.policy": "compact", "compression.type": "uncompressed",
                "segment.bytes": str(self.segment_bytes), "min.insync.replicas": str(self.min_isr)}

    def ensure_topic(self) -> None:
        """Create `__transaction_state` on first transactional use (Kafka auto-creates it from
        FindCoordinator); a new topic has nothing to load. Synchronous (partition files made in the
        calling thread): tests and fallback; the broker calls `ensure_topic_async` first."""
        if self.topic_exists():
            return
        if self.owned is not None:  # a cluster: only the controller creates it (FindCoordinator does)
            raise CoordinatorUnavailable(ke.CoordinatorNotAvailableError.errno)
        is_creating = getattr(self.catalog, "is_creating", None)
        if is_creating is not None and is_creating(TXN_TOPIC):  # `ensure_topic_async` is making it: retriable
            raise CoordinatorUnavailable(ke.CoordinatorNotAvailableError.errno)
        t0 = time.monotonic()
        self.catalog.create(TXN_TOPIC, self.configured_partitions, 1, self._topic_configs(), internal=True)
        if self.owned is None:
            for p in range(self.configured_partitions):
                self.cache.setdefault(p, {})
        log.info("created %s with %d partitions in %.0f ms", TXN_TOPIC, self.configured_partitions,
                 (time.monotonic() - t0) * 1000)

    async def ensure_topic_async(self) -> None:
        """`ensure_topic` with the partition files made off the event loop; concurrent callers share
        one creation."""
        if self.topic_exists():
            return
        info = await self.catalog.create_async(TXN_TOPIC, self.configured_partitions, 1, self._topic_configs(),
                                               internal=True, exist_ok=True)
        if self.owned is None:
            for p in range(info.partitions):
                self.cache.setdefault(p, {})

    # ---------------------------------------------------------------- ownership (cluster)

    def enable_partition_ownership(self, replication: Callable[[str, int, int], Awaitable[int]],
                                   append_check: Callable[[str, int], int] = lambda _t, _p: 0) -> None:
        """Cluster mode: coordinate no partition until `load_as_leader` is called for it; appends are
        waited for with `replication` before answers depend on them, and not made at all while
        `append_check(topic, partition)` answers an error (not the leader, ISR below min.insync.replicas:
        Kafka's acks=all check before the append)."""
        self.owned = {}
        self.replication = replication
        self.append_check = append_check
        self.cache.clear()
        self.loading.clear()

    def epoch_of(self, partition: int) -> int:
        """The coordinator epoch of `partition` (its leader epoch; 0 on a single node, -1 if not owned)."""
        if self.owned is None:
            return self.coordinator_epoch
        return self.owned.get(partition, -1)

    def load_as_leader(self, partition: int, epoch: int) -> list[TxnMetadata] | None:
        """This node leads `partition` in `epoch`: replay it and serve its ids; returns the loaded
        metadata (None when it was already loaded in this epoch or a newer one)."""
        if self.owned is None:
            return None
        current = self.owned.get(partition)
        if current is not None and current >= epoch:
            return None
        self.owned[partition] = epoch
        self.loading.add(partition)
        self.cache.pop(partition, None)
        try:
            loaded = self.load_partition(partition)
        except Exception:
            log.exception("loading %s-%d failed; its transactional ids stay unavailable", TXN_TOPIC, partition)
            self.loading.discard(partition)
            self.owned.pop(partition, None)
            return None
        self.cache[partition] = loaded
        self.loading.discard(partition)
        log.info("coordinating %s-%d in epoch %d (%d transactional ids)", TXN_TOPIC, partition, epoch, len(loaded))
        return list(loaded.values())

    def unload(self, partition: int) -> None:
        """This node no longer leads `partition`: its ids answer NOT_COORDINATOR from now on."""
        if self.owned is None:
            return
        was = self.owned.pop(partition, None)
        self.cache.pop(partition, None)
        self.loading.discard(partition)
        self.append_end.pop(partition, None)
        for txn_id in [t for t in self.id_end if self.partition_for(t) == partition]:
            del self.id_end[txn_id]
        if was is not None:
            log.info("resigned as coordinator of %s-%d (epoch %d)", TXN_TOPIC, partition, was)

    async def durable(self, transactional_id: str) -> int:
        """0 once this node's last append to the id's partition is replicated (at once on a single node);
        else the error to answer: NOT_COORDINATOR (leadership moved) or COORDINATOR_NOT_AVAILABLE."""
        if self.replication is None:
            return 0
        p = self.partition_for(transactional_id)
        end = self.append_end.get(p)
        return 0 if end is None else await self._replicated(p, end)

    async def _replicated(self, partition: int, end: int) -> int:
        code = await self.replication(TXN_TOPIC, partition, end)
        if not code:
            return 0
        if code in (ke.NotLeaderForPartitionError.errno, ke.KafkaStorageError.errno):
            return ke.NotCoordinatorError.errno
        return ke.CoordinatorNotAvailableError.errno

    async def committed_view(self, transactional_id: str) -> int:
        """Before a read of the id's state (DescribeTransactions): as GroupCoordinator.committed_view, the
        id's appends made before the read replicated first (Kafka shows a transition only once it is
        written), a few rounds at most; 0 or the error to answer."""
        if self.replication is None:
            return 0
        p = self.partition_for(transactional_id)
        for _ in range(3):
            end = self.id_end.get(transactional_id)
            if end is None:
                return 0
            if (code := await self._replicated(p, end)):
                return code
            if self.id_end.get(transactional_id) == end:
                del self.id_end[transactional_id]
                return 0
        return 0

    # ---------------------------------------------------------------- loading

    def start_loading(self, on_loaded: Callable[[int, list[TxnMetadata]], None]) -> None:
        """Replay every existing partition in a background task; `on_loaded(partition, metadata)` runs as
        each one becomes available (the coordinator finishes its prepared transactions there)."""
        if not self.topic_exists() or self.owned is not None:
            return
        n = self.num_partitions
        self.loading = set(range(n))
        self.load_task = asyncio.get_running_loop().create_task(self._load_all(n, on_loaded))

    async def _load_all(self, n: int, on_loaded: Callable[[int, list[TxnMetadata]], None]) -> None:
        t0 = time.monotonic()
        total = 0
        for p in range(n):
            await asyncio.sleep(0)  # let requests in between partitions
            try:
                loaded = self.load_partition(p)
            except Exception:
                log.exception("loading %s-%d failed; its transactional ids stay unavailable", TXN_TOPIC, p)
                continue
            self.cache[p] = loaded
            self.loading.discard(p)
            total += len(loaded)
            try:
                on_loaded(p, list(loaded.values()))
            except Exception:
                log.exception("completing loaded transactions of %s-%d failed", TXN_TOPIC, p)
        log.info("loaded %d transactional ids from %d partitions of %s in %.0f ms", total, n, TXN_TOPIC,
                 (time.monotonic() - t0) * 1000)

    def load_partition(self, partition: int) -> dict[str, TxnMetadata]:
        """The latest record of every id in one partition (tombstones remove)."""
        plog = self.catalog.partition_log(TXN_TOPIC, partition)
        loaded: dict[str, TxnMetadata] = {}
        if plog is None:
            return loaded
        for offset, key, value in self._records(plog):
            try:
                txn_id = decode_key(key) if key is not None else None
                if txn_id is None:
                    continue
                if value is None:
                    loaded.pop(txn_id, None)
                    continue
                transit = decode_value(value)
            except (TxnLogFormatError, UnicodeDecodeError) as exc:
                log.warning("skipping undecodable record at %s-%d offset %d: %s", TXN_TOPIC, partition, offset, exc)
                continue
            loaded[txn_id] = TxnMetadata.from_transit(txn_id, transit)
        return loaded

    @staticmethod
    def _records(plog: Any) -> Iterator[tuple[int, bytes | None, bytes | None]]:
        offset = plog.log_start_offset
        end = plog.log_end_offset
        while offset < end:
            chunk = plog.read(offset, LOAD_READ_BYTES)
            if not chunk:
                break
            last = offset
            for pos, header in iter_headers(chunk):
                last = header.last_offset
                if header.last_offset < offset:
                    continue
                for rec in iter_records(chunk[pos:pos + header.size]):
                    if rec[0] >= offset:
                        yield rec
            if last < offset:
                break
            offset = last + 1

    # ---------------------------------------------------------------- access

    def _partition_cache(self, transactional_id: str) -> dict[str, TxnMetadata]:
        if not self.topic_exists():
            raise CoordinatorUnavailable(ke.CoordinatorNotAvailableError.errno)
        p = self.partition_for(transactional_id)
        if p in self.loading:
            raise CoordinatorUnavailable(ke.CoordinatorLoadInProgressError.errno)
        cache = self.cache.get(p)
        if cache is None:
            raise CoordinatorUnavailable(ke.NotCoordinatorError.errno)
        return cache

    def get(self, transactional_id: str) -> TxnMetadata | None:
        """The id's metadata, None if unknown; raises CoordinatorUnavailable."""
        return self._partition_cache(transactional_id).get(transactional_id)

    def put_if_absent(self, meta: TxnMetadata) -> TxnMetadata:
        return self._partition_cache(meta.transactional_id).setdefault(meta.transactional_id, meta)

    def all_metadata(self) -> Iterator[TxnMetadata]:
        for p, cache in list(self.cache.items()):
            if p not in self.loading:
                yield from list(cache.values())

    @property
    def is_loading(self) -> bool:
        return bool(self.loading)

    # ---------------------------------------------------------------- persistence

    def persist(self, meta: TxnMetadata, transit: TxnTransit) -> None:
        """Write a prepared transition to the id's partition, then apply it. Dead writes a tombstone and
        removes the id. On failure the pending transition is dropped and the exception propagates."""
        txn_id = meta.transactional_id
        p = self.partition_for(txn_id)
        plog = self.catalog.partition_log(TXN_TOPIC, p)
        try:
            if plog is None:
                raise CoordinatorUnavailable(ke.NotCoordinatorError.errno, f"{TXN_TOPIC}-{p} is not hosted here")
            value = None if transit.state is TxnState.DEAD else encode_value(transit, self.value_version())
            batch = encode_batch([(encode_key(txn_id), value)], self.now_ms())
            if self.owned is None:
                plog.append(batch, leader_epoch=COORDINATOR_LEADER_EPOCH, origin=AppendOrigin.COORDINATOR)
            else:
                epoch = self.owned.get(p)
                if epoch is None:
                    raise CoordinatorUnavailable(ke.NotCoordinatorError.errno, f"not the leader of {TXN_TOPIC}-{p}")
                if (code := self.append_check(TXN_TOPIC, p)):
                    raise CoordinatorUnavailable(ke.NotCoordinatorError.errno
                                                 if code == ke.NotLeaderForPartitionError.errno
                                                 else ke.CoordinatorNotAvailableError.errno,
                                                 f"{TXN_TOPIC}-{p}: error {code} before the append")
                info = plog.append(batch, leader_epoch=epoch, origin=AppendOrigin.COORDINATOR)
                self.append_end[p] = self.id_end[txn_id] = info.last_offset + 1
        except BaseException:
            meta.abort_transition()
            raise
        if transit.state is TxnState.DEAD:
            meta.abort_transition()
            cache = self.cache.get(p)
            if cache is not None and cache.get(txn_id) is meta:
                del cache[txn_id]
        else:
            meta.complete_transition(transit)

    async def stop(self) -> None:
        if self.load_task is not None and not self.load_task.done():
            self.load_task.cancel()
            try:
                await self.load_task
            except (asyncio.CancelledError, Exception):
                pass
