"""One follower fetcher per source broker: a task and one connection to the leader's inter-broker
listener, sending Fetch v12 (replica id = this node, last fetched epoch per partition) that long-polls
for replica.fetch.wait.max.ms, so an idle follower costs one request per wait, never a busy loop.

Per partition in a response: a diverging epoch (KIP-320) truncates the local log (to the smaller of
the leader's end offset for that epoch and ours) before anything is appended; records go in with
`append_as_follower` (offsets as the leader assigned them); the HW is the leader's, capped by our LEO.
A partition that errors (leader not ready yet, stale epoch) waits replica.fetch.backoff.ms.
"""
from __future__ import annotations

import asyncio
import inspect
import logging
import time
from typing import TYPE_CHECKING

from kafka.protocol.consumer import FetchRequest, FetchResponse

from minikafka.protocol.peer_client import PeerClient, PeerError
from minikafka.protocol.errors import OFFSET_OUT_OF_RANGE
from minikafka.broker.replication.replica_manager import set_high_watermark

if TYPE_CHECKING:
    from minikafka.storage.partition_log import PartitionLog
    from minikafka.broker.replication.replica_manager import ReplicaManager, TopicPartition

log = logging.getLogger(__name__)

FETCH_VERSION = 12
FetchTopic = FetchRequest.FetchTopic
FetchPartition = FetchTopic.FetchPartition


def truncation_offset(plog: PartitionLog, epoch: int, leader_end: int) -> int:
    """Where a follower truncates for the leader's diverging (epoch, end offset) (Kafka's
    AbstractFetcherThread.getOffsetTruncationState)."""
    leo = plog.log_end_offset
    local_epoch, local_end = plog.end_offset_for_epoch(epoch)
    if local_epoch < 0 or local_end < 0:
        return min(leader_end, leo)
    if local_epoch == epoch:
        return min(leader_end, local_end)
    return min(local_end, leo)  # our epoch before theirs: truncate to its end, ask again


class Fetcher:
    def __init__(self, manager: ReplicaManager, source: int) -> None:
        self.manager = manager
        self.source = source
        cfg = manager.state.config.get
        self.wait_ms = int(cfg("replica.fetch.wait.max.ms") or 500)
        self.max_bytes = int(cfg("replica.fetch.max.bytes") or 1048576)
        self.response_max_bytes = int(cfg("replica.fetch.response.max.bytes") or 10485760)
        self.backoff_ms = int(cfg("replica.fetch.backoff.ms") or 1000)
        self.timeout_ms = int(cfg("replica.socket.timeout.ms") or 30000)
        self.partitions: dict[TopicPartition, float] = {}  # -> not before (monotonic s)
        self.task: asyncio.Task | None = None
        self._changed = asyncio.Event()
        self._client: PeerClient | None = None
        self.truncating: asyncio.Task | None = None  # awaited at shutdown: the logs close after it
        self._address: tuple[str, int] | None = None

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run())

    def add(self, tp: TopicPartition) -> None:
        self.partitions[tp] = 0.0
        self._changed.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    def _connection(self) -> PeerClient | None:
        address = self.manager.endpoint(self.source)
        if address is None:
            return None
        if self._client is None or address != self._address:
            if self._client is not None:
                self._client.close()
            self._address = address
            self._client = self.manager.cluster.peer_factory.inter_broker_client(
                self.source, address, f"replica-fetcher-{self.manager.node_id}",
                (self.timeout_ms + self.wait_ms) / 1000, retry_backoff_s=0.05, max_backoff_s=self.backoff_ms / 1000)
        return self._client

    async def _run(self) -> None:
        while True:
            try:
                await self._round()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("replica fetcher for broker %d", self.source)
                await asyncio.sleep(self.backoff_ms / 1000)

    async def _round(self) -> None:
        now = time.monotonic()
        ready = [tp for tp, at in self.partitions.items() if at <= now]
        if not ready:
            self._changed.clear()
            delay = min(self.partitions.values(), default=None)
            timeout = None if delay is None else max(delay - now, 0.001)
            try:
                await asyncio.wait_for(self._changed.wait(), timeout)
            except asyncio.TimeoutError:
                pass
            return
        client = self._connection()
        if client is None:
            self._delay(ready)
            return
        sent = self._request(ready)
        if sent is None:
            return
        req, epochs = sent
        try:
            resp = await client.request(req, FETCH_VERSION, FetchResponse)
        except PeerError as exc:
            log.debug("replica fetch from %d: %s", self.source, exc)
            self._delay(ready)
            return
        if resp.error_code:
            log.info("replica fetch from %d: error %d", self.source, resp.error_code)
            self._delay(ready)
            return
        for t in resp.responses:
            for p in t.partitions:
                tp = (t.topic, p.partition_index)
                try:
                    await self._handle(tp, p, epochs.get(tp))
                except Exception as exc:
                    log.warning("%s-%d: replica fetch from %d failed: %r", *tp, self.source, exc)
                    self._delay([tp])

    def _request(self, ready: list[TopicPartition]) -> tuple[FetchRequest, dict] | None:
        by_topic: dict[str, list] = {}
        epochs: dict[TopicPartition, int] = {}
        catalog = self.manager.state.catalog
        held: list[TopicPartition] = []
        for tp in ready:
            s = self.manager.parts.get(tp)
            plog = catalog.partition_log(*tp)
            if s is None or plog is None or s.leader != self.source:
                self.partitions.pop(tp, None)
                continue
            if self.manager.follower_throttled(*tp) and self.manager.follower_quota.exceeded():
                held.append(tp)  # over the follower throttle: not fetched for a backoff
                continue
            epochs[tp] = s.leader_epoch
            by_topic.setdefault(tp[0], []).append(FetchPartition(
                partition=tp[1], current_leader_epoch=s.leader_epoch, fetch_offset=plog.log_end_offset,
                last_fetched_epoch=plog.latest_epoch, log_start_offset=plog.log_start_offset,
                partition_max_bytes=self.max_bytes))
        self._delay(held)
        if not by_topic:
            return None
        req = FetchRequest(replica_id=self.manager.node_id, max_wait_ms=self.wait_ms, min_bytes=1,
                           max_bytes=self.response_max_bytes, isolation_level=0, session_id=0, session_epoch=-1,
                           topics=[FetchTopic(topic=name, partitions=parts) for name, parts in by_topic.items()],
                           forgotten_topics_data=[], rack_id="")
        return req, epochs

    async def _truncate(self, plog: PartitionLog, offset: int) -> None:
        """Truncate in a worker thread (storage's truncate_to_async); a cancelled fetcher lets it finish."""
        self.truncating = asyncio.get_running_loop().create_task(plog.truncate_to_async(offset))
        await asyncio.shield(self.truncating)

    def _delay(self, tps: list[TopicPartition]) -> None:
        at = time.monotonic() + self.backoff_ms / 1000
        for tp in tps:
            if tp in self.partitions:
                self.partitions[tp] = at

    async def _handle(self, tp: TopicPartition, p: FetchResponse, epoch: int | None) -> None:
        s = self.manager.parts.get(tp)
        plog = self.manager.state.catalog.partition_log(*tp)
        if tp not in self.partitions or s is None or plog is None or s.leader_epoch != epoch or s.is_leader:
            return  # leadership moved while the fetch was out: its answer no longer applies
        if p.error_code == OFFSET_OUT_OF_RANGE:  # Kafka's handleOutOfRangeError
            if p.log_start_offset > plog.log_end_offset:
                log.info("%s-%d: behind the leader's log start %d, starting there", *tp, p.log_start_offset)
                plog.truncate_fully_and_start_at(p.log_start_offset)
            elif 0 <= p.high_watermark < plog.log_end_offset:
                log.info("%s-%d: past what leader %d can place, truncating %d -> its HW %d", *tp, self.source,
                         plog.log_end_offset, p.high_watermark)
                await self._truncate(plog, p.high_watermark)
            else:
                self._delay([tp])
            return
        if p.error_code:
            log.debug("%s-%d: fetch from %d: error %d", *tp, self.source, p.error_code)
            self._delay([tp])
            return
        diverging = p.diverging_epoch
        if diverging is not None and diverging.epoch >= 0 and diverging.end_offset >= 0:
            target = truncation_offset(plog, diverging.epoch, diverging.end_offset)
            if target < plog.log_end_offset:
                log.info("%s-%d: diverged from leader %d at epoch %d end %d: truncating %d -> %d", *tp,
                         self.source, diverging.epoch, diverging.end_offset, plog.log_end_offset, target)
                await self._truncate(plog, target)
            return
        records = p.records
        if records:
            throttle = self.manager.follower_throttled(*tp)
            result = plog.begin_append_as_follower(records)  # big writes on the log dir's writer thread
            if inspect.isawaitable(result):
                await asyncio.shield(result)
            if throttle:
                self.manager.follower_quota.record(len(records))
        set_high_watermark(plog, min(p.high_watermark, plog.log_end_offset))
        if p.log_start_offset > plog.log_start_offset:
            try:
                plog.delete_records_before(min(p.log_start_offset, plog.high_watermark))
            except Exception as exc:
                log.debug("%s-%d: log start %d not taken: %r", *tp, p.log_start_offset, exc)
