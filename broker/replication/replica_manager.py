"""The replica manager (`state.replicas` on a multi-node cluster): which local partitions this node
leads or follows, as the committed metadata image says (a listener of `state.cluster`).

Leader: the new epoch goes into the log's epoch cache at its LEO, followers' fetches move their
positions (`follower_fetched`), the HW (min LEO over the ISR) advances and wakes acks=all waiters and
long-polling consumers; ISR changes (shrink after replica.lag.time.max.ms, expand once a follower
reached the HW) go to the controller as AlterPartition, one in flight per partition.
Follower: produce is refused, waiters fail with NOT_LEADER_OR_FOLLOWER, and the partition is fetched
from its leader by the fetcher of that broker (broker/replication/fetcher.py), which truncates by the
leader's diverging epoch (KIP-320) before appending.

Invariant: a partition's HW only moves forward while this node leads it; acks=all waiters are woken
by HW advances and ISR changes only (no polling).
"""
from __future__ import annotations

import asyncio
import inspect
import logging
import time
from typing import TYPE_CHECKING, Any, Callable

from minikafka.broker.replication.partition_state import PartitionState
from minikafka.broker.replication.throttle import ReplicationQuota, rate_of, throttled
from minikafka.protocol.errors import (
    FENCED_LEADER_EPOCH,
    INELIGIBLE_REPLICA,
    NOT_ENOUGH_REPLICAS,
    NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    NOT_LEADER_OR_FOLLOWER,
    OPERATION_NOT_ATTEMPTED,
    REQUEST_TIMED_OUT,
    UNKNOWN_LEADER_EPOCH,
)

if TYPE_CHECKING:
    from minikafka.storage.partition_log import PartitionLog
    from minikafka.broker.state import BrokerState

log = logging.getLogger(__name__)

# AlterPartition answers that say the proposal was not applied (Kafka resets its pending state on these)
NOT_APPLIED = frozenset({OPERATION_NOT_ATTEMPTED, INELIGIBLE_REPLICA})
ALTER_PARTITION_RETRY_S = 0.5

TopicPartition = tuple[str, int]
LeaderListener = Callable[[str, int, int], None]
FollowerListener = Callable[[str, int], None]


def _now_ms() -> float:
    return time.monotonic() * 1000


def set_high_watermark(plog: PartitionLog, hw: int) -> None:
    update = getattr(plog, "update_high_watermark", None)
    if update is not None:
        update(hw)


class ReplicaManager:
    def __init__(self, state: BrokerState, cluster: Any) -> None:
        self.state = state
        self.cluster = cluster
        self.node_id = state.node_id
        get = state.config.get
        self.lag_ms = float(get("replica.lag.time.max.ms") or 30000)
        self.parts: dict[TopicPartition, PartitionState] = {}
        self._waiters: dict[TopicPartition, list[tuple[int, asyncio.Future]]] = {}
        self._on_leader: list[LeaderListener] = []
        self._on_follower: list[FollowerListener] = []
        self._fetchers: dict[int, Any] = {}  # source broker id -> fetcher.Fetcher
        self._tasks: set[asyncio.Task] = set()
        self._isr_task: asyncio.Task | None = None
        self._checkpoint_task: asyncio.Task | None = None
        self.checkpoint_ms = float(get("replica.high.watermark.checkpoint.interval.ms") or 5000)
        self._stopped = False
        current = lambda key: self.state.config.get(key)  # noqa: E731 - dynamic broker configs apply at once
        windows = (int(get("replication.quota.window.num") or 11), float(get("replication.quota.window.size.seconds") or 1))
        self.leader_quota = ReplicationQuota(rate_of(current, "leader.replication.throttled.rate"), *windows)
        self.follower_quota = ReplicationQuota(rate_of(current, "follower.replication.throttled.rate"), *windows)

    # -- interface for handlers and coordinators ---------------------------------------------------
    def leader_error(self, topic: str, partition: int, current_leader_epoch: int = -1) -> int:
        """0 if this node leads the partition in the client's epoch (-1: any), else Kafka's error
        (epoch checked first, as Kafka's Partition.localLogWithEpochOrThrow)."""
        s = self.parts.get((topic, partition))
        if s is None:
            return NOT_LEADER_OR_FOLLOWER
        if current_leader_epoch >= 0:
            if current_leader_epoch < s.leader_epoch:
                return FENCED_LEADER_EPOCH
            if current_leader_epoch > s.leader_epoch:
                return UNKNOWN_LEADER_EPOCH
        return 0 if s.is_leader else NOT_LEADER_OR_FOLLOWER

    def min_isr_error(self, topic: str, partition: int) -> int:
        """NOT_ENOUGH_REPLICAS when the ISR is smaller than the topic's min.insync.replicas (acks=all,
        checked before the append)."""
        s = self.parts.get((topic, partition))
        if s is None or not s.is_leader:
            return NOT_LEADER_OR_FOLLOWER
        return NOT_ENOUGH_REPLICAS if len(s.isr) < self._min_isr(s) else 0

    def leader_epoch(self, topic: str, partition: int) -> int:
        s = self.parts.get((topic, partition))
        return s.leader_epoch if s is not None else -1

    def is_leader(self, topic: str, partition: int) -> bool:
        s = self.parts.get((topic, partition))
        return s is not None and s.is_leader

    async def wait_replicated(self, topic: str, partition: int, end_offset: int, timeout_ms: int) -> int:
        """Wait until the HW reaches `end_offset` (the offset after the last appended one): 0, or
        NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR is below min.insync.replicas by then,
        NOT_LEADER_OR_FOLLOWER when leadership is lost, REQUEST_TIMED_OUT."""
        tp = (topic, partition)
        s = self.parts.get(tp)
        if s is None or not s.is_leader:
            return NOT_LEADER_OR_FOLLOWER
        code = self._reached(s, end_offset)
        if code is not None:
            return code
        fut = asyncio.get_running_loop().create_future()
        entry = (end_offset, fut)
        self._waiters.setdefault(tp, []).append(entry)
        try:
            return await asyncio.wait_for(fut, max(timeout_ms, 0) / 1000)
        except asyncio.TimeoutError:
            return REQUEST_TIMED_OUT
        finally:
            waiting = self._waiters.get(tp)
            if waiting is not None:
                try:
                    waiting.remove(entry)
                except ValueError:
                    pass
                if not waiting:
                    del self._waiters[tp]

    def add_leadership_listener(self, on_leader: LeaderListener, on_follower: FollowerListener) -> None:
        """`on_leader(topic, p, leader_epoch)` when this node becomes leader (new epoch),
        `on_follower(topic, p)` when it stops leading or starts as a follower; called on the loop.
        Partitions already led are announced at once."""
        self._on_leader.append(on_leader)
        self._on_follower.append(on_follower)
        for (topic, p), s in list(self.parts.items()):
            if s.is_leader:
                on_leader(topic, p, s.leader_epoch)

    # -- replication throttles (broker/replication/throttle.py) -------------------------------------
    def leader_throttled(self, topic: str, partition: int, replica: int) -> bool:
        """A fetch by `replica`, not in the ISR, of a partition this leader throttles."""
        s = self.parts.get((topic, partition))
        if s is None or not s.is_leader or replica in s.isr:
            return False
        plog = self.state.catalog.partition_log(topic, partition)
        return plog is not None and throttled(plog.config.leader_replication_throttled_replicas, partition,
                                              self.node_id)

    def follower_throttled(self, topic: str, partition: int) -> bool:
        """This node follows the partition from outside the ISR and its follower side is throttled."""
        s = self.parts.get((topic, partition))
        if s is None or s.is_leader or self.node_id in s.isr:
            return False
        plog = self.state.catalog.partition_log(topic, partition)
        return plog is not None and throttled(plog.config.follower_replication_throttled_replicas, partition,
                                              self.node_id)

    # -- leader side of the data path ---------------------------------------------------------------
    def follower_fetched(self, topic: str, partition: int, replica: int, fetch_offset: int) -> None:
        """A follower fetched from `fetch_offset` (its LEO): HW, waiters, ISR expansion."""
        tp = (topic, partition)
        s = self.parts.get(tp)
        if s is None or not s.is_leader:
            return
        plog = self.state.catalog.partition_log(topic, partition)
        if plog is None:
            return
        leo = plog.log_end_offset
        if fetch_offset > leo:  # past our log: its read answers OFFSET_OUT_OF_RANGE, no position
            return
        if not s.update_follower(replica, fetch_offset, leo, _now_ms()):
            return
        self._maybe_advance(s, plog)
        if s.isr_change_allowed() and s.can_join_isr(replica) and self._eligible(replica):
            self._propose_isr(s, (*s.isr, replica))

    def appended(self, topic: str, partition: int) -> None:
        """The leader appended: with the leader alone in the ISR the HW follows its LEO at once."""
        s = self.parts.get((topic, partition))
        if s is not None and s.is_leader and len(s.maximal_isr) <= 1:
            plog = self.state.catalog.partition_log(topic, partition)
            if plog is not None:
                self._maybe_advance(s, plog)

    def _eligible(self, replica: int) -> bool:
        """May join an ISR (Kafka's isReplicaIsrEligible): registered, not fenced, not shutting down."""
        info = self.cluster.image.brokers.get(replica)
        return info is not None and not info.fenced and not info.in_controlled_shutdown

    def _maybe_advance(self, s: PartitionState, plog: PartitionLog) -> None:
        if s.advance_hw(plog.log_end_offset):
            set_high_watermark(plog, s.high_watermark)
            self.state.notifier.notify((s.topic, s.partition))  # consumers waiting below the HW
            self._check_waiters(s)

    def _min_isr(self, s: PartitionState) -> int:
        """The topic's min.insync.replicas capped by the replica count (Kafka's effectiveMinIsr: a
        single-replica topic with min.insync.replicas=2 takes acks=all, as Kafka 4.3 does)."""
        plog = self.state.catalog.partition_log(s.topic, s.partition)
        configured = plog.config.min_insync_replicas if plog is not None else 1
        return min(configured, max(len(s.replicas), 1))

    def _reached(self, s: PartitionState, end_offset: int) -> int | None:
        if s.high_watermark < end_offset:
            return None
        return 0 if len(s.isr) >= self._min_isr(s) else NOT_ENOUGH_REPLICAS_AFTER_APPEND

    def _check_waiters(self, s: PartitionState) -> None:
        waiting = self._waiters.get((s.topic, s.partition))
        if not waiting:
            return
        for end, fut in waiting:
            if not fut.done():
                code = self._reached(s, end)
                if code is not None:
                    fut.set_result(code)

    def _fail_waiters(self, tp: TopicPartition, code: int) -> None:
        for _end, fut in self._waiters.get(tp, ()):
            if not fut.done():
                fut.set_result(code)

    # -- ISR changes --------------------------------------------------------------------------------
    def _propose_isr(self, s: PartitionState, isr: tuple[int, ...]) -> None:
        s.propose_isr(isr)
        self._spawn(self._alter_partition(s, s.leader_epoch, s.partition_epoch, tuple(isr)))

    async def _alter_partition(self, s: PartitionState, leader_epoch: int, partition_epoch: int,
                               isr: tuple[int, ...]) -> None:
        """Send the proposal until its outcome is known; the pending ISR stays in the maximal ISR (the
        HW respects it) unless the answer applies it or says it was not applied: otherwise the metadata
        update that follows settles it (PartitionState.become_leader)."""
        from minikafka.broker.replication.alter_partition import send_alter_partition
        while True:
            try:
                result = await send_alter_partition(self, s.topic, s.partition, leader_epoch, partition_epoch, isr)
            except Exception as exc:  # no answer: it may have been committed; ask again (the same proposal)
                log.warning("AlterPartition %s-%d isr=%s failed: %r", s.topic, s.partition, isr, exc)
                result = None
            if self.parts.get((s.topic, s.partition)) is not s or not s.is_leader or s.leader_epoch != leader_epoch \
                    or s.pending_isr != isr or s.partition_epoch != partition_epoch:
                return  # settled meanwhile by a metadata update
            if result is not None:
                break
            await asyncio.sleep(ALTER_PARTITION_RETRY_S)
        code, new_isr, new_partition_epoch, new_leader_epoch = result
        if code == 0 and new_leader_epoch == s.leader_epoch and new_partition_epoch > s.partition_epoch:
            log.info("%s-%d: ISR %s -> %s (partition epoch %d)", s.topic, s.partition, s.isr, new_isr,
                     new_partition_epoch)
            s.isr, s.partition_epoch = tuple(new_isr), new_partition_epoch
            s.pending_isr = None
            plog = self.state.catalog.partition_log(s.topic, s.partition)
            if plog is not None:
                self._maybe_advance(s, plog)
            self._check_waiters(s)
        elif code in NOT_APPLIED:
            log.info("AlterPartition %s-%d isr=%s refused: error %d", s.topic, s.partition, isr, code)
            s.pending_isr = None
        else:  # applied with a new leader epoch, or refused for a stale epoch: the metadata update settles it
            log.info("AlterPartition %s-%d isr=%s: error %d (leader epoch %d); waiting for the metadata", s.topic,
                     s.partition, isr, code, new_leader_epoch)

    async def _isr_expiration(self) -> None:
        """Every replica.lag.time.max.ms / 2 (Kafka's isr-expiration task): shrink ISRs of led
        partitions by their out-of-sync followers."""
        period = max(self.lag_ms / 2, 10) / 1000
        while True:
            await asyncio.sleep(period)
            now = _now_ms()
            for s in list(self.parts.values()):
                if not s.isr_change_allowed():
                    continue
                plog = self.state.catalog.partition_log(s.topic, s.partition)
                if plog is None:
                    continue
                out = s.out_of_sync(plog.log_end_offset, now, self.lag_ms)
                if out:
                    log.info("%s-%d: followers %s out of sync, shrinking ISR %s", s.topic, s.partition, out, s.isr)
                    self._propose_isr(s, tuple(r for r in s.isr if r not in out))

    # -- following the metadata image ---------------------------------------------------------------
    def start(self) -> None:
        """Follow the image (the runtime tells a late listener of every partition it already has,
        once their local logs exist) — from the moment this broker has caught up with the metadata
        log (unfenced) on: the image a restarted node replays from its own log is stale, and acting on
        it would make the node lead (and coordinate) partitions it no longer leads. Kafka's brokers
        publish metadata to their replica manager only after the same initial catch-up."""
        loop = asyncio.get_running_loop()
        caught_up = getattr(self.cluster, "caught_up_once", None)
        if caught_up is None or caught_up.is_set():
            self.cluster.add_listener(self.on_image)
        else:
            async def follow_when_caught_up() -> None:
                await caught_up.wait()
                if not self._stopped:
                    self.cluster.add_listener(self.on_image)
            task = loop.create_task(follow_when_caught_up())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._isr_task = loop.create_task(self._isr_expiration())
        self._checkpoint_task = loop.create_task(self._checkpoint_loop())

    async def stop(self) -> None:
        self._stopped = True
        tasks = [t for t in (self._isr_task, self._checkpoint_task, *self._tasks) if t is not None]
        for f in list(self._fetchers.values()):
            tasks.append(f.task) if f.task is not None else None
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        truncating = [f.truncating for f in self._fetchers.values() if f.truncating is not None]
        await asyncio.gather(*truncating, return_exceptions=True)
        for f in self._fetchers.values():
            f.close()
        for tp in list(self._waiters):
            self._fail_waiters(tp, NOT_LEADER_OR_FOLLOWER)
        self.checkpoint()

    async def _checkpoint_loop(self) -> None:
        """Every replica.high.watermark.checkpoint.interval.ms: the HWs to replication-offset-checkpoint
        (written and fsynced in a worker thread)."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.checkpoint_ms / 1000)
            await loop.run_in_executor(None, self.checkpoint)

    def checkpoint(self) -> None:
        checkpoint = getattr(self.state.logs, "checkpoint_high_watermarks", None)
        if checkpoint is not None:
            try:
                checkpoint()
            except Exception as exc:
                log.warning("high watermark checkpoint failed: %r", exc)

    def on_image(self, image: Any, changed: list[TopicPartition], deleted_topics: list[str]) -> None:
        if self._stopped:
            return
        if deleted_topics:
            gone = set(deleted_topics)
            for tp in [tp for tp in self.parts if tp[0] in gone]:
                self._drop(tp)
        for topic, p in changed:
            try:
                self._apply(image, topic, p)
            except Exception:
                log.exception("replica manager: applying %s-%d failed", topic, p)

    def _apply(self, image: Any, topic: str, p: int) -> None:
        tp = (topic, p)
        info = image.partition(topic, p)
        if info is None or self.node_id not in info.replicas:
            self._drop(tp)
            return
        plog = self.state.catalog.partition_log(topic, p)
        if plog is None:
            log.warning("replica manager: %s-%d has no local log", topic, p)
            return
        plog.replicated = True
        if not getattr(plog, "_replica_hooked", False):  # HW follows the LEO while the leader is alone
            plog._replica_hooked = True
            plog.append_listeners.append(lambda: self.appended(topic, p))
        s = self.parts.get(tp)
        if s is None:
            s = self.parts[tp] = PartitionState(topic, p, self.node_id)
        elif (info.leader_epoch, info.partition_epoch) < (s.leader_epoch, s.partition_epoch):
            return  # older than what an AlterPartition answer already told us
        if info.leader == self.node_id:
            was_leader = s.is_leader
            new = s.become_leader(info.leader_epoch, info.partition_epoch, tuple(info.replicas), tuple(info.isr),
                                  plog.log_end_offset, plog.high_watermark, _now_ms())
            if new:
                self._became_leader(s, plog, was_leader)
            else:
                self._maybe_advance(s, plog)
                self._check_waiters(s)
        else:
            was_leader = s.is_leader
            first = s.leader_epoch < 0
            if s.become_follower(info.leader, info.leader_epoch, info.partition_epoch, tuple(info.replicas),
                                 tuple(info.isr)) or first:
                self._became_follower(s, plog, was_leader or first)

    def _became_leader(self, s: PartitionState, plog: PartitionLog, was_leader: bool) -> None:
        tp = (s.topic, s.partition)
        self._stop_fetching(tp)
        plog.assign_epoch_start_offset(s.leader_epoch)  # the new epoch starts at the next offset
        log.info("%s-%d: leader in epoch %d (LEO %d, HW %d, ISR %s)", s.topic, s.partition, s.leader_epoch,
                 plog.log_end_offset, s.high_watermark, s.isr)
        if was_leader:  # a new epoch of our own leadership: waiters of the old one fail
            self._fail_waiters(tp, NOT_LEADER_OR_FOLLOWER)
        self._maybe_advance(s, plog)
        for fn in list(self._on_leader):
            self._call(fn, s.topic, s.partition, s.leader_epoch)

    def _became_follower(self, s: PartitionState, plog: PartitionLog, announce: bool) -> None:
        tp = (s.topic, s.partition)
        self._fail_waiters(tp, NOT_LEADER_OR_FOLLOWER)
        self._stop_fetching(tp)
        log.info("%s-%d: follower of %d in epoch %d (LEO %d)", s.topic, s.partition, s.leader, s.leader_epoch,
                 plog.log_end_offset)
        if s.leader >= 0:
            self._fetcher(s.leader).add(tp)
        if announce:
            for fn in list(self._on_follower):
                self._call(fn, s.topic, s.partition)

    def _drop(self, tp: TopicPartition) -> None:
        s = self.parts.pop(tp, None)
        if s is None:
            return
        self._fail_waiters(tp, NOT_LEADER_OR_FOLLOWER)
        self._stop_fetching(tp)
        if s.is_leader:
            for fn in list(self._on_follower):
                self._call(fn, tp[0], tp[1])

    # -- fetchers -----------------------------------------------------------------------------------
    def _fetcher(self, broker: int) -> Any:
        f = self._fetchers.get(broker)
        if f is None:
            from minikafka.broker.replication.fetcher import Fetcher
            f = self._fetchers[broker] = Fetcher(self, broker)
            f.start()
        return f

    def _stop_fetching(self, tp: TopicPartition) -> None:
        for f in self._fetchers.values():
            f.remove(tp)

    def endpoint(self, broker: int) -> tuple[str, int] | None:
        """(host, port) of `broker` on the inter-broker listener, from the image."""
        info = self.cluster.image.brokers.get(broker)
        if info is None:
            return None
        ep = info.endpoints.get(self.cluster.inter_broker_listener)
        return (ep[0], int(ep[1])) if ep is not None else None

    # -- helpers ------------------------------------------------------------------------------------
    def _spawn(self, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _call(self, fn: Callable, *args: Any) -> None:
        try:
            result = fn(*args)
            if inspect.isawaitable(result):
                self._spawn(result)
        except Exception:
            log.exception("leadership listener %r failed", fn)
