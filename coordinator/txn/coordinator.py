"""The transaction coordinator (KIP-98, with KIP-360 epoch bumps, KIP-664 listing and KIP-890 part 1
verification): the logic behind InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn,
DescribeTransactions, ListTransactions and the produce-time check, modelled on Kafka's
TransactionCoordinator.

Answers are Kafka error codes (0 = success); the handlers map them to the request version (e.g.
PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH for old clients).

Ending a transaction: PREPARE_COMMIT/PREPARE_ABORT is written to `__transaction_state`; then one
marker per partition of the transaction (written in-process, see txn_markers.py); then
COMPLETE_COMMIT/COMPLETE_ABORT. A marker that cannot be written yet stays queued and is retried; the
transaction stays prepared meanwhile (CONCURRENT_TRANSACTIONS to the producer's next call). After a
restart every prepared transaction found in the log is finished the same way (markers may be
written twice, which is harmless).

Transaction version 2 (KIP-890 part 2) follows the version each request carries, as Kafka does:
EndTxn v5 ends a transaction with an epoch bump (a new producer id when the epochs run out), answered
with the producer id/epoch to use next; Produce v12+ and TxnOffsetCommit v5 add their partition to the
open transaction themselves. A transaction ends with the version of its EndTxn, so one begun before a
change of the finalized transaction.version finishes as its client began it. The aborts the
coordinator starts itself (fencing by InitProducerId, timeouts) use the finalized level, as Kafka's
`transactionVersionLevel()`. Markers carry the transaction's version to the partitions.

Timeouts: a reaper aborts transactions open longer than their transaction.timeout.ms, bumping the
producer epoch first (PrepareEpochFence) so that the zombie producer is fenced. Idle transactional
ids expire after transactional.id.expiration.ms (a tombstone in the log).

Test-only fault injection: broker config `minikafka.test.crash.point` = after_prepare_commit |
after_prepare_abort | after_first_marker | after_markers makes the broker process exit with status
137 (like kill -9) at that step of ending a transaction. It exists for the crash-recovery tests and
must never be set otherwise.
"""
from __future__ import annotations

import asyncio
import logging
import os
import re
import sys
import time
from typing import Any, Callable, NamedTuple

import kafka.errors as ke

from minikafka.coordinator.partitioning import partition_for
from minikafka.coordinator.txn.markers import Marker, MarkerWriter
from minikafka.coordinator.txn.state import (
    SHORT_MAX,
    TV2,
    IllegalTxnTransition,
    TopicPartition,
    TxnMetadata,
    TxnState,
    is_epoch_exhausted,
)
from minikafka.coordinator.txn.state_manager import TXN_TOPIC, CoordinatorUnavailable, TxnStateManager
from minikafka.protocol.errors import NONE

log = logging.getLogger(__name__)

GROUP_TOPIC = "__consumer_offsets"

INVALID_REQUEST = ke.InvalidRequestError.errno
INVALID_TRANSACTION_TIMEOUT = ke.InvalidTransactionTimeoutError.errno
INVALID_PRODUCER_ID_MAPPING = ke.InvalidProducerIdMappingError.errno
INVALID_TXN_STATE = ke.InvalidTxnStateError.errno
CONCURRENT_TRANSACTIONS = ke.ConcurrentTransactionsError.errno
PRODUCER_FENCED = ke.ProducerFencedError.errno
TRANSACTION_ABORTABLE = ke.TransactionAbortableError.errno
TRANSACTIONAL_ID_NOT_FOUND = ke.TransactionalIdNotFoundError.errno
UNKNOWN_TOPIC_OR_PARTITION = ke.UnknownTopicOrPartitionError.errno
# Marker errors after which retrying cannot help: the partition is gone, or it has seen a newer
# producer epoch / coordinator epoch. Kafka drops such markers too.
_MARKER_GIVE_UP = frozenset({UNKNOWN_TOPIC_OR_PARTITION, ke.InvalidProducerEpochError.errno,
                             ke.TransactionCoordinatorFencedError.errno})
MARKER_RETRY_S = 0.5
CRASH_POINTS = ("after_prepare_commit", "after_prepare_abort", "after_first_marker", "after_markers")


class TxnConfig(NamedTuple):
    num_partitions: int = 50
    segment_bytes: int = 104857600
    min_isr: int = 1
    max_timeout_ms: int = 900000
    id_expiration_ms: int = 604800000
    abort_interval_ms: int = 10000
    remove_interval_ms: int = 3600000
    verification_enabled: bool = True
    group_partitions: int = 50
    crash_point: str = ""

    @classmethod
    def from_props(cls, get: Callable[[str], str]) -> "TxnConfig":
        crash = get("minikafka.test.crash.point").strip()
        if crash and crash not in CRASH_POINTS:
            raise ValueError(f"minikafka.test.crash.point must be one of {CRASH_POINTS}, got {crash!r}")
        return cls(num_partitions=int(get("transaction.state.log.num.partitions")),
                   segment_bytes=int(get("transaction.state.log.segment.bytes")),
                   min_isr=int(get("transaction.state.log.min.isr")),
                   max_timeout_ms=int(get("transaction.max.timeout.ms")),
                   id_expiration_ms=int(get("transactional.id.expiration.ms")),
                   abort_interval_ms=int(get("transaction.abort.timed.out.transaction.cleanup.interval.ms")),
                   remove_interval_ms=int(get("transaction.remove.expired.transaction.cleanup.interval.ms")),
                   verification_enabled=get("transaction.partition.verification.enable").lower() == "true",
                   group_partitions=int(get("offsets.topic.num.partitions")),
                   crash_point=crash)


class TxnDescription(NamedTuple):
    """DescribeTransactions for one id."""
    error_code: int
    transactional_id: str
    state: str = ""
    timeout_ms: int = 0  # zeros when the id is not found, as Kafka answers
    start_ms: int = 0
    producer_id: int = 0
    producer_epoch: int = 0
    partitions: tuple[TopicPartition, ...] = ()


class EndTxnResult(NamedTuple):
    """EndTxn's answer: v5+ also returns the producer id/epoch the client continues with."""
    error_code: int
    producer_id: int = -1
    producer_epoch: int = -1


class TxnListing(NamedTuple):
    transactional_id: str
    producer_id: int
    state: str


class TransactionCoordinator:
    def __init__(self, config: TxnConfig, catalog: Any, next_producer_id: Callable[[], int],
                 error_code: Callable[[BaseException], int], clock: Callable[[], float] = time.time,
                 transaction_version: Callable[[], int] = lambda: TV2) -> None:
        self.config = config
        self.catalog = catalog
        self.next_producer_id = next_producer_id
        self.error_code = error_code
        self.clock = clock
        self.transaction_version = transaction_version  # the finalized level (broker/config/features.py)
        self.txns = TxnStateManager(catalog, config.num_partitions, config.segment_bytes, config.min_isr, clock,
                                    value_version=lambda: 1 if transaction_version() >= 1 else 0)
        self.markers = MarkerWriter(catalog, error_code, clock)
        # transactional id -> partitions whose marker still has to be written (retried in the background)
        self._unsent: dict[str, set[TopicPartition]] = {}
        self._tasks: list[asyncio.Task] = []
        self._completing: dict[str, asyncio.Task] = {}  # cluster: transactional id -> its marker task

    def now_ms(self) -> int:
        return int(self.clock() * 1000)

    @property
    def coordinator_epoch(self) -> int:
        return self.txns.coordinator_epoch

    def coordinator_epoch_of(self, transactional_id: str) -> int:
        """The coordinator epoch markers of this id carry: its partition's leader epoch (0 on one node)."""
        return self.txns.epoch_of(self.txns.partition_for(transactional_id))

    @property
    def clustered(self) -> bool:
        return self.txns.owned is not None

    # ---------------------------------------------------------------- partition leadership (cluster)

    def on_leader(self, partition: int, epoch: int) -> None:
        """This node became the leader of `__transaction_state` partition `partition` in `epoch`: load its
        ids and finish their prepared transactions (the previous coordinator may have died mid-way)."""
        loaded = self.txns.load_as_leader(partition, epoch)
        if loaded is not None:
            self._on_partition_loaded(partition, loaded)

    def on_follower(self, partition: int) -> None:
        """This node no longer leads `partition`: stop serving and completing its transactions."""
        self.txns.unload(partition)
        for txn_id in [t for t in self._unsent if self.txns.partition_for(t) == partition]:
            self._unsent.pop(txn_id, None)
            task = self._completing.pop(txn_id, None)
            if task is not None:
                task.cancel()

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """After the listener opened: load existing state in the background and start the timers."""
        self.txns.start_loading(self._on_partition_loaded)
        loop = asyncio.get_running_loop()
        self._tasks = [
            loop.create_task(self._every(self.config.abort_interval_ms, self.abort_timed_out_transactions)),
            loop.create_task(self._every(self.config.remove_interval_ms, self.expire_transactional_ids)),
            loop.create_task(self._every(MARKER_RETRY_S * 1000, self.retry_markers)),
        ]

    async def _every(self, interval_ms: float, fn: Callable[[], Any]) -> None:
        while True:
            await asyncio.sleep(max(interval_ms, 1) / 1000)
            try:
                fn()
            except Exception:
                log.exception("transaction coordinator task %s failed", getattr(fn, "__name__", fn))

    async def stop(self) -> None:
        self._tasks += list(self._completing.values())
        self._completing.clear()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        self._tasks = []
        await self.txns.stop()

    def _on_partition_loaded(self, partition: int, loaded: list[TxnMetadata]) -> None:
        """Finish what a crash interrupted: every prepared transaction gets its markers again."""
        for meta in loaded:
            if meta.state.is_prepare:
                log.info("completing %s of %s (producer %d epoch %d) found at load", meta.state.kafka_name,
                         meta.transactional_id, meta.producer_id, meta.producer_epoch)
                self._unsent[meta.transactional_id] = set(meta.partitions)
                self._start_markers(meta)

    def _crash_point(self, name: str) -> None:
        if self.config.crash_point == name:
            log.warning("test crash point %s reached: exiting with status 137", name)
            for handler in logging.getLogger().handlers:
                handler.flush()
            sys.stderr.flush()
            os._exit(137)

    # ---------------------------------------------------------------- FindCoordinator / InitProducerId

    def find_coordinator(self, transactional_id: str) -> int:
        """FindCoordinator(TRANSACTION): creates __transaction_state on first use."""
        try:
            self.txns.ensure_topic()
        except Exception as exc:
            log.exception("cannot create %s", TXN_TOPIC)
            return ke.CoordinatorNotAvailableError.errno if not self.error_code(exc) else self.error_code(exc)
        return NONE

    def init_producer_id(self, transactional_id: str, timeout_ms: int,
                         expected: tuple[int, int] | None = None) -> tuple[int, int, int]:
        """(error, producer id, epoch). `expected` = (producer id, epoch) a KIP-360 client resumes with."""
        if transactional_id == "":
            return INVALID_REQUEST, -1, -1
        if not 0 < timeout_ms <= self.config.max_timeout_ms:
            return INVALID_TRANSACTION_TIMEOUT, -1, -1
        try:
            self.txns.ensure_topic()
            meta = self.txns.get(transactional_id)
            if meta is None:
                meta = self.txns.put_if_absent(TxnMetadata(transactional_id, self.next_producer_id(), -1, timeout_ms,
                                                           TxnState.EMPTY, update_ms=self.now_ms()))
        except CoordinatorUnavailable as exc:
            return exc.errno, -1, -1
        if meta.pending_transition:
            return CONCURRENT_TRANSACTIONS, -1, -1
        if expected is not None and not self._valid_expected_producer(meta, *expected):
            return PRODUCER_FENCED, -1, -1
        state = meta.state
        if state.is_prepare:
            return CONCURRENT_TRANSACTIONS, -1, -1
        if state is TxnState.ONGOING:
            # Fence the current producer: abort its transaction with a bumped epoch, and let the new
            # one retry (it then gets the epoch bumped once more, or a new producer id).
            fence = meta.prepare_fence_epoch()
            code = self._end_transaction(transactional_id, fence.producer_id, fence.producer_epoch, False,
                                         from_client=False)
            if meta.pending_state is TxnState.PREPARE_EPOCH_FENCE:
                meta.abort_transition()
            return (code or CONCURRENT_TRANSACTIONS), -1, -1
        if state not in (TxnState.EMPTY, TxnState.COMPLETE_COMMIT, TxnState.COMPLETE_ABORT):
            raise IllegalTxnTransition(f"{meta!r}: InitProducerId in state {state.kafka_name}")
        now = self.now_ms()
        if meta.epoch_exhausted and (expected is None or expected[1] == meta.producer_epoch):
            transit = meta.prepare_producer_id_rotation(self.next_producer_id(), timeout_ms, now, expected is not None)
        else:
            transit = meta.prepare_increment_epoch(timeout_ms, None if expected is None else expected[1], now)
            if transit is None:
                return PRODUCER_FENCED, -1, -1
        code = self._persist(meta, transit)
        if code:
            return code, -1, -1
        log.info("initialized transactional id %s with producer id %d epoch %d on %s-%d", transactional_id,
                 meta.producer_id, meta.producer_epoch, TXN_TOPIC, self.txns.partition_for(transactional_id))
        return NONE, meta.producer_id, meta.producer_epoch

    @staticmethod
    def _valid_expected_producer(meta: TxnMetadata, producer_id: int, epoch: int) -> bool:
        return (meta.producer_epoch == -1 or producer_id == meta.producer_id
                or (producer_id == meta.last_producer_id and is_epoch_exhausted(epoch)))

    def _persist(self, meta: TxnMetadata, transit: Any) -> int:
        try:
            self.txns.persist(meta, transit)
        except CoordinatorUnavailable as exc:
            return exc.errno
        except Exception as exc:
            log.warning("writing %s for %s failed: %s", transit.state.kafka_name, meta.transactional_id, exc)
            # Kafka answers failed coordinator log writes with a retriable coordinator error
            return ke.NotCoordinatorError.errno
        return NONE

    def _lookup(self, transactional_id: str, producer_id: int) -> tuple[int, TxnMetadata | None]:
        if not transactional_id:
            return INVALID_REQUEST, None
        try:
            meta = self.txns.get(transactional_id)
        except CoordinatorUnavailable as exc:
            return exc.errno, None
        if meta is None or meta.producer_id != producer_id:
            return INVALID_PRODUCER_ID_MAPPING, None
        return NONE, meta

    # ---------------------------------------------------------------- partitions

    def add_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                       partitions: set[TopicPartition], client_tv: int = 0) -> int:
        code, meta = self._lookup(transactional_id, producer_id)
        if meta is None:
            return code
        if meta.producer_epoch != epoch:
            return PRODUCER_FENCED
        if meta.pending_transition or meta.state.is_prepare:
            return CONCURRENT_TRANSACTIONS
        if meta.state is TxnState.ONGOING and partitions <= meta.partitions:
            return NONE
        return self._persist(meta, meta.prepare_add_partitions(set(partitions), self.now_ms(), client_tv))

    def verify_partitions(self, transactional_id: str, producer_id: int, epoch: int,
                          partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        """AddPartitionsToTxn verify_only (KIP-890): is each partition in the producer's open transaction?"""
        code, meta = self._lookup(transactional_id, producer_id)
        if meta is not None:
            if meta.producer_epoch != epoch:
                code = PRODUCER_FENCED
            elif meta.pending_transition or meta.state.is_prepare:
                code = CONCURRENT_TRANSACTIONS
        if code:
            return {tp: code for tp in partitions}
        assert meta is not None
        ongoing = meta.state is TxnState.ONGOING
        return {tp: NONE if ongoing and tp in meta.partitions else TRANSACTION_ABORTABLE for tp in partitions}

    def verify_produce(self, transactional_id: str, producer_id: int, epoch: int, tp: TopicPartition,
                       add_if_missing: bool) -> int:
        """The produce-time check of a transactional batch (KIP-890 part 1). With `add_if_missing`
        (Produce v12+ and TxnOffsetCommit v5: TV2 clients, as Kafka does) a partition not yet in the
        open transaction is added to it, which TV2 needs even with verification disabled."""
        if not self.config.verification_enabled and not add_if_missing:
            return NONE
        code = self.verify_partitions(transactional_id, producer_id, epoch, [tp])[tp]
        if code == TRANSACTION_ABORTABLE and add_if_missing:
            return self.add_partitions(transactional_id, producer_id, epoch, {tp}, client_tv=TV2)
        return code

    def add_offsets(self, transactional_id: str, producer_id: int, epoch: int, group_id: str) -> int:
        """AddOffsetsToTxn: the group's __consumer_offsets partition joins the transaction."""
        return self.add_partitions(transactional_id, producer_id, epoch, {(GROUP_TOPIC, self.group_partition(group_id))})

    def group_partition(self, group_id: str) -> int:
        info = self.catalog.get(GROUP_TOPIC)
        return partition_for(group_id, info.partitions if info is not None else self.config.group_partitions)

    # ---------------------------------------------------------------- EndTxn

    def end_txn(self, transactional_id: str, producer_id: int, epoch: int, commit: bool) -> int:
        """EndTxn v0-4 (TV1)."""
        return self._end_transaction_v1(transactional_id, producer_id, epoch, commit, from_client=True)

    def end_transaction(self, transactional_id: str, producer_id: int, epoch: int, commit: bool,
                        client_tv: int) -> EndTxnResult:
        """EndTxn of any version: v5+ (`client_tv` 2) ends the transaction with an epoch bump."""
        if client_tv >= TV2:
            return self._end_transaction_v2(transactional_id, producer_id, epoch, commit, from_client=True)
        return EndTxnResult(self._end_transaction_v1(transactional_id, producer_id, epoch, commit, from_client=True))

    def _end_transaction(self, transactional_id: str, producer_id: int, epoch: int, commit: bool,
                         from_client: bool) -> int:
        """An abort the coordinator starts (fencing, timeout): with the finalized transaction.version."""
        if self.transaction_version() >= TV2:
            return self._end_transaction_v2(transactional_id, producer_id, epoch, commit, from_client).error_code
        return self._end_transaction_v1(transactional_id, producer_id, epoch, commit, from_client)

    def _end_transaction_v2(self, transactional_id: str, producer_id: int, epoch: int, commit: bool,
                            from_client: bool) -> EndTxnResult:
        """Kafka 4.3's TV2 endTransaction. A retry of an EndTxn that already bumped the epoch (request
        epoch = current - 1, or the last epoch of the previous producer id after a rotation) gets the
        current producer id/epoch back; the same epoch after the end means a new, empty transaction
        (only an abort of it is valid: nothing to write, the epoch still bumps)."""
        if not transactional_id:
            return EndTxnResult(INVALID_REQUEST)
        try:
            meta = self.txns.get(transactional_id)
        except CoordinatorUnavailable as exc:
            return EndTxnResult(exc.errno)
        if meta is None:
            return EndTxnResult(INVALID_PRODUCER_ID_MAPPING)
        current = EndTxnResult(NONE, meta.producer_id, meta.producer_epoch)
        fencing = meta.pending_state is TxnState.PREPARE_EPOCH_FENCE
        retry_on_overflow = (not fencing and meta.last_producer_id == producer_id and epoch == SHORT_MAX - 1
                             and meta.producer_epoch == 0)
        retry_on_bump = not fencing and meta.producer_epoch == epoch + 1
        state = meta.state
        if fencing:
            valid_epoch = (not from_client or epoch == meta.producer_epoch) and epoch >= meta.producer_epoch
        elif state in (TxnState.ONGOING, TxnState.EMPTY, TxnState.DEAD, TxnState.PREPARE_EPOCH_FENCE):
            valid_epoch = epoch == meta.producer_epoch
        elif state.is_prepare:
            valid_epoch = retry_on_bump
        else:
            valid_epoch = retry_on_bump or retry_on_overflow or epoch == meta.producer_epoch
        is_retry = retry_on_bump or retry_on_overflow
        if meta.pending_transition and not fencing:
            return EndTxnResult(CONCURRENT_TRANSACTIONS)
        if meta.producer_id != producer_id and not retry_on_overflow:
            return EndTxnResult(INVALID_PRODUCER_ID_MAPPING)
        if not valid_epoch:
            return EndTxnResult(PRODUCER_FENCED)
        no_partition_added = True
        if state is TxnState.ONGOING:
            target, no_partition_added = (TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT), False
        elif state is TxnState.COMPLETE_COMMIT:
            if commit:
                return current if is_retry else EndTxnResult(INVALID_TXN_STATE)
            if is_retry:
                return EndTxnResult(INVALID_TXN_STATE)
            target = TxnState.PREPARE_ABORT
        elif state is TxnState.COMPLETE_ABORT:
            if commit:
                return EndTxnResult(INVALID_TXN_STATE)
            if is_retry:
                return current
            target = TxnState.PREPARE_ABORT
        elif state is TxnState.PREPARE_COMMIT:
            return EndTxnResult(CONCURRENT_TRANSACTIONS if commit else INVALID_TXN_STATE)
        elif state is TxnState.PREPARE_ABORT:
            return EndTxnResult(INVALID_TXN_STATE if commit else CONCURRENT_TRANSACTIONS)
        elif state is TxnState.EMPTY:
            if commit:
                return EndTxnResult(INVALID_TXN_STATE)
            target = TxnState.PREPARE_ABORT
        else:
            raise IllegalTxnTransition(f"{meta!r}: EndTxn in state {state.kafka_name}")
        next_pid = self.next_producer_id() if meta.epoch_exhausted else -1
        if fencing:
            meta.pending_state = None  # the abort below bumps the epoch itself
        transit = meta.prepare_abort_or_commit(target, self.now_ms(), TV2, next_pid, no_partition_added)
        code = self._persist(meta, transit)
        if code:
            if fencing:
                meta.has_failed_epoch_fence = True
            return EndTxnResult(code)
        # what the client continues with: the bumped epoch, or the next producer id at epoch 0
        done = EndTxnResult(NONE, *((meta.next_producer_id, 0) if meta.next_producer_id >= 0
                                    else (meta.producer_id, meta.producer_epoch)))
        self._crash_point("after_prepare_commit" if commit else "after_prepare_abort")
        self._unsent[transactional_id] = set(meta.partitions)
        self._start_markers(meta)
        return done

    def _end_transaction_v1(self, transactional_id: str, producer_id: int, epoch: int, commit: bool,
                            from_client: bool) -> int:
        code, meta = self._lookup(transactional_id, producer_id)
        if meta is None:
            return code
        # clients must match the epoch exactly; the coordinator itself aborts with a bumped one
        if (from_client and epoch != meta.producer_epoch) or epoch < meta.producer_epoch:
            return PRODUCER_FENCED
        fencing = meta.pending_state is TxnState.PREPARE_EPOCH_FENCE
        if meta.pending_transition and not fencing:
            return CONCURRENT_TRANSACTIONS
        state = meta.state
        if state is TxnState.ONGOING:
            target = TxnState.PREPARE_COMMIT if commit else TxnState.PREPARE_ABORT
            if fencing:
                if commit:
                    raise IllegalTxnTransition(f"{meta!r}: commit while fencing")
                meta.pending_state = None
                meta.producer_epoch = epoch
                meta.last_producer_epoch = -1
            transit = meta.prepare_abort_or_commit(target, self.now_ms())
        elif state is TxnState.COMPLETE_COMMIT:
            return NONE if commit else INVALID_TXN_STATE
        elif state is TxnState.COMPLETE_ABORT:
            return INVALID_TXN_STATE if commit else NONE
        elif state is TxnState.PREPARE_COMMIT:
            return CONCURRENT_TRANSACTIONS if commit else INVALID_TXN_STATE
        elif state is TxnState.PREPARE_ABORT:
            return INVALID_TXN_STATE if commit else CONCURRENT_TRANSACTIONS
        elif state is TxnState.EMPTY:
            return INVALID_TXN_STATE
        else:
            raise IllegalTxnTransition(f"{meta!r}: EndTxn in state {state.kafka_name}")
        code = self._persist(meta, transit)
        if code:
            if fencing:
                meta.has_failed_epoch_fence = True
            return code
        self._crash_point("after_prepare_commit" if commit else "after_prepare_abort")
        self._unsent[transactional_id] = set(meta.partitions)
        self._start_markers(meta)
        return NONE

    def _start_markers(self, meta: TxnMetadata) -> None:
        """Send the markers of a just prepared transaction: at once on a single node; on a cluster in a
        task that first waits for the PREPARE record to be replicated (so a new coordinator knows it)."""
        if not self.clustered:
            self._send_markers(meta)
            return
        txn_id = meta.transactional_id
        task = self._completing.get(txn_id)
        if task is None or task.done():
            self._completing[txn_id] = asyncio.get_running_loop().create_task(self._complete_async(txn_id))

    async def _complete_async(self, txn_id: str) -> None:
        """Cluster: PREPARE replicated -> markers to the partition leaders -> COMPLETE. Whatever fails is
        left in `_unsent` for `retry_markers` (or for the next coordinator, after a leader change)."""
        try:
            if await self.txns.durable(txn_id):
                return
            try:
                meta = self.txns.get(txn_id)
            except CoordinatorUnavailable:
                return
            unsent = self._unsent.get(txn_id)
            if meta is None or not meta.state.is_prepare or unsent is None:
                self._unsent.pop(txn_id, None)
                return
            commit = meta.state is TxnState.PREPARE_COMMIT
            if unsent:
                results = await self.markers.send_many(Marker(meta.producer_id, meta.producer_epoch, commit,
                                                              self.coordinator_epoch_of(txn_id), meta.client_tv,
                                                              tuple(sorted(unsent))))
                for tp, code in results.items():
                    if code in _MARKER_GIVE_UP:
                        log.warning("dropping %s marker of %s for %s-%d: error %d",
                                    "COMMIT" if commit else "ABORT", txn_id, tp[0], tp[1], code)
                    elif code:
                        continue
                    unsent.discard(tp)
            try:
                current = self.txns.get(txn_id)
            except CoordinatorUnavailable:
                return  # resigned meanwhile: the new coordinator completes it
            if unsent or current is not meta or not meta.state.is_prepare or meta.pending_transition:
                return
            code = self._persist(meta, meta.prepare_complete(self.now_ms()))
            if code:
                log.warning("completing %s failed (%d); retrying", txn_id, code)
                return
            self._unsent.pop(txn_id, None)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("completing the transaction of %s failed; retrying", txn_id)
        finally:
            if self._completing.get(txn_id) is asyncio.current_task():
                del self._completing[txn_id]

    def _send_markers(self, meta: TxnMetadata) -> None:
        """Write the outstanding markers of a prepared transaction, then complete it (single node)."""
        txn_id = meta.transactional_id
        unsent = self._unsent.get(txn_id, set())
        commit = meta.state is TxnState.PREPARE_COMMIT
        for tp in sorted(unsent):
            code = self.markers.write(tp[0], tp[1], meta.producer_id, meta.producer_epoch, commit,
                                      self.coordinator_epoch_of(txn_id), meta.client_tv)
            if code in _MARKER_GIVE_UP:
                log.warning("dropping %s marker of %s for %s-%d: error %d", "COMMIT" if commit else "ABORT",
                            txn_id, tp[0], tp[1], code)
            elif code:
                continue  # retried by retry_markers
            unsent.discard(tp)
            self._crash_point("after_first_marker")
        if unsent:
            return
        self._crash_point("after_markers")
        if meta.pending_transition:
            return  # completion already in flight
        code = self._persist(meta, meta.prepare_complete(self.now_ms()))
        if code:
            log.warning("completing %s failed (%d); retrying", txn_id, code)
            return
        self._unsent.pop(txn_id, None)

    def retry_markers(self) -> None:
        for txn_id in list(self._unsent):
            try:
                meta = self.txns.get(txn_id)
            except CoordinatorUnavailable:
                continue
            if meta is None or not meta.state.is_prepare:
                self._unsent.pop(txn_id, None)
                continue
            self._start_markers(meta)

    # ---------------------------------------------------------------- timeouts and expiry

    def abort_timed_out_transactions(self) -> int:
        """Abort (with an epoch bump) every transaction open longer than its timeout; returns how many."""
        now = self.now_ms()
        expired = [m for m in self.txns.all_metadata()
                   if m.state is TxnState.ONGOING and not m.pending_transition and m.start_ms + m.timeout_ms < now]
        for meta in expired:
            log.info("aborting transaction of %s (producer %d epoch %d): open for %d ms, timeout %d ms",
                     meta.transactional_id, meta.producer_id, meta.producer_epoch, now - meta.start_ms,
                     meta.timeout_ms)
            fence = meta.prepare_fence_epoch()
            code = self._end_transaction(meta.transactional_id, fence.producer_id, fence.producer_epoch, False,
                                         from_client=False)
            if meta.pending_state is TxnState.PREPARE_EPOCH_FENCE:
                meta.abort_transition()
            if code:
                log.warning("rollback of timed-out transaction %s failed: %d", meta.transactional_id, code)
        return len(expired)

    def expire_transactional_ids(self) -> int:
        """Remove ids idle for transactional.id.expiration.ms (tombstones); returns how many."""
        cutoff = self.now_ms() - self.config.id_expiration_ms
        expired = [m for m in self.txns.all_metadata()
                   if m.state.expiration_allowed and not m.pending_transition and m.update_ms <= cutoff]
        for meta in expired:
            if self._persist(meta, meta.prepare_dead()) == NONE:
                log.info("expired transactional id %s (producer %d)", meta.transactional_id, meta.producer_id)
        return len(expired)

    # ---------------------------------------------------------------- KIP-664

    def describe(self, transactional_id: str) -> TxnDescription:
        if not transactional_id:
            return TxnDescription(INVALID_REQUEST, transactional_id)
        try:
            meta = self.txns.get(transactional_id)
        except CoordinatorUnavailable as exc:
            code = exc.errno if exc.errno != ke.CoordinatorNotAvailableError.errno else TRANSACTIONAL_ID_NOT_FOUND
            return TxnDescription(code, transactional_id)
        if meta is None or meta.state is TxnState.DEAD:
            return TxnDescription(TRANSACTIONAL_ID_NOT_FOUND, transactional_id)
        return TxnDescription(NONE, transactional_id, meta.state.kafka_name, meta.timeout_ms, meta.start_ms,
                              meta.producer_id, meta.producer_epoch, tuple(sorted(meta.partitions)))

    def list_transactions(self, states: list[str], producer_ids: list[int], duration_ms: int = -1,
                          id_pattern: str | None = None) -> tuple[int, list[str], list[TxnListing]]:
        """(error, unknown state filters, listings)."""
        if self.txns.is_loading:
            return ke.CoordinatorLoadInProgressError.errno, [], []
        unknown = [s for s in states if TxnState.from_name(s) is None]
        wanted = {TxnState.from_name(s) for s in states} - {None}
        if states and not wanted:
            return NONE, unknown, []
        try:
            pattern = re.compile(id_pattern) if id_pattern else None
        except re.error:
            return INVALID_REQUEST, unknown, []
        pids = set(producer_ids)
        now = self.now_ms()
        out = []
        for meta in self.txns.all_metadata():
            if meta.state is TxnState.DEAD or (wanted and meta.state not in wanted):
                continue
            if pids and meta.producer_id not in pids:
                continue
            if duration_ms >= 0 and now - meta.start_ms < duration_ms:
                continue
            if pattern is not None and not pattern.fullmatch(meta.transactional_id):
                continue
            out.append(TxnListing(meta.transactional_id, meta.producer_id, meta.state.kafka_name))
        return NONE, unknown, out
